"""Execute a Chakra workload: every rank walks its dependency DAG on one SimPy clock.

Per rank, a node is *ready* when all its dependencies are done (``data_deps``
and, unless disabled, ``ctrl_deps``; ids missing from the file are ignored and
counted).  Ready nodes issue in file order onto three lanes, at most one node
in flight per lane, as ASTRA-sim does (``streams`` raises that limit): the CPU lane (``is_cpu_op`` compute and
host-side comm nodes), the GPU compute lane, and the GPU comm lane (collectives
and sends).  Receives, memory and metadata nodes take no lane.  A trace whose
GlobalMetadata says ``comm_streams: "communicator"`` (the LLM generator's) gets one comm
lane per communicator and one per send peer instead, as PyTorch runs them (ProcessGroupNCCL
gives every process group its own NCCL stream, and point-to-point pairs their own
communicator); ``comm_streams="one"`` / ``"communicator"`` forces either.

* **Collectives** match across ranks by communicator (its identity: the group name, so two
  groups with the same members are two communicators, as in NCCL) and per-communicator
  issue order; type and size must agree.  A collective starts for each member as it
  arrives (no barrier): transfers begin as soon as both of their endpoints
  are in.
* **Send/recv** match by (src, dst, tag) in FIFO order; a send (on NCCL's channels,
  :mod:`netsim.workload.sends`) completes when its last byte lands, a receive when its message has.
* **Compute** takes ``duration_micros``, or the roofline of the GPU preset per kernel kind when
  it is 0, slowed while the rank's comm kernels hold SMs (:mod:`netsim.workload.compute`).

**Placement**: job rank *r* runs on topology GPU ``placement[r]``
(:mod:`netsim.topology.placement`; identity by default): collectives are planned on the
members' GPUs and every transfer, collective or point-to-point, goes between GPUs.

**Faults** (:mod:`netsim.workload.faults`): ``compute_scale[rank]`` multiplies every
compute node's duration on that rank; ``launch_delay[rank]`` (seconds) holds back
the rank's first issue.

A workload whose ranks cannot all finish, or that leaves a collective not issued by every
member or a message never received, ends with a :class:`~netsim.errors.DeadlockError`
(:mod:`netsim.workload.deadlock`) naming the cause, every stuck rank, its blocked nodes and
what they wait for: never a hang, on every model and engine.
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, field

import numpy as np
import simpy

from netsim.errors import InputError
from netsim.network.models import MODELS
from netsim.topology.model import Topology
from netsim.units import format_time
from netsim.chakra.schema import NodeType
from netsim.chakra.model import MISSING, NodeTable
from netsim.workload.collectives import SYMMETRIC, Instances, NcclSchedules, collective_schedule, families_of  # noqa: F401
from netsim.workload.compute import Kernel, Roofline, SmShare
from netsim.workload.deadlock import Unmatched
from netsim.chakra.groups import CommGroups
from netsim.workload.replicas import Replicas, RunConflict
from netsim.workload.result import WorkloadResult
from netsim.workload.sends import Sends
from netsim.workload.symmetry import MODES, SymmetryBroken, prove_plans, unproven_policy
from netsim.workload.tables import check_acyclic as _check_acyclic
from netsim.workload.tables import dependency_graph
from netsim.workload.tables import per_rank as _per_rank
from netsim.workload.tables import placement as _placement
from netsim.workload.streams import COMM, COMM_STREAMS, GPU, comm_lanes, node_lanes

# node types as plain ints (compared once per node run)
_COMP, _COLL = int(NodeType.COMP_NODE), int(NodeType.COMM_COLL_NODE)
_SEND, _RECV = int(NodeType.COMM_SEND_NODE), int(NodeType.COMM_RECV_NODE)
_NOTHING = (int(NodeType.METADATA_NODE), int(NodeType.INVALID_NODE))


@dataclass
class _Rank:
    rank: int
    table: NodeTable
    children: list[list[int]]
    indeg: list  # dependencies not yet done, per node
    lane_of: list = None  # lane of every node (-1: none)
    queues: list = None  # ready nodes: one deque per lane, then the lane-less ones (index -1)
    lanes: list = None  # nodes in flight per lane
    waiting: dict = field(default_factory=dict)  # node -> what it waits for
    done: int = 0
    finish: float = 0.0
    compute_s: float = 0.0
    scale: float = 1.0  # compute slowdown factor (faults)
    coll_seq: dict = field(default_factory=lambda: defaultdict(int))
    types: list = None  # node type of every row (Python ints: read once per node run)
    secs: list = None  # seconds of every row: the roofline's for compute nodes (before ``scale``), else its duration
    ids: list = None  # node id of every row


class WorkloadRun:
    """Run ``tables`` (rank -> NodeTable) on ``topo``; see the module docstring.

    ``replicas`` (:class:`~netsim.workload.replicas.Replicas`): ``tables`` need only hold
    the representatives; the other ranks are their translations (ignored when faults
    make ranks differ, or when ``placement`` is not the identity: replicas are then not
    shifted copies of each other on the fabric).  ``placement``: topology GPU of every
    job rank (default: rank r on GPU r).  ``event_only``: collective families
    (:func:`~netsim.workload.collectives.family`) always simulated event by event; ``fast=False``: all of them (the
    event-driven reference, ``engine="event"``).  ``schedule_fn(comm_type, comm_size,
    gpus)`` gets the topology GPUs of a collective's members; one with a ``named`` method is
    called ``named(comm_type, comm_size, gpus, node_name)`` instead (the first member's node name;
    :class:`~netsim.workload.moe_run.MoESchedules`).
    """

    #: Most repeats of a flow-model run (then every collective is event-driven); see :meth:`run`.
    MAX_ATTEMPTS = 8

    def __init__(self, topo: Topology, tables: dict[int, NodeTable], groups: CommGroups,
                 model: str = "flow", *, ctrl_deps: bool = True, streams: int = 1,
                 schedule_fn=None, network=None, compute_scale=None, launch_delay=None,
                 replicas: Replicas | None = None, event_only=(), fast: bool = True, placement=None,
                 comm_streams: str | None = None, sm_contention: bool = True, symmetry: str = "exact",
                 full_tables=None):
        if streams < 1:
            raise InputError(f"expected at least 1 stream per lane, got {streams}", source="--streams")
        self.streams = streams
        if comm_streams is None:  # what the traces say (every rank's GlobalMetadata), else ASTRA-sim's rule
            said = {str(t.metadata.attrs.get("comm_streams", "one")) for t in tables.values()}
            comm_streams = said.pop() if len(said) == 1 else "one"
        if comm_streams not in COMM_STREAMS:
            raise InputError(f"expected one of {', '.join(COMM_STREAMS)}, got {comm_streams!r}",
                             source="comm_streams")
        self.comm_streams = comm_streams
        n = replicas.world if replicas is not None else len(tables)
        if n > topo.n_gpus:
            raise InputError(f"the workload has {n} ranks but the topology only {topo.n_gpus} GPUs",
                             source="--topology")
        self.world = n
        self.compute_scale = _per_rank(compute_scale, 1.0, n, "compute_scale")
        self.launch_delay = _per_rank(launch_delay, 0.0, n, "launch_delay")
        if replicas is not None and (np.ptp(self.compute_scale) > 0 or np.ptp(self.launch_delay) > 0):
            missing = sorted(set(range(n)) - set(tables))
            if missing:
                raise InputError("faults differ per rank, so every rank must be simulated, but the "
                                 f"workload only holds the representatives (rank {missing[0]} is missing)",
                                 source="replicas")
            replicas = None
        self.notes: list[str] = []
        self.roofline = Roofline(topo.facts)
        self.sm_contention = bool(sm_contention)  # comm kernels take SMs from compute (compute.SmShare)
        self.gpus = _placement(placement, n, topo.n_gpus)
        if replicas is not None and self.gpus is not None:
            missing = sorted(set(range(n)) - set(tables))
            if missing:
                raise InputError("replica symmetry needs the packed placement (replicas must be shifted copies "
                                 "on the fabric), but the workload only holds the representatives (rank "
                                 f"{missing[0]} is missing); simulate every rank (symmetry none)",
                                 source="--placement")
            replicas = None
            self.notes.append("replica symmetry off: the placement is not packed, so replicas are not shifted "
                              "copies on the fabric; simulated every rank")
        if symmetry not in MODES:
            raise InputError(f"expected one of {', '.join(MODES)}, got {symmetry!r}", source="symmetry")
        self.symmetry = symmetry
        self.tail_delta = None  # per rank, with replicas: its last node's finish minus its representative's
        # every rank's tables, for when an exact replica run is not proven (see _unreplicate)
        self._full_tables = tables if replicas is not None and len(tables) == n else full_tables
        if replicas is not None:
            if replicas.count == 1:
                replicas = None
            else:
                tables = {int(r): tables[int(r)] for r in replicas.reps}
        self.replicas = replicas
        # schedule_fn(comm_type, comm_size, members) -> Schedule; network(env, topo) -> Network
        if schedule_fn is None:
            schedule_fn = (lambda ct, size, members: collective_schedule(ct, size, len(members))) \
                if topo.facts.astra_network else NcclSchedules(topo)
        self.schedule_fn = schedule_fn
        self._network = network or MODELS[model]
        self.topo, self.groups = topo, groups
        self.unknown = 0
        self._graphs: dict = {}
        self._ctrl = ctrl_deps
        self._tables = {r: self._graph(r, tables[r], ctrl_deps) for r in sorted(tables)}
        self.event_only = set(event_only)
        self.fast = fast
        self._reset()

    @property
    def rank_gpus(self) -> np.ndarray:
        """Topology GPU of every job rank (the placement)."""
        return np.arange(self.world, dtype=np.int64) if self.gpus is None else self.gpus

    def _reset(self) -> None:
        """Fresh simulation state (a run may be repeated, see :meth:`run`)."""
        self.env = simpy.Environment()
        self.net = self._network(self.env, self.topo)
        self.sends = Sends(self.topo)  # sends as NCCL runs them (parts over the network)
        self.sms = SmShare(self.net, self.topo.facts.gpu_sms if self.sm_contention else None, self.sends)
        self.ranks = []
        for r, (t, children, indeg, lanes, (types, secs, ids)) in self._tables.items():
            st = _Rank(r, t, children, indeg.tolist(), lanes.tolist(), types=types, secs=secs, ids=ids)
            n_lanes = int(lanes.max(initial=COMM)) + 1
            st.queues, st.lanes = [deque() for _ in range(n_lanes + 1)], [0] * n_lanes
            st.scale = float(self.compute_scale[r])
            self._ready(st, np.flatnonzero(indeg == 0).tolist())
            self.ranks.append(st)
        every = None if self.event_only else families_of([g[0] for g in self._tables.values()], self.groups)
        self.colls = Instances(self.env, self.net, self.schedule_fn, self.replicas, frozenset(self.event_only),
                               self.fast, self.gpus, every or frozenset(),  # when a run stops: see run()
                               strict=self.symmetry == "exact")
        self._colls = self.colls.items
        by_rank = {st.rank: st for st in self.ranks}
        self.colls.last_node = lambda rank: by_rank[rank].done == len(by_rank[rank].table) - 1
        self.p2p = self.colls.mirrored or self.net
        #: Messages that landed before their receive was posted: message key -> senders, in order.
        self.mail: dict[tuple, deque] = defaultdict(deque)
        self._recv_wait: dict[tuple, deque] = defaultdict(deque)
        self.ops: list[tuple] = []

    # --------------------------------------------------------------- set-up
    def _graph(self, rank: int, t: NodeTable, ctrl: bool) -> tuple:
        """(table, children, in-degrees, lanes); shared by ranks that share a table object."""
        hit = self._graphs.get((id(t), ctrl))
        if hit is None:
            hit = self._graphs[(id(t), ctrl)] = self._prepare_rank(rank, t, ctrl) + (self._rows(t),)
        return hit

    def _rows(self, t: NodeTable) -> tuple[list, list, list]:
        """Per row of ``t``: node type, seconds (the roofline's for compute nodes, else the duration)
        and id, as lists: a node's run reads them once each (:meth:`_start`, :meth:`_finish`)."""
        types = np.asarray(t.type).astype(np.int64)
        secs = np.asarray(t.duration_micros).astype(np.float64) * 1e-6
        comp = np.flatnonzero(types == NodeType.COMP_NODE)
        if comp.size:
            secs[comp] = self.roofline.times(t)[comp]
            self.roofline.note_kinds(t, comp)
        return types.tolist(), secs.tolist(), np.asarray(t.id).astype(np.int64).tolist()

    def _prepare_rank(self, rank: int, t: NodeTable, ctrl: bool) -> tuple:
        """Gate on data ∪ ctrl deps; if only the ctrl edges make a cycle, use data deps alone."""
        if not ctrl or t.ctrl_deps.size == 0:
            return self._prepare(t, False)
        unknown = self.unknown
        try:
            return self._prepare(t, True)
        except InputError as exc:
            if "dependency cycle" not in str(exc):
                raise
            self.unknown = unknown
            self.notes.append(f"rank {rank}: ctrl_deps contradict data_deps ({exc.message}); "
                              "gated on data_deps only")
            return self._prepare(t, False)

    def _prepare(self, t: NodeTable, ctrl: bool) -> tuple:
        children, indeg, unknown = dependency_graph(t, ctrl)
        self.unknown += unknown
        _check_acyclic(t, children, indeg.copy())
        lanes = node_lanes(t)
        return t, children, indeg, comm_lanes(t, lanes, COMM) if self.comm_streams == "communicator" else lanes

    # ------------------------------------------------------------ execution
    def run(self) -> WorkloadResult:
        """Simulate to completion; raises DeadlockError if the run is deadlocked
        (:class:`~netsim.workload.deadlock.Unmatched`).

        On the flow network, a collective evaluated off the event queue whose links were
        touched by other traffic while it ran is simulated event-driven in a repeat run
        (see :mod:`netsim.workload.collectives`), until no such conflict is left.  The first
        run goes on until every family has conflicted (or to the end) to find them all; a repeat
        (costlier: some families run event-driven) stops at its first new conflict.
        A repeat that deadlocks, or the last one allowed, runs every collective event-driven (its
        verdict is final: a deadlock is never repeated away); a deadlock that holds in every
        timing (:meth:`~netsim.workload.deadlock.Unmatched.certain`) is reported at once."""
        if self.replicas is not None and self.symmetry == "exact":
            why = unproven_policy(self.topo) or prove_plans(self.replicas, {r: g[0] for r, g in self._tables.items()},
                                                            self.groups, self.schedule_fn, self.sends, self.gpus)
            if why is not None:
                self._unreplicate(why)
        kept = len(self.notes)
        try:
            return self._run()
        except SymmetryBroken as exc:
            del self.notes[kept:]  # what the stopped replica run said
            self._unreplicate(str(exc))
            return self._run()

    def _unreplicate(self, why: str) -> None:
        """Simulate every rank from now on: the replica symmetry is not exact for this run."""
        try:
            full = self._full_tables() if callable(self._full_tables) else self._full_tables
        except InputError as exc:  # e.g. every rank's tables would not fit: say why every rank is needed
            raise InputError(f"replica symmetry is not exact for this run ({why}), so every rank is simulated: "
                             f"{exc.message}", source=exc.source, field=exc.field) from None
        if full is None:
            raise InputError(f"replica symmetry is not exact for this run ({why}), and the workload holds only the "
                             "representatives; give every rank's table, or symmetry 'approximate'",
                             source="replicas")
        self.notes.append(f"replica symmetry not exact for this run: {why}; simulated every rank")
        self.replicas, self._full_tables = None, None
        ctrl = self._ctrl
        self._tables = {r: self._graph(r, full[r], ctrl) for r in sorted(full)}
        self._reset()

    def _run(self) -> WorkloadResult:
        for attempt in range(1, self.MAX_ATTEMPTS + 2):
            stopped = self._simulate()
            guard = self.colls.guard
            if guard is None or not guard.conflicts:
                break
            unmatched = None if stopped else Unmatched(self)  # a stopped run is no verdict
            if unmatched and unmatched.certain():
                break  # deadlocked in every timing: no repeat can change the verdict
            if attempt >= self.MAX_ATTEMPTS or (unmatched and unmatched.found()):
                self.fast = False  # the event-driven reference decides
                again = "every collective event-driven"
            else:
                self.event_only |= guard.conflicts
                again = "them event-driven"
            self.notes.append(self._repeat_note(attempt, self.env.now if stopped else None, len(guard.conflicts),
                                                again))
            self._reset()
        Unmatched(self).check()
        finish = np.array([st.finish for st in self.ranks])
        compute = np.array([st.compute_s + self.sms.stretch.get(st.rank, 0.0) for st in self.ranks])
        self.notes += self.sms.notes(1 if self.replicas is None else self.replicas.count)
        if self.replicas is not None:
            finish, compute = self.replicas.expand(finish), self.replicas.expand(compute)
            self.tail_delta = self.colls.tail_delta(self.world)
            for rank, (_, t) in self.colls.tail.items():
                finish[rank] = t
            self.notes += self.colls.replica_notes(len(self.ranks))
        return WorkloadResult(finish, compute, self.ops, self.unknown, self.notes, self)

    @staticmethod
    def _repeat_note(attempt: int, stopped_s: float | None, conflicts: int, again: str) -> str:
        """The note of a repeated pass, for users: what happened and whether to act, in sensible units."""
        at = f" stopped early, at {format_time(stopped_s, 4, ' ')} of simulated time" if stopped_s is not None else ""
        return (f"simulation pass {attempt}{at}: {conflicts} collective(s) timed by the fast closed-form path shared "
                f"links with other traffic, which that path does not model, so the run was repeated with {again} "
                "(exact); the results are the last pass's, nothing to do (--engine event times every collective "
                "event by event from the start, skipping the repeats)")

    def _simulate(self) -> bool:
        """One run; True when it stopped at a conflict (:class:`RunConflict`, see :meth:`run`)."""
        try:
            for st in self.ranks:
                delay = float(self.launch_delay[st.rank])
                if delay > 0:
                    self.net.call_at(delay, lambda st=st: self._issue(st))
                else:
                    self._issue(st)
            self.env.run()
        except RunConflict:
            return True
        return False

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
        for lane in range(len(st.lanes)):
            q = st.queues[lane]
            while q and st.lanes[lane] < self.streams:
                st.lanes[lane] += 1
                self._start(st, q.popleft(), lane)

    def _start(self, st: _Rank, i: int, lane: int | None) -> None:
        now = self.env.now
        typ = st.types[i]
        done = lambda: self._finish(st, i, lane, now)  # noqa: E731
        if typ == _COMP:
            dur = st.secs[i] * st.scale
            if lane == GPU:
                st.compute_s += dur
                self.sms.compute(st.rank, dur, done)  # slowed while comm kernels hold SMs
            else:
                self.net.call_at(now + dur, done)
        elif typ == _COLL and lane is not None and lane >= COMM:
            self._collective(st, i, done)
        elif typ == _SEND:
            self._send(st, i, done)
        elif typ == _RECV:
            self._recv(st, i, done)
        elif typ in _NOTHING:
            done()
        else:
            self.net.call_at(now + st.secs[i], done)

    def _finish(self, st: _Rank, i: int, lane: int | None, start: float) -> None:
        st.waiting.pop(i, None)
        if lane is not None:
            st.lanes[lane] -= 1
        st.done += 1
        now = self.env.now
        if now > st.finish:
            st.finish = now
        self.ops.append((st.rank, st.ids[i], st.table.name[i], st.types[i], start, now, i))
        indeg, lanes, queues = st.indeg, st.lane_of, st.queues
        for c in st.children[i]:  # newly ready nodes queue on their lanes (lane-less ones: index -1)
            indeg[c] -= 1
            if indeg[c] == 0:
                queues[lanes[c]].append(c)
        self._issue(st)

    # --------------------------------------------------------- communication
    def _collective(self, st: _Rank, i: int, done) -> None:
        t = st.table
        pg = int(t.pg[i])
        pg_name = t.pg_names[pg] if pg >= 0 else None
        members = self.groups.resolve(pg_name, where=lambda: f"{t.source}: node {int(t.id[i])}")
        if st.rank not in members:
            raise InputError(f"rank {st.rank} issues a collective on group {members} it is not in",
                             source=t.source, field=f"node {int(t.id[i])}")
        comm = self.groups.identity(pg_name)
        seq = st.coll_seq[comm]
        st.coll_seq[comm] += 1
        st.waiting[i] = ("collective", (comm, seq))
        ctype = int(t.comm_type[i])
        kernel = done = Kernel(self.sms, st.rank, done)
        if ctype in SYMMETRIC:
            done = self._held(comm, seq, done)
        key = self.colls.join(st.rank, members, seq, ctype, int(t.comm_size[i]),
                              (t.source, int(t.id[i]), st.rank, t.name[i]), done, pg_name, comm=comm)
        inst = self._colls[key]
        kernel.start(inst["blocks"])
        if len(inst["arrived"]) == len(members):  # the last member: release the ones held
            for cb in inst.pop("held", ()):
                self.net.call_at(self.env.now, cb)

    def _held(self, comm, seq, done):
        """``done`` of a symmetric collective, held until every member has issued it: no member
        can have its result before all contributed (what the vectorized path computes, and
        what keeps a member that never issues it a deadlock on every engine)."""
        def finished():
            inst = self._colls[(comm, seq)]
            if len(inst["arrived"]) < len(inst["members"]):
                inst.setdefault("held", []).append(done)
            else:
                done()
        return finished

    def _send(self, st: _Rank, i: int, done) -> None:
        t = st.table
        dst, tag, size = int(t.comm_dst[i]), int(t.comm_tag[i]), int(t.comm_size[i])
        if not 0 <= dst < self.world:
            raise InputError(f"comm_dst {dst} is not a rank of the workload", source=t.source,
                             field=f"node {int(t.id[i])}")
        key = (st.rank, dst, 0 if tag == MISSING else tag)
        st.waiting[i] = ("send", key)
        if self.replicas is not None and dst not in self._tables:
            raise InputError(f"rank {st.rank} sends to rank {dst} of another replica, which breaks the "
                             "replica symmetry", source=t.source, field=f"node {int(t.id[i])}")
        src_gpu, dst_gpu = (st.rank, dst) if self.gpus is None else (int(self.gpus[st.rank]), int(self.gpus[dst]))
        release = self.sms.hold(st.rank, self.sms.p2p_blocks(src_gpu, dst_gpu, max(size, 0)))
        ev = self.sends.transfer(self.p2p, src_gpu, dst_gpu, max(size, 0))
        sender = (st.rank, i, size)
        ev.callbacks.append(lambda _e: (release(), self._deliver(key, sender), done()))

    def _deliver(self, key: tuple, sender: tuple) -> None:
        """A message landed: it completes a waiting receive, or waits in the mailbox
        (``sender``: rank, node row, bytes; what the deadlock report names if nobody receives it)."""
        if self._recv_wait[key]:
            self._recv_wait[key].popleft()()
        else:
            self.mail[key].append(sender)

    def _recv(self, st: _Rank, i: int, done) -> None:
        t = st.table
        src, tag = int(t.comm_src[i]), int(t.comm_tag[i])
        key = (src, st.rank, 0 if tag == MISSING else tag)
        if self.mail[key]:
            self.mail[key].popleft()
            done()
        else:  # its kernel holds SMs until the message lands
            st.waiting[i] = ("recv", key)
            kernel = Kernel(self.sms, st.rank, done)
            g = (lambda r: r) if self.gpus is None else (lambda r: int(self.gpus[r]))
            kernel.start(self.sms.p2p_blocks(g(src % self.world), g(st.rank), max(int(t.comm_size[i]), 0)))
            self._recv_wait[key].append(kernel)

