"""The batched engine: every rank at once, one numpy step per ring message index.

Where it applies (:func:`batched_plan` says why not otherwise) the event engine's
timeline has a closed recurrence, so the same integer-ns results come from arrays:

* an ASTRA-sim network YAML, model ``analytical`` or ``congestion-aware`` (1-D only, as
  ASTRA-sim's); on a multi-dimensional network only sub-group collectives (a sub-group
  runs one flat ring; a message costs the delay of the first dimension where its ends
  differ, so nothing is per dimension); one queue per dimension, no rendezvous, no custom collectives, no roofline or replay-only, a
  non-zero endpoint delay;
* every rank's trace is a *chain* (its data-dependency DAG has exactly one topological
  order), of COMP nodes and ALL_REDUCE / ALL_GATHER / REDUCE_SCATTER / ALL_TO_ALL collectives
  with the ``ring`` algorithm (all-to-all: ``p(p-1)/2`` unreduced messages of ``chunk / p``), on
  the world group or on comm groups of the comm-group JSON (any sizes >= 2; groups on disjoint
  ranks run side by side), or world collectives with the other algorithms where
  :func:`~netsim.astra.batched_algos.general_applies` (kernels there); the members of a group
  issue the same sequence of collectives (operation, bytes) on it;
* congestion-aware on a ``Ring`` network: every sub-group's ring neighbours are one
  hop apart.

Why exact.  A chain issues its nodes one after another (each starts when its
predecessor ends), so issue order never depends on same-instant event order.  A rank
runs one collective at a time (ASTRA-sim's GPU comm lane), so its collectives are
*instances* ``(group, n-th collective on it)`` taken in chain order; an instance
starts on each member when that member reaches it, and it depends on nothing else
but the network.  Its ring stream on the member at ring position ``i`` is the
recurrence of :class:`netsim.astra.algorithms.Ring`: the first bundle sends at
``T0 + b`` (``b`` = the endpoint delay; a sub-group's local ring uses 10 ns); its k-th
message from the ring predecessor (JSON member order for a sub-group, as the event
engine builds it) lands at ``A_k``, is consumed at ``R_k = max(A_k, S_k)`` (a receive
posted late completes at once), and the next message leaves ``b`` (+ the reduction on
the first ``p - 1`` messages of an all-reduce or reduce-scatter, ``p`` the ring size)
later; the stream exits one bundle after its last receive.  Chunks are cut as the
event engine cuts them (inflated to the NPU count of the network, not the group).
Stream ``T + m`` of a collective (``T`` active chunks) starts at the m-th earliest exit.
So instances are computed in waves: every instance all of whose members have reached
it, instances of one shape (operation, bytes, ring size, bundle) in one array.

``A_k`` is the sender's ``S_k`` plus the delay of the pair (analytical), or in the
congestion-aware model the per-link FIFO recurrence (:mod:`netsim.astra.batched_ring`).
A link's FIFO order is its messages' time order; the waves keep it when each link has
one sender whose messages go in chain order: the Switch up-link of ``u``, the
Ring (one hop) / FullyConnected link ``u -> v``, with one active chunk (``T = 1``).
A Switch down-link to ``v`` has several senders when ``v``'s rings differ (a comm-group
ring, then the world ring): their messages can interleave in time, so such runs
(:func:`~netsim.astra.batched_timed.contested`) are computed time-ordered by
:mod:`netsim.astra.batched_timed` (every rank's sends and exits as one event sequence,
contested down-links served in arrival order, all ranks at once), and the waves then
replay its collective times.  Same-instant arrivals from up-links started at the same
instant (their order is the event queue's) raise :class:`~netsim.astra.batched_ring.Interleaved`
and the event engine runs.  A wave with no ready instance while ranks still wait (a
deadlock) or members that disagree on an instance's collective also fall back, so the
event engine reports them.

tests/test_astra_batched.py, tests/test_astra_batched_groups.py and tests/test_astra_timed.py
check the engine against the event engine (``engine="full"``) on uneven per-rank compute, every
collective, random comm groups of different sizes, both models, all three topologies.
Same-instant lines (finishes, a sub-group's ``custom ring`` lines) come in (time, rank)
order (the event engine: in event order).
"""

from __future__ import annotations

import math

import numpy as np

from netsim import astra_arith as arith
from netsim.astra.batched_algos import GeneralBatch, general_applies
from netsim.astra.batched_ring import Interleaved
from netsim.astra.batched_timed import MAX_MESSAGES, NotBatched, Replay, Timed, contested
from netsim.astra.custom import dag
from netsim.astra.streams import ASTRA, chunk_count, static_divergence
from netsim.chakra.model import MISSING
from netsim.chakra.schema import CommType, NodeType
from netsim.vocab import normalize_group_name

