"""Replica symmetry found in a Chakra file set (``netsim run --workload P``, ``--symmetry auto``).

The generator states its symmetry (:func:`~netsim.workload.generate.llm.llm_replicas`); a file
set has to prove it.  :func:`find_replicas` takes the per-rank signatures of
:mod:`netsim.chakra.canonical` and the comm groups and returns a
:class:`~netsim.workload.replicas.Replicas` only when all of this holds:

1. **A decomposition.**  Some group families (groups with the same size and member spacing,
   e.g. all TP groups) are taken as *global*, the others as *local*.  Ranks joined by a
   send/recv or by a local group must be in one replica: the connected components of those
   edges are the replicas, and they must all have the same size ``c`` (``K = world / c >= 2``).
   Candidates are tried from the most replicas down; the first that passes 2-4 is used.
2. **The permutations.**  Replicas are ordered by their lowest rank and replica 0 (the one
   holding rank 0) is the representatives'.  ``perms[k]`` maps the i-th lowest rank of replica
   ``j`` to the i-th lowest of replica ``(j + k) mod K``: order-preserving on every replica, so
   a local group's image has its members in the same order (its rings and trees are the image
   of the representatives').
3. **The groups.**  Every permutation maps every global group onto itself
   (:meth:`Replicas.check_groups`, the generator path's condition).
4. **The traces.**  For every representative ``r`` and replica ``k``, rank ``perms[k][r]``'s
   trace equals ``r``'s with ranks renamed by ``perms[k]``: the same body (every node,
   dependency and attribute but peers and group names), peers ``perms[k][peer]``, and in each
   group slot the same communicator for a global group, or the group whose members are
   ``perms[k]`` of the representative's for a local one.

What this proves is what ``Replicas`` assumes, so a run with it is exact wherever replica runs
are (``docs/workloads.md``, "Replica symmetry").  Anything short of it refuses, and the note
says which check failed and where (ranks, node, field, values).
"""

from __future__ import annotations

import itertools

import numpy as np

from netsim.workload.replicas import Replicas

#: At most this many group families are combined exhaustively (2**6 candidate splits); beyond
#: it only "the largest j families global" are tried.
EXHAUSTIVE_FAMILIES = 6


class _Groups:
    """The groups the traces name: identity -> members, and families of equal shape."""

    def __init__(self, scan, groups):
        self.world = scan.world
        self.members: dict[str, np.ndarray] = {}
        self.ident: dict[str, str] = {}  # pg_name as written -> identity
        for sig, source in zip(scan.sigs, scan.sources):
            for name in sig.pg_names:
                if name in self.ident:
                    continue
                ident = groups.identity(name)
                self.ident[name] = ident
                if ident not in self.members:
                    self.members[ident] = np.asarray(groups.resolve(name, where=source), dtype=np.int64)
        self.families: dict[tuple, list[str]] = {}
        for ident, m in self.members.items():
            if 1 < m.size < self.world:  # singletons and the world are global under any decomposition
                self.families.setdefault((m.size, np.diff(m).tobytes()), []).append(ident)


def _p2p_edges(scan) -> tuple[np.ndarray, np.ndarray]:
    """(rank, peer) of every send/recv peer in range (others are the runner's error to report)."""
    a, b = [], []
    for r in range(scan.world):
        s = scan.sig(r)
        peers = np.concatenate([s.src, s.dst])
        peers = peers[(peers >= 0) & (peers < scan.world) & (peers != r)]
        if peers.size:
            a.append(np.full(peers.size, r, dtype=np.int64))
            b.append(peers)
    if not a:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(a), np.concatenate(b)


def _components(world: int, edges: tuple, local: list[np.ndarray]) -> np.ndarray:
    """Connected component of every rank (undirected edges ``edges`` plus each member list of
    ``local`` chained), numbered 0, 1, ... in the order of each component's lowest rank.

    >>> _components(5, (np.array([3]), np.array([1])), [np.array([4, 2])]).tolist()
    [0, 1, 2, 1, 2]
    """
    a, b = [edges[0]], [edges[1]]
    for m in local:
        a.append(m[:-1])
        b.append(m[1:])
    a, b = np.concatenate(a).astype(np.int64), np.concatenate(b).astype(np.int64)
    label = np.arange(world, dtype=np.int64)
    while True:  # hook each edge's ends onto the smaller label, then jump pointers to the roots
        low = np.minimum(label[a], label[b])
        new = label.copy()
        np.minimum.at(new, label[a], low)
        np.minimum.at(new, label[b], low)
        while True:
            jumped = new[new]
            if np.array_equal(jumped, new):
                break
            new = jumped
        new = new[label]
        if np.array_equal(new, label):
            break
        label = new
    return np.unique(label, return_inverse=True)[1].reshape(-1)


