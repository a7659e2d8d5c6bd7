"""InfiniBand fabrics routed as their subnet manager routes them (``ftree``), RoCE by hashing (``ecmp``)."""

import numpy as np
import pytest

from netsim.errors import InputError
from netsim.topology.builders import hgx_h100
from netsim.topology.fattree import Tier, fat_tree
from netsim.topology.model import LINK_KINDS
from netsim.topology.policy import with_intra_node, with_routing
from netsim.topology.spec import load_topology

FULL = {  # full-bisection fat-trees: 2 tiers, 2 tiers with parallel links, 3 tiers
    "2tier": (4, [Tier("leaf", down=8, up=8), Tier("spine", down=4)]),
    "2tier-parallel": (4, [Tier("leaf", down=8, up=8), Tier("spine", down=8)]),
    "3tier": (8, [Tier("leaf", down=8, up=8), Tier("spine", down=8, up=8), Tier("core", down=8)]),
}


def _worst_shift_load(topo) -> float:
    """Most flows per physical fabric link over every shift permutation of the hosts (in the
    order the subnet manager indexes them: leaf, then port)."""
    order = np.argsort(topo.router.pos)  # the rank whose NIC sits at each position
    n = order.size
    fabric = topo.link_kind == LINK_KINDS.index("ib")
    worst = 0.0
    for c in range(1, n):
        _, links = topo.routes(order, order[(np.arange(n) + c) % n])
        load = np.bincount(links, minlength=topo.n_links) / topo.link_width
        worst = max(worst, float(load[fabric].max()))
    return worst


def _tree(name, routing, rail=False):
    nodes, tiers = FULL[name]
    t = fat_tree(hgx_h100(), nodes, tiers, nic_bw=50e9, rail_optimized=rail, pxn=False, routing=routing)
    return with_intra_node(t, "nic")  # every pair through the NICs: the hosts are the NICs


@pytest.mark.parametrize("name,rail", [(n, False) for n in sorted(FULL)] + [("3tier", True)])
def test_ftree_shift_permutations_load_every_link_at_most_once(name, rail):
    # fully populated leaves (rail optimisation on 8 nodes of 8 NICs fills every leaf port)
    # OpenSM's ftree "optimizes routing of fat-trees for congestion-free 'shift' communication pattern"
    assert _worst_shift_load(_tree(name, "ftree", rail)) == 1.0


def test_ecmp_shift_permutations_collide():
    # the property is ftree's, not any routing's: hashing puts several flows on one link
    assert _worst_shift_load(_tree("2tier", "ecmp")) > 1.0


def test_ftree_routes_by_destination_only():
    t = with_intra_node(fat_tree(hgx_h100(), 16, FULL["3tier"][1], nic_bw=50e9, rail_optimized=False),
                        "nic")  # two pods
    assert t.routing == "ftree"
    n = t.n_gpus
    rng = np.random.default_rng(3)
    src = rng.integers(0, n, 400)
    dst = np.full(400, 37)
    keep = src // 8 != 37 // 8
    ip, lk = t.routes(src[keep], dst[keep], rng.integers(0, 64, keep.sum()))
    # from the top switch down, the path is the destination's: the same spine -> leaf -> NIC -> GPU
    # for every source and key (same pod or not)
    lengths = np.diff(ip)
    assert set(lengths.tolist()) >= {6, 8}
    tails = {tuple(lk[ip[i + 1] - 3:ip[i + 1]].tolist()) for i in range(lengths.size)}
    assert len(tails) == 1


