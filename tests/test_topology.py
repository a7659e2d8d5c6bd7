"""Builders, routing and derived figures of the topology model."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from netsim.topology.builders import dgx1_v100, gb200_nvl72, hgx_a100, hgx_h100, nvlink_box4, nvlink_mesh, nvswitch_domain
from netsim.topology.fattree import Tier, fat_tree
from netsim.topology.model import NODE_KINDS, csr_gather
from netsim.topology.multidim import Dim, multi_dim


def assert_routes_valid(topo, src, dst, key=None):
    """Every path starts at src's GPU, ends at dst's GPU and is connected link to link."""
    indptr, links = topo.routes(src, dst, key)
    for i, (s, d) in enumerate(zip(src.tolist(), dst.tolist())):
        path = links[indptr[i]:indptr[i + 1]]
        if s == d:
            assert path.size == 0
            continue
        assert path.size > 0
        assert topo.link_src[path[0]] == topo.gpus[s]
        assert topo.link_dst[path[-1]] == topo.gpus[d]
        assert np.all(topo.link_dst[path[:-1]] == topo.link_src[path[1:]])
        assert len(set(path.tolist())) == path.size
    return indptr, links


def all_pairs(n):
    i = np.arange(n)
    return np.repeat(i, n), np.tile(i, n)


# ------------------------------------------------------------------ scale-up
def test_dgx1_cube_mesh_counts_and_capacities():
    t = dgx1_v100()
    assert (t.n_gpus, t.n_links) == (8, 32)
    out = np.bincount(t.link_src, weights=t.link_bw, minlength=8)
    assert np.allclose(out, 150e9)  # 6 NVLink2 x 25 GB/s per GPU
    assert int(t.link_width.sum()) == 48
    assert t.facts.bisection_Bps == pytest.approx(150e9)
    assert_routes_valid(t, *all_pairs(8))
    # 0 and 5 are not adjacent: two equal-cost 2-hop paths (via 1 or via 4)
    assert t.router.path_choices(0, 5) == 2
    assert t.route(0, 5).size == 2


def test_nvswitch_domain_link_ids_and_bandwidth():
    t = nvswitch_domain(4, links_per_gpu=18, link_bw=25e9, nvls=True)
    assert t.n_links == 8 and t.facts.nvls is True
    assert np.allclose(t.link_bw, 450e9)
    assert t.route(1, 2).tolist() == [1, 6]
    assert t.facts.bisection_Bps == pytest.approx(2 * 450e9)


@pytest.mark.parametrize("build,gpus,per_gpu,bisection", [
    (hgx_a100, 8, 300e9, 4 * 300e9), (hgx_h100, 8, 450e9, 4 * 450e9),
    (gb200_nvl72, 72, 900e9, 36 * 900e9), (nvlink_box4, 4, 150e9, 4 * 50e9),
])
def test_presets(build, gpus, per_gpu, bisection):
    t = build()
    assert t.n_gpus == gpus
    assert t.facts.scaleup_Bps_per_gpu == pytest.approx(per_gpu)
    assert t.facts.bisection_Bps == pytest.approx(bisection)


def test_mesh_rejects_bad_pairs():
    with pytest.raises(ValueError):
        nvlink_mesh(2, [(0, 0, 1)], link_bw=1e9)
    with pytest.raises(ValueError, match="unreachable"):
        nvlink_mesh(3, [(0, 1, 1)], link_bw=1e9)


# ------------------------------------------------------------------ fat-tree
def small_fat_tree(rail=True, nodes=4, pxn=None):
    return fat_tree(hgx_h100(), nodes, [Tier("leaf", down=4, up=4, up_bw=50e9), Tier("spine", down=8)],
                    nic_bw=50e9, rail_optimized=rail, pxn=pxn)


def test_fat_tree_counts_by_hand():
    t = small_fat_tree()
    # 4 nodes x 8 GPUs = 32 NICs; leaves of 4 down ports -> 8 leaves; 8 x 4 uplinks over
    # 8-port spines -> 4 spines with 1 link per leaf
    assert t.facts.switches == {"leaf": 8, "spine": 4}
    kinds = np.bincount(t.node_kind, minlength=len(NODE_KINDS))
    assert kinds[NODE_KINDS.index("gpu")] == 32 and kinds[NODE_KINDS.index("nic")] == 32
    assert kinds[NODE_KINDS.index("nvswitch")] == 4
    # 16 NVLink per node, 2x32 PCIe, 2x32 NIC-leaf, 2 x 8 leaves x 4 spines
    assert t.n_links == 4 * 16 + 64 + 64 + 64
    ib = t.link_kind == 2
    assert np.allclose(t.link_bw[ib], 50e9)
    assert t.facts.oversubscription == {"leaf": 1.0}
    assert t.facts.bisection_Bps == pytest.approx(16 * 50e9)


def test_fat_tree_parallel_links_and_oversubscription():
    # 2 leaves x 8 uplinks into 16-port spines: p = 8 links per leaf-spine pair, 1 spine
    t = fat_tree(hgx_h100(), 2, [Tier("leaf", down=8, up=4, up_bw=50e9), Tier("spine", down=16)],
                 nic_bw=50e9, rail_optimized=False)
    assert t.facts.switches == {"leaf": 2, "spine": 1}
    rail = fat_tree(hgx_h100(), 2, [Tier("leaf", down=8, up=4, up_bw=50e9), Tier("spine", down=16)],
                    nic_bw=50e9, rail_optimized=True)
    assert rail.facts.switches == {"leaf": 8, "spine": 2}  # one leaf per rail
    assert t.facts.oversubscription == {"leaf": 2.0}
    up = (t.link_kind == 2) & (t.link_width == 4)
    assert np.allclose(t.link_bw[up], 4 * 50e9)
    assert t.facts.bisection_Bps == pytest.approx(4 * 50e9)


def test_rail_optimized_placement():
    rail, tor = small_fat_tree(True), small_fat_tree(False)
    leaf = lambda t, r: t.link_dst[t.route(r, (r + 8) % 32)[1]]
    # rail: GPU 0 of node 0 and GPU 0 of node 1 share a leaf; ToR: node 0's GPUs share one
    assert leaf(rail, 0) == rail.link_src[rail.route(8, 0)[2]]
    assert leaf(tor, 0) == leaf(tor, 3)
    assert leaf(rail, 0) != leaf(rail, 1)
    # same rail, different node -> leaf only (4 links); different rail -> through a spine
    assert rail.route(0, 8).size == 4 and rail.route(0, 9).size == 6


def test_pxn_keeps_inter_node_traffic_on_the_destination_rail():
    t = small_fat_tree()  # rail-optimized: PXN on by default
    path = t.route(0, 9)  # node 0 GPU 0 -> node 1 GPU 1
    names = [t.link_name(int(x)) for x in path]
    assert names[0].startswith("gpu0->nvswitch") and names[1] == "nvswitch0->gpu1"
    assert names[2] == "gpu1->nic1" and "spine" not in "".join(names)
    plain = small_fat_tree(pxn=False).route(0, 9)
    assert any("spine" in small_fat_tree(pxn=False).link_name(int(x)) for x in plain)


def test_fat_tree_routes_connected_and_up_down():
    t = small_fat_tree(pxn=False)
    src, dst = all_pairs(32)
    indptr, links = assert_routes_valid(t, src, dst)
    level = {"gpu": 0, "nvswitch": 1, "nic": 1, "leaf": 2, "spine": 3}
    for i in range(src.size):
        path = links[indptr[i]:indptr[i + 1]]
        if not path.size:
            continue
        nodes = [t.link_src[path[0]]] + t.link_dst[path].tolist()
        lv = [level[t.kind_of_node(n)] for n in nodes]
        peak = int(np.argmax(lv))
        assert lv[:peak + 1] == sorted(lv[:peak + 1]) and lv[peak:] == sorted(lv[peak:], reverse=True)


def test_three_tier_routes_and_diameter():
    tiers = [Tier("leaf", down=4, up=4, up_bw=50e9), Tier("spine", down=4, up=4, up_bw=50e9),
             Tier("core", down=8)]
    t = fat_tree(hgx_h100(), 8, tiers, nic_bw=50e9, pxn=False)
    assert t.facts.switches == {"leaf": 16, "spine": 16, "core": 8}
    assert_routes_valid(t, *all_pairs(64))
    lengths = np.diff(t.routes(*all_pairs(64))[0])
    assert lengths.max() == t.facts.diameter_hops == 8


def test_ecmp_spreads_evenly():
    t = fat_tree(hgx_h100(), 4, [Tier("leaf", down=4, up=4, up_bw=50e9), Tier("spine", down=8)],
                 nic_bw=50e9, rail_optimized=False, routing="ecmp")
    n = 40000
    src, dst = np.zeros(n, dtype=np.int64), np.full(n, 31)
    indptr, links = t.routes(src, dst, np.arange(n))
    spine_hop = links[indptr[:-1] + 2]  # leaf -> spine link
    counts = np.unique(spine_hop, return_counts=True)[1]
    assert counts.size == 4
    assert np.all(np.abs(counts / counts.mean() - 1) < 0.05)


def test_ecmp_is_deterministic():
    t = small_fat_tree()
    a = t.routes(np.arange(32), np.arange(32)[::-1], np.arange(32))
    b = t.routes(np.arange(32), np.arange(32)[::-1], np.arange(32))
    assert np.array_equal(a[1], b[1])


def test_radix_too_small_is_rejected():
    with pytest.raises(ValueError, match="cannot reach"):
        fat_tree(hgx_h100(), 16, [Tier("leaf", down=4, up=4), Tier("spine", down=8)], nic_bw=50e9)
    with pytest.raises(ValueError, match="exceed radix"):
        fat_tree(hgx_h100(), 2, [Tier("leaf", down=40, up=40, radix=64), Tier("spine", down=8)], nic_bw=50e9)


@settings(max_examples=25, deadline=None)
@given(nodes=st.integers(1, 12), down=st.sampled_from([2, 4, 8]), rail=st.booleans(),
       gpus=st.sampled_from([1, 2, 4, 8]))
def test_random_fat_trees_route(nodes, down, rail, gpus):
    node = nvswitch_domain(gpus, links_per_gpu=2, link_bw=25e9)
    tiers = [Tier("leaf", down=down, up=down, up_bw=50e9), Tier("spine", down=down, up=down, up_bw=50e9),
             Tier("core", down=64)]
    t = fat_tree(node, nodes, tiers, nic_bw=50e9, rail_optimized=rail)
    n = t.n_gpus
    rng = np.random.default_rng(nodes)
    src, dst = rng.integers(0, n, 200), rng.integers(0, n, 200)
    assert_routes_valid(t, src, dst, np.arange(200))


# ---------------------------------------------------------------- multi-dim
def test_multidim_ring_switch_routes():
    t = multi_dim([Dim("Switch", 4, 100e9, 100e-9), Dim("Ring", 4, 50e9, 500e-9),
                   Dim("FullyConnected", 3, 25e9, 1e-6)])
    assert t.n_gpus == 48
    indptr, _ = assert_routes_valid(t, *all_pairs(48))
    # NPU 0 -> NPU 4*2 (ring distance 2) -> 2 ring hops; -> 4*3 is 1 hop counter-clockwise
    assert t.route(0, 8).size == 2 and t.route(0, 12).size == 1
    assert t.route(0, 1).size == 2 and t.route(0, 16).size == 1
    assert np.diff(indptr).max() == t.facts.diameter_hops == 2 + 2 + 1


def test_multidim_link_counts():
    t = multi_dim([Dim("Ring", 8, 1e9, 0), Dim("FullyConnected", 4, 1e9, 0), Dim("Switch", 2, 1e9, 0)])
    n = 64
    assert t.n_links == 2 * n + 3 * n + 2 * n
    assert (t.node_kind == NODE_KINDS.index("switch")).sum() == n // 2


# --------------------------------------------------------------------- misc
def test_csr_gather_and_networkx_export():
    ip, d = csr_gather(np.array([0, 1, 3]), np.array([5, 6, 7]), np.array([1, 1]))
    assert ip.tolist() == [0, 2, 4] and d.tolist() == [6, 7, 6, 7]
    pytest.importorskip("networkx")
    g = dgx1_v100().to_networkx()
    assert g.number_of_nodes() == 8 and g.number_of_edges() == 32


def test_networkx_export_without_networkx_names_the_extra(monkeypatch):
    """networkx is the optional extra ``graph``: without it the export says how to get it, in one line."""
    import sys

    monkeypatch.setitem(sys.modules, "networkx", None)  # import networkx now raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'netsim\[graph\]'") as err:
        dgx1_v100().to_networkx()
    assert "\n" not in str(err.value) and err.value.__cause__ is None


def test_memory_of_a_large_fabric():
    tiers = [Tier("leaf", down=32, up=32, up_bw=50e9), Tier("spine", down=32, up=32, up_bw=50e9),
             Tier("core", down=64)]
    t = fat_tree(hgx_h100(), 1024, tiers, nic_bw=50e9)
    assert t.n_gpus == 8192 and t.nbytes() < 8 * 2**20
