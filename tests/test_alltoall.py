"""MoE all-to-all: skew generators, alltoallv, Tutel 2DH, DeepEP node-limited dispatch."""

import doctest
import time

import numpy as np
import pytest
import simpy

from netsim.collectives import alltoall as a2a
from netsim.collectives import skew
from netsim.collectives.alltoall import (alltoallv, delivery_plan, final_bytes, hierarchical_all_to_all,
                                         message_stats, node_limited_all_to_all, schedule_pair_bytes)
from netsim.collectives.direct import direct_all_to_all
from netsim.collectives.executor import run_collective
from netsim.collectives.skew import (load_matrix, node_bytes, pair_bytes, parse_skew, route_tokens,
                                     skewed_matrix, skewed_routing, zipf_popularity)
from netsim.errors import InputError
from netsim.network.analytical import AnalyticalNetwork
from netsim.network.flow import FlowNetwork
from netsim.topology.builders import nvswitch_domain
from netsim.topology.spec import load_topology

from conftest import TOPOLOGIES

SUPERPOD = TOPOLOGIES / "h100-superpod-1su.yaml"


def _offdiag(m):
    return m - np.diag(np.diag(m))


@pytest.mark.parametrize("mod", [skew, a2a])
def test_doctests(mod):
    assert doctest.testmod(mod, optionflags=doctest.ELLIPSIS).failed == 0


