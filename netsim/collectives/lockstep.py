"""When the vectorized pass is exact on a flow network with shared links.

On the flow network a transfer's rate depends on which other flows cross its links
while it drains.  :mod:`~netsim.collectives.fastpath` computes each step's durations
as if all of the step's transfers started together and nothing else ran
(:meth:`FlowNetwork.alone <netsim.network.flow.FlowNetwork.alone>`).  Max-min fair sharing decomposes over *components*
(transfers of one step connected through shared links): flows of different
components never meet, so each component's durations are exact if, in the actual
run,

1. all transfers of the component start at one instant (checked on the transfers that
   cross contended links: components through other links join one rank pair's transfers
   of one step, which start together anyway), and
2. no transfer of another step still occupies one of its *contended* links
   (links that carry two different rank pairs somewhere in the schedule) when it
   starts.

Links carrying one rank pair only need no check: transfers of one pair in different
steps never overlap (the later one starts after both ends finished the earlier
step).  :class:`Lockstep` checks 1 and 2 on the max-plus recurrence itself, step by
step; a transfer occupies its links from its start until it has drained.  Both
conditions are statements about the event-driven execution, so a run that passes
them is the event-driven result; the first step that fails sends the collective
back to the event-driven executor.

Times compared are floats computed along different sums, so "at one instant" and
"not before" allow :data:`RTOL` of relative slack: an overlap of δ seconds changes
no finish time by more than δ, far below the 1e-9 to which the engines are tested
equal.

:meth:`Lockstep.step` is the numpy reference.  Where numba imports, :meth:`Lockstep.advance` runs a
step of a pattern with a :class:`Stagger` (the recurrence, both checks, the re-timing and the
links' busy times) in one compiled call, :func:`netsim.network.stepkernel.lockstep_advance`, which
computes every float as the reference does (``tests/test_stagger.py`` holds them bit for bit equal).
"""

from __future__ import annotations

import numpy as np

from netsim.network.maxmin import drain_staggered
from netsim.topology.model import csr_gather, equal_groups, mix_hash

__all__ = ["contended_links", "components", "StepShare", "Stagger", "Lockstep", "RTOL"]

#: Relative slack of the time comparisons (see the module docstring).
RTOL = 1e-12


def contended_links(n_links: int, n: int, steps) -> np.ndarray | None:
    """Mask of links that carry transfers of two different rank pairs in ``steps``
    (``(step, (indptr, links))`` items, ranks local to an ``n``-rank schedule), or ``None``
    when there is no such link.

    >>> from netsim.collectives.schedule import Step
    >>> st = Step(np.array([0, 1]), np.array([1, 2]), np.ones(2))
    >>> contended_links(3, 3, [(st, (np.array([0, 1, 2]), np.array([0, 1])))]) is None
    True
    >>> contended_links(3, 3, [(st, (np.array([0, 1, 2]), np.array([0, 0])))]).tolist()
    [True, False, False]
    """
    lo = np.full(n_links, np.iinfo(np.int64).max)
    hi = np.full(n_links, -1, dtype=np.int64)
    for step, (indptr, links) in steps:
        if not links.size:
            continue
        es, ed = step.endpoints()
        pair = np.minimum(es, ed).astype(np.int64) * n + np.maximum(es, ed)
        per_link = np.repeat(pair, np.diff(indptr))
        np.minimum.at(lo, links, per_link)
        np.maximum.at(hi, links, per_link)
    mask = (hi >= 0) & (lo != hi)
    return mask if mask.any() else None


def components(ent: np.ndarray, links: np.ndarray, m: int) -> np.ndarray:
    """Component label of each of ``m`` transfers, given incidence entries (``ent[i]`` uses
    link ``links[i]``): transfers connected through shared links get the smallest index
    among them.  Shiloach-Vishkin style: hook every tree onto the smallest root its links
    touch, compress paths, repeat (O(log m) rounds).

    >>> components(np.array([0, 1, 2]), np.array([5, 6, 5]), 3).tolist()
    [0, 1, 0]
    """
    lab = np.arange(m, dtype=np.int64)
    if not ent.size:
        return lab
    by_link = np.argsort(links, kind="stable")
    lk = links[by_link]
    l_first = np.flatnonzero(np.r_[True, lk[1:] != lk[:-1]])
    l_len = np.diff(np.r_[l_first, lk.size])
    while True:
        roots = lab[ent]
        per_entry = np.empty(ent.size, dtype=np.int64)
        per_entry[by_link] = np.repeat(np.minimum.reduceat(roots[by_link], l_first), l_len)
        new = lab.copy()
        np.minimum.at(new, roots, per_entry)  # hook whole trees onto the smallest root they touch
        while True:  # then compress every path to its root
            nxt = new[new]
            if np.array_equal(nxt, new):
                break
            new = nxt
        if np.array_equal(new, lab):
            return lab
        lab = new


