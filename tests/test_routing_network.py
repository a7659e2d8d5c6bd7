"""Routing policies on the flow model: adaptive and spray against static ECMP.

On a contended random placement (64 ranks on 16 nodes under 4:1 oversubscribed leaves),
neither policy may lose to ECMP; spray's counters land on the physical links; adaptive
paths depend on the live load, so its collectives run event by event.
"""

import numpy as np
import pytest
import simpy

from netsim.perftests import BenchConfig, validated, build_plan, placed_ranks
from netsim.collectives.executor import run_collective
from netsim.network.flow import FlowNetwork
from test_engine_exact import tree


def run(routing, op, size, seed, nodes=16, gpn=8, gpus=64):
    topo = tree(4, False, nodes=nodes, gpn=gpn, routing=routing)
    cfg = validated(BenchConfig(op, gpus=gpus, placement=f"random:{seed}"), topo)
    p = build_plan(topo, cfg, float(size))
    net = FlowNetwork(simpy.Environment(), topo)
    return run_collective(net, p.schedule, placed_ranks(topo, cfg)), net, topo


@pytest.mark.parametrize("op,size,seed", [("alltoall", 16 << 20, 0), ("alltoall", 16 << 20, 5),
                                          ("all_gather", 4 << 20, 1)])
def test_adaptive_and_spray_never_lose_to_ecmp(op, size, seed):
    # all-gather: 8 nodes of 8 GPUs, 4 leaves with 4 uplinks each at 4:1, 2 links to each of 2 spines
    kw = {} if op == "alltoall" else {"nodes": 8, "gpn": 8, "gpus": 32}
    ecmp = run("ecmp", op, size, seed, **kw)[0].time
    for routing in ("adaptive", "spray"):
        t = run(routing, op, size, seed, **kw)[0].time
        assert t <= ecmp * (1 + 1e-9), (routing, t, ecmp)
    assert run("spray", op, size, seed, **kw)[0].time < ecmp  # this placement collides under ECMP


def test_spray_counters_are_spread_over_physical_links():
    res, net, topo = run("spray", "alltoall", 16 << 20, 0)
    stats = net.link_stats()
    assert stats["bytes"].sum() == pytest.approx(net.link_bytes.sum(), rel=1e-12)
    fabric = np.flatnonzero(topo.link_class != np.arange(topo.n_links))  # non-representative members
    assert fabric.size and (stats["bytes"][fabric] > 0).any() and net.link_bytes[fabric].sum() == 0
    rep = topo.link_class[fabric]
    np.testing.assert_array_equal(stats["busy_s"][fabric], stats["busy_s"][rep])


def test_adaptive_runs_event_by_event():
    res, _, _ = run("adaptive", "alltoall", 1 << 20, 0)
    assert res.stats["mode"] == "event"
