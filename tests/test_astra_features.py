"""ASTRA-sim workload semantics: custom collectives, comm groups, compute, memory, p2p, models."""

import json

import numpy as np
import pytest

from netsim.astra import parse_memory, parse_system, run_astra
from netsim.astra.congestion import StoreAndForwardNetwork
from netsim.errors import DeadlockError, InputError
from netsim.chakra import EtNode, write_workload
from netsim.chakra.schema import CommType, NodeType

ASTRA = "astra-sim__astra-sim"
SHUO = "shuoshuc__astra-sim-artifacts/examples"
E = 10
COMP, COLL, SEND, RECV, MEM = (int(NodeType.COMP_NODE), int(NodeType.COMM_COLL_NODE), int(NodeType.COMM_SEND_NODE),
                               int(NodeType.COMM_RECV_NODE), int(NodeType.MEM_LOAD_NODE))
SYS = {"scheduling-policy": "LIFO", "endpoint-delay": 10, "preferred-dataset-splits": 1,
       "collective-optimization": "localBWAware", "local-mem-bw": 50, "all-reduce-implementation": ["ring"]}


def net(hops, nbytes, lat=500.0, gib=50.0):
    return int(hops * lat + nbytes / (gib * 2**30 / 1e9))


def ring(tmp_path, n=4, kind="Ring", lat=500, bw=50):
    p = tmp_path / f"net{n}{kind}.yml"
    p.write_text(f"topology: [{kind}]\nnpus_count: [{n}]\nbandwidth: [{bw}]\nlatency: [{lat}]\n")
    return p


def wl(tmp_path, per_rank):
    write_workload(tmp_path / "w", per_rank)
    return tmp_path / "w"


def ar(i, size, deps=(), pg=None, **kw):
    return EtNode(i, f"ar{i}", COLL, data_deps=tuple(deps), comm_type=0, comm_size=size, pg_name=pg,
                  is_cpu_op=False, **kw)


def comp(i, us, deps=(), **kw):
    return EtNode(i, f"c{i}", COMP, data_deps=tuple(deps), duration_micros=us, **kw)


# ----------------------------------------------------------------- custom
def test_custom_collective_ring(traces):
    """The MSCCL-derived ring (custom_collective.json, relative path as shipped): 14 chained
    131,072-byte messages between ring neighbours and 7 COMP nodes of 7 us, no endpoint delay."""
    res = run_astra(traces / ASTRA / "examples/workload/microbenchmarks/all_reduce/8npus_1MB/all_reduce",
                    traces / ASTRA / "examples/system/custom_collectives/custom_collective.json",
                    traces / ASTRA / "examples/network/analytical/Ring_8npus.yml")
    assert res.finish.tolist() == [14 * net(1, 131072) + 7 * 7000] * 8 == [90174] * 8
    assert any("relative to the working directory" in n for n in res.notes)
    assert res.engine == "full" and not [x for x in res.log if isinstance(x, str)]  # no native rings


def test_custom_needs_one_chunk(traces, tmp_path):
    j = json.loads((traces / ASTRA / "examples/system/custom_collectives/custom_collective.json").read_text())
    j["preferred-dataset-splits"] = 4
    cfg = parse_system(j, "c.json", traces / ASTRA / "examples/system/custom_collectives")
    with pytest.raises(InputError, match="preferred-dataset-splits: a custom collective waits for 4 chunks"):
        run_astra(traces / ASTRA / "examples/workload/microbenchmarks/all_reduce/8npus_1MB/all_reduce", cfg,
                  traces / ASTRA / "examples/network/analytical/Ring_8npus.yml")
    j["preferred-dataset-splits"], j["all-reduce-implementation-custom"] = 1, ["nowhere/custom"]
    with pytest.raises(InputError, match="all-reduce-implementation-custom: no custom collective ET"):
        run_astra(traces / ASTRA / "examples/workload/microbenchmarks/all_reduce/8npus_1MB/all_reduce",
                  parse_system(j, "c.json"), traces / ASTRA / "examples/network/analytical/Ring_8npus.yml")


