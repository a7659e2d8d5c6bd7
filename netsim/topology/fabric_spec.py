"""A topology file's ``scale_out`` section, built: tiers, NICs, planes, size limits.

:mod:`netsim.topology.spec` parses the section into a ``ScaleOutSpec``; :func:`build_fabric` turns
it into a :func:`~netsim.topology.fattree.fat_tree` (one fabric, several planes side by side, or a
rail-only fabric: :mod:`netsim.topology.planes`), every bad value one line naming its field.
"""

from __future__ import annotations

from netsim.errors import InputError
from netsim.topology.cabling import cabled_tier
from netsim.topology.fattree import Tier, fat_tree, plane_levels
from netsim.topology.hostio import nic_layout
from netsim.topology.model import MAX_GPUS, MAX_LINKS, Topology
from netsim.topology.planes import needs_relay, resolve

#: ``scale_out.kind`` values: a fat-tree (``planes`` of them side by side), or a rail-only fabric.
SCALE_OUT_KINDS: tuple[str, ...] = ("fat_tree", "rail_only")


def build_fabric(node: Topology, n_nodes: int, so, name: str, source: str) -> Topology:
    """The fabric ``so`` (a ``ScaleOutSpec``) joining ``n_nodes`` copies of ``node``."""
    if so.kind not in SCALE_OUT_KINDS:
        raise InputError(f"expected one of {', '.join(SCALE_OUT_KINDS)}, got {so.kind!r}", source=source,
                         field="scale_out.kind")
    if not so.tiers:
        raise InputError("expected at least one tier", source=source, field="scale_out.tiers")
    tiers, down_bw = [], so.nic_bw
    for i, t in enumerate(so.tiers):
        tiers.append(spec_tier(t, down_bw, source, f"scale_out.tiers[{i}]"))
        down_bw = tiers[-1].up_bw
    lay = nic_layout(so.nics_per_gpu, so.gpus_per_nic, so.pcie_switch is not None,
                     so.pcie_switch.gpus if so.pcie_switch else None, node.n_gpus, source)
    planes = resolve(so.kind, so.planes, lay.nics, lambda p: needs_relay(lay.nics_per_gpu, lay.gpus_per_nic, p),
                     so.pxn, so.rail_optimized, so.intra_node, source)
    check_fat_tree_size(node, n_nodes, tiers, so.rail_optimized, source, lay.nics, planes)
    sw = so.pcie_switch
    try:
        return fat_tree(node, n_nodes, tiers, nic_bw=so.nic_bw, nic_latency=so.nic_latency,
                        pcie_bw=so.pcie_bw, pcie_latency=so.pcie_latency,
                        rail_optimized=so.rail_optimized, pxn=so.pxn, routing=so.routing, fabric=so.fabric,
                        qps_per_connection=so.qps_per_connection, name=name,
                        nics_per_gpu=lay.nics_per_gpu, gpus_per_nic=lay.gpus_per_nic,
                        gpus_per_switch=lay.gpus_per_switch, nic_pcie_bw=sw.nic_bw if sw else None,
                        switch_latency=sw.latency if sw else None, intra_node=so.intra_node,
                        planes=planes, rail_only=so.kind == "rail_only", nic_attach=so.nic_attach)
    except ValueError as exc:
        what = "every plane" if planes > 1 else f"{n_nodes} nodes"
        raise InputError(f"cannot wire {what}: {exc}", source=source, field="scale_out.tiers") from None


def spec_tier(t, down_bw: float, source: str, where: str) -> Tier:
    """The builder's tier of a ``TierSpec``: ``up_bw`` defaults to the down ports' rate
    (:func:`~netsim.topology.cabling.cabled_tier`)."""
    if t.down < 1:
        raise InputError("expected a positive integer, got 0", source=source, field=f"{where}.down")
    up_bw = t.up_bw if t.up_bw is not None else down_bw
    tier = Tier(t.name, t.down, t.up, up_bw, t.latency, t.radix, t.parallel, t.oversubscription, t.model)
    try:
        return cabled_tier(tier, down_bw)
    except ValueError as exc:
        raise InputError(str(exc), source=source, field=f"{where}.oversubscription") from None


def check_fat_tree_size(node: Topology, n_nodes: int, tiers: list[Tier], rail: bool, source: str,
                        nics: int | None = None, planes: int = 1) -> None:
    """Refuse, before wiring, a fabric beyond :data:`MAX_GPUS` GPUs or :data:`MAX_LINKS` links
    (``nics``: NICs per node, default one per GPU)."""
    gpus = n_nodes * node.n_gpus
    if gpus > MAX_GPUS:
        raise InputError(f"{n_nodes} nodes x {node.n_gpus} GPUs = {gpus:,} GPUs; netsim handles at most "
                         f"{MAX_GPUS:,}", source=source, field="nodes")
    try:
        levels = plane_levels(tiers, n_nodes, nics or node.n_gpus, planes, rail)[1]
    except ValueError:
        return  # the builder names the problem
    links = n_nodes * node.n_links + 4 * gpus + 4 * n_nodes * (nics or 0)
    for i, lv in enumerate(levels):
        up = levels[i + 1].w if i + 1 < len(levels) else 0
        links += 2 * lv.S * (lv.m + up)
    if links > MAX_LINKS:
        raise InputError(f"this fabric would have about {links:,} links; netsim handles at most {MAX_LINKS:,} "
                         "(fewer ports per switch or fewer parallel links)", source=source, field="scale_out.tiers")
