"""The analytical model is a bound, and equals the flow model where that runs each step alone.

What is proved (``netsim/network/analytical.py``) and checked here:

1. A step's transfers get the rates of the fluid max-min model of that step run alone, which
   are feasible at every instant: on every link a step loads with ``L`` bytes, its last transfer
   ends at least ``L / c`` after the step starts.
2. A link next to a GPU carries only that rank's transfers, and a rank's steps run one after
   another, so the whole collective takes at least ``bytes on the link / c``: analytical busbw
   never exceeds what any GPU's own links (NVLink, PCIe, NIC) allow, on any schedule.
3. A one-step schedule (all-to-all up to 64 ranks, alltoallv) therefore takes at least
   ``bytes / c`` on *every* link: oversubscribed uplinks and ECMP collisions bound it too.
4. Where the flow model's default engine evaluates a collective without events (its steps
   provably run alone: ``mode`` vectorized or lockstep), both models give the same finish times
   to 1e-9.  Elsewhere the difference is the flow model's dynamics: steps of different ranks
   overlapping on a link, which the analytical model does not see.

Not proved, checked on fixed cases: multi-step schedules on fabric links (item 5 below).
"""

import os

import numpy as np
import pytest
import simpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netsim.perftests import BenchConfig, validated, build_plan, placed_ranks
from netsim.collectives.executor import run_collective
from netsim.network.analytical import AnalyticalNetwork
from netsim.network.flow import FlowNetwork

from test_engine_exact import tree

RTOL = 1e-9


def _run(model, topo, cfg: BenchConfig, size: int, engine: str = "auto"):
    cfg = validated(cfg, topo)
    plan = build_plan(topo, cfg, float(size))
    net = model(simpy.Environment(), topo)
    res = run_collective(net, plan.schedule, placed_ranks(topo, cfg), engine=engine)
    return res, net, plan


def _bound(topo, net, links) -> float:
    """Seconds the busiest of ``links`` needs for the bytes the run put on it."""
    return float((net.link_stats()["bytes"][links] / topo.link_bw[links]).max(initial=0.0))


def _transfer_steps(schedule) -> int:
    return sum(ph.repeat for ph in schedule.phases if ph.step.n_transfers)


def _gpu_links(topo) -> np.ndarray:
    gpu = np.zeros(topo.node_kind.size, dtype=bool)
    gpu[topo.gpus] = True
    return np.flatnonzero(gpu[topo.link_src] | gpu[topo.link_dst])


ops = st.sampled_from(["all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast"])
placements = st.one_of(st.just("packed"), st.integers(0, 10**6).map(lambda s: f"random:{s}"))
sizes = st.sampled_from([1 << 12, 1 << 18, 1 << 22, 3 << 20])


