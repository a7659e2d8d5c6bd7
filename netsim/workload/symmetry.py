"""Proof that one data-parallel replica may stand for all of them, for the run at hand.

A replica run (:mod:`netsim.workload.replicas`) walks the representatives' graphs and puts every
replica's traffic on the fabric: local collectives and sends as copies of the representatives'
(the representatives' schedule renamed onto each replica's GPUs, routed on that replica's real
routes), global collectives (the data-parallel ones) in full, with the other members joining when
their representative does.  It equals the run of every rank exactly when, by induction over
simulated time, every rank of replica *k* does what its representative does at the same instant.
Two things make that so, and this module checks both:

1. **Before the run, the plans** (:func:`prove_plans`).  For every local collective of the
   representatives and every replica *k*, the schedule the full run would plan on replica *k*'s
   GPUs (the same schedule function, on ``perms[k]`` of the members, in member order) is the
   representatives' schedule: same algorithm, steps, bytes, channels, keys, hops, protocol
   framing, caps and thread blocks.  For every send and receive, the image pair's NCCL p2p setup
   (whether it leaves through a NIC, its parts, their keys, wire bytes and caps, its thread blocks)
   is the representative pair's.  Nothing else a rank does depends on where it runs: compute and
   SM counts are the topology's GPU preset, the same for every GPU.  This catches what timing
   alone cannot see: a group that straddles two nodes or racks in one replica and not in another
   is planned differently (NVLink rings against rings over the NICs).
2. **During the run, the timing** (:class:`Verifier`).  Every copy of a mirrored transfer, every
   copy of a local collective evaluated off the event queue, and every member of a global
   collective finishes at the same instant as its representative (to :data:`SKEW_TOL_S`).  This
   is where routes and contention are checked, under the routing policy in force: on a fabric
   that treats the replicas alike (an automorphism of the part the run uses that maps each
   replica's routes onto the representatives'), copies finish together; where it does not (ECMP
   hashes one replica's flows onto a shared link and not another's, a tree's members finish at
   different depths), a copy finishes apart and the check fails at that instant.  One case is
   exact all the same: a global collective that is its ranks' last node (every other node of the
   rank ended before its first member finished).  Nothing follows it, so its members, simulated in
   full, keep their own finish times (:class:`~netsim.workload.collectives.Instances` ``tail``).

Adaptive routing places flows in the order they start, and a replica run submits every copy of a
transfer at once where the full run submits them rank by rank: the order, and so the routes, can
differ without any timing difference showing, so replica runs on ``adaptive`` routing are not
proven (:func:`unproven_policy`).

A failed check raises :class:`SymmetryBroken`; the runner then simulates every rank, and the
run's notes say why (``replica symmetry not exact for this run: ...``).
"""

from __future__ import annotations

import numpy as np

from netsim.chakra.schema import NodeType
from netsim.errors import InputError

#: Largest spread (s) between copies' finish times that still counts as "together".  Copies of a
#: symmetric run are evaluated by the same arithmetic on the same numbers; this only absorbs the
#: last bits of summation order.
SKEW_TOL_S = 1e-12

#: Symmetry modes of a replica run: ``exact`` (proven or every rank simulated), ``approximate``
#: (the representatives wait for the slowest copy; the notes report the spread, not a bound).
MODES = ("exact", "approximate")


class SymmetryBroken(Exception):
    """A replica run found that its replicas do not run alike (the message says where)."""


def unproven_policy(topo) -> str | None:
    """Why ``topo``'s routing keeps a replica run from being proven, or None."""
    if getattr(topo, "routing", "ecmp") == "adaptive":
        return ("adaptive routing places flows in the order they start, which a replica run does not "
                "reproduce")
    return None


def same_schedule(a, b) -> bool:
    """Whether two schedules move the same bytes the same way (group-local ranks)."""
    if a is b:
        return True
    if (a.op, a.algorithm, a.nranks, a.nbytes, a.blocks, len(a.phases)) != \
            (b.op, b.algorithm, b.nranks, b.nbytes, b.blocks, len(b.phases)):
        return False
    if getattr(a, "in_switch", False) != getattr(b, "in_switch", False):
        return False
    for pa, pb in zip(a.phases, b.phases):
        if pa.repeat != pb.repeat:
            return False
        sa, sb = pa.step, pb.step
        if (sa.overhead_s, sa.delay_s, sa.reduce, sa.wire) != (sb.overhead_s, sb.delay_s, sb.reduce, sb.wire):
            return False
        for x, y in ((sa.src, sb.src), (sa.dst, sb.dst), (sa.nbytes, sb.nbytes), (sa.key, sb.key),
                     (sa.hop, sb.hop), (sa.rate_cap, sb.rate_cap)):
            if (x is None) != (y is None) or (x is not None and not np.array_equal(x, y)):
                return False
    return True


def _g(gpus, rank: int) -> int:
    return int(rank) if gpus is None else int(gpus[int(rank)])


