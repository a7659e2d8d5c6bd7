"""Oversubscription as it is built: an oversubscribed tier cables fewer up ports, not slower ones.

A fat-tree tier's ``oversubscription`` r is its down:up capacity ratio.  Real fabrics reach it with
the same per-port rate and fewer uplinks (a 2:1 leaf of 32 x 400G down ports cables 16 x 400G
uplinks), so fewer switches are needed above it.  :func:`cabled_tier` turns the ratio into the
count of up ports cabled::

    uplinks = round(down x down_rate / (r x up_rate))      (ties round up; at least 1)

with ``up_rate`` the tier's ``up_bw`` (the spec defaults it to the down ports' rate).  When r
divides ``down x down_rate / up_rate`` the aggregate uplink capacity is exactly ``down capacity /
r``; otherwise the nearest whole number of cables is used and the ratio actually built,
``down x down_rate / (uplinks x up_rate)``, is what :attr:`TopologyFacts.oversubscription
<netsim.topology.facts.TopologyFacts.oversubscription>` and ``netsim topo`` report (``leaf 6.4:1
(7:1 asked)`` for 32 down ports at 7:1: 5 uplinks).  The switch's other up ports stay free (the
bill of materials counts them, :mod:`netsim.topology.bom`).  Asking for more uplinks than the tier
has up ports is an error.

>>> from netsim.topology.fattree import Tier
>>> t = cabled_tier(Tier("leaf", down=32, up=32, up_bw=50e9, oversubscription=2), 50e9)
>>> t.up, t.radix, t.up * t.up_bw == 32 * 50e9 / 2
(16, 64, True)
>>> cabled_tier(Tier("leaf", down=32, up=32, up_bw=50e9, oversubscription=7), 50e9).up
5
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

from netsim.topology.facts import SwitchTierFacts, TopologyFacts, XgftLevel

if TYPE_CHECKING:  # pragma: no cover
    from netsim.topology.fattree import Level, Tier

#: Relative tolerance for "the ratio divides the ports": bandwidths are parsed from decimal strings
#: (``400Gbps`` -> 5e10 exactly), so exact ratios come out within a few ulps of an integer.
_EXACT = 1e-9


def uplinks_for_ratio(down: int, down_bw: float, up_bw: float, ratio: float) -> tuple[int, float]:
    """Up ports to cable for a down:up capacity ``ratio``: the whole count and the exact quotient.

    >>> uplinks_for_ratio(32, 50e9, 50e9, 4), uplinks_for_ratio(128, 50e9, 50e9, 7)[0]
    ((8, 8.0), 18)
    """
    exact = down * down_bw / (ratio * up_bw)
    near = round(exact)
    n = near if abs(exact - near) <= _EXACT * exact else math.floor(exact + 0.5)
    return max(1, int(n)), exact


def cabled_tier(tier: "Tier", down_bw: float) -> "Tier":
    """``tier`` with ``up`` set to the up ports its ``oversubscription`` cables (see the module).

    ``down_bw`` is the rate of the tier's down ports.  ``radix`` becomes the switch's ports
    (``down + up`` as given, when no radix is), so the uncabled up ports count as free.  A tier
    without ``oversubscription`` is returned unchanged.  Idempotent.  Raises ``ValueError`` naming
    the tier when the ratio needs more up ports than the tier has.
    """
    if tier.oversubscription is None:
        return tier
    if tier.up < 1:
        raise ValueError(f"tier {tier.name!r}: oversubscription needs up ports")
    n, exact = uplinks_for_ratio(tier.down, down_bw, tier.up_bw, tier.oversubscription)
    if n > tier.up:
        raise ValueError(
            f"tier {tier.name!r}: {tier.oversubscription:g}:1 needs {exact:.4g} uplinks at the up ports' "
            f"{tier.up_bw * 8 / 1e9:g} Gb/s, but the tier has {tier.up} up ports; give more up ports, "
            "a faster up_bw or a larger ratio")
    radix = tier.radix if tier.radix is not None else tier.down + tier.up
    return replace(tier, up=n, radix=radix)


def cabled_tiers(tiers: list["Tier"], nic_bw: float) -> list["Tier"]:
    """Every tier through :func:`cabled_tier`, each with its down ports' rate (the NIC's, or the
    tier below's up rate)."""
    out, down_bw = [], nic_bw
    for t in tiers:
        out.append(cabled_tier(t, down_bw))
        down_bw = t.up_bw
    return out