def _splits(fam: dict) -> list[tuple]:
    """Candidate sets of global families: every subset, or the largest-j families beyond the cap."""
    # larger groups first, then wider spacing: with TP = DP in size, the DP groups span replicas
    keys = sorted(fam, key=lambda k: (-k[0], -int(np.frombuffer(k[1], np.int64).max(initial=0)), k[1]))
    if len(keys) <= EXHAUSTIVE_FAMILIES:
        return [c for n in range(len(keys) + 1) for c in itertools.combinations(keys, n)]
    return [tuple(keys[:j]) for j in range(len(keys) + 1)]


def _decompose(world: int, labels: np.ndarray) -> np.ndarray | None:
    """(K, c) ranks of each replica sorted, replicas by lowest rank; None unless K >= 2 equal parts."""
    _, inverse, counts = np.unique(labels, return_inverse=True, return_counts=True)
    if counts.size < 2 or (counts != counts[0]).any():
        return None
    order = np.lexsort((np.arange(world), inverse))  # by component, then rank
    comp = order.reshape(counts.size, counts[0])
    return comp[np.argsort(comp[:, 0])]


def _perms(comp: np.ndarray) -> np.ndarray:
    k, _ = comp.shape
    perms = np.empty((k, comp.size), dtype=np.int64)
    for s in range(k):
        perms[s, comp.ravel()] = np.roll(comp, -s, axis=0).ravel()
    return perms


class Finder:
    """Search state of :func:`find_replicas` (``note`` says what was found or why not)."""

    def __init__(self, scan, groups):
        self.scan, self.g = scan, _Groups(scan, groups)
        self.failures: list[str] = []

    def run(self) -> Replicas | None:
        scan, g = self.scan, self.g
        edges = _p2p_edges(scan)
        tried = {}
        for split in _splits(g.families):
            local = [g.members[i] for key, ids in g.families.items() if key not in split for i in ids]
            comp = _decompose(scan.world, _components(scan.world, edges, local))
            if comp is not None:
                tried.setdefault(comp.shape[0], []).append((comp, split))
        if not tried:
            self.failures.append("the ranks do not split into two or more equal replicas (ranks joined by a "
                                 "send/recv or a group form one replica, whichever groups are taken to span "
                                 "replicas)")
            return None
        for k in sorted(tried, reverse=True):
            for comp, split in tried[k]:
                rep = self._check(comp, {i for key in split for i in g.families[key]})
                if rep is not None:
                    return rep
        return None

    def _check(self, comp: np.ndarray, global_ids: set) -> Replicas | None:
        k, c = comp.shape
        perms = _perms(comp)
        rep = Replicas(comp[0], perms)
        for ident in sorted(global_ids):
            if rep.kind(self.g.members[ident]) != "global":
                self.failures.append(f"{k} replicas of {c} ranks: group {ident!r} spans replicas but is not "
                                     "mapped onto itself by every replica")
                return None
        bad = self._traces(comp, perms, global_ids)
        if bad:  # the groups allowed this one: its difference is the reason worth reporting
            self.failures.insert(sum(f.startswith("*") for f in self.failures), f"*{k} replicas of {c} ranks: {bad}")
            return None
        return rep

    def _traces(self, comp: np.ndarray, perms: np.ndarray, global_ids: set) -> str | None:
        """None when every rank's trace is its representative's renamed, else the first difference
        (and how many ranks differ)."""
        scan = self.scan
        image: dict[tuple, bytes] = {}
        first, count = None, 0
        for s in range(1, comp.shape[0]):
            p = perms[s]
            for r, q in zip(comp[0].tolist(), comp[s].tolist()):
                a, b = scan.sig(r), scan.sig(q)
                if a.body != b.body and (a.fast or b.fast):  # bytes differ: compare the decoded traces
                    a, b = scan.full_sig(r), scan.full_sig(q)
                why = self._differ(a, b, p, image, global_ids, s)
                if why is not None:
                    count += 1
                    if first is None:
                        first = (r, q, s, why)
        if first is None:
            return None
        r, q, s, why = first
        more = f"; {count} of {scan.world - comp.shape[1]} ranks differ from their representative" if count > 1 \
            else "; it is the only rank that differs"
        detail = _first_difference(scan, r, q, perms[s]) if why == "body" else why
        return f"rank {q}'s trace is not rank {r}'s renamed to replica {s} ({detail}){more}"

    def _differ(self, a, b, p, image, global_ids, s) -> str | None:
        if a.body != b.body:
            return "body"
        n = p.size
        if any(v.size and (v.min() < 0 or v.max() >= n) for v in (a.src, a.dst)) or \
                not (np.array_equal(p[a.src], b.src) and np.array_equal(p[a.dst], b.dst)):
            return "send/recv peers are not the representative's renamed"
        g = self.g
        for na, nb in zip(a.pg_names, b.pg_names):
            ia, ib = g.ident[na], g.ident[nb]
            if ia in global_ids or g.members[ia].size == g.world:
                if ia != ib:
                    return f"group {nb!r} where the representative uses {na!r}, which spans the replicas"
                continue
            want = image.get((ia, s))
            if want is None:
                if g.members[ib].tobytes() != np.sort(p[g.members[ia]]).tobytes():
                    return f"group {nb!r} is not the image of the representative's group {na!r}"
                if image.setdefault(("of", ib, s), ia) != ia:
                    return f"group {nb!r} is the image of two of the representatives' groups"
                want = image[(ia, s)] = ib
            if ib != want:  # one communicator's image is one communicator
                return f"group {nb!r} where the other ranks renamed from {na!r} use {want!r}"
        return None

    def note(self, rep: Replicas | None) -> str:
        scan = self.scan
        files = f"{scan.world} ranks, {scan.distinct_files} distinct files, " \
                f"{scan.canonical_classes()} distinct up to renaming"
        if rep is not None:
            return (f"file symmetry: {files}; {rep.count} replicas of {rep.reps.size} ranks, each rank's trace "
                    f"is its representative's with ranks and groups renamed; simulated ranks {_span(rep.reps)}")
        why = self.failures[0].lstrip("*") if self.failures else "no candidate"
        return f"file symmetry not found ({files}): {why}; simulated every rank"


