"""Vector kernel of the batched engine: ring streams of many rings at once, one numpy step per message.

A *batch* is a set of rings (collective instances) on disjoint ranks with the same
shape (operation, bytes, ring size ``p``, bundle delay); its *slots* are their members
side by side, each ring in its ring order, and ``pred[i]`` is the slot of slot ``i``'s
ring predecessor (the ring sends clockwise: slot ``pred[i]`` sends to slot ``i``).
The recurrence and why it is exact: :mod:`netsim.astra.batched`.

Link state lives on :class:`RingBatch` (one object per run), so the congestion-aware
per-link FIFOs carry over from one batch to the next:

* Switch: the up-link of rank ``u`` (only ``u`` sends on it) and the down-link to rank
  ``v``.  Runs where a down-link sees several senders (``v``'s rings differ) are
  computed by :mod:`netsim.astra.batched_timed`; should one reach this kernel anyway,
  a batch assumes every earlier batch's messages entered the down-link before its own,
  and :class:`Interleaved` is raised when a sender differs from the link's previous
  one and its first message reaches the switch no later than the link's last one.
* Ring (neighbours one hop apart only) and FullyConnected: one link per (sender,
  receiver) pair; only the sender uses it.

Congestion-unaware delays follow ASTRA-sim's multi-dimensional rule (the first dimension
where sender and receiver differ), so sub-group rings also run on multi-dimensional networks.
"""

from __future__ import annotations

import math

import numpy as np

from netsim import astra_arith as arith


class Interleaved(Exception):
    """A congestion-aware down-link would carry messages of two rings interleaved in time."""


