"""Python API of ``netsim astra``: run a Chakra workload with ASTRA-sim's semantics.

>>> from netsim.astra import run_astra                                     # doctest: +SKIP
>>> res = run_astra("microbenchmarks/all_reduce/8npus_1MB/all_reduce",     # doctest: +SKIP
...                 "Ring_4chunks.json", "Ring_8npus.yml")
>>> res.finish.tolist()                                                    # doctest: +SKIP
[64440, 64440, 64440, 64440, 64440, 64440, 64440, 64440]

Models: ``analytical`` (ASTRA-sim's congestion-unaware backend, exact), ``congestion-aware``
(its store-and-forward per-link FIFO backend, 1-D networks) and ``flow`` (netsim's
max-min fair :class:`~netsim.network.flow.FlowNetwork` on any topology).

Engines: ``full`` simulates every rank.  ``symmetric`` (chosen automatically when it
is exact: analytical model, identical per-rank traces, world-group collectives with
ring / direct / halvingDoubling, no point-to-point traffic) simulates rank 0 only and
mirrors its peers through the network's symmetry (:class:`~netsim.astra.engine.MirrorFabric`),
so a 4,096-NPU ring costs what one rank costs.  ``batched`` (:mod:`netsim.astra.batched`) runs
every rank at once as arrays where traces are chains of compute and ring collectives on the world
or on comm groups; it hands the run to ``full`` (with a note) where it finds it would not be exact.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from netsim import astra_arith as arith
from netsim.astra.batched import Interleaved, NotBatched, batched_plan, run_batched
from netsim.astra.custom import CustomAlgorithm, load_custom_table
from netsim.astra.engine import (AnalyticalLinks, AstraNetwork, Fabric, FlowLinks, HeapClock, MirrorFabric,
                                 SimPyClock, load_network)
from netsim.astra.memory import RemoteMemory, RemoteMemoryConfig, load_memory
from netsim.astra.output import unreleased_lines
from netsim.astra.streams import ASTRA, PER_GROUP, check_mode, diverged, explain, per_group_note
from netsim.astra.symmetry import symmetric_mirror
from netsim.astra.system import OPS, SystemConfig, load_system
from netsim.astra.sysl import LogicalTopology, RingTopo, Sys
from netsim.astra.system import Algorithm as Algo
from netsim.astra.workload import TYPES, Workload
from netsim import inputs
from netsim.errors import DeadlockError, InputError
from netsim.vocab import normalize_group_name
from netsim.chakra.groups import CommGroups

MODELS = ("analytical", "congestion-aware", "flow")
ENGINES = ("auto", "full", "symmetric", "batched", "compiled")


@dataclass
class AstraResult:
    """Per-rank results in ASTRA-sim's units (cycles = ns); arrays are indexed by rank."""

    finish: np.ndarray
    exposed: np.ndarray
    gpu: np.ndarray
    wall: np.ndarray
    times: dict[str, np.ndarray]
    overlap: np.ndarray
    roofline: np.ndarray | None
    order: list[int]
    log: list  # text lines and, where a rank reports, its rank (int)
    notes: list[str]
    model: str
    engine: str
    stats: dict = field(default_factory=dict)
    rows: dict[int, list] = field(default_factory=dict)
    ids: dict[int, np.ndarray] = field(default_factory=dict)  # symmetric runs: every rank's node ids

    @property
    def npus(self) -> int:
        return int(self.finish.size)

    def lines(self) -> list[str]:
        """ASTRA-sim's stdout lines (without log prefixes)."""
        from netsim.astra.output import format_lines

        return format_lines(self)


class Group:
    """A communicator group: ``members`` in JSON order (ASTRA-sim builds the ring in that order)."""

    def __init__(self, key: str, members: list[int]):
        self.key, self.members = key, members
        self.sorted = sorted(set(members))
        self._pos = {r: i for i, r in enumerate(self.sorted)}
        self.plans: dict[tuple, tuple] = {}

    def position(self, rank: int) -> int:
        return self._pos[rank]


