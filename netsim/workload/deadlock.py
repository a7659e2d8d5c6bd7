"""What a finished workload simulation left unmatched, and the deadlock report that names it.

A run is deadlocked when, once the event queue is empty, any of these holds:

* a rank has nodes not done (it waits for a collective, a receive, or a lane);
* a collective instance was not issued by every member of its communicator (on some
  schedules the event-driven executor lets the members that did arrive finish, so this is
  checked on its own: the verdict never depends on the model or the engine);
* a message was sent and never received (NCCL would hang; netsim's sends are eager).

:class:`Unmatched` collects them from a :class:`~netsim.workload.runner.WorkloadRun`;
:meth:`Unmatched.check` raises :class:`~netsim.errors.DeadlockError`.  The report's first
line names the most likely cause (a member that finished without issuing the collective,
a receive whose sender finished without sending, a send nobody receives, a member or sender
that holds no such operation among its nodes still to run, or else the wait cycle: rank ->
operation -> rank ..., each rank issuing what the previous one waits for only behind a wait of
its own, :mod:`netsim.workload.waits`), then one line per stuck rank.
"""

from __future__ import annotations

import numpy as np

from netsim.errors import DeadlockError
from netsim.chakra.schema import CommType
from netsim.workload.waits import Hop, Waits

#: Stuck ranks listed one per line in the report (the rest are counted).
MAX_RANKS = 16
#: Hops of a wait cycle printed in full (a longer cycle shows its first and last ones).
MAX_HOPS = 6


def _ranks(ranks) -> str:
    ranks = sorted(ranks)
    return f"{ranks[:8]}{'...' if len(ranks) > 8 else ''}"


def _comm(comm, members) -> str:
    name = "the world" if comm == "" else f"group {comm!r}" if isinstance(comm, str) else "group"
    return f"{name} {_ranks(members)}"


