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

Small steps done once per flow (marking a block's minimum stale, finding the flows bottlenecked on
a link) are written out inline rather than called: a call passes arrays, and numba counts every
array passed with two atomic operations, which cost more than the step.

The state lives in a few arrays owned by :class:`~netsim.network.compiled.CompiledFlowTable`
(one row per flow, link or entry; columns named by the constants below); the kernels hold none.
A flow's due time, rate and bottleneck link are kept apart from its rows (``due``, ``rate``,
``bneck``: one value a slot), because the scans read them for many flows at once: the block
minimums read ``due`` for 64 slots, the repair's walks over link blocks read ``rate`` and
``bneck`` of every flow on a link.  With ``NUMBA_DISABLE_JIT=1`` the kernels run as plain Python
(slowly), which is how coverage sees them.
"""

from __future__ import annotations

import numpy as np
from netsim.network.kernelcache import kernel


# rows of the per-flow float array ``ff`` and int array ``fi``
REM, TSET, LAT, CAP = range(4)
N_FF = 4
OWNER, LOCAL, PSTART, PLEN, ALIVE = range(5)
N_FI = 5
# rows of the per-link float array ``lf`` and int array ``li``
CAPACITY, USED, LVL, TOP = range(4)
NB, LB_START, LB_COUNT, LB_ROOM, LMAP, MARK = range(6)
# rows of the path-entry pool ``pl``
P_LINK, P_SLOT, P_POS = range(3)
# counters in ``meta``
(M_POOL, M_LB, M_FREE, M_ALIVE, M_FRESH, M_SEEDS, M_DIRTY, M_SOLVES, M_PARTIAL, M_SOLVED,
 M_ROUNDS, M_INCREMENTAL, M_SLOTS) = range(13)
N_META = 13
#: slots per block of the due-time minimums (1 << BLOCK_BITS)
BLOCK_BITS = 6


@kernel
def lb_space(li, links):
    """Pool room the link blocks need to take one more entry per item of ``links``: exactly what
    :func:`add_flows` appends, a full block moving to the end with room ``2 * room + 8``, again
    and again while one call brings a link more entries than the new room holds."""
    need = 0
    for l in links:
        li[l, MARK] += 1
    for l in links:
        k = li[l, MARK]
        if k:
            room = li[l, LB_ROOM]
            while li[l, LB_COUNT] + k > room:
                room = 2 * room + 8
                need += room
            li[l, MARK] = 0
    return need


@kernel
def add_flows(ff, fi, li, pl, lbp, meta, clock, free, fresh, due, rate, bneck, bdirty, dlist, load, busy_since, peak,
              indptr, links, size, lat, cap, owner, local):
    """New flows (CSR paths; capacity already ensured by the caller): slots from the free stack,
    path entries appended to the pool and to their links' blocks.  The network's link counters
    follow (``FlowNetwork._load``): flows on each link, since when it is busy (drained seconds),
    its peak."""
    k = size.size
    for i in range(k):
        meta[M_FREE] -= 1
        s = free[meta[M_FREE]]
        if s >= meta[M_SLOTS]:
            meta[M_SLOTS] = s + 1
        ff[s, REM] = size[i]
        ff[s, TSET] = clock[0]
        due[s] = np.inf
        rate[s] = 0.0
        ff[s, LAT] = lat[i]
        ff[s, CAP] = cap[i]
        fi[s, OWNER] = owner
        fi[s, LOCAL] = local[i]
        bneck[s] = -1
        fi[s, ALIVE] = 1
        a, b = indptr[i], indptr[i + 1]
        fi[s, PSTART] = meta[M_POOL]
        fi[s, PLEN] = b - a
        for j in range(a, b):
            l = links[j]
            p = meta[M_POOL]
            meta[M_POOL] += 1
            pl[p, P_LINK] = l
            pl[p, P_SLOT] = s
            c = li[l, LB_COUNT]
            if c == li[l, LB_ROOM]:  # block full: move it to the end of the pool, twice as roomy
                room = 2 * c + 8
                old, new = li[l, LB_START], meta[M_LB]
                for q in range(c):
                    lbp[new + q, 0] = lbp[old + q, 0]
                    lbp[new + q, 1] = lbp[old + q, 1]
                li[l, LB_START] = new
                li[l, LB_ROOM] = room
                meta[M_LB] += room
            lbp[li[l, LB_START] + c, 0] = s
            lbp[li[l, LB_START] + c, 1] = p
            pl[p, P_POS] = c
            li[l, LB_COUNT] = c + 1
            load[l] = c + 1
            if c == 0:
                busy_since[l] = clock[0]
            if c + 1 > peak[l]:
                peak[l] = c + 1
        fresh[meta[M_FRESH]] = s
        meta[M_FRESH] += 1
        meta[M_ALIVE] += 1
        b = s >> BLOCK_BITS  # its block's minimum is stale (written out here, not called: see the module doc)
        if not bdirty[b]:
            bdirty[b] = 1
            bdirty[dlist.size + (b >> BLOCK_BITS)] = 1  # and its group of 64 blocks
            dlist[meta[M_DIRTY]] = b
            meta[M_DIRTY] += 1


@kernel
def rebuild(ff, fi, li, pl, lbp, meta, new_pl, new_lbp):
    """Lay the pool out afresh (alive flows' entries only) and every link block with flows with room
    for twice its flows and 8 more (a link without flows has none: its first flow moves it to the end);
    writes into ``new_pl``/``new_lbp`` (large enough, from the caller: at most ``10 * entries``)."""
    n_links = li.shape[0]
    for l in range(n_links):
        li[l, LB_COUNT] = 0
    p = 0
    for s in range(meta[M_SLOTS]):
        if fi[s, ALIVE]:
            a = fi[s, PSTART]
            fi[s, PSTART] = p
            for j in range(fi[s, PLEN]):
                l = pl[a + j, P_LINK]
                new_pl[p, P_LINK] = l
                new_pl[p, P_SLOT] = s
                li[l, LB_COUNT] += 1
                p += 1
    meta[M_POOL] = p
    start = 0
    for l in range(n_links):  # a link without flows gets its block with its first flow (add_flows)
        li[l, LB_START] = start
        li[l, LB_ROOM] = 2 * li[l, LB_COUNT] + 8 if li[l, LB_COUNT] else 0
        start += li[l, LB_ROOM]
        li[l, LB_COUNT] = 0
    meta[M_LB] = start
    for q in range(p):
        l = new_pl[q, P_LINK]
        c = li[l, LB_COUNT]
        new_lbp[li[l, LB_START] + c, 0] = new_pl[q, P_SLOT]
        new_lbp[li[l, LB_START] + c, 1] = q
        new_pl[q, P_POS] = c
        li[l, LB_COUNT] = c + 1


@kernel
def _flush(due, meta, bmin, bdirty, dlist):
    """Refresh the minimums of the blocks whose flows changed due times, then of their groups
    of 64 blocks (``bmin[nb + g]``, ``nb`` blocks: the second level)."""
    n = due.shape[0]
    nb = (n >> BLOCK_BITS) + 1
    nd = meta[M_DIRTY]
    for i in range(nd):
        b = dlist[i]
        lo = b << BLOCK_BITS
        hi = min(lo + (1 << BLOCK_BITS), n)
        m = np.inf
        for s in range(lo, hi):
            if due[s] < m:
                m = due[s]
        bmin[b] = m
        bdirty[b] = 0
    for i in range(nd):
        g = dlist[i] >> BLOCK_BITS
        if not bdirty[nb + g]:
            continue
        bdirty[nb + g] = 0
        m = np.inf
        for b in range(g << BLOCK_BITS, min((g + 1) << BLOCK_BITS, nb)):
            if bmin[b] < m:
                m = bmin[b]
        bmin[nb + g] = m
    meta[M_DIRTY] = 0


@kernel
def next_due(due, meta, clock, bmin, bdirty, dlist):
    """Seconds until the first alive flow has drained (``inf`` if none)."""
    if meta[M_ALIVE] == 0:
        return np.inf
    _flush(due, meta, bmin, bdirty, dlist)
    nb = (due.shape[0] >> BLOCK_BITS) + 1
    m = np.inf
    for g in range((meta[M_SLOTS] >> (2 * BLOCK_BITS)) + 1):
        if bmin[nb + g] < m:
            m = bmin[nb + g]
    return m - clock[0]


@kernel
def take_drained(ff, fi, lf, li, pl, lbp, meta, clock, free, due, rate, bneck, bmin, bdirty, dlist, seeds, eps,
                 out_slots, out_links, load, busy_since, busy):
    """Remove the flows due within ``eps`` of the clock; their slots (ascending) and path links
    go to ``out_slots``/``out_links``; returns both counts.  Links left without flows get no
    rate and no rounding residue (``FlowTable.emptied``)."""
    _flush(due, meta, bmin, bdirty, dlist)
    thr = clock[0] + eps
    nd = 0
    nb = (due.shape[0] >> BLOCK_BITS) + 1
    for g in range((meta[M_SLOTS] >> (2 * BLOCK_BITS)) + 1):
        if bmin[nb + g] > thr:
            continue
        for b in range(g << BLOCK_BITS, min((g + 1) << BLOCK_BITS, (meta[M_SLOTS] >> BLOCK_BITS) + 1)):
            if bmin[b] <= thr:
                lo = b << BLOCK_BITS
                for s in range(lo, min(lo + (1 << BLOCK_BITS), meta[M_SLOTS])):
                    if due[s] <= thr:
                        out_slots[nd] = s
                        nd += 1
    nl = 0
    for i in range(nd):  # rates leave the link sums first (FlowTable.remove), then empty links reset
        s = out_slots[i]
        rs = rate[s]
        for e in range(fi[s, PSTART], fi[s, PSTART] + fi[s, PLEN]):
            l = pl[e, P_LINK]
            lf[l, USED] -= rs
            c = li[l, LB_COUNT] - 1  # swap the block's last entry into this one's place
            a = li[l, LB_START]
            last = lbp[a + c, 1]
            pos = pl[e, P_POS]
            lbp[a + pos, 0] = lbp[a + c, 0]
            lbp[a + pos, 1] = last
            pl[last, P_POS] = pos
            li[l, LB_COUNT] = c
            load[l] = c
            if c == 0:
                busy[l] += clock[0] - busy_since[l]
            out_links[nl] = l
            nl += 1
            seeds[meta[M_SEEDS]] = l
            meta[M_SEEDS] += 1
        if bneck[s] >= 0:
            li[bneck[s], NB] -= 1
        bneck[s] = -1
        fi[s, ALIVE] = 0
        rate[s] = 0.0
        due[s] = np.inf
        b = s >> BLOCK_BITS  # its block's minimum is stale (written out here, not called: see the module doc)
        if not bdirty[b]:
            bdirty[b] = 1
            bdirty[dlist.size + (b >> BLOCK_BITS)] = 1  # and its group of 64 blocks
            dlist[meta[M_DIRTY]] = b
            meta[M_DIRTY] += 1
        free[meta[M_FREE]] = s
        meta[M_FREE] += 1
        meta[M_ALIVE] -= 1
    for i in range(nl):
        l = out_links[i]
        if li[l, LB_COUNT] == 0:
            lf[l, USED] = 0.0
            lf[l, TOP] = 0.0
    return nd, nl


@kernel
def set_rates(ff, meta, clock, due, rate, bdirty, dlist, slots, n, rates):
    now = clock[0]
    for i in range(n):
        s = slots[i]
        rem = ff[s, REM] - rate[s] * (now - ff[s, TSET])
        rem = rem if rem > 0.0 else 0.0
        ff[s, REM] = rem
        ff[s, TSET] = now
        r = rates[i]
        rate[s] = r
        due[s] = now + rem / r if r > 0 else np.inf
        b = s >> BLOCK_BITS  # its block's minimum is stale (written out here, not called: see the module doc)
        if not bdirty[b]:
            bdirty[b] = 1
            bdirty[dlist.size + (b >> BLOCK_BITS)] = 1  # and its group of 64 blocks
            dlist[meta[M_DIRTY]] = b
            meta[M_DIRTY] += 1
