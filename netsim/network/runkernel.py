"""A whole step program on the compiled flow table, in one kernel (numba): the executor's rule,
the network's clock and the flow table's events without a return to Python per event.

:func:`run` is :class:`~netsim.collectives.executor.CollectiveRun` on a
:class:`~netsim.network.flow.FlowNetwork` with compiled kernels, replayed on arrays: the same
SimPy queue order (a heap keyed by time, priority and a sequence number, ``NORMAL`` then ``LATE``
work of an instant, as :func:`~netsim.network.base.call_late` orders it), the same callbacks
(deliveries grouped by time and by owner, the executor's batches per instant and per step, the
flow table's drain, repair and timer), and the same float operations in the same order.  So a
run gives the event path's floats bit for bit (``tests/test_flowrun.py``).

A *program* is a schedule's phases on flat arrays (:class:`~netsim.network.flowrun.Program`):
step ``g`` belongs to the phase whose ``first <= g < first + repeat``; a transfer of step ``g``
starts when both its ranks have finished step ``g - 1``; a rank finishes a step when every
transfer touching it has been delivered (plus the step's ``overhead`` after each delivery) or,
in a step without transfers, after its ``delay``.  A flow carries ``g * TT + tid`` as its
payload (``TT``: the program's transfer count), so a delivery names its step and transfer.

The kernel returns to Python only to grow an array: ``1`` when its own queue, record or pool
arrays may run short in the next event (``S[S_NEED]`` entries), ``2`` when the flow table needs
room for the flows it is adding (the caller grows the table as
:meth:`~netsim.network.compiled.CompiledFlowTable.add` would, and calls again: the run resumes
where it stopped), ``0`` when the queue is empty.
"""

from __future__ import annotations

import numpy as np

from netsim.network.flowkernel import LAT, LOCAL, OWNER, M_ALIVE, M_FREE, M_LB, M_POOL, add_flows, lb_space
from netsim.network.flowrepair import event as flow_event
from netsim.network.kernelcache import kernel

# SimPy's priorities (simpy.events.NORMAL; base.LATE)
NORMAL, LATE = 1, 2
# what a queued entry does
K_ENTER, K_TIMER, K_DELIVER, K_ITEM, K_DELAY, K_UPDATE, K_FLUSH = range(7)
# integer state ``S``
(S_NH, S_EID, S_NREC, S_NPOOL, S_NPEND, S_NCQ, S_CQI, S_CQC, S_GEN, S_UPD, S_EVENTS, S_DELIV, S_TRANSFERS,
 S_BATCHES, S_OWNER, S_FINISHED, S_NEED, S_NEED_K, S_NEED_NNZ, S_TT, S_TOTAL, S_D) = range(22)
N_S = 22
# float state ``F``: the clock, the flows' clock (FlowNetwork._t), drained seconds
F_NOW, F_T, F_DRAINED = range(3)
N_F = 3


@kernel
def _less(t1, p1, e1, t2, p2, e2):
    return t1 < t2 or (t1 == t2 and (p1 < p2 or (p1 == p2 and e1 < e2)))


@kernel
def _push(hf, hi, S, t, prio, kind, arg):
    """Queue ``(t, prio, next sequence number)`` (SimPy's heap entry) with what it does."""
    eid = S[S_EID]
    S[S_EID] = eid + 1
    i = S[S_NH]
    S[S_NH] = i + 1
    while i > 0:
        p = (i - 1) >> 1
        if not _less(t, prio, eid, hf[p], hi[p, 0], hi[p, 1]):
            break
        hf[i] = hf[p]
        for c in range(4):
            hi[i, c] = hi[p, c]
        i = p
    hf[i] = t
    hi[i, 0] = prio
    hi[i, 1] = eid
    hi[i, 2] = kind
    hi[i, 3] = arg


