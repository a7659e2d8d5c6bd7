"""The compiled engine's system layer, chain workloads and event loop (see :mod:`netsim.astra.compiled_kernel`).

``algo_run`` is ``phase.algo.run`` of :mod:`netsim.astra.algorithms` (``_dbt``: the doubleBinaryTree state
machine; ring, direct and halvingDoubling share the packet pieces of :mod:`netsim.astra.compiled_kernel`),
``_proceed_new`` / ``_finish`` / ``_added`` are :meth:`netsim.astra.sysl.Sys.proceed` and its queue
(one queue, streams of one phase), ``_generate`` is :meth:`~netsim.astra.sysl.Sys.generate` (every
collective on the world), ``_wl`` is :meth:`netsim.astra.workload.Workload.call` on a chain, and
:func:`run` is :meth:`netsim.astra.engine.HeapClock.run` with every event kind dispatched here.
"""

from __future__ import annotations

from numba import carray, types
from numba.extending import intrinsic

from netsim.astra.compiled_kernel import (
    AR, ATZERO, B_A, B_B, B_KIND, B_NEXT, CB_CALL, CB_RED, CB_WL, CFREE, CURSEQ, C_CHUNKZ, C_COUNT, C_KIND, C_OP,
    C_PAR, C_SC, ERR, EVENTS, EV_ARRIVE, EV_FREE, EV_TICK, EXPLICIT, FIFO, F_COLL, F_FREE, F_INIT, F_KIND, F_OP,
    F_PRIO, F_RECV, F_REDS, F_SC, F_STATE, F_TREE, GENERAL, HSIZE, INIT, K_DBT, K_DIRECT, K_HD, LFREE, L_PH, L_PT,
    L_QD, MFREE, M_DST, M_G, M_HOP, M_NEXT, M_SLOT, M_SRC, NOW, NREP, P_N, P_POLICY, P_S, P_T, RECV, R_DBT, R_DONE,
    R_DSFIN, R_DSTOT, R_NCOLL, R_NSTREAM, R_PC, R_POS, R_QLEN, R_RUN, S_BEGIN, S_END, S_TO_CHILDREN, S_TO_PARENT,
    S_WAIT_ONE, S_WAIT_PARENT, S_WAIT_TWO, TCOUNT, T_INTER, T_LEAF, bundle, hdel, insert_packet, kernel, link_send,
    next_link, piece, pop_event, ready_send, recv_post, register, send_msg, settled, transmit)


@piece
def _dbt(heap, I, P, tick, CB, LS, fab, SL, LK, MS, lk, ser, red, ST, C, TREE, g, ev):
    """``DoubleBinaryTreeAllReduce.run``; returns True when the stream exits."""
    S = P[P_S]
    r = g // S
    tag = g - r * S
    z = C[ST[g, F_COLL], C_CHUNKZ]
    tr = ST[g, F_TREE]
    parent, left, right, ty = TREE[tr, r, 0], TREE[tr, r, 1], TREE[tr, r, 2], TREE[tr, r, 3]
    st = ST[g, F_STATE]
    if ty == T_LEAF:
        if st == S_BEGIN:
            bundle(heap, I, P, tick, CB, LS, red, r, g, False, z)
            ST[g, F_STATE] = S_TO_PARENT
        elif st == S_TO_PARENT:
            send_msg(heap, I, P, fab, SL, LK, MS, lk, ser, r, parent, tag, z)
            recv_post(heap, I, P, fab, SL, parent, r, tag, z, g)
            ST[g, F_STATE] = S_WAIT_PARENT
        elif st == S_WAIT_PARENT:
            bundle(heap, I, P, tick, CB, LS, red, r, g, False, z)
            ST[g, F_STATE] = S_END
        elif st == S_END:
            return True
    elif ty == T_INTER:
        if st == S_BEGIN:
            ST[g, F_STATE] = S_WAIT_TWO
            recv_post(heap, I, P, fab, SL, left, r, tag, z, g)
            recv_post(heap, I, P, fab, SL, right, r, tag, z, g)
        elif st == S_WAIT_TWO and ev == RECV:
            bundle(heap, I, P, tick, CB, LS, red, r, g, True, z)
            ST[g, F_STATE] = S_WAIT_ONE
        elif st == S_WAIT_ONE and ev == RECV:
            bundle(heap, I, P, tick, CB, LS, red, r, g, True, z)
            ST[g, F_STATE] = S_TO_PARENT
        elif ST[g, F_REDS] < 1 and ev == GENERAL:
            ST[g, F_REDS] += 1
        elif st == S_TO_PARENT:
            ST[g, F_STATE] = S_WAIT_PARENT
            send_msg(heap, I, P, fab, SL, LK, MS, lk, ser, r, parent, tag, z)
            recv_post(heap, I, P, fab, SL, parent, r, tag, z, g)
        elif st == S_WAIT_PARENT and ev == RECV:
            bundle(heap, I, P, tick, CB, LS, red, r, g, True, z)
            ST[g, F_STATE] = S_TO_CHILDREN
        elif st == S_TO_CHILDREN:
            send_msg(heap, I, P, fab, SL, LK, MS, lk, ser, r, left, tag, z)
            send_msg(heap, I, P, fab, SL, LK, MS, lk, ser, r, right, tag, z)
            return True
    else:
        child = left if left >= 0 else right
        if st == S_BEGIN:
            ST[g, F_STATE] = S_WAIT_ONE
            recv_post(heap, I, P, fab, SL, child, r, tag, z, g)
        elif st == S_WAIT_ONE:
            bundle(heap, I, P, tick, CB, LS, red, r, g, True, z)
            ST[g, F_STATE] = S_TO_CHILDREN
        elif st == S_TO_CHILDREN:
            send_msg(heap, I, P, fab, SL, LK, MS, lk, ser, r, child, tag, z)
            return True
    return False


