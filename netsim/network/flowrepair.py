"""Compiled max-min solves of the flow table (numba): :mod:`~netsim.network.flowkernel`'s
other half.

``solve_flows`` is :func:`~netsim.network.maxmin.solve_compressed` (the same rounds of local
bottlenecks and tie rule, on the links some unfrozen flow still crosses); :func:`resolve`,
``_repair``, ``_uncertified`` and ``_exact`` are ``FlowTable.resolve`` and its certificate,
step for step, with "the flows on these links" read from the link blocks.
"""

from __future__ import annotations

import numpy as np
from netsim.network.kernelcache import kernel

from netsim.network.flowkernel import (ALIVE, CAP, CAPACITY, LB_COUNT, LB_START, LMAP, LVL, M_ALIVE,
                                       M_FRESH, M_INCREMENTAL, M_PARTIAL, M_ROUNDS,
                                       M_SEEDS, M_SLOTS, M_SOLVED, M_SOLVES, MARK, NB, P_LINK, PLEN,
                                       PSTART,
                                       OWNER, TOP, USED, next_due, set_rates, take_drained)
from netsim.network.flowtable import FULL_FRACTION, MAX_REPAIRS, RTOL


@kernel
def solve_flows(nf, lens, starts, inv, nu, resid, caps, rtol, rates, bn, ws):
    """:func:`~netsim.network.maxmin.solve_compressed` on flows 0..nf-1 (entries
    ``inv[starts[f]:starts[f]+lens[f]]``, local link ids < nu); ``ws``: float scratch (5, >= nu).
    Each round gives every unfrozen flow its tentative rate (:func:`_tentative`), freezes the flows
    on a local bottleneck or at their cap (:func:`_freeze`) and takes their rates off their links
    (:func:`_settle`); the unfrozen flows' entries are packed after every round (read in order)."""
    rem, cnt, share, low, dec = ws[0], ws[1], ws[2], ws[3], ws[4]
    for u in range(nu):
        rem[u] = resid[u]
        cnt[u] = 0.0
    ne = 0
    for f in range(nf):
        ne += lens[f]
    act = np.empty(nf, dtype=np.int64)
    rate = np.empty(nf)
    onv = np.empty(nf)  # each unfrozen flow's smallest share this round (its rate before the cap)
    pe = np.empty(ne, dtype=np.int64)  # entries of the unfrozen flows, packed
    plen = np.empty(nf, dtype=np.int64)
    na = _pack(nf, lens, starts, inv, caps, rates, bn, cnt, act, plen, pe)
    local = np.zeros(nu, dtype=np.bool_)
    alive = np.empty(nu, dtype=np.int64)  # links some unfrozen flow still crosses
    nl = 0
    for u in range(nu):
        if cnt[u] > 0:
            alive[nl] = u
            nl += 1
    while na:
        for q in range(nl):
            u = alive[q]
            share[u] = rem[u] / cnt[u]
            low[u] = np.inf
            dec[u] = 0.0
        _tentative(na, act, plen, pe, caps, share, low, rate, onv)
        for q in range(nl):
            u = alive[q]
            local[u] = share[u] <= low[u] * (1.0 + rtol)
        keep = _freeze(na, act, plen, pe, rate, onv, caps, local, rtol, rates, bn, dec, cnt)
        if keep == na:
            raise RuntimeError("max-min solver made no progress")
        na = keep
        nl = _settle(nl, alive, rem, dec, cnt)


@kernel
def _pack(nf, lens, starts, inv, caps, rates, bn, cnt, act, plen, pe):
    """The flows to solve, packed: ``act[:na]`` their ids, ``plen`` their path lengths, ``pe`` their
    entries (``cnt``: flows per link); a flow with no link and no cap gets rate inf at once.
    Returns ``na``."""
    na = 0
    k = 0
    for f in range(nf):
        bn[f] = -1
        rates[f] = 0.0
        if lens[f] == 0 and not np.isfinite(caps[f]):
            rates[f] = np.inf
            continue
        act[na] = f
        plen[na] = lens[f]
        for e in range(starts[f], starts[f] + lens[f]):
            u = inv[e]
            cnt[u] += 1.0
            pe[k] = u
            k += 1
        na += 1
    return na


