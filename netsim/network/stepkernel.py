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

__all__ = ["StepCache", "lockstep_advance", "FAIL", "FULL"]

#: Return codes of :func:`lockstep_advance` besides 0 (in lockstep) and 1 (some component re-timed).
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
def _find(index, key, shape, ptr, off, h, sh, offs, n):
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
def _retime(start, slack, order, cbounds, csize, shape, lens, estart, inv, cap_loc, clink, wire, caps,
            max_size, max_new, max_solves, grid, index, key, eshape, ptr, off, edrain, used, entry):
    """``entry[c]``: the table entry holding the drains of component ``c`` if its transfers did not
    start within ``slack`` of each other, else -1.  Returns 1 if some component is re-timed, 0 if
    none is, or ``FAIL`` / ``FULL`` as :func:`lockstep_advance`."""
    entry[:] = -1
    offs = np.empty(max(max_size, 1), dtype=np.int64)
    new = 0
    retimed = 0
    for c in range(cbounds.size):
        a = cbounds[c]
        n = csize[c]
        clo = np.inf
        chi = -np.inf
        for j in range(a, a + n):
            clo = min(clo, start[order[j]])
            chi = max(chi, start[order[j]])
        if chi - clo <= slack:
            continue
        if n > max_size:
            return FAIL
        retimed = 1
        h = np.uint64(shape[c])
        for j in range(n):  # FNV-style over the offsets, one splitmix round to finish
            offs[j] = np.int64(np.rint((start[order[a + j]] - clo) / grid))
            h = (h ^ np.uint64(offs[j])) * np.uint64(0x100000001B3)
        h = _mix(h, np.uint64(n))
        e = _find(index, key, eshape, ptr, off, h, shape[c], offs, n)
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
        entry[c] = e
    return retimed


@kernel
def lockstep_advance(x, src, dst, ranks, dur, out, start, rtol, busy, eptr, ent_l, touch, entry,
                     order, cbounds, csize, shape, comp, pos, lat, drain_base, overhead,
                     lens, estart, inv, cap_loc, clink, wire, caps,
                     max_size, max_new, max_solves, grid,
                     index, key, eshape, ptr, off, edrain, used):
    """One step of the recurrence with the lockstep check
    (:class:`~netsim.collectives.lockstep.Lockstep`): transfer ``t`` starts when both ``src[t]``
    and ``dst[t]`` have finished (``x``) and delivers after ``dur[t]``, or after its drain with its
    component's own starts where the component did not start together (:func:`_retime`); ``out``
    gets every rank's finish, the latest of ``x`` and its deliveries.  ``ranks``: the ranks taking part;
    ``eptr``/``ent_l``: each transfer's contended links, ``touch[t]`` whether it has any; ``busy``:
    when each link's last transfer drains, moved on on success.

    Returns ``FAIL`` when a contended link is still busy at a start, a staggered component is
    larger than ``max_size``, more than ``max_new`` drains are new or a drain passes ``max_solves``
    (``out`` then as if timed alone); ``FULL`` when the drain table has no room (nothing else
    changed: grow it and call again); else 1 if some component was re-timed, 0 if not."""
    m = src.size
    lo = np.inf
    hi = -np.inf
    for r in ranks:  # the largest |start| is the latest finish of a rank taking part, if none is < 0
        lo = min(lo, x[r])
        hi = max(hi, x[r])
    top = hi
    if lo < 0:
        top = 0.0
        for t in range(m):
            top = max(top, abs(max(x[src[t]], x[dst[t]])))
    slack = rtol * max(top, 1e-300)
    code = 0
    lo = np.inf  # spread of the starts on contended links
    hi = -np.inf
    for t in range(m):
        s = max(x[src[t]], x[dst[t]])
        start[t] = s
        if touch[t]:
            lo = min(lo, s)
            hi = max(hi, s)
        for q in range(eptr[t], eptr[t + 1]):  # condition 2: no contended link still busy
            if s < busy[ent_l[q]] - slack:
                code = FAIL
    if code == 0 and hi - lo > slack:  # not all together: re-time each staggered component
        code = _retime(start, slack, order, cbounds, csize, shape, lens, estart, inv, cap_loc, clink, wire,
                       caps, max_size, max_new, max_solves, grid, index, key, eshape, ptr, off, edrain, used, entry)
    if code == FULL:
        return code
    out[:] = x
    for t in range(m):
        dv = start[t] + dur[t]
        if code != FAIL:
            d = drain_base[t]
            if code == 1 and entry[comp[t]] >= 0:
                d = edrain[ptr[entry[comp[t]]] + pos[t]]
                dv = start[t] + ((lat[t] + d) + overhead)
            v = start[t] + d  # the contended links are busy until the transfers on them drain
            for q in range(eptr[t], eptr[t + 1]):
                if v > busy[ent_l[q]]:
                    busy[ent_l[q]] = v
        if dv > out[src[t]]:
            out[src[t]] = dv
        if dv > out[dst[t]]:
            out[dst[t]] = dv
    return code