def test_per_node_custom_implementation(traces, tmp_path):
    """per-node-custom-implementation (a YAML {node id: ET prefix}) beats the native list."""
    prefix = (traces / ASTRA / "examples/system/custom_collectives/custom_ring_allreduce_8npus_1MB/custom_allreduce")
    (tmp_path / "per_node.yml").write_text(f"5: {prefix}\n")
    cfg = parse_system({**SYS, "per-node-custom-implementation": str(tmp_path / "per_node.yml")}, "s.json", tmp_path)
    assert cfg.per_node_custom == {5: str(prefix)}
    w = wl(tmp_path, [[ar(5, 1 << 20), ar(6, 1 << 20, deps=(5,))]] * 8)
    res = run_astra(w, cfg, traces / ASTRA / "examples/network/analytical/Ring_8npus.yml")
    native = E + 7 * (net(1, 131072) + E + 3 * int(131072 / 50)) + 7 * (net(1, 131072) + E)
    assert res.finish.tolist() == [90174 + native] * 8 and res.engine == "full"


# ------------------------------------------------------------- comm groups
def _shuo_sys(traces, case):
    j = json.loads((traces / SHUO / case / "inputs/sys.json").read_text())
    j["roofline-enabled"] = 0  # the traces' COMP nodes carry durations only (roofline needs num_ops)
    return parse_system(j)


def test_roofline_traces_without_num_ops_are_rejected(traces):
    d = traces / SHUO / "T2D-analytical"
    with pytest.raises(InputError, match="missing attribute 'tensor_size'"):
        run_astra(d / "trace/trace", d / "inputs/sys.json", d / "inputs/network.yml", d / "inputs/RemoteMemory.json",
                  d / "inputs/comm_group.json")


def test_t2d_row_and_column_groups(traces):
    """4x4 torus: AR on the row group, 100 us compute, AR on the column group.  A sub-group is a flat
    ring over its members with ASTRA-sim's 10 ns local bundles; 1 MiB / 4 = 262,144 B per message."""
    d = traces / SHUO / "T2D-analytical"
    res = run_astra(d / "trace/trace", _shuo_sys(traces, "T2D-analytical"), d / "inputs/network.yml",
                    d / "inputs/RemoteMemory.json", d / "inputs/comm_group.json")
    m = 262144
    one = E + 3 * (net(1, m, 1000) + E + 3 * int(m / 50)) + 3 * (net(1, m, 1000) + E)
    assert res.exposed.tolist() == [2 * one] * 16 == [165080] * 16
    assert res.finish.tolist() == [2 * one + 100_000] * 16 and res.gpu.tolist() == [100_000] * 16
    customs = [x for x in res.log if isinstance(x, str) and x.startswith("custom ring")]
    assert len(customs) == 32 and "custom ring, id: 5, dimension: local total nodes in ring: 4 index in ring: 1" \
        in "\n".join(customs)
    assert any("pg_name '0' names the JSON group '0'" in n for n in res.notes)
    lines = res.lines()
    block = lines[lines.index("sys[0] finished, 265080 cycles, exposed communication 165080 cycles."):][:6]
    assert block[4:] == ["sys[0], Comm time: 165080", "sys[0], GPU time: 100000"]  # libstdc++ map order


def test_t3d_two_rank_groups(traces):
    d = traces / SHUO / "T3D-analytical"
    res = run_astra(d / "trace/trace", _shuo_sys(traces, "T3D-analytical"), d / "inputs/network.yml",
                    d / "inputs/RemoteMemory.json", d / "inputs/comm_group.json")
    m = 1 << 19
    one = E + (net(1, m, 1000) + E + 3 * int(m / 50)) + (net(1, m, 1000) + E)
    assert res.exposed.tolist() == [3 * one] * 8 == [159045] * 8


def test_t1d_whole_world_group_is_symmetric(traces):
    d = traces / SHUO / "T1D-analytical"
    res = run_astra(d / "trace/trace", _shuo_sys(traces, "T1D-analytical"), d / "inputs/network.yml",
                    d / "inputs/RemoteMemory.json", d / "inputs/comm_group.json")
    full = run_astra(d / "trace/trace", _shuo_sys(traces, "T1D-analytical"), d / "inputs/network.yml",
                     d / "inputs/RemoteMemory.json", d / "inputs/comm_group.json", engine="full")
    assert res.engine == "symmetric" and res.finish.tolist() == full.finish.tolist() == [103365] * 8