@kernel
def _pop(hf, hi, S):
    """Take the first entry: ``(time, kind, arg)``."""
    t, kind, arg = hf[0], hi[0, 2], hi[0, 3]
    n = S[S_NH] - 1
    S[S_NH] = n
    if n == 0:
        return t, kind, arg
    lt, lp, le, lk, la = hf[n], hi[n, 0], hi[n, 1], hi[n, 2], hi[n, 3]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and _less(hf[c + 1], hi[c + 1, 0], hi[c + 1, 1], hf[c], hi[c, 0], hi[c, 1]):
            c += 1
        if not _less(hf[c], hi[c, 0], hi[c, 1], lt, lp, le):
            break
        hf[i] = hf[c]
        for q in range(4):
            hi[i, q] = hi[c, q]
        i = c
    hf[i] = lt
    hi[i, 0] = lp
    hi[i, 1] = le
    hi[i, 2] = lk
    hi[i, 3] = la
    return t, kind, arg


@kernel
def _call_at(hf, hi, S, F, t, kind, arg):
    """``Network.call_at``: a SimPy timeout of ``max(t - now, 0)``."""
    d = t - F[F_NOW]
    _push(hf, hi, S, F[F_NOW] + (d if d > 0.0 else 0.0), NORMAL, kind, arg)


@kernel
def _record(ri, rf, S, start, ln, g, t):
    k = S[S_NREC]
    S[S_NREC] = k + 1
    ri[k, 0] = start
    ri[k, 1] = ln
    ri[k, 2] = g
    rf[k] = t
    return k


@kernel
def _deliver(hf, hi, S, F, ri, rf, pool, codes, times, k):
    """``Network._deliver``: the payloads ``codes[:k]`` grouped by their ``times`` (increasing; each
    group in the given order), one queued delivery per group."""
    order = np.argsort(times[:k], kind="mergesort")
    i = 0
    while i < k:
        t = times[order[i]]
        start = S[S_NPOOL]
        j = i
        while j < k and times[order[j]] == t:
            pool[S[S_NPOOL]] = codes[order[j]]
            S[S_NPOOL] += 1
            j += 1
        rec = _record(ri, rf, S, start, j - i, 0, t)
        _call_at(hf, hi, S, F, t, K_DELIVER, rec)
        S[S_DELIV] += 1
        i = j


@kernel
def _phase(ph_first, ph_rep, g):
    for p in range(ph_first.size):
        if g < ph_first[p] + ph_rep[p]:
            return p
    return -1


@kernel
def _submit(P, R, g, ready, k):
    """``CollectiveRun._submit`` and ``FlowNetwork.submit``: link bytes, path latencies (one running
    sum over the submission's paths, as ``csr_sum``), deliveries of the transfers that move
    nothing, and the others queued to join the flow table when this event ends (:func:`_commit`)."""
    (ph_first, ph_rep, ph_ntr, ph_delay, ph_over, tr_es, tr_ed, tr_bytes, tr_cap, rt_ptr, rt_links, touch_ptr,
     touch, degree, start, link_lat) = P
    hf, hi, S, F, ri, rf, pool, pend, cq, cqc, cql, cur, rem, t_done, link_bytes = R
    S[S_TRANSFERS] += k
    TT = S[S_TT]
    codes = np.empty(k, dtype=np.int64)
    times = np.empty(k)
    nloc = 0
    c = 0.0
    owner_start = S[S_CQC]
    for i in range(k):
        tid = ready[i]
        a, b = rt_ptr[tid], rt_ptr[tid + 1]
        c0 = c
        for e in range(a, b):
            link_bytes[rt_links[e]] += tr_bytes[tid]
            c += link_lat[rt_links[e]]
        lat = c - c0
        if b == a or tr_bytes[tid] <= 0.0:
            codes[nloc] = g * TT + tid
            times[nloc] = F[F_NOW] + (0.0 if tr_bytes[tid] > 0.0 else lat)
            nloc += 1
        else:
            cqc[S[S_CQC]] = g * TT + tid
            cql[S[S_CQC]] = lat
            S[S_CQC] += 1
    if nloc:
        _deliver(hf, hi, S, F, ri, rf, pool, codes, times, nloc)
    if S[S_CQC] > owner_start:
        n = S[S_NCQ]
        cq[n, 0] = S[S_OWNER]
        cq[n, 1] = owner_start
        cq[n, 2] = S[S_CQC] - owner_start
        S[S_NCQ] = n + 1
        S[S_OWNER] += 1
        if not S[S_UPD]:  # FlowNetwork._schedule_update
            S[S_UPD] = 1
            _push(hf, hi, S, F[F_NOW], LATE, K_UPDATE, 0)


