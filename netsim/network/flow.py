"""Congestion-aware flow-level network: links shared max-min fairly.

Every transfer is a flow on its routed path.  Between events the set of
flows is fixed, and so are their rates: the max-min fair allocation of every
link's capacity among the flows crossing it (progressive filling,
:func:`~netsim.network.maxmin.max_min_rates`).  Rates change only when flows
start or end, and only the rates that change are re-solved
(:mod:`~netsim.network.flowtable`: a local repair, exact by the max-min certificate).
A flow drains at its rate from the moment it is submitted; its last byte lands
one path latency after it has drained.

Batching, exactly: all submissions made at one simulated instant are solved once
(the update runs after every other event of that instant), and every flow due at
the same instant — within the float resolution of the clock, a few ulps — finishes in
one batch.  No byte tolerance: a flow with bytes left finishes when they have drained.

Link capacities are :attr:`~netsim.topology.model.Topology.capacity` (the routing
policy's view of the fabric; ``link_bw`` unless flows are sprayed).

``link_load`` counts the flows draining through every link right now, and an optional
``watch(links, now)`` hook sees the links of every submitted flow (the workload runner
uses both to prove that a collective runs alone on its links).

Link counters: ``link_bytes`` as in :class:`~netsim.network.base.Network`;
busy seconds = time during which at least one flow was draining through the link;
``link_peak_flows`` = the most flows that drained through the link at once.
"""

from __future__ import annotations

import numpy as np

from netsim.network.base import DoneCallback, Network, call_late
from netsim.network.flowtable import FlowTable
from netsim.network.maxmin import drain_alone
from netsim.topology.model import csr_gather, csr_merge

#: A flow due within this many ulps of the clock is due now (same instant, float resolution).
_SAME_INSTANT_ULPS = 64
#: Flow-table kernels: ``numpy`` (the reference), ``compiled`` (:mod:`~netsim.network.flowkernel`),
#: ``auto`` (numpy until :data:`COMPILE_AFTER` events, then compiled where numba is available).
KERNELS = ("auto", "compiled", "numpy")
#: Events after which ``auto`` moves the flows to the compiled kernels: past the runs a cold
#: compile would not pay for (the numpy table costs about 0.2-2 ms an event, loading the cached
#: kernels about 0.5 s; ``benchmarks/bench_kernel.py``).
COMPILE_AFTER = 1000
#: Most rate solves :meth:`FlowNetwork.alone` spends on one batch before it leaves the batch to
#: the event-driven path (symmetric collective steps need a handful).
MAX_DRAIN_ROUNDS = 8


