"""Scale-out routing policies of a fat-tree: ``ftree``, ``ecmp``, ``adaptive`` and ``spray``.

Routing applies to the scale-out fabric only.  Routes inside a server (NVLink, NVSwitch,
the GPU<->NIC PCIe hop, PXN's NVLink relay hop) and the NIC<->leaf links are the same under
every policy: they offer no choice.  The choices are the parents taken at tiers 2 and up
(:mod:`netsim.topology.fattree`): at tier *i* a flow picks a branch ``b_i`` in ``[0, w_i)``,
and the down path mirrors the up path, so a fabric path is a digit string ``(b_2, ..., b_k)``
up to the lowest common ancestor tier *k*.

``ftree`` (default on InfiniBand, ``scale_out.fabric: infiniband``)
    What an InfiniBand subnet manager writes into the switches: OpenSM's fat-tree routing engine
    (``opensm -R ftree``; OpenSM's ``doc/current-routing.txt``, "Fat-tree Routing Algorithm":
    it "optimizes routing of fat-trees for congestion-free 'shift' communication pattern").
    Forwarding is by destination only, so every switch holds one output port per destination
    LID; going up, the parent is the destination's next digit in the fabric's mixed radix
    (D-mod-K, Zahavi et al., "Optimized InfiniBand fat-tree routing for shift all-to-all
    communication patterns", CCPE 2010, eq. 1): ``b_i = (p_d // W_{i-1}) % w_i`` with ``p_d``
    the destination NIC's position under the leaves (leaf-major, then port: the order in which
    OpenSM's engine indexes hosts) and ``W_{i-1} = w_2 ... w_{i-1}``.  Destinations spread
    round-robin over the parents, all flows towards one destination meet at one top switch, and
    its down path is unique.  What is modelled: the up-port choice and unique down paths of a
    healthy, fully populated XGFT; the source, the flow key and load play no part.  Not modelled:
    OpenSM's handling of non-full or degraded trees (a ``--faults`` detour hashes, see
    :class:`~netsim.workload.fault_routing.FaultRouter`), its ``updn``/``minhop`` engines, and
    the adaptive routing of NVIDIA Quantum switches (``adaptive`` below).

``ecmp`` (default on RoCE, ``scale_out.fabric: roce``, and on fixed-route topologies)
    Static hashing: ``b_i = mix_hash(src, dst, key, i) % w_i``.  Flows may collide on one
    link while its siblings idle, as on a real Ethernet fabric with static ECMP.

``adaptive``
    InfiniBand adaptive routing decided when a flow starts (a flowlet that lasts the whole
    flow).  :meth:`Topology.routes <netsim.topology.model.Topology.routes>` takes ``load``,
    the number of flows now crossing each link (the network's live count).  Transfers are
    placed in the order given; at each tier *i* >= 2, from the lowest up, a transfer takes the
    branch that minimizes ``load[up link] + load[matching down link]`` of tier *i* (the same
    branch index on the source's and the destination's side); ties go to the first branch in
    cyclic order from the ECMP branch, so on an idle fabric a lone flow goes where ECMP sends
    it.  Each placed transfer adds 1 to the load of every fabric link it takes before the next
    one is placed.  The caller's array is not modified.  (Placing all transfers tier by tier
    is the same as placing them one by one: a tier's decision reads only that tier's links.)

``spray``
    Packet spraying (Spectrum-X, UEC, InfiniBand adaptive spraying): every flow is split
    evenly over *all* its equal-cost paths.  In a fluid model where every flow sprays, the
    interchangeable links of a tier carry identical load, so their capacity constraints are
    identical and the class acts as one link whose capacity is the sum of its members'.
    The router sends every fabric flow through the class *representative* (branch 0 at
    every tier); :attr:`Topology.capacity <netsim.topology.model.Topology.capacity>` gives a
    representative its class's summed bandwidth and
    :meth:`Topology.spread <netsim.topology.model.Topology.spread>` maps per-link counters
    back onto the physical members.

Spray classes
-------------
Tier *i* (2 <= i <= h) joins the level-(i-1) elements to the tier-*i* switches.  Level *i-1*
elements come in groups of ``W_{i-1} = w_2 ... w_{i-1}`` (``W_1 = 1``: a leaf is its own
group); group *G* holds the elements above host positions ``[G M_{i-1}, (G+1) M_{i-1})``.  An
element is ``c = G W_{i-1} + B`` where ``B`` spells the digits ``(b_2, ..., b_{i-1})`` of the
path that reached it; its up link on branch ``b`` has id ``base_i + c w_i + b``, its down link
``base_i + S_{i-1} w_i + c w_i + b``.  The classes are

* **up class** (tier *i*, group *G*): the ``W_i = W_{i-1} w_i`` up links out of group *G*,
  ids ``base_i + G W_i + [0, W_i)``;
* **down class** (tier *i*, group *G*): the ``W_i`` down links into group *G*, ids
  ``base_i + S_{i-1} w_i + G W_i + [0, W_i)``;
* every other link (NVLink, PCIe, NIC<->leaf) is a class of its own.

The representative is the first id of a class (``B = 0``, ``b = 0``): exactly the link the
spray router takes.  Why every member of a class carries the same load: a flow from
position ``p_s`` to ``p_d`` with common-ancestor tier ``k`` crosses tier *i* going up only if
``k >= i``, and then from group ``p_s // M_{i-1}``; among its ``W_k`` equally weighted paths
those through up link ``(c = G W_{i-1} + B, b)`` are the ones whose first ``i-1`` digits are
``(B, b)``, a fraction ``1 / W_i`` that is the same for every member of the class.  Conversely
only flows from group *G* with ``k >= i`` can use those links.  So every flow crossing the
class loads each member with exactly ``1 / W_i`` of its rate.  The same argument on the
destination side (``p_d // M_{i-1}``, the mirrored digits) holds for down classes.  Nothing
depends on how positions were assigned, so it holds with or without rail optimisation, for
2 and 3 tiers, with oversubscription (it only changes the counts w and p) and with PXN (the fabric
part of a PXN route is an ordinary fabric flow from the relay GPU's NIC).

With equal member bandwidths ``c_l`` (every healthy tier), the class's ``W_i`` identical
constraints ``x / W_i <= c_l`` are one constraint ``x <= W_i c_l = sum of c_l``: max-min
fair sharing over the merged link gives the same rates.  When members differ (a degraded
link from ``--faults``), summing models capacity-weighted spraying, and ``spread`` splits
additive counters in proportion to bandwidth.

Non-fat-tree topologies (a lone NVLink/NVSwitch domain, ASTRA-sim dimensions) have fixed
routes; asking them for ``adaptive`` or ``spray`` is an error, never a silent no-op.  So is
routing a fat-tree whose router was wrapped to avoid failed links (``--faults``): that
detour is static ECMP, and :meth:`Topology.routes <netsim.topology.model.Topology.routes>`
refuses ``adaptive`` and ``spray`` there with a one-line error.
"""

