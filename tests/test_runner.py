"""Executing Chakra workloads: DAG order, lanes, group matching, p2p, deadlock reports."""

import json

import numpy as np
import pytest

from netsim.cli import main
from netsim.errors import DeadlockError, InputError
from netsim.topology.builders import nvswitch_domain
from netsim.chakra import write_workload
from netsim.chakra.schema import CommType, NodeType
from netsim.chakra.model import EtNode
from netsim.workload.simulation import simulate
from netsim.chakra.groups import CommGroups

TOPO = nvswitch_domain(4, links_per_gpu=1, link_bw=1e9, latency=0.0)  # 1 GB/s per GPU
COMP, COLL, SEND, RECV = (int(NodeType.COMP_NODE), int(NodeType.COMM_COLL_NODE),
                          int(NodeType.COMM_SEND_NODE), int(NodeType.COMM_RECV_NODE))


def comp(i, us, deps=(), cpu=False):
    return EtNode(i, f"comp{i}", COMP, data_deps=tuple(deps), duration_micros=us, is_cpu_op=cpu)


def ar(i, size, deps=(), pg=None):
    return EtNode(i, f"ar{i}", COLL, data_deps=tuple(deps), comm_type=int(CommType.ALL_REDUCE),
                  comm_size=size, pg_name=pg, is_cpu_op=False)


def workload(tmp_path, per_rank):
    write_workload(tmp_path / "w", per_rank)
    return str(tmp_path / "w")


def test_dag_order_and_lanes(tmp_path):
    # two GPU computes without deps still serialise on the GPU lane; a CPU op overlaps them
    nodes = [comp(1, 100), comp(2, 50), comp(3, 30, cpu=True), comp(4, 10, deps=(1, 3))]
    res = simulate(TOPO, workload(tmp_path, [nodes] * 2))
    assert res.finish * 1e6 == pytest.approx([160.0, 160.0])  # 1 (0-100), 2 (100-150), 4 (150-160)
    assert res.compute * 1e6 == pytest.approx([160.0, 160.0])
    order = [r[1] for r in sorted(res.ops, key=lambda r: (r[0], r[5])) if r[0] == 0]
    assert order.index(4) > order.index(1)


def test_more_streams_overlap_compute(tmp_path):
    nodes = [comp(1, 100), comp(2, 50)]
    res = simulate(TOPO, workload(tmp_path, [nodes]), streams=2)
    assert res.finish[0] * 1e6 == pytest.approx(100.0)


def test_collective_time_and_overlap(tmp_path):
    n, size = 4, 4_000_000
    nodes = [comp(1, 1000), ar(2, size), comp(3, 10, deps=(2,))]
    res = simulate(TOPO, workload(tmp_path, [nodes] * n), model="analytical")
    t_ar = 2 * (n - 1) * size / n / 1e9  # ring all-reduce, 1 GB/s links (NCCL's choice: ring/Simple)
    nccl_lat = 8.4e-6 + 2 * (n - 1) * 3.4e-6  # NCCL base + per-hop NVLink latency, Simple
    # the all-reduce has no dependency: it overlaps the 1 ms compute on another lane
    assert res.finish[0] == pytest.approx(max(1e-3, t_ar + nccl_lat + 10e-6))
    assert res.exposed_comm[0] == pytest.approx(res.finish[0] - 1010e-6)


def test_late_member_starts_late(tmp_path):
    per_rank = [[ar(1, 4_000_000)] for _ in range(3)] + [[comp(1, 500), ar(2, 4_000_000, deps=(1,))]]
    res = simulate(TOPO, workload(tmp_path, per_rank), model="analytical")
    t_ar = 6 * 1_000_000 / 1e9 + 8.4e-6 + 6 * 3.4e-6  # ring + NCCL's Simple latency (base + 6 hops)
    assert res.finish.max() == pytest.approx(500e-6 + t_ar)


def test_groups_and_float_names(tmp_path):
    per_rank = [[ar(1, 1_000_000, pg="1.0")] for _ in range(2)] + [[ar(1, 1_000_000, pg="2")] for _ in range(2)]
    groups = tmp_path / "g.json"
    groups.write_text(json.dumps({"1": [0, 1], "2": [2, 3]}))
    res = simulate(TOPO, workload(tmp_path, per_rank), comm_groups=str(groups), model="analytical")
    # 2-rank ring: 2 steps of 0.5 MB, plus NCCL's Simple latency 8.4 + 2 x 3.4 us
    assert res.finish * 1e6 == pytest.approx([1015.2] * 4)


