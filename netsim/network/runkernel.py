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
in a step without transfers, after its ``delay``.  A flow's payload names its step and transfer
(:mod:`~netsim.network.runsteps`, which holds the executor's half, fast-forward included;
:mod:`~netsim.network.runqueue` holds the queue).

The kernel returns to Python only to grow an array: ``1`` when its own queue, record or pool
arrays may run short in the next event (``S[S_NEED]`` entries), ``2`` when the flow table needs
room for the flows it is adding (the caller grows the table as
:meth:`~netsim.network.compiled.CompiledFlowTable.add` would, and calls again: the run resumes
where it stopped), ``0`` when the queue is empty.
"""

from __future__ import annotations

import numpy as np

from netsim.network.flowkernel import LAT, LOCAL, M_ALIVE, M_FREE, M_LB, M_POOL, OWNER, add_flows, lb_space
from netsim.network.flowrepair import event as flow_event
from netsim.network.kernelcache import kernel
from netsim.network.runqueue import (F_NOW, F_T, K_DELAY, K_DELIVER, K_ENTER, K_FLUSH, K_ITEM, K_TIMER, K_UPDATE,
                                     LATE, S_CQC, S_CQI, S_D, S_EVENTS, S_GEN, S_NCQ, S_NEED, S_NEED_K, S_NEED_NNZ,
                                     S_NH, S_NJ, S_NPEND, S_NPOOL, S_NREC, S_TOTAL, S_TT, S_UPD, advance, call_at,
                                     call_late, deliver, phase, pop)
from netsim.network.runsteps import enter, flush, step_done


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
        advance(clock, F)
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
def _update(R, T):
    """``FlowNetwork._update`` on the compiled table: drain, take the flows due now, repair the
    rates, hand the drained flows over (by owner, then by delivery time) and re-arm the timer."""
    hf, hi, S, F, ri, rf, pool = R[0], R[1], R[2], R[3], R[4], R[5], R[6]
    (ff, fi, lf, li, pl, lbp, meta, clock, free, fresh, seeds, due, rate, bneck, bmin, bdirty, dlist,
     w, done, out_links, load, busy_since, busy, peak) = T
    S[S_UPD] = 0
    S[S_EVENTS] += 1
    advance(clock, F)
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
            deliver(hf, hi, S, F, ri, rf, pool, codes, times, b - a)
            a = b
    if np.isfinite(t_next):  # FlowNetwork._arm_timer
        S[S_GEN] += 1
        call_at(hf, hi, S, F, max(F[F_T], F[F_NOW]) + max(t_next, 0.0), K_TIMER, S[S_GEN])


@kernel
def _dispatch(P, R, T, kind, arg):
    """One queued entry's work (the callbacks of the event path)."""
    ph_first, ph_rep, ph_over = P[0], P[1], P[4]
    hf, hi, S, F, ri, rf, pool, pend = R[0], R[1], R[2], R[3], R[4], R[5], R[6], R[7]
    if kind == K_UPDATE:
        _update(R, T)
    elif kind == K_FLUSH:
        flush(P, R)
    elif kind == K_TIMER:
        if arg == S[S_GEN] and not S[S_UPD]:
            S[S_UPD] = 1
            call_late(hf, hi, S, F, K_UPDATE)
    elif kind == K_DELIVER or kind == K_ITEM:
        if kind == K_DELIVER:
            tt = rf[arg]
            t = tt + (F[F_NOW] - tt)  # the time the callback is told (Network._since)
            g = (pool[ri[arg, 0]] // S[S_TT]) % S[S_TOTAL]
            over = ph_over[phase(ph_first, ph_rep, g)]
            if over > 0:
                call_at(hf, hi, S, F, t + over, K_ITEM, arg)
                return
        if S[S_NPEND] == 0:  # CollectiveRun._coalesce
            call_late(hf, hi, S, F, K_FLUSH)
        pend[S[S_NPEND]] = arg
        S[S_NPEND] += 1
    elif kind == K_ENTER:
        enter(P, R, pool[ri[arg, 0]:ri[arg, 0] + ri[arg, 1]], ri[arg, 1], ri[arg, 2])
    elif kind == K_DELAY:
        step_done(P, R, pool[ri[arg, 0]:ri[arg, 0] + ri[arg, 1]].copy(), ri[arg, 1], ri[arg, 2])


@kernel
def run(P, R, T, sc_ptr, sc_links, sc_size, sc_lat, sc_cap, sc_local):
    """Run until the queue is empty (0), or until an array must grow (1: this package's,
    ``S[S_NEED]`` free entries each; 2: the flow table's, see :func:`_commit`)."""
    hf, hi, S, F, ri, rf, pool, pend, eshift = R[0], R[1], R[2], R[3], R[4], R[5], R[6], R[7], R[19]
    meta = T[6]
    while True:
        code = _commit(P, R, T, sc_ptr, sc_links, sc_size, sc_lat, sc_cap, sc_local)
        if code:
            return code
        if S[S_NH] == 0:
            return 0
        need = meta[M_ALIVE] + S[S_D] + 16
        if (hf.shape[0] - S[S_NH] < need or pool.size - S[S_NPOOL] < need or ri.shape[0] - S[S_NREC] < need
                or pend.size - S[S_NPEND] < 2):
            S[S_NEED] = need
            return 1
        t, kind, arg, asked, epoch = pop(hf, hi, S)
        F[F_NOW] = t
        if kind != K_UPDATE and kind != K_FLUSH:
            moved = eshift[S[S_NJ]] - eshift[epoch]
            if moved:  # made before a shift: due that much later (Network._fire)
                call_at(hf, hi, S, F, asked + moved, kind, arg)
                continue
        _dispatch(P, R, T, kind, arg)