def _span(ranks: np.ndarray) -> str:
    r = ranks.tolist()
    return ", ".join(map(str, r)) if len(r) <= 6 else f"{', '.join(map(str, r[:4]))}, ... ({len(r)} ranks)"


def _first_difference(scan, r: int, q: int, perm: np.ndarray) -> str:
    """Where rank q's decoded trace first differs from rank r's (both read again)."""
    from netsim.chakra.model import MISSING

    ta, tb = scan.tables([r])[r], scan.tables([q])[q]
    if len(ta) != len(tb):
        return f"{len(tb)} nodes vs {len(ta)}"
    for name in ("type", "duration_micros", "comm_type", "comm_size", "comm_tag", "comm_priority",
                 "num_ops", "tensor_size", "is_cpu_op", "op_kind", "gemm_m", "gemm_n", "pg", "involved_dim", "data_ptr",
                 "ctrl_ptr"):
        a, b = np.asarray(getattr(ta, name)), np.asarray(getattr(tb, name))
        if a.shape != b.shape:
            return f"{name}: {b.size} values vs {a.size}"
        diff = np.flatnonzero(a != b)
        if diff.size:
            i = int(diff[0])
            row = min(i, len(tb) - 1)
            va, vb = int(a[i]), int(b[i])
            shown = (lambda v: "absent" if v == MISSING else str(v))
            return (f"node {int(tb.id[row])} {tb.name[row]!r}: {name} {shown(vb)} vs {shown(va)}; "
                    f"{diff.size} node(s) differ in {name}")
    for i, (x, y) in enumerate(zip(ta.name, tb.name)):
        if x != y:
            return f"node {int(tb.id[i])}: name {y!r} vs {x!r}"
    from netsim.chakra.canonical import dep_rows
    for name, x, y in zip(("ids", "data_deps", "ctrl_deps")[-2:], dep_rows(ta)[-2:], dep_rows(tb)[-2:]):
        if not np.array_equal(x, y):
            return f"{name} differ"
    return "metadata or attribute lists differ"


def find_replicas(scan, groups) -> tuple[Replicas | None, str]:
    """(Replicas or None, the run's note) for a :class:`~netsim.chakra.canonical.WorkloadScan`
    and its :class:`~netsim.chakra.groups.CommGroups`; see the module docstring."""
    finder = Finder(scan, groups)
    rep = finder.run()
    return rep, finder.note(rep)
