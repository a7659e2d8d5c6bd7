"""The batched engine: every rank at once, one numpy step per ring message index.

Where it applies (:func:`batched_plan` says why not otherwise) the event engine's
timeline has a closed recurrence, so the same integer-ns results come from arrays:

* a 1-D ASTRA-sim network, model ``analytical`` or ``congestion-aware``, one queue per
  dimension, no rendezvous, no custom collectives, no roofline or replay-only, a
  non-zero endpoint delay;
* every rank's trace is a *chain* (its data-dependency DAG has exactly one topological
  order), of COMP nodes and ALL_REDUCE / ALL_GATHER / REDUCE_SCATTER collectives on
  the world group with the ``ring`` algorithm; every rank has the same sequence of
  collectives (operation, bytes).

Why exact.  A chain issues its nodes one after another (each starts when its
predecessor ends), so issue order never depends on same-instant event order.  A rank
runs one collective at a time (ASTRA-sim's GPU comm lane), and a ring stream on rank
``r`` is the recurrence of :class:`netsim.astra.algorithms.Ring`: the first bundle
sends at ``T0 + e``; its k-th message from the ring predecessor lands at ``A_k``, is
consumed at ``R_k = max(A_k, S_k)`` (a receive posted late completes at once), and the
next message leaves ``e`` (+ the reduction on the first ``p - 1`` messages of an
all-reduce or reduce-scatter) later; the stream exits one bundle after its last
receive.  Stream ``T + m`` of a collective (``T`` active chunks) starts at the m-th
earliest exit.  ``A_k`` is the sender's ``S_k`` plus the delay (analytical) or, in
the congestion-aware model, the per-link FIFO recurrence: with one ring direction,
every link carries one sender's messages in send order (Ring / FullyConnected: the link
to the successor; Switch: the sender's up-link and the receiver's down-link), and
one-at-a-time chunks (``T = 1``) keep that order.  tests/test_astra_batched.py
checks the engine against the event engine (``engine="full"``) on uneven per-rank
compute, every collective, both models and all three topologies.

Same-instant finishes are reported in rank order (the event engine: in event order).
"""

from __future__ import annotations

import math

import numpy as np

from netsim.astra import arith
from netsim.astra.custom import dag
from netsim.chakra.model import MISSING
from netsim.chakra.schema import CommType, NodeType
from netsim.vocab import normalize_group_name

_OPS = {int(CommType.ALL_REDUCE): "all_reduce", int(CommType.ALL_GATHER): "all_gather",
        int(CommType.REDUCE_SCATTER): "reduce_scatter"}
_COMP, _COLL = int(NodeType.COMP_NODE), int(NodeType.COMM_COLL_NODE)


class Chain:
    """One distinct trace as a chain: node rows in issue order, collectives among them."""

    def __init__(self, table, order: list[int]):
        self.t, self.order = table, order
        self.colls = [i for i in order if int(table.type[i]) == _COLL]
        self.signature = tuple((_OPS[int(table.comm_type[i])], int(table.comm_size[i])) for i in self.colls)


def _chain(table) -> tuple[Chain | None, str | None]:
    t = table
    n = len(t)
    types = t.type.tolist()
    if any(x not in (_COMP, _COLL) for x in types):
        return None, "a trace has nodes other than COMP and collectives"
    for i in range(n):
        if types[i] == _COLL:
            if int(t.is_cpu_op[i]) == 1 or int(t.comm_type[i]) not in _OPS:
                return None, "a collective other than ALL_REDUCE/ALL_GATHER/REDUCE_SCATTER (or on the CPU)"
            if int(t.comm_size[i]) in (MISSING,) or int(t.comm_size[i]) < 1:
                return None, "a collective without a positive comm_size"
            pg = int(t.pg[i])
            if pg >= 0 and normalize_group_name(t.pg_names[pg]) not in ("", "0"):
                return None, f"collectives on group {t.pg_names[pg]!r}"
            d = int(t.involved_dim[i])
            if d >= 0 and not (t.involved_dims[d] and t.involved_dims[d][0]):
                return None, "a collective not on dimension 0"
    children, indeg = dag(t, t.source)
    free = [i for i in range(n) if indeg[i] == 0]
    order: list[int] = []
    while free:
        if len(free) > 1:
            return None, "a trace is not a chain (nodes could run side by side)"
        i = free.pop()
        order.append(i)
        for c in children[i]:
            indeg[c] -= 1
            if indeg[c] == 0:
                free.append(c)
    if len(order) != n:
        return None, "a trace has a dependency cycle"
    return Chain(t, order), None