@piece
def algo_run(heap, I, P, tick, CB, LS, fab, SL, LK, MS, lk, ser, red, ST, C, HD, TREE, g, ev):
    """``phase.algo.run(ev)`` of stream ``g``; returns True when the stream exits."""
    kind = ST[g, F_KIND]
    if kind == K_DBT:
        return _dbt(heap, I, P, tick, CB, LS, fab, SL, LK, MS, lk, ser, red, ST, C, TREE, g, ev)
    c = ST[g, F_COLL]
    par = C[c, C_PAR]
    if ev == INIT:
        for _ in range(par if kind != K_HD else 1):
            insert_packet(heap, I, P, tick, CB, LS, ST, C, HD, red, g)
        return False
    if ev == RECV:
        ST[g, F_RECV] += 1
        insert_packet(heap, I, P, tick, CB, LS, ST, C, HD, red, g)
        return False
    ST[g, F_FREE] += 1
    if kind == K_DIRECT and ST[g, F_OP] == AR and ST[g, F_SC] <= P[P_N] - 1:
        if ST[g, F_RECV] < P[P_N] - 1:
            return False
        for _ in range(par):
            if not ready_send(heap, I, P, fab, SL, LK, MS, lk, ser, ST, C, HD, g):
                break
    else:
        ready_send(heap, I, P, fab, SL, LK, MS, lk, ser, ST, C, HD, g)
    return ST[g, F_SC] == 0 and ST[g, F_FREE] == par


@piece
def _added(heap, I, P, tick, CB, LS, fab, SL, LK, MS, lk, ser, red, ST, C, HD, TREE, RK, Q, r):
    """``Sys._added``: start queued streams while fewer than the threshold run."""
    i = RK[r, R_RUN]
    while i < RK[r, R_QLEN] and RK[r, R_RUN] < P[P_T]:
        RK[r, R_RUN] += 1
        g = Q[r, i]
        ST[g, F_INIT] = 1
        if algo_run(heap, I, P, tick, CB, LS, fab, SL, LK, MS, lk, ser, red, ST, C, HD, TREE, g, INIT):
            I[ERR] = 2  # no algorithm here exits on INIT
        i += 1


@piece
def _proceed_new(heap, I, P, tick, CB, LS, fab, SL, LK, MS, lk, ser, red, ST, C, HD, TREE, RK, Q, r, g):
    """``Sys.proceed`` of a new stream: into the queue by priority, then ``_added``."""
    n = RK[r, R_QLEN]
    if n >= Q.shape[1]:
        I[ERR] = 1
        return
    i = 0
    while i < n and (ST[Q[r, i], F_INIT] == 1 or ST[Q[r, i], F_PRIO] >= ST[g, F_PRIO]):
        i += 1
    for j in range(n, i, -1):
        Q[r, j] = Q[r, j - 1]
    Q[r, i] = g
    RK[r, R_QLEN] = n + 1
    _added(heap, I, P, tick, CB, LS, fab, SL, LK, MS, lk, ser, red, ST, C, HD, TREE, RK, Q, r)


