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


def ring_step(n: int, nbytes: float, channels: int = 1, *, overhead_s: float = 0.0,
              reduce: bool = False) -> Step:
    """One ring step: every rank sends ``nbytes`` to its successor, split over ``channels``."""
    src = np.tile(np.arange(n, dtype=np.int64), channels)
    dst = (src + 1) % n
    key = np.repeat(np.arange(channels, dtype=np.int64), n)
    return Step(src, dst, np.full(src.size, nbytes / channels), overhead_s=overhead_s, reduce=reduce, key=key)


def _ring(op: str, n: int, nbytes: float, phases_spec, channels: int) -> Schedule:
    if n < 2:
        return Schedule(op, "ring", n, nbytes, ())
    chunk = nbytes / n
    phases = tuple(Phase(ring_step(n, chunk, channels, reduce=red), n - 1) for red in phases_spec)
    return Schedule(op, "ring", n, nbytes, phases)


def ring_all_reduce(n: int, nbytes: float, channels: int = 1) -> Schedule:
    """Ring all-reduce of an ``nbytes`` buffer per rank: 2(n-1) steps of nbytes/n."""
    return _ring("all_reduce", n, nbytes, (True, False), channels)


def ring_all_gather(n: int, nbytes: float, channels: int = 1) -> Schedule:
    """Ring all-gather; ``nbytes`` is the total gathered size (nccl-tests S): n-1 steps of S/n."""
    return _ring("all_gather", n, nbytes, (False,), channels)


def ring_reduce_scatter(n: int, nbytes: float, channels: int = 1) -> Schedule:
    """Ring reduce-scatter; ``nbytes`` is the total send size (nccl-tests S): n-1 steps of S/n."""
    return _ring("reduce_scatter", n, nbytes, (True,), channels)
