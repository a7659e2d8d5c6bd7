"""One step of the lockstep check with staggered components, compiled (numba).

:class:`~netsim.collectives.lockstep.Lockstep` follows a schedule step by step: it checks that no
transfer starts on a contended link still occupied by an earlier step, re-times every component
whose transfers start at different instants as the fluid drain of its own transfers
(:class:`~netsim.collectives.lockstep.Stagger`), and moves each contended link's busy time on.  In
numpy that is some thirty passes over every transfer and link entry of the step, plus a Python
loop over the distinct drains; here it is one pass, and a drain is looked up in a table keyed by
the component's shape class and grid offsets (checked entry by entry, so a hash collision costs a
probe, never a wrong drain).  Every float is computed as the numpy path computes it, so results are
identical; ``tests/test_stagger.py`` checks that.
"""

from __future__ import annotations

import numpy as np

from netsim.network.drainkernel import drain_one
from netsim.network.kernelcache import kernel

__all__ = ["StepCache", "lockstep_advance", "lockstep_step", "FAIL", "FULL"]

#: Return codes of :func:`lockstep_step` besides 0 (in lockstep) and 1 (some component re-timed).
FAIL, FULL = -1, -2


class StepCache:
    """The drain table of one step pattern: ``entries`` drains of at most 16 transfers each on
    average, in an open-addressed index twice as large (grown by :meth:`grow` when the kernel says
    ``FULL``)."""

    def __init__(self, entries: int = 1024):
        self.entries = entries
        self.index = np.full(2 * entries, -1, dtype=np.int64)
        self.key = np.zeros(entries, dtype=np.uint64)
        self.shape = np.zeros(entries, dtype=np.int64)
        self.ptr = np.zeros(entries + 1, dtype=np.int64)
        self.off = np.zeros(16 * entries, dtype=np.int64)
        self.drain = np.zeros(16 * entries)
        self.used = np.zeros(1, dtype=np.int64)  # entries in use

    def grow(self, max_entries: int) -> bool:
        """Start over with twice the room, or empty at the same size when already at
        ``max_entries`` (then False)."""
        grown = self.entries < max_entries
        self.__init__(min(2 * self.entries, max_entries) if grown else self.entries)
        return grown

    def arrays(self):
        return self.index, self.key, self.shape, self.ptr, self.off, self.drain, self.used


@kernel
def _mix(h, v):
    """One splitmix64 round of ``v`` into ``h`` (both uint64)."""
    h ^= v
    h += np.uint64(0x9E3779B97F4A7C15)
    h ^= h >> np.uint64(30)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(27)
    h *= np.uint64(0x94D049BB133111EB)
    h ^= h >> np.uint64(31)
    return h


@kernel
def _find(index, key, shape, ptr, off, used, h, sh, offs, n):
    """Entry of (``sh``, ``offs[:n]``) in the table, or ``-1 - slot`` of the empty slot to fill."""
    mask = index.size - 1
    slot = np.int64(h & np.uint64(mask))
    while True:
        e = index[slot]
        if e < 0:
            return -1 - slot
        if key[e] == h and shape[e] == sh and ptr[e + 1] - ptr[e] == n:
            same = True
            for j in range(n):
                if off[ptr[e] + j] != offs[j]:
                    same = False
                    break
            if same:
                return e
        slot = (slot + 1) & mask


@kernel
def _drain_component(members, offs, grid, lens, estart, wire, caps, inv, cap_used, max_solves, drain):
    """``drain[j]``: seconds ``members[j]`` takes to drain when it starts ``offs[j]`` grid units in
    and the component's other members drain beside it (False past ``max_solves`` solves)."""
    n = members.size
    l_len = np.empty(n, dtype=np.int64)  # the members numbered 0..n-1
    l_start = np.empty(n, dtype=np.int64)
    l_bytes = np.empty(n)
    l_cap = np.empty(n)
    t0 = np.empty(n)
    fin = np.empty(n)
    arr = np.empty(n, dtype=np.int64)
    na = 0  # live members by start offset (stable: insertion sort)
    for j in range(n):
        f = members[j]
        l_len[j] = lens[f]
        l_start[j] = estart[f]
        l_bytes[j] = wire[f]
        l_cap[j] = caps[f]
        t0[j] = np.float64(offs[j]) * grid
        fin[j] = t0[j]
        if lens[f] > 0 and wire[f] > 0:
            p = na
            while p > 0 and t0[arr[p - 1]] > t0[j]:
                arr[p] = arr[p - 1]
                p -= 1
            arr[p] = j
            na += 1
    if na and not drain_one(l_len, l_start, inv, cap_used.size, cap_used, l_bytes, l_cap, t0, arr[:na], max_solves,
                            fin):
        return False
    for j in range(n):
        drain[j] = fin[j] - t0[j]
    return True