class Context:
    """What all ranks of one run share: configs, clock, network, matching, groups, outputs."""

    def __init__(self, system: SystemConfig, network: AstraNetwork, memory: RemoteMemoryConfig, groups: dict,
                 model: str, queues_per_dim: int = 1, injection_scale: float = 1.0, rendezvous: bool = False,
                 mirror=None, stream_matching: str = ASTRA):
        if model not in MODELS:
            raise InputError(f"expected one of {', '.join(MODELS)}, got {model!r}", source="--model")
        if queues_per_dim < 1:
            raise InputError(f"expected at least 1, got {queues_per_dim}", source="--num-queues-per-dim")
        self.system, self.network, self.model = system, network, model
        self.npus = network.npus
        self.queues_per_dim, self.rendezvous = queues_per_dim, rendezvous
        self.stream_matching = check_mode(stream_matching)
        self.endpoint_delay = system.endpoint_delay(injection_scale)
        if model == "flow":
            import simpy

            self.clock = SimPyClock(simpy.Environment())
            transmit = FlowLinks(self.clock, network)
        else:
            self.clock = HeapClock()
            if model == "analytical":
                transmit = AnalyticalLinks(self.clock, network)
            else:
                from netsim.astra.congestion import StoreAndForward, check_astra_network

                check_astra_network(network)
                transmit = StoreAndForward(self.clock, network)
        self.fabric = Fabric(self.clock, transmit) if mirror is None else MirrorFabric(self.clock, network, mirror)
        self.sys: dict[int, Sys] = {}
        self.memory = RemoteMemory(memory, self.npus, lambda r, d, fn: self.sys[r].register(d, fn))
        self.groups = groups
        self.log: list[str] = []
        self.notes: list[str] = []
        self.reports: list[Workload] = []
        self._custom: dict[tuple, object] = {}

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def reduction_ns(self, size: int) -> int:
        if not self.system.local_mem_bw_GBps > 0:
            raise InputError("must be > 0: a reducing message costs 3 * bytes / local-mem-bw (ASTRA-sim divides by "
                             "zero here)", source=self.system.source, field="local-mem-bw")
        return arith.reduction_ns(size, self.system.local_mem_bw_GBps)

    # ---------------------------------------------------------- messages
    def send(self, src: int, dst: int, tag, size: int, cb) -> None:
        if self.rendezvous:  # an 8,192-byte handshake from the receiver first
            self.fabric.recv(dst, src, ("r", tag), 8192, lambda: self.fabric.send(src, dst, tag, size, cb))
        else:
            self.fabric.send(src, dst, tag, size, cb)

    def recv(self, src: int, dst: int, tag, size: int, cb) -> None:
        if self.rendezvous:
            self.fabric.send(dst, src, ("r", tag), 8192, lambda: self.fabric.recv(src, dst, tag, size, cb))
        else:
            self.fabric.recv(src, dst, tag, size, cb)

    # -------------------------------------------------------- collectives
    def group(self, pg_name, rank: int, where: str):
        """The node's communicator group (None = world); netsim's policy, see the module docs."""
        if pg_name is None or pg_name == "":
            return None
        key = normalize_group_name(pg_name)
        g = self.groups.get(key)
        if g is None:
            if key == "0":
                return None
            raise InputError(f"pg_name {pg_name!r} names no communicator group (ASTRA-sim: 'communicator group "
                             "not found'); pass --comm-group-configuration with that id", source=where, field="pg_name")
        if key == "0":
            if len(g.sorted) == self.npus:
                return None
            self.note("pg_name '0' names the JSON group '0' (a sub-group) here; ASTRA-sim would treat it as the "
                      "world group (and asserts on a JSON key '0')")
        if rank not in g._pos:
            raise InputError(f"rank {rank} issues a collective on group {key!r} {g.sorted} it is not in "
                             "(ASTRA-sim asserts)", source=where, field="pg_name")
        return g

    def implementation(self, op: str, node_id: int):
        cfg = self.system
        if node_id in cfg.per_node_custom:
            return cfg.per_node_custom[node_id], "per-node-custom-implementation"
        if op in cfg.custom:
            return cfg.custom[op], f"{OPS[op]}-implementation-custom"
        algos = cfg.algorithms(op)
        if not algos:
            raise InputError(f"missing; the workload has a {op.upper()} but the system configuration gives no "
                             f"algorithm for it (ASTRA-sim throws 'No collective implementation found')",
                             source=cfg.source, field=f"{OPS[op]}-implementation")
        return algos, None

    def collective(self, sys: Sys, op, size, involved, group, prio, node_id, done) -> None:
        if group is None:
            impl, key = self.implementation(op, node_id)
            topo, pos, members = sys.logical[op], sys.id, None
        else:
            plan = group.plans.get((sys.id, op))
            if plan is None:
                impl, key = self.implementation(op, node_id)
                if len(group.sorted) == self.npus:
                    topo, involved = sys.logical[op], [True] * 10
                else:
                    topo = LogicalTopology.single(RingTopo(len(group.members), members=group.members, local=True))
                    involved = [True]
                    n = len(group.members)
                    self.log.append(f"custom ring, id: {sys.id}, dimension: local total nodes in ring: {n} "
                                    f"index in ring: {group.members.index(sys.id)} total nodes in ring {n}")
                    if key is None and len(impl) > 1:
                        impl = (Algo("ring"),)
                plan = group.plans[(sys.id, op)] = (impl, key, topo, involved)
            impl, key, topo, involved = plan
            pos, members = group.position(sys.id), group.members
        if key is not None:
            table = self._custom.get((impl, pos))
            if table is None:
                table = self._custom[(impl, pos)] = load_custom_table(impl, pos, key, self.system.source)
            algo = CustomAlgorithm(table, sys.id, members, size, self)
            sys.generate(op, size, None, None, involved, prio, group, done, custom=algo)
        else:
            sys.generate(op, size, topo, impl, involved, prio, group, done)

    def rank_finished(self, wl: Workload) -> None:
        self.reports.append(wl)
        self.log.append(wl.rank)  # where its result lines go


