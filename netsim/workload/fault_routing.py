"""Routing around failed links and switches (``--faults``: see :mod:`netsim.workload.faults`).

:class:`FaultRouter` keeps the topology's routes except for pairs that cross a failed link.
"""

from __future__ import annotations

import numpy as np

from netsim.errors import InputError
from netsim.topology.model import Topology, csr_gather, mix_hash


#: Hop counts the router keeps (int32 each, 64 MiB): every source's distances on topologies of up
#: to thousands of nodes, so re-routed flows cost one breadth-first search per source GPU.
DIST_CACHE_ENTRIES = 1 << 24
#: Re-routed paths the router remembers by (pair, key) (a few hundred bytes each).
MAX_DETOURS = 1 << 18


class FaultRouter:
    """The topology's routes, except that pairs crossing a failed link are re-routed.

    First the base router's other ECMP choices (the flow key re-hashed, up to ``tries``
    times; hashed over the same paths when the base routes by destination, ``ftree``), which
    keeps its routing discipline (up/down, PXN); then a shortest path over
    the surviving links (breadth-first; may forward through GPUs, as on an NVLink mesh).
    Deterministic.  Construction checks that the job's ranks (on GPUs ``gpus``, default the
    first ``n_ranks``) still reach each other.
    """

    def __init__(self, topo: Topology, failed: np.ndarray, n_ranks: int, tries: int = 16,
                 gpus: np.ndarray | None = None):
        self.base, self.failed, self.gpus, self.tries = topo.router, failed, topo.gpus, tries
        # the other equal-cost choices to try: a destination-routed (ftree) base has one per
        # destination, so detours hash over the base's paths as ECMP does
        self._detour = self.base.with_policy("ecmp") if getattr(self.base, "policy", None) == "ftree" else self.base
        self._job = np.arange(n_ranks, dtype=np.int64) if gpus is None else np.asarray(gpus, dtype=np.int64)
        self.link_src, self.link_dst = topo.link_src.astype(np.int64), topo.link_dst.astype(np.int64)
        alive = np.flatnonzero(~failed)
        self._out = _adjacency(self.link_src[alive], alive, topo.n_nodes)
        self._in = _adjacency(self.link_dst[alive], alive, topo.n_nodes)
        self._dist: dict[tuple[int, bool], np.ndarray] = {}  # BFS hop counts by (node, forward)
        self._cache_size = max(64, DIST_CACHE_ENTRIES // max(1, topo.n_nodes))
        self._detours: dict[tuple[int, int, int], np.ndarray] = {}  # re-routed path by (src, dst, key)
        self._check(n_ranks)

    def routes(self, src: np.ndarray, dst: np.ndarray, key: np.ndarray | None = None):
        """See :meth:`netsim.topology.model.Router.routes`."""
        ip, lk = self.base.routes(src, dst, key)
        rows = np.flatnonzero(_crosses(ip, lk, self.failed))
        if not rows.size:
            return ip, lk
        k0 = np.zeros(src.size, dtype=np.int64) if key is None else np.asarray(key, dtype=np.int64)
        pieces, rows = self._remembered(rows, src, dst, k0)
        if not rows.size:
            return _replace_rows(ip, lk, pieces)
        found = len(pieces)
        for t in range(1, self.tries + 1):
            salt = (mix_hash(k0[rows], np.int64(t), np.int64(0xFA17)) >> np.uint64(2)).astype(np.int64)
            ip2, lk2 = self._detour.routes(src[rows], dst[rows], salt)
            ok = ~_crosses(ip2, lk2, self.failed)
            if ok.any():
                pieces.append((rows[ok], *csr_gather(ip2, lk2, np.flatnonzero(ok))))
            rows = rows[~ok]
            if not rows.size:
                break
        if rows.size:
            pieces.append((rows, *self._shortest(src[rows], dst[rows], k0[rows])))
        self._remember(pieces[found:], src, dst, k0)
        return _replace_rows(ip, lk, pieces)

    def _remembered(self, rows: np.ndarray, src, dst, k0) -> tuple[list, np.ndarray]:
        """(a piece of the ``rows`` re-routed before, the rows not seen yet): a re-route depends on
        the pair and its key only, and a collective repeats its (pair, key)s step after step."""
        paths = [self._detours.get(t) for t in zip(src[rows].tolist(), dst[rows].tolist(), k0[rows].tolist())]
        seen = np.fromiter((p is not None for p in paths), bool, len(paths))
        if not seen.any():
            return [], rows
        hits = [p for p in paths if p is not None]
        indptr = np.concatenate(([0], np.cumsum([p.size for p in hits]))).astype(np.int64)
        return [(rows[seen], indptr, np.concatenate(hits))], rows[~seen]

    def _remember(self, pieces: list, src, dst, k0) -> None:
        for rows, ip, lk in pieces:
            for i, (s, d, k) in enumerate(zip(src[rows].tolist(), dst[rows].tolist(), k0[rows].tolist())):
                if len(self._detours) >= MAX_DETOURS:
                    self._detours.pop(next(iter(self._detours)))
                self._detours[(s, d, k)] = lk[ip[i]:ip[i + 1]].copy()

    def _bfs(self, node: int, forward: bool = True) -> np.ndarray:
        """Hops from ``node`` to every node (to it when not ``forward``) over surviving links; -1 if none."""
        dist = self._dist.get((node, forward))
        if dist is None:
            (ptr, links), ends = (self._out, self.link_dst) if forward else (self._in, self.link_src)
            dist = np.full(ptr.size - 1, -1, dtype=np.int32)
            dist[node], frontier, level = 0, np.array([node]), 0
            while frontier.size:
                nxt = ends[csr_gather(ptr, links, frontier)[1]]
                frontier, level = np.unique(nxt[dist[nxt] < 0]), level + 1
                dist[frontier] = level
            if len(self._dist) >= self._cache_size:
                self._dist.pop(next(iter(self._dist)))
            self._dist[(node, forward)] = dist
        return dist

    def _shortest(self, src, dst, key):
        """A shortest surviving path per pair: walked back from the destination, each hop a hashed
        choice among the shortest-path predecessors (the hash of the pair, its key and the hop).
        Vectorized over the pairs of a batch of source GPUs whose hop counts fit in the cache."""
        a = self.gpus[src].astype(np.int64)
        sources, which = np.unique(a, return_inverse=True)
        length = np.zeros(src.size, dtype=np.int64)
        path = np.zeros((src.size, 0), dtype=np.int64)
        per_batch = max(1, self._cache_size // 2)
        for lo in range(0, sources.size, per_batch):
            rows = np.flatnonzero((which >= lo) & (which < lo + per_batch))
            dist = np.stack([self._bfs(int(s)) for s in sources[lo:lo + per_batch]])
            length[rows], links = self._walk(dist, which[rows] - lo, src[rows], dst[rows], key[rows])
            if links.shape[1] > path.shape[1]:
                path = np.pad(path, ((0, 0), (0, links.shape[1] - path.shape[1])))
            path[rows, :links.shape[1]] = links
        lost = np.flatnonzero(length < 0)
        if lost.size:
            pairs = [f"{s}->{d}" for s, d in zip(src[lost[:8]].tolist(), dst[lost[:8]].tolist())]
            raise InputError(f"failed links/switches leave no path for rank pairs {', '.join(pairs)}"
                             f"{' ...' if lost.size > 8 else ''}", source="--faults")
        return np.concatenate(([0], np.cumsum(length))), path[np.arange(path.shape[1]) < length[:, None]]

    def _walk(self, dist: np.ndarray, which: np.ndarray, src, dst, key) -> tuple[np.ndarray, np.ndarray]:
        """(hops, links padded per row) of every pair; ``dist[which[i]]``: hop counts from pair i's
        source GPU.  Hop ``h`` (from the destination) picks predecessor number
        ``mix_hash(src, dst, key, h) % count`` among the in-links on a shortest path."""
        v = self.gpus[dst].astype(np.int64)
        length = dist[which, v].astype(np.int64)
        path = np.zeros((v.size, int(length.max(initial=0))), dtype=np.int64)
        ptr, links = self._in
        cur, left, hop = v, length.copy(), 0
        s64, d64, k64 = (np.asarray(x, dtype=np.int64) for x in (src, dst, key))
        while (rows := np.flatnonzero(left > 0)).size:
            cptr, cand = csr_gather(ptr, links, cur[rows])
            owner = np.repeat(np.arange(rows.size), np.diff(cptr))
            ok = dist[which[rows][owner], self.link_src[cand]] == left[rows][owner] - 1
            count = np.bincount(owner[ok], minlength=rows.size)
            first = np.concatenate(([0], np.cumsum(count)[:-1]))
            h = mix_hash(s64[rows], d64[rows], k64[rows], np.int64(hop)) % count.astype(np.uint64)
            pick = cand[ok][first + h.astype(np.int64)]
            path[rows, left[rows] - 1] = pick
            cur[rows], left[rows], hop = self.link_src[pick], left[rows] - 1, hop + 1
        return length, path

    def _check(self, n_ranks: int) -> None:
        g = self.gpus[self._job[:n_ranks]].astype(np.int64)
        if g.size < 2:
            return
        out = np.flatnonzero(self._bfs(int(g[0]), True)[g] < 0)
        back = np.flatnonzero(self._bfs(int(g[0]), False)[g] < 0)
        if out.size or back.size:
            pairs = [f"0->{r}" for r in out[:6].tolist()] + [f"{r}->0" for r in back[:6].tolist()]
            cut = np.union1d(out, back)
            raise InputError(f"failed links/switches leave rank pairs without any path: {', '.join(pairs)}"
                             f"{' ...' if out.size + back.size > len(pairs) else ''} ({cut.size} of {g.size} ranks cannot reach "
                             f"or be reached from rank 0, e.g. {cut[:8].tolist()})", source="--faults")


def _adjacency(ends: np.ndarray, ids: np.ndarray, n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR of link ids by node (``ends[i]`` is the node of link ``ids[i]``)."""
    ptr = np.zeros(n_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(ends, minlength=n_nodes), out=ptr[1:])
    return ptr, ids[np.argsort(ends, kind="stable")]


def _crosses(indptr: np.ndarray, links: np.ndarray, failed: np.ndarray) -> np.ndarray:
    """Per path: whether it uses a failed link."""
    c = np.concatenate(([0], np.cumsum(failed[links], dtype=np.int64)))
    return (c[indptr[1:]] - c[indptr[:-1]]) > 0


def _replace_rows(ip: np.ndarray, lk: np.ndarray, pieces) -> tuple[np.ndarray, np.ndarray]:
    """CSR ``(ip, lk)`` with the rows of each ``(rows, ip, lk)`` piece replaced."""
    lengths, keep = np.diff(ip), np.ones(ip.size - 1, dtype=bool)
    for rows, pip, _ in pieces:
        lengths[rows], keep[rows] = np.diff(pip), False
    indptr = np.zeros(ip.size, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    out = np.empty(int(indptr[-1]), dtype=lk.dtype)
    krows = np.flatnonzero(keep)
    for rows, pip, plk in [(krows, *csr_gather(ip, lk, krows))] + list(pieces):
        counts = np.diff(pip)
        out[np.repeat(indptr[rows], counts) + np.arange(plk.size) - np.repeat(pip[:-1], counts)] = plk
    return indptr, out