def batched_plan(tables: dict, ctx, groups: dict, rendezvous: bool) -> tuple[dict | None, str | None]:
    """``({rank: Chain}, None)`` when the batched engine is exact for this run, else ``(None, reason)``."""
    cfg, net = ctx.system, ctx.network
    if ctx.model not in ("analytical", "congestion-aware"):
        return None, f"it needs the analytical or congestion-aware model (got {ctx.model})"
    if len(net.dims) != 1:
        return None, "the network is not a 1-D ASTRA-sim network YAML"
    if rendezvous or ctx.queues_per_dim != 1 or ctx.endpoint_delay <= 0:
        return None, "rendezvous, several queues per dimension or a 0 ns endpoint delay"
    if cfg.custom or cfg.per_node_custom or cfg.roofline_enabled or cfg.replay_only:
        return None, "custom collectives, roofline or replay-only"
    threshold = math.ceil(cfg.active_chunks_per_dimension / ctx.queues_per_dim)
    if ctx.model == "congestion-aware" and threshold != 1:
        return None, "congestion-aware with several active chunks (their messages interleave on links)"
    g0 = groups.get("0")
    if g0 is not None and len(g0.sorted) != net.npus:
        return None, "pg_name '0' names a sub-group in the comm-group JSON"
    chains: dict[int, Chain] = {}
    by_table: dict[int, Chain] = {}
    for r, t in tables.items():
        ch = by_table.get(id(t))
        if ch is None:
            ch, why = _chain(t)
            if ch is None:
                return None, why
            by_table[id(t)] = ch
        chains[r] = ch
    sig = chains[0].signature
    if any(ch.signature != sig for ch in by_table.values()):
        return None, "ranks run different sequences of collectives"
    for op in {s[0] for s in sig}:
        algos = cfg.algorithms(op)
        if len(algos) != 1 or algos[0].kind != "ring":
            return None, f"{op} does not use the ring algorithm on the one dimension"
    if sig and (cfg.scheduling_policy is None or cfg.preferred_dataset_splits is None):
        return None, "scheduling-policy or preferred-dataset-splits missing"
    for op, size in set(sig):
        chunk = arith.chunk_bytes(size, cfg.preferred_dataset_splits, net.npus, op)
        if chunk < 1 or (op != "all_gather" and chunk // net.npus < 1):
            return None, "a collective with empty chunks or messages"
    if any(s[0] != "all_gather" for s in sig) and not cfg.local_mem_bw_GBps > 0:
        return None, "local-mem-bw is not positive"
    if any(s[0] == "all_reduce" for s in sig) and cfg.collective_optimization is None:
        return None, "collective-optimization missing"
    return chains, None


class RingBatch:
    """Ring streams of all ranks at once; per-link FIFO state for the congestion-aware model."""

    def __init__(self, ctx):
        d = ctx.network.dims[0]
        self.ctx, self.kind, self.n = ctx, d.kind, d.npus
        self.e = ctx.endpoint_delay
        self.src = (np.arange(self.n) - 1) % self.n  # ring predecessor (clockwise, one queue)
        self.congestion = ctx.model == "congestion-aware"
        self.link_free = np.zeros(self.n, dtype=np.int64)  # Ring/FC: link r -> r+1; Switch: up-link of r
        self.down_free = np.zeros(self.n, dtype=np.int64)  # Switch: down-link to r
        self.messages = 0
        self.steps = 0

    def collective(self, op: str, size: int, start: np.ndarray) -> np.ndarray:
        """End times of one collective started at ``start`` (per rank)."""
        cfg, p = self.ctx.system, self.n
        splits = cfg.preferred_dataset_splits
        chunk = arith.chunk_bytes(size, splits, p, op)
        if chunk > size // splits:
            size = splits * chunk
        count = -(-size // chunk)
        msg = chunk if op == "all_gather" else chunk // p
        if msg < 1 or chunk < 1:
            raise ValueError("batched_plan admitted a collective with empty messages")
        k_total = 2 * (p - 1) if op == "all_reduce" else p - 1
        red = 0 if op == "all_gather" else arith.reduction_ns(msg, cfg.local_mem_bw_GBps)
        threshold = math.ceil(cfg.active_chunks_per_dimension / self.ctx.queues_per_dim)
        exits = []
        for j in range(count):
            if j < threshold:
                t0 = start
            else:
                t0 = np.sort(np.stack(exits, axis=1), axis=1)[:, j - threshold]
            exits.append(self._stream(t0, msg, k_total, red))
        self.messages += count * k_total * p
        return np.max(np.stack(exits, axis=1), axis=1)

    def _stream(self, t0: np.ndarray, msg: int, k_total: int, red: int) -> np.ndarray:
        e, src, p = self.e, self.src, self.n
        s = t0 + e
        lat, bw = self.ctx.network.dims[0].latency, self.ctx.network.dims[0].bw
        if self.congestion:
            ser, lk = arith.serialization_ns(msg, bw), arith.link_ns(msg, lat, bw)
        else:
            d = self.ctx.network.delay_ns(int(src[0]), 0, msg)
        for k in range(1, k_total + 1):
            if self.congestion:
                a = self._links(s, ser, lk)
            else:
                a = s[src] + d
            r = np.maximum(a, s)
            s = r + (e + red if 2 <= k + 1 <= p else e)
        self.steps += k_total
        return s

    def _links(self, s: np.ndarray, ser: int, lk: int) -> np.ndarray:
        """Arrival at each rank of its predecessor's message sent at ``s`` (per-link FIFO)."""
        go = np.maximum(s, self.link_free)
        self.link_free = go + ser
        if self.kind != "Switch":
            return (go + lk)[self.src]
        down = np.maximum((go + lk)[self.src], self.down_free)
        self.down_free = down + ser
        return down + lk


class ChainRun:
    """One rank's node times on its chain, shaped like :class:`netsim.astra.workload.Workload`
    so the event engine's statistics code reports it."""

    def __init__(self, rank: int, chain: Chain, ctx):
        t = chain.t
        self.rank, self.t, self.ctx, self.chain = rank, t, ctx, chain
        self.types = t.type.tolist()
        self.cpu = (t.is_cpu_op == 1).tolist()
        self.start: dict[int, int] = {}
        self.end: dict[int, int] = {}
        self.roof: dict = {}
        self.tics_gpu = 0
        self.pos = 0  # next node of the chain
        self.now = 0
        self.finished = False
        self.stats = None
        self.ongoing: set = set()
        self.free: set = set()

    def advance(self) -> int | None:
        """Run COMP nodes up to the next collective; return its row (None at the end)."""
        order, t = self.chain.order, self.t
        while self.pos < len(order):
            i = order[self.pos]
            self.start[i] = self.now
            if self.types[i] == _COLL:
                return i
            runtime = arith.replay_ns(int(t.duration_micros[i]))
            if not self.cpu[i]:
                self.tics_gpu += runtime
            self.now += runtime
            self.end[i] = self.now
            self.pos += 1
        return None

    def collective_done(self, i: int, end: int) -> None:
        self.end[i] = self.now = end
        self.pos += 1


def run_batched(ctx, chains: dict[int, Chain]) -> list[ChainRun]:
    """Every rank's chain through :class:`RingBatch`; ranks report in (finish, rank) order."""
    npus = ctx.npus
    runs = [ChainRun(r, chains[r], ctx) for r in range(npus)]
    batch = RingBatch(ctx)
    ctx.fabric.messages = 0
    for op, size in chains[0].signature:
        rows = [run.advance() for run in runs]
        start = np.array([run.now for run in runs], dtype=np.int64)
        end = batch.collective(op, size, start).tolist()
        for run, i, t in zip(runs, rows, end):
            run.collective_done(i, int(t))
    for run in runs:
        run.advance()
    ctx.fabric.messages = batch.messages
    ctx.clock.events = batch.steps
    from netsim.astra.workload import Workload

    for run in sorted(runs, key=lambda x: (x.now, x.rank)):
        ctx.clock.now = run.now
        Workload._report(run)  # the event engine's statistics, on this rank's node times
    return runs