@piece
def _generate(heap, I, P, tick, CB, LS, fab, SL, LK, MS, lk, ser, red, ST, C, HD, TREE, RK, Q, NPRIO, r, node):
    """``Sys.generate`` of the rank's next collective: its streams, each proceeded as it is made."""
    k = RK[r, R_NCOLL]
    RK[r, R_NCOLL] = k + 1
    count = C[k, C_COUNT]
    RK[r, R_DSTOT] = count
    RK[r, R_DSFIN] = 0
    pol = P[P_POLICY]
    pri = RK[r, R_PC]
    if pol == EXPLICIT:
        pri = NPRIO[node]
    elif pol == FIFO:
        RK[r, R_PC] -= 1
    else:
        RK[r, R_PC] += 1
    S = P[P_S]
    for _ in range(count):
        sid = RK[r, R_NSTREAM]
        if sid >= S:
            I[ERR] = 2
            return
        RK[r, R_NSTREAM] = sid + 1
        g = r * S + sid
        ST[g, :] = 0
        ST[g, F_KIND] = C[k, C_KIND]
        ST[g, F_OP] = C[k, C_OP]
        ST[g, F_COLL] = k
        ST[g, F_PRIO] = pri
        ST[g, F_SC] = C[k, C_SC]
        ST[g, F_STATE] = S_BEGIN
        if C[k, C_KIND] == K_DBT:
            ST[g, F_TREE] = RK[r, R_DBT] % 2
            RK[r, R_DBT] += 1
        _proceed_new(heap, I, P, tick, CB, LS, fab, SL, LK, MS, lk, ser, red, ST, C, HD, TREE, RK, Q, r, g)
        if I[ERR]:
            return


@piece
def _wl(heap, I, P, tick, CB, LS, fab, SL, LK, MS, lk, ser, red, ST, C, HD, TREE, RK, Q, NODE, NDUR, NPRIO, START,
        END, REP, r, done):
    """``Workload.call`` on a chain: the running node ends (``done``), the next one is issued (a COMP
    node: its duration on the rank's ticker, ``NDUR`` >= 0; a collective: ``NDUR`` = -1)."""
    lo, hi = NODE[r], NODE[r + 1]
    pos = RK[r, R_POS]
    now = I[NOW]
    if done:
        END[lo + pos] = now
        pos += 1
        RK[r, R_POS] = pos
    if lo + pos >= hi:
        RK[r, R_DONE] = 1
        REP[I[NREP], 0] = r
        REP[I[NREP], 1] = now
        I[NREP] += 1
        return
    node = lo + pos
    START[node] = now
    if NDUR[node] >= 0:
        register(heap, I, P, tick, CB, LS, r, NDUR[node], CB_WL, r, 0)
    else:
        _generate(heap, I, P, tick, CB, LS, fab, SL, LK, MS, lk, ser, red, ST, C, HD, TREE, RK, Q, NPRIO, r, node)


@piece
def _finish(heap, I, P, tick, CB, LS, fab, SL, LK, MS, lk, ser, red, ST, C, HD, TREE, RK, Q, NODE, NDUR, NPRIO,
            START, END, REP, g):
    """``Sys.proceed`` of a stream that exits: its DataSet counts it (the last one ends the node), it
    leaves the queue, then ``_removed``."""
    r = g // P[P_S]
    RK[r, R_DSFIN] += 1
    if RK[r, R_DSFIN] == RK[r, R_DSTOT]:
        _wl(heap, I, P, tick, CB, LS, fab, SL, LK, MS, lk, ser, red, ST, C, HD, TREE, RK, Q, NODE, NDUR, NPRIO,
            START, END, REP, r, True)
    n = RK[r, R_QLEN]
    i = 0
    while i < n and Q[r, i] != g:
        i += 1
    for j in range(i, n - 1):
        Q[r, j] = Q[r, j + 1]
    RK[r, R_QLEN] = n - 1
    RK[r, R_RUN] -= 1
    _added(heap, I, P, tick, CB, LS, fab, SL, LK, MS, lk, ser, red, ST, C, HD, TREE, RK, Q, r)


@piece
def _tick(heap, I, P, tick, CB, LS, fab, SL, LK, MS, lk, ser, red, ST, C, HD, TREE, RK, Q, NODE, NDUR, NPRIO,
          START, END, REP, lst, r):
    """``Ticker._run``: the rank's callbacks for this instant, those added meanwhile included."""
    c = LS[lst, 0]
    S = P[P_S]
    while c >= 0:
        kind = CB[c, B_KIND]
        if kind == CB_WL:
            _wl(heap, I, P, tick, CB, LS, fab, SL, LK, MS, lk, ser, red, ST, C, HD, TREE, RK, Q, NODE, NDUR, NPRIO,
                START, END, REP, CB[c, B_A], True)
        elif kind == CB_RED:
            g = CB[c, B_A]
            register(heap, I, P, tick, CB, LS, g // S, CB[c, B_B], CB_CALL, g, 0)
        else:
            g = CB[c, B_A]
            if algo_run(heap, I, P, tick, CB, LS, fab, SL, LK, MS, lk, ser, red, ST, C, HD, TREE, g, GENERAL):
                _finish(heap, I, P, tick, CB, LS, fab, SL, LK, MS, lk, ser, red, ST, C, HD, TREE, RK, Q, NODE, NDUR,
                        NPRIO, START, END, REP, g)
        if I[ERR]:
            return
        nxt = CB[c, B_NEXT]
        CB[c, B_NEXT] = I[CFREE]
        I[CFREE] = c
        c = nxt
    hdel(tick, I, TCOUNT, I[NOW] * P[P_N] + r)
    LS[lst, 0] = I[LFREE]
    I[LFREE] = lst


@intrinsic
def _int64_ptr(typingctx, addr):
    """The address ``addr`` as an int64 pointer (for :func:`_borrow`)."""
    sig = types.CPointer(types.int64)(addr)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(types.CPointer(types.int64)))

    return sig, codegen


