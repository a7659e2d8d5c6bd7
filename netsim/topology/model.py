"""The array-based topology model.

A :class:`Topology` is plain data: nodes with a kind, directed links with a
bandwidth (bytes/s), a latency (s), a kind and a width (how many physical links
of the same rate were aggregated into this one), plus a *router* that turns
(src GPU, dst GPU) pairs into link-id paths.  GPUs are addressed by *rank*
(0 .. n_gpus-1); ``topo.gpus[rank]`` is the GPU's node id.

Everything is numpy so 65,536 GPUs and their fabric fit in a few tens of MB.
:meth:`Topology.to_networkx` exists for export and plotting only (networkx is the optional extra
``graph``: ``pip install 'netsim[graph]'``).

Examples
--------
>>> from netsim.topology.builders import nvswitch_domain
>>> t = nvswitch_domain(4, links_per_gpu=2, link_bw=25e9)
>>> t.n_gpus, t.n_links
(4, 8)
>>> t.route(0, 3).tolist()
[0, 7]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections import OrderedDict
from functools import cached_property
from typing import Protocol

import numpy as np

from netsim.limits import MAX_GPUS  # noqa: F401 (re-exported: the GPUs of one topology)
from netsim.topology.facts import TopologyFacts

#: Links in one topology (about 40 bytes each; fat-tree-64k.yaml has 655,360).
MAX_LINKS = 16_000_000

NODE_KINDS: tuple[str, ...] = ("gpu", "nvswitch", "nic", "leaf", "spine", "core", "switch")
LINK_KINDS: tuple[str, ...] = ("nvlink", "pcie", "ib", "ethernet", "link")
#: Scale-out routing policies (:mod:`netsim.topology.policy`).  The default follows the fabric
#: (:data:`FABRICS`): ``ftree`` on InfiniBand, ``ecmp`` on RoCE and on every fixed-route topology.
ROUTINGS: tuple[str, ...] = ("ecmp", "ftree", "adaptive", "spray")
#: Scale-out fabric kinds and the routing each runs by default (:func:`default_routing`).
FABRICS: dict[str, str] = {"infiniband": "ftree", "roce": "ecmp"}


def default_routing(fabric: str | None) -> str:
    """The routing a fabric runs by default: its subnet manager's on InfiniBand, ECMP hashing on RoCE.

    >>> default_routing("infiniband"), default_routing("roce"), default_routing(None)
    ('ftree', 'ecmp', 'ecmp')
    """
    return FABRICS.get(fabric, "ecmp") if fabric is not None else "ecmp"


def node_kind_id(name: str) -> int:
    """Index of a node kind in :data:`NODE_KINDS` (``ValueError`` if unknown)."""
    return NODE_KINDS.index(name)


def link_kind_id(name: str) -> int:
    """Index of a link kind in :data:`LINK_KINDS` (``ValueError`` if unknown)."""
    return LINK_KINDS.index(name)


#: Fewest pairs :meth:`Topology.routes` looks for repeated pairs among (routing each distinct pair once).
DEDUP_PAIRS = 1024
#: Bytes of paths a topology remembers (:meth:`Topology.routes`: the same pairs and keys are routed
#: once; a route set larger than an eighth of this is not kept).
ROUTE_MEMO_BYTES = 64 << 20


class _Memo(OrderedDict):
    """An ordered dict that counts the bytes it holds (``bytes``)."""

    bytes = 0


class Router(Protocol):
    """Turns rank pairs into paths: the only routing contract the network uses."""

    def routes(
        self, src: np.ndarray, dst: np.ndarray, key: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(indptr, links)``: pair *i* uses ``links[indptr[i]:indptr[i+1]]``.

        ``key`` is an optional per-pair integer mixed into the ECMP hash (e.g. a
        channel id) so that flows of one pair can spread over equal-cost paths.
        A pair with ``src == dst`` gets an empty path.  Routers with a true
        ``load_aware`` attribute also take ``load=`` (see :meth:`Topology.routes`); routers with a
        true ``keyless`` attribute never read ``key`` (their routes depend on the pair alone).
        """
        ...


