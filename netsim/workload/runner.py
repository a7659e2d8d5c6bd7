"""Execute a Chakra workload: every rank walks its dependency DAG on one SimPy clock.

Per rank, a node is *ready* when all its dependencies are done (``data_deps``
and, unless disabled, ``ctrl_deps``; ids missing from the file are ignored and
counted).  Ready nodes issue in file order onto three lanes, at most one node
in flight per lane, as ASTRA-sim does (``streams`` raises that limit): the CPU lane (``is_cpu_op`` compute and
host-side comm nodes), the GPU compute lane, and the GPU comm lane (collectives
and sends).  Receives, memory and metadata nodes take no lane.

* **Collectives** match across ranks by communicator group and per-group issue
  order; type and size must agree.  A collective starts for each member as it
  arrives (no barrier): transfers begin as soon as both of their endpoints
  are in.
* **Send/recv** match by (src, dst, tag) in FIFO order; a send completes when
  its last byte lands, a receive when its message has landed.
* **Compute** takes ``duration_micros``, or the roofline
  ``num_ops / min(peak, mem_bw * num_ops / tensor_size)`` from the topology's GPU
  preset when the duration is 0 (0 with nothing to compute costs 1 ns, as in
  ASTRA-sim).

**Faults** (:mod:`netsim.workload.faults`): ``compute_scale[rank]`` multiplies every
compute node's duration on that rank; ``launch_delay[rank]`` (seconds) holds back
the rank's first issue.

A workload whose ranks cannot all finish ends with a
:class:`~netsim.errors.DeadlockError` naming every stuck rank, its blocked
nodes and what they wait for: never a hang.
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, field

import numpy as np
import simpy

from netsim.collectives import chain, direct, ring
from netsim.collectives.executor import CollectiveRun
from netsim.collectives.fastpath import fixed_patterns, run_fixed
from netsim.errors import DeadlockError, InputError
from netsim.network.analytical import AnalyticalNetwork
from netsim.network.flow import FlowNetwork
from netsim.topology.model import Topology
from netsim.workload.chakra_schema import CommType, NodeType
from netsim.workload.chakra_types import MISSING, NodeTable
from netsim.workload.groups import CommGroups

MODELS = {"flow": FlowNetwork, "analytical": AnalyticalNetwork}
CPU, GPU, COMM = 0, 1, 2


def _lanes(t: NodeTable) -> np.ndarray:
    """Lane of every node: CPU (``is_cpu_op`` compute and host-side comm), GPU compute, COMM
    (GPU collectives and sends), or -1 (receives, memory, metadata: no lane)."""
    typ = np.asarray(t.type)
    cpu = np.asarray(t.is_cpu_op) == 1
    out = np.full(typ.size, -1, dtype=np.int8)
    comp = typ == NodeType.COMP_NODE
    out[comp] = np.where(cpu[comp], CPU, GPU)
    coll = typ == NodeType.COMM_COLL_NODE
    out[coll] = np.where(cpu[coll] | (np.asarray(t.comm_type)[coll] == MISSING), CPU, COMM)
    out[typ == NodeType.COMM_SEND_NODE] = COMM
    return out


def collective_schedule(comm_type: int, comm_size: int, n: int):
    """The schedule for a Chakra collective (``comm_size`` is Chakra's per-rank buffer)."""
    t = CommType(comm_type)
    if t == CommType.ALL_REDUCE:
        return ring.ring_all_reduce(n, comm_size)
    if t == CommType.ALL_GATHER:  # Chakra: per-rank input shard; nccl-tests S = total output
        return ring.ring_all_gather(n, comm_size * n)
    if t in (CommType.REDUCE_SCATTER, CommType.REDUCE_SCATTER_BLOCK):
        return ring.ring_reduce_scatter(n, comm_size)
    if t == CommType.ALL_TO_ALL:
        return direct.direct_all_to_all(n, comm_size)
    if t == CommType.BROADCAST:
        return chain.chain_broadcast(n, comm_size)
    if t == CommType.REDUCE:
        return chain.chain_reduce(n, comm_size)
    if t == CommType.BARRIER:
        return ring.ring_all_reduce(n, 8 * n)
    raise InputError(f"unsupported collective {t.name}", field="comm_type")


#: Chakra collective -> (nccl-tests op, S as a multiple of comm_size times group size, or of comm_size).
_NCCL_OPS = {CommType.ALL_REDUCE: "all_reduce", CommType.ALL_GATHER: "all_gather",
             CommType.REDUCE_SCATTER: "reduce_scatter", CommType.REDUCE_SCATTER_BLOCK: "reduce_scatter",
             CommType.ALL_TO_ALL: "alltoall", CommType.BROADCAST: "broadcast", CommType.REDUCE: "reduce"}


#: Collectives where every member's finish depends on every member's arrival.
_SYMMETRIC = {CommType.ALL_REDUCE, CommType.ALL_GATHER, CommType.REDUCE_SCATTER, CommType.REDUCE_SCATTER_BLOCK,
              CommType.ALL_TO_ALL, CommType.BARRIER}


class _FixedRun:
    """A symmetric collective on a contention-free network, evaluated in one vectorized pass
    (:func:`~netsim.collectives.fastpath.run_fixed`) once its last member arrives.  Exact: the
    same max-plus recurrence the event-driven executor follows, started from each member's
    arrival time; no member can finish before the last one arrives, since each needs data
    from all.  Attributes mirror :class:`CollectiveRun` for the recorder."""

    def __init__(self, net, sched, members: tuple, on_done, cache: dict):
        n = len(members)
        self.cache, self.key = cache, (id(sched), members)
        self.net, self.sched, self.ranks, self.on_done = net, sched, np.asarray(members, np.int64), on_done
        self.start = np.full(n, np.nan)
        self.t_done = np.full(n, np.nan)
        self.left = n

    def arrive(self, local: int) -> None:
        now = self.net.env.now
        self.start[local] = now
        self.left -= 1
        if self.left:
            return
        prepared = self.cache.get(self.key)
        if prepared is None:
            prepared = self.cache[self.key] = fixed_patterns(self.net, self.sched, self.ranks)
        res = run_fixed(self.net, self.sched, self.ranks, self.start, prepared)
        self.t_done = np.maximum(res["finish"], now) if res["finish"].size else np.full(self.start.size, now)
        for t in np.unique(self.t_done).tolist():
            idx = np.flatnonzero(self.t_done == t)
            self.net.call_at(t, lambda idx=idx, t=t: self.on_done(idx, t))


class NcclSchedules:
    """Collectives of a workload as NCCL would run them: ``--algo auto`` and protocol shaping
    (:func:`netsim.collectives.plan.plan`).  Plans are cached per (type, size, group shape):
    groups laid out alike on the topology (every TP group, every DP group...) share one."""

    def __init__(self, topo: Topology, split_channels: bool = True):
        self.topo, self.split = topo, split_channels
        self.g = int(topo.meta.get("gpus_per_node") or topo.n_gpus)
        self._cache: dict = {}

    def __call__(self, comm_type: int, comm_size: int, members: tuple):
        from netsim.collectives.barrier import barrier
        from netsim.collectives.plan import plan
        t = CommType(comm_type)
        ranks = np.asarray(members, dtype=np.int64)
        n = ranks.size
        if t == CommType.BARRIER:
            return barrier(n)
        op = _NCCL_OPS.get(t)
        if op is None:
            raise InputError(f"unsupported collective {t.name}", field="comm_type")
        size = comm_size * n if t == CommType.ALL_GATHER else comm_size  # Chakra AG: per-rank shard
        key = (op, size, n, int(ranks[0]) % self.g, np.diff(ranks).tobytes())
        sched = self._cache.get(key)
        if sched is None:
            sched = self._cache[key] = plan(self.topo, ranks, op, float(size), split_channels=self.split).schedule
        return sched


@dataclass
class _Rank:
    rank: int
    table: NodeTable
    children: list[list[int]]
    indeg: np.ndarray
    lane_of: np.ndarray = None  # lane of every node (-1: none)
    queues: list = field(default_factory=lambda: [deque(), deque(), deque(), deque()])  # ready: per lane, lane-less
    lanes: list = field(default_factory=lambda: [0, 0, 0])  # nodes in flight per lane
    waiting: dict = field(default_factory=dict)  # node -> what it waits for
    done: int = 0
    finish: float = 0.0
    compute_s: float = 0.0
    scale: float = 1.0  # compute slowdown factor (faults)
    coll_seq: dict = field(default_factory=lambda: defaultdict(int))


@dataclass
class WorkloadResult:
    """Per-rank outcome (seconds) and the executed-op rows.

    ``ops`` rows are ``(rank, node_id, name, kind, start, end, row)`` (``row``: index in the
    rank's node table).  :meth:`tables` and :meth:`write` give the results dataset
    (:mod:`netsim.results.record`); ``run`` is the finished :class:`WorkloadRun`.
    """

    finish: np.ndarray
    compute: np.ndarray
    ops: list[tuple] = field(default_factory=list)
    unknown_deps: int = 0
    notes: list[str] = field(default_factory=list)
    run: "WorkloadRun | None" = field(default=None, repr=False)
    config: dict = field(default_factory=dict, repr=False)
    wall_time_s: float = float("nan")
    link_status: np.ndarray | None = field(default=None, repr=False)  # per link: 0 ok, 1 degraded, 2 failed

    def tables(self) -> dict:
        """The results tables as pandas DataFrames: ops, collectives, links, ranks, runs."""
        from netsim.results.record import RunRecorder
        return RunRecorder(self).frames()

    def write(self, out_dir, *, overwrite: bool = False):
        """Write the results dataset under ``out_dir``; returns the run id."""
        from netsim.results.record import RunRecorder
        return RunRecorder(self).write(out_dir, overwrite=overwrite)

    @property
    def exposed_comm(self) -> np.ndarray:
        """ASTRA-sim's definition: finish minus the sum of GPU compute time."""
        return self.finish - self.compute


class WorkloadRun:
    """Run ``tables`` (rank -> NodeTable) on ``topo``; see the module docstring."""

    def __init__(self, topo: Topology, tables: dict[int, NodeTable], groups: CommGroups,
                 model: str = "flow", *, ctrl_deps: bool = True, streams: int = 1,
                 schedule_fn=None, network=None, compute_scale=None, launch_delay=None):
        if streams < 1:
            raise InputError(f"expected at least 1 stream per lane, got {streams}", source="--streams")
        self.streams = streams
        n = len(tables)
        if n > topo.n_gpus:
            raise InputError(f"the workload has {n} ranks but the topology only {topo.n_gpus} GPUs",
                             source="--topology")
        self.env = simpy.Environment()
        # schedule_fn(comm_type, comm_size, members) -> Schedule; network(env, topo) -> Network
        if schedule_fn is None:
            schedule_fn = (lambda ct, size, members: collective_schedule(ct, size, len(members))) \
                if topo.meta.get("astra_network") else NcclSchedules(topo, split_channels=model != "analytical")
        self.schedule_fn = schedule_fn
        self.net = (network or MODELS[model])(self.env, topo)
        self.topo, self.groups = topo, groups
        self.unknown = 0
        self.notes: list[str] = []
        self.ranks = [self._prepare_rank(r, tables[r], ctrl_deps) for r in sorted(tables)]
        self._colls: dict[tuple, dict] = {}
        self._fixed: dict = {}  # (schedule id, members) -> prepared fixed-duration patterns
        self._mail: dict[tuple, deque] = defaultdict(deque)
        self._recv_wait: dict[tuple, deque] = defaultdict(deque)
        self.ops: list[tuple] = []
        self.compute_scale = _per_rank(compute_scale, 1.0, n, "compute_scale")
        self.launch_delay = _per_rank(launch_delay, 0.0, n, "launch_delay")
        for st in self.ranks:
            st.scale = float(self.compute_scale[st.rank])

    # --------------------------------------------------------------- set-up
    def _prepare_rank(self, rank: int, t: NodeTable, ctrl: bool) -> _Rank:
        """Gate on data ∪ ctrl deps; if only the ctrl edges make a cycle, use data deps alone."""
        if not ctrl or t.ctrl_deps.size == 0:
            return self._prepare(rank, t, False)
        unknown = self.unknown
        try:
            return self._prepare(rank, t, True)
        except InputError as exc:
            if "dependency cycle" not in str(exc):
                raise
            self.unknown = unknown
            self.notes.append(f"rank {rank}: ctrl_deps contradict data_deps ({exc.message}); "
                              "gated on data_deps only")
            return self._prepare(rank, t, False)

    def _prepare(self, rank: int, t: NodeTable, ctrl: bool) -> _Rank:
        index = {int(v): i for i, v in enumerate(t.id.tolist())}
        if len(index) != len(t):
            raise InputError("node ids are not unique", source=t.source, field="id")
        children: list[list[int]] = [[] for _ in range(len(t))]
        indeg = np.zeros(len(t), dtype=np.int64)
        kinds = [(t.data_ptr, t.data_deps)] + ([(t.ctrl_ptr, t.ctrl_deps)] if ctrl else [])
        for i in range(len(t)):
            deps = set()
            for ptr, dep in kinds:
                deps.update(dep[ptr[i]:ptr[i + 1]].tolist())
            for d in deps:
                j = index.get(int(d))
                if j is None or j == i:
                    self.unknown += j is None
                    continue
                children[j].append(i)
                indeg[i] += 1
        _check_acyclic(t, children, indeg.copy())
        st = _Rank(rank, t, children, indeg)
        st.lane_of = _lanes(t)
        self._ready(st, np.flatnonzero(indeg == 0).tolist())
        return st

    # ------------------------------------------------------------ execution
    def run(self) -> WorkloadResult:
        """Simulate to completion; raises DeadlockError if some rank cannot finish."""
        for st in self.ranks:
            delay = float(self.launch_delay[st.rank])
            if delay > 0:
                self.net.call_at(delay, lambda st=st: self._issue(st))
            else:
                self._issue(st)
        self.env.run()
        stuck = [st for st in self.ranks if st.done < len(st.table)]
        if stuck:
            raise DeadlockError(self._deadlock_report(stuck))
        return WorkloadResult(np.array([st.finish for st in self.ranks]),
                              np.array([st.compute_s for st in self.ranks]), self.ops, self.unknown,
                              self.notes, self)

    @staticmethod
    def _ready(st: _Rank, nodes) -> None:
        """Queue newly ready nodes on their lanes (lane-less ones on their own queue)."""
        lanes = st.lane_of
        for i in nodes:
            st.queues[lanes[i]].append(i)  # -1 -> the lane-less queue

    def _issue(self, st: _Rank) -> None:
        """Start queued nodes, in the order they became ready, while their lane has room."""
        free = st.queues[-1]
        while free:
            self._start(st, free.popleft(), None)
        for lane in (CPU, GPU, COMM):
            q = st.queues[lane]
            while q and st.lanes[lane] < self.streams:
                st.lanes[lane] += 1
                self._start(st, q.popleft(), lane)

    def _start(self, st: _Rank, i: int, lane: int | None) -> None:
        t, now = st.table, self.env.now
        typ = int(t.type[i])
        done = lambda: self._finish(st, i, lane, now)  # noqa: E731
        if typ == NodeType.COMM_COLL_NODE and lane == COMM:
            self._collective(st, i, done)
        elif typ == NodeType.COMM_SEND_NODE:
            self._send(st, i, done)
        elif typ == NodeType.COMM_RECV_NODE:
            self._recv(st, i, done)
        elif typ in (NodeType.METADATA_NODE, NodeType.INVALID_NODE):
            done()
        else:
            dur = self._compute_time(t, i) * st.scale if typ == NodeType.COMP_NODE else float(t.duration_micros[i]) * 1e-6
            if typ == NodeType.COMP_NODE and lane == GPU:
                st.compute_s += dur
            self.net.call_at(now + dur, done)

    def _compute_time(self, t: NodeTable, i: int) -> float:
        dur = float(t.duration_micros[i]) * 1e-6
        if dur > 0:
            return dur
        ops, size = int(t.num_ops[i]), int(t.tensor_size[i])
        peak, bw = self.topo.meta.get("peak_flops"), self.topo.meta.get("mem_bw_Bps")
        if ops > 0 and peak:
            perf = min(peak, bw * ops / size) if size > 0 and bw else peak
            return ops / perf
        return 1e-9

    def _finish(self, st: _Rank, i: int, lane: int | None, start: float) -> None:
        st.waiting.pop(i, None)
        if lane is not None:
            st.lanes[lane] -= 1
        st.done += 1
        st.finish = max(st.finish, self.env.now)
        self.ops.append((st.rank, int(st.table.id[i]), st.table.name[i], int(st.table.type[i]), start, self.env.now, i))
        ready = []
        for c in st.children[i]:
            st.indeg[c] -= 1
            if st.indeg[c] == 0:
                ready.append(c)
        self._ready(st, ready)
        self._issue(st)

    # --------------------------------------------------------- communication
    def _collective(self, st: _Rank, i: int, done) -> None:
        t = st.table
        pg = int(t.pg[i])
        pg_name = t.pg_names[pg] if pg >= 0 else None
        members = self.groups.resolve(pg_name, where=f"{t.source}: node {int(t.id[i])}")
        if st.rank not in members:
            raise InputError(f"rank {st.rank} issues a collective on group {members} it is not in",
                             source=t.source, field=f"node {int(t.id[i])}")
        seq = st.coll_seq[members]
        st.coll_seq[members] += 1
        ctype, size = int(t.comm_type[i]), int(t.comm_size[i])
        key = (members, seq)
        inst = self._colls.get(key)
        if inst is None:
            sched = self.schedule_fn(ctype, max(size, 0), members)
            inst = {"type": ctype, "size": size, "first": (st.rank, int(t.id[i])), "done": {}, "arrived": set(),
                    "group": pg_name}
            on_done = lambda loc, _t, k=key: self._coll_done(k, loc)  # noqa: E731
            if isinstance(self.net, AnalyticalNetwork) and ctype in _SYMMETRIC:
                inst["run"] = _FixedRun(self.net, sched, members, on_done, self._fixed)
            else:
                inst["run"] = CollectiveRun(self.env, self.net, sched, np.array(members), deferred=True,
                                            on_rank_done=on_done)
            self._colls[key] = inst
        elif (inst["type"], inst["size"]) != (ctype, size):
            r0, n0 = inst["first"]
            raise InputError(
                f"mismatched collectives: rank {r0} node {n0} issued {CommType(inst['type']).name} of "
                f"{inst['size']} B as #{seq} on group {list(members)}, rank {st.rank} node {int(t.id[i])} "
                f"issued {CommType(ctype).name} of {size} B", source=t.source, field="comm_type/comm_size")
        inst["done"][members.index(st.rank)] = done
        inst["arrived"].add(st.rank)
        st.waiting[i] = ("collective", key)
        inst["run"].arrive(members.index(st.rank))

    def _coll_done(self, key: tuple, local: np.ndarray) -> None:
        inst = self._colls[key]
        for loc in local.tolist():
            inst["done"].pop(loc)()

    def _send(self, st: _Rank, i: int, done) -> None:
        t = st.table
        dst, tag, size = int(t.comm_dst[i]), int(t.comm_tag[i]), int(t.comm_size[i])
        if not 0 <= dst < len(self.ranks):
            raise InputError(f"comm_dst {dst} is not a rank of the workload", source=t.source,
                             field=f"node {int(t.id[i])}")
        key = (st.rank, dst, 0 if tag == MISSING else tag)
        st.waiting[i] = ("send", key)
        ev = self.net.transfer(st.rank, dst, max(size, 0))
        ev.callbacks.append(lambda _e: (self._deliver(key), done()))

    def _deliver(self, key: tuple) -> None:
        if self._recv_wait[key]:
            self._recv_wait[key].popleft()()
        else:
            self._mail[key].append(self.env.now)

    def _recv(self, st: _Rank, i: int, done) -> None:
        t = st.table
        src, tag = int(t.comm_src[i]), int(t.comm_tag[i])
        key = (src, st.rank, 0 if tag == MISSING else tag)
        if self._mail[key]:
            self._mail[key].popleft()
            done()
        else:
            st.waiting[i] = ("recv", key)
            self._recv_wait[key].append(done)

    # ------------------------------------------------------------- reports
    def _deadlock_report(self, stuck: list[_Rank]) -> str:
        lines = [f"deadlock: {len(stuck)} of {len(self.ranks)} ranks cannot finish "
                 f"(at t = {self.env.now * 1e6:.3f} us)"]
        for st in stuck[:16]:
            t = st.table
            what = []
            for i, (kind, key) in list(st.waiting.items())[:4]:
                label = f"node {int(t.id[i])} {t.name[i]!r}"
                if kind == "collective":
                    inst = self._colls[key]
                    missing = sorted(set(key[0]) - inst["arrived"])
                    what.append(f"{label} {CommType(inst['type']).name} #{key[1]} on group {list(key[0])} "
                                f"waits for ranks {missing[:8]}{'...' if len(missing) > 8 else ''}")
                else:
                    what.append(f"{label} {kind} (src {key[0]}, dst {key[1]}, tag {key[2]}) has no matching "
                                f"{'send' if kind == 'recv' else 'receive'}")
            pending = len(t) - st.done
            lines.append(f"  rank {st.rank}: {pending} node(s) not done; " + ("; ".join(what) or
                         f"{sum(len(q) for q in st.queues)} ready node(s) blocked behind a busy lane"))
        if len(stuck) > 16:
            lines.append(f"  ... and {len(stuck) - 16} more ranks")
        return "\n".join(lines)


def _per_rank(values, default: float, n: int, name: str) -> np.ndarray:
    """A per-rank float array (``default`` everywhere when ``values`` is None)."""
    if values is None:
        return np.full(n, default)
    arr = np.asarray(values, dtype=np.float64)
    if arr.shape != (n,):
        raise ValueError(f"{name}: expected {n} per-rank values, got shape {arr.shape}")
    return arr


def _check_acyclic(t: NodeTable, children: list[list[int]], indeg: np.ndarray) -> None:
    queue = deque(np.flatnonzero(indeg == 0).tolist())
    seen = 0
    while queue:
        i = queue.popleft()
        seen += 1
        for c in children[i]:
            indeg[c] -= 1
            if indeg[c] == 0:
                queue.append(c)
    if seen < len(t):
        cyc = np.flatnonzero(indeg > 0)[:5]
        raise InputError(f"dependency cycle among nodes {[int(t.id[c]) for c in cyc]}",
                         source=t.source, field="data_deps/ctrl_deps")
