"""Compiled kernels of the flow model's event path (numba): the same algorithm as
:class:`~netsim.network.flowtable.FlowTable`, on flat arrays.

Each kernel follows its numpy counterpart step for step (the same solver rounds and tie rule
as :func:`~netsim.network.maxmin.solve_compressed`, the same repair set, certificate, summaries
and limits as ``FlowTable.resolve``), with the constants imported from
:mod:`~netsim.network.flowtable`, so the two differ only in the order of float sums.  What the
compiled layout changes is the cost of each step:

* every link's flows sit in one contiguous block of a pool (removal swaps the last entry in),
  so "the flows on these links" is a walk over blocks, not an index rebuilt and scanned;
* a flow's slot is recycled when it ends (a free stack): only about two steps' flows live at
  once;
* the next completion comes from per-block minimums of the due times (64 slots a block),
  refreshed once per event for the blocks whose flows changed rate.

The state lives in a few arrays owned by :class:`~netsim.network.compiled.CompiledFlowTable`
(rows named by the constants below); the kernels hold none.  With ``NUMBA_DISABLE_JIT=1`` they
run as plain Python (slowly), which is how coverage sees them.
"""

from __future__ import annotations

import numpy as np
from numba import njit


# rows of the per-flow float array ``ff`` and int array ``fi``
REM, TSET, DUE, RATE, LAT, CAP = range(6)
OWNER, LOCAL, PSTART, PLEN, BNECK, ALIVE = range(6)
# rows of the per-link float array ``lf`` and int array ``li``
CAPACITY, USED, LVL, TOP = range(4)
NB, LB_START, LB_COUNT, LB_ROOM, LMAP, MARK = range(6)
# rows of the path-entry pool ``pl``
P_LINK, P_SLOT, P_POS = range(3)
# counters in ``meta``
(M_POOL, M_LB, M_FREE, M_ALIVE, M_FRESH, M_SEEDS, M_DIRTY, M_SOLVES, M_PARTIAL, M_SOLVED,
 M_ROUNDS, M_INCREMENTAL, M_SLOTS, M_SCANNED, M_BAD, M_LEVELS, M_VISITS) = range(17)
N_META = 17
#: slots per block of the due-time minimums (1 << BLOCK_BITS)
BLOCK_BITS = 6


@njit(cache=True)
def lb_space(li, links):
    """Pool room the link blocks need to take one more entry per item of ``links``."""
    need = 0
    for l in links:
        li[MARK, l] += 1
    for l in links:
        k = li[MARK, l]
        if k:
            if li[LB_COUNT, l] + k > li[LB_ROOM, l]:
                need += 2 * (li[LB_COUNT, l] + k) + 8
            li[MARK, l] = 0
    return need


@njit(cache=True)
def _mark_dirty(b, bdirty, dlist, meta):
    if not bdirty[b]:
        bdirty[b] = 1
        dlist[meta[M_DIRTY]] = b
        meta[M_DIRTY] += 1


@njit(cache=True)
def add_flows(ff, fi, li, pl, lbp, meta, clock, free, fresh, bdirty, dlist,
              indptr, links, size, lat, cap, owner, local):
    """New flows (CSR paths; capacity already ensured by the caller): slots from the free stack,
    path entries appended to the pool and to their links' blocks."""
    k = size.size
    for i in range(k):
        meta[M_FREE] -= 1
        s = free[meta[M_FREE]]
        if s >= meta[M_SLOTS]:
            meta[M_SLOTS] = s + 1
        ff[REM, s] = size[i]
        ff[TSET, s] = clock[0]
        ff[DUE, s] = np.inf
        ff[RATE, s] = 0.0
        ff[LAT, s] = lat[i]
        ff[CAP, s] = cap[i]
        fi[OWNER, s] = owner
        fi[LOCAL, s] = local[i]
        fi[BNECK, s] = -1
        fi[ALIVE, s] = 1
        a, b = indptr[i], indptr[i + 1]
        fi[PSTART, s] = meta[M_POOL]
        fi[PLEN, s] = b - a
        for j in range(a, b):
            l = links[j]
            p = meta[M_POOL]
            meta[M_POOL] += 1
            pl[P_LINK, p] = l
            pl[P_SLOT, p] = s
            c = li[LB_COUNT, l]
            if c == li[LB_ROOM, l]:  # block full: move it to the end of the pool, twice as roomy
                room = 2 * c + 8
                old, new = li[LB_START, l], meta[M_LB]
                for q in range(c):
                    lbp[0, new + q] = lbp[0, old + q]
                    lbp[1, new + q] = lbp[1, old + q]
                li[LB_START, l] = new
                li[LB_ROOM, l] = room
                meta[M_LB] += room
            lbp[0, li[LB_START, l] + c] = s
            lbp[1, li[LB_START, l] + c] = p
            pl[P_POS, p] = c
            li[LB_COUNT, l] = c + 1
        fresh[meta[M_FRESH]] = s
        meta[M_FRESH] += 1
        meta[M_ALIVE] += 1
        _mark_dirty(s >> BLOCK_BITS, bdirty, dlist, meta)


