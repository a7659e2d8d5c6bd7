"""Exact vectorized execution when transfer durations do not depend on timing.

The executor's rule (a transfer of step *k* starts when both endpoints have
finished step *k-1*; a rank finishes step *k* when all its step-*k*
transfers are delivered) makes a collective a max-plus recurrence over the
per-rank finish times ``x``::

    start_j = max(x[src_j], x[dst_j]);   x'[r] = max(x[r], max_{j touches r} start_j + dur_j)

When every transfer's duration is fixed, this recurrence *is* the
simulation, with no events at all: one numpy pass per step, for all ranks.
Durations come from the network (:meth:`~netsim.network.base.Network.alone`: a step's
transfers starting together and running alone).  They are fixed by definition on the
analytical network, which times every step that way.  On the flow
network a transfer's max-min rate depends on what runs beside it, so the pass
is used only where that is provably known:

* **uncontended** schedules: no link carries transfers of two different rank
  pairs in any step of any phase.  Transfers of one pair in different steps never
  overlap (the later starts after both ends finished the earlier step), and those
  of one step start together, so every transfer meets the same competitors
  whatever the timing;
* **lockstep** schedules (some link is contended): the recurrence checks, step by
  step, that every transfer of the step starts at the same instant and after every
  transfer of the previous step was delivered.  Then each step runs alone and its
  durations are those of all its transfers starting together
  (:meth:`Network.alone <netsim.network.base.Network.alone>`).  The first step where this fails makes
  :func:`run_fixed` return ``None`` and the event-driven executor runs instead.

Both conditions are exact statements about the event-driven execution; the
property test ``tests/test_engine_exact.py`` checks the result against it.

Long transients are cut short too: when the finish times of all ranks have
advanced by the same amount for two whole periods (1..4 steps), the rest of
the phase is extrapolated.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from netsim.collectives.lockstep import Lockstep, Stagger, StepShare, contended_links
from netsim.collectives.schedule import PATH, UP, DOWN, Schedule, Step
from netsim.network.base import Network
from netsim.topology.model import equal_groups, mix_hash

#: Fewest transfers in a step worth looking for identical ones (:func:`fixed_durations`).
SAME_MIN = 1024

#: Longest step period (in steps) the skip-ahead looks for.
MAX_PERIOD = 4


def step_routes(topo, ranks: np.ndarray, step: Step, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """CSR paths of every transfer of ``step`` (or of its transfers ``rows``; group ranks mapped
    through ``ranks``), with UP/DOWN transfers cut to their first/last link."""
    def pick(a):
        return a if rows is None or a is None else a[rows]

    indptr, links = topo.routes(ranks[pick(step.src)], ranks[pick(step.dst)], pick(step.key))
    hop = pick(step.hop)
    if hop is None or not (hop != PATH).any():
        return indptr, links
    return cut_routes(indptr, links, hop)


def step_latency(topo, ranks: np.ndarray, step: Step) -> float:
    """The longest path latency among the transfers of ``step`` (0 for none): :func:`step_routes`'
    paths, each distinct (src, dst, hop) routed once where the key cannot change a path (a keyless
    router, or no key)."""
    if not step.n_transfers:
        return 0.0
    rows = equal_groups(_pair_code(topo, ranks, step))[0] if _pair_routed(topo, step) else None
    indptr, links = step_routes(topo, ranks, step, rows)
    return float(topo.path_latency(indptr, links).max()) if links.size else 0.0


def _pair_routed(topo, step: Step) -> bool:
    """Whether a transfer's path depends on its ends and hop alone: a key that cannot change it (a
    keyless router, or no key) and no load-dependent routing."""
    return topo.routing != "adaptive" and (step.key is None or getattr(topo.router, "keyless", False))


def _pair_code(topo, ranks: np.ndarray, step: Step) -> np.ndarray:
    """One integer per transfer of ``step`` naming its (src, dst, hop)."""
    hop = 0 if step.hop is None else step.hop.astype(np.int64)
    return (ranks[step.src] * topo.n_gpus + ranks[step.dst]) * 3 + hop


def cut_routes(indptr: np.ndarray, links: np.ndarray, hop: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Routes with UP transfers cut to their first link and DOWN ones to their last (``hop``:
    PATH/UP/DOWN per route).

    >>> cut_routes(np.array([0, 2, 4, 6]), np.array([1, 2, 3, 4, 5, 6]), np.array([PATH, UP, DOWN]))
    (array([0, 2, 3, 4]), array([1, 2, 3, 6]))
    """
    lengths = np.diff(indptr)
    if (lengths[hop != PATH] == 0).any():
        raise ValueError("an UP/DOWN transfer needs a peer other than itself")
    keep = np.ones(links.size, dtype=bool)
    pos = np.arange(links.size) - np.repeat(indptr[:-1], lengths)
    per_link = np.repeat(hop, lengths)
    keep[(per_link == UP) & (pos > 0)] = False
    keep[(per_link == DOWN) & (pos < np.repeat(lengths, lengths) - 1)] = False
    new_len = np.where(hop == PATH, lengths, 1)
    return np.concatenate(([0], np.cumsum(new_len))).astype(indptr.dtype), links[keep]


