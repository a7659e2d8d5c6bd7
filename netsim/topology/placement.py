"""Job placement: which GPU of the topology each rank of a job runs on.

A job rarely gets the first N GPUs of a cluster.  A placement maps job rank ``r`` to
topology GPU ``gpus[r]`` (distinct GPU ids); collectives and workloads then run on those
GPUs, in job-rank order (NCCL builds rings across nodes in rank order).

Specs (``--placement`` on ``netsim bench`` and ``netsim run``, ``placement`` in sweeps):

``packed``
    rank *r* on GPU *r* (the default; whole nodes, in order).
``random`` or ``random:SEED``
    N distinct GPUs drawn uniformly from the whole topology, in random order
    (``numpy.random.default_rng(SEED)``, seed 0 by default): a fragmented allocation
    where ranks land on arbitrary nodes and rails.
``strided:K``
    rank *r* on GPU *r·K*: every K-th GPU (with K = GPUs per node, one GPU per node,
    all on rail 0).
``FILE``
    a text file with one GPU id per rank (whitespace- or comma-separated; ``#`` starts a
    comment), or a ``.npy`` integer array.

>>> place("strided:2", 3, 8).tolist()
[0, 2, 4]
>>> sorted(place("random:1", 4, 8).tolist()) == sorted(set(place("random:1", 4, 8).tolist()))
True
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from netsim import inputs
from netsim.errors import InputError
from netsim.limits import MAX_GPUS

__all__ = ["place", "is_packed"]



def place(spec: str | None, n: int | None, n_gpus: int, *, source: str = "--placement") -> np.ndarray:
    """GPU id of every rank (int64, length ``n``; ``n=None``: as many as a FILE lists, else all).

    Raises :class:`~netsim.errors.InputError` for an unknown spec, a bad seed or stride,
    a file naming a GPU twice or out of range, or a count that does not match ``n``.
    """
    spec = "packed" if spec is None else str(spec).strip()
    kind, _, arg = spec.partition(":")
    if kind in ("packed", "random", "strided"):
        n = n_gpus if n is None else n
        if not 1 <= n <= n_gpus:
            raise InputError(f"expected 1..{n_gpus} ranks (the topology's GPUs), got {n}", source=source)
    if kind == "packed" and not arg:
        return np.arange(n, dtype=np.int64)
    if kind == "random":
        seed = _int(arg, "a seed (random:SEED, SEED in 0..2**63-1)", source, spec, default=0, low=0)
        return np.random.default_rng(seed).choice(n_gpus, size=n, replace=False).astype(np.int64)
    if kind == "strided":
        k = _int(arg, "a stride (strided:K, K >= 1, ASCII digits)", source, spec, default=None, low=1)
        if (n - 1) * k >= n_gpus:
            raise InputError(f"strided:{k} puts rank {n - 1} on GPU {(n - 1) * k}, beyond the topology's "
                             f"{n_gpus} GPUs", source=source)
        return np.arange(n, dtype=np.int64) * k
    path = Path(spec)
    if not path.is_file():
        raise InputError(f"expected packed, random[:SEED], strided:K or a file of GPU ids, got {spec!r}",
                         source=source)
    gpus = _read(path)
    where = str(path)
    if gpus.size == 0:
        raise InputError("expected one GPU id per rank, found none", source=where)
    if n is not None and gpus.size != n:
        raise InputError(f"expected {n} GPU ids (one per rank), found {gpus.size}", source=where)
    bad = np.flatnonzero((gpus < 0) | (gpus >= n_gpus))
    if bad.size:
        raise InputError(f"rank {bad[0]}: GPU {gpus[bad[0]]} is outside the topology's 0..{n_gpus - 1}",
                         source=where)
    uniq, first, counts = np.unique(gpus, return_index=True, return_counts=True)
    if (counts > 1).any():
        g = int(uniq[counts > 1][0])
        ranks = np.flatnonzero(gpus == g)[:2].tolist()
        raise InputError(f"GPU {g} is given to ranks {ranks[0]} and {ranks[1]}; each GPU runs one rank",
                         source=where)
    return gpus


def is_packed(gpus: np.ndarray) -> bool:
    """Whether a placement is the identity (rank r on GPU r)."""
    return bool(np.array_equal(gpus, np.arange(gpus.size)))


def _int(text: str, what: str, source: str, spec: str, *, default, low: int) -> int:
    """The number after ``kind:`` (ASCII digits, ``low``..2**63-1); ``default`` when there is no ``:``."""
    if not text and (default is None or spec.endswith(":")):  # "random:" names no seed
        raise InputError(f"expected {what}, got {spec!r}", source=source)
    if not text:
        return default
    try:
        return inputs.int_text(text, source, lo=low, hi=inputs.INT64[1])
    except InputError:
        raise InputError(f"expected {what}, got {spec!r}", source=source) from None


def _read(path: Path) -> np.ndarray:
    """Integers from a .npy file or a text file (whitespace/commas, # comments)."""
    where = str(path)
    if path.suffix == ".npy":
        try:
            arr = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise InputError(f"expected a .npy integer array ({exc})", source=where) from None
        if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
            raise InputError(f"expected a 1-D integer array, got shape {arr.shape} of {arr.dtype}", source=where)
        return arr.astype(np.int64)
    text = inputs.read_text(path, 64 << 20, "placement file of GPU ids")
    out = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        for tok in line.split("#", 1)[0].replace(",", " ").split():
            out.append(inputs.int_text(tok, where, f"line {lineno}", lo=0, hi=MAX_GPUS - 1, what="integer GPU ids"))
    return np.array(out, dtype=np.int64)
