"""Oversubscription as it is built: fewer uplinks at the same port rate, fewer switches above
(netsim/topology/cabling.py, issue 34 item 1)."""

import numpy as np
import pytest
import yaml

from netsim.cli import main
from netsim.errors import InputError
from netsim.topology.builders import hgx_h100
from netsim.topology.fattree import Tier, fat_tree
from netsim.topology.model import LINK_KINDS
from netsim.topology.policy import with_intra_node, with_routing
from netsim.topology.spec import build_topology, load_topology, parse_spec

from conftest import TOPOLOGIES
from test_topology import all_pairs, assert_routes_valid

SU = TOPOLOGIES / "h100-superpod-1su.yaml"
NDR = 50e9  # 400 Gb/s, bytes/s


def _su(ratio, nodes=32):
    data = yaml.safe_load(SU.read_text())
    data["nodes"] = nodes
    leaf = data["scale_out"]["tiers"][0]
    leaf.pop("up_bw")
    leaf["oversubscription"] = ratio
    return build_topology(parse_spec(data, "su.yaml"), "su.yaml")


def _leaf_uplinks(t):
    """Cables, and their summed line rate, from every leaf to the tier above."""
    ib = t.link_kind == LINK_KINDS.index("ib")
    leaf = np.flatnonzero(t.node_kind == 3)  # NODE_KINDS "leaf"
    up = ib & np.isin(t.link_src, leaf) & ~np.isin(t.link_dst, np.flatnonzero(t.node_kind == 2))  # not to a NIC
    per_leaf = np.bincount(t.link_src[up], weights=t.link_width[up], minlength=t.n_nodes)[leaf]
    rate = t.link_bw[up] / t.link_width[up] / t.facts.link_efficiency["ib"]
    return per_leaf, rate