def load_groups(path, npus: int) -> dict[str, Group]:
    """ASTRA-sim comm-group JSON -> groups (validated by :class:`~netsim.chakra.groups.CommGroups`)."""
    if path is None or "empty" in str(path):
        return {}
    src = str(path)
    data = inputs.load_json(path)
    if not isinstance(data, dict):
        raise InputError("expected an object mapping group ids to rank lists", source=src)
    CommGroups(data, npus, src)  # validation: non-empty integer lists of existing ranks
    return {normalize_group_name(str(k)): Group(normalize_group_name(str(k)), list(v)) for k, v in data.items()}


def _tables(workload, npus: int, notes: list[str]) -> dict:
    if not isinstance(workload, dict):
        from netsim.astra.traces import read_traces

        return read_traces(workload, npus, notes)
    missing = [r for r in range(npus) if r not in workload]
    if missing:
        raise InputError(f"no trace for rank {missing[0]}; the network has {npus} NPUs and ASTRA-sim reads one "
                         "trace per NPU", source="--workload-configuration")
    return {r: workload[r] for r in range(npus)}


def run_astra(workload, system, network, memory=None, comm_groups=None, *, model: str = "analytical",
              num_queues_per_dim: int = 1, injection_scale: float = 1.0, rendezvous: bool = False,
              engine: str = "auto", progress: bool = False, stream_matching: str = ASTRA) -> AstraResult:
    """Run a workload (trace prefix or {rank: NodeTable}) with ASTRA-sim's system layer.

    ``system``/``network``/``memory``: paths or loaded configs (``network`` may be any
    netsim topology for ``model="flow"``); ``comm_groups``: comm-group JSON path;
    ``engine``: ``auto``, ``full`` or ``symmetric`` (see the module docstring); ``progress``: a bar of
    nodes done on stderr (:mod:`netsim.progress`, polled: the event loop is untouched);
    ``stream_matching``: ``astra`` (ASTRA-sim's one stream counter per rank: ranks that created
    different numbers of sub-group streams before a world collective stall, a
    :class:`~netsim.errors.DeadlockError` saying which stream ids stopped matching) or ``per-group``
    (streams matched per communicator; a note says where ASTRA-sim would not finish), see
    :mod:`netsim.astra.streams`.
    """
    t0 = time.perf_counter()
    system = system if isinstance(system, SystemConfig) else load_system(system)
    network = load_network(network)
    memory = memory if isinstance(memory, RemoteMemoryConfig) else load_memory(memory)
    notes = list(system.notes) + list(memory.notes)
    npus = network.npus
    tables = _tables(workload, npus, notes)
    groups = load_groups(comm_groups, npus)
    if system.track_local_mem:
        notes.append(_check_inputs(tables[0], system.source))
    mirror, why = symmetric_mirror(tables, system, network, memory, groups, model, rendezvous)
    if engine not in ENGINES:
        raise InputError(f"expected one of {', '.join(ENGINES)}, got {engine!r}", source="--engine")
    if engine == "symmetric" and mirror is None:
        raise InputError(f"the symmetric engine does not apply: {why}", source="--engine")
    use_mirror = mirror if engine not in ("full", "compiled") else None
    ctx = Context(system, network, memory, groups, model, num_queues_per_dim, injection_scale, rendezvous,
                  use_mirror, stream_matching)
    if use_mirror is None and engine in ("auto", "batched"):
        plan, why_not = batched_plan(tables, ctx, groups, rendezvous)
        gave_way = None
        if plan is not None:
            try:
                return _run_batched(ctx, plan, notes, t0)
            except (NotBatched, Interleaved) as exc:  # found while running: the event engine runs it
                why_not = gave_way = str(exc)
                ctx = Context(system, network, memory, groups, model, num_queues_per_dim, injection_scale,
                              rendezvous, None, stream_matching)
        if engine == "batched":
            raise InputError(f"the batched engine does not apply: {why_not}", source="--engine")
        res, _why = _run_compiled(ctx, tables, groups, rendezvous, notes, t0, auto=True)
        if res is not None:
            return res
        if gave_way is not None:
            notes.append(f"the batched engine gave way to the event engine: {gave_way}")
    if engine == "compiled":
        res, why_not = _run_compiled(ctx, tables, groups, rendezvous, notes, t0)
        if res is None:
            raise InputError(f"the compiled engine does not apply: {why_not}", source="--engine")
        return res
    ranks = [0] if use_mirror is not None else list(range(npus))
    loads = []
    for r in ranks:
        ctx.sys[r] = Sys(r, ctx)
        loads.append(Workload(ctx.sys[r], tables[r], ctx))
    from netsim.progress import Poller

    total = sum(len(wl.t) for wl in loads)
    with Poller(total, lambda: sum(len(wl.end) for wl in loads), "astra", "node", progress,
                postfix=lambda: f"{float(ctx.clock.now) / 1e3:,.1f} us simulated"):
        for wl in loads:
            wl.fire()
        ctx.clock.run()
    if getattr(ctx.clock, "at_zero", 0):
        ctx.note(f"{ctx.clock.at_zero} event(s) at t = 0 ns (endpoint delay {ctx.endpoint_delay} ns"
                 f"{f' after --injection-scale {injection_scale:g}' if injection_scale != 1 else ''}): ASTRA-sim "
                 "aborts on them (its event queue asserts every event time is > 0, EventQueue::proceed); netsim "
                 "prints the numbers it computes")
    stuck = [wl for wl in loads if not wl.finished]
    if stuck:
        exc = DeadlockError(_deadlock(stuck, ctx))
        if use_mirror is None:  # ASTRA-sim prints each rank's lines as it finishes, then "Exiting" (Sys.cc)
            exc.lines = _collect(ctx, loads, npus, False).lines()
            exc.lines[-1:-1] = unreleased_lines(stuck)  # the stuck ranks' HardwareResource lines, then "Exiting"
        else:  # the one simulated rank stands for all: none finished
            exc.lines = [x for x in ctx.log if isinstance(x, str)] + ["Exiting"]
        exc.notes = notes + ctx.notes
        raise exc
    res = _collect(ctx, loads, npus, use_mirror is not None)
    if ctx.stream_matching == PER_GROUP and use_mirror is None:
        why = diverged({r: ctx.sys[r].numbering for r in ranks})
        if why:
            ctx.note(per_group_note(why))
    if use_mirror is not None:
        res.ids = {r: tables[r].id for r in range(npus)}
    res.notes = notes + ctx.notes
    res.stats = {"wall_s": time.perf_counter() - t0, "events": ctx.clock.events, "messages": ctx.fabric.messages,
                 "simulated_ranks": len(ranks)}
    return res