def test_group_errors(tmp_path):
    groups = tmp_path / "g.json"
    groups.write_text(json.dumps({"1": [0, 1]}))
    per_rank = [[ar(0, 4096, pg="1")], [ar(0, 4096, pg="1")], [ar(0, 4096, pg="1")], [ar(0, 4096, pg="7")]]
    with pytest.raises(InputError, match="rank 2 issues a collective on group '1'"):
        run_astra(wl(tmp_path, per_rank), parse_system(SYS), ring(tmp_path), comm_groups=groups)
    per_rank = [[ar(0, 4096, pg="7")]] * 4
    with pytest.raises(InputError, match="pg_name '7' names no communicator group"):
        run_astra(wl(tmp_path, per_rank), parse_system(SYS), ring(tmp_path), comm_groups=groups)


# ---------------------------------------------------------- workload layer
def test_compute_lanes_and_exposed_comm(tmp_path):
    """GPU compute and a collective overlap (separate lanes); exposed = finish - GPU compute."""
    t_ar = E + 3 * (net(1, 1024) + E + 3 * int(1024 / 50)) + 3 * (net(1, 1024) + E)
    per_rank = [[comp(0, 3), ar(1, 4096), comp(2, 2, deps=(0,))]] * 4
    res = run_astra(wl(tmp_path, per_rank), parse_system(SYS), ring(tmp_path))
    assert res.finish.tolist() == [max(5000, t_ar)] * 4 and res.gpu.tolist() == [5000] * 4
    assert res.exposed.tolist() == [max(5000, t_ar) - 5000] * 4
    overlap = 5000 + t_ar - max(5000, t_ar)
    assert f"sys[0], Total compute-communication overlap: {overlap}" in res.lines()


def test_exposed_communication_is_unsigned(tmp_path):
    """replay-only: comm nodes replay their duration and count as GPU time, so finish - GPU time
    underflows; ASTRA-sim prints the unsigned wrap-around."""
    per_rank = [[comp(0, 4), EtNode(1, "ar", COLL, comm_type=0, comm_size=64, duration_micros=3, is_cpu_op=False)]]
    res = run_astra(wl(tmp_path, per_rank * 2), parse_system({**SYS, "replay-only": 1}), ring(tmp_path, 2))
    assert res.finish.tolist() == [4000] * 2 and res.gpu.tolist() == [7000] * 2
    assert res.exposed.tolist() == [2**64 - 3000] * 2
    assert f"sys[0] finished, 4000 cycles, exposed communication {2**64 - 3000} cycles." in res.lines()


def test_roofline_compute(tmp_path):
    cfg = parse_system({**SYS, "roofline-enabled": 1, "peak-perf": 100, "local-mem-bw": 1000})
    mem_bound = comp(0, 0, num_ops=10**9, tensor_size=10**8, is_cpu_op=False)  # oi 10: 10 TFLOPS < peak
    compute_bound = comp(1, 0, deps=(0,), num_ops=10**12, tensor_size=10**8, is_cpu_op=False)  # oi 1e4 -> peak
    res = run_astra(wl(tmp_path, [[mem_bound, compute_bound]] * 2), cfg, ring(tmp_path, 2))
    t0, t1 = int(1e9 / 1e13 * 1e9), int(1e12 / 1e14 * 1e9)
    assert res.finish.tolist() == [t0 + t1] * 2 and res.gpu.tolist() == [t0 + t1] * 2
    lines = res.lines()
    assert f"sys[0], Compute bound percentage: {t1 / (t0 + t1 + 1) * 100:.3f}%" in lines
    assert any(x.startswith("sys[1], Average operation intensity:") for x in lines)


def test_broadcast_is_replayed_and_unknown_collectives_rejected(tmp_path):
    per_rank = [[EtNode(0, "b", COLL, comm_type=int(CommType.BROADCAST), comm_size=10, duration_micros=2,
                        is_cpu_op=False)]] * 2
    res = run_astra(wl(tmp_path, per_rank), parse_system(SYS), ring(tmp_path, 2))
    assert res.finish.tolist() == [2000] * 2 and res.exposed.tolist() == [2000] * 2
    per_rank = [[EtNode(0, "r", COLL, comm_type=int(CommType.REDUCE), comm_size=10, is_cpu_op=False)]] * 2
    with pytest.raises(InputError, match="REDUCE is not simulated by ASTRA-sim"):
        run_astra(wl(tmp_path, per_rank), parse_system(SYS), ring(tmp_path, 2))
    per_rank = [[EtNode(0, "x", COLL, comm_type=42, comm_size=10, is_cpu_op=False)]] * 2  # no Chakra code
    with pytest.raises(InputError, match="collective 42 is not simulated by ASTRA-sim"):
        run_astra(wl(tmp_path, per_rank), parse_system(SYS), ring(tmp_path, 2))


