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


def dependency_graph(t: NodeTable, ctrl: bool) -> tuple[list[list[int]], np.ndarray, int]:
    """``(children, indeg, unknown)`` of node table ``t``: for every row, the rows that depend on it
    (ascending), how many distinct rows it depends on (its data deps, and its ctrl deps when ``ctrl``;
    a dependency on itself is dropped), and the number of (row, dependency) pairs naming no node.

    >>> from types import SimpleNamespace as NS
    >>> t = NS(id=np.array([10, 11, 12]), source="x", data_ptr=np.array([0, 0, 2, 4]),
    ...        data_deps=np.array([10, 10, 11, 99]), ctrl_ptr=np.array([0, 0, 0, 1]), ctrl_deps=np.array([10]))
    >>> children, indeg, unknown = dependency_graph(t, True)
    >>> children, indeg.tolist(), unknown
    ([[1, 2], [2], []], [0, 1, 2], 1)
    """
    ids = np.asarray(t.id, dtype=np.int64)
    n = ids.size
    order = np.argsort(ids, kind="stable")
    sid = ids[order]
    if n > 1 and (sid[1:] == sid[:-1]).any():
        raise InputError("node ids are not unique", source=t.source, field="id")
    kinds = [(t.data_ptr, t.data_deps)] + ([(t.ctrl_ptr, t.ctrl_deps)] if ctrl else [])
    rows = np.concatenate([np.repeat(np.arange(n), np.diff(np.asarray(p[:n + 1], dtype=np.int64)))
                           for p, _ in kinds])
    deps = np.concatenate([np.asarray(d[p[0]:p[n]], dtype=np.int64) for p, d in kinds])
    o = np.lexsort((deps, rows))  # distinct (row, dependency) pairs
    rows, deps = rows[o], deps[o]
    first = np.ones(rows.size, dtype=bool)
    first[1:] = (rows[1:] != rows[:-1]) | (deps[1:] != deps[:-1])
    rows, deps = rows[first], deps[first]
    pos = np.minimum(np.searchsorted(sid, deps), max(n - 1, 0))
    known = sid[pos] == deps if n else np.zeros(0, dtype=bool)
    parent = order[pos]
    keep = known & (parent != rows)
    rows, parent = rows[keep], parent[keep]
    o = np.lexsort((rows, parent))
    bounds = np.searchsorted(parent[o], np.arange(n + 1)).tolist()
    kids = rows[o].tolist()
    children = [kids[bounds[k]:bounds[k + 1]] for k in range(n)]
    return children, np.bincount(rows, minlength=n).astype(np.int64), int((~known).sum())


def check_acyclic(t: NodeTable, children: list[list[int]], indeg: np.ndarray) -> None:
    queue = deque(np.flatnonzero(indeg == 0).tolist())
    indeg = np.asarray(indeg).tolist()  # counted down one by one: Python ints
    seen = 0
    while queue:
        i = queue.popleft()
        seen += 1
        for c in children[i]:
            indeg[c] -= 1
            if indeg[c] == 0:
                queue.append(c)
    if seen < len(t):
        cyc = np.flatnonzero(np.asarray(indeg) > 0)[:5]
        raise InputError(f"dependency cycle among nodes {[int(t.id[c]) for c in cyc]}",
                         source=t.source, field="data_deps/ctrl_deps")