def test_group_policy():
    g = CommGroups({"0": [0, 1]}, world=4)
    assert g.resolve("0") == (0, 1) and g.resolve(None) == (0, 1, 2, 3)
    assert CommGroups(None, 4).resolve("0") == (0, 1, 2, 3)
    with pytest.raises(InputError, match="names no communicator group"):
        g.resolve("7")


def test_send_recv_match_by_tag(tmp_path):
    r0 = [EtNode(1, "s", SEND, comm_dst=1, comm_tag=5, comm_size=2_000_000),
          EtNode(2, "s2", SEND, data_deps=(1,), comm_dst=1, comm_tag=6, comm_size=1_000_000)]
    r1 = [EtNode(1, "r6", RECV, comm_src=0, comm_tag=6, comm_size=1_000_000),
          EtNode(2, "r5", RECV, comm_src=0, comm_tag=5, comm_size=2_000_000)]
    res = simulate(TOPO, workload(tmp_path, [r0, r1]), model="analytical")
    assert res.finish * 1e3 == pytest.approx([3.0, 3.0])


def test_mismatched_collectives_are_named(tmp_path):
    per_rank = [[ar(1, 1_000_000)], [ar(1, 2_000_000)]]
    with pytest.raises(InputError, match="mismatched collectives: rank 0 node 1 issued ALL_REDUCE of 1000000 B"):
        simulate(TOPO, workload(tmp_path, per_rank))


def test_deadlock_report(tmp_path, capsys):
    per_rank = [[ar(1, 1000)], [ar(1, 1000)], [ar(1, 1000)],
                [EtNode(1, "lonely", RECV, comm_src=0, comm_tag=9, comm_size=8)]]
    with pytest.raises(DeadlockError) as info:
        simulate(TOPO, workload(tmp_path, per_rank))
    text = str(info.value)
    assert "4 of 4 ranks cannot finish" in text and "waits for ranks [3]" in text
    assert "rank 3" in text and "has no matching send" in text
    assert main(["run", "--topology", "topologies/dgx-h100.yaml", "--workload", str(tmp_path / "w")]) == 2
    assert "deadlock" in capsys.readouterr().err


def test_cycle_is_rejected(tmp_path):
    per_rank = [[comp(1, 1, deps=(2,)), comp(2, 1, deps=(1,))]]
    with pytest.raises(InputError, match="dependency cycle"):
        simulate(TOPO, workload(tmp_path, per_rank))


# ------------------------------------------------------------ real traces
def test_microbenchmarks_run(traces):
    base = traces / "astra-sim__astra-sim/examples/workload/microbenchmarks"
    for coll in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all"):
        for n in (4, 8, 16):
            res = simulate("topologies/gb200-nvl72.yaml", base / coll / f"{n}npus_1MB" / coll)
            assert res.finish.size == n and np.ptp(res.finish) < 1e-9 and res.finish[0] > 0


def test_custom_collective_ring(traces):
    prefix = traces / "astra-sim__astra-sim/examples/system/custom_collectives/custom_ring_allreduce_8npus_1MB/custom_allreduce"
    res = simulate("topologies/dgx-h100.yaml", prefix, model="analytical")
    assert len(res.ops) == 8 * 35 and res.compute[0] == pytest.approx(49e-6)


@pytest.mark.parametrize("case", ["T1D-analytical", "T2D-analytical", "T3D-analytical", "T1D-ns3", "T2D-ns3"])
def test_comm_group_sets(traces, case):
    d = traces / "shuoshuc__astra-sim-artifacts/examples" / case
    net = traces / "shuoshuc__astra-sim-artifacts/examples" / case.replace("ns3", "analytical") / "inputs/network.yml"
    res = simulate(net, d / "trace/trace", comm_groups=d / "inputs/comm_group.json")
    assert res.finish.min() > 0


def test_pytorch_rank_is_read_and_run(traces):
    res = simulate("topologies/dgx-h100.yaml", traces / "mlcommons__chakra/tests/data/chakra.0.et",
                   model="analytical")
    assert len(res.ops) == 3664
    assert res.notes and "ctrl_deps contradict data_deps" in res.notes[0]  # a real converter quirk