def hops_of(given: tuple, full: tuple) -> np.ndarray | None:
    """PATH/UP/DOWN of every route in ``given`` against the whole routes ``full`` of the same
    pairs (the inverse of :func:`cut_routes`); None when nothing is cut.  A route cut any other
    way is refused (``ValueError``): it has no hop to copy."""
    g_ip, g_lk = given
    f_ip, f_lk = full
    g_len, f_len = np.diff(g_ip), np.diff(f_ip)
    cut = g_len != f_len
    if not cut.any():
        return None
    hop = np.full(g_len.size, PATH, dtype=np.int8)
    c = np.flatnonzero(cut)
    one = (g_len[c] == 1) & (f_len[c] > 1)
    first = g_lk[g_ip[c[one]]]
    hop[c[one][first == f_lk[f_ip[c[one]]]]] = UP
    down = c[one][(first == f_lk[f_ip[c[one] + 1] - 1]) & (hop[c[one]] == PATH)]
    hop[down] = DOWN
    if (hop[c] == PATH).any():
        raise ValueError("given routes are cut other than to a first (UP) or last (DOWN) link")
    return hop


def step_cap(net: Network, step: Step, routes, wire: np.ndarray, parts: int = 1):
    """Rate bound of every transfer of ``step``: its ``rate_cap``, and what the network charges
    for the step's own load on shared links (:meth:`Network.step_rates`); ``None`` if neither."""
    cap = transfer_caps(step, wire.size)
    share = net.step_rates(routes, wire, cap, parts) if routes is not None else None
    if share is None:
        return None if cap is None else (step.rate_cap if np.ndim(step.rate_cap) == 0 else cap)
    return share


def transfer_caps(step: Step, size: int) -> np.ndarray | None:
    """Per-transfer rate caps of ``step`` (``rate_cap`` is one number or one per transfer);
    ``None`` when nothing is capped."""
    rc = np.asarray(step.rate_cap, dtype=np.float64)
    if rc.ndim == 0:
        return None if np.isinf(rc) else np.full(size, float(rc))
    return None if np.isinf(rc).all() else rc


def fixed_durations(net: Network, step: Step, ranks: np.ndarray, repeat: int = 0,
                    counts: list | None = None, routes=None, drains: list | None = None,
                    parts: int = 1) -> np.ndarray | None:
    """Per-transfer seconds (overhead included) when every transfer of ``step`` starts together
    and the step runs alone (:meth:`Network.alone`); ``None`` where the network cannot tell
    without simulating.

    ``repeat``: the step's traffic ``repeat`` times is owed to the link counters (the
    event-driven path counts every submit): appended to ``counts`` (a list, or a
    :class:`~netsim.network.base.Tally`) as ``(routes, bytes, busy, transfers)`` when given,
    else counted now.  ``routes``: the step's CSR paths
    (:func:`step_routes`), when the caller has them.  ``drains``: the seconds each transfer
    occupies its links (from its start until drained) are appended.  ``parts``: the step
    stacks that many copies of one collective (replicas; see :meth:`Network.step_rates`)."""
    n = step.n_transfers
    wire = step.nbytes * step.wire
    cap = transfer_caps(step, n)
    same = None if routes is not None or parts != 1 or net.live_sharing else _same_transfers(net.topo, ranks, step,
                                                                                                wire, cap)
    rows, which, weight = same if same is not None else (None, None, None)
    if routes is None:
        routes = step_routes(net.topo, ranks, step, rows)

    def pick(a):  # one transfer per set of identical ones
        return a if rows is None or a is None else a[rows]

    timing = net.alone(ranks[pick(step.src)], ranks[pick(step.dst)], pick(wire), pick(step.key), routes, pick(cap),
                       parts, weight)
    if timing is None:
        return None
    dur, busy = timing
    if drains is not None:
        drains.append(busy if which is None else busy[which])
    if repeat:
        w = 1.0 if weight is None else weight  # a set's bytes and busy time: its members'
        item = (routes, pick(wire) * w * repeat, busy * w * repeat, n * repeat, weight)
        if counts is None:
            net.count_alone([item])
        else:
            counts.append(item)
    return (dur if which is None else dur[which]) + step.overhead_s