def test_fabric_sets_the_default_routing(tmp_path):
    ib = load_topology("topologies/h100-superpod-1024.yaml")
    roce = load_topology("topologies/llama3-24k.yaml")
    assert (ib.facts.fabric, ib.routing) == ("infiniband", "ftree")
    assert (roce.facts.fabric, roce.routing) == ("roce", "ecmp")
    text = (tmp_path / "t.yaml")
    base = ("name: t\nnode: {{preset: hgx-h100}}\nnodes: 4\nscale_out:\n  kind: fat_tree\n{extra}  tiers:\n"
            "    - {{name: leaf, down: 32, up: 32}}\n    - {{name: spine, down: 64}}\n")
    text.write_text(base.format(extra=""))
    assert load_topology(text).routing == "ftree"  # InfiniBand unless said otherwise
    text.write_text(base.format(extra="  fabric: roce\n"))
    assert load_topology(text).routing == "ecmp"
    text.write_text(base.format(extra="  fabric: roce\n  routing: ftree\n"))
    assert load_topology(text).routing == "ftree"
    text.write_text(base.format(extra="  fabric: ethernet\n"))
    with pytest.raises(InputError, match="scale_out.fabric.*expected one of infiniband, roce"):
        load_topology(text)
    assert with_routing(ib, "ecmp").routing == "ecmp"


def test_topo_shows_fabric_and_routing(capsys):
    from netsim.cli import main

    assert main(["topo", "topologies/h100-superpod-1024.yaml"]) == 0
    assert "routing       ftree (InfiniBand fabric)" in capsys.readouterr().out
    assert main(["topo", "topologies/llama3-24k.yaml"]) == 0
    assert "routing       ecmp (RoCE fabric)" in capsys.readouterr().out


def test_every_shipped_fat_tree_names_its_fabric():
    import pathlib

    import yaml

    for path in sorted(pathlib.Path("topologies").glob("*.yaml")):
        so = yaml.safe_load(path.read_text()).get("scale_out")
        if so is not None:
            assert so.get("fabric") in ("infiniband", "roce"), path


def test_ftree_all_to_all_equals_spraying():
    # a balanced all-to-all: every up link carries an equal share of the destinations, as spraying
    from netsim.perftests import bench

    t = fat_tree(hgx_h100(), 16, [Tier("leaf", down=16, up=16), Tier("spine", down=16)], nic_bw=50e9,
                 rail_optimized=False)  # top-of-rack: an all-to-all crosses the spines
    got = {r: bench(t, "alltoall", [16 << 20], routing=r)[0].time_us for r in ("ftree", "spray", "ecmp")}
    assert got["ftree"] == pytest.approx(got["spray"], rel=0.02)
    assert got["ecmp"] > got["ftree"] * 1.05


def test_ftree_routes_around_failed_links():
    from netsim.workload.fault_routing import FaultRouter

    t = load_topology("topologies/h100-superpod-1su.yaml")
    ip, lk = t.routes(np.array([0]), np.array([255]))
    failed = np.zeros(t.n_links, dtype=bool)
    failed[lk[ip[0] + 3]] = True  # the leaf -> spine link of that path
    r = FaultRouter(t, failed, 256)
    ip2, lk2 = r.routes(np.array([0]), np.array([255]))
    assert not failed[lk2].any() and lk2.size == lk.size


def test_rail_optimized_all_to_all_is_no_slower_than_top_of_rack():
    # with PXN (NVLink to the GPU on the destination's rail first) and ftree routing, a rail-optimized
    # fabric carries an all-to-all as fast as a top-of-rack one built of the same switches
    from netsim.perftests import bench
    from netsim.topology.overrides import load_topology_set

    times = {}
    for rail in ("true", "false"):
        topo = load_topology_set("topologies/studies/fat_tree_3tier.yaml", [f"scale_out.rail_optimized={rail}"])
        times[rail] = bench(topo, "alltoall", [16 << 20], gpus=512)[0].time_us
    assert times["true"] <= times["false"] * (1 + 1e-9), times


@pytest.mark.parametrize("seed,ftree_us,ecmp_us", [(0, 1073.7, 729.6), (5, 1035.5, 843.0)])
def test_ftree_loses_to_hashing_on_a_random_placement(seed, ftree_us, ecmp_us):
    # destination routing balances regular patterns, not random jobs: docs/topology.md states these figures
    from test_routing_network import run

    got = {r: run(r, "alltoall", 16 << 20, seed)[0].time * 1e6 for r in ("ftree", "ecmp")}
    assert got["ftree"] == pytest.approx(ftree_us, abs=0.05) and got["ecmp"] == pytest.approx(ecmp_us, abs=0.05)