def _run_batched(ctx: Context, plan, notes: list[str], t0: float) -> AstraResult:
    """Every rank at once (:mod:`netsim.astra.batched`); rank 0's Sys logs its rings and checks the lists."""
    Sys(0, ctx)
    runs = run_batched(ctx, plan)
    res = _collect(ctx, runs, ctx.npus, False)
    if ctx.stream_matching == PER_GROUP and plan.diverged:
        ctx.note(per_group_note(plan.diverged))
    res.engine = "batched"
    res.notes = notes + ctx.notes
    res.stats = {"wall_s": time.perf_counter() - t0, "events": ctx.clock.events, "messages": ctx.fabric.messages,
                 "simulated_ranks": ctx.npus}
    return res


def _run_compiled(ctx: Context, tables: dict, groups: dict, rendezvous: bool, notes: list[str],
                  t0: float, auto: bool = False) -> tuple[AstraResult | None, str | None]:
    """``(result, None)`` from the event engine compiled (:mod:`netsim.astra.compiled`), or
    ``(None, why not)`` (the event engine runs).  ``auto``: only runs of :data:`~netsim.astra.compiled.MIN_MESSAGES`
    messages or more (below, loading the compiled code costs more than the event engine's run)."""
    if ctx.model not in ("congestion-aware", "analytical"):
        return None, "it runs the analytical and congestion-aware models only"
    from netsim.astra.compiled import MIN_MESSAGES, compiled_plan, run_compiled

    prep, why = compiled_plan(tables, ctx, groups, rendezvous)
    if prep is None or (auto and prep.messages < MIN_MESSAGES):
        return None, why or "a small run"
    Sys(0, ctx)  # rank 0's Sys logs its rings and checks the algorithm lists, as in the event engine
    try:
        runs = run_compiled(prep)
    except NotBatched as exc:
        ctx.log.clear()
        return None, str(exc)
    res = _collect(ctx, runs, ctx.npus, False)
    res.engine = "compiled"
    res.notes = notes + ctx.notes
    res.stats = {"wall_s": time.perf_counter() - t0, "events": ctx.clock.events, "messages": ctx.fabric.messages,
                 "simulated_ranks": ctx.npus}
    return res, None