def _same_transfers(topo, ranks: np.ndarray, step: Step, wire: np.ndarray, cap: np.ndarray | None):
    """Sets of identical transfers of ``step`` (same ends, hop, bytes and cap, on paths their key
    cannot change): ``(one row per set, each transfer's set, set sizes)``, or None when under half
    repeat (a step's NCCL channels often repeat their pairs).  Grouped by a hash, then checked."""
    if step.n_transfers < SAME_MIN or not _pair_routed(topo, step):
        return None
    code = _pair_code(topo, ranks, step)
    caps = np.zeros(1, np.uint64) if cap is None else cap.view(np.uint64)
    rows, which = equal_groups(mix_hash(code, wire.view(np.uint64), caps))
    if 2 * rows.size > code.size:
        return None
    rep = rows[which]
    if not (np.array_equal(code[rep], code) and np.array_equal(wire[rep], wire)
            and (cap is None or np.array_equal(cap[rep], cap))):
        return None  # a hash collision: time every transfer
    return rows, which, np.bincount(which, minlength=rows.size).astype(np.float64)


class _Index:
    """``x[idx]`` for a fixed index array, by slicing when ``idx`` is a cyclic shift of 0..n-1."""

    def __init__(self, idx: np.ndarray, n: int):
        self.idx = idx
        self.shift = None
        if idx.size == n and n:
            c = int(idx[0])
            if np.array_equal(idx, (np.arange(n) + c) % n):
                self.shift = c

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if self.shift == 0:
            return x
        return x[self.idx]

    def combine(self, ufunc, a: np.ndarray, x: np.ndarray, out: np.ndarray) -> np.ndarray:
        """``out = ufunc(a, x[idx])`` without materialising ``x[idx]`` for shifts (no copies)."""
        c = self.shift
        if c is None:
            return ufunc(a, x[self.idx], out=out)
        if c == 0:
            return ufunc(a, x, out=out)
        n = x.size
        ufunc(a[:n - c], x[c:], out=out[:n - c])
        ufunc(a[n - c:], x[:c], out=out[n - c:])
        return out


class _Pattern:
    """Precomputed gathers of one step pattern."""

    def __init__(self, step: Step, n: int, dur: np.ndarray, routes=None, contended=None, drain=None, topo=None):
        src, dst = step.endpoints()
        order = np.argsort(src, kind="stable")
        self.src, self.dst, self.dur = src[order], dst[order], dur[order]
        self.share = None
        if contended is not None and src.size:
            stagger = None if topo is None else Stagger(routes, order, step.nbytes * step.wire,
                                                        transfer_caps(step, step.n_transfers), step.overhead_s, topo)
            self.share = StepShare(routes, contended, order, drain[order], stagger)
        self.n = n
        self.delay = step.delay_s if step.n_transfers == 0 else 0.0
        self.permutation = (np.unique(self.src).size == self.src.size
                            and np.unique(self.dst).size == self.dst.size)
        if self.permutation:
            self.g_src, self.g_dst = _Index(self.src, n), _Index(self.dst, n)
            self.full_dst = self.dst.size == n
            if self.full_dst:  # deliveries seen by each rank as a receiver: a gather, not a scatter
                inv = np.empty(n, dtype=np.int64)
                inv[self.dst] = np.arange(n)
                self.g_inv = _Index(inv, n)
        else:
            ends = np.concatenate([self.src, self.dst])
            order = np.argsort(ends, kind="stable")
            self.touch = np.concatenate([np.arange(self.src.size)] * 2)[order]
            counts = np.bincount(ends, minlength=n)
            self.ranks = np.flatnonzero(counts)
            self.starts = np.concatenate(([0], np.cumsum(counts)))[self.ranks]

    def advance(self, x: np.ndarray, check: Lockstep | None = None) -> np.ndarray:
        """Finish times after one more step; ``check`` follows the lockstep conditions
        (:mod:`~netsim.collectives.lockstep`) on schedules with contended links, and re-times the
        components that start staggered."""
        if self.src.size == 0:
            return x + self.delay
        if check is not None and self.share is not None:
            out = check.advance(self.share, x, self.src, self.dst, self.dur)
            if out is not None:
                return out
        if not self.permutation:
            start = np.maximum(x[self.src], x[self.dst])
        else:
            start = self.g_dst.combine(np.maximum, self.g_src(x), x, np.empty(self.src.size))
        deliv = start + self.dur
        if check is not None and self.share is not None:
            check.step(self.share, start, deliv)
        if not self.permutation:
            out = x.copy()
            out[self.ranks] = np.maximum(out[self.ranks], np.maximum.reduceat(deliv[self.touch], self.starts))
            return out
        if self.src.size == self.n:
            out = deliv.copy()  # every rank sends, and deliv >= its own previous finish
        else:
            out = x.copy()
            out[self.src] = np.maximum(out[self.src], deliv)
        if self.full_dst:
            out = self.g_inv.combine(np.maximum, out, deliv, out)
        else:
            out[self.dst] = np.maximum(out[self.dst], deliv)
        return out