from __future__ import annotations

import operator
from dataclasses import replace

import numpy as np

from netsim.errors import InputError
from netsim.topology.model import ROUTINGS, Topology


def check_routing(routing, *, source: str | None = "--routing", field: str | None = None) -> str:
    """``routing`` if it names a policy of :data:`~netsim.topology.model.ROUTINGS`, else a one-line InputError.

    >>> check_routing("spray")
    'spray'
    """
    if not isinstance(routing, str) or routing not in ROUTINGS:
        raise InputError(f"expected one of {', '.join(ROUTINGS)}, got {routing!r}", source=source, field=field)
    return routing


def with_routing(topo: Topology, routing: str, *, source: str | None = "--routing",
                 field: str | None = None) -> Topology:
    """A copy of ``topo`` whose scale-out fabric routes by ``routing`` (``topo`` is unchanged).

    Returns ``topo`` itself when it already routes that way.  ``source``/``field`` name where
    the value came from in the one-line error for a bad value or a topology without a
    fat-tree fabric (``ecmp`` is accepted everywhere: it is every topology's default).

    >>> from netsim.topology.builders import hgx_h100
    >>> from netsim.topology.fattree import Tier, fat_tree
    >>> t = fat_tree(hgx_h100(), 4, [Tier("leaf", down=4, up=4), Tier("spine", down=8)], nic_bw=50e9)
    >>> s = with_routing(t, "spray")
    >>> rep = s.link_class == np.arange(s.n_links)  # representatives and links of no class
    >>> s.routing, t.routing, bool(np.isclose(s.capacity[rep].sum(), t.link_bw.sum()))
    ('spray', 'ftree', True)
    """
    check_routing(routing, source=source, field=field)
    if routing == topo.routing:
        return topo
    router = topo.router
    if not hasattr(router, "with_policy"):
        if topo.facts.scaleout == "fat_tree":
            raise InputError(f"cannot change the routing of {topo.name!r} to {routing!r}: its router was wrapped "
                             "(e.g. to route around failed links); choose the routing first", source=source,
                             field=field)
        raise InputError(f"routing {routing!r} applies to a fat-tree scale-out fabric; topology {topo.name!r} "
                         "has none (NVLink/NVSwitch domains and ASTRA-sim dimensions have fixed routes)",
                         source=source, field=field)
    link_class = router.spray_classes(topo.n_links) if routing == "spray" else None
    return replace(topo, router=router.with_policy(routing), routing=routing, link_class=link_class)


