"""Stragglers and faults: parsing, seeded draws, slowed compute, jitter, degraded and failed links."""

import numpy as np
import pytest

from netsim.cli import main
from netsim.errors import InputError
from netsim.results.dataset import open_results
from netsim.topology.builders import nvswitch_domain
from netsim.topology.fattree import Tier, fat_tree
from netsim.chakra import write_workload
from netsim.chakra.schema import NodeType
from netsim.chakra.model import EtNode
from netsim.workload.simulation import simulate
from netsim.workload.faults import fault_spec, parse_straggler, plan_faults

COMP, COLL, SEND, RECV = (int(NodeType.COMP_NODE), int(NodeType.COMM_COLL_NODE),
                          int(NodeType.COMM_SEND_NODE), int(NodeType.COMM_RECV_NODE))
NVS = nvswitch_domain(4, links_per_gpu=1, link_bw=1e9, latency=0.0)  # 1 GB/s per GPU


def small_fat_tree():
    """8 GPUs: 4 nodes of 2 under 2 leaves, each leaf with one 25 GB/s link to each of 2 spines."""
    node = nvswitch_domain(2, links_per_gpu=1, link_bw=100e9, latency=0.0)
    return fat_tree(node, 4, [Tier("leaf", down=4, up=2, up_bw=25e9, latency=0.0), Tier("spine", down=2, parallel=1, latency=0.0)],
                    nic_bw=50e9, nic_latency=0.0, pcie_latency=0.0, rail_optimized=False)


def compute_workload(tmp_path, n=4):
    nodes = [EtNode(1, "a", COMP, duration_micros=100, is_cpu_op=False),
             EtNode(2, "b", COMP, data_deps=(1,), duration_micros=30, is_cpu_op=False),
             EtNode(3, "c", COMP, data_deps=(2,), duration_micros=7, is_cpu_op=True)]
    write_workload(tmp_path / "w", [nodes] * n)
    return str(tmp_path / "w")


def p2p_workload(tmp_path, src, dst, nbytes, n):
    per_rank = [[] for _ in range(n)]
    per_rank[src] = [EtNode(1, "s", SEND, comm_dst=dst, comm_tag=1, comm_size=nbytes)]
    per_rank[dst] = [EtNode(1, "r", RECV, comm_src=src, comm_tag=1, comm_size=nbytes)]
    for r in range(n):
        per_rank[r] = per_rank[r] or [EtNode(1, "idle", COMP, duration_micros=1, is_cpu_op=False)]
    write_workload(tmp_path / "p", per_rank)
    return str(tmp_path / "p")


def durations(res, rank):
    return {o[1]: o[5] - o[4] for o in res.ops if o[0] == rank}


def test_parse_straggler():
    assert parse_straggler(" 12:1.25 ") == (12, 1.25)
    for bad in ("3", "a:2", "3:0", "3:-1", "3:x", "-1:2"):
        with pytest.raises(InputError, match="--straggler"):
            parse_straggler(bad)


def test_straggler_slows_compute_by_exactly_factor(tmp_path):
    wl = compute_workload(tmp_path)
    base = simulate(NVS, wl)
    slow = simulate(NVS, wl, stragglers=["2:1.5"])
    for rank in range(4):
        b, s = durations(base, rank), durations(slow, rank)
        factor = 1.5 if rank == 2 else 1.0
        for node in b:
            assert s[node] == pytest.approx(b[node] * factor, rel=1e-12)
    assert slow.compute[2] == pytest.approx(1.5 * base.compute[2]) and slow.compute[0] == base.compute[0]
    ranks = slow.tables()["ranks"]
    assert ranks["compute_scale"].tolist() == [1.0, 1.0, 1.5, 1.0]
    with pytest.raises(InputError, match="not a rank of the workload"):
        simulate(NVS, wl, stragglers=["9:2"])