def prove_plans(replicas, tables: dict, groups, schedule_fn, sends, gpus=None) -> str | None:
    """None when every replica's plans and sends are the representatives' (see the module
    docstring, 1.), else the first difference as a sentence.

    ``tables``: rank -> NodeTable of the representatives; ``groups``: the run's
    :class:`~netsim.chakra.groups.CommGroups`; ``schedule_fn`` and ``sends`` the run's
    (:class:`~netsim.workload.collectives.NcclSchedules`, :class:`~netsim.workload.sends.Sends`);
    ``gpus``: topology GPU of every job rank (None: rank r on GPU r).
    """
    from netsim.workload.replicas import LOCAL

    perms = replicas.perms
    named = getattr(schedule_fn, "named", None)
    seen_coll, seen_p2p = set(), set()
    for rank, t in sorted(tables.items()):
        typ = t.type
        for i in np.flatnonzero(typ == NodeType.COMM_COLL_NODE).tolist():
            pg = int(t.pg[i])
            name = t.pg_names[pg] if pg >= 0 else None
            ct, size = int(t.comm_type[i]), max(int(t.comm_size[i]), 0)
            node = t.name[i] if named is not None else None
            key = (name, ct, size, node)
            if key in seen_coll:
                continue
            seen_coll.add(key)
            try:
                members = np.asarray(groups.resolve(name), dtype=np.int64)
            except InputError:
                continue  # the runner reports it where the collective is issued
            if replicas.kind(members) != LOCAL:
                continue
            why = _coll_images(perms, members, ct, size, node, schedule_fn, named, gpus)
            if why is not None:
                return why
        for kind in (NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE):
            peer = t.comm_dst if kind == NodeType.COMM_SEND_NODE else t.comm_src
            for i in np.flatnonzero(typ == kind).tolist():
                other, size = int(peer[i]), max(int(t.comm_size[i]), 0)
                pair = (rank, other) if kind == NodeType.COMM_SEND_NODE else (other, rank)
                if (pair, size) in seen_p2p or not (0 <= other < replicas.world):
                    continue
                seen_p2p.add((pair, size))
                why = _p2p_images(perms, pair, size, sends, gpus)
                if why is not None:
                    return why
    return None


def _coll_images(perms, members, ct, size, node, schedule_fn, named, gpus) -> str | None:
    def plan(ranks):
        g = tuple(_g(gpus, r) for r in ranks.tolist())
        return named(ct, size, g, node) if named is not None else schedule_fn(ct, size, g)

    base = plan(members)
    for k in range(1, perms.shape[0]):
        image = perms[k][members]
        if image.size > 1 and not (np.diff(image) > 0).all():
            return (f"replica {k} renames group {members[:8].tolist()} out of member order, so its copy is "
                    "not the group the full run plans")
        other = plan(image)
        if not same_schedule(base, other):
            where = lambda s: f"{s.algorithm} ({s.n_steps} steps, {s.blocks} blocks)"  # noqa: E731
            return (f"the collective of group {members[:8].tolist()} (GPUs "
                    f"{[_g(gpus, r) for r in members[:8].tolist()]}) is planned as {where(base)} but its copy "
                    f"in replica {k} (GPUs {[_g(gpus, r) for r in image[:8].tolist()]}) as {where(other)}")
    return None


def _p2p_images(perms, pair, size, sends, gpus) -> str | None:
    a, b = pair

    def setup(x, y):
        gx, gy = _g(gpus, x), _g(gpus, y)
        parts = sends.parts(gx, gy, size)
        split = sends.split(gx, gy, size) if parts else None
        return parts, sends.blocks(gx, gy, size), split

    base = setup(a, b)
    for k in range(1, perms.shape[0]):
        x, y = int(perms[k][a]), int(perms[k][b])
        other = setup(x, y)
        same = base[:2] == other[:2] and (base[2] is None or all(np.array_equal(u, v)
                                                                   for u, v in zip(base[2], other[2])))
        if not same:
            return (f"the send {a}->{b} (GPUs {_g(gpus, a)}->{_g(gpus, b)}) runs on {base[0]} network "
                    f"channel(s) but its copy in replica {k} ({x}->{y}, GPUs {_g(gpus, x)}->{_g(gpus, y)}) on "
                    f"{other[0]}")
    return None


class Verifier:
    """The run-time half of the proof (see the module docstring, 2.): ``check(spread, what)`` raises
    :class:`SymmetryBroken` when copies finished more than :data:`SKEW_TOL_S` apart (``strict``),
    and keeps the largest spread seen either way (``max_skew_s``, for the notes of approximate runs)."""

    def __init__(self, strict: bool):
        self.strict = strict
        self.max_skew_s = 0.0

    def check(self, spread: float, what) -> None:
        if spread > self.max_skew_s:
            self.max_skew_s = spread
        if self.strict and spread > SKEW_TOL_S:
            raise SymmetryBroken(what() if callable(what) else what)