def _distinct(values: np.ndarray, size: int) -> np.ndarray:
    """Sorted distinct values of an int array in ``[0, size)`` (a mask; no hashing)."""
    seen = np.zeros(size, dtype=bool)
    seen[values] = True
    return np.flatnonzero(seen)


class StepShare:
    """What :class:`Lockstep` checks for one step pattern (transfers in ``order``).

    ``order``: the pattern's transfer order (indices into the step's transfers); ``drain``:
    seconds each transfer occupies its links, in pattern order.
    """

    def __init__(self, routes: tuple[np.ndarray, np.ndarray], mask: np.ndarray, order: np.ndarray,
                 drain: np.ndarray, stagger: Stagger | None = None):
        self.drain = drain
        self.stagger = stagger
        indptr, links = routes
        pos = np.empty(order.size, dtype=np.int64)
        pos[order] = np.arange(order.size)  # step transfer -> position in the pattern
        hit = mask[links]
        ent = np.repeat(pos, np.diff(indptr))[hit]
        by_link = np.argsort(links[hit], kind="stable")  # entries link by link: per-link min/max by reduceat
        self.ent_t, self.ent_l = ent[by_link], links[hit][by_link]
        self.bounds = np.flatnonzero(np.r_[True, self.ent_l[1:] != self.ent_l[:-1]]) if ent.size else ent
        self.links = self.ent_l[self.bounds]  # distinct, sorted
        self.touch = _distinct(ent, order.size)  # transfers on contended links
        self._groups = None
        self._by_transfer = None

    def by_transfer(self) -> tuple[np.ndarray, np.ndarray]:
        """The contended links of each transfer, CSR ``(indptr, links)`` in pattern order (int32: the
        compiled step reads them once a step)."""
        if self._by_transfer is None:
            by_t = np.argsort(self.ent_t, kind="stable")
            indptr = np.searchsorted(self.ent_t[by_t], np.arange(self.drain.size + 1))
            self._by_transfer = (indptr.astype(np.int32), self.ent_l[by_t].astype(np.int32))
        return self._by_transfer

    def groups(self) -> tuple[np.ndarray, np.ndarray]:
        """Transfers on contended links grouped by component: ``(order, bounds)`` for
        ``reduceat`` (computed on first use: most steps pass the plain all-equal test)."""
        if self._groups is None:
            local = np.searchsorted(self.touch, self.ent_t)
            lab = components(local, self.ent_l, self.touch.size)
            by = np.argsort(lab, kind="stable")
            k = lab[by]
            self._groups = (self.touch[by], np.flatnonzero(np.r_[True, k[1:] != k[:-1]]))
        return self._groups


