"""Ring all-reduce, all-gather and reduce-scatter (NCCL semantics).

Rank *i* sends to rank *i+1* (mod n).  All-reduce is a reduce-scatter of
``n-1`` steps followed by an all-gather of ``n-1`` steps (2(n-1) in all);
each step moves ``S/n`` bytes per rank, S being nccl-tests' size.  ``channels``
splits every step over that many parallel rings (NCCL channels); each channel
is its own flow with its own ECMP key, so channels spread over equal-cost
paths like NCCL's multiple connections.

>>> s = ring_all_reduce(4, 4096)
>>> s.n_steps, s.bytes_sent().tolist()
(6, [6144.0, 6144.0, 6144.0, 6144.0])
"""

from __future__ import annotations

import numpy as np

from netsim.collectives.schedule import Phase, Schedule, Step


def ring_successors(n: int, channels: int = 1, local_size: int | None = None) -> np.ndarray:
    """``succ[c, r]``: the rank after ``r`` on channel ``c``'s ring.

    Without ``local_size`` every channel is the ring 0→1→…→n-1→0.  With it (ranks
    ``[k·g, (k+1)·g)`` on node k, several nodes), channel c enters every node at local
    rank ``c mod g``, visits the node's GPUs in order and leaves from local rank ``c-1``
    for local rank ``c`` of the next node — NCCL's rail-aligned rings: channel c's
    inter-node hops all use NIC (rail) ``c mod g`` (reached over NVLink via PXN), so the
    channels spread over every NIC of a node instead of funnelling through one.

    >>> ring_successors(4, 2, local_size=2).tolist()
    [[1, 2, 3, 0], [3, 0, 1, 2]]
    """
    ranks = np.arange(n, dtype=np.int64)
    g = local_size or n
    if g >= n or n % g:
        return np.tile((ranks + 1) % n, (channels, 1))
    node, local = ranks // g, ranks % g
    out = np.empty((channels, n), dtype=np.int64)
    for c in range(channels):
        entry = c % g
        last = (entry - 1) % g
        out[c] = np.where(local == last, ((node + 1) % (n // g)) * g + entry, node * g + (local + 1) % g)
    return out


def ring_step(n: int, nbytes: float, channels: int = 1, *, overhead_s: float = 0.0,
              reduce: bool = False, local_size: int | None = None) -> Step:
    """One ring step: every rank sends ``nbytes`` to its successor, split over ``channels``."""
    src = np.tile(np.arange(n, dtype=np.int64), channels)
    dst = ring_successors(n, channels, local_size).ravel()
    key = np.repeat(np.arange(channels, dtype=np.int64), n)
    return Step(src, dst, np.full(src.size, nbytes / channels), overhead_s=overhead_s, reduce=reduce, key=key)


def _ring(op: str, n: int, nbytes: float, phases_spec, channels: int, local_size: int | None) -> Schedule:
    if n < 2:
        return Schedule(op, "ring", n, nbytes, ())
    chunk = nbytes / n
    phases = tuple(Phase(ring_step(n, chunk, channels, reduce=red, local_size=local_size), n - 1)
                   for red in phases_spec)
    return Schedule(op, "ring", n, nbytes, phases)


def ring_all_reduce(n: int, nbytes: float, channels: int = 1, local_size: int | None = None) -> Schedule:
    """Ring all-reduce of an ``nbytes`` buffer per rank: 2(n-1) steps of nbytes/n."""
    return _ring("all_reduce", n, nbytes, (True, False), channels, local_size)


def ring_all_gather(n: int, nbytes: float, channels: int = 1, local_size: int | None = None) -> Schedule:
    """Ring all-gather; ``nbytes`` is the total gathered size (nccl-tests S): n-1 steps of S/n."""
    return _ring("all_gather", n, nbytes, (False,), channels, local_size)


def ring_reduce_scatter(n: int, nbytes: float, channels: int = 1, local_size: int | None = None) -> Schedule:
    """Ring reduce-scatter; ``nbytes`` is the total send size (nccl-tests S): n-1 steps of S/n."""
    return _ring("reduce_scatter", n, nbytes, (True,), channels, local_size)