def test_straggler_cli_and_faults_file(tmp_path, capsys):
    wl = compute_workload(tmp_path)
    faults = tmp_path / "f.yaml"
    faults.write_text("compute:\n  - ranks: [1]\n    factor: 2\n")
    out = tmp_path / "out"
    assert main(["run", "--topology", "topologies/dgx-h100.yaml", "--workload", wl, "--straggler", "0:1.25",
                 "--straggler", "1:1.5", "--faults", str(faults), "--out", str(out)]) == 0
    res = open_results(out)
    assert res.ranks.sort_values("rank")["compute_scale"].tolist() == [1.25, 3.0, 1.0, 1.0]
    assert res.runs.loc[0, "stragglers"] == "[[0,1.25],[1,1.5]]" and res.runs.loc[0, "faults.compute"]
    faults.write_text("compute:\n  - ranks: [1]\n    factor: -2\n")
    capsys.readouterr()
    assert main(["run", "--topology", "topologies/dgx-h100.yaml", "--workload", wl, "--faults", str(faults)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "compute[0].factor: expected a positive number" in err


def test_seeded_host_fraction_and_distribution():
    topo = nvswitch_domain(8, links_per_gpu=1, link_bw=1e9)  # gpus_per_node 8
    spec = {"compute": [{"fraction": 0.25, "unit": "host", "factor": 1.1}]}
    plan = plan_faults(fault_spec(spec, seed=3), topo, 64)  # 8 hosts of 8 ranks (by gpus_per_node)
    slow = np.flatnonzero(plan.compute_scale != 1.0)
    assert slow.size == 16 and np.unique(slow // 8).size == 2 and np.allclose(plan.compute_scale[slow], 1.1)
    again = plan_faults(fault_spec(spec, seed=3), topo, 64)
    assert np.array_equal(plan.compute_scale, again.compute_scale)
    others = {tuple(np.flatnonzero(plan_faults(fault_spec(spec, seed=s), topo, 64).compute_scale != 1) // 8)
              for s in range(10)}
    assert len(others) > 1  # the seed picks the hosts
    dist = {"compute": [{"distribution": {"lognormal": {"sigma": 0.05}}, "min": 1.0}]}
    a = plan_faults(fault_spec(dist, seed=1), topo, 64).compute_scale
    assert (a >= 1.0).all() and np.unique(a).size > 10
    assert np.array_equal(a, plan_faults(fault_spec(dist, seed=1), topo, 64).compute_scale)
    assert not np.array_equal(a, plan_faults(fault_spec(dist, seed=2), topo, 64).compute_scale)
    # adding a rule does not change what an earlier rule drew
    both = plan_faults(fault_spec({"compute": dist["compute"] + [{"ranks": [0], "factor": 2.0}]}, seed=1), topo, 64)
    assert np.allclose(both.compute_scale[1:], a[1:])


def test_launch_jitter_delays_first_node(tmp_path):
    wl = compute_workload(tmp_path)
    faults = {"launch_jitter": [{"ranks": [3], "delay": "40us"},
                                {"distribution": {"uniform": {"low": "1us", "high": "2us"}}, "max": "1.5us"}]}
    res = simulate(NVS, wl, faults=faults, seed=5)
    delay = res.run.launch_delay
    assert (delay[:3] >= 1e-6).all() and (delay[:3] <= 1.5e-6).all() and 41e-6 <= delay[3] <= 41.5e-6 + 1e-15
    first = {r: min(o[4] for o in res.ops if o[0] == r) for r in range(4)}
    assert [first[r] for r in range(4)] == pytest.approx(delay.tolist())
    # idle = the launch delay plus the 7 us CPU node (CPU work is neither GPU compute nor communication)
    assert res.tables()["ranks"]["idle_ns"].to_numpy() == pytest.approx((delay + 7e-6) * 1e9, abs=1e-6)


def test_degraded_link_slows_a_transfer_crossing_it(tmp_path):
    wl = p2p_workload(tmp_path, 0, 1, 10_000_000, 4)
    base = simulate(NVS, wl)
    half = simulate(NVS, wl, faults={"links": [{"match": {"link": "gpu0->nvswitch0"}, "factor": 0.5,
                                                "both_directions": False}]})
    other = simulate(NVS, wl, faults={"links": [{"match": {"link": "gpu2<->nvswitch0"}, "factor": 0.5}]})
    assert base.finish[1] == pytest.approx(10e-3)
    assert half.finish[1] == pytest.approx(2 * base.finish[1]) and other.finish[1] == pytest.approx(base.finish[1])
    links = half.tables()["links"].set_index("link_id")
    assert links.loc[0, "status"] == "degraded" and links.loc[0, "capacity_GBps"] == pytest.approx(0.5)
    assert (links["status"] == "degraded").sum() == 1  # one direction only
    an = simulate(NVS, wl, model="analytical", faults={"links": [{"match": {"node": "gpu0"}, "factor": 0.25}]})
    assert an.finish[1] == pytest.approx(4 * base.finish[1])


def test_failed_spine_link_is_routed_around():
    topo = small_fat_tree()
    plan = plan_faults(fault_spec({"links": [{"match": {"link": "leaf0<->spine0"}, "failed": True}]}), topo, 8)
    failed = np.flatnonzero(plan.failed)
    assert sorted(topo.link_name(int(x)) for x in failed) == ["leaf0->spine0", "spine0->leaf0"]
    g = np.arange(8)
    src, dst = np.repeat(g, 8), np.tile(g, 8)
    for key in (None, np.arange(64), np.full(64, 12345)):
        ip0, lk0 = topo.routes(src, dst, key)
        ip, lk = plan.topology.routes(src, dst, key)
        assert not plan.failed[lk].any()
        assert np.array_equal(np.diff(ip), np.diff(ip0))  # still shortest (another spine)
        for i in range(64):  # pairs that never crossed the failed cable keep their path
            old = lk0[ip0[i]:ip0[i + 1]]
            if not plan.failed[old].any():
                assert np.array_equal(old, lk[ip[i]:ip[i + 1]])


def test_failed_link_run_moves_traffic(tmp_path):
    topo = small_fat_tree()
    wl = p2p_workload(tmp_path, 0, 7, 25_000_000, 8)  # crosses the spines
    faults = {"links": [{"match": {"tier": "spine", "node": "spine0"}, "failed": True}]}
    res = simulate(topo, wl, faults=faults)
    links = res.tables()["links"]
    dead = links[links["status"] == "failed"]
    assert len(dead) == 4 and (dead["bytes"] == 0).all() and (dead["capacity_GBps"] == 0).all()
    spine1 = links[(links["src"] == "spine1") | (links["dst"] == "spine1")]
    assert spine1["bytes"].sum() == pytest.approx(2 * 25e6)
    assert res.finish[7] == pytest.approx(25e6 / 25e9)  # the 25 GB/s spine links are the bottleneck


def test_pcie_failure_uses_a_neighbour_nic():
    topo = small_fat_tree()
    plan = plan_faults(fault_spec({"links": [{"match": {"link": "gpu0<->nic0"}, "failed": True}]}), topo, 8)
    names = [topo.link_name(int(x)) for x in plan.topology.route(0, 7)]
    assert names[:3] == ["gpu0->nvswitch0", "nvswitch0->gpu1", "gpu1->nic1"] and names[-1] == "nic7->gpu7"
    back = [topo.link_name(int(x)) for x in plan.topology.route(7, 0)]
    assert back[-2:] == ["gpu1->nvswitch0", "nvswitch0->gpu0"]


def test_unreachable_pairs_are_a_clean_error(tmp_path, capsys):
    topo = small_fat_tree()
    with pytest.raises(InputError, match="without any path: 0->4, 0->5") as info:
        plan_faults(fault_spec({"switches": [{"kind": "spine", "count": 2, "failed": True}]}), topo, 8)
    assert "4 of 8 ranks" in str(info.value)
    wl = compute_workload(tmp_path, n=8)
    faults = tmp_path / "f.yaml"
    faults.write_text("switches:\n  - node: nvswitch0\n    failed: true\n")
    assert main(["run", "--topology", "topologies/dgx-h100.yaml", "--workload", wl, "--faults", str(faults)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "without any path" in err and "0->1" in err


def test_seeded_link_sampling_is_deterministic():
    topo = small_fat_tree()
    spec = {"links": [{"match": {"tier": "spine"}, "count": 1, "factor": 0.5}], "seed": 4}
    a = plan_faults(fault_spec(spec), topo, 8).link_factor
    b = plan_faults(fault_spec(spec), topo, 8).link_factor
    assert np.array_equal(a, b) and (a == 0.5).sum() == 2  # one cable = both directions
    picks = {tuple(np.flatnonzero(plan_faults(fault_spec(spec, seed=s), topo, 8).link_factor != 1))
             for s in range(12)}
    assert len(picks) > 1


@pytest.mark.parametrize("doc,needle", [
    ({"bogus": 1}, "bogus: unknown key"),
    ({"seed": "x"}, "seed: expected an integer"),
    ({"compute": [{"factor": 1.1, "distribution": {"normal": {"std": 0.1}}}]}, "compute[0]: give factor or distribution"),
    ({"compute": [{"fraction": 2, "factor": 1.1}]}, "compute[0].fraction: expected a number in (0, 1]"),
    ({"compute": [{"ranks": [99], "factor": 1.1}]}, "compute[0].ranks: expected a list of ranks in 0..3"),
    ({"compute": [{"distribution": {"gamma": {}}}]}, "compute[0].distribution: expected one of lognormal"),
    ({"compute": [{"distribution": {"normal": {"std": "x"}}}]}, "compute[0].distribution.normal.std: expected a number"),
    ({"launch_jitter": {"delay": "5 parsecs"}}, "launch_jitter[0].delay"),
    ({"links": [{"match": {"kind": "infiniband"}, "factor": 0.5}]}, "links[0].match.kind: expected one of"),
    ({"links": [{"match": {"link": "leaf0->spine9"}, "failed": True}]}, "no node 'spine9'"),
    ({"links": [{"match": {"link": "gpu0->gpu1"}, "failed": True}]}, "no link 'gpu0->gpu1'"),
    ({"links": [{"match": {"kind": "nvlink"}}]}, "links[0]: expected factor"),
    ({"links": [{"match": {"kind": "pcie", "tier": "spine"}, "factor": 0.5}]}, "links[0].match: matches no link"),
    ({"switches": [{"node": "gpu0", "failed": True}]}, "switches[0]: expected switches"),
])
def test_bad_faults_name_the_field(doc, needle):
    with pytest.raises(InputError) as info:
        plan_faults(fault_spec(doc), small_fat_tree(), 4)
    assert needle in str(info.value)


def test_link_faults_need_a_routed_model(traces, tmp_path):
    yml = traces / "astra-sim__astra-sim/examples/network/analytical/Ring_8npus.yml"
    from netsim.topology.spec import load_topology
    topo = load_topology(yml)
    spec = fault_spec({"links": [{"match": {"kind": "link"}, "count": 1, "factor": 0.5}]})
    with pytest.raises(InputError, match="--model flow"):
        plan_faults(spec, topo, 8, model="analytical")
    assert plan_faults(spec, topo, 8, model="flow").link_status.sum() == 2