@kernel
def _tentative(na, act, plen, pe, caps, share, low, rate, onv):
    """Each unfrozen flow's rate this round, ``rate[i]``: the smallest share on its path (``onv[i]``),
    at most its cap; ``low[u]``: the slowest such rate on link u."""
    k = 0
    for i in range(na):
        on = np.inf
        for e in range(k, k + plen[i]):
            if share[pe[e]] < on:
                on = share[pe[e]]
        c = caps[act[i]]
        r = on if on < c else c
        rate[i] = r
        onv[i] = on
        for e in range(k, k + plen[i]):
            if r < low[pe[e]]:
                low[pe[e]] = r
        k += plen[i]


@kernel
def _freeze(na, act, plen, pe, rate, onv, caps, local, rtol, rates, bn, dec, cnt):
    """Freeze the flows that cross a local bottleneck (``bn``: the first on the path, unless the cap
    binds) or run at their cap (``onv``: their smallest share, from :func:`_tentative`): their rate
    is final, their links lose them (``dec``, ``cnt``).  The others are packed to the front of
    ``act``, ``plen`` and ``pe``; returns how many."""
    keep = 0
    k = 0
    w = 0
    for i in range(na):
        f = act[i]
        r = rate[i]
        n = plen[i]
        on = onv[i]
        first = -1
        for e in range(k, k + n):
            if local[pe[e]]:
                first = pe[e]
                break
        if first >= 0 or caps[f] <= on * (1.0 + rtol):
            rates[f] = r
            if r < caps[f] and first >= 0:
                bn[f] = first
            for e in range(k, k + n):
                dec[pe[e]] += r
                cnt[pe[e]] -= 1.0
        else:
            act[keep] = f
            plen[keep] = n
            for e in range(k, k + n):
                pe[w] = pe[e]
                w += 1
            keep += 1
        k += n
    return keep


@kernel
def _settle(nl, alive, rem, dec, cnt):
    """Take the frozen flows' rates off the alive links' capacity (never below 0) and keep the links
    some unfrozen flow still crosses at the front of ``alive``; returns how many."""
    left = 0
    for q in range(nl):
        u = alive[q]
        v = rem[u] - dec[u]
        rem[u] = v if v > 0.0 else 0.0
        if cnt[u] > 0:
            alive[left] = u
            left += 1
    return left


@kernel
def _compress(fi, li, pl, slots, nr, lens, starts, inv, uniq):
    """Local link ids (first seen first) of the paths of ``slots[:nr]``; returns the count."""
    return _compress_more(fi, li, pl, slots, 0, nr, lens, starts, inv, uniq, 0)


@kernel
def _compress_more(fi, li, pl, slots, i0, nr, lens, starts, inv, uniq, nu):
    """:func:`_compress` of ``slots[i0:nr]`` after ``slots[:i0]`` were compressed into ``nu`` ids
    (their ``LMAP`` still set): the ids the whole of ``slots[:nr]`` would get; returns the count."""
    ne = starts[i0 - 1] + lens[i0 - 1] if i0 > 0 else 0
    for i in range(i0, nr):
        s = slots[i]
        lens[i] = fi[s, PLEN]
        starts[i] = ne
        for e in range(fi[s, PSTART], fi[s, PSTART] + fi[s, PLEN]):
            l = pl[e, P_LINK]
            if li[l, LMAP] < 0:
                li[l, LMAP] = nu
                uniq[nu] = l
                nu += 1
            inv[ne] = li[l, LMAP]
            ne += 1
    return nu