@pytest.mark.parametrize("ratio", [1, 2, 4, 8, 16, 32])
def test_a_ratio_that_divides_the_ports_cables_down_over_ratio_uplinks_at_the_same_rate(ratio):
    t = _su(ratio)
    per_leaf, rate = _leaf_uplinks(t)
    assert np.allclose(rate, NDR)  # every uplink cable runs at the port rate, at every ratio
    assert set(per_leaf.tolist()) == {32 // ratio}
    # aggregate uplink capacity per leaf = downlink capacity / ratio, as the old slower-link model had it
    assert per_leaf[0] * NDR == pytest.approx(32 * NDR / ratio)
    assert t.facts.oversubscription["leaf"] == pytest.approx(ratio)
    # 8 leaves x 32/r uplinks on 64-port spines: 4/r spines (at least one, partly filled)
    assert t.facts.switches == {"leaf": 8, "spine": max(1, 4 // ratio)}
    assert t.facts.bisection_Bps == pytest.approx(256 * NDR / ratio / 2)


def test_one_to_one_builds_the_same_arrays_as_before():
    plain = load_topology(SU)
    one = _su(1)
    for name in ("link_src", "link_dst", "link_bw", "link_lat", "link_kind", "link_width", "node_kind"):
        assert np.array_equal(getattr(plain, name), getattr(one, name)), name
    assert plain.facts.xgft == one.facts.xgft


@pytest.mark.parametrize("k", [4, 8, 16])
@pytest.mark.parametrize("ratio", [1, 2])
def test_k_ary_three_tier_counts_at_one_to_one_and_oversubscribed(k, ratio):
    """k-ary fat-tree (k pods of k/2 leaves and k/2 spines, (k/2)^2 cores, k^3/4 hosts); a leaf at
    r:1 cables k/(2r) uplinks, so spines and cores fall to 1/r."""
    hosts = k ** 3 // 4
    t = fat_tree(hgx_h100(), hosts // 8, [Tier("leaf", down=k // 2, up=k // 2, up_bw=NDR, oversubscription=ratio),
                                          Tier("spine", down=k // 2, up=k // 2, up_bw=NDR),
                                          Tier("core", down=k)], nic_bw=NDR, rail_optimized=False)
    assert dict(t.facts.switches) == {"leaf": k * k // 2, "spine": k * k // 2 // ratio, "core": k * k // 4 // ratio}
    src, dst = all_pairs(min(t.n_gpus, 64))
    for routing in ("ftree", "ecmp", "adaptive", "spray"):
        assert_routes_valid(with_routing(t, routing), src * (t.n_gpus // 64 or 1), dst * (t.n_gpus // 64 or 1))


def test_rounding_when_the_ratio_does_not_divide(capsys):
    t = _su(7)  # 32 / 7 = 4.57 uplinks: 5 cabled, 6.4:1 built
    per_leaf, _ = _leaf_uplinks(t)
    assert set(per_leaf.tolist()) == {5} and t.facts.oversubscription["leaf"] == pytest.approx(6.4)
    assert t.facts.switch_tiers[0].oversubscription_asked == 7.0 and t.facts.switch_tiers[0].uplinks == 5
    assert _su(3).facts.switch_tiers[0].uplinks == 11  # 10.67 -> 11 (nearest)
    assert _su(6.4).facts.switch_tiers[0].uplinks == 5  # 5.0 exactly
    assert _su(12.8).facts.switch_tiers[0].uplinks == 3  # 2.5: a tie rounds up
    assert _su(100).facts.switch_tiers[0].uplinks == 1  # at least one cable
    assert main(["topo", str(SU), "--set", "scale_out.tiers.0.oversubscription=7"]) == 0
    assert "leaf 6.4:1 (7:1 asked; 5 uplinks per switch)" in capsys.readouterr().out


def test_more_uplinks_than_up_ports_is_one_clear_line(capsys):
    data = yaml.safe_load(SU.read_text())
    data["scale_out"]["tiers"][0].update(up=4, oversubscription=2)  # 16 uplinks needed, 4 ports
    with pytest.raises(InputError, match=r"^su.yaml: scale_out.tiers\[0\].oversubscription: .*needs 16 uplinks"):
        build_topology(parse_spec(data, "su.yaml"), "su.yaml")
    assert main(["topo", str(SU), "--set", "scale_out.tiers.0.up=4", "--set",
                 "scale_out.tiers.0.oversubscription=2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "scale_out.tiers[0].oversubscription" in err and "Traceback" not in err


def test_faster_uplinks_with_a_ratio_cable_fewer_of_them():
    # 64 x 200G down, 400G up ports (MegaScale's leaves), 2:1: 64 x 200 / (2 x 400) = 16 uplinks
    t = fat_tree(hgx_h100(), 8, [Tier("leaf", down=64, up=32, up_bw=NDR, oversubscription=2),
                                 Tier("spine", down=64)], nic_bw=25e9, rail_optimized=False)
    assert t.facts.switch_tiers[0].uplinks == 16 and t.facts.oversubscription["leaf"] == pytest.approx(2.0)


def test_ftree_shift_permutations_load_each_uplink_cable_ratio_times():
    """The physics: at r:1, r hosts' flows share each uplink cable at full port rate (the old model
    gave each host its own cable at 1/r of the rate)."""
    t = with_intra_node(fat_tree(hgx_h100(), 8, [Tier("leaf", down=8, up=8, up_bw=NDR, oversubscription=2),
                                                  Tier("spine", down=8, up=8), Tier("core", down=8)],
                                 nic_bw=NDR, rail_optimized=False, pxn=False), "nic")
    order = np.argsort(t.router.pos)
    n, worst = order.size, 0.0
    ib = t.link_kind == LINK_KINDS.index("ib")
    for c in range(1, n):
        _, links = t.routes(order, order[(np.arange(n) + c) % n])
        worst = max(worst, float((np.bincount(links, minlength=t.n_links) / t.link_width)[ib].max()))
    assert worst == 2.0
