"""NCCL cost model, protocol shaping and calibration anchors (reference §6)."""

import numpy as np
import pytest
import simpy

from netsim.perftests import BenchConfig, run_one
from netsim.collectives import nccl
from netsim.collectives.executor import run_collective
from netsim.collectives.plan import plan
from netsim.collectives.ring import ring_all_reduce, ring_successors
from netsim.errors import InputError
from netsim.network.flow import FlowNetwork
from netsim.topology.spec import load_topology

H100 = "topologies/dgx-h100.yaml"
A100 = "topologies/dgx-a100.yaml"
SU = "topologies/h100-superpod-1su.yaml"


@pytest.fixture(scope="module")
def h100():
    return load_topology(H100)


@pytest.fixture(scope="module")
def su():
    return load_topology(SU)


def _busbw(topo, op, size, n, **kw):
    row, _ = run_one(topo, BenchConfig(op, gpus=n, **kw), size)
    return row.busbw_GBps, row.algorithm


def test_comm_info_reads_the_topology(h100, su):
    info = nccl.CommInfo.from_topology(h100, np.arange(8))
    assert (info.nnodes, info.ppn, info.arch, info.nvls) == (1, 8, "hopper", True)
    assert info.bw_intra == pytest.approx(18 * 20.6)  # NCCL's SM90 effective NVLink rate
    info = nccl.CommInfo.from_topology(su, np.arange(64))
    assert (info.nnodes, info.ppn) == (8, 8)
    assert info.bw_inter == pytest.approx(48.0)


def test_nccl_selection_follows_its_cost_model(h100, su):
    info = nccl.CommInfo.from_topology(h100, np.arange(8))
    small = nccl.choose("all_reduce", 8, info)
    assert small.label == "ring/LL" and small.latency_us == pytest.approx(6.6 + 14 * 0.6)
    assert nccl.choose("all_reduce", 1 << 30, info).label == "nvls/Simple"
    assert nccl.choose("all_gather", 1 << 30, info, algorithms=("ring",)).label == "ring/Simple"
    assert nccl.choose("broadcast", 1 << 20, info).algorithm == "ring"  # only ring for bcast
    multi = nccl.CommInfo.from_topology(su, np.arange(256))
    assert nccl.choose("all_reduce", 1 << 20, multi).algorithm == "tree"  # log latency at scale
    assert nccl.choose("all_reduce", 1 << 30, multi).algorithm == "nvls_tree"
    no_nvls = nccl.CommInfo.from_topology(load_topology(A100), np.arange(8))
    assert {c.algorithm for c in nccl.candidates("all_reduce", 1 << 30, no_nvls)} == {"ring", "tree"}


def test_channel_reduction_matches_enqueue():
    # nc drops while nBytes < nc * nThreads * threadThreshold (Simple: 512 threads x 64 B)
    assert nccl._channels(1 << 20, "ring", "Simple", 8, 16) == 16
    assert nccl._channels(256 << 10, "ring", "Simple", 8, 16) == 8  # stops once 256 KiB >= 8 * 32 KiB
    assert nccl._channels(250 << 10, "ring", "Simple", 8, 16) == 7
    assert nccl._channels(1000, "ring", "Simple", 8, 16) == 1
    assert nccl._channels(64 << 10, "ring", "LL", 8, 16) == 2  # LL ring: threshold x nranks = 32 KiB per channel


def test_calibration_anchors(h100):
    busbw, algo = _busbw(h100, "all_reduce", 8 << 30, 8, algo="ring")
    assert algo == "ring/Simple" and 360 < busbw <= 371  # 8xH100 ring ~370 GB/s
    busbw, _ = _busbw(load_topology(A100), "all_reduce", 8 << 30, 8, algo="ring")
    assert 225 < busbw < 242  # 8xA100 ~232 GB/s
    t, _ = _busbw(load_topology(SU), "sendrecv", 1 << 30, 16)
    assert 46 <= t <= 49  # one NDR NIC: 46-49 GB/s achievable


def test_small_messages_are_latency_bound_and_large_ones_bandwidth_bound(h100):
    row, _ = run_one(h100, BenchConfig("all_reduce", gpus=8), 8)
    assert 10 < row.time_us < 25  # NCCL LL ring: 6.6 + 14 x 0.6 us
    curve = [_busbw(h100, "all_reduce", s, 8, algo="ring")[0] for s in (1 << 16, 1 << 20, 1 << 24, 1 << 28)]
    assert curve == sorted(curve) and curve[0] < 0.1 * curve[-1]


def test_protocol_is_forced_and_reported(h100):
    p = plan(h100, np.arange(8), "all_reduce", 1 << 24, "ring", protocol="LL")
    assert p.label == "ring/LL" and p.schedule.phases[1].step.wire == 2.0
    with pytest.raises(InputError, match="--proto"):
        plan(h100, np.arange(8), "all_reduce", 1 << 24, "ring", protocol="LL256")
    with pytest.raises(InputError, match="--algo"):
        plan(h100, np.arange(8), "all_reduce", 1 << 24, "pat")


def test_rail_aligned_rings_use_every_nic(su):
    succ = ring_successors(64, 8, local_size=8)
    for c in range(8):
        cross = np.flatnonzero(succ[c] // 8 != np.arange(64) // 8)
        assert (succ[c][cross] % 8 == c).all()  # channel c enters every node on rail c
        order, r = [], 0
        for _ in range(64):  # each channel is one ring through all 64 ranks
            order.append(r)
            r = succ[c][r]
        assert sorted(order) == list(range(64)) and r == 0
    one = _busbw(su, "all_reduce", 1 << 30, 16, algo="ring", channels=1)[0]
    eight = _busbw(su, "all_reduce", 1 << 30, 16, algo="ring", channels=8)[0]
    assert one < 50 and eight > 300  # one ring funnels through one NIC; eight use all eight


def test_fast_forward_with_ranks_out_of_step_matches_full_simulation(su):
    s = ring_all_reduce(64, 1 << 20, channels=2, local_size=8)
    fast = run_collective(FlowNetwork(simpy.Environment(), su), s, np.arange(64), fast_forward=True)
    slow = run_collective(FlowNetwork(simpy.Environment(), su), s, np.arange(64), fast_forward=False)
    assert fast.stats["steps_skipped"] > 0
    np.testing.assert_allclose(fast.finish, slow.finish, rtol=1e-9)


def test_pipelined_nvls_tree_overlaps_its_stages(su):
    from netsim.collectives.compose import pipeline
    from netsim.collectives.hierarchical import nvls_tree_all_reduce
    piece = nvls_tree_all_reduce(16, (1 << 30) / 16, local_size=8, chunks=1)
    piped = pipeline("nvls_tree", piece, 16, 1 << 30)
    np.testing.assert_allclose(piped.bytes_sent(), piece.bytes_sent() * 16)
    assert piped.n_steps == 16 + piece.n_steps - 1
    seq = nvls_tree_all_reduce(16, 1 << 30, local_size=8)
    t_seq = run_collective(FlowNetwork(simpy.Environment(), su), seq, np.arange(16)).time
    t_pipe = run_collective(FlowNetwork(simpy.Environment(), su), piped, np.arange(16)).time
    assert t_pipe < 0.8 * t_seq


def test_auto_reports_the_chosen_algorithm_per_row(h100):
    from netsim.perftests import bench
    rows = bench(H100, "all_reduce", [8, 1 << 30])
    assert [r.algorithm for r in rows] == ["ring/LL", "nvls/Simple"]
    assert 450 < rows[-1].busbw_GBps < 520  # NVLS: ~480 GB/s measured on 8xH100
