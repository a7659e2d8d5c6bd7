"""NCCL's double binary tree all-reduce, pipelined.

**Trees** (NCCL ``src/graph/trees.cc``).  Across the ``k`` nodes, tree 0 is
NCCL's binary tree rooted at node 0: node *r* > 0 with lowest set bit *b*
has parent ``(r XOR b) | 2b``, or ``r XOR b`` when that is out of range; the
root has a single child.  Tree 1 is the mirror ``r -> k-1-r`` of tree 0 when
*k* is even (then every node that is interior in one tree is a leaf in the
other), and tree 0 shifted by one node (``r -> r+1 mod k``) when *k* is odd.
Both trees have the same shape, so the same height ``ceil(log2 k)``.

**Nodes** (NCCL's ``TREE`` pattern: intra-node chain, inter-node tree).  The
``g = local_size`` ranks of a node form a chain; its head talks to the parent
node's head and to the child nodes' heads.  Channel *c* starts its chain at
local rank ``c mod g`` (so channels use different GPUs/NICs, as NCCL's
channels do); both trees of a channel share the chain, as in NCCL.

**Data and pipeline.**  The buffer is split over ``2·channels`` trees and each
tree's share ``D = S/(2·channels)`` into ``chunks`` pieces of ``D/chunks``.
Heights *h* (0 at leaves) and depths *d* (0 at the root) are taken over the
whole rank-level tree; its root height is ``H = (g-1) + ceil(log2 k)``.
Piece *p* goes up (reduced) from *x* to its parent in step ``p + h(x)``, as
soon as *x* has it from all its children, and down (copied) from *y* to its
children in step ``p + H + d(y)``, once the root has it.  Ups and downs of
different pieces share steps, so every level is busy in the steady state.
All trees and channels run in the same steps; ``chunks + 2H - 1`` steps.

**Default chunks**: ``clamp(floor(D / 512 KiB), 1, 64)`` (pieces of at least 512 KiB,
unless the whole share is smaller, and at most 64).

**Closed form** with per-hop latency α and bandwidth B and no contention (every
transfer of a step takes ``α + piece/B``; the analytical network)::

    t = (chunks + 2H - 1) · (α + S / (2·channels·chunks·B)),   H = g - 1 + ceil(log2(n/g))

On a contended network a rank's concurrent transfers share its links (an
interior node sends one piece up and two down per step).

>>> s = tree_all_reduce(8, 2**20, chunks=4)
>>> s.n_steps
9
"""

from __future__ import annotations

import numpy as np

from netsim.collectives.compose import COPY, REDUCE, Flow, check_int, check_nodes, pipeline_chunks, traced
from netsim.collectives.schedule import Phase, Schedule, Step


def btree_parents(k: int) -> np.ndarray:
    """Parent of every node in NCCL's binary tree over ``k`` nodes (-1 at the root, node 0)."""
    r = np.arange(k, dtype=np.int64)
    bit = r & -r
    up = (r ^ bit) | (bit << 1)
    up = np.where(up >= k, r ^ bit, up)
    up[0] = -1
    return up


def dtree_parents(k: int) -> tuple[np.ndarray, np.ndarray]:
    """Parents in NCCL's two trees: the binary tree, and its mirror (even k) or shift (odd k)."""
    t0 = btree_parents(k)
    r = np.arange(k, dtype=np.int64)
    if k % 2:
        u = t0[(r - 1) % k]
        t1 = np.where(u < 0, -1, (u + 1) % k)
    else:
        u = t0[k - 1 - r]
        t1 = np.where(u < 0, -1, k - 1 - u)
    return t0, t1