@kernel
def full_solve(ff, fi, lf, li, pl, meta, clock, due, rate, bneck, bdirty, dlist, rtol, w):
    """Every alive flow solved afresh (``FlowTable._full``)."""
    slots, lens, starts, bn, uniq = w.slots, w.lens, w.starts, w.bn, w.uniq
    nr = 0
    for s in range(meta[M_SLOTS]):
        if fi[s, ALIVE]:
            slots[nr] = s
            nr += 1
    nu = _compress(fi, li, pl, slots, nr, lens, starts, w.inv, uniq)
    for u in range(nu):
        w.resid[u] = lf[uniq[u], CAPACITY]
    caps = w.fcap
    for i in range(nr):
        caps[i] = ff[slots[i], CAP]
    solve_flows(nr, lens, starts, w.inv, nu, w.resid, caps, rtol, w.rates, bn, w.ws)
    set_rates(ff, meta, clock, due, rate, bdirty, dlist, slots, nr, w.rates)
    n_links = lf.shape[0]
    for l in range(n_links):
        lf[l, USED] = 0.0
    for i in range(nr):
        s = slots[i]
        bneck[s] = uniq[bn[i]] if bn[i] >= 0 else -1
        for e in range(starts[i], starts[i] + lens[i]):
            lf[uniq[w.inv[e]], USED] += w.rates[i]
    meta[M_SOLVES] += 1
    meta[M_SOLVED] += nr
    if meta[M_INCREMENTAL]:
        for l in range(n_links):
            lf[l, TOP] = 0.0
            li[l, NB] = 0
            lf[l, LVL] = np.inf
        for i in range(nr):
            r = w.rates[i]
            for e in range(starts[i], starts[i] + lens[i]):
                l = uniq[w.inv[e]]
                if r > lf[l, TOP]:
                    lf[l, TOP] = r
            b = bneck[slots[i]]
            if b >= 0:
                li[b, NB] += 1
                if r < lf[b, LVL]:
                    lf[b, LVL] = r
    for u in range(nu):
        li[uniq[u], LMAP] = -1


@kernel
def resolve(ff, fi, lf, li, pl, lbp, meta, clock, fresh, seeds, due, rate, bneck, bdirty, dlist, w):
    """Re-solve the rates the flows ended and started since the last solve can change
    (``FlowTable.resolve``)."""
    n_fresh, n_seeds = meta[M_FRESH], meta[M_SEEDS]
    meta[M_FRESH] = 0
    meta[M_SEEDS] = 0
    if meta[M_ALIVE] == 0:
        return
    limit = FULL_FRACTION * meta[M_ALIVE]
    r, inr = w.r, w.inr
    nr = 0
    for i in range(n_fresh):
        s = fresh[i]
        if fi[s, ALIVE] and not inr[s]:
            inr[s] = 1
            r[nr] = s
            nr += 1
    if not meta[M_INCREMENTAL] or nr >= limit:
        for i in range(nr):
            inr[r[i]] = 0
        full_solve(ff, fi, lf, li, pl, meta, clock, due, rate, bneck, bdirty, dlist, RTOL, w)
        return
    for i in range(nr):  # then the flows bottlenecked on a link an ended or started flow crossed
        s = r[i]
        for e in range(fi[s, PSTART], fi[s, PSTART] + fi[s, PLEN]):
            seeds[n_seeds] = pl[e, P_LINK]
            n_seeds += 1
    for k in range(n_seeds):  # each link once (MARK)
        l = seeds[k]
        if li[l, NB] > 0 and not li[l, MARK]:
            li[l, MARK] = 1
            a = li[l, LB_START]
            for q in range(a, a + li[l, LB_COUNT]):
                s = lbp[q, 0]
                if bneck[s] == l and not inr[s]:
                    inr[s] = 1
                    r[nr] = s
                    nr += 1
    for k in range(n_seeds):
        li[seeds[k], MARK] = 0
    if nr == 0:
        return
    nr = _repair(ff, fi, lf, li, pl, lbp, meta, clock, due, rate, bneck, bdirty, dlist, w, nr, limit)
    for i in range(abs(nr)):
        inr[r[i]] = 0
    if nr < 0:
        full_solve(ff, fi, lf, li, pl, meta, clock, due, rate, bneck, bdirty, dlist, RTOL, w)


