"""NICs as hardware has them: several per GPU, shared by GPUs, behind PCIe switches (issue 14 item 2).

Closed forms use the marginal time of nccl-tests' ring all-reduce: T(2S) - T(S) removes every
size-independent term (latencies, launch overheads), leaving 2(n-1)/n * S / B, where B is the
narrowest per-node capacity the ring's node crossings share: NICs x port rate x IB efficiency, or
GPUs x PCIe link when PCIe is narrower.  Ring channels cross nodes on NIC c (PXN), so 16 channels
use all 16 ports of 8 GPUs x 2 NICs.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from netsim.perftests import bench
from netsim.cli import main
from netsim.topology.hostio import NicLayout, pcie_Bps
from netsim.topology.model import LINK_KINDS, NODE_KINDS
from netsim.topology.spec import build_topology, load_topology, parse_spec

ROOT = Path(__file__).resolve().parents[1]
IB_EFF = 0.96  # DEFAULT_EFFICIENCY["ib"]
S = 256 << 20


def topo(nodes=2, **scale_out):
    so = {"nic_bw": "100Gbps", "pcie_bw": "gen4x16", "rail_optimized": True,
          "tiers": [{"name": "leaf", "down": 2, "up": 2}, {"name": "spine", "down": 16}], **scale_out}
    return build_topology(parse_spec({"node": {"preset": "hgx-a100"}, "nodes": nodes, "scale_out": so}, "t.yaml"),
                          "t.yaml")


def marginal_Bps(t, n=16) -> float:
    """Per-node bandwidth B the ring all-reduce's marginal time implies: dT = 2(n-1)/n * S / B."""
    a, b = (bench(t, "all_reduce", [s], algo="ring", channels=16, protocol="Simple")[0] for s in (S, 2 * S))
    return 2 * (n - 1) / n * S / ((b.time_us - a.time_us) * 1e-6)


def test_pcie_rates_from_the_spec():
    # 16 GT/s x 16 lanes x 128/130 / 8; reference.md 2.2 lists Gen4 31, Gen5 63, Gen6 121 GB/s
    assert pcie_Bps(4) == pytest.approx(16e9 * 16 * 128 / 130 / 8, rel=1e-12)
    assert pcie_Bps(5) == pytest.approx(2 * pcie_Bps(4), rel=1e-12)
    for gen, ref in ((4, 31), (5, 63), (6, 121)):
        assert abs(pcie_Bps(gen) / 1e9 - ref) / ref < 0.02
    assert pcie_Bps(4, 8) == pytest.approx(pcie_Bps(4) / 2, rel=1e-12)


def test_one_nic_per_gpu_matches_nic_capacity():
    assert marginal_Bps(topo()) == pytest.approx(8 * 12.5e9 * IB_EFF, rel=1e-6)


def test_shared_nic_halves_per_gpu_bandwidth():
    one, shared = topo(), topo(gpus_per_nic=2)
    assert shared.facts.scaleout_Bps_per_gpu == one.facts.scaleout_Bps_per_gpu / 2
    assert marginal_Bps(shared) == pytest.approx(4 * 12.5e9 * IB_EFF, rel=1e-6)
    assert marginal_Bps(shared) == pytest.approx(marginal_Bps(one) / 2, rel=1e-6)
    # all-to-all (direct): every GPU's remote bytes cross a NIC shared by two GPUs
    a2a = [bench(t, "alltoall", [S])[0].time_us for t in (one, shared)]
    assert a2a[1] / a2a[0] == pytest.approx(2, rel=2e-3)


def test_two_nics_per_gpu_double_it():
    one, two = topo(), topo(nics_per_gpu=2, tiers=[{"name": "leaf", "down": 2, "up": 2},
                                                  {"name": "spine", "down": 32}])
    assert two.facts.scaleout_Bps_per_gpu == 2 * one.facts.scaleout_Bps_per_gpu
    assert marginal_Bps(two) == pytest.approx(16 * 12.5e9 * IB_EFF, rel=1e-6)
    assert marginal_Bps(two) == pytest.approx(2 * marginal_Bps(one), rel=1e-6)
    # direct all-to-all: every send runs on NCCL p2p channels, keyed by channel id (alternate
    # channels alternate ports, topo.cc:2067-2070), so both ports carry half: 2x (it was 1.6x
    # while the keys were peer offsets)
    a2a = [bench(t, "alltoall", [S])[0].time_us for t in (one, two)]
    assert a2a[0] / a2a[1] == pytest.approx(2.0, rel=5e-3)


def test_pcie_caps_apply():
    tiers = [{"name": "leaf", "down": 2, "up": 2}, {"name": "spine", "down": 32}]
    # the GPU's own link: 2 x 200G ports (50 GB/s) behind a 20 GB/s GPU link
    gpu_cap = topo(nics_per_gpu=2, nic_bw="200Gbps", pcie_bw="20GB/s", tiers=tiers)
    assert gpu_cap.facts.pcie_Bps_per_gpu == 20e9
    assert marginal_Bps(gpu_cap) == pytest.approx(8 * 20e9, rel=1e-6)
    # the NIC's link to its switch: a 400G NIC shared by 2 GPUs behind a Gen4 x8 link
    nic_cap = topo(gpus_per_nic=2, nic_bw="400Gbps", pcie_switch={"nic_bw": "gen4x8"})
    assert nic_cap.facts.pcie_Bps_per_gpu == pytest.approx(pcie_Bps(4, 8) / 2)
    assert marginal_Bps(nic_cap) == pytest.approx(4 * pcie_Bps(4, 8), rel=1e-6)
    # a wide enough PCIe path does not cap: same as without switches
    assert marginal_Bps(topo(pcie_switch={"gpus": 1})) == pytest.approx(marginal_Bps(topo()), rel=1e-9)


