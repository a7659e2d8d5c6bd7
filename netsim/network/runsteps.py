"""The executor's half of the whole-run kernel (numba; see :mod:`~netsim.network.runkernel`):
:class:`~netsim.collectives.executor.CollectiveRun`'s rule on arrays, fast-forward included.

``P`` is the program (:func:`~netsim.network.flowrun.run` lists its arrays), ``R`` the run's state.
A flow's payload (``code``) is ``(epoch * steps + g) * TT + tid``: the step it was submitted in,
the number of fast-forward jumps made before (a delivery counts for the step it was submitted
in, moved on by the jumps since, as ``CollectiveRun._flush`` does) and the transfer.
"""

from __future__ import annotations

import numpy as np

from netsim.network.kernelcache import kernel
from netsim.network.runqueue import (F_NOW, F_SHIFTED, F_T, K_DELAY, K_ENTER, K_UPDATE, LATE, S_BATCHES, S_CQC, S_FF,
                                     S_FINISHED, S_NCQ, S_NJ, S_NPEND, S_NPOOL, S_OWNER, S_SKIPPED, S_TOTAL,
                                     S_TRANSFERS, S_TT, S_UPD, advance, call_at, call_late, deliver, phase, push,
                                     record)

#: ``fastpath.MAX_PERIOD``: the longest period (steps) fast-forward looks for
MAX_PERIOD = 4


@kernel
def _group(R, ranks, n, g):
    """A record of ``ranks[:n]`` (in the pool) and a step ``g``."""
    S, ri, rf, pool = R[2], R[4], R[5], R[6]
    s0 = S[S_NPOOL]
    for i in range(n):
        pool[s0 + i] = ranks[i]
    S[S_NPOOL] += n
    return record(ri, rf, S, s0, n, g, 0.0)


@kernel
def submit(P, R, g, ready, k):
    """``CollectiveRun._submit`` and ``FlowNetwork.submit``: link bytes, path latencies (one running
    sum over the submission's paths, as ``csr_sum``), deliveries of the transfers that move
    nothing, and the others queued to join the flow table when this event ends."""
    tr_bytes, rt_ptr, rt_links, link_lat = P[7], P[9], P[10], P[15]
    hf, hi, S, F, ri, rf, pool = R[0], R[1], R[2], R[3], R[4], R[5], R[6]
    cq, cqc, cql, link_bytes = R[8], R[9], R[10], R[14]
    S[S_TRANSFERS] += k
    TT = S[S_TT]
    base = (S[S_NJ] * S[S_TOTAL] + g) * TT
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
            codes[nloc] = base + tid
            times[nloc] = F[F_NOW] + (0.0 if tr_bytes[tid] > 0.0 else lat)
            nloc += 1
        else:
            cqc[S[S_CQC]] = base + tid
            cql[S[S_CQC]] = lat
            S[S_CQC] += 1
    if nloc:
        deliver(hf, hi, S, F, ri, rf, pool, codes, times, nloc)
    if S[S_CQC] > owner_start:
        n = S[S_NCQ]
        cq[n, 0] = S[S_OWNER]
        cq[n, 1] = owner_start
        cq[n, 2] = S[S_CQC] - owner_start
        S[S_NCQ] = n + 1
        S[S_OWNER] += 1
        if not S[S_UPD]:  # FlowNetwork._schedule_update
            S[S_UPD] = 1
            call_late(hf, hi, S, F, K_UPDATE)


@kernel
def _enter_step(P, R, r, n, g):
    """``CollectiveRun._enter_step``: ranks ``r[:n]`` enter step ``g``; returns how many go straight
    on (moved to the front of ``r``: idle, or all in a step without transfers or delay)."""
    ph_first, ph_rep, ph_ntr, ph_delay, tr_es, tr_ed = P[0], P[1], P[2], P[3], P[5], P[6]
    touch_ptr, touch, degree = P[11], P[12], P[13]
    hf, hi, S, F, cur, rem = R[0], R[1], R[2], R[3], R[11], R[12]
    p = phase(ph_first, ph_rep, g)
    for i in range(n):
        cur[r[i]] = g
    if ph_ntr[p] == 0:
        if ph_delay[p] > 0:
            call_at(hf, hi, S, F, F[F_NOW] + ph_delay[p], K_DELAY, _group(R, r, n, g))
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
        submit(P, R, g, cand, k)
    idle = 0
    for i in range(n):
        if degree[p, r[i]] == 0:
            r[idle] = r[i]
            idle += 1
    return idle


@kernel
def enter(P, R, ranks, n, g0):
    """``CollectiveRun._enter``: ranks that finished their previous step now enter ``g0``, and
    go on through the steps they are idle in."""
    S, F, cur, t_done = R[2], R[3], R[11], R[13]
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
        if idle:
            _record(P, R, mine, idle, g)  # its jump, if any, is not waited for (as CollectiveRun._enter)
        for i in range(idle):
            wr[k] = mine[i]
            ws[k] = g + 1
            k += 1
        n = k


