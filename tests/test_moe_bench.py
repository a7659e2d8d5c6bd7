"""MoE dispatch/combine: schedules, placement, redundant experts, the bench op and its errors."""

import doctest

import numpy as np
import pytest

from netsim.perftests import moe as moe_bench
from netsim.cli import main
from netsim.collectives import moe
from netsim.collectives.alltoall import delivery_plan, final_bytes, message_stats, schedule_pair_bytes
from netsim.collectives.skew import node_bytes, pair_bytes, zipf_popularity
from netsim.perftests.moe import MoEConfig, run_moe
from netsim.topology.spec import load_topology

from conftest import TOPOLOGIES

SUPERPOD = str(TOPOLOGIES / "h100-superpod-1su.yaml")
DGX = str(TOPOLOGIES / "dgx-h100.yaml")


@pytest.fixture(scope="module")
def superpod():
    return load_topology(SUPERPOD)


@pytest.fixture(scope="module")
def dgx():
    return load_topology(DGX)


@pytest.mark.parametrize("mod", [moe, moe_bench])
def test_doctests(mod):
    assert doctest.testmod(mod, optionflags=doctest.ELLIPSIS).failed == 0


def _layouts():
    for red in (0, 6):
        for pl in ("contiguous", "round_robin"):
            yield moe.layout(8, 40, 16, 4, popularity="zipf:1.2", seed=3, expert_rank=moe.place_experts(16, 8, pl),
                             local_size=2, max_nodes=2, redundant=red, bytes_per_token=1.0)


@pytest.mark.parametrize("algo", moe.ALGORITHMS)
def test_combine_retraces_dispatch_hops(algo):
    """Every hop of the dispatch is retraced once in reverse by the combine (at its token size)."""
    for lay in _layouts():
        d = moe.dispatch_schedule(lay, algo, local_size=2)
        c = moe.combine_schedule(lay.with_bytes(2.0), algo, local_size=2)
        assert np.allclose(schedule_pair_bytes(c), 2 * schedule_pair_bytes(d).T)
        assert d.op == "moe_dispatch" and c.op == "moe_combine"


def test_node_limited_combine_reduces_in_node_before_ib():
    lay = next(_layouts())
    r, g = lay.routing, 2
    c = moe.node_limited_combine(8, r, local_size=g)
    node = node_bytes(r, g).reshape(4, g, 4)  # [k, a, m]
    off = node.sum() - sum(node[k, :, k].sum() for k in range(4))
    assert np.isclose(message_stats(c, g)["inter_bytes"], off)  # one IB copy per (token, remote node)
    # a reverse relay of the per-rank copies (no reduction) would carry more over IB
    assert off < sum(pair_bytes(r).reshape(4, g, 4, g)[k, :, m].sum() for k in range(4) for m in range(4) if k != m)
    # the dispatch delivers exactly the routing's per-rank copies
    assert np.allclose(final_bytes(delivery_plan("node_limited", 8, r, local_size=g)), pair_bytes(r))