@dataclass
class Prepared:
    """What :func:`run_fixed` precomputes for one schedule on fixed ranks (reusable).

    patterns: ``(_Pattern, repeat)`` per phase; counts: the link counters of one run
    (:meth:`Tally.summary <netsim.network.base.Tally.summary>`, whose first entry is the links
    it uses); lockstep: the durations hold only if the run stays in lockstep (see the module
    docstring), checked while it runs."""

    patterns: list
    counts: tuple
    lockstep: bool = False


def fixed_patterns(net: Network, schedule: Schedule, ranks: np.ndarray, parts: int = 1) -> Prepared | None:
    """What :func:`run_fixed` precomputes (reusable for the same schedule on the same ranks),
    or ``None`` if some step cannot be evaluated off the event queue at all.  ``parts``: see
    :func:`fixed_durations`."""
    flow = net.live_sharing
    routed = [(ph.step, step_routes(net.topo, ranks, ph.step) if flow and ph.step.n_transfers else None)
              for ph in schedule.phases]
    mask = contended_links(net.topo.n_links, schedule.nranks, [r for r in routed if r[1] is not None]) \
        if flow else None
    patterns, counts = [], net.tally()
    for ph, (step, routes) in zip(schedule.phases, routed):
        drains: list = []
        dur = fixed_durations(net, step, ranks, ph.repeat, counts, routes, drains, parts) if step.n_transfers \
            else np.zeros(0)
        if dur is None:
            return None
        drain = drains[0] if drains else None
        patterns.append((_Pattern(step, schedule.nranks, dur, routes, mask, drain, net.topo), ph.repeat))
    return Prepared(patterns, counts.summary(), mask is not None)


def run_fixed(net: Network, schedule: Schedule, ranks: np.ndarray, start: np.ndarray,
              prepared: Prepared | None = None, *, count: bool = True, strict: bool = True) -> dict | None:
    """Finish time of every rank, or ``None`` if the vectorized pass is not exact here.

    ``prepared``: :func:`fixed_patterns` of the same schedule and ranks (saves re-routing).
    ``count``: add the traffic to the network's link counters (only when a result is returned).
    ``strict=False``: return the lockstep evaluation even where it is not exact, with
    ``"exact": False`` (the workload runner then repeats the run event-driven)."""
    prepared = prepared if prepared is not None else fixed_patterns(net, schedule, ranks)
    if prepared is None:
        return None
    check = Lockstep(net.topo.n_links) if prepared.lockstep else None
    x = np.asarray(start, dtype=np.float64).copy()
    simulated = skipped = 0
    for pat, repeat in prepared.patterns:
        hist: list[np.ndarray] = []
        k = 0
        while k < repeat:
            x = pat.advance(x, check)
            if check is not None and not check.ok and strict:
                return None
            k += 1
            simulated += 1
            hist.append(x)
            if len(hist) > 2 * MAX_PERIOD + 1:
                hist.pop(0)
            jump = _periodic(hist) if k % MAX_PERIOD == 0 else None
            if jump is not None:
                period, delta = jump
                m = ((repeat - k) // period) * period
                x = x + (m // period) * delta
                if check is not None and pat.share is not None:
                    check.shift(pat.share, (m // period) * delta)
                k += m
                skipped += m
                hist.clear()
    if count:
        net.add_tally(prepared.counts)
    exact = check is None or check.ok
    return {"finish": x, "steps_simulated": simulated, "steps_skipped": skipped, "exact": exact,
            "lockstep": prepared.lockstep, "steps_staggered": 0 if check is None else check.staggered}


def uniform_advance(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> float | None:
    """Δ if every rank advanced by the same Δ > 0 from ``c`` to ``b`` and from ``b`` to ``a``.

    >>> uniform_advance(np.array([5., 6.]), np.array([3., 4.]), np.array([1., 2.]))
    2.0
    """
    d1 = a - b
    delta = float(d1[0])
    tol = 1e-9 * max(abs(delta), 1e-12) + 1e-15
    if delta > 0 and np.ptp(d1) <= tol and np.abs((b - c) - delta).max() <= tol:
        return delta
    return None


def _periodic(hist: list[np.ndarray]) -> tuple[int, float] | None:
    for period in range(1, MAX_PERIOD + 1):
        if len(hist) < 2 * period + 1:
            return None
        delta = uniform_advance(hist[-1], hist[-1 - period], hist[-1 - 2 * period])
        if delta is not None:
            return period, delta
    return None