class Lockstep:
    """Running check of conditions 1 and 2 (module docstring) along the recurrence."""

    def __init__(self, n_links: int):
        self.busy = np.full(n_links, -np.inf)  # latest delivery of a transfer on each contended link
        self.ok = True
        self.staggered = 0  # steps in which some component was re-timed by :class:`Stagger`

    def step(self, share: StepShare, start: np.ndarray, deliv: np.ndarray) -> None:
        """Check one step (``start`` per transfer, pattern order; ``deliv``: start + duration as
        computed alone, adjusted in place for the transfers of components that did not start
        together, re-timed by :class:`Stagger`).  ``ok`` turns False when the check fails."""
        if not self.ok:
            return
        slack = RTOL * max(float(np.abs(start).max()), 1e-300)
        drain = share.drain
        st = start[share.ent_t] if share.ent_t.size else None
        if st is not None and (np.minimum.reduceat(st, share.bounds) < self.busy[share.links] - slack).any():
            self.ok = False
        elif share.touch.size:
            s = start[share.touch]
            if float(s.max() - s.min()) > slack:  # not all together: then each component must be
                if share.stagger is not None:  # ... or is re-timed with its own starts
                    fix = share.stagger.durations(start, slack)
                    self.ok = fix is not None
                    if fix is not None and fix[0].size:
                        self.staggered += 1
                        drain = drain.copy()
                        drain[fix[0]] = fix[2]
                        deliv[fix[0]] = start[fix[0]] + fix[1]
                else:
                    order, bounds = share.groups()
                    s = start[order]
                    spread = np.maximum.reduceat(s, bounds) - np.minimum.reduceat(s, bounds)
                    self.ok = not (spread > slack).any()
        if self.ok and st is not None:
            end = np.maximum.reduceat(st + drain[share.ent_t], share.bounds)
            np.maximum(self.busy[share.links], end, out=end)
            self.busy[share.links] = end

    def advance(self, share: StepShare, x: np.ndarray, src: np.ndarray, dst: np.ndarray,
                dur: np.ndarray) -> np.ndarray | None:
        """The step from finish times ``x`` (transfer ``t`` from ``src[t]`` to ``dst[t]``, ``dur[t]``
        when timed alone) with its check, in one numba call
        (:meth:`Stagger.advance_compiled`): every rank's finish after it, or ``None`` where that
        call does not apply (no :class:`Stagger`, numba missing, check failed before); then
        :meth:`step` is the way (the reference), and gives the same floats."""
        stag = share.stagger
        if not (self.ok and stag is not None and stag.kernel()):
            return None
        out, code = stag.advance_compiled(share, x, src, dst, dur, self.busy)
        self.ok = code >= 0
        self.staggered += code == 1
        return out

    def shift(self, share: StepShare, dt: float) -> None:
        """Steps skipped by the periodic extrapolation: this pattern's links moved by ``dt``."""
        self.busy[share.links] += dt


#: Start offsets inside a component are timed on this grid (seconds) when a step is re-timed by
#: :class:`Stagger`: components whose transfers start at the same offsets share one drain.  A
#: start moved by less than the grid moves finish times by the order of the grid (1e-15 s, far
#: below the 1e-9 relative to which ``tests/test_stagger.py`` holds them equal to the event run).
GRID_S = 1e-15

#: Largest component :class:`Stagger` re-times, and most distinct drains it computes in one step
#: (per transfer of the step, at least :data:`STAGGER_MIN_NEW`): past either the run goes back to
#: the event-driven executor, exact anyway and then no slower (a drain costs about what a few
#: flow events do).
STAGGER_MAX_TRANSFERS = 64
STAGGER_NEW_PER_TRANSFER = 1 / 16
STAGGER_MIN_NEW = 4
#: Smallest step pattern (transfers) that :meth:`Lockstep.advance` runs compiled: loading numba and
#: the kernel costs about half a CPU second once, what the numpy steps of a pattern this size
#: cost over some thousand steps.
STEP_KERNEL_MIN_TRANSFERS = 4096
#: Most drains the compiled step remembers per step pattern (as the numpy path's cache).
STAGGER_TABLE_ENTRIES = 1 << 16


