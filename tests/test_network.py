"""Network models, the executor and closed forms (issue: network-engine)."""

import json

import numpy as np
import pytest
import simpy

from netsim.astra.collectives import astra_ring_all_reduce
from netsim.collectives.chain import chain_broadcast, chain_reduce
from netsim.collectives.direct import direct_all_to_all, send_recv
from netsim.collectives.executor import CollectiveRun, run_collective
from netsim.collectives.ring import ring_all_gather, ring_all_reduce, ring_reduce_scatter
from netsim.collectives.schedule import Phase, Schedule, Step
from netsim.network.analytical import AnalyticalNetwork
from netsim.network.flow import FlowNetwork
from netsim.topology.builders import nvlink_mesh, nvswitch_domain
from netsim.topology.multidim import Dim, multi_dim
from netsim.topology.spec import load_topology

from conftest import TOPOLOGIES

MODELS = [AnalyticalNetwork, FlowNetwork]
B, LAT = 50e9, 1e-6


def run(model, topo, schedule, ranks=None, start=None, fast_forward=True):
    return run_collective(model(simpy.Environment(), topo), schedule, ranks, start, fast_forward=fast_forward)


# ------------------------------------------------------------ closed forms
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("kind,hops", [("ring", 1), ("switch", 2)])
@pytest.mark.parametrize("n", [2, 5, 8])
def test_ring_collectives_match_alpha_beta(model, fast, kind, hops, n):
    topo = (multi_dim([Dim("Ring", n, B, LAT)]) if kind == "ring"
            else nvswitch_domain(n, links_per_gpu=1, link_bw=B, latency=LAT))
    S = 64 * 2**20
    step = hops * LAT + S / n / B
    cases = [(ring_all_reduce, 2 * (n - 1)), (ring_all_gather, n - 1), (ring_reduce_scatter, n - 1)]
    for build, steps in cases:
        t = run(model, topo, build(n, S), fast_forward=fast).time
        assert t == pytest.approx(steps * step, rel=1e-3), build.__name__


def test_alltoall_on_a_crossbar():
    n, S = 8, 2**30
    topo = nvswitch_domain(n, links_per_gpu=18, link_bw=25e9, latency=0.0)
    t = run(FlowNetwork, topo, direct_all_to_all(n, S)).time
    assert t == pytest.approx((n - 1) / n * S / 450e9, rel=1e-6)  # reference §7
    # the analytical model charges the step for its own load: the n-1 messages share each
    # GPU's links, as on the flow model (not ASTRA-sim's congestion-unaware backend)
    t = run(AnalyticalNetwork, topo, direct_all_to_all(n, S)).time
    assert t == pytest.approx((n - 1) / n * S / 450e9, rel=1e-6)


def test_broadcast_pipeline_closed_form():
    n, S, chunks = 4, 2**30, 64
    topo = nvswitch_domain(n, links_per_gpu=1, link_bw=B, latency=0.0)
    t = run(AnalyticalNetwork, topo, chain_broadcast(n, S, chunks=chunks)).time
    assert t == pytest.approx((chunks + n - 2) * S / chunks / B, rel=1e-9)
    assert run(FlowNetwork, topo, chain_reduce(n, S, root=2, chunks=chunks)).time == pytest.approx(t)


# --------------------------------------------------------------- max-min
def line_topology():
    # GPU0 -(10 links)- GPU1 -(4 links)- GPU2, 1 GB/s per link, no latency
    return nvlink_mesh(3, [(0, 1, 10), (1, 2, 4)], link_bw=1e9, latency=0.0)


def collect(net, src, dst, size):
    out = {}
    net.submit(np.array(src), np.array(dst), np.array(size, dtype=float),
               lambda idx, t: out.update({int(i): t for i in idx}))
    net.env.run()
    return out


def test_two_flows_share_one_link_equally():
    net = FlowNetwork(simpy.Environment(), line_topology())
    done = collect(net, [1, 1], [2, 2], [4e9, 4e9])  # both on 1->2 (4 GB/s): 2 GB/s each
    assert done == {0: pytest.approx(2.0), 1: pytest.approx(2.0)}