@kernel
def _enter_step(P, R, r, n, g):
    """``CollectiveRun._enter_step``: ranks ``r[:n]`` enter step ``g``; returns the idle ones
    (moved to the front of ``r``) and their count."""
    (ph_first, ph_rep, ph_ntr, ph_delay, ph_over, tr_es, tr_ed, tr_bytes, tr_cap, rt_ptr, rt_links, touch_ptr,
     touch, degree, start, link_lat) = P
    hf, hi, S, F, ri, rf, pool, pend, cq, cqc, cql, cur, rem, t_done, link_bytes = R
    p = _phase(ph_first, ph_rep, g)
    for i in range(n):
        cur[r[i]] = g
    if ph_ntr[p] == 0:
        if ph_delay[p] > 0:
            s0 = S[S_NPOOL]
            for i in range(n):
                pool[s0 + i] = r[i]
            S[S_NPOOL] += n
            rec = _record(ri, rf, S, s0, n, g, 0.0)
            _call_at(hf, hi, S, F, F[F_NOW] + ph_delay[p], K_DELAY, rec)
            return 0
        return n
    m = 0
    for i in range(n):
        rem[r[i]] = degree[p, r[i]]
        m += touch_ptr[p, r[i] + 1] - touch_ptr[p, r[i]]
    cand = np.empty(m, dtype=np.int64)
    m = 0
    for i in range(n):
        for q in range(touch_ptr[p, r[i]], touch_ptr[p, r[i] + 1]):
            cand[m] = touch[q]
            m += 1
    cand.sort()
    k = 0
    for i in range(m):
        tid = cand[i]
        if (i == 0 or tid != cand[i - 1]) and cur[tr_es[tid]] == g and cur[tr_ed[tid]] == g:
            cand[k] = tid
            k += 1
    if k:
        _submit(P, R, g, cand, k)
    idle = 0
    for i in range(n):
        if degree[p, r[i]] == 0:
            r[idle] = r[i]
            idle += 1
    return idle


@kernel
def _enter(P, R, ranks, n, g0):
    """``CollectiveRun._enter``: ranks that finished their previous step now enter ``g0``, and
    go on through the steps they are idle in."""
    cur, t_done = R[11], R[13]
    S, F = R[2], R[3]
    total = S[S_TOTAL]
    S[S_BATCHES] += 1
    wr = ranks[:n].copy()
    ws = np.full(n, g0, dtype=np.int64)
    while n > 0:
        k = 0
        for i in range(n):
            if ws[i] >= total:
                cur[wr[i]] = total
                t_done[wr[i]] = F[F_NOW]
                S[S_FINISHED] += 1
            else:
                wr[k] = wr[i]
                ws[k] = ws[i]
                k += 1
        n = k
        if n == 0:
            return
        g = ws[:n].min()
        mine = np.empty(n, dtype=np.int64)
        nm, k = 0, 0
        for i in range(n):
            if ws[i] == g:
                mine[nm] = wr[i]
                nm += 1
            else:
                wr[k] = wr[i]
                ws[k] = ws[i]
                k += 1
        idle = _enter_step(P, R, mine, nm, g)
        for i in range(idle):
            wr[k] = mine[i]
            ws[k] = g + 1
            k += 1
        n = k


@kernel
def _step_done(P, R, ranks, n, g):
    t_done, F = R[13], R[3]
    for i in range(n):
        t_done[ranks[i]] = F[F_NOW]
    _enter(P, R, ranks, n, g + 1)


