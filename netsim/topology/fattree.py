"""Fat-tree (folded Clos) InfiniBand fabrics of 2 and 3 tiers, with vectorized routing.

The fabric is an extended generalized fat-tree (XGFT, as in SimGrid's
``FAT_TREE`` cluster): tier *i* switches have ``m_i`` children, every level
*i-1* element has ``w_i`` parents, and ``p_i`` parallel links join a child to
each parent (aggregated here into one link of ``p_i`` times the port rate).
The user describes tiers the way switches are cabled (down ports, up ports,
port rate, radix); :func:`fat_tree` derives ``m``, ``w`` and ``p``.

Hosts are NICs: one per GPU, several per GPU or one per several GPUs behind PCIe switches
(:mod:`netsim.topology.hostio`).  A NIC's *position* under the leaves decides the
wiring: without rail optimisation a node's NICs sit side by side on one leaf
(a top-of-rack design); with it, NIC *i* of every node of a scalable unit goes
to the leaf of rail *i* (rails follow NICs, not GPUs), and the leaves of one rail are
adjacent, so that a spine pod holds one rail of several scalable units (rail-aligned pods).

Routing is computed from coordinates: go up from the source NIC to the lowest
common ancestor tier, choosing each parent by the fabric's policy (InfiniBand: by the
destination, as OpenSM's fat-tree engine does; RoCE: an ECMP hash of ``(src, dst, key, tier)``),
then down the unique path to the destination.  A GPU with several
NICs picks one per transfer by its key (:meth:`~netsim.topology.hostio.NicLayout.local_nic`).
GPUs of the same node talk over the node's own scale-up network, or, with
``intra_node="nic"`` (pure-RDMA kernels), through their NICs and the fabric (a NIC shared by
both GPUs loops the transfer back).  The
``adaptive`` and ``spray`` policies change only the parent choice; see
:mod:`netsim.topology.policy`.  With ``planes`` P > 1 the fabric is P such trees side by side
(multi-plane and rail-only fabrics, :mod:`netsim.topology.planes`): a NIC's position is
``plane × span + its position in the plane``, groups are numbered plane by plane
(:func:`group_index`), and every count of :class:`Level` is over all planes.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace

import numpy as np

from netsim.topology.cabling import cabled_tiers, fat_tree_facts
from netsim.topology.facts import INTRA_NODE_ROUTES
from netsim.topology.hostio import NicLayout, host_links, up_down_columns
from netsim.topology.model import (FABRICS, NODE_KINDS, Topology, csr_from_columns, csr_merge, default_routing,
                                   link_kind_id, mix_hash, node_kind_id)
from netsim.topology.planes import check_planes, in_plane_ranks, needs_relay
from netsim.topology.policy import adaptive_pick, with_routing


@dataclass(frozen=True)
class Tier:
    """One switch tier of a fat-tree.

    Attributes
    ----------
    name: tier name; ``leaf``, ``spine`` and ``core`` are node kinds, other names map to ``switch``.
    down: ports facing the tier below (NICs for the leaf tier).
    up: ports facing the tier above (0 for the top tier).
    up_bw: bytes/s of each up port (the tier above's down ports run at this rate).
    latency: seconds to traverse one switch of this tier.
    radix: total ports per switch, checked against ``down + up`` when given.
    parallel: links from one child to each of its parents; derived when ``None``.
    oversubscription: down:up capacity ratio; when given, only the up ports it needs at ``up_bw``
        each are cabled (:func:`~netsim.topology.cabling.cabled_tier`), so fewer switches sit above.
    model: the switch model, for the bill of materials (:mod:`netsim.topology.bom`).
    """

    name: str
    down: int
    up: int = 0
    up_bw: float = 50e9
    latency: float = 200e-9
    radix: int | None = None
    parallel: int | None = None
    oversubscription: float | None = None
    model: str | None = None


@dataclass(frozen=True)
class Level:
    """One XGFT level of a fat-tree (:func:`derive_levels`): fan-out, fan-in, parallel links and counts."""

    m: int  # children per switch
    w: int  # parents per child
    p: int  # parallel links child->parent
    M: int  # host positions under one group of this level
    W: int  # switches per group (product of w)
    N: int  # groups
    S: int  # switches = N * W


def rail_positions(n_nodes: int, g: int, per_leaf: int, rail: bool) -> tuple[np.ndarray, int]:
    """Position of every NIC under the leaves (``g``: NICs per node), and the number of position slots."""
    ranks = np.arange(n_nodes * g, dtype=np.int64)
    if not rail:
        return ranks, int(ranks.size)
    node, local = ranks // g, ranks % g
    n_su = -(-n_nodes // per_leaf)
    pos = ((local * n_su) + node // per_leaf) * per_leaf + node % per_leaf
    return pos, g * n_su * per_leaf


def derive_levels(tiers: list[Tier], slots: int) -> list[Level]:
    """XGFT parameters per tier; raises ``ValueError`` naming the tier when it cannot be wired."""
    for t in tiers:
        if t.radix is not None and t.down + t.up > t.radix:
            raise ValueError(f"tier {t.name!r}: down {t.down} + up {t.up} ports exceed radix {t.radix}")
    first = tiers[0]
    levels = [Level(first.down, 1, 1, first.down, 1, -(-slots // first.down), -(-slots // first.down))]
    for i, tier in enumerate(tiers[1:], start=1):
        child, below = tiers[i - 1], levels[-1]
        top = i == len(tiers) - 1
        if top:
            m = below.N
            p = tier.parallel or _largest_divisor(child.up, tier.down // m if m else 0)
            if p < 1 or m * p > tier.down:
                raise ValueError(
                    f"tier {tier.name!r}: {tier.down} down ports cannot reach the {m} "
                    f"{child.name} groups below; use a larger radix or add a tier")
        else:
            p = tier.parallel or 1
            m = tier.down // p
        if child.up < p or child.up % p:
            raise ValueError(f"tier {child.name!r}: {child.up} up ports cannot be split into "
                             f"groups of {p} parallel links to tier {tier.name!r}")
        w = child.up // p
        M = below.M * m
        N = -(-slots // M)
        levels.append(Level(m, w, p, M, below.W * w, N, N * below.W * w))
    if levels[-1].N != 1:
        raise ValueError(f"the top tier {tiers[-1].name!r} leaves {levels[-1].N} disconnected groups; "
                         "add a tier or more ports")
    return levels


def _largest_divisor(n: int, limit: int) -> int:
    return max((d for d in range(1, min(n, limit) + 1) if n % d == 0), default=0)


def plane_levels(tiers: list[Tier], n_nodes: int, nics: int, planes: int, rail: bool):
    """Positions of every NIC, the levels counted over all planes, and the positions per plane
    (``None`` for one plane): see :mod:`netsim.topology.planes`."""
    if planes == 1:
        pos, slots = rail_positions(n_nodes, nics, tiers[0].down, rail)
        return pos, derive_levels(tiers, slots), None
    plane, rank, per_node = in_plane_ranks(n_nodes, nics, planes)
    pos, slots = rail_positions(n_nodes, per_node, tiers[0].down, rail)
    levels = derive_levels(tiers, slots)
    span = levels[-1].M
    return plane * span + pos[rank], [replace(lv, N=lv.N * planes, S=lv.S * planes) for lv in levels], span


def group_index(p: np.ndarray, M: int, per_plane: int, span: int | None) -> np.ndarray:
    """Index of the group of ``M`` positions holding position ``p``; with planes (``span``
    positions and ``per_plane`` groups in each) groups are numbered plane by plane."""
    if span is None:
        return p // M
    return (p // span) * per_plane + (p % span) // M


class FatTreeRouter:
    """Coordinate-based routes in a :func:`fat_tree` (see the module docstring).

    ``policy`` is the scale-out routing (:mod:`netsim.topology.policy`); change it with
    :meth:`with_policy` (or :func:`~netsim.topology.policy.with_routing` on the topology).
    """

    #: :meth:`routes` takes ``load`` (used under the ``adaptive`` policy).
    load_aware = True

    def __init__(self, node: Topology, n_nodes: int, pos: np.ndarray, levels: list[Level],
                 link_base: dict[str, int], level_base: list[int], node_links: int, pxn: bool = False,
                 policy: str = "ecmp", layout: NicLayout | None = None, intra_node: str = "nvlink",
                 planes: int = 1, span: int | None = None):
        self.node, self.g, self.n_nodes, self.pxn = node, node.n_gpus, n_nodes, pxn
        self.pos, self.levels = pos, levels  # pos: per NIC id
        self.planes, self.span = planes, span  # span: positions per plane (None: one plane)
        self.base, self.level_base, self.node_links = link_base, level_base, node_links
        self.H = n_nodes * self.g
        self.layout = layout or NicLayout(self.g)
        self.NN = n_nodes * self.layout.nics
        self.intra_node = intra_node
        self.policy = policy

    def with_policy(self, policy: str) -> "FatTreeRouter":
        """A router like this one (sharing its tables) that routes by ``policy``."""
        other = copy.copy(self)
        other.policy = policy
        return other

    @property
    def keyless(self) -> bool:
        """Routes depend on the pair alone (see :meth:`Router.routes
        <netsim.topology.model.Router.routes>`): destination-digit (``ftree``) or sprayed fabric
        choices, one NIC per GPU, and a scale-up network with one path per pair."""
        return (self.policy in ("ftree", "spray") and (self.layout.switches == 0 or self.layout.nics_per_gpu == 1)
                and bool(getattr(self.node.router, "keyless", False)))

    def spray_classes(self, n_links: int) -> np.ndarray:
        """Representative link id of every link's spray class (see :mod:`netsim.topology.policy`)."""
        cls = np.arange(n_links, dtype=np.int64)
        for i in range(2, len(self.levels) + 1):
            lv, below, base = self.levels[i - 1], self.levels[i - 2], self.level_base[i - 2]
            n, Wi = below.S * lv.w, below.W * lv.w
            rep = (np.arange(n, dtype=np.int64) // Wi) * Wi
            cls[base:base + n] = base + rep
            cls[base + n:base + 2 * n] = base + n + rep
        return cls

    def nbytes(self) -> int:
        """Memory held by the router (positions)."""
        return int(self.pos.nbytes)

    def nic(self, rank: np.ndarray, key) -> np.ndarray:
        """Global NIC id that rank ``rank``'s transfer with ``key`` uses."""
        rank = np.asarray(rank, dtype=np.int64)
        if self.layout.switches == 0:
            return rank
        return (rank // self.g) * self.layout.nics + self.layout.local_nic(rank % self.g, key)

    def lca_level(self, src: np.ndarray, dst: np.ndarray, key=0) -> np.ndarray:
        """Tier (1 = leaf) of the lowest common ancestor of two ranks' NICs (chosen by ``key``)."""
        return self._lca(self.pos[self.nic(src, key)], self.pos[self.nic(dst, key)])

    def _group(self, p: np.ndarray, i: int) -> np.ndarray:
        """Group (numbered over all planes) of level ``i`` (0: the leaves) holding position ``p``."""
        lv = self.levels[i]
        return group_index(p, lv.M, lv.N // self.planes, self.span)

    def _lca(self, ps: np.ndarray, pd: np.ndarray) -> np.ndarray:
        k = np.full(ps.shape, len(self.levels), dtype=np.int64)
        for i in range(len(self.levels), 0, -1):
            same = self._group(ps, i - 1) == self._group(pd, i - 1)
            k[same] = i
        return k

    def routes(self, src: np.ndarray, dst: np.ndarray, key: np.ndarray | None = None,
               load: np.ndarray | None = None):
        """See :meth:`netsim.topology.model.Router.routes`; ``load``: see :meth:`Topology.routes
        <netsim.topology.model.Topology.routes>` (read under the ``adaptive`` policy only)."""
        key = np.zeros_like(src) if key is None else key
        same_node = (src // self.g) == (dst // self.g)
        inter = ~same_node
        lengths = np.zeros(src.size, dtype=np.int64)
        parts = {}
        if self.intra_node == "nic" and (same_node & (src != dst)).any():
            via = same_node & (src != dst)
            idx = np.flatnonzero(via)
            ip, lk = self._fabric_routes(src[idx], dst[idx], key[idx], load)
            parts["rdma"] = (idx, ip, lk)
            lengths[idx] = np.diff(ip)
            same_node = same_node & ~via
        if same_node.any():
            idx = np.flatnonzero(same_node)
            ip, lk = self._node_routes(src[idx], dst[idx], key[idx])
            parts["node"] = (idx, ip, lk)
            lengths[idx] = np.diff(ip)
        if inter.any():
            idx = np.flatnonzero(inter)
            ip, lk = self._inter_node(src[idx], dst[idx], key[idx], load)
            parts["fabric"] = (idx, ip, lk)
            lengths[idx] = np.diff(ip)
        return csr_merge(src.size, lengths, parts.values())

    def _inter_node(self, s: np.ndarray, d: np.ndarray, key: np.ndarray, load=None):
        """Fabric routes; with PXN, first hop over NVLink to the GPU on the destination's rail."""
        if not self.pxn:
            return self._fabric_routes(s, d, key, load)
        sl, dl = s % self.g, d % self.g
        shared = self.layout.nic_group(sl) == self.layout.nic_group(dl)  # s can use d's rail itself
        relay = (s // self.g) * self.g + np.where(shared, sl, dl)
        ip1, lk1 = self._node_routes(s, relay, key)  # NVLink (empty when relay == s)
        ip2, lk2 = self._fabric_routes(relay, d, key, load)
        l1, l2 = np.diff(ip1), np.diff(ip2)
        rows = np.arange(s.size)
        return csr_merge(s.size, l1 + l2, [(rows, ip1, lk1), (rows, ip2, lk2)], offsets=[0, l1])

    def _node_routes(self, s: np.ndarray, d: np.ndarray, key: np.ndarray):
        """Routes between GPUs of one node over its scale-up network."""
        ip, lk = self.node.routes(s % self.g, d % self.g, key)
        return ip, lk + np.repeat((s // self.g) * self.node_links, np.diff(ip))

    def _fabric_routes(self, s: np.ndarray, d: np.ndarray, key: np.ndarray, load=None):
        ns, nd = self.nic(s, key), self.nic(d, key)
        ps, pd = self.pos[ns], self.pos[nd]
        if self.span is not None and ((ps // self.span) != (pd // self.span)).any():
            raise ValueError("a fabric route between two planes: planes meet only inside a node (PXN relay)")
        k = self._lca(ps, pd)
        h = len(self.levels)
        up_cols, down_cols, valid = [], [], []
        B = np.zeros(s.size, dtype=np.int64)
        for i in range(2, h + 1):
            lv, below = self.levels[i - 1], self.levels[i - 2]
            cs = self._group(ps, i - 2) * below.W + B
            cd = self._group(pd, i - 2) * below.W + B
            base = self.level_base[i - 2]
            bi = self._branches(lv.w, s, d, key, i, k >= i, base + cs * lv.w, base + below.S * lv.w + cd * lv.w,
                                load, (pd if self.span is None else pd % self.span) // below.W)
            up_cols.append(base + cs * lv.w + bi)
            down_cols.append(base + below.S * lv.w + cd * lv.w + bi)
            valid.append(k >= i)
            B = B * lv.w + bi
        host_up, host_down = up_down_columns(self.layout, self.base, self.H, self.NN, s, d, ns, nd)
        cols = host_up + up_cols + down_cols[::-1] + host_down
        ok_all, fabric = np.ones(s.size, dtype=bool), ns != nd  # one NIC: loop back inside it
        oks = ([ok_all] * (len(host_up) - 1) + [fabric] + [v & fabric for v in valid]
               + [v & fabric for v in valid[::-1]] + [fabric] + [ok_all] * (len(host_down) - 1))
        return csr_from_columns(np.stack(cols, axis=1), np.stack(oks, axis=1))

    def _branches(self, w, s, d, key, i, uses, up0, down0, load, digits) -> np.ndarray:
        """Branch per transfer at tier ``i`` (``uses``: transfers that cross it; blocks at ``up0``/``down0``;
        ``digits``: the destination position over the parents per group below, for ``ftree``)."""
        if self.policy == "spray":
            return np.zeros(s.size, dtype=np.int64)
        if self.policy == "ftree":  # D-mod-K: the destination's next digit picks the parent
            return digits % w
        bi = (mix_hash(s, d, key, np.int64(i)) % np.uint64(w)).astype(np.int64)
        if self.policy != "adaptive" or w == 1 or not uses.any():
            return bi
        rows = np.flatnonzero(uses)
        cand = np.arange(w, dtype=np.int64)
        u, dn = up0[rows], down0[rows]
        loads = (np.zeros((rows.size, w), dtype=np.int64) if load is None else
                 load[u[:, None] + cand] + load[dn[:, None] + cand])
        bi[rows] = adaptive_pick(loads, u, dn, bi[rows])
        return bi


def fat_tree(node: Topology, n_nodes: int, tiers: list[Tier], *, nic_bw: float,
             nic_latency: float = 400e-9, pcie_bw: float = 63e9, pcie_latency: float = 100e-9,
             rail_optimized: bool = True, pxn: bool | None = None, routing: str | None = None,
             fabric: str = "infiniband", qps_per_connection: int = 1, name: str = "fat-tree", nics_per_gpu: int = 1, gpus_per_nic: int = 1,
             gpus_per_switch: int | None = None, nic_pcie_bw: float | None = None,
             switch_latency: float | None = None, intra_node: str = "nvlink", planes: int = 1,
             rail_only: bool = False, nic_attach: str = "pcie") -> Topology:
    """Replicate ``node`` ``n_nodes`` times under a fat-tree of ``tiers``.

    Parameters
    ----------
    node
        The scale-up domain of one server (e.g. :func:`~netsim.topology.builders.hgx_h100`).
    tiers
        Leaf first.  The top tier's ``up`` is ignored.  A tier's ``oversubscription`` cables fewer
        of its up ports (:mod:`netsim.topology.cabling`).
    nic_bw
        Bytes/s of each NIC port; the leaf's down ports run at this rate.
    nic_latency, pcie_bw, pcie_latency
        The NIC traversal latency and each GPU's PCIe link (to its NIC, or to its PCIe switch).
    rail_optimized
        NIC *i* of every node on the leaf of rail *i* (see the module docstring).
    pxn
        Route inter-node traffic like NCCL's PXN: first over NVLink to the GPU of the
        source node on the destination's rail, then through that GPU's NIC, so that
        traffic between nodes stays on one rail.  Default: on when rail-optimized.
        NCCL's rule (``src/graph/paths.cc`` lines 812-840 of NVIDIA/nccl at nccl4py-v0.3.1;
        ``NCCL_PXN_DISABLE``, default 0, line 668): a GPU reaches NIC *n* through the local GPU
        closest to it when that GPU sits on the NIC's PCIe switch with GPUDirect RDMA, is joined
        by NVLink, is in the same node, and has more bandwidth to the NIC or spares a trip
        through the CPU; in the sending direction only ("receiving locally and sending
        remotely").  On a DGX-style node every non-local NIC qualifies, which is this relay.
    routing
        ``ftree``, ``ecmp``, ``adaptive`` or ``spray`` (:mod:`netsim.topology.policy`); default: the
        fabric's (:func:`~netsim.topology.model.default_routing`).
    fabric
        ``infiniband`` (routed by its subnet manager: ``ftree`` by default) or ``roce`` (switches
        hash flows: ``ecmp`` by default).
    qps_per_connection
        Queue pairs per NCCL connection, each its own flow (:mod:`netsim.collectives.qps`).
    nics_per_gpu, gpus_per_nic, gpus_per_switch
        NICs per GPU, GPUs per NIC, GPUs per PCIe switch (:class:`~netsim.topology.hostio.NicLayout`).
    nic_pcie_bw, switch_latency
        Each NIC's PCIe link to its switch (default ``pcie_bw``) and the switch's traversal
        latency (default ``pcie_latency``); used only when there are PCIe switches.
    intra_node
        ``nvlink`` (default) or ``nic``: GPUs of one node talk through their NICs and the fabric
        (pure-RDMA kernels).
    planes, rail_only
        ``planes`` independent trees of ``tiers``, NIC port *j* of a node in plane ``j mod planes``
        (:mod:`netsim.topology.planes`); PXN is on when crossing planes needs it.  ``rail_only``
        (one plane per NIC port) is recorded in the facts.

    >>> from netsim.topology.builders import hgx_h100
    >>> t = fat_tree(hgx_h100(), 4, [Tier("leaf", down=4, up=4), Tier("spine", down=8)], nic_bw=50e9)
    >>> t.n_gpus, dict(t.facts.switches)
    (32, {'leaf': 8, 'spine': 4})
    >>> r = fat_tree(hgx_h100(), 4, [Tier("rail", down=4)], nic_bw=50e9, planes=8, rail_only=True)
    >>> dict(r.facts.switches), r.facts.pxn
    ({'rail': 8}, True)
    """
    if n_nodes < 1 or not tiers:
        raise ValueError("a fat-tree needs at least one node and one tier")
    if intra_node not in INTRA_NODE_ROUTES:
        raise ValueError(f"intra_node must be one of {', '.join(INTRA_NODE_ROUTES)}, got {intra_node!r}")
    if fabric not in FABRICS:
        raise ValueError(f"fabric must be one of {', '.join(FABRICS)}, got {fabric!r}")
    routing = default_routing(fabric) if routing is None else routing
    tiers = cabled_tiers(list(tiers), nic_bw)
    g = node.n_gpus
    lay = NicLayout.default(g, nics_per_gpu, gpus_per_nic, gpus_per_switch)
    relay = needs_relay(lay.nics_per_gpu, lay.gpus_per_nic, planes)
    check_planes(planes, lay.nics, relay, pxn, intra_node)
    if rail_only and planes != lay.nics:
        raise ValueError(f"a rail-only fabric has one plane per NIC port ({lay.nics}), got {planes} planes")
    pos, levels, span = plane_levels(list(tiers), n_nodes, lay.nics, planes, rail_optimized)
    H = n_nodes * g
    pcie = (pcie_bw, pcie_latency, pcie_bw if nic_pcie_bw is None else nic_pcie_bw,
            pcie_latency if switch_latency is None else switch_latency)
    arrays, link_base, level_base, node_base = _wire(node, n_nodes, tiers, levels, pos, lay,
                                                     nic_bw, nic_latency, pcie, planes, span)
    pxn = (rail_optimized or relay) if pxn is None else pxn
    router = FatTreeRouter(node, n_nodes, pos, levels, link_base, level_base, node.n_links, pxn,
                           layout=lay, intra_node=intra_node, planes=planes, span=span)
    facts = fat_tree_facts(node, n_nodes, tiers, levels, nic_bw, rail_optimized, bool(pxn), lay, pcie, planes)
    facts = replace(facts, intra_node=intra_node, fabric=fabric, qps_per_connection=int(qps_per_connection),
                    planes=int(planes), rail_only=bool(rail_only),
                    diameter_hops=facts.diameter_hops + (2 if relay and n_nodes > 1 else 0), nic_attach=nic_attach)
    gpus = (np.arange(H) // g) * node.n_nodes + node.gpus[np.arange(H) % g]
    topo = Topology(name=name, gpus=gpus.astype(np.int32), router=router, facts=facts,
                    node_kind=node_base, **arrays)
    return with_routing(topo, routing, source=None, field="routing")


def _wire(node, n_nodes, tiers, levels, pos, lay, nic_bw, nic_lat, pcie, planes=1, span=None):
    """Node kinds and link arrays of the whole fabric, plus id bases for the router."""
    Tn, Lt, g = node.n_nodes, node.n_links, node.n_gpus
    H, NN, S = n_nodes * g, n_nodes * lay.nics, n_nodes * lay.switches
    # PCIe switches are generic "switch" nodes (netsim.vocab.TIER_ORDER has no PCIe kind)
    kinds = [np.tile(node.node_kind, n_nodes), np.full(NN, node_kind_id("nic"), np.int8),
             np.full(S, node_kind_id("switch"), np.int8)]
    nic0 = Tn * n_nodes
    sw0, first = [], nic0 + NN + S
    for t, lv in zip(tiers, levels):
        sw0.append(first)
        kid = node_kind_id(t.name) if t.name in NODE_KINDS else node_kind_id("switch")
        kinds.append(np.full(lv.S, kid, np.int8))
        first += lv.S
    offs = np.repeat(np.arange(n_nodes, dtype=np.int64) * Tn, Lt)
    src = [np.tile(node.link_src, n_nodes) + offs]
    dst = [np.tile(node.link_dst, n_nodes) + offs]
    ranks = np.arange(H)
    gpu_node = (ranks // g) * Tn + node.gpus[ranks % g]
    leaf = sw0[0] + group_index(pos, levels[0].M, levels[0].N // planes, span)
    pcie_bw, pcie_lat, nic_pcie_bw, sw_lat = pcie
    rows, host_base = host_links(lay, n_nodes, gpu_node, nic0, nic0 + NN, leaf, tiers[0].latency,
                                 nic_bw, nic_lat, pcie_bw, pcie_lat, nic_pcie_bw, sw_lat)
    src += rows["src"]
    dst += rows["dst"]
    bw = [np.tile(node.link_bw, n_nodes)] + rows["bw"]
    lat = [np.tile(node.link_lat, n_nodes)] + rows["lat"]
    kind = [np.tile(node.link_kind, n_nodes)] + [np.full(n, link_kind_id(k), np.int8)
                                                 for k, n in zip(rows["kind"], rows["n"])]
    width = [np.tile(node.link_width, n_nodes)] + [np.ones(n, np.int16) for n in rows["n"]]
    link_base = {k: Lt * n_nodes + v for k, v in host_base.items()}
    level_base, nxt = [], Lt * n_nodes + sum(rows["n"])
    for i in range(1, len(levels)):
        lv, below, child = levels[i], levels[i - 1], tiers[i - 1]
        c = np.repeat(np.arange(below.S, dtype=np.int64), lv.w)
        bi = np.tile(np.arange(lv.w, dtype=np.int64), below.S)
        plane, cp = c // (below.S // planes), c % (below.S // planes)  # children numbered plane by plane
        parent = sw0[i] + plane * (lv.S // planes) + ((cp // below.W) // lv.m) * lv.W + (cp % below.W) * lv.w + bi
        child_id = sw0[i - 1] + c
        src.append(np.concatenate([child_id, parent]))
        dst.append(np.concatenate([parent, child_id]))
        n2 = 2 * c.size
        bw.append(np.full(n2, lv.p * child.up_bw))
        lat.append(np.r_[np.full(c.size, tiers[i].latency), np.full(c.size, child.latency)])
        kind.append(np.full(n2, link_kind_id("ib"), np.int8))
        width.append(np.full(n2, lv.p, np.int16))
        level_base.append(nxt)
        nxt += n2
    arrays = dict(link_src=np.concatenate(src).astype(np.int32), link_dst=np.concatenate(dst).astype(np.int32),
                  link_bw=np.concatenate(bw), link_lat=np.concatenate(lat),
                  link_kind=np.concatenate(kind), link_width=np.concatenate(width))
    return arrays, link_base, level_base, np.concatenate(kinds)
