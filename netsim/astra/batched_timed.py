"""Congestion-aware Switch runs whose down-links merge several rings: link queues in time order, all ranks at once.

:mod:`netsim.astra.batched` computes one collective instance after another; that is
exact while every Switch down-link sees its senders one after the other.  When a
rank ``v`` has different ring predecessors over its chain (a comm-group ring, then
the world ring), the messages of its next ring can reach the switch while its
current ring still sends to it, and the down-link serves them in arrival order.
Here every rank runs its whole chain as one sequence of *events* (ring sends and
stream exits), computed round by round for all ranks at once with numpy:

* event ``k`` of a stream (``T = 1`` active chunk, so a rank's streams run one after
  another): the first sends ``b`` after the stream starts (the previous exit, plus
  the compute before the collective on its first stream); event ``k >= 2`` happens
  ``max(previous event, arrival of the predecessor's message k - 1) + b`` (+ the
  reduction while ``k <= p``); event ``K + 1`` is the exit;
* a send takes the sender's up-link FIFO (``go = max(t, free)``, it reaches the switch
  ``link_ns`` after ``go``); the sender's messages leave in its event order;
* a down-link with one sender over the whole chain (from ``L*`` on, for a rank whose
  predecessors change: the predecessors of its legs ``>= L*`` are one rank) is served
  when its receiver needs the message, in the receiver's order, which is the sender's;
* a *contested* down-link (receiver before ``L*``) is served in arrival order: a
  message that reached the switch at ``x`` is served once no other message can reach
  that switch port before ``x``: every other sender's next message is sent (and
  later), or its lower bound is later.  A sender's bound is its next event's bound
  plus ``b`` per event (and the compute) before that send, plus ``link_ns``; a rank's
  next event is bounded by its last event + ``b``, and, when it waits on a message not
  sent yet, by that sender's bound carried along the chain of waiting ranks (pointer
  jumping, :meth:`Timed._clocks`).  When no rank can advance, the earliest waiting
  message ``x0`` of all is served with every one before ``x0 + 2 * min link_ns + min b``:
  any message not yet sent is caused by serving one of them, so it arrives later.
  Ports are served when a rank waits on one (serving earlier or later gives the same
  times); each serve takes every safe message at once, sorted per port, the port's
  FIFO as one segmented max-plus scan.

Same-instant arrivals at a contested port are served in the order of their up-link
start (the event engine's queue runs same-time events in scheduling order, and an
arrival is scheduled when its up-link transmission starts); equal start times there
raise :class:`Interleaved` (the event engine runs).  Every quantity is fixed by
strictly earlier ones (``b >= 1``), so this is the event engine's timeline.  The
ranks' collective start and end times are then replayed through the wave engine
(:class:`Replay`), which prints, reports and counts as for any batched run.
"""

from __future__ import annotations

import numpy as np

from netsim import astra_arith as arith
from netsim.astra.batched_ring import Interleaved, ring_shape

_BIG = np.iinfo(np.int64).max // 4
#: Above this many messages (9 bytes each: arrival time and a flag; 2.4 GB at the cap) the waves run
#: instead and hand overlapping down-links to the event engine.  bench_astra_scale's groups+world at
#: 4,096 NPUs: 150.9M messages, 18 CPU s, 1.27 GB peak.
MAX_MESSAGES = 1 << 28


class NotBatched(Exception):
    """The batched engine found, while running, that it cannot reproduce the event engine here."""


def contested(ctx, plan) -> bool:
    """Whether some rank of a congestion-aware Switch run has ring predecessors that differ over its chain."""
    if ctx.model != "congestion-aware" or ctx.network.dims[0].kind != "Switch":
        return False
    names_of: dict[int, set] = {}
    for r in range(ctx.npus):
        ch = plan.chains[r]
        names = names_of.get(id(ch))
        if names is None:
            names = names_of[id(ch)] = {c[2] for c in ch.colls.values()}
        preds = set()
        for name in names:
            ring = plan.rings[name]
            preds.add(int(ring.members[ring.pred[ring.index[r]]]) if ring.local else (r - 1) % ctx.npus)
        if len(preds) > 1:
            return True
    return False