def test_point_to_point_and_rendezvous(tmp_path):
    per_rank = [[EtNode(0, "s", SEND, comm_dst=2, comm_size=65536, comm_tag=3, is_cpu_op=False)], [],
                [comp(0, 1), EtNode(1, "r", RECV, data_deps=(0,), comm_src=0, comm_size=65536, comm_tag=3,
                                    is_cpu_op=False)], []]
    res = run_astra(wl(tmp_path, per_rank), parse_system(SYS), ring(tmp_path))
    msg = net(2, 65536)
    assert res.finish.tolist() == [msg, 0, max(msg, 1000), 0]
    hand = run_astra(wl(tmp_path, per_rank), parse_system(SYS), ring(tmp_path), rendezvous=True)
    assert hand.finish[0] == 1000 + net(2, 8192) + msg  # the receiver's 8 KiB handshake first


def test_remote_memory_modes(tmp_path):
    per_rank = [[EtNode(0, "load", MEM, tensor_size=5000)]] * 4
    w = wl(tmp_path, per_rank)
    base = {"remote-mem-latency": 100, "remote-mem-bw": 10}
    t = 100 + 500
    finish = {}
    for mode, extra in [("PER_NPU_MEMORY_EXPANSION", {}), ("MEMORY_POOL", {}),
                        ("PER_NODE_MEMORY_EXPANSION", {"num-nodes": 2, "num-npus-per-node": 2})]:
        mem = parse_memory({"memory-type": mode, **base, **extra})
        res = run_astra(w, parse_system(SYS), ring(tmp_path), mem)
        finish[mode] = res.finish.tolist()
        assert res.times["Remote mem"].tolist() == res.finish.tolist()  # measured from issue: queueing counts
    assert finish == {"PER_NPU_MEMORY_EXPANSION": [t] * 4, "MEMORY_POOL": [t, 2 * t, 3 * t, 4 * t],
                      "PER_NODE_MEMORY_EXPANSION": [t, 2 * t, t, 2 * t]}
    with pytest.raises(InputError, match="NO_MEMORY_EXPANSION"):
        run_astra(w, parse_system(SYS), ring(tmp_path))


def test_deadlock_is_reported(tmp_path):
    per_rank = [[ar(0, 4096)], [ar(0, 4096)], [ar(0, 4096)], [EtNode(0, "r", RECV, comm_src=0, comm_size=8,
                                                                      is_cpu_op=False)]]
    with pytest.raises(DeadlockError, match="4 rank\\(s\\) never finish"):
        run_astra(wl(tmp_path, per_rank), parse_system(SYS), ring(tmp_path))


def test_unknown_data_dependency_is_rejected(tmp_path):
    with pytest.raises(InputError, match="depends on node 99, which is not in the file"):
        run_astra(wl(tmp_path, [[comp(0, 1, deps=(99,))]] * 2), parse_system(SYS), ring(tmp_path, 2))


def test_scheduling_policies_with_one_collective_in_flight(tmp_path):
    """A rank runs one collective at a time (GPU comm lane), and chunks of one collective share a
    priority, so LIFO, FIFO and EXPLICIT (comm_priority) give the same times."""
    per_rank = [[ar(0, 4096, comm_priority=1), ar(1, 8192, comm_priority=5)]] * 4
    small = E + 3 * (net(1, 1024) + E + 3 * int(1024 / 50)) + 3 * (net(1, 1024) + E)
    big = E + 3 * (net(1, 2048) + E + 3 * int(2048 / 50)) + 3 * (net(1, 2048) + E)
    for policy in ("LIFO", "FIFO", "EXPLICIT"):
        res = run_astra(wl(tmp_path, per_rank), parse_system({**SYS, "scheduling-policy": policy}), ring(tmp_path))
        assert res.finish.tolist() == [small + big] * 4
        assert [(row[1], row[7]) for row in res.rows[0]] == [(0, small), (1, small + big)]


