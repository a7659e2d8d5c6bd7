"""Multi-plane and rail-only fabrics (netsim/topology/planes.py, issue 34 item 4): routes, the NVLink
relay between planes, the bill of materials in closed form, errors, and collective times."""

import numpy as np
import pytest

from netsim.errors import InputError
from netsim.perftests import bench
from netsim.topology.bom import bill_of_materials, switch_tier_of_node
from netsim.topology.builders import gb200_nvl72, hgx_h100
from netsim.topology.fattree import Tier, fat_tree
from netsim.topology.model import LINK_KINDS, NODE_KINDS
from netsim.topology.policy import with_intra_node, with_routing
from netsim.topology.spec import build_topology, load_topology, parse_spec

from conftest import TOPOLOGIES

POLICIES = ("ftree", "ecmp", "adaptive", "spray")
NDR = 50e9


def two_tier(k):
    """A full 2-tier k-ary tree: leaves of k/2 down and k/2 up ports, spines of k down ports."""
    return [Tier("leaf", down=k // 2, up=k // 2, radix=k), Tier("spine", down=k, radix=k)]


# every fabric: (builder, planes); small enough for all-pairs routes
FABRICS = {
    "mpft-8": lambda: fat_tree(hgx_h100(), 32, two_tier(8), nic_bw=NDR, planes=8),  # DeepSeek: GPU i in plane i
    "mpft-2": lambda: fat_tree(hgx_h100(), 8, two_tier(8), nic_bw=NDR, planes=2),  # GPUs 0,2,4,6 in plane 0
    "dual-plane": lambda: fat_tree(hgx_h100(), 8, [Tier("leaf", down=8, up=8), Tier("spine", down=16)], nic_bw=25e9,
                                   nics_per_gpu=2, planes=2, fabric="roce"),  # HPN: port p in plane p
    "rail-only": lambda: fat_tree(hgx_h100(), 16, [Tier("rail", down=16)], nic_bw=NDR, planes=8, rail_only=True),
    "rail-only-clos": lambda: fat_tree(hgx_h100(), 16, two_tier(8), nic_bw=NDR, planes=8, rail_only=True),
    "3t-planes-partial": lambda: fat_tree(hgx_h100(), 10, [Tier("leaf", down=4, up=4), Tier("spine", down=4, up=4),
                                                           Tier("core", down=8)], nic_bw=NDR, planes=2,
                                          rail_optimized=False),  # 40 ports per plane: the last pod half full
}


def switch_plane(t):
    """Plane of every node of ``t`` that is a fabric switch (-1 for the rest): each tier's switches
    are numbered plane by plane."""
    tier = switch_tier_of_node(t)
    out = np.full(t.n_nodes, -1, dtype=np.int64)
    for i, st in enumerate(t.facts.switch_tiers):
        idx = np.flatnonzero(tier == i)
        out[idx] = np.arange(idx.size) // (st.count // t.facts.planes)
    return out


def nic_plane(t):
    """Plane of every NIC node (-1 for the rest): NIC port j of a node in plane j mod P."""
    nics = np.flatnonzero(t.node_kind == NODE_KINDS.index("nic"))
    per_node = nics.size // t.facts.nodes
    out = np.full(t.n_nodes, -1, dtype=np.int64)
    out[nics] = (np.arange(nics.size) % per_node) % t.facts.planes
    return out


def check_routes(t, src, dst, key):
    """Every route connected, from the source GPU to the destination GPU, its switches all in the
    plane of the NICs it crosses (empty routes only for src == dst)."""
    ip, lk = t.routes(src, dst, key)
    lengths = np.diff(ip)
    assert ((lengths == 0) == (src == dst)).all()
    ne = lengths > 0
    assert np.array_equal(t.link_src[lk[ip[:-1][ne]]], t.gpus[src[ne]])
    assert np.array_equal(t.link_dst[lk[ip[1:][ne] - 1]], t.gpus[dst[ne]])
    inner = np.ones(lk.size, dtype=bool)
    inner[ip[1:][ne] - 1] = False  # the last link of a route has no successor in it
    j = np.flatnonzero(inner[:-1])
    assert np.array_equal(t.link_dst[lk[j]], t.link_src[lk[j + 1]])
    sp, np_ = switch_plane(t), nic_plane(t)
    row = np.repeat(np.arange(src.size), lengths)
    for plane_of_node in (sp, np_):  # the planes a route's switches and NICs are in: one per route
        p = plane_of_node[t.link_dst[lk]]
        hit = p >= 0
        lo = np.full(src.size, 1 << 30)
        hi = np.full(src.size, -1)
        np.minimum.at(lo, row[hit], p[hit])
        np.maximum.at(hi, row[hit], p[hit])
        seen = hi >= 0
        assert (lo[seen] == hi[seen]).all()
    return ip, lk


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name", sorted(FABRICS))
def test_routes_are_valid_on_every_plane_fabric(name, policy):
    t = with_routing(FABRICS[name](), policy)
    n = t.n_gpus
    src, dst = np.repeat(np.arange(n), n), np.tile(np.arange(n), n)
    check_routes(t, src, dst, np.arange(src.size) % 13)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name", ["mpft-8", "rail-only", "rail-only-clos", "mpft-2"])
def test_crossing_planes_goes_through_nvlink_on_the_source_node(name, policy):
    t = with_routing(FABRICS[name](), policy)
    g, planes = 8, t.facts.planes
    rng = np.random.default_rng(3)
    src, dst = rng.integers(0, t.n_gpus, 3000), rng.integers(0, t.n_gpus, 3000)
    keep = src // g != dst // g
    src, dst = src[keep], dst[keep]
    ip, lk = check_routes(t, src, dst, np.arange(src.size))
    nvlink = t.link_kind == LINK_KINDS.index("nvlink")
    nic_of = nic_plane(t)
    for i in range(src.size):
        path = lk[ip[i]:ip[i + 1]]
        nv = nvlink[path]
        crosses = (src[i] % g) % planes != (dst[i] % g) % planes
        nics = nic_of[t.link_dst[path]]
        assert nics[nics >= 0][0] == (dst[i] % g) % planes  # the NIC the route leaves by: the destination's plane
        if not crosses:  # the source's own NIC is in the destination's plane (with one plane per NIC: its rail)
            assert not nv.any() or planes < g  # fewer planes than NICs: rail-optimized PXN may still relay
            continue
        # GPU -> NVSwitch -> the GPU of the destination's local index on the source node, then its NIC
        assert nv[:2].all() and not nv[2:].any()
        relay = (src[i] // g) * g + dst[i] % g
        assert t.link_dst[path[1]] == t.gpus[relay] and t.link_src[path[2]] == t.gpus[relay]
        assert nic_of[t.link_dst[path[2]]] == (dst[i] % g) % planes == nic_of[t.link_src[path[-1]]]


def test_dual_plane_needs_no_relay_a_flow_keeps_its_port_index():
    t = FABRICS["dual-plane"]()
    assert t.facts.planes == 2 and t.facts.pxn  # PXN for crossing rails (rail-optimized), not planes
    src, dst = np.array([0, 0, 3]), np.array([8, 9, 20])
    for key in range(4):  # key picks the port (hostio: (key + key // 8) mod 2) on both ends
        ip, lk = t.routes(src, dst, np.full(3, key))
        nics = [t.link_dst[lk[ip[i]:ip[i + 1]]] for i in range(3)]
        planes = {int(p) for path in nics for p in nic_plane(t)[path] if p >= 0}
        assert planes == {(key + key // 8) % 2}
    ok = fat_tree(hgx_h100(), 8, [Tier("leaf", down=8, up=8), Tier("spine", down=16)], nic_bw=25e9,
                  nics_per_gpu=2, planes=2, pxn=False, intra_node="nic")  # every GPU has a port in each plane
    assert ok.facts.planes == 2 and not ok.facts.pxn


# ---------------------------------------------------------------- errors
BASE = {"name": "p", "node": {"preset": "hgx-h100"}, "nodes": 16,
        "scale_out": {"nic_bw": "400Gbps", "planes": 8, "tiers": [{"name": "rail", "down": 16}]}}


def _spec(**so):
    data = {**BASE, "scale_out": {**BASE["scale_out"], **so}}
    data["scale_out"] = {k: v for k, v in data["scale_out"].items() if v is not None}
    return build_topology(parse_spec(data, "p.yaml"), "p.yaml")


@pytest.mark.parametrize("so,field,expect", [
    ({"pxn": False}, "scale_out.pxn", "crossing planes needs the NVLink relay"),
    ({"planes": 3}, "scale_out.planes", "expected a divisor of the node's 8 NIC ports"),
    ({"planes": 0}, "scale_out.planes", "positive integer"),
    ({"kind": "rail_only", "planes": 4}, "scale_out.planes", "one rail per NIC port (8); got 4"),
    ({"kind": "rail_only", "planes": None, "rail_optimized": False}, "scale_out.rail_optimized", "by construction"),
    ({"intra_node": "nic"}, "scale_out.intra_node", "every GPU's NIC ports in every plane"),
    ({"kind": "torus"}, "scale_out.kind", "expected one of fat_tree, rail_only, got 'torus'"),
    ({"tiers": [{"name": "rail", "down": 8}]}, "scale_out.tiers", "cannot wire every plane"),
])
def test_bad_planes_are_one_line_errors(so, field, expect):
    with pytest.raises(InputError) as err:
        _spec(**so)
    msg = str(err.value)
    assert msg.startswith(f"p.yaml: {field}: ") and expect in msg and "\n" not in msg


def test_rail_only_spec_and_same_node_traffic_through_nics_refused():
    t = _spec(kind="rail_only", planes=None)
    assert (t.facts.planes, t.facts.rail_only, t.facts.pxn, dict(t.facts.switches)) == (8, True, True, {"rail": 8})
    with pytest.raises(InputError, match="--ll-transport: same-node traffic through the NICs needs"):
        with_intra_node(t, "nic", source="--ll-transport")


# ------------------------------------------------------ bill of materials
def _count(bom, item, tier, col="count"):
    rows = bom[(bom["item"] == item) & (bom["tier"] == tier)]
    assert len(rows) == 1, (item, tier)
    return int(rows.iloc[0][col])


def _closed(bom, switches, cables, radix):
    """Switches per tier, cables per tier pair (fiber: 2 transceivers each), ports used and free."""
    names = list(switches)
    links = [f"nic-{names[0]}"] + [f"{a}-{b}" for a, b in zip(names, names[1:])]
    for name, n in switches.items():
        assert _count(bom, "switch", name) == n
    for link, n in zip(links, cables):
        assert _count(bom, "cable", link) == n and _count(bom, "transceiver", link) == 2 * n
    used = [cables[i] + (cables[i + 1] if i + 1 < len(cables) else 0) for i in range(len(names))]
    for name, u in zip(names, used):
        assert _count(bom, "switch", name, "ports_used") == u
        assert _count(bom, "switch", name, "ports_free") == switches[name] * radix - u


@pytest.mark.parametrize("planes,k", [(2, 8), (4, 8), (8, 8), (8, 16)])
def test_multi_plane_two_tier_closed_form(planes, k):
    # P planes, each a full 2-tier k-ary tree: k leaves, k/2 spines, k^2/2 hosts and k^2/2 leaf-spine cables
    nodes = (k * k // 2) * planes // 8  # 8 NIC ports per node, 8/P of them in each plane
    t = fat_tree(hgx_h100(), nodes, two_tier(k), nic_bw=NDR, planes=planes)
    _closed(bill_of_materials(t), {"leaf": planes * k, "spine": planes * k // 2},
            [planes * k * k // 2] * 2, k)
    assert t.n_gpus == planes * k * k // 2


def test_multi_plane_three_tier_closed_form():
    # P = 2 planes of a 3-tier 4-ary tree: per plane k^3/4 = 16 hosts, k^2/2 = 8 leaves, 8 spines, k^2/4 = 4 cores
    t = fat_tree(hgx_h100(), 4, [Tier("leaf", down=2, up=2), Tier("spine", down=2, up=2), Tier("core", down=4)],
                 nic_bw=NDR, planes=2)
    _closed(bill_of_materials(t), {"leaf": 16, "spine": 16, "core": 8}, [32, 32, 32], 4)


def test_deepseek_mpft_matches_the_paper():
    # arXiv:2505.09343 §5.1 and its topology table: MPFT, 16,384 endpoints, 768 switches (8 planes of a
    # 2-tier 64-port tree: 64 leaves + 32 spines each); 2,048 leaf-spine cables per plane
    t = load_topology(TOPOLOGIES / "deepseek-v3-mpft.yaml")
    assert t.n_gpus == 16384 and t.facts.planes == 8
    _closed(bill_of_materials(t), {"leaf": 512, "spine": 256}, [16384, 16384], 64)
    assert sum(t.facts.switches.values()) == 768


def test_alibaba_hpn_pod_counts():
    # 15 segments x 128 hosts x 8 GPUs; per plane 15 x 8 rail ToRs with 60 uplinks each to 60 aggregation
    # switches; every NIC's 2 ports on ToRs of the two planes; 8 spare down ports per ToR stay free
    t = load_topology(TOPOLOGIES / "alibaba-hpn-pod.yaml")
    b = bill_of_materials(t)
    assert t.n_gpus == 15360 and t.facts.planes == 2
    assert _count(b, "switch", "leaf") == 240 and _count(b, "switch", "spine") == 120
    assert _count(b, "cable", "nic-leaf") == 1920 * 16 and _count(b, "cable", "leaf-spine") == 240 * 60
    assert _count(b, "switch", "leaf", "ports_free") == 240 * 8
    assert t.facts.oversubscription["leaf"] == pytest.approx(128 * 200 / (60 * 400), abs=1e-4)


@pytest.mark.parametrize("node,nodes,radix", [(hgx_h100, 64, 64), (hgx_h100, 48, 64), (gb200_nvl72, 4, 8)])
def test_rail_only_one_switch_per_rail_closed_form(node, nodes, radix):
    # R rails (R = GPUs per node, one NIC each) of S-port switches, N <= S nodes: R switches, R x N cables
    n = node()
    t = fat_tree(n, nodes, [Tier("rail", down=radix)], nic_bw=NDR, planes=n.n_gpus, rail_only=True)
    R = n.n_gpus
    b = bill_of_materials(t)
    assert _count(b, "switch", "rail") == R and _count(b, "cable", "nic-rail") == R * nodes
    assert _count(b, "switch", "rail", "ports_used") == R * nodes
    assert _count(b, "switch", "rail", "ports_free") == R * (radix - nodes)
    assert not (b["tier"].str.contains("-spine")).any()


def test_rail_only_with_clos_rails_closed_form():
    # a rail of N NIC ports over S-port switches when N > S: 2N/S leaves and N/S spines per rail
    R, N, S = 8, 16, 8
    t = FABRICS["rail-only-clos"]()
    _closed(bill_of_materials(t), {"leaf": R * 2 * N // S, "spine": R * N // S}, [R * N, R * N], S)


def test_multi_plane_with_one_plane_per_nic_is_the_rail_only_graph():
    a = fat_tree(hgx_h100(), 16, two_tier(8), nic_bw=NDR, planes=8)
    b = FABRICS["rail-only-clos"]()
    for col in ("link_src", "link_dst", "link_bw", "link_width", "node_kind"):
        assert np.array_equal(getattr(a, col), getattr(b, col))
    assert not a.facts.rail_only and b.facts.rail_only


# 2-tier vs 3-tier (and multi-plane, rail-only) at equal GPU counts: the design studies' 4,096-GPU fabrics
STUDIES_4K = {  # file: fabric switches per tier, cables per level
    "fat_tree_2tier_4k.yaml": ({"leaf": 64, "spine": 32}, [4096, 4096], 128),
    "fat_tree_3tier_4k.yaml": ({"leaf": 128, "spine": 128, "core": 64}, [4096, 4096, 4096], 64),
    "multi_plane_4k.yaml": ({"leaf": 128, "spine": 64}, [4096, 4096], 64),
    "rail_only_4k.yaml": ({"leaf": 64, "spine": 32}, [4096, 4096], 128),
}


@pytest.mark.parametrize("name", sorted(STUDIES_4K))
def test_studies_at_4096_gpus_closed_forms(name, capsys):
    # k-ary closed forms: a 2-tier tree of 128-port switches holds 128^2/2 = 8,192 hosts (here 4,096: 64
    # leaves, 32 spines); a 3-tier one of 64-port switches, the SuperPOD RA's 16 SUs (128, 128, 64); 8
    # planes of 512 hosts on 64-port switches: 16 leaves and 8 spines each
    from netsim.cli import main

    t = load_topology(TOPOLOGIES / "studies" / name)
    switches, cables, radix = STUDIES_4K[name]
    assert t.n_gpus == 4096 and t.facts.bisection_Bps == 4096 * NDR / 2  # full bisection, every one
    _closed(bill_of_materials(t), switches, cables, radix)
    assert main(["topo", str(TOPOLOGIES / "studies" / name), "--bom"]) == 0
    assert "bill of materials" in capsys.readouterr().out
