"""Collective instances of a workload: matching across ranks and how each one is executed.

Members of a communicator meet in per-communicator issue order; type and size must
agree.  Communicators are told apart by identity (their group name), not by members:
two groups with the same members are two communicators, as in NCCL.  An instance is
executed in one of two ways:

* **off the event queue** (:class:`FixedRun`): a symmetric collective (every member's
  finish depends on every member's arrival: all-reduce, all-gather, reduce-scatter,
  all-to-all, barrier) whose transfer durations cannot depend on timing is evaluated in
  one vectorized max-plus pass when its last member arrives
  (:func:`~netsim.collectives.fastpath.run_fixed`).  Always so on the analytical
  network.  On the flow network only when nothing else crosses its links while it runs:
  its links must be idle when the first member arrives and are reserved until it ends
  (:class:`~netsim.workload.replicas.LinkGuard`); a flow that touches a reserved link
  marks the instance's :func:`family` (its communicator's size and member strides), and the
  runner simulates the workload again with every collective of that family event-driven,
  until no reservation is violated;
* **event-driven** (:class:`~netsim.collectives.executor.CollectiveRun`): transfers start
  as both their ends arrive and share links max-min fairly with everything else.

Members are job ranks; ``gpus[rank]`` is the topology GPU a rank runs on (its placement,
:mod:`netsim.topology.placement`): schedules are planned on the members' GPUs and every
transfer reaches the network between GPUs.

With :class:`~netsim.workload.replicas.Replicas`, local-group instances carry every
replica's copy (the evaluated schedule is the group schedule stacked once per replica,
so copies that share links contend exactly), and global-group instances let shadows
arrive with their representatives.
"""

from __future__ import annotations


import numpy as np

from netsim.collectives import chain, direct, ring
from netsim.collectives.compose import on_groups
from netsim.collectives.executor import CollectiveRun
from netsim.collectives.fastpath import fixed_patterns, run_fixed
from netsim.errors import InputError
from netsim.topology.model import Topology
from netsim.chakra.schema import CommType
from netsim.units import format_time
from netsim.workload.replicas import GLOBAL, LOCAL, LinkGuard, Mirrored
from netsim.workload.symmetry import SKEW_TOL_S, Verifier


def _t(seconds: float) -> str:
    """A time in a note: 4 significant digits in a unit that suits it (``6.4 ms``)."""
    return format_time(seconds, digits=4, sep=" ")


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


#: Chakra collective -> nccl-tests op.
_NCCL_OPS = {CommType.ALL_REDUCE: "all_reduce", CommType.ALL_GATHER: "all_gather",
             CommType.REDUCE_SCATTER: "reduce_scatter", CommType.REDUCE_SCATTER_BLOCK: "reduce_scatter",
             CommType.ALL_TO_ALL: "alltoall", CommType.BROADCAST: "broadcast", CommType.REDUCE: "reduce"}

#: Collectives where every member's finish depends on every member's arrival.
SYMMETRIC = {CommType.ALL_REDUCE, CommType.ALL_GATHER, CommType.REDUCE_SCATTER, CommType.REDUCE_SCATTER_BLOCK,
             CommType.ALL_TO_ALL, CommType.BARRIER}


class NcclSchedules:
    """Collectives of a workload as NCCL would run them: ``--algo auto`` and protocol shaping
    (:func:`netsim.collectives.plan.plan`).  Plans are cached per (type, size, group shape):
    groups laid out alike on the topology (every TP group, every DP group...) share one."""

    def __init__(self, topo: Topology):
        self.topo = topo
        self.g = topo.gpus_per_node
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
            sched = self._cache[key] = plan(self.topo, ranks, op, float(size)).schedule
        return sched


def family(members: tuple) -> tuple:
    """The family of a communicator: its size and the rank strides between its members.  The
    communicators of one parallel dimension (every data-parallel group, every tensor-parallel
    group) form one family; when one of them meets other traffic off the event queue, the others
    do too in a symmetric job, so the runner's repeat runs the whole family event-driven.

    >>> family((3, 11, 19, 27)) == family((4, 12, 20, 28)) != family((0, 1, 2, 3))
    True
    """
    return ("family", len(members), tuple(np.diff(np.asarray(members, dtype=np.int64)).tolist()))