def test_three_flow_bottleneck_by_hand():
    # f0: 0->2 crosses both links; f1: 1->2; f2: 0->1.  Link 1->2 (4) is the bottleneck
    # shared by f0 and f1 (2 each); f2 takes what f0 leaves on 0->1: 10 - 2 = 8.
    net = FlowNetwork(simpy.Environment(), line_topology())
    done = collect(net, [0, 1, 0], [2, 2, 1], [2e9, 2e9, 8e9])
    assert done == {0: pytest.approx(1.0), 1: pytest.approx(1.0), 2: pytest.approx(1.0)}
    assert net.stats["events"] >= 1 and net.stats["deliveries"] == 1  # one batch


def test_rates_change_when_flows_end():
    net = FlowNetwork(simpy.Environment(), line_topology())
    done = collect(net, [1, 1], [2, 2], [2e9, 6e9])  # 2+2 GB/s until t=1, then 4 GB/s alone
    assert done[0] == pytest.approx(1.0) and done[1] == pytest.approx(2.0)


def test_transfer_event_record():
    env = simpy.Environment()
    net = FlowNetwork(env, line_topology())
    ev = net.transfer(0, 2, 4e9)
    env.run()
    rec = ev.value
    assert (rec.start, rec.nbytes) == (0.0, 4e9) and rec.end == pytest.approx(1.0) and len(rec.path) == 2


# ------------------------------------------------------------ concurrency
def test_concurrent_collectives_slow_each_other():
    topo = load_topology(TOPOLOGIES / "h100-superpod-1su.yaml")
    ranks = np.arange(0, 64, 1)
    S = 256 * 2**20
    alone_ar = run(FlowNetwork, topo, ring_all_reduce(64, S), ranks).time
    alone_a2a = run(FlowNetwork, topo, direct_all_to_all(64, S), ranks).time
    env = simpy.Environment()
    net = FlowNetwork(env, topo)
    ar = CollectiveRun(env, net, ring_all_reduce(64, S), ranks)
    a2a = CollectiveRun(env, net, direct_all_to_all(64, S), ranks)
    env.run()
    assert ar.done.value.time > 1.2 * alone_ar
    assert a2a.done.value.time > 1.01 * alone_a2a  # the AR adds few flows to the shared NICs


def test_two_identical_collectives_share_bandwidth_equally():
    topo = load_topology(TOPOLOGIES / "dgx-h100.yaml")
    S = 2**30
    alone = run(FlowNetwork, topo, ring_all_reduce(8, S)).time
    env = simpy.Environment()
    net = FlowNetwork(env, topo)
    runs = [CollectiveRun(env, net, ring_all_reduce(8, S), np.arange(8)) for _ in range(2)]
    env.run()
    for r in runs:
        assert r.done.value.time == pytest.approx(2 * alone, rel=0.01)


def test_analytical_model_ignores_contention():
    topo = line_topology()
    net = AnalyticalNetwork(simpy.Environment(), topo)
    done = collect(net, [1, 1], [2, 2], [4e9, 4e9])
    assert done == {0: pytest.approx(1.0), 1: pytest.approx(1.0)}


# ------------------------------------------------- per-rank dependencies
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("fast", [True, False])
def test_delayed_rank_delays_only_its_dependants(model, fast):
    topo = nvswitch_domain(4, links_per_gpu=1, link_bw=B, latency=0.0)
    pairs = Step(np.array([0, 2]), np.array([1, 3]), np.array([B, B]))  # 1 s each
    sched = Schedule("custom", "pairs", 4, B, (Phase(pairs, 3),))
    start = np.array([5.0, 0.0, 0.0, 0.0])
    res = run(model, topo, sched, start=start, fast_forward=fast)
    assert res.finish.tolist() == pytest.approx([8.0, 8.0, 3.0, 3.0])


