"""Run any :class:`~netsim.collectives.schedule.Schedule` on any network.

One generic executor keeps, per rank, the step it is in, how many of that
step's deliveries it still waits for, and when it finished each step.  The
rule is the schedule's: a transfer of step *k* starts when both endpoints
have finished step *k-1*.  Work is vectorized over ranks: ranks that enter
a step at the same instant are handled as one numpy batch, and the network
reports completions in batches, so a symmetric step costs a few Python
calls whatever the rank count.

**Fast-forward.**  Once the step-completion times of a phase advance by the
same amount Δ for every rank for three consecutive steps, the collective is
in its periodic regime and later steps of the same pattern would repeat it
shifted by Δ.  When the collective runs alone (``fast_forward=True``, the
executor owns every active flow), it then jumps ``m`` steps at once:
counters advance by ``m`` and every pending network and executor event is
shifted by ``m·Δ`` on the :class:`~netsim.network.base.Network` clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import simpy

from netsim.collectives.fastpath import MAX_PERIOD as _MAX_PERIOD
from netsim.collectives.fastpath import run_fixed, step_cap, step_routes, uniform_advance
from netsim.collectives.schedule import Schedule, Step
from netsim.network.base import Network, call_late
from netsim.topology.model import csr_gather




#: Deliveries of one instant up to this many are counted rank by rank in Python, more with
#: numpy (the same counts either way; only the cost differs).
_FEW = 16


def _distinct(idx: np.ndarray, n: int) -> np.ndarray:
    """The distinct values of ``idx`` (all in ``[0, n)``), sorted: what ``np.unique`` returns, from a
    mark per value when there are many (a linear pass instead of a hash or a sort).

    >>> _distinct(np.array([5, 1, 5, 3] * 20), 8).tolist()
    [1, 3, 5]
    """
    if idx.size <= 64:
        return np.unique(idx)
    mark = np.zeros(n, dtype=bool)
    mark[idx] = True
    return np.flatnonzero(mark)


@dataclass
class _PhaseIndex:
    """Per-phase lookups: which transfers touch each rank, and how many."""

    step: Step
    first: int  # global index of the phase's first step
    repeat: int
    touch_ptr: np.ndarray
    touch: np.ndarray
    degree: np.ndarray
    es: np.ndarray  # the ranks each transfer belongs to (Step.endpoints)
    ed: np.ndarray
    routes: tuple | None = None  # CSR paths of every transfer, computed on first use
    cap: object = False  # per-transfer rate bound (fastpath.step_cap), computed on first use


def _index(schedule: Schedule) -> list[_PhaseIndex]:
    out, first = [], 0
    for ph in schedule.phases:
        st, n = ph.step, schedule.nranks
        es, ed = st.endpoints()
        ends = np.concatenate([es, ed])
        tid = np.concatenate([np.arange(st.n_transfers)] * 2)
        order = np.argsort(ends, kind="stable")
        degree = np.bincount(ends, minlength=n)
        ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(degree, out=ptr[1:])
        out.append(_PhaseIndex(st, first, ph.repeat, ptr, tid[order], degree, es, ed))
        first += ph.repeat
    return out


@dataclass
class CollectiveResult:
    """Per-rank timing of one collective (seconds, simulation clock)."""

    schedule: Schedule
    ranks: np.ndarray
    start: np.ndarray
    finish: np.ndarray
    stats: dict = field(default_factory=dict)

    @property
    def time(self) -> float:
        """First start to last finish."""
        return float(self.finish.max() - self.start.min()) if self.finish.size else 0.0


class CollectiveRun:
    """One schedule executing on a network; ``done`` succeeds with a :class:`CollectiveResult`."""

    def __init__(self, env: simpy.Environment, network: Network, schedule: Schedule,
                 ranks: np.ndarray, start: np.ndarray | None = None, *, fast_forward: bool = False,
                 deferred: bool = False, on_rank_done=None):
        self.env, self.net, self.sched = env, network, schedule
        self.ranks = np.asarray(ranks, dtype=np.int64)
        n = schedule.nranks
        if self.ranks.size != n:
            raise ValueError(f"schedule is for {n} ranks, got {self.ranks.size}")
        self.phases = _index(schedule)
        self.total = schedule.n_steps
        self.cur = np.full(n, -1, dtype=np.int64)
        self.rem = np.zeros(n, dtype=np.int64)
        self.t_done = np.zeros(n)
        self.start = np.full(n, env.now) if start is None else np.asarray(start, dtype=float)
        self.done = env.event()
        self.fast_forward = fast_forward
        self.on_rank_done = on_rank_done  # called as on_rank_done(local_ranks, t)
        self._deferred = deferred
        self._pending: list[tuple] = []  # same-instant arrivals and deliveries, handled as one batch
        self._hist: dict[int, np.ndarray] = {}
        self._count: dict[int, int] = {}
        self._jumps: list[int] = []  # steps skipped by each fast-forward, in order
        self.stats = {"steps_skipped": 0, "batches": 0}
        self._begin()

    # -------------------------------------------------------------- progress
    def arrive(self, local_rank: int) -> None:
        """A deferred run: ``local_rank`` joins now (its transfers may start as peers join)."""
        self.start[local_rank] = self.env.now
        self._coalesce(("arrive", local_rank))

    def _coalesce(self, item: tuple) -> None:
        if not self._pending:
            call_late(self.env, self._flush)
        self._pending.append(item)

    def _flush(self) -> None:
        """Handle everything that happened at this instant: deliveries per step, then arrivals."""
        items, self._pending = self._pending, []
        steps: dict[int, tuple] = {}
        for item in items:
            if item[0] == "deliver":
                _, ph, g, idx, epoch = item
                if epoch < len(self._jumps):  # submitted before a fast-forward: that step moved on
                    g += sum(self._jumps[epoch:])
                prev = steps.get(g)
                steps[g] = (ph, idx if prev is None else np.concatenate([prev[1], idx]))
        for g in sorted(steps):
            self._delivered(steps[g][0], g, steps[g][1])
        arrivals = [item[1] for item in items if item[0] == "arrive"]
        if arrivals:
            self._enter(np.array(arrivals, dtype=np.int64), np.zeros(len(arrivals), dtype=np.int64))

    def _begin(self) -> None:
        if self._deferred:
            return
        n = self.sched.nranks
        if n == 0 or self.total == 0:
            self.t_done[:] = self.start
            self._finish_all()
            return
        for t in np.unique(self.start).tolist():
            group = np.flatnonzero(self.start == t)
            self._at(t, lambda g=group: self._enter(g, np.zeros(g.size, dtype=np.int64)))

    def _at(self, t: float, fn) -> None:
        self.net.call_at(t, fn)

    def _phase_of(self, g: int) -> _PhaseIndex:
        for ph in self.phases:
            if g < ph.first + ph.repeat:
                return ph
        raise IndexError(g)

    def _enter(self, ranks: np.ndarray, steps: np.ndarray) -> None:
        """``ranks`` finished their previous step now and enter ``steps``."""
        self.stats["batches"] += 1
        while ranks.size:
            finished = steps >= self.total
            if finished.any():
                self.cur[ranks[finished]] = self.total
                self.t_done[ranks[finished]] = self.env.now
                if self.on_rank_done is not None:
                    self.on_rank_done(ranks[finished], self.env.now)
                ranks, steps = ranks[~finished], steps[~finished]
                if (self.cur == self.total).all():
                    self._finish_all()
            if not ranks.size:
                return
            g = int(steps.min())
            mine = steps == g
            r = ranks[mine]
            ranks, steps = ranks[~mine], steps[~mine]
            empty = self._enter_step(r, g)
            if empty.size:  # nothing to do in this step: go straight to the next
                self._record(empty, g, self.env.now)
                ranks = np.concatenate([ranks, empty])
                steps = np.concatenate([steps, np.full(empty.size, g + 1)])

    def _enter_step(self, r: np.ndarray, g: int) -> np.ndarray:
        ph = self._phase_of(g)
        self.cur[r] = g
        st = ph.step
        if st.n_transfers == 0:
            if st.delay_s > 0:
                self._at(self.env.now + st.delay_s, lambda: self._step_done(r, g))
                return r[:0]
            return r
        self.rem[r] = ph.degree[r]
        idle = r[ph.degree[r] == 0]
        cand = _distinct(csr_gather(ph.touch_ptr, ph.touch, r)[1], st.n_transfers)
        ready = cand[(self.cur[ph.es[cand]] == g) & (self.cur[ph.ed[cand]] == g)]
        if ready.size:
            self._submit(ph, g, ready)
        return idle

    def _submit(self, ph: _PhaseIndex, g: int, idx: np.ndarray) -> None:
        st = ph.step
        key = None if st.key is None else st.key[idx]
        if ph.routes is None:
            ph.routes = step_routes(self.net.topo, self.ranks, st)
        routes = ph.routes if idx.size == st.n_transfers and np.array_equal(idx, np.arange(idx.size)) \
            else csr_gather(ph.routes[0], ph.routes[1], idx)

        epoch = len(self._jumps)

        def delivered(local: np.ndarray, t: float, idx=idx) -> None:
            if st.overhead_s > 0:
                self._at(t + st.overhead_s, lambda: self._coalesce(("deliver", ph, g, idx[local], epoch)))
            else:
                self._coalesce(("deliver", ph, g, idx[local], epoch))

        nbytes = st.nbytes[idx] * st.wire if st.wire != 1.0 else st.nbytes[idx]
        if ph.cap is False:
            ph.cap = step_cap(self.net, st, ph.routes, st.nbytes * st.wire)
        cap = ph.cap if ph.cap is None or np.isscalar(ph.cap) else ph.cap[idx]
        self.net.submit(self.ranks[st.src[idx]], self.ranks[st.dst[idx]], nbytes, delivered, key, routes, cap)

    def _delivered(self, ph: _PhaseIndex, g: int, idx: np.ndarray) -> None:
        if idx.size <= _FEW:  # a few deliveries: counted one by one (cheaper than two bincounts over all ranks)
            rem, done = self.rem, []
            for r in ph.es[idx].tolist() + ph.ed[idx].tolist():
                rem[r] -= 1
                if rem[r] == 0:
                    done.append(r)
            if done:
                self._step_done(np.array(sorted(done), dtype=np.int64), g)
            return
        n = self.sched.nranks
        hits = np.bincount(ph.es[idx], minlength=n) + np.bincount(ph.ed[idx], minlength=n)
        touched = np.flatnonzero(hits)
        self.rem[touched] -= hits[touched]
        done = touched[self.rem[touched] == 0]
        if done.size:
            self._step_done(done, g)

    def _step_done(self, ranks: np.ndarray, g: int) -> None:
        now = self.env.now
        self.t_done[ranks] = now
        m, dt = self._record(ranks, g, now)
        if m:
            self._at(now + dt, lambda: self._enter(ranks, np.full(ranks.size, g + 1 + m)))
        else:
            self._enter(ranks, np.full(ranks.size, g + 1))

    def _finish_all(self) -> None:
        if not self.done.triggered:
            self.done.succeed(CollectiveResult(self.sched, self.ranks, self.start, self.t_done.copy(),
                                               dict(self.stats)))

    # ------------------------------------------------------ periodic regime
    def _record(self, ranks: np.ndarray, g: int, t: float) -> tuple[int, float]:
        """Remember when ``ranks`` finished step ``g``; returns the (steps, seconds) jumped, if any."""
        if not self.fast_forward:
            return 0, 0.0
        h = self._hist.get(g)
        if h is None:
            h = self._hist[g] = np.full(self.sched.nranks, np.nan)
            oldest = int(self.cur.min()) - 2 * _MAX_PERIOD - 1  # ranks may be many steps apart: keep what the slowest needs
            for k in [k for k in self._hist if k < oldest]:
                del self._hist[k]
                self._count.pop(k, None)
        h[ranks] = t
        self._count[g] = self._count.get(g, 0) + ranks.size
        if self._count[g] == self.sched.nranks:
            return self._maybe_jump(g)
        return 0, 0.0

    def _maybe_jump(self, g: int) -> tuple[int, float]:
        """Jump whole periods once step times repeat with period 1..4 steps, uniformly over ranks."""
        ph = self._phase_of(g)
        for period in range(1, _MAX_PERIOD + 1):
            steps = (g, g - period, g - 2 * period)
            if steps[-1] < ph.first or any(k not in self._hist for k in steps):
                return 0, 0.0
            delta = uniform_advance(self._hist[g], self._hist[g - period], self._hist[g - 2 * period])
            if delta is not None:
                return self._jump(ph, period, delta)
        return 0, 0.0

    def _jump(self, ph: _PhaseIndex, period: int, delta: float) -> tuple[int, float]:
        last = ph.first + ph.repeat - 1
        m = ((last - int(self.cur.max()) - 1) // period) * period
        if m < 1 or not self.net.can_shift(self):
            return 0, 0.0
        dt = (m // period) * delta
        st = ph.step
        if ph.routes is None:
            ph.routes = step_routes(self.net.topo, self.ranks, st)
        self.net.count_bytes(ph.routes, st.nbytes * st.wire * m)  # the skipped steps' traffic
        self.net.shift(dt)
        self.cur += m
        self.t_done += dt
        self._hist = {k + m: v + dt for k, v in self._hist.items()}
        self._count = {k + m: v for k, v in self._count.items()}
        self.stats["steps_skipped"] += m
        self._jumps.append(m)
        return m, dt


#: ``engine`` values: ``auto`` evaluates off the event queue where that is exact
#: (:mod:`~netsim.collectives.fastpath`) and fast-forwards periodic regimes; ``event``: every
#: transfer simulated event by event, no skipping; ``reference``: ``event`` with the flow model
#: on its numpy flow table, never the compiled kernels (:func:`netsim.network.models.network_class`).
ENGINES = ("auto", "event", "reference")


def run_collective(network: Network, schedule: Schedule, ranks=None, start=None, *,
                   fast_forward: bool = True, engine: str = "auto") -> CollectiveResult:
    """Run one collective alone on ``network`` (its environment must be otherwise idle).

    >>> import simpy
    >>> from netsim.topology.builders import nvswitch_domain
    >>> from netsim.network.analytical import AnalyticalNetwork
    >>> from netsim.collectives.ring import ring_all_reduce
    >>> topo = nvswitch_domain(4, links_per_gpu=1, link_bw=1e9, latency=0.0)
    >>> res = run_collective(AnalyticalNetwork(simpy.Environment(), topo), ring_all_reduce(4, 4e9))
    >>> round(res.time, 6)
    6.0
    """
    if engine not in ENGINES:
        raise ValueError(f"engine: expected one of {', '.join(ENGINES)}, got {engine!r}")
    fast_forward = fast_forward and engine == "auto"  # event and reference: every transfer an event
    ranks = np.arange(schedule.nranks) if ranks is None else np.asarray(ranks, dtype=np.int64)
    if fast_forward:
        t0 = network.env.now
        starts = np.full(schedule.nranks, t0) if start is None else np.asarray(start, dtype=float)
        fixed = run_fixed(network, schedule, ranks, starts)
        if fixed is not None:
            end = float(fixed["finish"].max()) if fixed["finish"].size else t0
            if end > network.env.now:
                network.env.run(until=end)
            stats = {"steps_skipped": fixed["steps_skipped"], "steps_simulated": fixed["steps_simulated"],
                     "steps_staggered": fixed["steps_staggered"],
                     "mode": "staggered" if fixed["steps_staggered"] else
                             "lockstep" if fixed["lockstep"] else "vectorized"}
            return CollectiveResult(schedule, ranks, starts, fixed["finish"], stats)
    res = _compiled(network, schedule, ranks, start, fast_forward, engine)
    if res is not None:
        return res
    run = CollectiveRun(network.env, network, schedule, ranks, start, fast_forward=fast_forward)
    network.exclusive = run if fast_forward else None
    network.env.run()
    network.exclusive = None
    if not run.done.triggered:
        raise RuntimeError("collective did not complete (deadlock in the schedule)")
    res = run.done.value
    res.stats["mode"] = "event"
    return res


#: Fewest transfers (over every step and repeat) a collective needs before it runs as one compiled
#: program (:meth:`FlowNetwork.run_program <netsim.network.flow.FlowNetwork.run_program>`): below
#: that, loading the kernel (about half a CPU second) costs more than the event path's Python.
PROGRAM_MIN_TRANSFERS = 16_384


def _compiled(network: Network, schedule: Schedule, ranks: np.ndarray, start, fast_forward: bool,
              engine: str) -> CollectiveResult | None:
    """The collective run whole in one compiled kernel (fast-forward included), the event path's
    floats bit for bit, where the network can (``run_program``)."""
    if engine == "reference" or not hasattr(network, "run_program") or not schedule.nranks or not schedule.n_steps:
        return None
    transfers = sum(ph.step.n_transfers for ph in schedule.phases)
    if sum(ph.step.n_transfers * ph.repeat for ph in schedule.phases) < PROGRAM_MIN_TRANSFERS or \
            (schedule.n_steps + 1) ** 2 * max(transfers, 1) >= 1 << 62:  # a flow's payload must fit in int64
        return None
    start = np.full(schedule.nranks, network.env.now) if start is None else np.asarray(start, dtype=float)
    out = network.run_program(_program(network, schedule, ranks, start), fast_forward)
    if out is None:
        return None
    if out["done"] != schedule.nranks:
        raise RuntimeError("collective did not complete (deadlock in the schedule)")
    return CollectiveResult(schedule, ranks, start, out["finish"],
                            {"steps_skipped": out["steps_skipped"], "batches": out["batches"], "mode": "event"})


def _program(network: Network, schedule: Schedule, ranks: np.ndarray, start: np.ndarray):
    """``schedule`` as a :class:`~netsim.network.flowrun.Program` (what :class:`CollectiveRun`
    submits: routes, wire bytes and rate caps per transfer, the phases' touch lists)."""
    from netsim.network.flowrun import Program

    phases, n = _index(schedule), schedule.nranks
    toff = np.cumsum([0] + [ph.step.n_transfers for ph in phases])
    es, ed, nbytes, cap, ptrs, links, tptr, touch = [], [], [], [], [], [], [], []
    n_links = n_touch = 0  # path entries and touch entries so far
    for p, ph in enumerate(phases):
        st = ph.step
        es.append(ph.es)
        ed.append(ph.ed)
        if not st.n_transfers:
            tptr.append(np.full(n + 1, n_touch, np.int64))
            continue
        routes = step_routes(network.topo, ranks, st)
        nbytes.append(st.nbytes * st.wire if st.wire != 1.0 else np.asarray(st.nbytes, dtype=np.float64))
        c = step_cap(network, st, routes, st.nbytes * st.wire)
        cap.append(np.full(st.n_transfers, np.inf) if c is None else
                   np.broadcast_to(np.asarray(c, dtype=np.float64), (st.n_transfers,)).copy())
        ptrs.append(routes[0][1:] + n_links)
        links.append(routes[1])
        tptr.append(ph.touch_ptr + n_touch)
        touch.append(ph.touch + toff[p])
        n_links += routes[1].size
        n_touch += ph.touch.size
    cat = (lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.zeros(0, dt))
    return Program(
        first=np.array([ph.first for ph in phases], np.int64), repeat=np.array([ph.repeat for ph in phases], np.int64),
        ntr=np.array([ph.step.n_transfers for ph in phases], np.int64),
        delay=np.array([ph.step.delay_s for ph in phases], np.float64),
        overhead=np.array([ph.step.overhead_s for ph in phases], np.float64),
        es=cat(es, np.int64), ed=cat(ed, np.int64), nbytes=cat(nbytes, np.float64), cap=cat(cap, np.float64),
        rt_ptr=np.concatenate([[0], *ptrs]).astype(np.int64), rt_links=cat(links, np.int64),
        touch_ptr=np.stack(tptr).astype(np.int64), touch=cat(touch, np.int64),
        degree=np.stack([ph.degree for ph in phases]).astype(np.int64), start=np.asarray(start, np.float64))