def families_of(tables, groups) -> frozenset:
    """The families (:func:`family`) of every symmetric collective the node ``tables`` issue on
    ``groups``' communicators: what a run can find in conflict off the event queue."""
    from netsim.chakra.schema import NodeType
    out, seen = set(), set()
    for t in {id(t): t for t in tables}.values():
        coll = (t.type == NodeType.COMM_COLL_NODE) & np.isin(t.comm_type, [int(c) for c in SYMMETRIC]) & (t.pg >= 0)
        for pg in np.unique(t.pg[coll]).tolist():
            name = t.pg_names[pg]
            if name in seen:
                continue
            seen.add(name)
            try:
                out.add(family(groups.resolve(name)))
            except InputError:  # reported where the collective is issued
                continue
    return frozenset(out)


class FixedRun:
    """A symmetric collective evaluated in one vectorized pass once its last member arrives.

    Exact when durations are fixed: the same max-plus recurrence the event-driven executor
    follows, started from each member's arrival; no member can finish before the last one
    arrives, since each needs data from all.  ``copies`` > 1: the schedule is stacked once
    per replica (``rankmap`` holds every copy's ranks) and every copy starts as the
    representatives did.  Attributes mirror :class:`CollectiveRun` for the recorder."""

    def __init__(self, net, sched, rankmap: np.ndarray, n: int, on_done, prepared, release=None,
                 inexact=None, verifier=None):
        self.net, self.sched, self.rankmap, self.on_done = net, sched, rankmap, on_done
        self.prepared, self.release, self.inexact = prepared, release, inexact
        self.verifier = verifier  # copies (replicas) must finish with the representatives
        self.start = np.full(n, np.nan)
        self.t_done = np.full(n, np.nan)
        self.left = n

    def arrive(self, local: int) -> None:
        now = self.net.env.now
        self.start[local] = now
        self.left -= 1
        if self.left:
            return
        n = self.start.size
        start = np.tile(self.start, self.rankmap.size // n)
        full, prepared, counts = self.prepared
        res = run_fixed(self.net, full, self.rankmap, start, prepared, count=False, strict=False)
        if not res["exact"] and self.inexact is not None:
            self.inexact()  # contended and out of lockstep: the runner repeats it event-driven
        fin = res["finish"][:n]
        if self.verifier is not None and res["finish"].size > n:
            copies = res["finish"].reshape(-1, n)  # one row per replica
            spread = np.ptp(copies, axis=0)
            worst = int(np.argmax(spread))
            self.verifier.check(float(spread[worst]), lambda: (
                f"the replicas' copies of a {self.sched.algorithm} {self.sched.op} finished up to "
                f"{_t(float(spread[worst]))} apart (at {_t(float(copies[:, worst].max()))} simulated)"))
        self.net.add_tally(counts)
        self.t_done = np.maximum(fin, now) if fin.size else np.full(n, now)
        if self.release is not None:
            self.release(float(self.t_done.max()))
        for t in np.unique(self.t_done).tolist():
            idx = np.flatnonzero(self.t_done == t)
            self.net.call_at(t, lambda idx=idx, t=t: self.on_done(idx, t))


class Instances:
    """Every collective instance of one workload run, keyed by (communicator, issue order);
    ``items[key]["members"]`` holds its ranks."""

    def __init__(self, env, net, schedule_fn, replicas=None, event_only=frozenset(), fast: bool = True,
                 gpus: np.ndarray | None = None, stop_after: frozenset | None = None, strict: bool = True):
        self.env, self.net, self.schedule_fn, self.replicas = env, net, schedule_fn, replicas
        # topology GPU of every job rank; replicas are shifted copies only on the packed placement
        self.gpus = None if gpus is None else np.asarray(gpus, dtype=np.int64)
        if replicas is not None and self.gpus is not None and not np.array_equal(self.gpus, np.arange(self.gpus.size)):
            raise ValueError("replica symmetry needs the packed placement (rank r on GPU r)")
        # families (see family()) of collectives that shared links while evaluated off the event
        # queue in an earlier run: every instance of them runs event-driven
        self.event_only, self.fast = event_only, fast
        self.items: dict[tuple, dict] = {}
        # exact replica runs (strict) stop where copies finish apart (netsim.workload.symmetry)
        self.verifier = Verifier(strict=strict and replicas is not None)
        self.mirrored = Mirrored(net, replicas, self.verifier) if replicas is not None else None
        self.guard = None
        if net.live_sharing:  # rates depend on what runs beside: guard the links (link_load, watch)
            self.guard = net.watch = LinkGuard(net.topo.n_links, stop_after)
        self._prepared: dict = {}  # (schedule id, members) -> (schedule, patterns, counts, links) or None
        self._kinds: dict = {}  # members -> (kind, rank -> local index)
        self.stats = {"fixed": 0, "event": 0}
        #: rank -> whether its only unfinished node is the collective it is in (set by the runner)
        self.last_node = lambda rank: False
        #: members of a global collective that was their rank's last node: rank -> (representative, finish)
        self.tail: dict[int, tuple[int, float]] = {}

    def replica_notes(self, simulated: int) -> list[str]:
        """What the run's notes say of replica symmetry: ``simulated`` ranks stood for the world,
        exactly or (where copies of a transfer or collective finished apart) approximately."""
        r = self.replicas
        skew = self.verifier.max_skew_s
        if self.verifier.strict:
            apart = int(np.count_nonzero(self.tail_delta(r.world)))
            return [f"replica symmetry: simulated {simulated} of {r.world} ranks ({r.count} replicas), exact: every "
                    "replica's plans and sends are the representatives' and every copy finished with its "
                    "representative" + (f" (or, for {apart} ranks, their last collective at its own time, with "
                                         "nothing after it)" if apart else "") + "; ops rows are the representatives'"]
        notes = [f"replica symmetry (approximate): simulated {simulated} of {r.world} ranks ({r.count} replicas); "
                 "ops rows are the representatives'"]
        if skew > SKEW_TOL_S:
            notes.append(f"replica symmetry is approximate: replicas' copies of a transfer or a collective finished "
                         f"up to {_t(skew)} apart; the representatives waited for the slowest copy "
                         "(not a bound: --symmetry auto gives the exact run)")
        return notes

    def tail_delta(self, world: int) -> np.ndarray:
        """Per rank: how much later (or earlier) than its representative it finished its last node, a
        global collective whose members ended apart (0 elsewhere; see :attr:`tail`)."""
        delta = np.zeros(world)
        for rank, (rep, t) in self.tail.items():
            delta[rank] = t - self.tail[rep][1]
        return delta

    def placed(self, ranks) -> np.ndarray:
        """Topology GPUs of job ``ranks``."""
        ranks = np.asarray(ranks, dtype=np.int64)
        return ranks if self.gpus is None else self.gpus[ranks]

    def kind(self, members: tuple) -> tuple:
        hit = self._kinds.get(members)
        if hit is None:
            kind = None if self.replicas is None else self.replicas.kind(members)
            if self.replicas is not None and kind is None:
                raise InputError(f"group {list(members[:8])} breaks the replica symmetry",
                                 source="replicas", field="members")
            hit = self._kinds[members] = (kind, {r: i for i, r in enumerate(members)})
        return hit

    def join(self, rank: int, members: tuple, seq: int, ctype: int, size: int, where: tuple, done,
             group, comm=None) -> tuple:
        """Rank ``rank`` arrives at instance ``seq`` of communicator ``comm`` (default: the one
        of ``members``), whose ranks are ``members``; ``done()`` when it finishes."""
        key = (members if comm is None else comm, seq)
        inst = self.items.get(key)
        kind, local_of = self.kind(members)
        if inst is None:
            inst = self._create(key, members, ctype, size, where, group, kind)
        elif (inst["type"], inst["size"]) != (ctype, size):
            r0, n0 = inst["first"]
            raise InputError(
                f"mismatched collectives: rank {r0} node {n0} issued {CommType(inst['type']).name} of "
                f"{inst['size']} B as #{seq} on group {list(members)}, rank {rank} node {where[1]} "
                f"issued {CommType(ctype).name} of {size} B", source=where[0], field="comm_type/comm_size")
        local = local_of[rank]
        inst["done"][local] = done
        inst["arrived"].add(rank)
        orbit = [local]
        if kind == GLOBAL:  # shadows arrive with their representative, which waits for them all
            orbit += [local_of[int(p[rank])] for p in self.replicas.perms[1:]]
        for loc in orbit:
            inst["rep_of"][loc] = local
        inst["left"][local] = len(orbit)
        for loc in orbit:
            inst["arrived"].add(members[loc])
        if inst["waiting"] is None:
            for loc in orbit:
                inst["run"].arrive(loc)
            return key
        # in-switch (NVLS): the switch reduces or multicasts once every member has contributed, so
        # every member starts with the last one (the steps tie an UP transfer to its sender only)
        inst["waiting"] += orbit
        if len(inst["arrived"]) == len(members):
            for loc in inst["waiting"]:
                inst["run"].arrive(loc)
        return key

    def _create(self, key, members, ctype, size, where, group, kind) -> dict:
        gpus = tuple(self.placed(members).tolist())
        named = getattr(self.schedule_fn, "named", None)  # schedule by node name (MoE dispatch / combine)
        sched = named(ctype, max(size, 0), gpus, where[3]) if named is not None and len(where) > 3 \
            else self.schedule_fn(ctype, max(size, 0), gpus)
        inst = {"type": ctype, "size": size, "first": (where[2], where[1]), "done": {}, "arrived": set(),
                "group": group, "rep_of": {}, "left": {}, "t_first": {}, "members": members,
                "blocks": getattr(sched, "blocks", None),  # its kernel's thread blocks per member GPU
                "waiting": [] if getattr(sched, "in_switch", False) else None}  # members not yet started
        on_done = lambda loc, t: self._done(inst, loc, t)  # noqa: E731
        fixed = None
        if self.fast and ctype in SYMMETRIC and family(members) not in self.event_only:
            fixed = self._fixed(sched, members, kind, on_done, key)
        if fixed is not None:
            inst["run"] = fixed
            self.stats["fixed"] += 1
        else:
            net = self.mirrored if kind == LOCAL else self.net
            inst["run"] = CollectiveRun(self.env, net, sched, self.placed(members), deferred=True,
                                        on_rank_done=on_done)
            self.stats["event"] += 1
        self.items[key] = inst
        return inst

    def _fixed(self, sched, members: tuple, kind, on_done, key) -> FixedRun | None:
        pkey = (id(sched), members)
        if pkey not in self._prepared:
            self._prepared[pkey] = self._prepare(sched, members, kind)
        prep = self._prepared[pkey]
        if prep is None:
            return None
        rankmap, prepared, links = prep
        release = inexact = None
        if self.guard is not None:
            fam = family(members)
            inexact = lambda: self.guard.mark(fam)  # noqa: E731
            if not self.guard.idle(links, self.net.link_load, self.env.now):
                return None
            ticket = self.guard.hold(links, fam)
            release = lambda t: self.guard.release(ticket, links, t)  # noqa: E731
        return FixedRun(self.net, sched, rankmap, len(members), on_done, prepared, release, inexact, self.verifier)

    def _prepare(self, sched, members: tuple, kind):
        ranks = np.asarray(members, dtype=np.int64)
        k = 1
        if kind == LOCAL and self.replicas.count > 1:
            k, n = self.replicas.count, ranks.size
            full = on_groups(sched.op, sched.algorithm, k * n, sched.nbytes, sched, np.arange(k * n).reshape(k, n))
            rankmap = self.replicas.perms[:, ranks].ravel()
        else:
            full, rankmap = sched, ranks
        rankmap = self.placed(rankmap)
        prepared = fixed_patterns(self.net, full, rankmap, parts=k)
        if prepared is None:
            return None
        return rankmap, (full, prepared, prepared.counts), prepared.counts[0]

    def _done(self, inst: dict, local: np.ndarray, t: float) -> None:
        """Members finished at ``t``: a representative is done when its whole orbit is, or, at its rank's
        last node (:attr:`last_node`), when it is itself (its shadows' own finishes go to :attr:`tail`)."""
        rep_of, left, first = inst["rep_of"], inst["left"], inst["t_first"]
        members, tails = inst["members"], inst.setdefault("tails", {})
        for loc in local.tolist():
            rep = rep_of[loc]
            if rep not in first:
                first[rep] = t
                # its rank's last node (decided at the orbit's first finish: every other node of the rank
                # ended before it): each member's finish is its own, nothing follows to keep in step
                if self.verifier.strict and left[rep] > 1 and self.last_node(members[rep]):
                    tails[rep] = True
            left[rep] -= 1
            if tails.get(rep):
                self.tail[members[loc]] = (members[rep], t)
                if loc == rep:
                    inst["done"].pop(rep)()
                continue
            if left[rep] == 0:
                if t - first[rep] > 0.0:
                    self.verifier.check(t - first[rep], lambda: (
                        f"the members of a {CommType(inst['type']).name} on group {list(inst['members'][:8])} that "
                        f"one representative stands for finished up to {_t(t - first[rep])} apart (at "
                        f"{_t(t)} simulated)"))
                inst["done"].pop(rep)()
