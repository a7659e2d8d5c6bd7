"""The whole-run kernel's event queue and shared state (numba; see :mod:`~netsim.network.runkernel`).

The queue is SimPy's: a binary heap of ``(time, priority, sequence number)`` with what each entry
does.  Entries made by :func:`call_at` (``Network.call_at``) also keep the time asked for and
the shift epoch they were made in: one that fires after the clock was shifted (fast-forward) is
queued again that much later, as ``Network._fire`` does.
"""

from __future__ import annotations

import numpy as np

from netsim.network.kernelcache import kernel

# SimPy's priorities (simpy.events.NORMAL; base.LATE)
NORMAL, LATE = 1, 2
# what a queued entry does
K_ENTER, K_TIMER, K_DELIVER, K_ITEM, K_DELAY, K_UPDATE, K_FLUSH = range(7)
# integer state ``S``
(S_NH, S_EID, S_NREC, S_NPOOL, S_NPEND, S_NCQ, S_CQI, S_CQC, S_GEN, S_UPD, S_EVENTS, S_DELIV, S_TRANSFERS,
 S_BATCHES, S_OWNER, S_FINISHED, S_NEED, S_NEED_K, S_NEED_NNZ, S_TT, S_TOTAL, S_D, S_FF, S_NJ, S_SKIPPED) = range(25)
N_S = 25
# float state ``F``: the clock, the flows' clock (FlowNetwork._t), drained seconds, shifted seconds
F_NOW, F_T, F_DRAINED, F_SHIFTED = range(4)
N_F = 4
# columns of the queue's int rows
H_PRIO, H_EID, H_KIND, H_ARG, H_EPOCH = range(5)


@kernel
def _less(t1, p1, e1, t2, p2, e2):
    return t1 < t2 or (t1 == t2 and (p1 < p2 or (p1 == p2 and e1 < e2)))


@kernel
def _move(hf, hi, dst, src):
    """Entry ``src`` of the heap to row ``dst`` (a sift step)."""
    hf[dst, 0] = hf[src, 0]
    hf[dst, 1] = hf[src, 1]
    for c in range(5):
        hi[dst, c] = hi[src, c]


@kernel
def push(hf, hi, S, t, prio, kind, arg, asked, epoch):
    """Queue ``(t, prio, next sequence number)`` with what it does (``asked``, ``epoch``: see the
    module docstring)."""
    eid = S[S_EID]
    S[S_EID] = eid + 1
    i = S[S_NH]
    S[S_NH] = i + 1
    while i > 0:
        p = (i - 1) >> 1
        if not _less(t, prio, eid, hf[p, 0], hi[p, H_PRIO], hi[p, H_EID]):
            break
        _move(hf, hi, i, p)
        i = p
    hf[i, 0] = t
    hf[i, 1] = asked
    hi[i, H_PRIO] = prio
    hi[i, H_EID] = eid
    hi[i, H_KIND] = kind
    hi[i, H_ARG] = arg
    hi[i, H_EPOCH] = epoch


@kernel
def pop(hf, hi, S):
    """Take the first entry: ``(time, kind, arg, asked time, epoch)``."""
    t, kind, arg, asked, epoch = hf[0, 0], hi[0, H_KIND], hi[0, H_ARG], hf[0, 1], hi[0, H_EPOCH]
    n = S[S_NH] - 1
    S[S_NH] = n
    if n == 0:
        return t, kind, arg, asked, epoch
    lt, la = hf[n, 0], hf[n, 1]
    lp, le, lk, lg, lo = hi[n, 0], hi[n, 1], hi[n, 2], hi[n, 3], hi[n, 4]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and _less(hf[c + 1, 0], hi[c + 1, H_PRIO], hi[c + 1, H_EID], hf[c, 0], hi[c, H_PRIO], hi[c, H_EID]):
            c += 1
        if not _less(hf[c, 0], hi[c, H_PRIO], hi[c, H_EID], lt, lp, le):
            break
        _move(hf, hi, i, c)
        i = c
    hf[i, 0] = lt
    hf[i, 1] = la
    hi[i, 0] = lp
    hi[i, 1] = le
    hi[i, 2] = lk
    hi[i, 3] = lg
    hi[i, 4] = lo
    return t, kind, arg, asked, epoch


@kernel
def call_at(hf, hi, S, F, t, kind, arg):
    """``Network.call_at``: a SimPy timeout of ``max(t - now, 0)``, in this shift epoch."""
    d = t - F[F_NOW]
    push(hf, hi, S, F[F_NOW] + (d if d > 0.0 else 0.0), NORMAL, kind, arg, t, S[S_NJ])


@kernel
def call_late(hf, hi, S, F, kind):
    """``call_late``: after every ordinary entry of this instant."""
    push(hf, hi, S, F[F_NOW], LATE, kind, 0, F[F_NOW], 0)


@kernel
def record(ri, rf, S, start, ln, g, t):
    """A record: ``start``/``ln`` in the pool, a step ``g``, a time ``t``; returns its id."""
    k = S[S_NREC]
    S[S_NREC] = k + 1
    ri[k, 0] = start
    ri[k, 1] = ln
    ri[k, 2] = g
    rf[k] = t
    return k


@kernel
def deliver(hf, hi, S, F, ri, rf, pool, codes, times, k):
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
        rec = record(ri, rf, S, start, j - i, 0, t)
        call_at(hf, hi, S, F, t, K_DELIVER, rec)
        S[S_DELIV] += 1
        i = j


@kernel
def phase(ph_first, ph_rep, g):
    for p in range(ph_first.size):
        if g < ph_first[p] + ph_rep[p]:
            return p
    return -1


@kernel
def advance(clock, F):
    """``FlowNetwork._advance``: the flows drain up to now."""
    dt = F[F_NOW] - F[F_T]
    if dt > 0:
        clock[0] += dt
        F[F_DRAINED] += dt
        F[F_T] = F[F_NOW]