def test_ring_delay_propagates_without_global_barrier():
    n = 8
    topo = nvswitch_domain(n, links_per_gpu=1, link_bw=B, latency=0.0)
    start = np.zeros(n)
    start[3] = 1e-3
    late = run(FlowNetwork, topo, ring_all_reduce(n, 2**20), start=start, fast_forward=False)
    base = run(FlowNetwork, topo, ring_all_reduce(n, 2**20), fast_forward=False)
    assert late.time == pytest.approx(base.time + 1e-3, rel=1e-6)
    fast = run(FlowNetwork, topo, ring_all_reduce(n, 2**20), start=start)
    assert np.allclose(fast.finish, late.finish)


# --------------------------------------------------- ASTRA-sim regression
def astra_case(traces, system):
    topo = load_topology(traces / "astra-sim__astra-sim/tests/rt_template/inputs/network_cfg.yml")
    sysc = json.loads(system.read_text())
    return topo, astra_ring_all_reduce(8, 1 << 20, splits=sysc["preferred-dataset-splits"],
                                       endpoint_delay_ns=sysc["endpoint-delay"],
                                       local_mem_bw_GBps=sysc["local-mem-bw"])


@pytest.mark.parametrize("fast", [True, False])
def test_astra_regression_value_117780(traces, fast):
    topo, sched = astra_case(traces, traces / "astra-sim__astra-sim/tests/rt_template/inputs/system_cfg.json")
    res = run(AnalyticalNetwork, topo, sched, fast_forward=fast)
    assert np.round(res.finish * 1e9, 3).tolist() == [117780.0] * 8  # refs/stdout.txt, every rank
    assert "117780 cycles" in (traces / "astra-sim__astra-sim/tests/rt_template/refs/stdout.txt").read_text()


def test_astra_shipped_ring_config_64440(traces):
    topo, sched = astra_case(traces, traces / "astra-sim__astra-sim/examples/system/native_collectives/Ring_4chunks.json")
    assert np.round(run(AnalyticalNetwork, topo, sched).finish * 1e9, 3).tolist() == [64440.0] * 8


@pytest.mark.parametrize("kind,hops", [("Ring", 1), ("FullyConnected", 1), ("Switch", 2)])
def test_astra_closed_form_other_shapes(kind, hops):
    p, size, splits, e, mem = 16, 4 << 20, 8, 20, 100
    topo = multi_dim([Dim(kind, p, 100 * 2**30, 700e-9)], astra_network=True)
    d = size // splits // p
    net = int(hops * 700 + d / (100 * 2**30 / 1e9))
    red = 3 * int(d / mem)
    expect = splits * (e + (p - 1) * (net + e + red) + (p - 1) * (net + e))
    sched = astra_ring_all_reduce(p, size, splits=splits, endpoint_delay_ns=e, local_mem_bw_GBps=mem)
    res = run(AnalyticalNetwork, topo, sched)
    assert np.round(res.finish * 1e9, 3).tolist() == [float(expect)] * p


# ----------------------------------------------------------- schedules
@pytest.mark.parametrize("n", [2, 3, 7, 8, 16])
def test_schedules_conserve_bytes(n):
    S = 3 * 2**20
    for sched, sent in [(ring_all_reduce(n, S), 2 * (n - 1) / n * S), (ring_all_gather(n, S), (n - 1) / n * S),
                        (ring_reduce_scatter(n, S), (n - 1) / n * S), (direct_all_to_all(n, S), (n - 1) / n * S),
                        (send_recv(n, S), S)]:
        assert np.allclose(sched.bytes_sent(), sent), sched.op
        assert np.allclose(sched.bytes_received(), sent), sched.op
    for build in (chain_broadcast, chain_reduce):
        s = build(n, S, root=n - 1)
        moved = s.bytes_received() if build is chain_broadcast else s.bytes_sent()
        assert np.allclose(np.delete(moved, n - 1), S) and moved[n - 1] == 0


def test_windowed_alltoall_matches_all_at_once_on_a_crossbar():
    topo = nvswitch_domain(16, links_per_gpu=2, link_bw=25e9, latency=0.0)
    t_all = run(FlowNetwork, topo, direct_all_to_all(16, 2**28, window=15)).time
    t_win = run(FlowNetwork, topo, direct_all_to_all(16, 2**28, window=4)).time
    assert t_win == pytest.approx(t_all, rel=1e-9)