# -------------------------------------------------------------- models
def test_congestion_aware_store_and_forward(traces, tmp_path):
    """Ring on a ring: no contention, equal to analytical (117,780); on a Switch every hop pays the
    serialization: net = 2 * trunc(latency + bytes / bw) instead of trunc(2 * latency + bytes / bw)."""
    rt = traces / ASTRA / "tests/rt_template/inputs"
    mb8 = traces / ASTRA / "examples/workload/microbenchmarks/all_reduce/8npus_1MB/all_reduce"
    for engine in ("full", "auto"):  # auto: the batched engine (tests/test_astra_batched.py)
        res = run_astra(mb8, rt / "system_cfg.json", rt / "network_cfg.yml", model="congestion-aware", engine=engine)
        assert res.finish.tolist() == [117780] * 8 and res.engine == {"full": "full", "auto": "batched"}[engine]
    d, gib = 32768, 400 * 2**30 / 1e9
    hop = 2 * int(936.25 + d / gib)
    want = 4 * (E + 7 * (hop + E + 3 * int(d / 1600)) + 7 * (hop + E))
    res = run_astra(mb8, traces / ASTRA / "examples/system/native_collectives/Ring_4chunks.json",
                    traces / ASTRA / "examples/network/analytical/HGX-H100-validated.yml", model="congestion-aware")
    assert res.finish.tolist() == [want] * 8
    with pytest.raises(InputError, match="1-D networks only"):
        run_astra(traces / ASTRA / "examples/workload/microbenchmarks/all_reduce/16npus_1MB/all_reduce",
                  traces / ASTRA / "inputs/system/analytical/tpu_v3_32_2dtorus.json",
                  traces / ASTRA / "inputs/network/hgx_h100_16gpu.yml", model="congestion-aware")


def test_congestion_aware_links_queue(tmp_path):
    """direct all-to-all on a 4-NPU switch: 3 messages leave each NPU at once and queue on its up-link."""
    cfg = parse_system({**SYS, "all-to-all-implementation": ["direct"]})
    per_rank = [[EtNode(0, "a2a", COLL, comm_type=int(CommType.ALL_TO_ALL), comm_size=4 * 65536, is_cpu_op=False)]]
    res = run_astra(wl(tmp_path, per_rank * 4), cfg, ring(tmp_path, 4, "Switch"), model="congestion-aware")
    ser, lat = int(65536 / (50 * 2**30 / 1e9)), 500
    # the last message leaves its up-link at 3*ser, then crosses the switch's down-link after
    # the two earlier messages for that destination: arrival 3*ser + lat + ser + lat (no later than the FIFO)
    assert res.finish.min() >= E + 3 * ser + 2 * lat + ser + E
    ana = run_astra(wl(tmp_path, per_rank * 4), cfg, ring(tmp_path, 4, "Switch"))
    assert res.finish.min() > ana.finish.max()


def test_flow_model_runs_on_netsim_topologies(traces):
    mb8 = traces / ASTRA / "examples/workload/microbenchmarks/all_reduce/8npus_1MB/all_reduce"
    rt = traces / ASTRA / "tests/rt_template/inputs"
    flow = run_astra(mb8, rt / "system_cfg.json", rt / "network_cfg.yml", model="flow")
    assert flow.finish.tolist() == pytest.approx([117780] * 8, rel=1e-3)
    on_dgx = run_astra(mb8, traces / ASTRA / "examples/system/native_collectives/HGX-H100-validated.json",
                       "topologies/dgx-h100.yaml", model="flow")
    assert on_dgx.finish.min() > 0 and np.ptp(on_dgx.finish) < 1
    md = run_astra(traces / ASTRA / "examples/workload/microbenchmarks/all_reduce/16npus_1MB/all_reduce",
                   parse_system({**SYS, "all-reduce-implementation": ["ring", "ring"], "local-mem-bw": 1600}),
                   traces / ASTRA / "inputs/network/hgx_h100_16gpu.yml", model="flow")
    assert md.finish.min() > 0
    with pytest.raises(InputError, match="needs an ASTRA-sim network YAML"):
        run_astra(mb8, rt / "system_cfg.json", "topologies/dgx-h100.yaml")


def test_store_and_forward_behind_the_network_seam(traces):
    import simpy

    from netsim.topology.spec import load_topology

    topo = load_topology(traces / ASTRA / "examples/network/analytical/HGX-H100-validated.yml")
    env = simpy.Environment()
    net = StoreAndForwardNetwork(env, topo)
    done = []
    net.submit(np.array([0, 0]), np.array([1, 2]), np.array([32768.0, 32768.0]),
               lambda idx, t: done.append((int(idx[0]), round(t * 1e9))))
    env.run()
    one = int(936.25 + 32768 / (400 * 2**30 / 1e9))
    ser = int(32768 / (400 * 2**30 / 1e9))
    assert done == [(0, 2 * one), (1, ser + 2 * one)]