@njit(cache=True)
def rebuild(ff, fi, li, pl, lbp, meta, new_pl, new_lbp):
    """Lay the pool out afresh (alive flows' entries only) and every link block with room for
    twice its flows; writes into ``new_pl``/``new_lbp`` (large enough, from the caller)."""
    n_links = li.shape[1]
    for l in range(n_links):
        li[LB_COUNT, l] = 0
    p = 0
    for s in range(meta[M_SLOTS]):
        if fi[ALIVE, s]:
            a = fi[PSTART, s]
            fi[PSTART, s] = p
            for j in range(fi[PLEN, s]):
                l = pl[P_LINK, a + j]
                new_pl[P_LINK, p] = l
                new_pl[P_SLOT, p] = s
                li[LB_COUNT, l] += 1
                p += 1
    meta[M_POOL] = p
    start = 0
    for l in range(n_links):
        li[LB_START, l] = start
        li[LB_ROOM, l] = 2 * li[LB_COUNT, l] + 8
        start += li[LB_ROOM, l]
        li[LB_COUNT, l] = 0
    meta[M_LB] = start
    for q in range(p):
        l = new_pl[P_LINK, q]
        c = li[LB_COUNT, l]
        new_lbp[0, li[LB_START, l] + c] = new_pl[P_SLOT, q]
        new_lbp[1, li[LB_START, l] + c] = q
        new_pl[P_POS, q] = c
        li[LB_COUNT, l] = c + 1


@njit(cache=True)
def _flush(ff, meta, bmin, bdirty, dlist):
    n = ff.shape[1]
    for i in range(meta[M_DIRTY]):
        b = dlist[i]
        lo = b << BLOCK_BITS
        hi = min(lo + (1 << BLOCK_BITS), n)
        m = np.inf
        for s in range(lo, hi):
            if ff[DUE, s] < m:
                m = ff[DUE, s]
        bmin[b] = m
        bdirty[b] = 0
    meta[M_DIRTY] = 0


@njit(cache=True)
def next_due(ff, meta, clock, bmin, bdirty, dlist):
    """Seconds until the first alive flow has drained (``inf`` if none)."""
    if meta[M_ALIVE] == 0:
        return np.inf
    _flush(ff, meta, bmin, bdirty, dlist)
    m = np.inf
    for b in range((meta[M_SLOTS] >> BLOCK_BITS) + 1):
        if bmin[b] < m:
            m = bmin[b]
    return m - clock[0]


@njit(cache=True)
def take_drained(ff, fi, lf, li, pl, lbp, meta, clock, free, bmin, bdirty, dlist, seeds, eps,
                 out_slots, out_links):
    """Remove the flows due within ``eps`` of the clock; their slots (ascending) and path links
    go to ``out_slots``/``out_links``; returns both counts.  Links left without flows get no
    rate and no rounding residue (``FlowTable.emptied``)."""
    _flush(ff, meta, bmin, bdirty, dlist)
    thr = clock[0] + eps
    nd = 0
    for b in range((meta[M_SLOTS] >> BLOCK_BITS) + 1):
        if bmin[b] <= thr:
            lo = b << BLOCK_BITS
            for s in range(lo, min(lo + (1 << BLOCK_BITS), meta[M_SLOTS])):
                if ff[DUE, s] <= thr:
                    out_slots[nd] = s
                    nd += 1
    nl = 0
    for i in range(nd):  # rates leave the link sums first (FlowTable.remove), then empty links reset
        s = out_slots[i]
        rate = ff[RATE, s]
        for e in range(fi[PSTART, s], fi[PSTART, s] + fi[PLEN, s]):
            l = pl[P_LINK, e]
            lf[USED, l] -= rate
            c = li[LB_COUNT, l] - 1  # swap the block's last entry into this one's place
            a = li[LB_START, l]
            last = lbp[1, a + c]
            pos = pl[P_POS, e]
            lbp[0, a + pos] = lbp[0, a + c]
            lbp[1, a + pos] = last
            pl[P_POS, last] = pos
            li[LB_COUNT, l] = c
            out_links[nl] = l
            nl += 1
            seeds[meta[M_SEEDS]] = l
            meta[M_SEEDS] += 1
        if fi[BNECK, s] >= 0:
            li[NB, fi[BNECK, s]] -= 1
        fi[BNECK, s] = -1
        fi[ALIVE, s] = 0
        ff[RATE, s] = 0.0
        ff[DUE, s] = np.inf
        _mark_dirty(s >> BLOCK_BITS, bdirty, dlist, meta)
        free[meta[M_FREE]] = s
        meta[M_FREE] += 1
        meta[M_ALIVE] -= 1
    for i in range(nl):
        l = out_links[i]
        if li[LB_COUNT, l] == 0:
            lf[USED, l] = 0.0
            lf[TOP, l] = 0.0
    return nd, nl


@njit(cache=True)
def set_rates(ff, meta, clock, bdirty, dlist, slots, n, rates):
    now = clock[0]
    for i in range(n):
        s = slots[i]
        rem = ff[REM, s] - ff[RATE, s] * (now - ff[TSET, s])
        rem = rem if rem > 0.0 else 0.0
        ff[REM, s] = rem
        ff[TSET, s] = now
        r = rates[i]
        ff[RATE, s] = r
        ff[DUE, s] = now + rem / r if r > 0 else np.inf
        _mark_dirty(s >> BLOCK_BITS, bdirty, dlist, meta)