_OPS = {int(CommType.ALL_REDUCE): "all_reduce", int(CommType.ALL_GATHER): "all_gather",
        int(CommType.REDUCE_SCATTER): "reduce_scatter", int(CommType.ALL_TO_ALL): "all_to_all"}
_COMP, _COLL = int(NodeType.COMP_NODE), int(NodeType.COMM_COLL_NODE)




class Chain:
    """One distinct trace as a chain: node rows in issue order, collectives among them.

    ``colls[row] = (op, bytes, group name, on dimension 0)``; group name "" = none given."""

    def __init__(self, table, order: list[int]):
        self.t, self.order = table, order
        self.colls: dict[int, tuple[str, int, str, bool]] = {}
        for i in order:
            if int(table.type[i]) != _COLL:
                continue
            pg = int(table.pg[i])
            name = normalize_group_name(table.pg_names[pg]) if pg >= 0 else ""
            d = int(table.involved_dim[i])
            dim0 = d < 0 or bool(table.involved_dims[d] and table.involved_dims[d][0])
            self.colls[i] = (_OPS[int(table.comm_type[i])], int(table.comm_size[i]), name, dim0)


class Ring:
    """The ring a group name stands for: ``members`` in ring order, ``key`` of its instances."""

    def __init__(self, key: str, members: list[int], local: bool, name: str):
        self.key, self.local, self.name = key, local, name
        self.members = np.asarray(members, dtype=np.int64)
        self.p = len(members)
        self.pred = (np.arange(self.p) - 1) % self.p
        self.index = {m: i for i, m in enumerate(members)}


class Plan:
    """What :func:`run_batched` runs: a chain per rank and the ring of each group name."""

    def __init__(self, chains: dict, rings: dict):
        self.chains, self.rings = chains, rings
        self.diverged: str | None = None  # where ASTRA-sim's world stream ids differ (per-group runs note it)


def chain_of(table) -> tuple[Chain | None, str | None]:
    t = table
    n = len(t)
    types = t.type.tolist()
    if any(x not in (_COMP, _COLL) for x in types):
        return None, "a trace has nodes other than COMP and collectives"
    for i in range(n):
        if types[i] == _COLL:
            if int(t.is_cpu_op[i]) == 1 or int(t.comm_type[i]) not in _OPS:
                return None, "a collective other than ALL_REDUCE/ALL_GATHER/REDUCE_SCATTER/ALL_TO_ALL (or on the CPU)"
            if int(t.comm_size[i]) in (MISSING,) or int(t.comm_size[i]) < 1:
                return None, "a collective without a positive comm_size"
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


def ring_of(name: str, groups: dict, ctx) -> tuple[Ring | None, str | None]:
    """The ring of a group name as the event engine resolves it (:meth:`Context.group`)."""
    npus = ctx.npus
    g = groups.get(name) if name else None
    if g is None:
        if name in ("", "0"):
            return Ring("", list(range(npus)), False, ""), None
        return None, f"pg_name {name!r} names no communicator group"
    if len(g.sorted) == npus:  # the world's logical ring, the group's own stream ids
        return Ring("" if name == "0" else g.key, list(range(npus)), False, name), None
    if len(g.members) != len(g.sorted) or len(g.members) < 2:
        return None, f"comm group {name!r} repeats a rank or has fewer than 2"
    if ctx.model == "congestion-aware" and ctx.network.dims[0].kind == "Ring":
        n, m = ctx.network.dims[0].npus, g.members
        if any(min((a - b) % n, (b - a) % n) != 1 for a, b in zip(m, m[1:] + m[:1])):
            return None, (f"congestion-aware on a Ring network with comm group {name!r}, whose ring neighbours are "
                          "not one hop apart (their messages share links)")
    return Ring(g.key, list(g.members), True, name), None