class Unmatched:
    """The unfinished ranks, incomplete collectives and unreceived sends of one simulated run."""

    def __init__(self, run):
        self.run = run
        self.by_rank = {st.rank: st for st in run.ranks}
        self.stuck = [st for st in run.ranks if st.done < len(st.table)]
        self.stuck_ids = {st.rank for st in self.stuck}
        self.open = [(key, inst) for key, inst in run.colls.items.items()
                     if len(inst["arrived"]) < len(inst["members"])]
        self.unreceived = [(key, sender) for key, queue in run.mail.items() for sender in queue]
        self.waits = Waits(run)

    def found(self) -> bool:
        """Whether the run is deadlocked."""
        return bool(self.stuck or self.open or self.unreceived)

    def certain(self) -> bool:
        """Whether the deadlock holds in every timing: a rank that finished all its nodes left a
        collective, a send or a receive unmatched.  How many collectives a rank issues per
        communicator, and how many messages per (src, dst, tag), does not depend on timing, so
        no re-run (event-driven or otherwise) can match them."""
        finished = {r for r, st in self.by_rank.items() if st.done == len(st.table)}
        if any((set(inst["members"]) - inst["arrived"]) & finished for _key, inst in self.open):
            return True
        if any(key[1] in finished for key, _sender in self.unreceived):
            return True
        return any(key[0] in finished for _st, _row, key in self._receives())

    def check(self) -> None:
        """Raise :class:`DeadlockError` with :meth:`report` if the run is deadlocked."""
        if self.found():
            raise DeadlockError(self.report())

    # ------------------------------------------------------------ naming
    def _node(self, rank: int, node_id: int | None = None, row: int | None = None) -> str:
        st = self.by_rank.get(rank)
        if st is None:
            return f"node {node_id}"
        t = st.table
        if row is None:
            hits = np.flatnonzero(np.asarray(t.id) == node_id)
            if not hits.size:
                return f"node {node_id}"
            row = int(hits[0])
        return f"node {int(t.id[row])} {t.name[row]!r}"

    def _collective(self, key, inst, never=None) -> str:
        """``never``: the members that never issue it (None: every missing one); [] : all issue it later."""
        missing = set(inst["members"]) - inst["arrived"]
        r0, n0 = inst["first"]
        who = (f"rank(s) {_ranks(missing)} never issued it" if never is None else
               f"rank(s) {_ranks(never)} never issue it" if never else
               f"rank(s) {_ranks(missing)} have not issued it yet, each blocked before it")
        return (f"{CommType(inst['type']).name} #{key[1]} on {_comm(key[0], inst['members'])} never completed: "
                f"{who} (rank {r0} issued it as {self._node(r0, n0)})")

    def _send(self, key, sender) -> str:
        rank, row, size = sender
        return (f"rank {rank} {self._node(rank, row=row)} sent {size} B to rank {key[1]} (tag {key[2]}), "
                f"which never receives it")

    def _receives(self):
        for st in self.stuck:
            for row, (kind, key) in st.waiting.items():
                if kind == "recv":
                    yield st, row, key

    def _receive(self, st, row, key, later: int | None = None) -> str:
        return (f"rank {st.rank} {self._node(st.rank, row=row)} receives from rank {key[0]} (tag {key[2]}), "
                + ("which never sends it" if later is None else
                   f"which has not sent it yet, blocked before its {self._node(key[0], row=later)}"))

    def _hop(self, h: Hop) -> str:
        if h.kind == "collective":
            inst = self.run.colls.items[h.key]
            what = (f"waits in {CommType(inst['type']).name} #{h.key[1]} on {_comm(h.key[0], inst['members'])} "
                    f"for rank {h.target} (which issues it later, as {self._node(h.target, row=h.target_row)})")
        else:
            what = (f"receives from rank {h.target}, tag {h.key[2]} (which sends it later, as "
                    f"{self._node(h.target, row=h.target_row)})")
        return f"rank {h.rank} {self._node(h.rank, row=h.row)} {what}"

    def _cycle(self, hops: list[Hop]) -> str:
        """``wait cycle: rank a ... -> rank b ... -> rank a``; a long cycle keeps its first and last hops."""
        shown = [self._hop(h) for h in hops]
        if len(shown) > MAX_HOPS:
            shown = shown[:MAX_HOPS - 1] + [f"... ({len(hops) - MAX_HOPS} more) ...", shown[-1]]
        ranks = len({h.rank for h in hops})
        return f"wait cycle of {ranks} rank(s): " + " -> ".join(shown) + f" -> rank {hops[0].rank}"

    def headline(self) -> str:
        """The most likely cause, in one sentence."""
        for key, inst in self.open:  # a member finished, or is blocked elsewhere, without issuing it
            if not (set(inst["members"]) - inst["arrived"]) & self.stuck_ids:
                return self._collective(key, inst)
        for st, row, key in self._receives():
            if key[0] not in self.stuck_ids:
                return self._receive(st, row, key)
        for key, sender in self.unreceived:
            if key[1] not in self.stuck_ids:
                return self._send(key, sender)
        for key, inst in self.open:  # a blocked member that holds no such collective among its nodes still to run
            never = [m for m in sorted(set(inst["members"]) - inst["arrived"])
                     if self.waits.later("collective", key, -1, m) is None]
            if never:
                return self._collective(key, inst, never)
        for st, row, key in self._receives():  # a blocked sender that holds no such send
            if self.waits.later("recv", key, st.rank, key[0]) is None:
                return self._receive(st, row, key)
        hops = self.waits.cycle()
        if hops:  # nothing missing: every rank issues what another waits for, behind a wait of its own
            return self._cycle(hops)
        if self.open:
            return self._collective(*self.open[0], never=[])
        for st, row, key in self._receives():
            return self._receive(st, row, key, self.waits.later("recv", key, st.rank, key[0]))
        if self.unreceived:
            return self._send(*self.unreceived[0])
        return "ranks blocked behind busy lanes"

    # ------------------------------------------------------------ report
    def report(self) -> str:
        """The headline, then (when ranks are stuck) one line per stuck rank."""
        head = f"deadlock: {self.headline()}"
        if not self.stuck:
            more = len(self.open) + len(self.unreceived) - 1
            return head + (f" (and {more} more unmatched operation(s))" if more > 0 else "")
        lines = [head + f"; {len(self.stuck)} of {len(self.run.ranks)} ranks cannot finish "
                        f"(at t = {self.run.env.now * 1e6:.3f} us)"]
        lines += [self._rank_line(st) for st in self.stuck[:MAX_RANKS]]
        if len(self.stuck) > MAX_RANKS:
            lines.append(f"  ... and {len(self.stuck) - MAX_RANKS} more ranks")
        if self.unreceived:
            lines.append(f"  {len(self.unreceived)} message(s) were sent and never received, first: "
                         f"{self._send(*self.unreceived[0])}")
        return "\n".join(lines)

    def _rank_line(self, st) -> str:
        what = []
        for row, (kind, key) in list(st.waiting.items())[:4]:
            label = self._node(st.rank, row=row)
            if kind == "collective":
                inst = self.run.colls.items[key]
                missing = sorted(set(inst["members"]) - inst["arrived"])
                what.append(f"{label} {CommType(inst['type']).name} #{key[1]} on "
                            f"{_comm(key[0], inst['members'])} waits for ranks {_ranks(missing)}")
            else:
                later = self.waits.later(kind, key, st.rank, key[0]) if kind == "recv" else None
                what.append(f"{label} {kind} (src {key[0]}, dst {key[1]}, tag {key[2]}) " +
                            (f"has no matching {'send' if kind == 'recv' else 'receive'}" if later is None else
                             f"waits for rank {key[0]}'s send, which comes later ({self._node(key[0], row=later)})"))
        pending = len(st.table) - st.done
        return f"  rank {st.rank}: {pending} node(s) not done; " + ("; ".join(what) or
               f"{sum(len(q) for q in st.queues)} ready node(s) blocked behind a busy lane")