class FlowNetwork(Network):
    """Max-min fair flow model; see the module docstring.

    ``incremental=False`` re-solves every flow at every event (the reference the
    incremental solver is tested against).
    """

    model = "flow"

    def __init__(self, env, topo, *, incremental: bool = True, kernel: str = "auto"):
        super().__init__(env, topo)
        if kernel not in KERNELS:
            raise ValueError(f"kernel: expected one of {', '.join(KERNELS)}, got {kernel!r}")
        self.kernel = kernel
        self.notes: list[str] = []  # one line each, for the run's notes
        self._flows = FlowTable(topo.capacity, incremental=incremental)
        self._counted = False  # True once the flow table keeps the link counters itself
        self._owners: dict[int, list] = {}  # submission id -> [on_done, flows left]
        self._next_owner = 0
        self._t = 0.0  # the flows' clock (ahead of now while a shift pauses them)
        self._drained_s = 0.0  # seconds the flows have actually drained (busy-time clock)
        self._busy_since = np.zeros(topo.n_links)
        self._gen = 0
        self._update_scheduled = False
        self.stats["events"] = 0
        self.stats["partial_solves"] = 0
        self.link_load = np.zeros(topo.n_links, dtype=np.int32)  # flows draining through each link
        self.watch = None  # watch(links, now): told of every path submitted (see LinkGuard)
        if kernel == "compiled":
            self._compile()

    # ----------------------------------------------------------------- API
    def submit(self, src, dst, nbytes, on_done: DoneCallback, key=None, routes=None, cap=None) -> None:
        """See :meth:`Network.submit`."""
        src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
        size = np.asarray(nbytes, dtype=np.float64)
        self.stats["transfers"] += int(src.size)
        indptr, links = self._route(src, dst, key, routes)
        latency = self.topo.path_latency(indptr, links)
        local = (self._account(indptr, links, size) == 0) | (size <= 0)
        if local.any():  # nothing to move through the network
            self._deliver(np.flatnonzero(local), self.env.now + np.where(size > 0, 0.0, latency)[local], on_done)
        if local.all():
            return
        self._advance()
        moving = np.flatnonzero(~local)
        ip, lk = (indptr, links) if moving.size == src.size else csr_gather(indptr, links, moving)
        if not self._counted:
            self._load(lk, +1)
        if self.watch is not None:
            self.watch(lk, self.env.now)
        capv = np.full(moving.size, np.inf) if cap is None else \
            np.broadcast_to(np.asarray(cap, dtype=np.float64), size.shape)[moving]
        owner = self._next_owner
        self._next_owner += 1
        self._owners[owner] = [on_done, int(moving.size)]
        self._flows.add(ip, lk, size[moving], latency[moving], capv, owner, moving)
        self._schedule_update()

    def run_program(self, prog, fast_forward: bool = False) -> dict | None:
        """Run a step program (:class:`~netsim.network.flowrun.Program`) whole on the compiled
        kernels, event for event as the executor would run it here
        (:mod:`~netsim.network.runkernel`); ``None`` (nothing done) unless this network is idle,
        may use compiled kernels (not ``kernel="numpy"``, numba present) and routes without the
        live load (not ``adaptive``) or a ``watch`` hook.  Returns
        :func:`~netsim.network.flowrun.run`'s dict."""
        from netsim.network import flowrun

        if (self.kernel == "numpy" or self.topo.routing == "adaptive" or self.watch is not None or self._owners
                or self._update_scheduled or self._t > self.env.now or self.env.peek() != float("inf")
                or prog.instances > flowrun.MAX_TRANSFERS
                or (fast_forward and int(prog.repeat.sum()) * prog.nranks > flowrun.MAX_HISTORY)):
            return None
        if not self._counted:
            self._compile()
            if not self._counted:
                return None
        f = self._flows
        solves = f.solve_counts()
        clocks = (self.env.now, self._t, self._drained_s, self.stats["shifted_s"], self._epoch_shift[-1])
        out = flowrun.run(f, prog, self.link_bytes, self.topo.link_lat, clocks, fast_forward)
        self._t, self._drained_s, self.stats["shifted_s"] = out["t_flows"], out["drained"], out["shifted"]
        self._epoch_shift.extend(out["epochs"])
        for key in ("events", "deliveries", "transfers"):
            self.stats[key] += out[key]
        after = f.solve_counts()
        self.stats["rate_solves"] += after[0] - solves[0]
        self.stats["partial_solves"] += after[1] - solves[1]
        if out["now"] > self.env.now:
            self.env.run(until=out["now"])
        return out

    def _route(self, src, dst, key, routes):
        """Paths of a submission.  Under ``adaptive`` routing every path is chosen now, on the live
        ``link_load`` (:mod:`netsim.topology.policy`); given ``routes`` are kept only where their
        shape differs (hops cut to one link, e.g. in-switch reduction: no choice there)."""
        if self.topo.routing != "adaptive":
            return routes if routes is not None else self.topo.routes(src, dst, key)
        ip, lk = self.topo.routes(src, dst, key, load=self.link_load)
        if routes is None:
            return ip, lk
        given = np.diff(routes[0])
        keep = given != np.diff(ip)
        if not keep.any():
            return ip, lk
        parts = [(idx, *csr_gather(p, lk_, idx)) for idx, p, lk_ in
                 ((np.flatnonzero(~keep), ip, lk), (np.flatnonzero(keep), *routes))]
        return csr_merge(src.size, np.where(keep, given, np.diff(ip)), parts)

    live_sharing = True

    def alone(self, src, dst, nbytes, key=None, routes=None, cap=None, parts: int = 1, weight=None):
        """See :meth:`Network.alone`: the path latency plus the drain time of the batch alone
        (:func:`~netsim.network.maxmin.drain_alone`); ``None`` under ``adaptive`` routing (paths
        depend on the live load) or beyond :data:`MAX_DRAIN_ROUNDS` rate solves.  ``parts`` is
        ignored: copies of a collective share links here."""
        if self.topo.routing == "adaptive":
            return None
        src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
        wire = np.asarray(nbytes, dtype=np.float64)
        indptr, links = routes if routes is not None else self.topo.routes(src, dst, key)
        lengths = np.diff(indptr)
        capv = None if cap is None else np.broadcast_to(np.asarray(cap, dtype=np.float64), wire.shape)
        drain, complete, solves = drain_alone(indptr, links, np.where(lengths > 0, wire, 0.0), self.topo.capacity,
                                              capv, MAX_DRAIN_ROUNDS, weight=weight)
        self.stats["rate_solves"] += solves
        if not complete:
            return None
        return np.where(lengths == 0, 0.0, self.topo.path_latency(indptr, links) + drain), drain

    def _count(self, routes, nbytes: np.ndarray, busy: np.ndarray, into: tuple | None = None) -> None:
        """Counters for a batch evaluated by :meth:`alone` (the collectives fast path): all
        draining together, so bytes add up; a link is busy for its longest transfer; its peak
        is the transfers crossing it."""
        indptr, links = routes
        if not links.size:
            return
        nbytes_, busy_, peak = into if into is not None else (self.link_bytes, self.link_busy_s, self.link_peak_flows)
        lengths = np.diff(indptr)
        np.add.at(nbytes_, links, np.repeat(np.asarray(nbytes, np.float64), lengths))
        longest = np.zeros(busy_.size)
        np.maximum.at(longest, links, np.repeat(np.asarray(busy, np.float64), lengths))
        busy_ += longest
        used, counts = np.unique(links, return_counts=True)
        peak[used] = np.maximum(peak[used], counts)

    def active_flows(self) -> int:
        """Flows currently draining."""
        return self._flows.n_alive

    def link_stats(self) -> dict[str, np.ndarray]:
        """See :meth:`Network.link_stats`; links busy right now count until now."""
        busy = self.link_busy_s.copy()
        open_ = self.link_load > 0
        busy[open_] += self._drained_s - self._busy_since[open_]
        return self._spread(self.link_bytes, busy, self.link_peak_flows)

    # ------------------------------------------------------------ internals
    def _load(self, links: np.ndarray, sign: int) -> None:
        """Flows start (+1) or stop (-1) crossing ``links``: load, busy time, peaks."""
        if not links.size:
            return
        uniq, cnt = np.unique(links, return_counts=True)
        before = self.link_load[uniq]
        after = before + sign * cnt.astype(np.int32)
        self.link_load[uniq] = after
        if sign > 0:
            self._busy_since[uniq[before == 0]] = self._drained_s
            self.link_peak_flows[uniq] = np.maximum(self.link_peak_flows[uniq], after)
        else:
            ended = uniq[after == 0]
            self.link_busy_s[ended] += self._drained_s - self._busy_since[ended]
            self._flows.emptied(ended)  # no flow left: no rounding residue either

    def _schedule_update(self) -> None:
        if self._update_scheduled:
            return
        self._update_scheduled = True
        call_late(self.env, self._update)

    def _advance(self) -> None:
        """Drain flows up to now (flows are frozen while ``_t`` is ahead of now after a shift)."""
        dt = self.env.now - self._t
        if dt > 0:
            self._flows.drain(dt)
            self._drained_s += dt
            self._t = self.env.now

    def can_shift(self, owner: object) -> bool:
        """See :meth:`Network.can_shift`; never under ``adaptive`` routing, where the paths of
        skipped steps would depend on a load that fast-forward does not simulate."""
        return self.topo.routing != "adaptive" and super().can_shift(owner)

    def shift(self, dt: float) -> None:
        """See :meth:`Network.shift`: active flows also pause for ``dt``."""
        self._advance()
        self._t = max(self._t, self.env.now) + dt
        super().shift(dt)

    def _update(self) -> None:
        self._update_scheduled = False
        self.stats["events"] += 1
        self._advance()
        f = self._flows
        solves, partial = f.solve_counts()
        t_next = None
        if self._counted:  # compiled: drain, repair and the next due time in one kernel call
            now = max(self.env.now, self._t)
            done, t_next = f.event(_SAME_INSTANT_ULPS * np.spacing(now))
            if done.size:
                self._hand_over(done, now)
        else:
            self._finish_drained()
            f.resolve()
        solves_after, partial_after = f.solve_counts()
        self.stats["rate_solves"] += solves_after - solves
        self.stats["partial_solves"] += partial_after - partial
        f.compact()
        if self.kernel == "auto" and self.stats["events"] == COMPILE_AFTER:
            self._compile()
            t_next = None
        self._arm_timer(t_next)

    def _compile(self) -> None:
        """Move the flows to the compiled table (between events), or note why not."""
        from netsim.network.compiled import CompiledFlowTable, available

        why = available()
        if why is not None:
            if why not in self.notes:
                self.notes.append(why)
            return
        self._flows = CompiledFlowTable.from_table(self._flows, self._counters())
        self._counted = True

    def _counters(self) -> tuple:
        """The link counters the compiled table keeps (:meth:`_load`'s), busy time in drained seconds."""
        return self.link_load, self._busy_since, self.link_busy_s, self.link_peak_flows

    def _finish_drained(self) -> None:
        now = max(self.env.now, self._t)
        f = self._flows
        done, links = f.take_drained(_SAME_INSTANT_ULPS * np.spacing(now))
        if not done.size:
            return
        if not self._counted:
            self._load(links, -1)
        owners = f.owner[done]
        order = np.argsort(owners, kind="stable")
        self._hand_over(done[order], now)

    def _hand_over(self, done: np.ndarray, now: float) -> None:
        """Deliver the drained flows ``done`` (slots ordered by owner): each owner's, one
        path latency from ``now``."""
        f = self._flows
        owners = f.owner[done]
        if owners[0] == owners[-1]:
            cuts = [0, owners.size]
        else:
            cuts = [0, *(np.flatnonzero(owners[1:] != owners[:-1]) + 1).tolist(), owners.size]
        for a, b in zip(cuts[:-1], cuts[1:]):
            o = int(owners[a])
            entry = self._owners[o]
            entry[1] -= b - a
            if entry[1] == 0:
                del self._owners[o]
            self._deliver(f.local[done[a:b]], now + f.lat[done[a:b]], entry[0])

    def _arm_timer(self, t_next: float | None = None) -> None:
        """Wake up when the next flow is due (``t_next`` seconds from the flows' clock, if known)."""
        if t_next is None:
            t_next = self._flows.next_due()
        if not np.isfinite(t_next):
            return
        self._gen += 1
        gen = self._gen
        self.call_at(max(self._t, self.env.now) + max(t_next, 0.0), lambda: self._timer(gen))

    def _timer(self, gen: int) -> None:
        if gen == self._gen:  # otherwise a newer solve re-armed the timer
            self._schedule_update()