@kernel
def step_done(P, R, ranks, n, g):
    """``CollectiveRun._step_done``."""
    hf, hi, S, F, t_done = R[0], R[1], R[2], R[3], R[13]
    for i in range(n):
        t_done[ranks[i]] = F[F_NOW]
    m, dt = _record(P, R, ranks, n, g)
    if m:
        call_at(hf, hi, S, F, F[F_NOW] + dt, K_ENTER, _group(R, ranks, n, g + 1 + m))
    else:
        enter(P, R, ranks, n, g + 1)


@kernel
def flush(P, R):
    """``CollectiveRun._flush``: the deliveries of this instant, step by step (increasing; a step
    moved on by the jumps made since its transfers were submitted), each step's in arrival order;
    the ranks they complete move on."""
    tr_es, tr_ed = P[5], P[6]
    S, ri, pool, pend, rem, jpre = R[2], R[4], R[6], R[7], R[12], R[18]
    TT, total, nj = S[S_TT], S[S_TOTAL], S[S_NJ]
    n = S[S_NPEND]
    items = pend[:n].copy()
    S[S_NPEND] = 0
    gs = np.empty(n, dtype=np.int64)
    for i in range(n):
        q = pool[ri[items[i], 0]] // TT
        gs[i] = q % total + jpre[nj] - jpre[q // total]
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
            step_done(P, R, done, nd, g)
        i = j


@kernel
def _record(P, R, ranks, n, g):
    """``CollectiveRun._record``: when ``ranks[:n]`` finished step ``g``; the jump made, if any
    (steps, seconds)."""
    S, F = R[2], R[3]
    hist, hpres, hcount = R[15], R[16], R[17]
    if not S[S_FF]:
        return 0, 0.0
    if not hpres[g]:
        hpres[g] = 1
        hcount[g] = 0
        hist[g, :] = np.nan
    for i in range(n):
        hist[g, ranks[i]] = F[F_NOW]
    hcount[g] += n
    if hcount[g] == hist.shape[1]:
        return _maybe_jump(P, R, g)
    return 0, 0.0


@kernel
def _uniform(a, b, c):
    """``fastpath.uniform_advance``: Δ (and True) if every rank advanced by the same Δ > 0 from
    ``c`` to ``b`` and from ``b`` to ``a``."""
    delta = a[0] - b[0]
    tol = 1e-9 * max(abs(delta), 1e-12) + 1e-15
    if not delta > 0:
        return delta, False
    hi, lo, worst = -np.inf, np.inf, 0.0
    for i in range(a.size):
        d = a[i] - b[i]
        e = abs((b[i] - c[i]) - delta)
        if d != d or e != e:
            return delta, False
        hi, lo, worst = max(hi, d), min(lo, d), max(worst, e)
    return delta, hi - lo <= tol and worst <= tol


@kernel
def _maybe_jump(P, R, g):
    """``CollectiveRun._maybe_jump``: jump whole periods once step times repeat with period 1..4."""
    ph_first, ph_rep = P[0], P[1]
    hist, hpres = R[15], R[16]
    p = phase(ph_first, ph_rep, g)
    for period in range(1, MAX_PERIOD + 1):
        g2 = g - 2 * period
        if g2 < ph_first[p] or not hpres[g] or not hpres[g - period] or not hpres[g2]:
            return 0, 0.0
        delta, ok = _uniform(hist[g], hist[g - period], hist[g2])
        if ok:
            return _jump(P, R, p, period, delta)
    return 0, 0.0


@kernel
def _jump(P, R, p, period, delta):
    """``CollectiveRun._jump``: skip ``m`` steps, owe their bytes to the links, shift the clock."""
    ph_first, ph_rep, ph_ntr, tr_bytes, rt_ptr, rt_links = P[0], P[1], P[2], P[7], P[9], P[10]
    S, F, cur, t_done, link_bytes = R[2], R[3], R[11], R[13], R[14]
    hist, hpres, hcount, jpre, eshift, clock = R[15], R[16], R[17], R[18], R[19], R[20]
    last = ph_first[p] + ph_rep[p] - 1
    m = ((last - cur.max() - 1) // period) * period
    if m < 1:
        return 0, 0.0
    dt = (m // period) * delta
    t0 = 0
    for q in range(p):
        t0 += ph_ntr[q]
    for tid in range(t0, t0 + ph_ntr[p]):  # Network.count_bytes
        b = tr_bytes[tid] * m
        for e in range(rt_ptr[tid], rt_ptr[tid + 1]):
            link_bytes[rt_links[e]] += b
    advance(clock, F)  # FlowNetwork.shift
    F[F_T] = max(F[F_T], F[F_NOW]) + dt
    nj = S[S_NJ]
    eshift[nj + 1] = eshift[nj] + dt
    F[F_SHIFTED] += dt
    for r in range(cur.size):
        cur[r] += m
        t_done[r] += dt
    for k in range(hist.shape[0] - 1 - m, -1, -1):
        if hpres[k]:
            hpres[k] = 0
            hpres[k + m] = 1
            hcount[k + m] = hcount[k]
            for r in range(hist.shape[1]):
                hist[k + m, r] = hist[k, r] + dt
    S[S_SKIPPED] += m
    jpre[nj + 1] = jpre[nj] + m
    S[S_NJ] = nj + 1
    return m, dt