def test_redundant_experts_split_hot_load_and_keep_node_limit():
    base = moe.layout(16, 64, 32, 4, popularity="zipf:1.2", seed=1, local_size=4, max_nodes=2)
    rep = moe.layout(16, 64, 32, 4, popularity="zipf:1.2", seed=1, local_size=4, max_nodes=2, redundant=16)
    assert np.array_equal(base.logical_tokens(), rep.logical_tokens())  # same gate decisions
    assert rep.expert_tokens().max() < base.expert_tokens().max()
    assert rep.routing.n_experts == 48 and np.bincount(rep.routing.expert_rank).max() == 3
    nodes = np.sort(rep.routing.expert_rank[rep.routing.choices] // 4, axis=1)
    assert (1 + (np.diff(nodes, axis=1) != 0).sum(axis=1)).max() <= 2
    for e in range(32):  # no rank holds two copies of an expert
        ranks = rep.routing.expert_rank[rep.logical == e]
        assert np.unique(ranks).size == ranks.size


def test_placement_changes_where_not_what():
    rr = moe.place_experts(16, 4, "round_robin")
    assert rr.tolist() == [0, 1, 2, 3] * 4
    a = moe.layout(4, 200, 16, 2, popularity="zipf:1.2", seed=0)
    b = moe.layout(4, 200, 16, 2, popularity="zipf:1.2", seed=0, expert_rank=rr)
    assert a.logical_tokens().sum() == b.logical_tokens().sum() == 4 * 200 * 2
    assert np.allclose(a.logical_tokens()[:3], b.logical_tokens()[:3], rtol=0.1)  # the same law
    # zipf's hot experts 0..3 share rank 0 contiguously, spread over all ranks round-robin
    assert np.bincount(b.routing.expert_rank, weights=b.expert_tokens()).max() < \
        np.bincount(a.routing.expert_rank, weights=a.expert_tokens()).max()


@pytest.mark.parametrize("op", ["moe_dispatch", "moe_combine"])
def test_zipf_slower_by_the_hot_ranks_bytes(dgx, op):
    """EP8 inside one NVSwitch node, top-1 routing: the hottest expert rank receives (dispatch)
    or sends (combine) ``(n-1) T p_0`` token copies, ``p_0 = 1 / sum_i i^-alpha`` (Zipf), through
    one NVLink port of bandwidth B; the time is that closed form / B, so zipf 1.2 is slower than
    uniform by ``8 p_0`` (3.4x) up to sampling noise.  ``direct`` is an NCCL all-to-all, so it
    also pays NCCL's Simple launch and NVLink hop latency once (tuning.cc:149-162: 8.4 + 3.4 us)."""
    n, t = 8, 2048
    port = float(dgx.link_bw[(dgx.link_kind == 0) & (dgx.link_dst == 0)].sum())  # into GPU 0
    lat = 8.4e-6 + 3.4e-6
    times = {}
    for alpha, sk in ((0.0, "uniform"), (1.2, "zipf:1.2")):
        r = run_moe(dgx, MoEConfig(op, tokens=t, topk=1, experts=n, skew=sk, algo="direct"))
        closed = (n - 1) * t * zipf_popularity(n, alpha)[0] * r.summary["token_bytes"]
        hot = (r.ranks.recv_bytes if op == "moe_dispatch" else r.ranks.send_bytes).max()
        assert hot == pytest.approx(closed, rel=0.06)
        assert r.summary["time_us"] * 1e-6 == pytest.approx(closed / port + lat, rel=0.06)
        assert r.summary["bound"] == "nvlink"
        times[sk] = r.summary["time_us"] - lat * 1e6
    assert times["zipf:1.2"] / times["uniform"] == pytest.approx(n * zipf_popularity(n, 1.2)[0], rel=0.1)


@pytest.mark.parametrize("op", ["moe_dispatch", "moe_combine"])
def test_done_when_zipf_slower_on_ep64(superpod, op):
    """The issue's configuration (fewer tokens): zipf 1.2 is slower than uniform, and never
    faster than its hottest link allows."""
    kw = dict(gpus=64, tokens=256, algo="node_limited", model="flow")
    uni = run_moe(superpod, MoEConfig(op, **kw)).summary
    zipf = run_moe(superpod, MoEConfig(op, skew="zipf:1.2", **kw)).summary
    assert zipf["time_us"] > 1.5 * uni["time_us"]
    for s in (uni, zipf):
        assert s["time_us"] >= s["bound_time_us"] * (1 - 1e-9)
        assert s["max_nodes_per_token"] <= 4
    assert uni["bound"] == "nic" and zipf["bound"] == "nvlink"


def test_analytical_close_to_flow_and_algorithms_differ(superpod):
    lay = moe_bench.build_layout(superpod, moe_bench.validated(MoEConfig("moe_dispatch", gpus=32, tokens=256),
                                                                superpod))
    out = {}
    for algo in ("direct", "hierarchical", "node_limited"):
        for model in ("analytical", "flow"):
            out[algo, model] = run_moe(superpod, MoEConfig("moe_dispatch", gpus=32, tokens=256, algo=algo,
                                                           model=model), lay).summary["time_us"]
        assert out[algo, "analytical"] == pytest.approx(out[algo, "flow"], rel=0.3)
    assert out["node_limited", "flow"] < out["direct", "flow"]  # one IB copy per node instead of per rank
    ll = run_moe(superpod, MoEConfig("moe_dispatch", gpus=32, tokens=256, algo="direct", mode="low_latency",
                                     model="analytical"), lay).summary
    direct = run_moe(superpod, MoEConfig("moe_dispatch", gpus=32, tokens=256, algo="direct", model="analytical"),
                     lay).summary
    assert ll["rdma_bytes"] > direct["rdma_bytes"]  # one copy per expert, not per rank
    # NCCL's direct all-to-all shares 16 p2p channels among 31 sends (p2p.channel_caps), which
    # slows its tail: the two times are close; low latency still waits longer on its busiest link
    assert ll["bound_time_us"] > direct["bound_time_us"]


def test_cli_table_and_dataset(tmp_path, capsys):
    out = tmp_path / "res"
    argv = ["bench", "--topology", SUPERPOD, "--gpus", "16", "--op", "moe_combine", "--tokens", "128",
            "--skew", "zipf:1.0", "--redundant-experts", "16", "--model", "analytical", "--out", str(out),
            "-J", str(tmp_path / "r.json")]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "moe_combine" in text and "node_limited" in text and "bound" in text and "+16 redundant" in text
    import netsim
    res = netsim.open_results(out)
    assert len(res.table("experts")) == 256 + 16 and len(res.ranks) == 16
    assert res.links["bytes"].sum() > 0 and set(res.links["tier"]) >= {"nvlink", "pcie", "nic"}
    assert res.collectives["op"].tolist() == ["moe_combine"]
    assert main(argv) == 2  # the run exists


def _err(argv, capsys):
    assert main(["bench", "--topology", SUPERPOD, "--gpus", "16", "--model", "analytical", "--tokens", "4"]
                + argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("netsim: error: ") and "\n" not in err and "Traceback" not in err
    return err


def test_bad_values_one_line_errors(tmp_path, capsys):
    op = ["--op", "moe_dispatch"]
    assert "--topk" in _err(op + ["--topk", "9", "--experts", "8"], capsys)
    assert "--experts" in _err(op + ["--experts", "20"], capsys)  # not divisible by 16 ranks
    assert "--topk" in _err(op + ["--topk", "40", "--experts", "32"], capsys)
    m = np.zeros((16 * 4, 8), dtype=np.int64) + np.arange(8)
    bad = m.copy()
    bad[3, 2] = 256
    np.save(tmp_path / "bad.npy", bad)
    assert "expert 256 does not exist" in _err(op + ["--expert-map", str(tmp_path / "bad.npy")], capsys)
    np.save(tmp_path / "shape.npy", m[:10])
    assert "shape" in _err(op + ["--expert-map", str(tmp_path / "shape.npy")], capsys)
    np.savetxt(tmp_path / "ok.csv", m, delimiter=",", fmt="%d")
    assert main(["bench", "--topology", SUPERPOD, "--gpus", "16", "--model", "analytical", "--tokens", "4",
                 "--op", "moe_dispatch", "--expert-map", str(tmp_path / "ok.csv")]) == 0
    capsys.readouterr()
    assert "--mode" in _err(op + ["--algo", "node_limited", "--mode", "low_latency"], capsys)
    np.save(tmp_path / "place.npy", np.zeros(256, dtype=np.int64))
    assert "--placement-experts" in _err(op + ["--placement-experts", str(tmp_path / "place.npy")], capsys)
    assert "node_limited needs whole nodes" in _err(op + ["--algo", "node_limited", "--placement", "strided:2"],
                                                    capsys)


def test_bench_out_writes_links_and_ranks_for_every_op(tmp_path):
    out = tmp_path / "ar"
    assert main(["bench", "--topology", SUPERPOD, "--gpus", "16", "--op", "all_reduce", "-b", "1M", "-e", "4M",
                 "-f", "4", "--model", "analytical", "--out", str(out)]) == 0
    import netsim
    res = netsim.open_results(out)
    assert sorted(res.links["seq"].unique()) == [0, 1] and (res.links["bytes"] > 0).all()
    assert set(res.links["tier"]) == {"nvlink", "pcie", "nic"}
    assert len(res.ranks) == 2 * 16 and (res.ranks["send_bytes"] > 0).all()
    # the busiest link's time alone never exceeds the collective's time
    end = res.collectives.set_index("seq")["end_ns"]
    assert (res.links.groupby("seq")["alone_ns"].max() <= end * (1 + 1e-9)).all()


def test_direct_all_reduce_in_bench():
    import doctest as _d

    from netsim.perftests import bench
    from netsim.collectives import direct_reduce
    assert _d.testmod(direct_reduce).failed == 0
    s = direct_reduce.direct_all_reduce(8, 8000.0)
    assert np.allclose(s.bytes_sent(), 2 * 7 / 8 * 8000) and np.allclose(s.bytes_received(), 2 * 7 / 8 * 8000)
    assert s.phases[0].step.reduce and not s.phases[-1].step.reduce
    rows = bench(DGX, "all_reduce", [1 << 28], algo="direct", model="analytical")
    assert rows[0].algorithm.startswith("direct/") and rows[0].busbw_GBps > 300  # a crossbar: ring's volume


@pytest.mark.parametrize("op", ["moe_dispatch", "moe_combine"])
def test_a_job_inside_a_larger_nvlink_domain_is_one_node_of_its_size(op):
    # 8 GPUs of an NVL72 rack ran into "local_size 72 must divide 8"; they are one 8-GPU node:
    # the same time as a rack built with 8 GPUs (the switch is non-blocking either way)
    import yaml

    from netsim.topology.spec import build_topology, parse_spec
    rack = load_topology(TOPOLOGIES / "gb200-nvl72.yaml")
    doc = yaml.safe_load((TOPOLOGIES / "gb200-nvl72.yaml").read_text())
    doc["node"]["gpus"] = 8
    small = build_topology(parse_spec(doc, "gb200-8"), "gb200-8")
    cfg = MoEConfig(op, gpus=8, tokens=512)
    a = run_moe(rack, moe_bench.validated(cfg, rack)).summary
    b = run_moe(small, moe_bench.validated(cfg, small)).summary
    assert a["time_us"] == pytest.approx(b["time_us"], rel=1e-12) and a["time_us"] > 0
    assert main(["bench", "--topology", str(TOPOLOGIES / "gb200-nvl72.yaml"), "--op", op, "--gpus", "8",
                 "-q"]) == 0


def test_set_applies_to_moe_ops_and_is_recorded(tmp_path):
    # --set edits the topology for MoE ops too (it was refused): same time as the edited topology
    # built through the sweep path, a different time from the plain file, and the JSON records it
    import json

    from netsim.topology.overrides import load_with_overrides
    path = str(TOPOLOGIES / "dgx-h100.yaml")
    edited = load_with_overrides(path, {"node.link_bw": "40GB/s"})
    cfg = MoEConfig("moe_dispatch", gpus=8, tokens=256)
    want = run_moe(edited, moe_bench.validated(cfg, edited)).summary["time_us"]
    plain = run_moe(load_topology(path), moe_bench.validated(cfg, load_topology(path))).summary["time_us"]
    out = tmp_path / "r.json"
    assert main(["bench", "--topology", path, "--op", "moe_dispatch", "--gpus", "8", "--tokens", "256",
                 "--set", "node.link_bw=40GB/s", "-J", str(out), "-q"]) == 0
    doc = json.loads(out.read_text())
    assert doc["config"]["set"] == {"node.link_bw": "40GB/s"}
    assert doc["results"][0]["time_us"] == pytest.approx(want, rel=1e-12) and want < 0.9 * plain


def test_ll_rdma_sends_same_node_tokens_through_the_nics(superpod):
    # DeepEP's low-latency kernels without NVLink ("pure RDMA", V1 as first shipped): at EP8 on one
    # node every copy leaves through a NIC and crosses the leaf, none takes NVLink, and the exchange
    # is bound by the NICs (50 GB/s each) instead of NVLink (~8x faster here)
    cfg = MoEConfig("moe_dispatch", gpus=8, tokens=128, algo="direct", mode="low_latency", max_nodes=0)
    nvl = run_moe(superpod, cfg)
    rdma = run_moe(superpod, MoEConfig(**{**cfg.__dict__, "ll_transport": "rdma"}))
    by_kind = lambda r: r.links.groupby("kind")["bytes"].sum()  # noqa: E731
    k_nvl, k_rdma = by_kind(nvl), by_kind(rdma)
    assert k_nvl.get("ib", 0.0) == 0.0 and k_rdma.get("nvlink", 0.0) == 0.0
    sent = float(rdma.ranks["send_bytes"].sum())
    # rail-optimized: NIC -> its rail's leaf -> spine -> the other rail's leaf -> NIC, 4 IB links
    assert k_rdma["ib"] == pytest.approx(4 * sent, rel=1e-9)
    assert rdma.summary["bound"] == "nic" and nvl.summary["bound"] == "nvlink"
    assert rdma.summary["time_us"] > 2 * nvl.summary["time_us"]
    assert rdma.summary["algorithm"] == "low_latency/rdma"
    # DeepEP counts every low-latency copy as RDMA bytes, whatever the transport
    assert rdma.summary["rdma_bytes"] == nvl.summary["rdma_bytes"]


def test_ll_transport_bad_values(capsys):
    op = ["--op", "moe_dispatch"]
    assert "--ll-transport" in _err(op + ["--ll-transport", "rdma"], capsys)  # normal kernels
    err = _err(op + ["--ll-transport", "ib"], capsys)
    assert "--ll-transport" in err and "invalid choice" in err
    assert main(["bench", "--topology", DGX, "--gpus", "8", "--op", "moe_dispatch", "--tokens", "4", "--algo", "direct",
                 "--mode", "low_latency", "--ll-transport", "rdma", "--max-nodes", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--ll-transport" in err and "fat-tree" in err and "\n" not in err


def test_ll_transport_default_keeps_run_ids():
    from dataclasses import asdict

    from netsim.results.dataset import run_id_for
    cfg = asdict(MoEConfig("moe_dispatch", gpus=8))
    old = {k: v for k, v in cfg.items() if k != "ll_transport"}
    assert run_id_for(cfg) == run_id_for(old) != run_id_for({**cfg, "ll_transport": "rdma"})