def _check_inputs(table, source: str) -> str:
    """ASTRA-sim's local-memory tracker needs every node's ``inputs`` tensors (checked on rank 0)."""
    from netsim.chakra import iter_records
    from netsim.chakra.schema import chakra_classes

    node_cls = chakra_classes().Node
    for k, rec in enumerate(iter_records(table.source)):
        if k == 0:
            continue  # GlobalMetadata
        node = node_cls.FromString(rec)
        if not node.HasField("inputs"):
            raise InputError(f"track-local-mem 1 needs each node's 'inputs' tensors, but node {node.id} of "
                             f"{table.source} has none (ASTRA-sim stops with \"Attribute 'inputs' not found in "
                             f"node {node.id}\"); set it to 0", source=source, field="track-local-mem")
    return "track-local-mem: netsim does not track local memory (no peak-memory line, no memory trace file)"


def _collect(ctx: Context, loads: list[Workload], npus: int, mirrored: bool) -> AstraResult:
    from netsim.astra.workload import RankStats

    order = [wl.rank for wl in ctx.reports]
    stats = {wl.rank: wl.stats if wl.stats is not None else RankStats(wl.rank) for wl in loads}  # None: deadlocked
    log = ctx.log
    if mirrored:
        stats = {r: stats[0] for r in range(npus)}
        order = list(range(npus))
        log = [x for x in log if not isinstance(x, int)] + order
    dtype = np.int64 if ctx.clock.exact else float

    def col(get) -> np.ndarray:
        vals = [get(stats[r]) for r in range(npus)]
        return np.array(vals, dtype=object if dtype is np.int64 and max(vals, default=0) >= 2**63 else dtype)

    times = {k: col(lambda s, k=k: s.times.get(k, 0)) for k in TYPES if any(k in s.times for s in stats.values())}
    roof = None
    if ctx.system.roofline_enabled:
        roof = np.array([stats[r].roofline for r in range(npus)], dtype=float)
    rows = {r: stats[r].rows for r in ([0] if mirrored else range(npus))}
    return AstraResult(col(lambda s: s.finish), col(lambda s: s.exposed), col(lambda s: s.gpu),
                       col(lambda s: s.wall), times, col(lambda s: s.overlap), roof, order, log, [], ctx.model,
                       "symmetric" if mirrored else "full", rows=rows)


def _deadlock(stuck: list[Workload], ctx: Context) -> str:
    lines = [f"deadlock: {len(stuck)} rank(s) never finish (at t = {ctx.clock.now} ns); ASTRA-sim would stop "
             "without printing their results (stdout has the lines of the ranks that finished)"]
    for wl in stuck[:8]:
        pending = sorted(wl.ongoing | wl.free)[:4]
        names = ", ".join(f"node {int(wl.t.id[i])} {wl.t.name[i]!r}" for i in pending)
        lines.append(f"  rank {wl.rank}: waiting on {names}")
    if len(stuck) > 8:
        lines.append(f"  ... and {len(stuck) - 8} more rank(s)")
    lines.append(f"  {ctx.fabric.pending()} message(s) without a matching send/receive")
    return "\n".join(lines + explain(ctx, stuck))