@kernel
def _borrow(a):
    """``a`` as a view without a reference count: passing it to a piece costs no atomic increments (the
    caller keeps ``a`` alive for the whole run).  Every piece takes some twenty arrays, and counting their
    references was half of the run time."""
    return carray(_int64_ptr(a.ctypes.data), a.shape)


@kernel
def run(heap, tick, fab, I, P, CB, LS, SL, LK, MS, lk, ser, red, ST, C, HD, TREE, RK, Q, NODE, NDUR, NPRIO, START, END,
        REP):
    """Fire every rank at t = 0, then process events in (time, sequence) order until none is left."""
    return _run(_borrow(heap), _borrow(tick), _borrow(fab), _borrow(I), _borrow(P), _borrow(CB), _borrow(LS), _borrow(SL), _borrow(LK), _borrow(MS),
                _borrow(lk), _borrow(ser), _borrow(red), _borrow(ST), _borrow(C), _borrow(HD), _borrow(TREE),
                _borrow(RK), _borrow(Q), _borrow(NODE), _borrow(NDUR), _borrow(NPRIO), _borrow(START), _borrow(END),
                _borrow(REP))


@kernel
def _run(heap, tick, fab, I, P, CB, LS, SL, LK, MS, lk, ser, red, ST, C, HD, TREE, RK, Q, NODE, NDUR, NPRIO, START, END,
         REP):
    n = P[P_N]
    for r in range(n):
        _wl(heap, I, P, tick, CB, LS, fab, SL, LK, MS, lk, ser, red, ST, C, HD, TREE, RK, Q, NODE, NDUR, NPRIO,
            START, END, REP, r, False)
        if I[ERR]:
            return
    while I[HSIZE] and not I[ERR]:
        t, s, kind, a, b = pop_event(heap, I)
        I[NOW] = t
        I[CURSEQ] = s
        I[EVENTS] += 1
        if t == 0:
            I[ATZERO] += 1
        if kind == EV_TICK:
            _tick(heap, I, P, tick, CB, LS, fab, SL, LK, MS, lk, ser, red, ST, C, HD, TREE, RK, Q, NODE, NDUR,
                  NPRIO, START, END, REP, a, b)
        elif kind == EV_FREE:
            LK[a, L_QD] = 0
            m = LK[a, L_PH]
            if m >= 0:
                LK[a, L_PH] = MS[m, M_NEXT]
                if LK[a, L_PH] < 0:
                    LK[a, L_PT] = -1
                transmit(heap, I, LK, MS, lk, ser, a, m)
        else:
            if kind == EV_ARRIVE:
                m = a
                hop = MS[m, M_HOP] + 1
                MS[m, M_HOP] = hop
                link = next_link(P, MS[m, M_SRC], MS[m, M_DST], hop)
                if link >= 0:
                    link_send(heap, I, LK, MS, lk, ser, link, m)
                    continue
                s = MS[m, M_SLOT]
                SL[s, 2] += 1
                g = MS[m, M_G]
                MS[m, M_NEXT] = I[MFREE]
                I[MFREE] = m
                if SL[s, 1] < SL[s, 2]:  # no receive posted yet: it lands and waits
                    continue
                settled(I, fab, SL, s)
            else:
                g = a
            if algo_run(heap, I, P, tick, CB, LS, fab, SL, LK, MS, lk, ser, red, ST, C, HD, TREE, g, RECV):
                _finish(heap, I, P, tick, CB, LS, fab, SL, LK, MS, lk, ser, red, ST, C, HD, TREE, RK, Q, NODE, NDUR,
                        NPRIO, START, END, REP, g)
    if not I[ERR]:
        for r in range(n):
            if RK[r, R_DONE] == 0:
                I[ERR] = 2  # a deadlock: the event engine reports it