@kernel
def _flush(P, R):
    """``CollectiveRun._flush``: the deliveries of this instant, step by step (increasing), each
    step's in arrival order; the ranks they complete move on."""
    tr_es, tr_ed = P[5], P[6]
    S, ri, pool, pend, rem = R[2], R[4], R[6], R[7], R[12]
    TT = S[S_TT]
    n = S[S_NPEND]
    items = pend[:n].copy()
    S[S_NPEND] = 0
    gs = np.empty(n, dtype=np.int64)
    for i in range(n):
        gs[i] = pool[ri[items[i], 0]] // TT
    order = np.argsort(gs, kind="mergesort")
    i = 0
    while i < n:
        g = gs[order[i]]
        done = np.empty(0, dtype=np.int64)
        nd = 0
        j = i
        while j < n and gs[order[j]] == g:
            j += 1
        for side in range(2):
            ends = tr_es if side == 0 else tr_ed
            for q in range(i, j):
                a, ln = ri[items[order[q]], 0], ri[items[order[q]], 1]
                for e in range(a, a + ln):
                    r = ends[pool[e] % TT]
                    rem[r] -= 1
                    if rem[r] == 0:
                        if nd == done.size:
                            grown = np.empty(2 * nd + 8, dtype=np.int64)
                            grown[:nd] = done[:nd]
                            done = grown
                        done[nd] = r
                        nd += 1
        if nd:
            done = np.sort(done[:nd])
            _step_done(P, R, done, nd, g)
        i = j


@kernel
def _advance(T, F):
    """``FlowNetwork._advance``: the flows drain up to now."""
    dt = F[F_NOW] - F[F_T]
    if dt > 0:
        T[7][0] += dt
        F[F_DRAINED] += dt
        F[F_T] = F[F_NOW]


@kernel
def _commit(P, R, T, sc_ptr, sc_links, sc_size, sc_lat, sc_cap, sc_local):
    """The flows of this event's submissions join the table, in submission order
    (``CompiledFlowTable.add``); returns 2 (nothing added for that submission) when the table
    needs room first (``S[S_NEED_K]`` flows, ``S[S_NEED_NNZ]`` path entries: in ``sc_links``)."""
    tr_bytes, tr_cap, rt_ptr, rt_links = P[7], P[8], P[9], P[10]
    S, F, cq, cqc, cql = R[2], R[3], R[8], R[9], R[10]
    (ff, fi, lf, li, pl, lbp, meta, clock, free, fresh, seeds, due, rate, bneck, bmin, bdirty, dlist,
     w, done, out_links, load, busy_since, busy, peak) = T
    TT = S[S_TT]
    while S[S_CQI] < S[S_NCQ]:
        q = S[S_CQI]
        owner, a, k = cq[q, 0], cq[q, 1], cq[q, 2]
        nnz = 0
        sc_ptr[0] = 0
        for i in range(k):
            code = cqc[a + i]
            tid = code % TT
            for e in range(rt_ptr[tid], rt_ptr[tid + 1]):
                sc_links[nnz] = rt_links[e]
                nnz += 1
            sc_ptr[i + 1] = nnz
            sc_size[i] = tr_bytes[tid]
            sc_lat[i] = cql[a + i]
            sc_cap[i] = tr_cap[tid]
            sc_local[i] = code
        _advance(T, F)
        if meta[M_FREE] < k or meta[M_POOL] + nnz > pl.shape[0] or \
                meta[M_LB] + lb_space(li, sc_links[:nnz]) > lbp.shape[0]:
            S[S_NEED_K] = k
            S[S_NEED_NNZ] = nnz
            return 2
        add_flows(ff, fi, li, pl, lbp, meta, clock, free, fresh, due, rate, bneck, bdirty, dlist, load, busy_since,
                  peak, sc_ptr[:k + 1], sc_links[:nnz], sc_size[:k], sc_lat[:k], sc_cap[:k], owner, sc_local[:k])
        S[S_CQI] = q + 1
    S[S_NCQ] = 0
    S[S_CQI] = 0
    S[S_CQC] = 0
    return 0