def batched_plan(tables: dict, ctx, groups: dict, rendezvous: bool) -> tuple[Plan | None, str | None]:
    """``(Plan, None)`` when the batched engine is exact for this run, else ``(None, reason)``."""
    cfg, net = ctx.system, ctx.network
    if ctx.model not in ("analytical", "congestion-aware"):
        return None, f"it needs the analytical or congestion-aware model (got {ctx.model})"
    if not net.dims:
        return None, "the network is not an ASTRA-sim network YAML"
    if rendezvous or ctx.queues_per_dim != 1 or ctx.endpoint_delay <= 0:
        return None, "rendezvous, several queues per dimension or a 0 ns endpoint delay"
    if cfg.custom or cfg.per_node_custom or cfg.roofline_enabled or cfg.replay_only:
        return None, "custom collectives, roofline or replay-only"
    threshold = math.ceil(cfg.active_chunks_per_dimension / ctx.queues_per_dim)
    if ctx.model == "congestion-aware" and threshold != 1:
        return None, "congestion-aware with several active chunks (their messages interleave on links)"
    chains: dict[int, Chain] = {}
    by_table: dict[int, Chain] = {}
    for r, t in tables.items():
        ch = by_table.get(id(t))
        if ch is None:
            ch, why = chain_of(t)
            if ch is None:
                return None, why
            by_table[id(t)] = ch
        chains[r] = ch
    rings: dict[str, Ring] = {}
    used: set[tuple[str, int, str]] = set()  # (op, bytes, ring key)
    for ch in by_table.values():
        for op, size, name, dim0 in ch.colls.values():
            if name not in rings:
                ring, why = ring_of(name, groups, ctx)
                if ring is None:
                    return None, why
                rings[name] = ring
            if not rings[name].local and not dim0:
                return None, "a collective not on dimension 0"
            used.add((op, size, name))
    if len(net.dims) > 1 and any(not rings[u[2]].local for u in used):
        return None, ("a world-group collective on a multi-dimensional network (its phases pipeline across "
                      "dimensions)")
    for r, ch in chains.items():
        for _op, _size, name, _dim0 in ch.colls.values():
            if rings[name].local and r not in rings[name].index:
                return None, f"rank {r} issues a collective on comm group {name!r} it is not in"
    for op in {u[0] for u in used}:
        algos = cfg.algorithms(op)
        world = any(not rings[u[2]].local for u in used if u[0] == op)
        local = any(rings[u[2]].local for u in used if u[0] == op)
        if not algos or (world and len(algos) != 1):
            return None, f"{op} does not use the ring algorithm on the one dimension"
        for p, loc in {(rings[u[2]].p, rings[u[2]].local) for u in used if u[0] == op}:
            if algos[0].kind != "ring" and not (loc and len(algos) > 1):  # a sub-group runs a list of several as ring
                why = general_applies(ctx, op, algos[0], p, local=loc)
                if why is not None:
                    return None, why
    if used and (cfg.scheduling_policy is None or cfg.preferred_dataset_splits is None):
        return None, "scheduling-policy or preferred-dataset-splits missing"
    for op, size, _name in used:
        chunk = arith.chunk_bytes(size, cfg.preferred_dataset_splits, net.npus, op)
        if chunk < 1 or (op != "all_gather" and chunk // net.npus < 1):
            return None, "a collective with empty chunks or messages"
    if any(u[0] in ("all_reduce", "reduce_scatter") for u in used) and not cfg.local_mem_bw_GBps > 0:
        return None, "local-mem-bw is not positive"
    if any(u[0] == "all_reduce" for u in used) and cfg.collective_optimization is None:
        return None, "collective-optimization missing"
    plan = Plan(chains, rings)
    plan.diverged = _diverged(by_table, chains, rings, cfg.preferred_dataset_splits, net.npus)
    if plan.diverged and ctx.stream_matching == ASTRA:  # ASTRA-sim stalls: the event engine reports where
        return None, f"stream ids diverge between ranks: {plan.diverged}"
    return plan, None


def _diverged(by_table: dict, chains: dict, rings: dict, splits, npus: int) -> str | None:
    """:func:`netsim.astra.streams.static_divergence` of the chains (streams per collective as cut)."""
    seqs = {k: [(rings[name].key == "", chunk_count(size, op, splits, npus)) for op, size, name, _d in ch.colls.values()]
            for k, ch in by_table.items()}
    return static_divergence({r: seqs[id(ch.t)] for r, ch in chains.items()})


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
        self.counts: dict[str, int] = {}  # collectives issued per ring key

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

    @property
    def done(self) -> bool:
        return self.pos >= len(self.chain.order)


class _Waves:
    """Instances become ready when all their members reach them; one wave runs all ready ones."""

    def __init__(self, ctx, plan: Plan, batch=None):
        self.ctx, self.plan = ctx, plan
        self.runs = [ChainRun(r, plan.chains[r], ctx) for r in range(ctx.npus)]
        self.batch = batch if batch is not None else GeneralBatch(ctx)
        self.waiting: dict[tuple, list[int]] = {}
        self.ready: list[tuple] = []
        self.events: list[tuple] = []  # (time, rank, order, log line or note)
        self.seen: set = set()

    def arrive(self, run: ChainRun) -> None:
        i = run.advance()
        if i is None:
            return
        op, _size, name, _dim0 = run.chain.colls[i]
        ring = self.plan.rings[name]
        n = run.counts.get(ring.key, 0)
        run.counts[ring.key] = n + 1
        if ring.local and (ring.key, run.rank, op) not in self.seen:
            self.seen.add((ring.key, run.rank, op))
            p = ring.p
            self.events.append((run.now, run.rank, 0, f"custom ring, id: {run.rank}, dimension: local total nodes "
                                f"in ring: {p} index in ring: {ring.index[run.rank]} total nodes in ring {p}"))
            if ring.key == "0" and ("0",) not in self.seen:
                self.seen.add(("0",))
                self.events.append((run.now, run.rank, 1, ("note", run.rank)))
        lst = self.waiting.setdefault((ring.key, n), [])
        lst.append(run.rank)
        if len(lst) == ring.p:
            self.ready.append((ring.key, n, name))

    def run(self) -> None:
        runs, e = self.runs, self.ctx.endpoint_delay
        for run in runs:
            self.arrive(run)
        while self.ready:
            wave, self.ready = self.ready, []
            shapes: dict[tuple, list[tuple]] = {}
            for key, n, name in wave:
                ring = self.plan.rings[name]
                del self.waiting[(key, n)]
                rows = [runs[int(m)].chain.order[runs[int(m)].pos] for m in ring.members]
                colls = {runs[int(m)].chain.colls[i][:2] for m, i in zip(ring.members, rows)}
                if len(colls) != 1:
                    raise NotBatched(f"the members of comm group {name!r} issue different collectives on it")
                op, size = colls.pop()
                shapes.setdefault((op, size, ring.p, ring.local), []).append(ring)
            for (op, size, p, local), rings in shapes.items():
                ranks = np.concatenate([r.members for r in rings]) if len(rings) > 1 else rings[0].members
                pred = np.concatenate([r.pred + k * p for k, r in enumerate(rings)]) if len(rings) > 1 \
                    else rings[0].pred
                start = np.array([runs[r].now for r in ranks.tolist()], dtype=np.int64)
                algos = self.ctx.system.algorithms(op)
                algo = algos[0] if len(algos) == 1 or not local else None  # a sub-group's list of several: ring
                end = self.batch.collective(op, size, p, ranks, pred, start, 10 if local else e, algo=algo,
                                            local=local)
                for r, t in zip(ranks.tolist(), end.tolist()):
                    run = runs[r]
                    run.collective_done(run.chain.order[run.pos], int(t))
                    self.arrive(run)
        stuck = [run.rank for run in runs if not run.done]
        if stuck:
            raise NotBatched(f"{len(stuck)} rank(s) wait on collectives that never start (a deadlock)")


def run_batched(ctx, plan: Plan) -> list[ChainRun]:
    """Every rank's chain through :class:`RingBatch`; ranks report in (finish, rank) order.

    Raises :class:`NotBatched` (or :class:`Interleaved`) where the event engine must run instead.
    A congestion-aware Switch run whose down-links merge rings runs time-ordered first
    (:mod:`netsim.astra.batched_timed`), then replays its collective times through the waves."""
    batch = None
    if contested(ctx, plan):
        timed = Timed(ctx, plan)
        if timed.messages <= MAX_MESSAGES:
            timed.run()
            batch = Replay(ctx, timed)
    waves = _Waves(ctx, plan, batch)
    waves.run()
    ctx.fabric.messages = waves.batch.messages
    ctx.clock.events = waves.batch.steps
    from netsim.astra.workload import Workload

    events = list(waves.events)
    events += [(run.now, run.rank, 2, run) for run in waves.runs]
    order = sorted(range(len(events)), key=lambda j: (*events[j][:3], j))
    for t, _rank, kind, what in (events[j] for j in order):
        ctx.clock.now = t
        if kind == 0:
            ctx.log.append(what)
        elif kind == 1:
            ctx.group("0", what[1], "")  # the event engine's note on a JSON group "0"
        else:
            Workload._report(what)  # the event engine's statistics, on this rank's node times
    return waves.runs


__all__ = ["Chain", "ChainRun", "Interleaved", "NotBatched", "Plan", "batched_plan", "run_batched"]