@dataclass(frozen=True, eq=False)
class Topology:
    """Nodes, directed links and a router.  Build with :mod:`netsim.topology.builders`."""

    name: str
    node_kind: np.ndarray  # int8 index into NODE_KINDS
    gpus: np.ndarray  # int32 node id of each rank
    link_src: np.ndarray  # int32 node ids
    link_dst: np.ndarray
    link_bw: np.ndarray  # float64 bytes/s, aggregate over link_width physical links
    link_lat: np.ndarray  # float64 seconds
    link_kind: np.ndarray  # int8 index into LINK_KINDS
    link_width: np.ndarray  # int16 physical links aggregated
    router: Router
    #: What the builder derived (structure, line rates, hardware); see :mod:`netsim.topology.facts`.
    facts: TopologyFacts = field(default_factory=TopologyFacts)
    #: Scale-out routing policy, one of :data:`ROUTINGS`; set it with
    #: :func:`netsim.topology.policy.with_routing` (which also sets the router and ``link_class``).
    routing: str = "ecmp"
    #: Under ``spray``: the representative link id of every link's class of interchangeable
    #: fabric links (itself for links outside any class); ``None`` for other policies.
    link_class: np.ndarray | None = None

    def __post_init__(self):
        if self.routing not in ROUTINGS:
            raise ValueError(f"routing must be one of {', '.join(ROUTINGS)}, got {self.routing!r}")
        if (self.routing == "spray") != (self.link_class is not None):
            raise ValueError("link_class is set exactly when routing is spray (use with_routing)")

    # ----------------------------------------------------------------- sizes
    @property
    def n_gpus(self) -> int:
        """Number of GPUs (ranks)."""
        return int(self.gpus.size)

    @property
    def n_nodes(self) -> int:
        """Number of nodes of every kind."""
        return int(self.node_kind.size)

    @property
    def n_links(self) -> int:
        """Number of directed links."""
        return int(self.link_src.size)

    @property
    def gpus_per_node(self) -> int:
        """GPUs per scale-up domain (server); the whole topology if it has no scale-out."""
        return int(self.facts.gpus_per_node or self.n_gpus)

    def nbytes(self) -> int:
        """Memory held by the arrays (router tables included when they report it)."""
        arrays = [self.node_kind, self.gpus, self.link_src, self.link_dst, self.link_bw,
                  self.link_lat, self.link_kind, self.link_width]
        arrays += [self.link_class] if self.link_class is not None else []
        extra = getattr(self.router, "nbytes", lambda: 0)()
        return int(sum(a.nbytes for a in arrays) + extra)

    # --------------------------------------------------------------- routing
    def routes(
        self, src: np.ndarray, dst: np.ndarray, key: np.ndarray | None = None,
        load: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Vectorized routes for rank pairs; see :meth:`Router.routes`.

        ``load`` (int array over link ids: flows now crossing each link) is read only when
        :attr:`routing` is ``adaptive``: pairs are then placed in the order given, each on the
        least-loaded equal-cost fabric path, counting the pairs placed before it (see
        :mod:`netsim.topology.policy`); ``None`` means an idle fabric.  ``load`` is never modified.
        """
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        if src.shape != dst.shape:
            raise ValueError("src and dst must have the same shape")
        n = self.n_gpus
        if src.size and (src.min() < 0 or dst.min() < 0 or src.max() >= n or dst.max() >= n):
            raise ValueError(f"rank out of range [0, {n})")
        if key is not None:
            key = np.broadcast_to(np.asarray(key, dtype=np.int64), src.shape)
        if self.routing == "adaptive":  # paths follow the live load: never remembered
            return self._routed(src, dst, key, load)
        memo = self._route_memo
        name = (src.tobytes(), dst.tobytes(), None if key is None else key.tobytes())
        hit = memo.get(name)
        if hit is not None:  # the same pairs and keys routed before (a workload repeats its collectives)
            memo.move_to_end(name)
            return hit[0].copy(), hit[1].copy()
        ip, lk = self._routed(src, dst, key, load)
        size = ip.nbytes + lk.nbytes
        if size <= ROUTE_MEMO_BYTES // 8:
            memo[name] = (ip.copy(), lk.copy())
            memo.bytes += size
            while memo.bytes > ROUTE_MEMO_BYTES:
                old_ip, old_lk = memo.popitem(last=False)[1]
                memo.bytes -= old_ip.nbytes + old_lk.nbytes
        return ip, lk

    @cached_property
    def _route_memo(self) -> "OrderedDict":
        """Routes already computed, most recent last (:meth:`routes`; at most
        :data:`ROUTE_MEMO_BYTES` of paths)."""
        return _Memo()

    def _routed(self, src, dst, key, load):
        n = self.n_gpus
        if src.size >= DEDUP_PAIRS and self.routing != "adaptive" \
                and (key is None or getattr(self.router, "keyless", False)):
            # the route depends on the pair alone: route each distinct pair once (channels and
            # repeats of a pair are common: a collective's channels, a step's copies)
            first, which = equal_groups(src * n + dst)
            if 2 * first.size <= src.size:
                ip, lk = self._routes(src[first], dst[first], None, load)
                return csr_gather(ip, lk, which)
        return self._routes(src, dst, key, load)

    def _routes(self, src, dst, key, load):
        """:meth:`routes` on checked input, every pair routed."""
        if self.routing in ("ecmp", "ftree"):  # static: the router's own tables (fault detours included)
            return self.router.routes(src, dst, key)
        if not getattr(self.router, "load_aware", False):
            from netsim.errors import InputError
            raise InputError(f"{self.routing} routing needs the fat-tree router; this topology's router "
                             f"({type(self.router).__name__}) is not it: routing around failed links is "
                             "static ECMP only", field="routing")
        if self.routing == "spray":
            return self.router.routes(src, dst, key)
        if load is not None:
            load = np.asarray(load)
            if load.shape != (self.n_links,):
                raise ValueError(f"load must have one entry per link ({self.n_links}), got shape {load.shape}")
        return self.router.routes(src, dst, key, load=load)

    def route(self, src: int, dst: int, key: int = 0) -> np.ndarray:
        """Link ids from rank ``src`` to rank ``dst``."""
        indptr, links = self.routes(np.array([src]), np.array([dst]), np.array([key]))
        return links[indptr[0]:indptr[1]]

    def path_latency(self, indptr: np.ndarray, links: np.ndarray) -> np.ndarray:
        """Sum of link latencies per path of a CSR route set."""
        return csr_sum(indptr, self.link_lat[links])

    def path_bottleneck(self, indptr: np.ndarray, links: np.ndarray) -> np.ndarray:
        """Smallest :attr:`capacity` per path (``inf`` for an empty path): a lone flow's rate."""
        return csr_min(indptr, self.capacity[links])

    # ------------------------------------------------- sharing under a policy
    @cached_property
    def capacity(self) -> np.ndarray:
        """Bytes/s per link id that the network models share among the flows routed over it.

        ``link_bw`` itself (the same array, read-only by contract) for ``ecmp`` and
        ``adaptive``.  Under ``spray``, a class representative's entry is the sum of
        ``link_bw`` over its class (the class acts as one link), every other link keeps its
        own ``link_bw`` (class members other than the representative carry no flow).
        Computed once per Topology object; never modify ``link_bw`` in place.

        >>> from netsim.topology.builders import nvswitch_domain
        >>> t = nvswitch_domain(4, links_per_gpu=2, link_bw=25e9)
        >>> t.capacity is t.link_bw
        True
        """
        if self.link_class is None:
            return self.link_bw
        sums = np.bincount(self.link_class, weights=self.link_bw, minlength=self.n_links)
        rep = self.link_class == np.arange(self.n_links)
        return np.where(rep, sums, self.link_bw)

    @cached_property
    def _spread_share(self) -> np.ndarray:
        """Each link's share of its class representative's additive counters (spray only)."""
        cls = self.link_class
        size = np.bincount(cls, minlength=self.n_links)[cls].astype(np.float64)
        total = self.capacity[cls]
        return np.divide(self.link_bw, total, out=1.0 / size, where=total > 0)

    def spread(self, values: np.ndarray, additive: bool = True) -> np.ndarray:
        """Map per-link counters computed on the links flows use back onto every physical link.

        ``values`` has the link ids on its last axis.  For ``ecmp`` and ``adaptive`` it is
        returned unchanged (the same object).  Under ``spray``, every member of a class gets
        its representative's value: times its share ``link_bw / class capacity`` (``1 /
        class size`` on a healthy fabric) when ``additive`` (bytes, byte-seconds: the class
        total is conserved), or as is when not (quantities equal on every member: busy
        seconds, utilization, flow counts).  Entries of non-representative members in
        ``values`` are ignored (no flow takes them under spray).  The result is float when
        ``additive``.

        >>> from netsim.topology.builders import nvswitch_domain
        >>> t = nvswitch_domain(2, links_per_gpu=1, link_bw=1e9)
        >>> t.spread(np.array([5.0, 0.0, 0.0, 3.0])).tolist()
        [5.0, 0.0, 0.0, 3.0]
        """
        if self.link_class is None:
            return values
        picked = np.take(np.asarray(values), self.link_class, axis=-1)
        return picked * self._spread_share if additive else picked

    # ------------------------------------------------------------ describing
    def kind_of_node(self, node: int) -> str:
        """Kind name of a node."""
        return NODE_KINDS[int(self.node_kind[node])]

    def node_name(self, node: int) -> str:
        """A readable name like ``gpu17`` or ``leaf3`` (ordinal within its kind)."""
        kind = int(self.node_kind[node])
        ordinal = int(np.count_nonzero(self.node_kind[:node] == kind))
        return f"{NODE_KINDS[kind]}{ordinal}"

    def link_name(self, link: int) -> str:
        """``src->dst`` names of a link."""
        return f"{self.node_name(int(self.link_src[link]))}->{self.node_name(int(self.link_dst[link]))}"

    def to_networkx(self):
        """Export as a ``networkx.MultiDiGraph`` (for plotting/export, never on a hot path)."""
        try:
            import networkx as nx
        except ImportError:
            raise ImportError("Topology.to_networkx() needs networkx, an optional dependency: "
                              "pip install 'netsim[graph]'") from None
        g = nx.MultiDiGraph(name=self.name)
        for i, k in enumerate(self.node_kind.tolist()):
            g.add_node(i, kind=NODE_KINDS[k])
        for i in range(self.n_links):
            g.add_edge(int(self.link_src[i]), int(self.link_dst[i]), key=i,
                       bw=float(self.link_bw[i]), latency=float(self.link_lat[i]),
                       kind=LINK_KINDS[int(self.link_kind[i])], width=int(self.link_width[i]))
        return g


# ---------------------------------------------------------------- CSR helpers
def csr_sum(indptr: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per-row sums of a CSR value array (empty rows give 0).

    >>> csr_sum(np.array([0, 2, 2, 3]), np.array([1.0, 2.0, 5.0])).tolist()
    [3.0, 0.0, 5.0]
    """
    c = np.concatenate(([0.0], np.cumsum(values, dtype=np.float64)))
    return c[indptr[1:]] - c[indptr[:-1]]


def csr_min(indptr: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per-row minimum of a CSR value array (empty rows give ``inf``).

    >>> csr_min(np.array([0, 2, 2, 3]), np.array([4.0, 2.0, 5.0])).tolist()
    [2.0, inf, 5.0]
    """
    n = indptr.size - 1
    out = np.full(n, np.inf)
    nonempty = indptr[1:] > indptr[:-1]
    if values.size and nonempty.any():
        starts = indptr[:-1][nonempty]
        out[nonempty] = np.minimum.reduceat(values, starts)
    return out


def csr_gather(indptr: np.ndarray, data: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Select ``rows`` of a CSR structure, vectorized.

    >>> ip, d = csr_gather(np.array([0, 2, 3]), np.array([7, 8, 9]), np.array([1, 0, 1]))
    >>> ip.tolist(), d.tolist()
    ([0, 1, 3, 4], [9, 7, 8, 9])
    """
    rows = np.asarray(rows, dtype=np.int64)
    lengths = indptr[rows + 1] - indptr[rows]
    new_indptr = np.zeros(rows.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_indptr[1:])
    total = int(new_indptr[-1])
    if total == 0:
        return new_indptr, data[:0].copy()
    # each output element's source: its row's start there, shifted by its place in the output
    return new_indptr, data[np.repeat(indptr[rows] - new_indptr[:-1], lengths) + np.arange(total)]


def csr_merge(n: int, lengths: np.ndarray, parts, offsets=None) -> tuple[np.ndarray, np.ndarray]:
    """Scatter CSR pieces (each for a subset of rows) into one CSR in row order.

    ``offsets[i]`` (scalar or per-row array) shifts piece *i* inside its rows, so that
    pieces can also be concatenated row-wise.

    >>> csr_merge(3, np.array([1, 2, 1]), [(np.array([1]), np.array([0, 2]), np.array([8, 9])),
    ...                                    (np.array([0, 2]), np.array([0, 1, 2]), np.array([5, 7]))])[1].tolist()
    [5, 8, 9, 7]
    """
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    out = np.empty(int(indptr[-1]), dtype=np.int64)
    for i, (idx, ip, lk) in enumerate(parts):
        counts = np.diff(ip)
        rows = np.repeat(idx, counts)
        within = np.arange(lk.size) - np.repeat(ip[:-1], counts)
        shift = 0 if offsets is None else np.broadcast_to(offsets[i], idx.shape)[np.repeat(np.arange(idx.size), counts)]
        out[indptr[rows] + within + shift] = lk
    return indptr, out


def csr_from_columns(columns: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Build CSR from a padded ``(rows, width)`` matrix and its validity mask.

    >>> cols = np.array([[1, 2, -1], [3, -1, -1]]); ok = cols >= 0
    >>> [a.tolist() for a in csr_from_columns(cols, ok)]
    [[0, 2, 3], [1, 2, 3]]
    """
    indptr = np.zeros(columns.shape[0] + 1, dtype=np.int64)
    np.cumsum(valid.sum(axis=1), out=indptr[1:])
    return indptr, columns[valid]


def equal_groups(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Groups of equal entries of a 1-D array: ``(one index per group, each entry's group)``.
    Like ``np.unique(values, return_index=True, return_inverse=True)[1:]`` with groups in sorted
    order, but one unstable sort (a group's representative is any of its entries, the same one
    for the same input).

    >>> rep, which = equal_groups(np.array([5, 3, 5, 3, 9]))
    >>> which.tolist(), sorted(np.array([5, 3, 5, 3, 9])[rep].tolist())
    ([1, 0, 1, 0, 2], [3, 5, 9])
    """
    order = np.argsort(values)
    v = values[order]
    new = np.empty(v.size, dtype=bool)
    new[:1] = True
    np.not_equal(v[1:], v[:-1], out=new[1:])
    which = np.empty(v.size, dtype=np.int64)
    which[order] = np.cumsum(new) - 1
    return order[new], which


def mix_hash(*parts: np.ndarray) -> np.ndarray:
    """Deterministic 64-bit hash of integer arrays (splitmix64 finaliser), vectorized.

    Used for ECMP: the same flow always takes the same path; different flows
    spread evenly over equal-cost paths.
    """
    h = np.full(np.broadcast(*parts).shape, 0x9E3779B97F4A7C15, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for p in parts:
            h ^= np.asarray(p).astype(np.uint64)
            h += np.uint64(0x9E3779B97F4A7C15)
            h ^= h >> np.uint64(30)
            h *= np.uint64(0xBF58476D1CE4E5B9)
            h ^= h >> np.uint64(27)
            h *= np.uint64(0x94D049BB133111EB)
            h ^= h >> np.uint64(31)
    return h


def node_names(topo: Topology) -> list[str]:
    """Every node's name, ``<kind><ordinal within kind>`` (as :meth:`Topology.node_name`), vectorized."""
    kinds = topo.node_kind.astype(np.int64)
    ordinal = np.zeros(kinds.size, dtype=np.int64)
    for k in np.unique(kinds):
        idx = np.flatnonzero(kinds == k)
        ordinal[idx] = np.arange(idx.size)
    return [f"{NODE_KINDS[k]}{o}" for k, o in zip(kinds.tolist(), ordinal.tolist())]


def link_tier(topo: Topology) -> np.ndarray:
    """Every link's class as a bound is named: nvlink, pcie, nic (a NIC's fabric port) or the
    switch tiers it joins (``leaf-spine``)."""
    kind = np.array(LINK_KINDS, dtype=object)[topo.link_kind.astype(np.int64)]
    nk = np.array(NODE_KINDS, dtype=object)[topo.node_kind.astype(np.int64)]
    s, d = nk[topo.link_src], nk[topo.link_dst]
    out = kind.copy()
    fabric = (kind != "nvlink") & (kind != "pcie")
    nic = fabric & ((s == "nic") | (d == "nic") | (s == "gpu") | (d == "gpu"))
    out[nic] = "nic"
    sw = fabric & ~nic
    out[sw] = np.array([f"{a}-{b}" for a, b in zip(s[sw], d[sw])], dtype=object)
    return out
