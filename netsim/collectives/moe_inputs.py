"""The inputs of a MoE layer's all-to-alls that users give as files or topology facts, read once for
``netsim bench --op moe_*`` (:mod:`netsim.perftests.moe`) and ``netsim run --moe-algo``
(:mod:`netsim.workload.moe_run`): integer arrays (expert maps, expert placements) and the node
size the schedules use."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from netsim.errors import InputError
from netsim.shipped import resolve
from netsim.topology.model import Topology


def load_ints(path: str, flag: str) -> np.ndarray:
    """An integer array from .npy or .csv (commas, ``#`` comments)."""
    p = Path(path)
    if not p.is_file():
        raise InputError("no such file (expected .npy or .csv)", source=str(path))
    try:
        if p.suffix.lower() == ".npy":
            a = np.load(p, allow_pickle=False)
        elif p.suffix.lower() in (".csv", ".txt"):
            a = np.loadtxt(p, delimiter=",", comments="#", ndmin=2, dtype=np.float64)
        else:
            raise InputError(f"expected a .npy or .csv file, got {p.suffix or 'no extension'!r}", source=str(path))
    except InputError:
        raise
    except (ValueError, OSError, EOFError) as exc:
        raise InputError(f"expected integers: {exc}", source=str(path)) from None
    if a.dtype.kind not in "biuf" or (a.dtype.kind == "f" and not np.all(np.isfinite(a) & (a == np.round(a)))):
        raise InputError(f"expected integers, got {a.dtype} values", source=str(path))
    return a.astype(np.int64)


def load_expert_map(path: str, n_tokens: int, topk: int, experts: int) -> np.ndarray:
    """``(n_tokens, topk)`` distinct logical expert ids per token from ``path``."""
    path = str(resolve(path, "expert map"))
    a = load_ints(path, "--expert-map")
    if a.shape != (n_tokens, topk):
        raise InputError(f"expected {n_tokens} rows (GPUs x --tokens) of --topk {topk} expert ids, "
                         f"got shape {a.shape}", source=str(path))
    bad = (a < 0) | (a >= experts)
    if bad.any():
        t, j = np.argwhere(bad)[0]
        raise InputError(f"expert {int(a[t, j])} does not exist (expected 0..{experts - 1})",
                         source=str(path), field=f"[{t}, {j}]")
    s = np.sort(a, axis=1)
    dup = np.flatnonzero((s[:, 1:] == s[:, :-1]).any(axis=1))
    if dup.size:
        raise InputError("expected distinct experts per token (top-k picks each once)",
                         source=str(path), field=f"[{int(dup[0])}]")
    return a


def moe_local_size(topo: Topology, ranks: np.ndarray, algo: str) -> tuple[int, str]:
    """(GPUs per node for the schedules, algorithm that runs).  A job inside one scale-up domain
    smaller than the domain (8 GPUs of an NVL72) is one node of its own size."""
    from netsim.collectives.plan import node_aligned

    g = max(1, topo.gpus_per_node)
    nodes = np.asarray(ranks, dtype=np.int64) // g
    if 0 < nodes.size < g and (nodes == nodes[0]).all():
        g = int(nodes.size)
    aligned = node_aligned(ranks, g)
    if algo == "auto":
        return (g, "node_limited") if aligned else (g, "direct")
    if algo in ("hierarchical", "node_limited") and not aligned:
        raise InputError(f"{algo} needs whole nodes: a multiple of the {g} GPUs per node, node-aligned",
                         source="--gpus")
    return g, algo
