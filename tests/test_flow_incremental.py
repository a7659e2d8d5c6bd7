"""The flow model's incremental max-min re-solve equals re-solving every flow at every event.

:mod:`netsim.network.flowtable` repairs the rates locally: it re-solves a growing set of flows
on the residual capacities until every flow has a bottleneck (the max-min certificate).  Random transfers, started at random instants with random sizes and caps on
oversubscribed trees, must finish at the same times (1e-9 relative) as with
``incremental=False``, and the incremental runs must really be incremental.
"""

import os

import numpy as np
import simpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netsim.network.flow import FlowNetwork
from netsim.network.flowtable import FlowTable
from netsim.network.maxmin import max_min_rates
from test_engine_exact import tree

EXAMPLES = int(os.environ.get("NETSIM_EXAMPLES", 40))


def finish_times(topo, jobs, incremental: bool, kernel: str = "auto"):
    """When each of ``jobs`` (start, src, dst, bytes, cap) is delivered, and the network."""
    env = simpy.Environment()
    net = FlowNetwork(env, topo, incremental=incremental, kernel=kernel)
    out = {}

    def start(i, t0, src, dst, size, cap):
        yield env.timeout(t0)
        done = {}
        net.submit(np.array([src]), np.array([dst]), np.array([size]),
                   lambda idx, t: done.setdefault("t", t), cap=cap)
        while "t" not in done:
            yield env.timeout(1e-7)
        out[i] = done["t"]

    for i, job in enumerate(jobs):
        env.process(start(i, *job))
    env.run()
    return np.array([out[i] for i in range(len(jobs))]), net


job = st.tuples(st.sampled_from([0.0, 0.0, 1e-6, 2.5e-6, 7e-6]), st.integers(0, 31), st.integers(0, 31),
                st.sampled_from([1e5, 1e6, 4e6, 3.3e6]), st.sampled_from([None, None, 5e9, 2e10]))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(over=st.sampled_from([1, 2, 4, 8]), rail=st.booleans(), jobs=st.lists(job, min_size=2, max_size=60),
       routing=st.sampled_from(["ecmp", "spray", "adaptive"]))
def test_incremental_equals_full_resolve(over, rail, jobs, routing):
    topo = tree(over, rail, routing=routing)
    inc, net_i = finish_times(topo, jobs, True)
    full, net_f = finish_times(topo, jobs, False)
    np.testing.assert_allclose(inc, full, rtol=1e-9, atol=0)
    np.testing.assert_allclose(net_i.link_stats()["busy_s"], net_f.link_stats()["busy_s"], rtol=1e-9, atol=1e-15)
    assert net_f.stats["partial_solves"] == 0


def test_partial_solves_happen_and_match_a_fresh_solve():
    """Three groups at different levels: ending a flow re-solves only the flows that shared its
    bottleneck, and the certificate (every flow keeps a bottleneck) holds at once."""
    cap = np.array([10.0, 4.0, 3.0])
    t = FlowTable(cap)
    # flows 0-1 on link 0 (5 each), 2-3 on link 1 (2 each), 4-9 on link 2 (0.5 each)
    links = np.array([0, 0, 1, 1, 2, 2, 2, 2, 2, 2])
    indptr = np.arange(11)
    t.add(indptr, links, np.full(10, 100.0), np.zeros(10), np.full(10, np.inf), 0, np.arange(10))
    t.resolve()
    assert t.rate[:6].tolist() == [5, 5, 2, 2, 0.5, 0.5]
    assert t.bneck[:10].tolist() == [0, 0, 1, 1] + [2] * 6
    t.remove(np.array([2]))
    t.resolve()
    assert t.stats["partial_solves"] == 1 and t.stats["solved_flows"] == 10 + 1  # flow 3 alone
    assert t.rate[:6].tolist() == [5, 5, 0, 4, 0.5, 0.5]
    alive = t.alive_slots()
    ref = max_min_rates(*t.paths(alive), cap)
    np.testing.assert_allclose(t.rate[alive], ref, rtol=1e-12)


def test_repair_grows_until_the_certificate_holds():
    """A flow starting on a shared link cascades: the new flow on link 0 slows flow 0, which
    frees link 1 for flow 1, which takes link 2 from flow 2; the repair finds every changed rate,
    and the 12 flows on link 3 are never solved again."""
    cap = np.array([6.0, 10.0, 100.0, 24.0])
    t = FlowTable(cap)
    # flow 0: links 0,1; flow 1: links 1,2; flow 2: link 2; flows 3-14: link 3
    t.add(np.r_[0, 2, 4, 5 + np.arange(13)], np.r_[0, 1, 1, 2, 2, [3] * 12], np.full(15, 1e3),
          np.zeros(15), np.full(15, np.inf), 0, np.arange(15))
    t.resolve()
    np.testing.assert_allclose(t.rate[:4], [5, 5, 95, 2])
    t.add(np.array([0, 1]), np.array([0]), np.array([1e3]), np.zeros(1), np.array([np.inf]), 1, np.arange(1))
    t.resolve()  # link 0: flow 0 and the new one at 3 each; flow 1 gets 7 on link 1; flow 2 gets 93
    alive = t.alive_slots()
    np.testing.assert_allclose(t.rate[alive], [3, 7, 93] + [2] * 12 + [3], rtol=1e-12)
    np.testing.assert_allclose(t.rate[alive], max_min_rates(*t.paths(alive), cap), rtol=1e-12)
    assert t.stats["partial_solves"] >= 2  # flows 0, 1 and 2 joined after the first round failed
    assert t.stats["rate_solves"] == 1 + t.stats["partial_solves"]  # no full solve after the first
    assert t.stats["solved_flows"] - 15 <= 1 + 2 + 3 + 4  # the flows on link 3 were never solved again