def switch_tier_facts(tiers: list["Tier"], levels: list["Level"], nic_bw: float) -> tuple[SwitchTierFacts, ...]:
    """Per tier, the switch as built: ports, rates, cabled uplinks and the ratio asked for."""
    out, down_bw = [], nic_bw
    for i, (t, lv) in enumerate(zip(tiers, levels)):
        top = i == len(tiers) - 1
        uplinks = 0 if top else levels[i + 1].w * levels[i + 1].p
        radix = t.radix if t.radix is not None else t.down + (0 if top else t.up)
        out.append(SwitchTierFacts(
            name=t.name, count=int(lv.S), model=t.model, radix=int(radix), down_ports=int(t.down), uplinks=int(uplinks),
            down_port_Bps=float(down_bw), up_port_Bps=float(0.0 if top else t.up_bw),
            oversubscription_asked=None if t.oversubscription is None else float(t.oversubscription)))
        down_bw = t.up_bw
    return tuple(out)


def fat_tree_facts(node, n_nodes, tiers, levels, nic_bw, rail, pxn, lay, pcie, planes=1) -> TopologyFacts:
    """The node's facts plus counts, oversubscription, bisection and diameter of a fat-tree
    (:func:`~netsim.topology.fattree.fat_tree`), from its tiers as cabled and its levels (counted
    over all ``planes``); ``lay`` is the node's :class:`~netsim.topology.hostio.NicLayout`, ``pcie``
    the builder's ``(pcie_bw, pcie_latency, nic_pcie_bw, switch_latency)``."""
    NN = n_nodes * lay.nics
    over, cap = {}, [NN * nic_bw]  # cap[j]: total upward capacity out of level j
    for i, (t, lv) in enumerate(zip(tiers, levels)):
        if i + 1 < len(levels):
            down_bw = nic_bw if i == 0 else tiers[i - 1].up_bw
            up_cap = levels[i + 1].w * levels[i + 1].p * t.up_bw
            over[t.name] = round((lv.m * lv.p * down_bw) / up_cap, 4)
            cap.append(lv.S * up_cap)
    top = next(j for j, lv in enumerate(levels, start=1) if lv.N == planes)
    if n_nodes == 1:
        bisection, diameter = node.facts.bisection_Bps, node.facts.diameter_hops
    else:
        bisection = min(cap[:top]) / 2
        diameter = 4 + 2 * (top - 1) + (2 if lay.switches else 0)  # + GPU->switch, switch->GPU
    return replace(
        node.facts, nodes=n_nodes, scaleout="fat_tree", rail_optimized=bool(rail), pxn=pxn,
        scaleout_Bps_per_gpu=float(nic_bw * lay.nics_per_gpu / lay.gpus_per_nic), tiers=len(tiers),
        nics_per_gpu=lay.nics_per_gpu, gpus_per_nic=lay.gpus_per_nic, nic_port_Bps=float(nic_bw),
        pcie_Bps=float(pcie[0]), pcie_switches=lay.switches,
        nic_pcie_Bps=float(pcie[2]) if lay.switches else None,
        pcie_Bps_per_gpu=float(min(pcie[0], (pcie[2] if lay.switches else pcie[0])
                                   * lay.nics_per_gpu / lay.gpus_per_nic)),
        switches={t.name: lv.S for t, lv in zip(tiers, levels)},
        oversubscription=over, bisection_Bps=float(bisection), diameter_hops=int(diameter),
        xgft=tuple(XgftLevel(lv.m, lv.w, lv.p) for lv in levels),
        switch_tiers=switch_tier_facts(tiers, levels, nic_bw),
    )