def ring_shape(ctx, op: str, size: int, p: int) -> tuple[int, int, int, int]:
    """``(streams, messages per stream, message bytes, reduction ns)`` of a ring collective on ``p`` ranks
    (reduction ns: of each of the first ``p - 1`` messages after the first; all-gather and all-to-all: 0)."""
    cfg = ctx.system
    splits = cfg.preferred_dataset_splits
    chunk = arith.chunk_bytes(size, splits, ctx.npus, op)  # inflation to the NPU count, not p
    if chunk > size // splits:
        size = splits * chunk
    count = -(-size // chunk)
    msg = chunk if op == "all_gather" else chunk // p
    if msg < 1 or chunk < 1:
        raise ValueError("batched_plan admitted a collective with empty messages")
    # all-to-all: p(p-1)/2 messages of chunk / p, none reduced (ASTRA-sim Ring.cc)
    k_total = 2 * (p - 1) if op == "all_reduce" else p * (p - 1) // 2 if op == "all_to_all" else p - 1
    red = 0 if op in ("all_gather", "all_to_all") else arith.reduction_ns(msg, cfg.local_mem_bw_GBps)
    return count, k_total, msg, red


class RingBatch:
    """Ring streams of all ranks of a run; congestion-aware link state across batches."""

    def __init__(self, ctx):
        d = ctx.network.dims[0]
        self.ctx, self.kind, self.n, self.lat, self.bw = ctx, d.kind, d.npus, d.latency, d.bw
        self.congestion = ctx.model == "congestion-aware"
        n = ctx.npus
        self.up_free = np.zeros(n, dtype=np.int64)  # Switch: up-link of rank u
        self.down_free = np.zeros(n, dtype=np.int64)  # Switch: down-link to rank v
        self.down_last = np.full(n, -1, dtype=np.int64)  # latest arrival at the switch for v
        self.down_sender = np.full(n, -1, dtype=np.int64)  # sender of that message
        self.pair_free: dict[int, int] = {}  # Ring / FullyConnected: link u -> v, key u * n + v
        self.messages = 0
        self.steps = 0

    # ---------------------------------------------------------------- delays
    def _delays(self, src: np.ndarray, dst: np.ndarray, msg: int) -> np.ndarray:
        """Congestion-unaware delay per message, on the first dimension where the ranks differ
        (:meth:`AstraNetwork.delay_ns`), :func:`arith.message_ns` per distinct hop count."""
        out = np.full(src.shape, -1, dtype=np.int64)
        s, d = src.copy(), dst.copy()
        for dim in self.ctx.network.dims:
            a, b = s % dim.npus, d % dim.npus
            here = (a != b) & (out < 0)
            if np.any(here):
                if dim.kind == "Ring":
                    cw = (b - a) % dim.npus
                    hops = np.minimum(cw, dim.npus - cw)[here]
                else:
                    hops = np.full(int(np.count_nonzero(here)), 1 if dim.kind == "FullyConnected" else 2)
                uniq, inv = np.unique(hops, return_inverse=True)
                vals = [arith.message_ns(msg, int(h), dim.latency, dim.bw) for h in uniq.tolist()]
                out[here] = np.array(vals, dtype=np.int64)[inv.reshape(hops.shape)]
            s, d = s // dim.npus, d // dim.npus
        if np.any(out < 0):
            raise ValueError("a ring sends a message from an NPU to itself")
        return out

    # ------------------------------------------------------------ collective
    def collective(self, op: str, size: int, p: int, ranks: np.ndarray, pred: np.ndarray, start: np.ndarray,
                   bundle: int) -> np.ndarray:
        """End time per slot of one collective (``op``, ``size`` bytes per rank) on the batch's rings.

        ``p``: ring size; ``ranks``: global rank per slot; ``pred``: slot of the ring predecessor; ``start``: issue
        time per slot; ``bundle``: ns per packet bundle (endpoint delay, 10 on a sub-group ring)."""
        cfg = self.ctx.system
        count, k_total, msg, red = ring_shape(self.ctx, op, size, p)
        threshold = math.ceil(cfg.active_chunks_per_dimension / self.ctx.queues_per_dim)
        src = ranks[pred]
        net = self._link_state(ranks, pred, msg) if self.congestion else self._delays(src, ranks, msg)
        exits: list[np.ndarray] = []
        for j in range(count):
            if j < threshold:
                t0 = start
            else:  # stream j starts when the (j - threshold)-th earliest of the previous streams exits
                t0 = np.sort(np.stack(exits, axis=1), axis=1)[:, j - threshold]
            exits.append(self._stream(t0, pred, net, k_total, p, bundle, red))
        if self.congestion:
            self._store(ranks, pred, net)
        self.messages += count * k_total * ranks.size
        return np.max(np.stack(exits, axis=1), axis=1)

    def _stream(self, t0, pred, net, k_total: int, p: int, bundle: int, red: int) -> np.ndarray:
        s = t0 + bundle  # the zero-latency packet's bundle, then the first send
        for k in range(1, k_total + 1):
            a = self._arrive(s, pred, net) if self.congestion else s[pred] + net
            s = np.maximum(a, s) + (bundle + red if 2 <= k + 1 <= p else bundle)
        self.steps += k_total
        return s

    # ------------------------------------------------------ congestion-aware
    def _link_state(self, ranks, pred, msg: int) -> dict:
        """This batch's link free times (by sender slot and, Switch, by receiver slot)."""
        st = {"ser": arith.serialization_ns(msg, self.bw), "lk": arith.link_ns(msg, self.lat, self.bw)}
        if self.kind == "Switch":
            st["up"] = self.up_free[ranks].copy()
            st["down"] = self.down_free[ranks].copy()
            st["first"] = None
            st["last"] = None
        else:
            succ = np.empty_like(pred)
            succ[pred] = np.arange(pred.size)
            keys = (ranks * self.n + ranks[succ]).tolist()
            st["keys"] = keys
            st["up"] = np.array([self.pair_free.get(k, 0) for k in keys], dtype=np.int64)
        return st

    def _arrive(self, s: np.ndarray, pred: np.ndarray, st: dict) -> np.ndarray:
        """Arrival at each slot of its predecessor's message sent at ``s`` (per-link FIFO)."""
        go = np.maximum(s, st["up"])
        st["up"] = go + st["ser"]
        if self.kind != "Switch":
            return (go + st["lk"])[pred]
        x = (go + st["lk"])[pred]  # reaches the switch
        if st["first"] is None:
            st["first"] = x
        st["last"] = x
        down = np.maximum(x, st["down"])
        st["down"] = down + st["ser"]
        return down + st["lk"]

    def _store(self, ranks, pred, st: dict) -> None:
        if self.kind != "Switch":
            self.pair_free.update(zip(st["keys"], st["up"].tolist()))
            return
        senders = ranks[pred]
        prev, last = self.down_sender[ranks], self.down_last[ranks]
        other = (prev >= 0) & (prev != senders)
        if np.any(other & (st["first"] <= last)):
            raise Interleaved("a Switch down-link would carry messages of two rings interleaved")
        self.up_free[ranks] = st["up"]
        self.down_free[ranks] = st["down"]
        self.down_last[ranks] = np.maximum(last, st["last"])
        self.down_sender[ranks] = senders