@kernel
def event(ff, fi, lf, li, pl, lbp, meta, clock, free, fresh, seeds, due, rate, bneck, bmin, bdirty, dlist, eps, w, done,
          out_links, load, busy_since, busy):
    """One event in one call: the flows due within ``eps`` leave (:func:`take_drained`), the rates
    are repaired (:func:`resolve`) and the next due time found (:func:`next_due`), as the numpy
    table's three calls do in that order.  The drained flows' slots go to ``done``, ordered by
    owner (ascending slots within one, as a stable sort of the numpy table's ascending slots);
    returns their count and the seconds until the next flow is due."""
    nd, _ = take_drained(ff, fi, lf, li, pl, lbp, meta, clock, free, due, rate, bneck, bmin, bdirty, dlist, seeds, eps,
                         done, out_links, load, busy_since, busy)
    if nd > 1:
        owners = np.empty(nd, dtype=np.int64)
        for i in range(nd):
            owners[i] = fi[done[i], OWNER]
        order = np.argsort(owners, kind="mergesort")
        slots = done[:nd].copy()
        for i in range(nd):
            done[i] = slots[order[i]]
    resolve(ff, fi, lf, li, pl, lbp, meta, clock, fresh, seeds, due, rate, bneck, bdirty, dlist, w)
    return nd, next_due(due, meta, clock, bmin, bdirty, dlist)


@kernel
def _repair(ff, fi, lf, li, pl, lbp, meta, clock, due, rate, bneck, bdirty, dlist, w, nr, limit):
    """Grow the repair set ``w.r[:nr]`` until its residual solve passes the certificate
    (``FlowTable._repair``).  Returns the final size, negated when the limits were reached
    (then everything is solved afresh).  R only grows, so a round compresses only the flows that
    joined it (:func:`_compress_more`); the links' local ids are reset once, on the way out."""
    r, lens, starts, inv, uniq, rates, bn = w.r, w.lens, w.starts, w.inv, w.uniq, w.rates, w.bn
    acc, others = w.wu[0], w.wu[1]
    nu = 0
    done = 0  # flows of R compressed so far: R only grows, so their local ids stay (LMAP kept)
    for _ in range(MAX_REPAIRS):
        if nr >= limit:
            break
        meta[M_ROUNDS] += 1
        nu = _compress_more(fi, li, pl, r, done, nr, lens, starts, inv, uniq, nu)
        done = nr
        for u in range(nu):
            acc[u] = 0.0
        for i in range(nr):
            old = rate[r[i]]
            for e in range(starts[i], starts[i] + lens[i]):
                acc[inv[e]] += old
        for u in range(nu):
            l = uniq[u]
            others[u] = lf[l, USED] - acc[u]
            v = lf[l, CAPACITY] - others[u]
            w.resid[u] = v if v > 0.0 else 0.0
        for i in range(nr):
            w.fcap[i] = ff[r[i], CAP]
        solve_flows(nr, lens, starts, inv, nu, w.resid, w.fcap, RTOL, rates, bn, w.ws)
        set_rates(ff, meta, clock, due, rate, bdirty, dlist, r, nr, rates)
        for u in range(nu):
            acc[u] = 0.0
        for i in range(nr):
            s = r[i]
            if bneck[s] >= 0:
                li[bneck[s], NB] -= 1
            b = uniq[bn[i]] if bn[i] >= 0 else -1
            bneck[s] = b
            if b >= 0:
                li[b, NB] += 1
            for e in range(starts[i], starts[i] + lens[i]):
                acc[inv[e]] += rates[i]
        for u in range(nu):
            lf[uniq[u], USED] = others[u] + acc[u]
        meta[M_SOLVES] += 1
        meta[M_PARTIAL] += 1
        meta[M_SOLVED] += nr
        n_more = _uncertified(rate, bneck, lf, li, lbp, w, nr, nu)
        if n_more == 0:
            for u in range(nu):
                li[uniq[u], LMAP] = -1
            return nr
        for i in range(n_more):
            s = w.more[i]
            w.inr[s] = 1
            r[nr] = s
            nr += 1
    for u in range(nu):
        li[uniq[u], LMAP] = -1
    return -nr