@settings(max_examples=int(os.environ.get("NETSIM_EXAMPLES", 40)), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(over=st.sampled_from([1, 2, 4, 8]), rail=st.booleans(), op=ops, gpus=st.sampled_from([4, 6, 8, 10, 16, 32]),
       placement=placements, size=sizes, algo=st.sampled_from(["auto", "ring", "tree"]),
       routing=st.sampled_from(["ecmp", "spray"]))
def test_analytical_is_bounded_and_equals_flow_where_steps_run_alone(over, rail, op, gpus, placement, size,
                                                                     algo, routing):
    topo = tree(over, rail, routing=routing)
    algo = algo if (algo, op) in {("tree", "all_reduce")} or (algo == "ring" and op != "alltoall") \
        or algo == "auto" else "auto"
    cfg = BenchConfig(op, algo=algo, gpus=gpus, placement=placement)
    ana, net, plan = _run(AnalyticalNetwork, topo, cfg, size)
    t = float(ana.finish.max() - ana.start.min())
    # (2) no GPU's own links are ever asked for more than their rate
    assert t >= _bound(topo, net, _gpu_links(topo)) * (1 - RTOL)
    # (3) one step: no link at all
    if _transfer_steps(plan.schedule) == 1:
        assert t >= _bound(topo, net, np.arange(topo.n_links)) * (1 - RTOL)
    # (4) the flow model, where its steps provably run alone
    flow, _, _ = _run(FlowNetwork, topo, cfg, size)
    if flow.stats["mode"] in ("vectorized", "lockstep"):  # not event, nor staggered (exact, but not alone)
        np.testing.assert_allclose(ana.finish, flow.finish, rtol=RTOL, atol=0, err_msg=f"{plan.label} {cfg}")


@pytest.mark.parametrize("skew", ["zipf:1.2", "uniform"])
@pytest.mark.parametrize("placement", ["packed", "random:3"])
def test_skewed_alltoall_is_bounded_by_every_link(skew, placement):
    topo = tree(4, False)
    ana, net, plan = _run(AnalyticalNetwork, topo, BenchConfig("alltoall", gpus=32, skew=skew, placement=placement),
                          1 << 22)
    assert _transfer_steps(plan.schedule) == 1
    bound = _bound(topo, net, np.arange(topo.n_links))
    assert ana.time >= bound * (1 - RTOL)
    flow, _, _ = _run(FlowNetwork, topo, BenchConfig("alltoall", gpus=32, skew=skew, placement=placement), 1 << 22,
                      engine="event")
    assert flow.time >= bound * (1 - RTOL)  # the flow model obeys the same bound


def test_analytical_all_to_all_moves_with_oversubscription():
    # the case: 400G NICs, 64 GPUs; the old contention-free model reported ~28x the NIC rate
    times = []
    for over in (1, 4, 8):
        topo = tree(over, False, nodes=16, gpn=4)
        res, net, _ = _run(AnalyticalNetwork, topo, BenchConfig("alltoall", gpus=64, placement="random:1"), 1 << 24)
        nic = 400e9 / 8
        assert res.time >= (1 << 24) * 63 / 64 / nic  # every rank's bytes leave through one NIC
        times.append(res.time)
    assert times[0] < times[1] < times[2]


@pytest.mark.parametrize("over", [1, 4, 8])
@pytest.mark.parametrize("op", ["alltoall", "all_gather", "all_reduce"])
def test_multi_step_schedules_stay_under_the_fabric_bound(over, op):
    """(5) Checked, not proved: windowed all-to-all (NCCL's p2p: 4 channels x 8 = 32 peers per step),
    rings and trees across random placements never beat their busiest fabric link."""
    topo = tree(over, False, nodes=32, gpn=4)
    ch = 4 if op == "alltoall" else None
    for placement in ("packed", "random:1", "random:2"):
        res, net, plan = _run(AnalyticalNetwork, topo, BenchConfig(op, gpus=100, placement=placement, channels=ch),
                              16 << 20)
        assert _transfer_steps(plan.schedule) > 1
        assert res.time >= _bound(topo, net, np.arange(topo.n_links)) * (1 - RTOL), (plan.label, placement)


@pytest.mark.parametrize("algo", ["ring", "tree"])
@pytest.mark.parametrize("gpus", [16, 32])
def test_rings_and_trees_across_nodes_equal_the_flow_model(algo, gpus):
    """Both models plan every NCCL channel as its own flow, so a ring's or tree's node crossings
    spread over the node's NICs on the analytical model too (it used to carry all channels in
    one flow through one NIC: 6-8x slower).  These run in lockstep on the flow model, so the two
    agree to 1e-9."""
    from netsim.perftests import bench

    su = "topologies/h100-superpod-1su.yaml"
    kw = dict(gpus=gpus, algo=algo, protocol="Simple")
    flow = bench(su, "all_reduce", [1 << 30], model="flow", **kw)[0]
    analytical = bench(su, "all_reduce", [1 << 30], model="analytical", **kw)[0]
    assert analytical.time_us == pytest.approx(flow.time_us, rel=1e-9)


@pytest.mark.parametrize("routing", ["ftree", "spray", "ecmp"])
@pytest.mark.parametrize("algo,op", [("ring", "all_reduce"), ("tree", "all_reduce"), ("nvls_tree", "all_reduce"),
                                     ("auto", "all_gather"), ("auto", "reduce_scatter")])
def test_identical_transfers_timed_once_change_nothing(routing, algo, op, monkeypatch):
    """The analytical fast path times each set of identical transfers of a step (a collective's
    channels repeating their pairs, where the key cannot change the path) once, as one weighted
    transfer: every size's time and every link's bytes, busy time and peak equal the run that
    times each transfer on its own."""
    from netsim.collectives import fastpath
    from netsim.perftests.collective import BenchConfig, run_one, validated
    from netsim.topology import load_topology, with_routing

    topo = with_routing(load_topology("topologies/h100-superpod-1su.yaml"), routing)
    cfg = validated(BenchConfig(op, gpus=32, algo=algo, model="analytical"), topo)
    monkeypatch.setattr(fastpath, "SAME_MIN", 1)

    def runs():
        out = []
        for size in (1 << 20, 1 << 28):
            keep: list = []
            run_one(topo, cfg, size, keep)
            out += keep
        return out

    merged = runs()
    monkeypatch.setattr(fastpath, "_same_transfers", lambda *a: None)
    alone = runs()
    assert len(merged) == len(alone) == 2
    for m, a in zip(merged, alone):
        assert m.time_s == pytest.approx(a.time_s, rel=1e-9)
        for field in ("link_bytes", "link_busy_s", "link_peak", "finish_s"):
            np.testing.assert_allclose(getattr(m, field), getattr(a, field), rtol=1e-9, atol=0)