def _kinds(t, links):
    return [(NODE_KINDS[t.node_kind[t.link_src[l]]], NODE_KINDS[t.node_kind[t.link_dst[l]]],
             LINK_KINDS[t.link_kind[l]]) for l in links]


def test_rails_follow_nics_and_flows_spread_by_key():
    t = topo(nics_per_gpu=2, tiers=[{"name": "leaf", "down": 2, "up": 2}, {"name": "spine", "down": 32}])
    r = t.router
    # NIC j of every node on leaf j (2 nodes per leaf: one rail per leaf)
    leaf_of = r.pos // r.levels[0].M
    assert leaf_of.tolist() == np.tile(np.arange(16), 2).tolist()
    # keys c and c + 8 (ring channels crossing on one GPU) and keys c, c + 1 take different ports
    nics = r.nic(np.array([3, 3, 3, 3]), np.array([0, 8, 1, 9])).tolist()
    assert nics[0] != nics[1] and nics[0] != nics[2] and set(nics) <= {6, 7}
    # a rail-aligned flow stays under its leaf: GPU 3 -> GPU 11 (same rail) never reaches a spine
    for key in range(4):
        kinds = _kinds(t, t.route(3, 11, key))
        assert [k for k in kinds if "spine" in k[:2]] == []
        assert kinds[0] == ("gpu", "switch", "pcie") and kinds[-1] == ("switch", "gpu", "pcie")


def test_intra_node_through_the_nic():
    t = topo(gpus_per_nic=2, intra_node="nic")
    assert t.facts.intra_node == "nic"
    loop = _kinds(t, t.route(0, 1))  # shared NIC: loops back inside it
    assert loop == [("gpu", "switch", "pcie"), ("switch", "nic", "pcie"), ("nic", "switch", "pcie"),
                    ("switch", "gpu", "pcie")]
    assert "nvlink" not in {k[2] for k in _kinds(t, t.route(0, 2))}
    assert "ib" in {k[2] for k in _kinds(t, t.route(0, 2))}
    nv = topo(gpus_per_nic=2)
    assert {k[2] for k in _kinds(nv, nv.route(0, 2))} == {"nvlink"}
    # 8 GPUs of one node all-to-all through 4 NICs: far slower than over NVLink
    a, b = (bench(x, "alltoall", [S], gpus=8)[0].time_us for x in (nv, t))
    assert b > 10 * a


def test_layout_rules():
    with pytest.raises(ValueError, match="not both"):
        NicLayout(8, nics_per_gpu=2, gpus_per_nic=2, gpus_per_switch=2)
    with pytest.raises(ValueError, match="PCIe switch"):
        NicLayout(8, gpus_per_nic=2)
    assert NicLayout.default(8).switches == 0 and NicLayout.default(8, 2).switches == 8


@pytest.mark.parametrize("path, nics_per_gpu, gpus_per_nic, per_gpu", [
    ("topologies/gb300-nvl72-2x400g.yaml", 2, 1, 100e9),
    ("topologies/p4d-a100-shared-nic.yaml", 1, 2, 6.25e9),
])
def test_shipped_multi_nic_topologies(path, nics_per_gpu, gpus_per_nic, per_gpu, capsys):
    t = load_topology(ROOT / path)
    f = t.facts
    assert (f.nics_per_gpu, f.gpus_per_nic, f.scaleout_Bps_per_gpu) == (nics_per_gpu, gpus_per_nic, per_gpu)
    assert (t.node_kind == NODE_KINDS.index("nic")).sum() == t.n_gpus * nics_per_gpu // gpus_per_nic
    assert main(["topo", str(ROOT / path)]) == 0
    assert re.search(r"NICs\s+\d", capsys.readouterr().out)


BASE = """node: {preset: hgx-a100}
nodes: 2
scale_out:
  tiers: [{name: leaf, down: 16, up: 16}, {name: spine, down: 32}]
"""


@pytest.mark.parametrize("extra, field, needle", [
    ("  nics_per_gpu: 0\n", "scale_out.nics_per_gpu", "positive integer"),
    ("  nics_per_gpu: 2\n  gpus_per_nic: 2\n", "scale_out.gpus_per_nic", "not both"),
    ("  gpus_per_nic: 3\n", "scale_out.gpus_per_nic", "divisor"),
    ("  gpus_per_nic: 2\n  pcie_switch: {gpus: 3}\n", "scale_out.pcie_switch.gpus", "divisor"),
    ("  pcie_bw: gen9x16\n", "scale_out.pcie_bw", "genNxL"),
    ("  pcie_switch: {nic_bw: gen4x3}\n", "scale_out.pcie_switch.nic_bw", "genNxL"),
    ("  pcie_switch: {lanes: 16}\n", "scale_out.pcie_switch.lanes", "unknown key"),
    ("  intra_node: pcie\n", "scale_out.intra_node", "nvlink, nic"),
])
def test_bad_nic_values_one_line_exit_2(tmp_path, capsys, extra, field, needle):
    p = tmp_path / "bad.yaml"
    p.write_text(BASE + extra)
    assert main(["topo", str(p)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert str(p) in err and field in err and needle in err, err