@kernel
def _uncertified(rate, bneck, lf, li, lbp, w, nr, nu):
    """The certificate after R's residual solve (``FlowTable._uncertified``): the flows outside
    R that must join it go to ``w.more``; returns their count."""
    lens, starts, inv, uniq, rates, bn = w.lens, w.starts, w.inv, w.uniq, w.rates, w.bn
    fastest, slowest, n_r = w.wu[2], w.wu[3], w.wu[4]
    for u in range(nu):
        fastest[u] = 0.0
        slowest[u] = np.inf
        n_r[u] = 0.0
    for i in range(nr):
        ri = rates[i]
        for e in range(starts[i], starts[i] + lens[i]):
            if ri > fastest[inv[e]]:
                fastest[inv[e]] = ri
        b = bn[i]
        if b >= 0:
            n_r[b] += 1.0
            if ri < slowest[b]:
                slowest[b] = ri
    n_bad = 0
    bad = w.bad
    for u in range(nu):
        l = uniq[u]
        outside = li[l, NB] - n_r[u]
        full = lf[l, USED] >= lf[l, CAPACITY] * (1.0 - RTOL)
        lvl = lf[l, LVL]
        is_bad = outside > 0 and (not full or fastest[u] > lvl * (1.0 + 4 * RTOL))
        is_bad = is_bad or (n_r[u] > 0 and slowest[u] < lf[l, TOP] * (1.0 - 4 * RTOL))
        if fastest[u] > lf[l, TOP]:
            lf[l, TOP] = fastest[u]
        if n_r[u] > 0:
            lf[l, LVL] = (lvl if lvl < slowest[u] else slowest[u]) if outside > 0 else slowest[u]
        if is_bad:
            bad[n_bad] = l
            n_bad += 1
    if n_bad == 0:
        return 0
    return _exact(rate, bneck, lf, li, lbp, w, n_bad)


@kernel
def _exact(rate, bneck, lf, li, lbp, w, n_bad):
    """The certificate flow by flow on the links ``w.bad[:n_bad]`` (``FlowTable._exact``)."""
    inr, more = w.inr, w.more
    n_more = 0
    for k in range(n_bad):
        l = w.bad[k]
        a, c = li[l, LB_START], li[l, LB_COUNT]
        fastest = 0.0
        lvl = np.inf
        for q in range(a, a + c):
            s = lbp[q, 0]
            rs = rate[s]
            if rs > fastest:
                fastest = rs
            if rs < lvl and bneck[s] == l:
                lvl = rs
        lf[l, TOP] = fastest
        lf[l, LVL] = lvl
        full = lf[l, USED] >= lf[l, CAPACITY] * (1.0 - RTOL)
        beat = fastest * (1.0 - 4 * RTOL)
        low = np.inf  # slowest flow of R exceeded on this, its bottleneck
        for q in range(a, a + c):
            s = lbp[q, 0]
            rs = rate[s]
            if inr[s] == 1:
                if rs < beat and rs < low and bneck[s] == l:
                    low = rs
            elif inr[s] == 0 and (rs < beat or not full) and bneck[s] == l:
                inr[s] = 2
                more[n_more] = s
                n_more += 1
        if low < np.inf:  # flows outside R faster than it join too
            top = low * (1.0 + 4 * RTOL)
            for q in range(a, a + c):
                s = lbp[q, 0]
                if inr[s] == 0 and rate[s] > top:
                    inr[s] = 2
                    more[n_more] = s
                    n_more += 1
    return n_more