# ------------------------------------------------------------------ skew
def test_route_tokens_top_k_distinct_and_deterministic():
    kw = dict(popularity="zipf:1.5", seed=7)
    r1 = route_tokens(8, 500, 32, 4, **kw)
    r2 = route_tokens(8, 500, 32, 4, **kw)
    assert np.array_equal(r1.choices, r2.choices)
    assert not np.array_equal(r1.choices, route_tokens(8, 500, 32, 4, popularity="zipf:1.5", seed=8).choices)
    srt = np.sort(r1.choices, axis=1)
    assert (np.diff(srt, axis=1) > 0).all()  # without replacement
    assert np.array_equal(r1.expert_rank, np.arange(32) // 4)


def test_route_tokens_follows_popularity():
    p = np.array([0.5, 0.3, 0.2, 0.0])
    r = route_tokens(4, 5000, 4, 1, popularity=p, seed=0)
    freq = np.bincount(r.choices.ravel(), minlength=4) / r.choices.size
    assert np.allclose(freq, p, atol=0.01) and freq[3] == 0


def test_extreme_skew_finishes_exactly():
    # zipf:20 starves rejection sampling: the exact exponential-key fallback completes the tokens
    r = route_tokens(4, 300, 16, 5, popularity="zipf:20", seed=1)
    assert (np.diff(np.sort(r.choices, axis=1), axis=1) > 0).all()
    assert (r.choices[:, 0] == 0).mean() > 0.99


def test_node_limited_gating_law():
    # greedy rule: experts in sampling order, skipping those that would open a node beyond max_nodes;
    # reference: the same walk over an exponential race (Exp(1)/p order = successive sampling)
    p = zipf_popularity(8, 1.0)
    r = route_tokens(4, 10000, 8, 3, popularity=p, seed=0, local_size=2, max_nodes=1)  # 2 nodes x 4 experts
    order = np.argsort(np.random.default_rng(5).standard_exponential((40000, 8)) / p, axis=1)
    same = (order // 4) == (order[:, :1] // 4)
    ref = np.array([row[ok][:3] for row, ok in zip(order, same)])
    for slot in range(3):
        got = np.bincount(r.choices[:, slot], minlength=8) / r.choices.shape[0]
        assert np.allclose(got, np.bincount(ref[:, slot], minlength=8) / ref.shape[0], atol=0.015)


@pytest.mark.parametrize("alpha", [0.0, 1.0, 8.0])
def test_node_limited_routing_spans_at_most_max_nodes(alpha):
    r = route_tokens(16, 400, 64, 8, popularity=f"zipf:{alpha}", seed=3, local_size=4, max_nodes=2)
    nodes = np.sort(r.expert_rank[r.choices] // 4, axis=1)
    spans = 1 + (np.diff(nodes, axis=1) != 0).sum(axis=1)
    assert spans.max() <= 2
    assert (np.diff(np.sort(r.choices, axis=1), axis=1) > 0).all()


def test_pair_and_node_bytes_deduplicate():
    choices = np.array([[0, 1], [2, 3], [1, 4]])  # experts 0,1 on rank 0; 2,3 on rank 1; 4 on rank 2
    r = skew.MoERouting(3, 1, 2, np.array([0, 0, 1, 1, 2, 2]), choices, bytes_per_token=10.0)
    assert pair_bytes(r).tolist() == [[10, 0, 0], [0, 10, 0], [10, 0, 10]]
    rr = skew.MoERouting(4, 1, 2, np.array([0, 1, 2, 3]), np.array([[0, 1], [2, 3], [0, 2], [1, 3]]), 1.0)
    assert node_bytes(rr, 2).tolist() == [[1, 0], [0, 1], [1, 1], [1, 1]]


def test_zipf_concentrates_load():
    ratios = []
    for alpha in (0.0, 0.5, 1.0, 2.0):
        col = skewed_matrix(32, 1e6, f"zipf:{alpha}", top_k=2, tokens_per_rank=1024).sum(axis=0)
        ratios.append(col.max() / col.mean())
    assert ratios[0] < 1.2 and all(b > a for a, b in zip(ratios, ratios[1:]))
    assert np.allclose(zipf_popularity(5, 0.0), 0.2)


@pytest.mark.parametrize("spec", ["uniform", "zipf:0", "zipf:1.3"])
def test_skewed_matrix_totals_exact(spec):
    n, s = 16, 3.5e6
    m = skewed_matrix(n, s, spec, top_k=2, seed=2, tokens_per_rank=512)
    assert m.shape == (n, n) and (m >= 0).all()
    assert m.sum() == pytest.approx(n * s, rel=1e-12)
    assert np.allclose(m.sum(axis=1), s)  # experts_per_rank=1: every token reaches top_k ranks
    if spec == "uniform":
        assert (m == s / n).all()
    m2 = skewed_matrix(n, s, spec, top_k=4, experts_per_rank=4, seed=2, tokens_per_rank=512)
    assert m2.sum() == pytest.approx(n * s, rel=1e-12)
    assert np.array_equal(m2, skewed_matrix(n, s, spec, top_k=4, experts_per_rank=4, seed=2,
                                            tokens_per_rank=512))


def test_parse_skew():
    assert parse_skew("zipf:1.2") == skew.Skew("zipf", 1.2)
    assert parse_skew(" Uniform ").kind == "uniform"
    assert str(parse_skew("zipf:0.50")) == "zipf:0.5"
    for bad in ("zipf", "zipf:-1", "zipf:nan", "pareto:2", "", 3):
        with pytest.raises(InputError, match="--skew"):
            parse_skew(bad)


def test_load_matrix_roundtrip(tmp_path):
    m = np.arange(16, dtype=float).reshape(4, 4)
    np.save(tmp_path / "m.npy", m)
    np.savetxt(tmp_path / "m.csv", m, delimiter=",", header="bytes, row = sender")
    assert np.array_equal(load_matrix(tmp_path / "m.npy", 4), m)
    assert np.array_equal(load_matrix(str(tmp_path / "m.csv"), 4), m)


@pytest.mark.parametrize("name,content,match", [
    ("shape.npy", np.ones((3, 4)), "4x4"),
    ("nan.npy", np.array([[0, 1], [np.nan, 0]]), "finite"),
    ("neg.csv", "0,1,2,3\n1,0,-5,1\n0,0,0,0\n1,1,1,1\n", ">= 0"),
    ("words.csv", "a,b,c,d\n", "comma-separated"),
    ("m.json", "[[1]]", ".npy or .csv"),
    ("missing.npy", None, "no such file"),
])
def test_load_matrix_errors_name_the_file(tmp_path, name, content, match):
    path = tmp_path / name
    n = 2 if name == "nan.npy" else 4
    if isinstance(content, np.ndarray):
        np.save(path, content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(InputError, match=match) as err:
        load_matrix(path, n)
    assert str(path) in str(err.value)


def test_bad_arguments_raise_input_error():
    with pytest.raises(InputError, match="local_size"):
        hierarchical_all_to_all(12, 1e6, local_size=5)
    with pytest.raises(InputError, match="top_k"):
        route_tokens(4, 10, 4, 5)
    with pytest.raises(InputError, match="matrix"):
        alltoallv(4, np.ones((3, 3)))
    r = route_tokens(16, 100, 32, 6, seed=0)  # unrestricted: tokens span up to 4 nodes
    with pytest.raises(InputError, match="max_nodes"):
        node_limited_all_to_all(16, r, local_size=4, max_nodes=2)
    node_limited_all_to_all(16, r, local_size=4, max_nodes=None)


# ------------------------------------------------------------ schedules
def test_alltoallv_moves_exactly_the_matrix():
    n = 16
    m = skewed_matrix(n, 1e6, "zipf:1.2", top_k=2, tokens_per_rank=256)
    m[3, 5] = m[5, 3] = 0.0
    for window in (None, 1, 5):
        s = alltoallv(n, m, window=window)
        assert (s.op, s.algorithm, s.nbytes) == ("alltoall", "direct", pytest.approx(m.sum() / n))
        assert np.allclose(schedule_pair_bytes(s), _offdiag(m))
        assert s.bytes_sent().sum() == pytest.approx(_offdiag(m).sum())
        assert sum(p.step.n_transfers for p in s.phases) == np.count_nonzero(_offdiag(m))
        assert all((p.step.nbytes > 0).all() for p in s.phases)
    assert np.allclose(final_bytes(delivery_plan("direct", n, m)), m)


@pytest.mark.parametrize("matrix", [False, True])
def test_hierarchical_delivers_exact_bytes(matrix):
    n, g, s_ = 16, 4, 1.6e6
    m = skewed_matrix(n, s_, "zipf:1.0", top_k=3, experts_per_rank=2, tokens_per_rank=256) if matrix \
        else np.full((n, n), s_ / n)
    s = hierarchical_all_to_all(n, None if matrix else s_, local_size=g, matrix=m if matrix else None, window=2)
    assert (s.algorithm, s.nbytes) == ("hierarchical", pytest.approx(s_))
    plan = delivery_plan("hierarchical", n, m, local_size=g)
    assert np.allclose(final_bytes(plan), m)  # every byte ends at its destination, once
    assert np.allclose(schedule_pair_bytes(s), plan.hop_bytes())
    # relays: bytes_received counts forwarded bytes, so it exceeds what is delivered
    assert s.bytes_received().sum() > _offdiag(m).sum()
    st = message_stats(s, g)
    assert st["inter_messages"] == n * (n // g - 1) and st["inter_bytes"] == pytest.approx(
        m.reshape(4, 4, 4, 4).sum() - sum(m.reshape(4, 4, 4, 4)[k, :, k, :].sum() for k in range(4)))


def test_hierarchical_uniform_equals_matrix_form():
    n, g = 16, 8
    a = hierarchical_all_to_all(n, 4096.0, local_size=g)
    b = hierarchical_all_to_all(n, None, local_size=g, matrix=np.full((n, n), 256.0))
    assert np.allclose(schedule_pair_bytes(a), schedule_pair_bytes(b)) and a.nbytes == b.nbytes == 4096


@pytest.mark.parametrize("chunks", [1, 3])
def test_node_limited_routing_delivers_and_saves_ib(chunks):
    n, g = 16, 4
    r = skewed_routing(n, 2e6, "zipf:0.8", top_k=6, experts_per_rank=2, seed=5, tokens_per_rank=300,
                       local_size=g, max_nodes=3)
    s = node_limited_all_to_all(n, r, local_size=g, max_nodes=3, chunks=chunks)
    assert (s.algorithm, s.n_steps) == ("node_limited", chunks + 1)
    assert s.nbytes == pytest.approx(2e6)
    plan = delivery_plan("node_limited", n, r, local_size=g)
    assert np.allclose(final_bytes(plan), pair_bytes(r))
    assert np.allclose(schedule_pair_bytes(s), plan.hop_bytes())
    nl, direct = message_stats(s, g), message_stats(alltoallv(n, pair_bytes(r)), g)
    nb = node_bytes(r, g)
    own = np.repeat(np.arange(n // g), g)
    assert nl["inter_bytes"] == pytest.approx(nb.sum() - nb[np.arange(n), own].sum())
    assert nl["inter_bytes"] < 0.8 * direct["inter_bytes"]  # one IB copy per node, not per GPU


def test_node_limited_matrix_delivers_exact_bytes():
    n, g = 16, 8
    m = skewed_matrix(n, 1e6, "zipf:1.5", tokens_per_rank=256)
    s = node_limited_all_to_all(n, m, local_size=g)
    plan = delivery_plan("node_limited", n, m, local_size=g)
    assert np.allclose(final_bytes(plan), m)
    assert np.allclose(schedule_pair_bytes(s), plan.hop_bytes())


def test_final_bytes_rejects_acausal_or_duplicate_plans():
    m = np.full((8, 8), 10.0)
    plan = delivery_plan("hierarchical", 8, m, local_size=4)
    swapped = a2a.DeliveryPlan(**{**plan.__dict__, "hop_stage": 1 - plan.hop_stage})
    with pytest.raises(ValueError, match="does not hold"):
        final_bytes(swapped)
    twice = a2a.DeliveryPlan(**{**plan.__dict__, **{k: np.concatenate([getattr(plan, k)] * 2)
                                                    for k in ("hop_item", "hop_src", "hop_dst", "hop_stage")}})
    with pytest.raises(ValueError, match="twice"):
        final_bytes(twice)


# -------------------------------------------------------------- networks
def test_superpod_hierarchical_sends_fewer_larger_inter_node_messages():
    topo = load_topology(SUPERPOD)
    n, g, s_ = 16, 8, 16 * 2**20
    scheds = {"direct": direct_all_to_all(n, s_), "hierarchical": hierarchical_all_to_all(n, s_, local_size=g),
              "alltoallv": alltoallv(n, np.full((n, n), s_ / n)),
              "node_limited": node_limited_all_to_all(n, np.full((n, n), s_ / n), local_size=g)}
    times, stats = {}, {}
    for name, s in scheds.items():
        res = run_collective(FlowNetwork(simpy.Environment(), topo), s, np.arange(n))
        times[name], stats[name] = res.time, message_stats(s, g)
        assert np.isfinite(res.time) and res.time > 0
    d, h = stats["direct"], stats["hierarchical"]
    assert h["inter_messages"] * 8 == d["inter_messages"]  # N-1 = 1 peer instead of n-g = 8
    assert h["inter_bytes"] / h["inter_messages"] == pytest.approx(8 * d["inter_bytes"] / d["inter_messages"])
    assert h["inter_bytes"] == pytest.approx(d["inter_bytes"])
    assert times["alltoallv"] == pytest.approx(times["direct"])
    # 2 nodes, rail-aligned: every GPU's NIC carries S/2 either way; 2DH adds an NVLink step first
    assert times["direct"] < times["hierarchical"] < 1.5 * times["direct"]


@pytest.mark.parametrize("n", [4, 8])
def test_direct_closed_form_on_crossbar(n):
    bw, s_ = 100e9, 64 * 2**20
    topo = nvswitch_domain(n, links_per_gpu=1, link_bw=bw, latency=0.0)
    expect = (n - 1) / n * s_ / bw
    flow = run_collective(FlowNetwork(simpy.Environment(), topo), direct_all_to_all(n, s_))
    assert flow.time == pytest.approx(expect, rel=1e-9)
    flow_v = run_collective(FlowNetwork(simpy.Environment(), topo), alltoallv(n, np.full((n, n), s_ / n)))
    assert flow_v.time == pytest.approx(expect, rel=1e-9)
    # no contention in the analytical model: peers one at a time (window=1) give the same closed form
    ana = run_collective(AnalyticalNetwork(simpy.Environment(), topo), direct_all_to_all(n, s_, window=1))
    assert ana.time == pytest.approx(expect, rel=1e-9)
    ana_v = run_collective(AnalyticalNetwork(simpy.Environment(), topo),
                           alltoallv(n, np.full((n, n), s_ / n), window=1))
    assert ana_v.time == pytest.approx(expect, rel=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["direct", "hierarchical", "alltoallv", "alltoallv_skew_w1"])
def test_ep64_superpod_wall_time(kind):
    topo = load_topology(SUPERPOD)
    n, s_ = 64, 256 * 2**20
    sched = {"direct": lambda: direct_all_to_all(n, s_),
             "hierarchical": lambda: hierarchical_all_to_all(n, s_, local_size=8),
             "alltoallv": lambda: alltoallv(n, skewed_matrix(n, s_, "uniform")),
             "alltoallv_skew_w1": lambda: alltoallv(n, skewed_matrix(n, s_, "zipf:1.2"), window=1)}[kind]
    t0 = time.perf_counter()
    res = run_collective(FlowNetwork(simpy.Environment(), topo), sched(), np.arange(n))
    assert time.perf_counter() - t0 < 2.0
    assert res.time > 0
