"""Who the stuck ranks of a deadlocked run wait for, and the wait cycle that keeps them stuck.

Once the event queue is empty, every node a stuck rank has not started is held up, through its
dependencies or a busy lane, by nodes that wait: in a collective (for its members that have not
issued it) or a receive (for its sender).  For each such wait, a rank it waits for either

* finished, or holds no such operation among its nodes still to run: it *never* issues it (a
  genuinely missing operation, :meth:`Waits.later` is None), or
* holds it among its nodes still to run (:meth:`Waits.later`: that node), behind waits of its own
  (:meth:`Waits.blockers`).

Following "waits for a rank that issues it later, behind its own wait" from wait to wait must
come back to a wait already seen when no operation is missing: :meth:`Waits.cycle` finds that
cycle (rank -> operation -> rank ...), which the deadlock report prints
(:mod:`netsim.workload.deadlock`).  Crossed communicators (rank 0 in group 1 then 2, rank 1 in
group 2 then 1) and a receive/send cycle (each rank receives before it sends) are such cycles.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from netsim.chakra.model import MISSING
from netsim.chakra.schema import NodeType
from netsim.workload.streams import COMM

#: Most nodes walked back from one node to the waits that hold it up (then every wait of the rank counts).
MAX_WALK = 200_000


@dataclass(frozen=True)
class Hop:
    """One step of a wait cycle: ``rank``'s node ``row`` waits (``kind``, ``key`` as the runner
    keeps them) for ``target``, which issues that operation later as its node ``target_row``."""

    rank: int
    row: int
    kind: str
    key: tuple
    target: int
    target_row: int


class Waits:
    """The waits of a finished (deadlocked) :class:`~netsim.workload.runner.WorkloadRun`."""

    def __init__(self, run):
        self.run = run
        self.by_rank = {st.rank: st for st in run.ranks}
        self._pending: dict[int, np.ndarray] = {}
        self._colls: dict[int, dict] = {}
        self._sends: dict[int, dict] = {}
        self._parents: dict[int, list] = {}

    # ------------------------------------------------------------ what is still to run
    def pending(self, rank: int) -> np.ndarray:
        """Rows of ``rank`` not started yet (dependencies not done, or ready behind a busy lane)."""
        if rank not in self._pending:
            st = self.by_rank[rank]
            queued = [row for q in st.queues for row in q]
            rows = np.union1d(np.flatnonzero(np.asarray(st.indeg) > 0), np.asarray(queued, dtype=np.int64))
            self._pending[rank] = rows.astype(np.int64)
        return self._pending[rank]

    def _pending_ops(self, rank: int) -> tuple[dict, dict]:
        """({communicator: collective rows}, {(dst, tag): send rows}) of the rows still to run, in row order."""
        if rank not in self._colls:
            st = self.by_rank[rank]
            t, colls, sends = st.table, {}, {}
            for i in self.pending(rank).tolist():
                typ = int(t.type[i])
                if typ == NodeType.COMM_COLL_NODE and int(st.lane_of[i]) >= COMM:  # as the runner issues it
                    pg = int(t.pg[i])
                    comm = self.run.groups.identity(t.pg_names[pg] if pg >= 0 else None)
                    colls.setdefault(comm, []).append(i)
                elif typ == NodeType.COMM_SEND_NODE:
                    tag = int(t.comm_tag[i])
                    sends.setdefault((int(t.comm_dst[i]), 0 if tag == MISSING else tag), []).append(i)
            self._colls[rank], self._sends[rank] = colls, sends
        return self._colls[rank], self._sends[rank]

    def later(self, kind: str, key: tuple, waiter: int, target: int) -> int | None:
        """The row of ``target`` that will issue what ``waiter`` waits for (``kind`` "collective":
        ``key`` = (communicator, seq); "recv": (src, dst, tag)), or None if it never will."""
        st = self.by_rank.get(target)
        if st is None or st.done == len(st.table):
            return None
        colls, sends = self._pending_ops(target)
        if kind == "collective":
            comm, seq = key
            rows = colls.get(comm, [])
            k = seq - st.coll_seq[comm]
            return rows[k] if 0 <= k < len(rows) else None
        if kind == "recv":
            rows = sends.get((waiter, key[2]), [])
            return rows[0] if rows else None
        return None

    def targets(self, rank: int, row: int) -> list[int]:
        """The ranks the wait of ``rank``'s node ``row`` waits for."""
        kind, key = self.by_rank[rank].waiting[row]
        if kind == "collective":
            inst = self.run.colls.items[key]
            return sorted(set(inst["members"]) - inst["arrived"])
        return [key[0]] if kind == "recv" else []

    # ------------------------------------------------------------ what holds a node up
    def _parents_of(self, rank: int) -> list:
        """Dependencies of every node of ``rank`` (shared by ranks that share a graph)."""
        children = self.by_rank[rank].children
        if id(children) not in self._parents:
            parents: list[list[int]] = [[] for _ in range(len(children))]
            for i, kids in enumerate(children):
                for c in kids:
                    parents[c].append(i)
            self._parents[id(children)] = parents
        return self._parents[id(children)]

    def blockers(self, rank: int, row: int) -> list[int]:
        """The waiting rows of ``rank`` that hold its not-started node ``row`` up: reached through its
        dependencies, or occupying the lane it is queued for."""
        st = self.by_rank[rank]
        waits = {r for r, (kind, _key) in st.waiting.items() if kind in ("collective", "recv")}
        pending = set(self.pending(rank).tolist())
        parents = self._parents_of(rank)
        found, seen, todo = set(), {row}, deque([row])
        while todo and len(seen) <= MAX_WALK:
            x = todo.popleft()
            if int(st.indeg[x]) == 0:  # ready, queued behind the nodes in flight on its lane
                found |= {r for r in waits if int(st.lane_of[r]) == int(st.lane_of[x])}
            for p in parents[x]:
                if p in waits:
                    found.add(p)
                elif p in pending and p not in seen:
                    seen.add(p)
                    todo.append(p)
        if todo or not found:  # walked too far, or nothing found: every wait of the rank may hold it
            found = waits
        return sorted(found)

    # ------------------------------------------------------------ the cycle
    def _edges(self, rank: int, row: int):
        """(hop, next wait) out of ``rank``'s wait ``row``: each rank it waits for that issues the
        operation later, and each wait of that rank holding that operation up."""
        kind, key = self.by_rank[rank].waiting[row]
        for target in self.targets(rank, row):
            j = self.later(kind, key, rank, target)
            if j is not None:
                hop = Hop(rank, row, kind, key, target, j)
                for b in self.blockers(target, j):
                    yield hop, (target, b)

    def cycle(self) -> list[Hop] | None:
        """A cycle of waits, each waiting for a rank that issues the operation only after the next
        wait ends (depth-first over the waits, in rank and row order); None if there is none."""
        starts = [(st.rank, row) for st in self.run.ranks for row, (kind, _key) in sorted(st.waiting.items())
                  if kind in ("collective", "recv")]
        state: dict[tuple, int] = {}  # 1: on the current path, 2: explored
        for start in starts:
            if start in state:
                continue
            state[start] = 1
            stack, path, depth = [(start, self._edges(*start))], [], {start: 0}  # path[k]: stack[k] -> stack[k+1]
            while stack:
                node, edges = stack[-1]
                edge = next(edges, None)
                if edge is None:
                    stack.pop()
                    state[node] = 2
                    del depth[node]
                    if path:
                        path.pop()
                    continue
                hop, nxt = edge
                if state.get(nxt) == 1:  # back on the path: the cycle runs from nxt round to it
                    return path[depth[nxt]:] + [hop]
                if nxt not in state:
                    state[nxt] = 1
                    depth[nxt] = len(stack)
                    path.append(hop)
                    stack.append((nxt, self._edges(*nxt)))
        return None