def depths_heights(parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Depth (root 0) and height (leaves 0) of every vertex of a forest given by parents."""
    n = parent.size
    depth = np.zeros(n, dtype=np.int64)
    cur = parent.copy()
    while (cur >= 0).any():
        live = cur >= 0
        depth[live] += 1
        cur[live] = parent[cur[live]]
    height = np.zeros(n, dtype=np.int64)
    for d in range(int(depth.max(initial=0)), 0, -1):
        at = np.flatnonzero(depth == d)
        np.maximum.at(height, parent[at], height[at] + 1)
    return depth, height


def rank_tree(parent_nodes: np.ndarray, g: int, head: int) -> np.ndarray:
    """Rank-level parents: chain ``head, head+1, ...`` (mod g) inside each node, heads linked
    along the node tree."""
    k = parent_nodes.size
    order = (head + np.arange(g)) % g
    base = np.arange(k, dtype=np.int64)[:, None] * g
    par = np.empty((k, g), dtype=np.int64)
    par[:, 1:] = base + order[None, :-1]
    par[:, 0] = np.where(parent_nodes < 0, -1, parent_nodes * g + order[0])
    out = np.empty(k * g, dtype=np.int64)
    out[(base + order[None, :]).ravel()] = par.ravel()
    return out


def tree_edges(n: int, local_size: int, channels: int):
    """All edges of the ``2·channels`` rank-level trees.

    Returns ``(child, parent, up_start, down_start, region, H)``: ``region = 2·channel + tree``,
    ``up_start = h(child)``, ``down_start = H + d(child) - 1`` (the parent's send step).
    """
    g, k = local_size, n // local_size
    node_par = dtree_parents(k)
    cols = [[] for _ in range(5)]
    H = 0
    for c in range(channels):
        for t in (0, 1):
            par = rank_tree(node_par[t], g, c % g)
            depth, height = depths_heights(par)
            Ht = int(height.max(initial=0))
            H = max(H, Ht)
            x = np.flatnonzero(par >= 0)
            for col, v in zip(cols, (x, par[x], height[x], Ht + depth[x] - 1, np.full(x.size, 2 * c + t))):
                col.append(v)
    child, parent, up, down, region = (np.concatenate(c).astype(np.int64) for c in cols)
    return child, parent, up, down, region, H


def tree_all_reduce(n: int, nbytes: float, *, local_size: int = 1, chunks: int | None = None,
                    channels: int = 1) -> Schedule:
    """Pipelined double-binary-tree all-reduce of an ``nbytes`` buffer per rank (see module doc)."""
    n = check_int(n, "n")
    k = check_nodes(n, local_size)
    g = n // k
    channels = check_int(channels, "channels")
    S = float(nbytes)
    if n < 2:
        return Schedule("all_reduce", "tree", n, S, ())
    D = S / (2 * channels)
    c = pipeline_chunks(D) if chunks is None else check_int(chunks, "chunks")
    child, parent, up0, down0, region, _ = tree_edges(n, g, channels)
    E = child.size
    # every edge is used twice: up (child -> parent, reduce) and down (parent -> child, copy);
    # sorted by first step, the transfers active in step s (start <= s < start + c) are a slice
    start = np.concatenate([up0, down0])
    order = np.argsort(start, kind="stable")
    start = start[order]
    src = np.concatenate([child, parent])[order]
    dst = np.concatenate([parent, child])[order]
    kind = np.concatenate([np.full(E, REDUCE), np.full(E, COPY)])[order]
    key = np.concatenate([region, region])[order]  # the tree's data region, also its ECMP key
    nb = np.full(2 * E, D / c)
    bounds = np.unique(np.concatenate([start, start + c]))
    phases, fns = [], []
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        a, b = np.searchsorted(start, [lo - c, lo], side="right").tolist()
        # a connected tree leaves no gap: some edge is active in every step
        st = Step(src[a:b], dst[a:b], nb[a:b], reduce=bool(kind[a:b].any()), key=key[a:b])
        phases.append(Phase(st, hi - lo))

        def fl(rep, a=a, b=b, lo=lo):
            return np.arange(b - a), key[a:b] * c + (lo + rep - start[a:b]), kind[a:b]
        fns.append(fl)
    sched = Schedule("all_reduce", "tree", n, S, tuple(phases))
    return traced(sched, lambda: Flow(2 * channels * c, tuple(fns)))


def tree_height(n: int, local_size: int = 1) -> int:
    """``H`` of the closed form: ``local_size - 1 + ceil(log2(n / local_size))``."""
    k = n // local_size
    return local_size - 1 + (int(np.ceil(np.log2(k))) if k > 1 else 0)