@kernel
def _update(P, R, T):
    """``FlowNetwork._update`` on the compiled table: drain, take the flows due now, repair the
    rates, hand the drained flows over (by owner, then by delivery time) and re-arm the timer."""
    hf, hi, S, F, ri, rf, pool = R[0], R[1], R[2], R[3], R[4], R[5], R[6]
    (ff, fi, lf, li, pl, lbp, meta, clock, free, fresh, seeds, due, rate, bneck, bmin, bdirty, dlist,
     w, done, out_links, load, busy_since, busy, peak) = T
    S[S_UPD] = 0
    S[S_EVENTS] += 1
    _advance(T, F)
    now = max(F[F_NOW], F[F_T])
    nd, t_next = flow_event(ff, fi, lf, li, pl, lbp, meta, clock, free, fresh, seeds, due, rate, bneck, bmin,
                            bdirty, dlist, 64.0 * np.spacing(now), w, done, out_links, load, busy_since, busy)
    if nd:
        codes = np.empty(nd, dtype=np.int64)
        times = np.empty(nd)
        a = 0
        while a < nd:  # FlowNetwork._hand_over: one owner at a time
            b = a + 1
            while b < nd and fi[done[b], OWNER] == fi[done[a], OWNER]:
                b += 1
            for i in range(a, b):
                codes[i - a] = fi[done[i], LOCAL]
                times[i - a] = now + ff[done[i], LAT]
            _deliver(hf, hi, S, F, ri, rf, pool, codes, times, b - a)
            a = b
    if np.isfinite(t_next):  # FlowNetwork._arm_timer
        S[S_GEN] += 1
        _call_at(hf, hi, S, F, max(F[F_T], F[F_NOW]) + max(t_next, 0.0), K_TIMER, S[S_GEN])


@kernel
def _dispatch(P, R, T, kind, arg):
    """One queued entry's work (the callbacks of the event path)."""
    ph_first, ph_rep, ph_over = P[0], P[1], P[4]
    hf, hi, S, F, ri, rf, pool, pend = R[0], R[1], R[2], R[3], R[4], R[5], R[6], R[7]
    if kind == K_UPDATE:
        _update(P, R, T)
    elif kind == K_FLUSH:
        _flush(P, R)
    elif kind == K_TIMER:
        if arg == S[S_GEN] and not S[S_UPD]:
            S[S_UPD] = 1
            _push(hf, hi, S, F[F_NOW], LATE, K_UPDATE, 0)
    elif kind == K_DELIVER or kind == K_ITEM:
        if kind == K_DELIVER:
            tt = rf[arg]
            t = tt + (F[F_NOW] - tt)  # the time the callback is told (Network._since)
            over = ph_over[_phase(ph_first, ph_rep, pool[ri[arg, 0]] // S[S_TT])]
            if over > 0:
                _call_at(hf, hi, S, F, t + over, K_ITEM, arg)
                return
        if S[S_NPEND] == 0:  # CollectiveRun._coalesce
            _push(hf, hi, S, F[F_NOW], LATE, K_FLUSH, 0)
        pend[S[S_NPEND]] = arg
        S[S_NPEND] += 1
    elif kind == K_ENTER:
        _enter(P, R, pool[ri[arg, 0]:ri[arg, 0] + ri[arg, 1]], ri[arg, 1], 0)
    elif kind == K_DELAY:
        _step_done(P, R, pool[ri[arg, 0]:ri[arg, 0] + ri[arg, 1]].copy(), ri[arg, 1], ri[arg, 2])


@kernel
def run(P, R, T, sc_ptr, sc_links, sc_size, sc_lat, sc_cap, sc_local):
    """Run until the queue is empty (0), or until an array must grow (1: this package's,
    ``S[S_NEED]`` free entries each; 2: the flow table's, see :func:`_commit`)."""
    hf, hi, S, F, ri, rf, pool, pend = R[0], R[1], R[2], R[3], R[4], R[5], R[6], R[7]
    meta = T[6]
    while True:
        code = _commit(P, R, T, sc_ptr, sc_links, sc_size, sc_lat, sc_cap, sc_local)
        if code:
            return code
        if S[S_NH] == 0:
            return 0
        need = meta[M_ALIVE] + S[S_D] + 16
        if (hf.size - S[S_NH] < need or pool.size - S[S_NPOOL] < need or ri.shape[0] - S[S_NREC] < need
                or pend.size - S[S_NPEND] < 2):
            S[S_NEED] = need
            return 1
        t, kind, arg = _pop(hf, hi, S)
        F[F_NOW] = t
        _dispatch(P, R, T, kind, arg)
