"""Replica symmetry: simulate one data-parallel replica and let it stand for all of them.

In a TP x PP x DP job every data-parallel replica runs the same trace, shifted to its
own ranks: the same compute, the same tensor- and pipeline-parallel traffic between its
own GPUs, and its share of the data-parallel collectives, which span all replicas.
:class:`Replicas` states that symmetry: representative ranks ``reps`` and, per replica
*k*, a permutation ``perms[k]`` of all ranks (``perms[k][r]`` plays rank *r*'s role in
replica *k*; ``perms[0]`` is the identity).  The workload runner then walks the
representatives' dependency graphs only:

* a collective on a **local** group (all members are representatives: TP, CP, EP
  groups) runs as one instance per replica: its traffic is put on the network for every
  replica (:class:`Mirrored`), the representatives' timing drives the graph;
* a collective on a **global** group (mapped onto itself by every permutation: the DP
  gradient groups) runs once on all its members; the members that are not
  representatives (shadows) join when their representative does, and the
  representative finishes when the last of them does (members of one node may finish
  at different times when a replica is smaller than a node);
* send/recv pairs must join representatives; their traffic is mirrored too.

Exact when every replica is planned as the representatives are and every copy finishes with
its representative; :mod:`netsim.workload.symmetry` checks both for the run at hand (the plans
before it starts, the timing as it runs) and the runner simulates every rank where either
fails.  Under ``symmetry="approximate"`` a representative's transfer completes when the last of
its copies does instead (the simulated replica paces the slowest one) and the notes report the
largest spread between copies: an approximation with no bound.  Faults that differ per rank
break the symmetry, so the runner simulates every rank then.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import simpy

from netsim.errors import InputError
from netsim.network.base import TransferRecord
from netsim.units import format_time

LOCAL, GLOBAL = "local", "global"


@dataclass(frozen=True)
class Replicas:
    """Representative ranks and the permutations that map them onto every replica.

    >>> import numpy as np
    >>> r = Replicas(np.array([0, 1]), np.array([[0, 1, 2, 3], [2, 3, 0, 1]]))
    >>> r.world, r.count, r.kind((0, 1)), r.kind((0, 2))
    (4, 2, 'local', 'global')
    """

    reps: np.ndarray
    perms: np.ndarray

    def __post_init__(self) -> None:
        perms = np.asarray(self.perms, dtype=np.int64)
        reps = np.unique(np.asarray(self.reps, dtype=np.int64))
        object.__setattr__(self, "perms", perms)
        object.__setattr__(self, "reps", reps)
        if perms.ndim != 2 or perms.shape[0] < 1:
            raise ValueError("perms: expected a (replicas, world) array")
        world = perms.shape[1]
        if not np.array_equal(perms[0], np.arange(world)):
            raise ValueError("perms[0] must be the identity")
        if not (np.sort(perms, axis=1) == np.arange(world)).all():
            raise ValueError("every row of perms must be a permutation of the ranks")
        if reps.size == 0 or reps[0] < 0 or reps[-1] >= world:
            raise ValueError("reps: expected ranks of the workload")
        images = perms[:, reps].ravel()
        if np.unique(images).size != world or images.size != world:
            raise ValueError("the replicas of the representatives must cover every rank exactly once")

    @property
    def world(self) -> int:
        return int(self.perms.shape[1])

    @property
    def count(self) -> int:
        """Number of replicas (the representatives' one included)."""
        return int(self.perms.shape[0])

    def kind(self, members) -> str | None:
        """``"local"`` (all members representatives), ``"global"`` (every replica maps the
        group onto itself) or ``None`` (the symmetry does not hold for this group)."""
        m = np.asarray(members, dtype=np.int64)
        if np.isin(m, self.reps).all():
            return LOCAL
        srt = np.sort(m)
        if all(np.array_equal(np.sort(p[m]), srt) for p in self.perms[1:]):
            return GLOBAL
        return None

    def check_groups(self, groups: dict, source: str = "comm groups") -> None:
        """InputError unless every group is global, or the image of a local group.

        ``groups``: name -> ranks.  A group of another replica must be the image of a
        representatives' group, which is what makes its traffic a mirror."""
        rep_set = set(self.reps.tolist())
        owner = np.empty(self.world, dtype=np.int64)
        for k, p in enumerate(self.perms):
            owner[p[self.reps]] = k
        for name, ranks in groups.items():
            m = np.asarray(sorted(ranks), dtype=np.int64)
            if self.kind(m) is not None:
                continue
            ks = np.unique(owner[m])
            if ks.size == 1:  # inside one replica: its preimage must hold representatives only
                inv = np.argsort(self.perms[int(ks[0])])
                if set(inv[m].tolist()) <= rep_set:
                    continue
            raise InputError(f"group {list(m[:8])}{'...' if m.size > 8 else ''} is neither inside one replica "
                             "nor mapped onto itself by every replica", source=source, field=str(name))

    def expand(self, values: np.ndarray) -> np.ndarray:
        """Per-rank values of the whole workload from the representatives' (in ``reps`` order)."""
        out = np.empty(self.world, dtype=np.asarray(values).dtype)
        out[self.perms[:, self.reps]] = np.asarray(values)[None, :]
        return out


class Mirrored:
    """A network seen through the representatives: every transfer they make is made by
    every replica (``perms[k]`` applied to both ends).  A representative's transfer is
    reported done when its last copy lands; the spread between the first and the last copy
    goes to ``verifier`` (:class:`~netsim.workload.symmetry.Verifier`), which stops an exact
    run where copies finish apart."""

    def __init__(self, net, replicas: Replicas, verifier):
        self.net, self.perms, self.verifier = net, replicas.perms, verifier
        self.transfers = 0
        self._routes: dict = {}  # (src, dst, key) of the representatives -> every copy's routes

    def __getattr__(self, name):
        return getattr(self.net, name)

    def submit(self, src, dst, nbytes, on_done, key=None, routes=None, cap=None) -> None:
        src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
        m, k = src.size, self.perms.shape[0]
        nbytes = np.broadcast_to(np.asarray(nbytes, np.float64), (m,))
        key = None if key is None else np.tile(np.broadcast_to(np.asarray(key), (m,)), k)
        cap = None if cap is None else np.tile(np.broadcast_to(np.asarray(cap, np.float64), (m,)), k)
        first = np.full(m, np.nan)  # earliest copy's finish, per transfer
        left = np.full(m, k)

        def done(idx: np.ndarray, t: float) -> None:
            j = idx % m
            np.subtract.at(left, j, 1)
            j = np.unique(j)
            first[j] = np.fmin(first[j], t)
            ready = j[left[j] == 0]
            if ready.size:
                spread = t - first[ready]
                worst = int(np.argmax(spread))
                self.verifier.check(float(spread[worst]), lambda: (
                    f"the copies of transfer {int(src[ready[worst]])}->{int(dst[ready[worst]])} finished up to "
                    f"{format_time(float(spread[worst]), digits=4, sep=' ')} apart (at "
                    f"{format_time(t, digits=4, sep=' ')} simulated)"))
                on_done(ready, t)

        self.transfers += (k - 1) * m
        csrc, cdst = self.perms[:, src].ravel(), self.perms[:, dst].ravel()
        rkey = (src.tobytes(), dst.tobytes(), None if key is None else key[:m].tobytes(),
                None if routes is None else np.diff(routes[0]).tobytes())
        copies = self._routes.get(rkey)
        if copies is None:
            copies = self._copy_routes(csrc, cdst, key, routes, m, k)
            if len(self._routes) < 4096:
                self._routes[rkey] = copies
        self.net.submit(csrc, cdst, np.tile(nbytes, k), done, key, copies, cap)

    def _copy_routes(self, csrc, cdst, key, given, m: int, k: int):
        """Every copy's routes; where the representatives' ``given`` routes are cut to one hop
        (in-switch reduction: UP to the switch, DOWN from it), every copy's are cut alike
        (replica 0 is the identity: the first ``m`` routes are the representatives' whole ones)."""
        from netsim.collectives.fastpath import cut_routes, hops_of
        from netsim.topology.model import csr_gather

        full = self.net.topo.routes(csrc, cdst, key)
        hop = None if given is None else hops_of(given, csr_gather(*full, np.arange(m)))
        return full if hop is None else cut_routes(*full, np.tile(hop, k))

    def transfer(self, src: int, dst: int, nbytes: float, key: int = 0) -> simpy.Event:
        event = self.net.env.event()
        start = self.net.env.now
        self.submit(np.array([src]), np.array([dst]), np.array([float(nbytes)]),
                    lambda _i, t: event.succeed(TransferRecord(src, dst, float(nbytes), start, t, ())),
                    np.array([key]))
        return event


class RunConflict(Exception):
    """The conflict at which a :class:`LinkGuard` stops its run (the collective's key in ``args[0]``)."""


class LinkGuard:
    """Link reservations of collectives evaluated off the event queue on a flow network.

    A collective may skip the event-driven executor when nothing else crosses its links
    while it runs: then its max-min rates cannot change.  :meth:`hold` reserves the
    links (they must be idle: no draining flow, no live reservation) from the first
    member's arrival to the collective's end (:meth:`release`); any flow submitted onto
    a reserved link in that window marks the holder in :attr:`conflicts`, and the runner
    simulates the workload again with those collectives event-driven.  With ``stop_after``, a
    conflict that completes that set (at the first conflict when it is empty) raises
    :class:`RunConflict`: the run's timing is inexact from the first conflict on, and nothing is
    left for it to find, so the runner stops it and repeats it at once.
    """

    def __init__(self, n_links: int, stop_after: frozenset | None = None):
        self.until = np.full(n_links, -np.inf)
        self.owner = np.full(n_links, -1, dtype=np.int64)
        self.keys: list = []
        self.conflicts: set = set()
        self.stop_after = stop_after

    def mark(self, key) -> None:
        """The collective ``key`` met other traffic off the event queue."""
        self.conflicts.add(key)
        if self.stop_after is not None and self.stop_after <= self.conflicts:
            raise RunConflict(key)

    def idle(self, links: np.ndarray, load: np.ndarray, now: float) -> bool:
        return not (load[links].any() or (self.until[links] > now).any())

    def hold(self, links: np.ndarray, key) -> int:
        self.keys.append(key)
        self.until[links] = np.inf
        self.owner[links] = len(self.keys) - 1
        return len(self.keys) - 1

    def release(self, ticket: int, links: np.ndarray, t: float) -> None:
        mine = links[self.owner[links] == ticket]
        self.until[mine] = t

    def __call__(self, links: np.ndarray, now: float) -> None:
        hit = self.until[links] > now
        if hit.any():
            for o in np.unique(self.owner[links[hit]]).tolist():
                self.mark(self.keys[o])
