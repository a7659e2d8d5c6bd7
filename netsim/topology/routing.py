"""Routing for small, irregular graphs: all shortest paths, ECMP by hash.

Fat-trees and ASTRA-sim multi-dimensional networks have structured routers
(computed from coordinates, :mod:`netsim.topology.fattree`,
:mod:`netsim.topology.multidim`).  Everything small and irregular (an NVLink
mesh without a switch, an NVSwitch domain) uses :class:`TableRouter`: the
shortest paths between every GPU pair are enumerated once (up to
``max_paths`` per pair) and a flow picks one by hashing (src, dst, key).
"""

from __future__ import annotations

from collections import deque

import numpy as np

from netsim.topology.model import csr_gather, mix_hash

#: Above this many GPUs a table of all pairs is too big; use a structured router.
MAX_TABLE_GPUS = 1024


class TableRouter:
    """Precomputed all-pairs shortest paths over a directed link list.

    Parameters
    ----------
    n_nodes, link_src, link_dst
        The graph.
    gpus
        Node id of each rank.
    max_paths
        At most this many equal-cost paths are kept per pair (ECMP fan-out).

    Raises
    ------
    ValueError
        If some GPU cannot reach another (the message names the pair).
    """

    def __init__(self, n_nodes: int, link_src: np.ndarray, link_dst: np.ndarray,
                 gpus: np.ndarray, max_paths: int = 8):
        g = int(gpus.size)
        if g > MAX_TABLE_GPUS:
            raise ValueError(f"TableRouter handles at most {MAX_TABLE_GPUS} GPUs, got {g}")
        out_links: list[list[int]] = [[] for _ in range(n_nodes)]
        in_links: list[list[int]] = [[] for _ in range(n_nodes)]
        for i, (s, d) in enumerate(zip(link_src.tolist(), link_dst.tolist())):
            out_links[s].append(i)
            in_links[d].append(i)
        self.n_gpus = g
        paths: list[list[int]] = [[]]  # path 0 is the empty path (src == dst)
        start = np.zeros(g * g, dtype=np.int64)
        count = np.ones(g * g, dtype=np.int64)
        gpu_nodes = gpus.tolist()
        for si, s in enumerate(gpu_nodes):
            dist = _bfs(s, n_nodes, out_links, link_dst)
            for di, d in enumerate(gpu_nodes):
                if si == di:
                    continue
                if dist[d] < 0:
                    raise ValueError(f"GPU rank {di} is unreachable from rank {si}")
                found = _shortest_paths(d, dist, in_links, link_src, max_paths)
                start[si * g + di] = len(paths)
                count[si * g + di] = len(found)
                paths.extend(found)
        self._start, self._count = start, count
        #: one path per pair: routes never depend on the key (see Router.routes)
        self.keyless = bool((count <= 1).all())
        lengths = np.array([len(p) for p in paths], dtype=np.int64)
        self._indptr = np.concatenate(([0], np.cumsum(lengths)))
        self._links = np.array([lk for p in paths for lk in p], dtype=np.int64)

    def nbytes(self) -> int:
        """Memory held by the tables."""
        return int(self._start.nbytes + self._count.nbytes + self._indptr.nbytes + self._links.nbytes)

    def path_choices(self, src: int, dst: int) -> int:
        """How many equal-cost paths connect ``src`` to ``dst``."""
        return 0 if src == dst else int(self._count[src * self.n_gpus + dst])

    def routes(self, src: np.ndarray, dst: np.ndarray, key: np.ndarray | None = None):
        """See :meth:`netsim.topology.model.Router.routes`."""
        pair = src * self.n_gpus + dst
        salt = key if key is not None else np.zeros_like(src)
        pick = (mix_hash(src, dst, salt) % self._count[pair].astype(np.uint64)).astype(np.int64)
        path = np.where(src == dst, 0, self._start[pair] + pick)
        return csr_gather(self._indptr, self._links, path)


def _bfs(src: int, n_nodes: int, out_links: list[list[int]], link_dst: np.ndarray) -> list[int]:
    """Hop distance from ``src`` to every node (-1 when unreachable)."""
    dist = [-1] * n_nodes
    dist[src] = 0
    queue = deque([src])
    dst_list = link_dst
    while queue:
        u = queue.popleft()
        for lk in out_links[u]:
            v = int(dst_list[lk])
            if dist[v] < 0:
                dist[v] = dist[u] + 1
                queue.append(v)
    return dist


def _shortest_paths(dst: int, dist: list[int], in_links: list[list[int]],
                    link_src: np.ndarray, max_paths: int) -> list[list[int]]:
    """Up to ``max_paths`` shortest paths ending at ``dst`` (lists of link ids), in a stable order."""
    found: list[list[int]] = []
    stack: list[tuple[int, list[int]]] = [(dst, [])]
    while stack and len(found) < max_paths:
        node, suffix = stack.pop()
        if dist[node] == 0:
            found.append(suffix)
            continue
        preds = [lk for lk in in_links[node] if dist[int(link_src[lk])] == dist[node] - 1]
        for lk in sorted(preds, reverse=True):
            stack.append((int(link_src[lk]), [lk] + suffix))
    return found