class Stagger:
    """Exact durations of one step pattern's transfers when a component's transfers do not
    start together.

    Components here join transfers through *any* shared link (a component of
    :meth:`StepShare.groups` plus the same-pair transfers it meets on uncontended links).  Max-min
    fair sharing decomposes over them, so a component that starts staggered, on links no other
    step occupies (condition 2, still checked), drains as the fluid model of its own transfers
    with their own starts (:func:`~netsim.network.maxmin.drain_staggered`), whatever the rest of
    the step does.  Components with the same shape (transfers in the same order with the same
    bytes, cap and latency, on links of the same capacities shared the same way) that start at the
    same offsets drain alike: each such class is timed once per step and remembered.
    """

    def __init__(self, routes: tuple[np.ndarray, np.ndarray], order: np.ndarray, wire: np.ndarray,
                 caps: np.ndarray | None, overhead: float, topo):
        # step order in; everything kept in pattern order (``order``), built on first use
        self._given = (routes, order, wire, caps, topo)
        self._m = order.size
        self.overhead, self.capacity = overhead, topo.capacity
        self._shape: np.ndarray | None = None
        self._cache: dict = {}
        self._drain_fn = None  # numba's batch where it imports, else the numpy reference (:meth:`_drains`)
        self._kernel = None  # numba's whole step where it imports (:meth:`advance_compiled`)
        self._static = None
        self._ends = None

    def _build(self) -> None:
        (ip0, lk0), order, wire, caps, topo = self._given
        self._given = None
        self.indptr, self.links = csr_gather(ip0, lk0, order)
        self.wire = np.asarray(wire, dtype=np.float64)[order]
        lat = topo.path_latency(self.indptr, self.links) if self.links.size else np.zeros(order.size)
        self.lat = np.where(np.diff(self.indptr) == 0, 0.0, lat)
        m = order.size
        self.caps = np.full(m, np.inf) if caps is None else np.asarray(caps, dtype=np.float64)[order]
        lengths = np.diff(self.indptr)
        lab = components(np.repeat(np.arange(m), lengths), self.links, m)
        self.order = np.argsort(lab, kind="stable")  # transfers, component by component
        k = lab[self.order]
        new = np.r_[True, k[1:] != k[:-1]]
        self.bounds = np.flatnonzero(new)
        self.size = np.diff(np.r_[self.bounds, m])
        self.comp = np.empty(m, dtype=np.int64)
        self.comp[self.order] = np.cumsum(new) - 1
        with np.errstate(over="ignore"):  # a member's weight in its component's offset hash
            self._odd = mix_hash(np.arange(int(self.size.max()) if m else 1)) | np.uint64(1)
        self.pos = np.empty(m, dtype=np.int64)  # place in its component
        self.pos[self.order] = np.arange(m) - np.repeat(self.bounds, self.size)

    def shapes(self) -> np.ndarray:
        """Shape class of every component (equal ids: identical max-min problems up to link names)."""
        if self._shape is not None:
            return self._shape
        o, ip = self.order, self.indptr
        lens = np.diff(ip)[o]
        ent = csr_gather(ip, self.links, o)[1]
        idx = np.arange(ent.size)
        first = np.full(self.capacity.size, ent.size, dtype=np.int64)
        np.minimum.at(first, ent, idx)  # a link lies in one component: its first entry there
        comp_ent = np.repeat(self.comp[o], lens)
        start_ent = np.r_[0, np.cumsum(np.bincount(comp_ent, minlength=self.size.size))[:-1]]
        local = first[ent] - start_ent[comp_ent]  # canonical link name inside the component
        hop = idx - np.repeat(np.r_[0, np.cumsum(lens)[:-1]], lens)
        cap = self.capacity[ent].astype(np.float64)
        with np.errstate(over="ignore"):
            per_ent = mix_hash(local, hop, cap.view(np.uint64))
            t_start = np.r_[0, np.cumsum(lens)[:-1]]
            per_t = np.zeros(o.size, dtype=np.uint64)
            nz = lens > 0
            per_t[nz] = np.add.reduceat(per_ent, t_start[nz])
            per_t = mix_hash(per_t, lens, self.pos[o], self.wire[o].view(np.uint64), self.caps[o].view(np.uint64),
                             self.lat[o].view(np.uint64))
            h = mix_hash(np.add.reduceat(per_t, self.bounds), self.size)
        rep, which = equal_groups(h)
        shape = which.copy()
        # check every member against its class representative, entry by entry (hash-and-check)
        rc = rep[which]  # representative component of each component
        r_t = o[np.minimum(self.bounds[rc][self.comp[o]] + self.pos[o], o.size - 1)]  # rep's transfer, same place
        same_t = ((self.size[rc][self.comp[o]] == self.size[self.comp[o]]) & (lens == np.diff(ip)[r_t])
                  & (self.wire[o] == self.wire[r_t]) & (self.caps[o] == self.caps[r_t]) & (self.lat[o] == self.lat[r_t]))
        pos_of = np.empty(o.size, dtype=np.int64)
        pos_of[o] = np.arange(o.size)
        r_ent = np.minimum(np.repeat(np.r_[0, np.cumsum(lens)][pos_of[r_t]], lens) + hop, ent.size - 1)
        same_e = (local == local[r_ent]) & (cap == cap[r_ent])  # meaningful where same_t (equal lengths)
        bad_t = ~same_t
        bad_t[np.repeat(np.arange(o.size), lens)[~same_e]] = True
        bad = np.unique(self.comp[o][bad_t])
        shape[bad] = rep.size + np.arange(bad.size)  # a collision: those components are their own class
        self._shape = shape
        return shape

    def durations(self, start: np.ndarray, slack: float):
        """``(transfers, durations, drains)`` for the components whose transfers do not start within
        ``slack`` of each other, or ``None`` past :data:`STAGGER_MAX_TRANSFERS` /
        :data:`STAGGER_NEW_PER_TRANSFER` (or a drain past its solve limit)."""
        if self._given is not None:
            self._build()
        s = start[self.order]
        lo = np.minimum.reduceat(s, self.bounds)
        bad = np.flatnonzero(np.maximum.reduceat(s, self.bounds) - lo > slack)
        if not bad.size:
            return bad, np.zeros(0), np.zeros(0)
        if (self.size[bad] > STAGGER_MAX_TRANSFERS).any():
            return None
        shape = self.shapes()
        idx = self.order[(np.repeat(self.bounds[bad], self.size[bad])
                          + np.arange(int(self.size[bad].sum())) - np.repeat(np.r_[0, np.cumsum(self.size[bad])[:-1]],
                                                                               self.size[bad]))]
        c = self.comp[idx]
        off = np.rint((start[idx] - lo[c]) / GRID_S).astype(np.int64)
        first = np.r_[0, np.cumsum(self.size[bad])[:-1]]
        with np.errstate(over="ignore"):
            h = mix_hash(np.add.reduceat((off.astype(np.uint64) + np.uint64(1)) * self._odd[self.pos[idx]], first),
                         shape[bad])
        rep, which = equal_groups(h)
        if not np.array_equal(shape[bad][rep][which], shape[bad]):
            return None  # a hash collision: let the event-driven executor decide
        r_of = np.repeat(first[rep][which], self.size[bad]) + self.pos[idx]  # rep's member at the same place
        if not np.array_equal(off[r_of], off):
            return None
        drains = np.empty(idx.size)
        misses: list = []
        for r in rep.tolist():
            a, b = int(first[r]), int(first[r]) + int(self.size[bad[r]])
            key = (int(shape[bad[r]]), off[a:b].tobytes())
            d = self._cache.get(key)
            if d is None:
                misses.append((a, b, key))
            else:
                drains[a:b] = d
        if misses:
            if len(misses) > max(STAGGER_MIN_NEW, int(self.order.size * STAGGER_NEW_PER_TRANSFER)):
                return None
            if len(self._cache) + len(misses) > STAGGER_TABLE_ENTRIES:
                self._cache.clear()
            where = np.concatenate([np.arange(a, b) for a, b, _ in misses])
            fresh = self._drains(idx[where], off[where], np.r_[0, np.cumsum([b - a for a, b, _ in misses])])
            if fresh is None:
                return None
            drains[where] = fresh
            for a, b, key in misses:
                self._cache[key] = drains[a:b].copy()
        drains = drains[r_of]  # every staggered component takes its class representative's drains
        return idx, self.lat[idx] + drains + self.overhead, drains

    def kernel(self) -> bool:
        """Whether :meth:`advance_compiled` runs this pattern: numba imports and the pattern has
        :data:`STEP_KERNEL_MIN_TRANSFERS` transfers or more."""
        if self._kernel is None:
            if self._m < STEP_KERNEL_MIN_TRANSFERS:
                self._kernel = False
                return False
            try:
                import netsim.network.stepkernel as stepkernel
            except ImportError:  # numba missing or not built for this Python
                stepkernel = False
            self._kernel = stepkernel
        return bool(self._kernel)

    def advance_compiled(self, share: StepShare, x: np.ndarray, src: np.ndarray, dst: np.ndarray,
                         dur: np.ndarray, busy: np.ndarray) -> tuple[np.ndarray, int]:
        """:meth:`Lockstep.advance`: the new finish times and the kernel's code
        (:func:`~netsim.network.stepkernel.lockstep_advance`: 1 if some component was re-timed, 0
        if none was, negative if the check failed)."""
        if self._given is not None:
            self._build()
        m = self.order.size
        if self._static is None:
            self._static = self._kernel_arrays()
            self._table = self._kernel.StepCache(min(1024, STAGGER_TABLE_ENTRIES))
            self._scratch = (np.empty(m), np.empty(self.size.size, dtype=np.int64))
            self._touch = np.zeros(m, dtype=np.bool_)
            self._touch[share.touch] = True
        if self._ends is None or self._ends[3] is not src:  # the pattern's, on every call
            ranks = np.union1d(src, dst).astype(np.int32)
            self._ends = (src.astype(np.int32), dst.astype(np.int32), ranks, src)
        k = self._kernel
        max_new = max(STAGGER_MIN_NEW, int(m * STAGGER_NEW_PER_TRANSFER))
        comps, paths = self._static
        out = np.empty_like(x)
        start, entry = self._scratch
        cleared = False
        while True:
            code = k.lockstep_advance(x, *self._ends[:3], dur, out, start, RTOL, busy, *share.by_transfer(),
                                      self._touch, entry, *comps, share.drain, float(self.overhead), *paths,
                                      STAGGER_MAX_TRANSFERS, max_new, 1024, GRID_S, *self._table.arrays())
            if code != k.FULL:
                return out, int(code)
            if not self._table.grow(STAGGER_TABLE_ENTRIES):  # at full size: emptied, once per step
                if cleared:
                    return out, k.FAIL
                cleared = True

    def _kernel_arrays(self):
        """What :meth:`advance_compiled` passes besides the step: components, shapes, latencies
        and each transfer's path on its component's own link numbers."""
        o, ip = self.order, self.indptr
        lens = np.diff(ip)
        ent_ip, ent = csr_gather(ip, self.links, o)  # entries component by component
        uniq, first, inv = np.unique(ent, return_index=True, return_inverse=True)
        by_first = np.argsort(first, kind="stable")  # links by first use: each component's are contiguous
        rank = np.empty(uniq.size, dtype=np.int64)
        rank[by_first] = np.arange(uniq.size)
        glob = rank[inv.reshape(-1)]
        comp_ent = np.repeat(self.comp[o], lens[o])
        clink = np.zeros(self.size.size + 1, dtype=np.int64)
        np.maximum.at(clink, comp_ent + 1, glob + 1)
        clink = np.maximum.accumulate(clink)
        local = np.empty(ent.size, dtype=np.int64)  # on each transfer's own entries (pattern order)
        hop = np.arange(ent.size) - np.repeat(ent_ip[:-1], lens[o])
        local[np.repeat(ip[:-1][o], lens[o]) + hop] = glob - clink[comp_ent]
        cap_loc = np.asarray(self.capacity, dtype=np.float64)[uniq[by_first]]
        paths = (lens.astype(np.int64), ip[:-1].astype(np.int64), local, cap_loc, clink, self.wire, self.caps)
        comps = (o.astype(np.int32), self.bounds.astype(np.int64), self.size.astype(np.int64),
                 self.shapes().astype(np.int64), self.comp.astype(np.int32), self.pos.astype(np.int32), self.lat)
        return comps, paths

    def _drains(self, members: np.ndarray, off: np.ndarray, comp_ptr: np.ndarray) -> np.ndarray | None:
        """Drain seconds of ``members`` (components ``comp_ptr[c]:comp_ptr[c+1]``, start offsets
        ``off`` in grid units): numba's batch where it imports, else the numpy reference one by one."""
        if self._drain_fn is None:
            try:
                from netsim.network.drainkernel import drain_staggered_batch as fn
            except ImportError:  # numba missing or not built for this Python
                fn = False
            self._drain_fn = fn
        ip, lk = csr_gather(self.indptr, self.links, members)
        t0 = off * GRID_S
        if self._drain_fn:
            fin = self._drain_fn(ip, lk, self.wire[members], self.capacity, t0, self.caps[members], comp_ptr)
            return None if fin is None else fin - t0
        out = np.empty(members.size)
        for a, b in zip(comp_ptr[:-1].tolist(), comp_ptr[1:].tolist()):
            m = members[a:b]
            ip, lk = csr_gather(self.indptr, self.links, m)
            fin = drain_staggered(ip, lk, self.wire[m], self.capacity, t0[a:b], self.caps[m])
            if fin is None:
                return None
            out[a:b] = fin - t0[a:b]
        return out