class Timed:
    """Per-rank event sequences of a run (see the module docstring); :meth:`run` fills ``t_start``/``t_end``."""

    def __init__(self, ctx, plan):
        self.ctx, self.plan = ctx, plan
        n = ctx.npus
        seqs: dict[int, list] = {}
        lrank, lgap, linst, first = [], [], [], np.zeros(n + 1, dtype=np.int64)
        inst: dict[tuple, int] = {}
        ishape: list[tuple] = []
        for r in range(n):
            ch = plan.chains[r]
            seq = seqs.get(id(ch))
            if seq is None:
                seq = seqs[id(ch)] = self._sequence(ch, plan.rings)
            first[r] = len(lrank)
            for gap, op, size, name, k in seq:
                key = (plan.rings[name].key, k)
                i = inst.get(key)
                if i is None:
                    i = inst[key] = len(ishape)
                    ishape.append((op, size, name))
                elif ishape[i][:2] != (op, size):
                    raise NotBatched(f"the members of comm group {name!r} issue different collectives on it")
                lrank.append(r)
                lgap.append(gap)
                linst.append(i)
        first[n] = len(lrank)
        self.lstart, self.lend = first[:-1], first[1:]
        nl = len(lrank)
        self.lrank = np.asarray(lrank, dtype=np.int64)
        self.lgap = np.asarray(lgap, dtype=np.int64)
        linst = np.asarray(linst, dtype=np.int64)
        # every instance's legs in ring order, and each leg's predecessor leg
        slots = [np.full(self.plan.rings[name].p, -1, dtype=np.int64) for _op, _s, name in ishape]
        for leg, (r, i) in enumerate(zip(lrank, linst.tolist())):
            ring = plan.rings[ishape[i][2]]
            slots[i][ring.index[r] if ring.local else r] = leg
        self.lpredleg = np.zeros(nl, dtype=np.int64)
        d = ctx.network.dims[0]
        cols = {c: np.zeros(len(ishape), dtype=np.int64) for c in ("p", "K", "count", "b", "red", "ser", "lk")}
        shapes: dict[tuple, tuple] = {}
        for i, (op, size, name) in enumerate(ishape):
            ring = plan.rings[name]
            if np.any(slots[i] < 0):
                raise NotBatched(f"a collective on {name or 'the world'!r} that not all its members issue (a deadlock)")
            self.lpredleg[slots[i]] = slots[i][ring.pred]
            sk = (op, size, ring.p, ring.local)
            if sk not in shapes:
                count, k_total, msg, red = ring_shape(ctx, op, size, ring.p)
                shapes[sk] = (ring.p, k_total, count, 10 if ring.local else ctx.endpoint_delay, red,
                              arith.serialization_ns(msg, d.bw), arith.link_ns(msg, d.latency, d.bw))
            for c, v in zip(cols, shapes[sk]):
                cols[c][i] = v
        for c, v in cols.items():
            setattr(self, "l" + c, v[linst])
        self.lpred = self.lrank[self.lpredleg]
        sends = self.lcount * self.lK
        self.lsendbase = np.concatenate(([0], np.cumsum(sends)[:-1])).astype(np.int64)
        events = self.lcount * (self.lK + 1)
        self.levbase = np.concatenate(([0], np.cumsum(events)[:-1])).astype(np.int64)
        self.lcgap = np.cumsum(self.lgap)
        self.bmin = int(self.lb.min()) if nl else 1
        self.delta = 2 * int(self.llk.min()) + self.bmin if nl else 1
        self.messages = int(sends.sum())
        self._streams()

    @staticmethod
    def _sequence(ch, rings) -> list:
        """``(compute ns before it, op, bytes, group name, n-th on its ring)`` per collective of a chain."""
        t, out, gap, counts = ch.t, [], 0, {}
        for i in ch.order:
            c = ch.colls.get(i)
            if c is None:
                gap += arith.replay_ns(int(t.duration_micros[i]))
                continue
            key = rings[c[2]].key
            k = counts.get(key, 0)
            counts[key] = k + 1
            out.append((gap, c[0], c[1], c[2], k))
            gap = 0
        return out

    def _streams(self) -> None:
        """Contested down-links: ``Lstar`` per rank, and one stream per leg of such a rank."""
        nl = len(self.lrank)
        last = np.maximum(self.lend - 1, 0)
        bad = np.flatnonzero(self.lpred != self.lpred[last[self.lrank]]) if nl else np.zeros(0, dtype=np.int64)
        self.Lstar = self.lstart.copy()
        np.maximum.at(self.Lstar, self.lrank[bad], bad + 1)
        legs = np.flatnonzero(self.Lstar[self.lrank] > self.lstart[self.lrank]) if nl else bad
        self.s_leg, self.s_recv = legs, self.lrank[legs]
        self.s_sleg = self.lpredleg[legs]
        self.s_sender = self.lrank[self.s_sleg]
        self.s_base = self.lsendbase[self.s_sleg]
        self.s_len = (self.lcount * self.lK)[legs]
        self.s_ptr = np.zeros(legs.size, dtype=np.int64)
        recv, self.s_r = np.unique(self.s_recv, return_inverse=True)
        self.c_rank = recv
        self.c_last = np.full((recv.size, 2), -1, dtype=np.int64)  # (x, go) last served per contested port
        self.c_lastleg = np.full(recv.size, -1, dtype=np.int64)

    # ----------------------------------------------------------------- run
    def run(self) -> None:
        n, nl = self.ctx.npus, len(self.lrank)
        self.leg = self.lstart.copy()
        self.j = np.zeros(n, dtype=np.int64)
        self.k = np.ones(n, dtype=np.int64)
        self.e = np.zeros(n, dtype=np.int64)
        self.ufree = np.zeros(n, dtype=np.int64)
        self.dfree = np.zeros(n, dtype=np.int64)
        self.gsent = self.lsendbase[np.minimum(self.lstart, max(nl - 1, 0))] if nl else np.zeros(n, dtype=np.int64)
        self.gsent = self.gsent.copy()
        self.done = self.lstart >= self.lend
        self.x = np.empty(max(self.messages, 1), dtype=np.int64)
        self.proc = np.zeros(max(self.messages, 1), dtype=bool)
        self.t_start = np.zeros(nl, dtype=np.int64)
        self.t_end = np.zeros(nl, dtype=np.int64)
        self.active = np.flatnonzero(~self.done)
        self.rounds = 0
        while self.active.size:
            self.rounds += 1
            moved = self._advance()
            if self.s_leg.size and (self.waiting or not moved):
                served = self._serve(force=not moved)
                if not moved and not served:
                    raise NotBatched(f"{self.active.size} rank(s) wait on each other (a deadlock)")
            elif not moved:
                raise NotBatched(f"{self.active.size} rank(s) wait on each other (a deadlock)")

    def _advance(self) -> bool:
        a = self.active
        L, jj, kk, e = self.leg[a], self.j[a], self.k[a], self.e[a]
        K = self.lK[L]
        first = kk == 1
        m = np.where(first, 0, self.lsendbase[self.lpredleg[L]] + jj * K + kk - 2)
        pr = self.proc[m]
        sent = m < self.gsent[self.lpred[L]]
        pull_ok = L >= self.Lstar[a]
        ok = first | (sent & (pr | pull_ok))
        self.waiting = not ok.all() and bool(np.any(~ok & sent))  # a contested port holds a message it needs
        if not ok.any():
            return False
        if not ok.all():
            a, L, jj, kk, e, K, first, m, pr = (v[ok] for v in (a, L, jj, kk, e, K, first, m, pr))
        A = self.x[m]
        pull = ~(first | pr)
        if pull.any():
            v, lp = a[pull], L[pull]
            dn = np.maximum(A[pull], self.dfree[v])
            self.dfree[v] = dn + self.lser[lp]
            A[pull] = dn + self.llk[lp]
        gap = np.where(jj == 0, self.lgap[L], 0)
        red = np.where(kk <= self.lp[L], self.lred[L], 0)
        t = np.where(first, e + gap, np.maximum(e, A) + red) + self.lb[L]
        st = first & (jj == 0)
        if st.any():
            self.t_start[L[st]] = (e + gap)[st]
        send = kk <= K
        v, ls = (a, L) if send.all() else (a[send], L[send])
        go = np.maximum(t[send], self.ufree[v])
        self.ufree[v] = go + self.lser[ls]
        self.x[self.gsent[v]] = go + self.llk[ls]
        self.gsent[v] += 1
        self.e[a] = t
        kk = kk + 1
        ex = kk > K + 1
        if ex.any():
            ae, le = a[ex], L[ex]
            jn = jj[ex] + 1
            fin = jn >= self.lcount[le]
            self.t_end[le[fin]] = t[ex][fin]
            jn[fin] = 0
            self.j[ae] = jn
            kk[ex] = 1
            if fin.any():
                af = ae[fin]
                self.leg[af] += 1
                over = af[self.leg[af] >= self.lend[af]]
                if over.size:
                    self.done[over] = True
                    self.active = np.flatnonzero(~self.done)
        self.k[a] = kk
        return True

    def _serve(self, force: bool) -> int:
        """Serve every contested down-link message that no other message can precede (module docstring):
        all of them at once, each port's queue in (arrival, up-link start) order as one max-plus scan."""
        idx = np.flatnonzero((self.s_ptr < self.s_len) & (self.leg[self.s_recv] < self.Lstar[self.s_recv]))
        if not idx.size:
            return 0
        sender, sleg, q, base, slen = (self.s_sender[idx], self.s_sleg[idx], self.s_ptr[idx], self.s_base[idx],
                                       self.s_len[idx])
        avail = np.clip(self.gsent[sender] - base, 0, slen) - q  # sent, not served
        r = self.s_r[idx]
        bound = np.full(self.c_rank.size, _BIG, dtype=np.int64)
        uns = np.flatnonzero(q + avail < slen)
        if uns.size:  # the next message of a stream not sent yet arrives no earlier than its lower bound
            C = self._clocks() if avail.any() else self.e + self.bmin
            u, sl, q2 = sender[uns], sleg[uns], (q + avail)[uns]
            kq = self.lK[sl]
            ul = np.minimum(self.leg[u], len(self.lrank) - 1)
            ev_t = self.levbase[sl] + (q2 // kq) * (kq + 1) + q2 % kq
            ev_c = self.levbase[ul] + self.j[u] * (self.lK[ul] + 1) + self.k[u] - 1
            lb = C[u] + (ev_t - ev_c) * self.bmin + self.lcgap[sl] - self.lcgap[ul] + self.llk[sl]
            np.minimum.at(bound, r[uns], lb)
        tot = int(avail.sum())
        if not tot:
            return 0
        st = np.repeat(np.arange(idx.size), avail)
        pos = np.arange(tot) - np.repeat(np.cumsum(avail) - avail, avail)
        mi = base[st] + q[st] + pos
        xm = self.x[mi]
        if force:
            bound = np.maximum(bound, int(xm.min()) + self.delta)
        keep = xm < bound[r[st]]  # a prefix of each stream (its arrivals do not decrease)
        if not keep.any():
            return 0
        st, pos, mi, xm = st[keep], pos[keep], mi[keep], xm[keep]
        rl = self.s_leg[idx[st]]  # the receiver's leg (same shape as the sender's)
        go = xm - self.llk[rl]
        order = np.lexsort((pos, st, go, xm, r[st]))
        st, mi, xm, go, rl = st[order], mi[order], xm[order], go[order], rl[order]
        rr = r[st]
        new = np.ones(st.size, dtype=bool)
        new[1:] = rr[1:] != rr[:-1]
        if np.any(~new[1:] & (xm[1:] == xm[:-1]) & (go[1:] == go[:-1]) & (st[1:] != st[:-1])):
            raise Interleaved("two rings' messages reach a Switch down-link at the same instant from up-links "
                              "started at the same instant (the event engine's order decides)")
        f = np.flatnonzero(new)
        lx, lg = self.c_last[rr[f], 0], self.c_last[rr[f], 1]
        if np.any((xm[f] < lx) | ((xm[f] == lx) & ((go[f] < lg) | ((go[f] == lg) & (rl[f] != self.c_lastleg[rr[f]]))))):
            raise Interleaved("a Switch down-link's messages from two rings tie in time (event order decides)")
        # FIFO per port: d_i = P_i + max(free, max_{j<=i} (x_j - P_j)), P = serialization before i in the port
        ser = self.lser[rl]
        seg = np.cumsum(new) - 1
        cs = np.cumsum(ser)
        P = cs - ser - (cs - ser)[f][seg]
        w = xm - P
        lo = np.minimum.reduceat(w, f)
        span = int((w - lo[seg]).max()) + 1
        if span * (f.size + 1) >= _BIG:  # pragma: no cover - offsets would overflow: serve port by port
            raise NotBatched("contested ports too far apart in time for one scan")
        cm = np.maximum.accumulate(w - lo[seg] + seg * span) - seg * span + lo[seg]
        v = self.c_rank[rr]
        d = P + np.maximum(self.dfree[v], cm)
        self.x[mi] = d + self.llk[rl]
        self.proc[mi] = True
        last = np.append(f[1:], st.size) - 1
        self.dfree[v[last]] = d[last] + ser[last]
        self.c_last[rr[last], 0], self.c_last[rr[last], 1], self.c_lastleg[rr[last]] = xm[last], go[last], rl[last]
        np.add.at(self.s_ptr, idx[st], 1)
        return int(st.size)

    def _clocks(self) -> np.ndarray:
        """A lower bound of every rank's next event: its last event + b, and for a rank waiting on a message
        not sent yet, the sender's bound carried along the chain of waiting ranks (pointer jumping)."""
        n = self.ctx.npus
        a = self.active
        L, jj, kk = self.leg[a], self.j[a], self.k[a]
        K = self.lK[L]
        C = self.e + self.bmin
        ptr = np.arange(n)
        off = np.full(n, -_BIG, dtype=np.int64)
        wait = kk > 1
        sl = self.lpredleg[L]
        m = np.where(wait, self.lsendbase[sl] + jj * K + kk - 2, 0)
        w = self.lpred[L]
        sent = m < self.gsent[w]
        got = wait & sent & ~self.proc[m]
        C[a[got]] = np.maximum(C[a[got]], self.x[m[got]] + self.llk[L[got]] + self.lb[L[got]])
        un = wait & ~sent
        if un.any():
            u, w, L, sl, jj, kk, K = a[un], w[un], L[un], sl[un], jj[un], kk[un], K[un]
            wl = self.leg[w]
            ev_send = self.levbase[sl] + jj * (K + 1) + kk - 2
            ev_c = self.levbase[wl] + self.j[w] * (self.lK[wl] + 1) + self.k[w] - 1
            ptr[u] = w
            off[u] = (ev_send - ev_c) * self.bmin + self.lcgap[sl] - self.lcgap[wl] + 2 * self.llk[L] + self.lb[L]
            for _ in range(max(1, n.bit_length())):
                C = np.maximum(C, C[ptr] + off)
                off = np.maximum(off + off[ptr], -_BIG)
                ptr = ptr[ptr]
                if not np.any(off > -_BIG):  # every chain collapsed onto its end
                    break
        return C


class Replay:
    """The wave engine's ``batch``: collective end times looked up from a :class:`Timed` run."""

    def __init__(self, ctx, timed: Timed):
        self.ctx, self.timed = ctx, timed
        self.next = timed.lstart.copy()
        self.messages = 0
        self.steps = 0

    def collective(self, op: str, size: int, p: int, ranks: np.ndarray, pred: np.ndarray, start: np.ndarray,
                   bundle: int, algo=None, local: bool = False) -> np.ndarray:
        legs = self.next[ranks]
        self.next[ranks] += 1
        if not np.array_equal(self.timed.t_start[legs], start):  # pragma: no cover - a bug, not an input
            raise NotBatched("the replay of the time-ordered run disagrees on a collective's start")
        count, k_total, _msg, _red = ring_shape(self.ctx, op, size, p)
        self.messages += count * k_total * ranks.size
        self.steps += count * k_total
        return self.timed.t_end[legs]


__all__ = ["NotBatched", "Replay", "Timed", "contested"]
