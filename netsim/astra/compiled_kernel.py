"""The congestion-aware event engine compiled: :mod:`netsim.astra.compiled`'s kernels (numba).

Every function here is one piece of the Python event engine, ported line for line on integer arrays
so that it schedules the same events, in the same order, with the same sequence numbers:
:class:`~netsim.astra.engine.HeapClock` (``heap``: a binary heap of rows ``(time, seq, kind, a, b)``),
:class:`~netsim.astra.engine.Ticker` (``tick``: per rank and instant, a list of callbacks),
:class:`~netsim.astra.engine.Fabric` (``fab``: per (tag, src, dst, size) the sends, receives and
landings so far; messages of one key land in send order, as they share a route of FIFO links),
:class:`~netsim.astra.congestion._HeapLink` (``LK``), the queues of :class:`~netsim.astra.sysl.Sys`
(``Q``, ``RK``), the algorithms of :mod:`netsim.astra.algorithms` (``ST``, one row per stream) and a
chain workload (:class:`~netsim.astra.workload.Workload` on a trace whose nodes run one after another).
``tick`` and ``fab`` are open-addressing tables (rows key, value), all state is in int64 arrays:
no typed container, whose reference counts cost more than the events.

A pool that runs out sets ``I[ERR] = 1`` (the caller grows it and runs again); a state the Python
engine would not reach quietly (a deadlock, an algorithm that injects nothing) sets 2.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numba

from netsim.network import kernelcache

#: both kernel files: a change to either compiles both afresh (netsim.network.kernelcache)
FILES = tuple(str(Path(__file__).with_name(f)) for f in ("compiled_kernel.py", "compiled_loop.py"))
kernel = partial(kernelcache.kernel, files=FILES, prefix="astra-kernels")
#: the pieces: compiled into the cached entry point (:func:`netsim.astra.compiled_loop.run`), which a run
#: loads whole; cached alone, each would cost a cache lookup at import and never be loaded
piece = numba.njit

# I: scalar state
(NOW, CURSEQ, SEQ, EVENTS, MSGS, ERR, MFREE, MTOP, CFREE, CTOP, LFREE, LTOP, SLTOP, NREP, ATZERO, SLFREE, HSIZE, TCOUNT,
 FCOUNT) = range(19)
# P: parameters
P_N, P_S, P_T, P_E, P_NET, P_POLICY, P_Z, P_UNAWARE, P_H = range(9)
SWITCH, FULLY, RING = 0, 1, 2
LIFO, FIFO, EXPLICIT = 0, 1, 2
# ST: one row per stream (rank r, id i: row r * S + i)
F_KIND, F_OP, F_COLL, F_PRIO, F_INIT, F_SC, F_ZERO, F_NZ, F_FREE, F_RECV, F_TOG, F_PIN, F_POUT, F_STATE, F_REDS, F_TREE = range(16)
K_RING, K_DIRECT, K_HD, K_DBT = range(4)
AR, RS, AG, A2A = range(4)
# C: one row per collective of the (common) sequence
C_OP, C_KIND, C_COUNT, C_MSGZ, C_PAR, C_NZ, C_SC, C_HDB, C_CHUNKZ = range(9)
# RK: one row per rank
R_POS, R_NCOLL, R_NSTREAM, R_PC, R_QLEN, R_RUN, R_DBT, R_DSTOT, R_DSFIN, R_DONE = range(10)
# LK: per link; MS: per message; CB: per callback; LS: per ticker list; SL: per fabric key (sends, receives,
# landings, key, free-list link)
L_FA, L_FS, L_QD, L_PH, L_PT = range(5)
M_SRC, M_DST, M_Z, M_HOP, M_SLOT, M_G, M_NEXT = range(7)
B_KIND, B_A, B_B, B_NEXT = range(4)
CB_WL, CB_CALL, CB_RED = range(3)
EV_TICK, EV_ARRIVE, EV_FREE, EV_CONSUME = range(4)
INIT, GENERAL, RECV = 0, 1, 2
T_LEAF, T_INTER, T_ROOT = range(3)
S_BEGIN, S_TO_PARENT, S_WAIT_PARENT, S_END, S_WAIT_TWO, S_WAIT_ONE, S_TO_CHILDREN = range(7)


@piece
def _push_seq(heap, I, t, s, kind, a, b):
    """Push event (t, s, kind, a, b) on the array heap ``heap`` (ordered by (t, s), as HeapClock's)."""
    i = I[HSIZE]
    if i >= heap.shape[0]:
        I[ERR] = 1
        return
    I[HSIZE] = i + 1
    while i > 0:
        p = (i - 1) >> 1
        if heap[p, 0] < t or (heap[p, 0] == t and heap[p, 1] < s):
            break
        for c in range(5):
            heap[i, c] = heap[p, c]
        i = p
    heap[i, 0], heap[i, 1], heap[i, 2], heap[i, 3], heap[i, 4] = t, s, kind, a, b


@piece
def _push(heap, I, t, kind, a, b):
    s = I[SEQ]
    I[SEQ] = s + 1
    _push_seq(heap, I, t, s, kind, a, b)


@piece
def pop_event(heap, I):
    """The earliest event (time, then sequence), off the array heap."""
    top = (heap[0, 0], heap[0, 1], heap[0, 2], heap[0, 3], heap[0, 4])
    n = I[HSIZE] - 1
    I[HSIZE] = n
    t, s = heap[n, 0], heap[n, 1]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and (heap[c + 1, 0] < heap[c, 0] or (heap[c + 1, 0] == heap[c, 0] and heap[c + 1, 1] < heap[c, 1])):
            c += 1
        if t < heap[c, 0] or (t == heap[c, 0] and s < heap[c, 1]):
            break
        for k in range(5):
            heap[i, k] = heap[c, k]
        i = c
    for k in range(5):
        heap[i, k] = heap[n, k]
    return top


@piece
def _hash(key, mask):
    h = (key ^ (key >> 29)) * 6364136223846793005
    return (h >> 20) & mask


@piece
def _hget(H, key):
    """The value of ``key`` in the open-addressing table ``H`` (rows key, value; key -1 = empty), or -1."""
    mask = H.shape[0] - 1
    i = _hash(key, mask)
    while H[i, 0] != -1:
        if H[i, 0] == key:
            return H[i, 1]
        i = (i + 1) & mask
    return -1


@piece
def _hput(H, I, count, key, value):
    """Add ``key`` (absent) -> ``value``; the table is kept at most half full (else ``I[ERR] = 1``)."""
    mask = H.shape[0] - 1
    if 2 * (I[count] + 1) > H.shape[0]:
        I[ERR] = 1
        return
    I[count] += 1
    i = _hash(key, mask)
    while H[i, 0] != -1:
        i = (i + 1) & mask
    H[i, 0] = key
    H[i, 1] = value


@piece
def hdel(H, I, count, key):
    """Remove ``key`` (present), shifting back the entries after it (linear probing, no tombstones)."""
    mask = H.shape[0] - 1
    i = _hash(key, mask)
    while H[i, 0] != key:
        i = (i + 1) & mask
    j = i
    while True:
        j = (j + 1) & mask
        if H[j, 0] == -1:
            break
        k = _hash(H[j, 0], mask)
        if (i <= j and i < k <= j) or (i > j and (i < k or k <= j)):
            continue  # its home lies after the hole: it stays
        H[i, 0] = H[j, 0]
        H[i, 1] = H[j, 1]
        i = j
    H[i, 0] = -1
    I[count] -= 1


@piece
def _alloc(I, top, free, arr, nxt):
    """A record of pool ``arr`` (free list head ``I[free]``, linked by column ``nxt``); -1: full."""
    k = I[free]
    if k >= 0:
        I[free] = arr[k, nxt]
        return k
    k = I[top]
    if k >= arr.shape[0]:
        I[ERR] = 1
        return -1
    I[top] = k + 1
    return k


@piece
def register(heap, I, P, tick, CB, LS, r, delay, kind, a, b):
    """``Ticker.register`` of rank ``r``: callback (kind, a, b) at now + delay."""
    t = I[NOW] + delay
    if t >= (1 << 62) // P[P_N]:  # its key would overflow: the event engine runs
        I[ERR] = 2
        return
    key = t * P[P_N] + r
    lst = _hget(tick, key)
    if lst < 0:
        lst = _alloc(I, LTOP, LFREE, LS, 0)
        if lst < 0:
            return
        LS[lst, 0] = -1
        LS[lst, 1] = -1
        _hput(tick, I, TCOUNT, key, lst)
        _push(heap, I, t, EV_TICK, lst, r)
    c = _alloc(I, CTOP, CFREE, CB, B_NEXT)
    if c < 0:
        return
    CB[c, B_KIND] = kind
    CB[c, B_A] = a
    CB[c, B_B] = b
    CB[c, B_NEXT] = -1
    if LS[lst, 1] < 0:
        LS[lst, 0] = c
    else:
        CB[LS[lst, 1], B_NEXT] = c
    LS[lst, 1] = c


@piece
def _first_link(P, src, dst):
    n = P[P_N]
    if P[P_NET] == SWITCH:
        return src
    if P[P_NET] == FULLY:
        return src * n + dst
    cw = (dst - src) % n
    return src if n - cw >= cw else n + src


@piece
def next_link(P, src, dst, hop):
    """The link of hop ``hop`` (from 0) of the route src -> dst, or -1 past its end (the analytical model:
    one hop, the message's whole delay)."""
    n = P[P_N]
    if P[P_UNAWARE]:
        return -1 if hop else 0
    kind = P[P_NET]
    if kind == SWITCH:
        return src if hop == 0 else (n + dst if hop == 1 else -1)
    if kind == FULLY:
        return src * n + dst if hop == 0 else -1
    cw = (dst - src) % n
    if n - cw >= cw:  # clockwise (ties too)
        return (src + hop) % n if hop < cw else -1
    return n + (src - hop) % n if hop < n - cw else -1


@piece
def transmit(heap, I, LK, MS, lk, ser, link, m):
    now = I[NOW]
    z = MS[m, M_Z]
    _push(heap, I, now + lk[z], EV_ARRIVE, m, 0)
    fa = now + ser[z]
    LK[link, L_FA] = fa
    LK[link, L_FS] = I[SEQ]
    I[SEQ] += 1
    q = LK[link, L_PH] >= 0 or fa == 0
    LK[link, L_QD] = 1 if q else 0
    if q:
        _push_seq(heap, I, fa, LK[link, L_FS], EV_FREE, link, 0)


@piece
def link_send(heap, I, LK, MS, lk, ser, link, m):
    now = I[NOW]
    if now < LK[link, L_FA] or (now == LK[link, L_FA] and I[CURSEQ] < LK[link, L_FS]):
        if LK[link, L_QD] == 0:
            _push_seq(heap, I, LK[link, L_FA], LK[link, L_FS], EV_FREE, link, 0)
            LK[link, L_QD] = 1
        MS[m, M_NEXT] = -1
        if LK[link, L_PT] < 0:
            LK[link, L_PH] = m
        else:
            MS[LK[link, L_PT], M_NEXT] = m
        LK[link, L_PT] = m
    else:
        transmit(heap, I, LK, MS, lk, ser, link, m)


@piece
def _slot(I, P, fab, SL, tag, src, dst, z):
    n = P[P_N]
    key = ((tag * n + src) * n + dst) * P[P_Z] + z
    s = _hget(fab, key)
    if s < 0:
        s = _alloc(I, SLTOP, SLFREE, SL, 4)
        if s < 0:
            return -1
        SL[s, 0] = 0
        SL[s, 1] = 0
        SL[s, 2] = 0
        SL[s, 3] = key
        _hput(fab, I, FCOUNT, key, s)
    return s


@piece
def settled(I, fab, SL, s):
    """``Fabric._done`` on the key's last waiting entry: every send met its receive and landed; the key
    is dropped (its counts start again from 0, which pairs the same messages)."""
    if SL[s, 0] == SL[s, 1] and SL[s, 1] == SL[s, 2]:
        hdel(fab, I, FCOUNT, SL[s, 3])
        SL[s, 4] = I[SLFREE]
        I[SLFREE] = s


@piece
def send_msg(heap, I, P, fab, SL, LK, MS, lk, ser, src, dst, tag, z):
    """``Fabric.send`` of a collective message (no send callback) and its first hop."""
    s = _slot(I, P, fab, SL, tag, src, dst, z)
    if s < 0:
        return
    SL[s, 0] += 1
    m = _alloc(I, MTOP, MFREE, MS, M_NEXT)
    if m < 0:
        return
    MS[m, M_SRC] = src
    MS[m, M_DST] = dst
    MS[m, M_Z] = z
    MS[m, M_HOP] = 0
    MS[m, M_SLOT] = s
    MS[m, M_G] = dst * P[P_S] + tag
    I[MSGS] += 1
    if P[P_UNAWARE]:  # AnalyticalLinks: it lands after the pair's delay (lk: per size and hop count)
        n = P[P_N]
        hops = 1
        if P[P_NET] == SWITCH:
            hops = 2
        elif P[P_NET] == RING:
            cw = (dst - src) % n
            hops = min(cw, n - cw)
        _push(heap, I, I[NOW] + lk[z * P[P_H] + hops], EV_ARRIVE, m, 0)
        return
    link_send(heap, I, LK, MS, lk, ser, _first_link(P, src, dst), m)


@piece
def recv_post(heap, I, P, fab, SL, src, dst, tag, z, g):
    """``Fabric.recv`` of stream ``g``: completes at once (an event now) if its message has landed."""
    s = _slot(I, P, fab, SL, tag, src, dst, z)
    if s < 0:
        return
    SL[s, 1] += 1
    if SL[s, 2] >= SL[s, 1]:
        _push(heap, I, I[NOW], EV_CONSUME, g, 0)
        settled(I, fab, SL, s)


@piece
def _hd_peer(HD, k, r, p):
    off = HD[k, 0]
    if off == 0 or (r // off) % 2 == 0:
        return (r + off) % p
    return (r - off) % p


@piece
def _packet(ST, C, HD, g, r, p, k):
    """(dst, src, size index) of packet ``k`` of stream ``g`` (ring, direct, halvingDoubling)."""
    kind = ST[g, F_KIND]
    c = ST[g, F_COLL]
    if kind == K_HD:
        peer = _hd_peer(HD, C[c, C_HDB] + k, r, p)
        return peer, peer, HD[C[c, C_HDB] + k, 1]
    if kind == K_DIRECT:
        j = k % (p - 1)
        return (r + 1 + j) % p, (r - 1 - j) % p, C[c, C_MSGZ]
    return (r + 1) % p, (r - 1) % p, C[c, C_MSGZ]


@piece
def bundle(heap, I, P, tick, CB, LS, red, r, g, processed, z):
    """``Sys.bundle``: the endpoint delay, then (processed) the reduction of a ``z``-sized message."""
    if processed:
        register(heap, I, P, tick, CB, LS, r, P[P_E], CB_RED, g, red[z])
    else:
        register(heap, I, P, tick, CB, LS, r, P[P_E], CB_CALL, g, 0)


@piece
def insert_packet(heap, I, P, tick, CB, LS, ST, C, HD, red, g):
    """``Ring.insert`` (and halvingDoubling's): the next packet and its bundle."""
    c = ST[g, F_COLL]
    if ST[g, F_ZERO] == 0 and ST[g, F_NZ] == 0:
        ST[g, F_ZERO] = C[c, C_PAR]
        ST[g, F_NZ] = C[c, C_NZ]
        ST[g, F_TOG] = 1 - ST[g, F_TOG]
    op = ST[g, F_OP]
    if ST[g, F_ZERO] > 0:
        processed = False
        ST[g, F_ZERO] -= 1
    elif ST[g, F_NZ] > 0:
        processed = op == RS or (op == AR and ST[g, F_TOG] == 1)
        ST[g, F_NZ] -= 1
    else:  # ASTRA-sim panics ("should not inject nothing!"); the event engine raises
        I[ERR] = 2
        return
    k = ST[g, F_PIN]
    ST[g, F_PIN] = k + 1
    p = P[P_N]
    r = g // P[P_S]
    _d, _s, z = _packet(ST, C, HD, g, r, p, k)
    bundle(heap, I, P, tick, CB, LS, red, r, g, processed, z)


@piece
def ready_send(heap, I, P, fab, SL, LK, MS, lk, ser, ST, C, HD, g):
    """``Ring.ready``: send the oldest packet (and post its receive) when a bundle is free."""
    if ST[g, F_PIN] == ST[g, F_POUT] or ST[g, F_SC] == 0 or ST[g, F_FREE] == 0:
        return False
    p = P[P_N]
    S = P[P_S]
    r = g // S
    dst, src, z = _packet(ST, C, HD, g, r, p, ST[g, F_POUT])
    tag = g - r * S
    send_msg(heap, I, P, fab, SL, LK, MS, lk, ser, r, dst, tag, z)
    recv_post(heap, I, P, fab, SL, src, r, tag, z, g)
    ST[g, F_SC] -= 1
    ST[g, F_POUT] += 1
    ST[g, F_FREE] -= 1
    return True