@kernel
def lockstep_step(start, deliv, busy, slack, ent_t, ent_l, touch, drain,
                  order, cbounds, csize, shape, lat, drain_base, overhead,
                  lens, estart, inv, cap_loc, clink, wire, caps,
                  max_size, max_new, max_solves, grid,
                  index, key, eshape, ptr, off, edrain, used):
    """Check and time one step (pattern order ``start``, ``deliv`` = start + duration, adjusted in
    place): ``FAIL`` when a contended link is still busy, a staggered component is too large, more
    than ``max_new`` drains are new or a drain passes ``max_solves``; ``FULL`` when the table has no
    room (nothing else changed: grow it and call again); else 1 if some component was re-timed, 0 if not.
    ``busy`` moves on only on success; ``drain`` is scratch (one per transfer).  See
    :class:`~netsim.collectives.lockstep.Lockstep`."""
    for e in range(ent_t.size):  # condition 2: no contended link still busy (entries by transfer)
        if start[ent_t[e]] < busy[ent_l[e]] - slack:
            return FAIL
    drain[:] = drain_base
    retimed = 0
    lo = np.inf
    hi = -np.inf
    for t in touch:
        v = start[t]
        lo = min(lo, v)
        hi = max(hi, v)
    if touch.size and hi - lo > slack:  # not all together: re-time each staggered component
        nc = cbounds.size
        bad = np.empty(nc, dtype=np.int64)
        base = np.empty(nc)
        nbad = 0
        for c in range(nc):
            a = cbounds[c]
            clo = np.inf
            chi = -np.inf
            for j in range(a, a + csize[c]):
                v = start[order[j]]
                clo = min(clo, v)
                chi = max(chi, v)
            if chi - clo > slack:
                bad[nbad] = c
                base[nbad] = clo
                nbad += 1
        for q in range(nbad):
            if csize[bad[q]] > max_size:
                return FAIL
        entry = np.empty(nbad, dtype=np.int64)
        offs = np.empty(max(max_size, 1), dtype=np.int64)
        new = 0
        for q in range(nbad):
            c = bad[q]
            a = cbounds[c]
            n = csize[c]
            h = np.uint64(shape[c])
            for j in range(n):  # FNV-style over the offsets, one splitmix round to finish
                offs[j] = np.int64(np.rint((start[order[a + j]] - base[q]) / grid))
                h = (h ^ np.uint64(offs[j])) * np.uint64(0x100000001B3)
            h = _mix(h, np.uint64(n))
            e = _find(index, key, eshape, ptr, off, used, h, shape[c], offs, n)
            if e < 0:
                new += 1
                if new > max_new:
                    return FAIL
                k = used[0]
                if k + 1 > key.size or ptr[k] + n > off.size or 2 * (k + 1) > index.size:
                    return FULL
                if not _drain_component(order[a:a + n], offs[:n], grid, lens, estart, wire, caps, inv,
                                        cap_loc[clink[c]:clink[c + 1]], max_solves, edrain[ptr[k]:ptr[k] + n]):
                    return FAIL
                index[-1 - e] = k
                key[k] = h
                eshape[k] = shape[c]
                ptr[k + 1] = ptr[k] + n
                off[ptr[k]:ptr[k + 1]] = offs[:n]
                used[0] = k + 1
                e = k
            entry[q] = e
        for q in range(nbad):
            a = cbounds[bad[q]]
            p0 = ptr[entry[q]]
            for j in range(csize[bad[q]]):
                f = order[a + j]
                d = edrain[p0 + j]
                drain[f] = d
                deliv[f] = start[f] + ((lat[f] + d) + overhead)
        retimed = 1 if nbad else 0
    for e in range(ent_t.size):  # the contended links are busy until the step's transfers on them drain
        f = ent_t[e]
        v = start[f] + drain[f]
        if v > busy[ent_l[e]]:
            busy[ent_l[e]] = v
    return retimed


@kernel
def lockstep_advance(x, src, dst, dur, out, start, deliv, rtol, busy, ent_t, ent_l, touch, drain,
                     order, cbounds, csize, shape, lat, drain_base, overhead,
                     lens, estart, inv, cap_loc, clink, wire, caps,
                     max_size, max_new, max_solves, grid,
                     index, key, eshape, ptr, off, edrain, used):
    """One step of the recurrence with its check (:func:`lockstep_step`): transfer ``t`` starts
    when both ``src[t]`` and ``dst[t]`` have finished (``x``) and delivers after ``dur[t]`` (or its
    re-timed drain); ``out`` gets every rank's finish, the latest of ``x`` and its deliveries.
    Returns what :func:`lockstep_step` does (``out`` is filled unless ``FULL``)."""
    top = 0.0
    for t in range(src.size):
        s = max(x[src[t]], x[dst[t]])
        start[t] = s
        deliv[t] = s + dur[t]
        top = max(top, abs(s))
    code = lockstep_step(start, deliv, busy, rtol * max(top, 1e-300), ent_t, ent_l, touch, drain,
                         order, cbounds, csize, shape, lat, drain_base, overhead,
                         lens, estart, inv, cap_loc, clink, wire, caps,
                         max_size, max_new, max_solves, grid,
                         index, key, eshape, ptr, off, edrain, used)
    if code == FULL:
        return code
    out[:] = x
    for t in range(src.size):
        d = deliv[t]
        if d > out[src[t]]:
            out[src[t]] = d
        if d > out[dst[t]]:
            out[dst[t]] = d
    return code
