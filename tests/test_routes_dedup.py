"""Routes of repeated pairs: a router that says it is ``keyless`` never reads the key, and
:meth:`Topology.routes` routing each distinct pair once gives every pair the route it would get
on its own (issue: the analytical model plans every NCCL channel, and a collective's channels
repeat their pairs)."""

from __future__ import annotations

import numpy as np
import pytest

from netsim.topology import load_topology, with_routing
from netsim.topology import model as topo_model

from conftest import REPO

CASES = [(name, routing) for name in ("h100-superpod-1su", "dgx1-v100-nvlink", "rail-only-512", "deepseek-v3-mpft",
                                      "gb300-nvl72-2x400g", "p4d-a100-shared-nic", "alibaba-hpn-pod")
         for routing in ("ftree", "ecmp", "spray")]


def _pairs(topo, rng, n):
    src = rng.integers(0, topo.n_gpus, n)
    dst = rng.integers(0, topo.n_gpus, n)
    if topo.facts.planes and topo.facts.planes > 1:  # planes meet only inside a node: keep pairs node-local
        dst = (src // topo.gpus_per_node) * topo.gpus_per_node + dst % topo.gpus_per_node
    src = np.repeat(src, 4)  # every pair four times, with four different keys
    return src, np.repeat(dst, 4), rng.integers(0, 64, src.size)


@pytest.mark.parametrize("name,routing", CASES)
def test_repeated_pairs_route_as_if_alone(name, routing):
    topo = load_topology(REPO / "topologies" / f"{name}.yaml")
    try:
        topo = with_routing(topo, routing)
    except Exception:  # a routing this topology does not take
        pytest.skip(f"{name} does not take {routing}")
    rng = np.random.default_rng(7)
    src, dst, key = _pairs(topo, rng, 2 * topo_model.DEDUP_PAIRS)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(topo_model, "DEDUP_PAIRS", 10**12)  # every pair routed on its own
        alone = [topo.routes(src[i:i + 1], dst[i:i + 1], key[i:i + 1]) for i in range(0, src.size, 97)]
        whole = topo.routes(src, dst, key)
        whole_nokey = topo.routes(src, dst)
    got = topo.routes(src, dst, key)
    got_nokey = topo.routes(src, dst)
    for a, b in ((got, whole), (got_nokey, whole_nokey)):
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    for j, i in enumerate(range(0, src.size, 97)):
        assert np.array_equal(got[1][got[0][i]:got[0][i + 1]], alone[j][1])
    if getattr(topo.router, "keyless", False):  # the key is really never read
        assert np.array_equal(got[1], got_nokey[1]) and np.array_equal(got[0], got_nokey[0])


def test_keyless_only_where_routes_ignore_the_key():
    """ftree with one NIC per GPU on an NVSwitch node is keyless; ECMP is not; two NICs per GPU
    are not (the key picks the NIC); an NVLink mesh with several shortest paths is not."""
    su = load_topology(REPO / "topologies" / "h100-superpod-1su.yaml")
    assert with_routing(su, "ftree").router.keyless
    assert not with_routing(su, "ecmp").router.keyless
    assert not load_topology(REPO / "topologies" / "gb300-nvl72-2x400g.yaml").router.keyless
    mesh = load_topology(REPO / "topologies" / "dgx1-v100-nvlink.yaml")
    assert getattr(mesh.router, "keyless", False) == bool((mesh.router._count <= 1).all())


@pytest.mark.parametrize("routing", ["ftree", "ecmp"])
def test_step_latency_is_the_longest_route_of_the_step(routing):
    """:func:`step_latency` (distinct pairs routed once where the key cannot matter) equals the
    longest of the step's routes, cut as the executor cuts them, on a plan's every step: NVLS
    UP/DOWN transfers and every channel of a 4-node all-reduce, both routings."""
    from netsim.collectives.fastpath import step_latency, step_routes
    from netsim.collectives.plan import plan

    topo = with_routing(load_topology(REPO / "topologies" / "h100-superpod-1su.yaml"), routing)
    ranks = np.arange(32)
    steps = 0
    for algo in ("nvls_tree", "ring", "tree"):
        for ph in plan(topo, ranks, "all_reduce", float(1 << 28), algo).schedule.phases:
            st = ph.step
            ip, lk = step_routes(topo, ranks, st)
            want = float(topo.path_latency(ip, lk).max()) if lk.size else 0.0
            # path_latency sums along one cumulative sum: where a route sits moves the last bits
            assert step_latency(topo, ranks, st) == pytest.approx(want, rel=1e-12, abs=0)
            steps += 1
    assert steps > 10
