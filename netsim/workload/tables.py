"""Checks and per-rank arrays of a workload run's inputs (:class:`~netsim.workload.runner.WorkloadRun`)."""

from __future__ import annotations

from collections import deque

import numpy as np

from netsim.chakra.model import NodeTable
from netsim.errors import InputError


def placement(placement, n: int, n_gpus: int) -> np.ndarray | None:
    """The GPU of every rank as an int64 array, or None for the identity (rank r on GPU r)."""
    if placement is None:
        return None
    gpus = np.asarray(placement, dtype=np.int64)
    if gpus.shape != (n,):
        raise ValueError(f"placement: expected {n} GPU ids (one per rank), got shape {gpus.shape}")
    if gpus.size and (gpus.min() < 0 or gpus.max() >= n_gpus or np.unique(gpus).size != n):
        raise ValueError(f"placement: expected distinct GPU ids in 0..{n_gpus - 1}")
    return None if np.array_equal(gpus, np.arange(n)) else gpus


def per_rank(values, default: float, n: int, name: str) -> np.ndarray:
    """A per-rank float array (``default`` everywhere when ``values`` is None)."""
    if values is None:
        return np.full(n, default)
    arr = np.asarray(values, dtype=np.float64)
    if arr.shape != (n,):
        raise ValueError(f"{name}: expected {n} per-rank values, got shape {arr.shape}")
    return arr


def check_acyclic(t: NodeTable, children: list[list[int]], indeg: np.ndarray) -> None:
    queue = deque(np.flatnonzero(indeg == 0).tolist())
    seen = 0
    while queue:
        i = queue.popleft()
        seen += 1
        for c in children[i]:
            indeg[c] -= 1
            if indeg[c] == 0:
                queue.append(c)
    if seen < len(t):
        cyc = np.flatnonzero(indeg > 0)[:5]
        raise InputError(f"dependency cycle among nodes {[int(t.id[c]) for c in cyc]}",
                         source=t.source, field="data_deps/ctrl_deps")