def with_intra_node(topo: Topology, route: str, *, source: str | None = None, field: str | None = None) -> Topology:
    """A copy of ``topo`` whose GPUs of one node reach each other by ``route`` (``nvlink``, or
    ``nic``: out through the source's NIC, across the fabric and in through the destination's,
    as pure-RDMA kernels do); ``topo`` is unchanged, and returned itself when it already routes
    so.  Needs a fat-tree scale-out fabric (one-line error naming ``source`` otherwise).

    >>> from netsim.topology.builders import hgx_h100
    >>> from netsim.topology.fattree import Tier, fat_tree
    >>> t = fat_tree(hgx_h100(), 4, [Tier("leaf", down=4, up=4), Tier("spine", down=8)], nic_bw=50e9)
    >>> r = with_intra_node(t, "nic")
    >>> from netsim.topology.model import LINK_KINDS
    >>> kinds = lambda topo: sorted({LINK_KINDS[topo.link_kind[k]] for k in topo.routes(np.array([0]), np.array([1]))[1]})
    >>> r.facts.intra_node, kinds(t), kinds(r)
    ('nic', ['nvlink'], ['ib', 'pcie'])
    """
    from netsim.topology.facts import INTRA_NODE_ROUTES
    from netsim.topology.planes import needs_relay

    if route not in INTRA_NODE_ROUTES:
        raise InputError(f"expected one of {', '.join(INTRA_NODE_ROUTES)}, got {route!r}", source=source, field=field)
    if route == topo.facts.intra_node:
        return topo
    router = topo.router
    if not hasattr(router, "intra_node") or not hasattr(router, "with_policy"):
        raise InputError(f"same-node traffic through the NICs needs a fat-tree scale-out fabric; topology "
                         f"{topo.name!r} has none", source=source, field=field)
    f = topo.facts
    if route == "nic" and needs_relay(f.nics_per_gpu, f.gpus_per_nic, f.planes):
        raise InputError(f"same-node traffic through the NICs needs every GPU's NIC ports in every plane; "
                         f"{topo.name!r} has {f.planes} planes that meet only inside a node", source=source,
                         field=field)
    other = router.with_policy(router.policy)  # a copy sharing the tables
    other.intra_node = route
    return replace(topo, router=other, facts=replace(topo.facts, intra_node=route))


def adaptive_pick(loads: np.ndarray, up: np.ndarray, down: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Branch per transfer at one tier, placing transfers in order (see the module docstring).

    Parameters
    ----------
    loads
        ``(n, w)``: the caller's load of up link *b* plus matching down link *b* of each transfer.
    up, down
        ``(n,)``: first link id of each transfer's block of ``w`` candidate up / down links
        (two transfers with the same id share those links).
    start
        ``(n,)``: the ECMP branch, where the cyclic tie-break starts.

    >>> adaptive_pick(np.zeros((3, 2), int), np.array([0, 0, 0]), np.array([10, 10, 10]), np.zeros(3, int)).tolist()
    [0, 1, 0]
    """
    n, w = loads.shape
    if w == 1 or n == 0:
        return np.zeros(n, dtype=np.int64)
    rows, ups, downs, starts = loads.tolist(), up.tolist(), down.tolist(), start.tolist()
    placed: dict[int, list[int]] = {}  # block id -> transfers already placed on each branch
    out = [0] * n
    for j in range(n):
        pu = placed.get(ups[j])
        if pu is None:
            pu = placed[ups[j]] = [0] * w
        pd = placed.get(downs[j])
        if pd is None:
            pd = placed[downs[j]] = [0] * w
        v = list(map(operator.add, map(operator.add, rows[j], pu), pd))
        h = starts[j]
        rot = v[h:] + v[:h]
        b = (h + rot.index(min(rot))) % w
        pu[b] += 1
        pd[b] += 1
        out[j] = b
    return np.asarray(out, dtype=np.int64)
