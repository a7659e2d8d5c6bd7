"""Tests of the LLM training-workload generator (netsim.workload.generate.llm)."""

from pathlib import Path

import numpy as np
import pytest

from netsim.errors import InputError
from netsim.chakra import read_et
from netsim.chakra.schema import CommType, NodeType
from netsim.workload.simulation import simulate
from netsim.workload.generate import MODEL_PRESETS, ModelSpec, generate_llm, load_model_spec, write_llm_workload
from netsim.workload.generate.llm import stage_layers, one_f_one_b
from netsim.workload.generate.plan import plan_llm

from llm_closed_form import (ATTN_BWD, ATTN_FWD, STREAM, Shape, compute_per_rank, kind_counts, node_counts,
                             one_f_one_b_iteration, roofline)

TOPO = Path(__file__).resolve().parents[1] / "topologies" / "dgx-h100.yaml"
SMALL = ModelSpec("small", layers=4, hidden=1024, ffn=4096, heads=16, vocab=32000)
SMALL_MOE = ModelSpec("small-moe", layers=4, hidden=1024, ffn=4096, heads=16, vocab=32000,
                      experts=4, top_k=2, expert_ffn=2048)


def _shape(spec: ModelSpec) -> Shape:
    assert not spec.gated_mlp and spec.kv_heads == spec.heads
    return Shape(spec.hidden, spec.ffn, spec.heads, spec.vocab, experts=spec.experts, top_k=spec.top_k,
                 expert_ffn=spec.expert_ffn)


def _run(tmp_path, spec, **kw):
    """Simulate on one DGX H100 (compute never slowed by comm kernels); every rank's GPU compute is the
    closed-form roofline sum
    (FLOPs from the model's shape, H100 datasheet peak and HBM bandwidth) and no rank finishes
    before its own compute."""
    m, seq = kw.pop("microbatches", 4), kw.pop("seq", 512)
    prefix = write_llm_workload(tmp_path, spec, microbatches=m, seq=seq, **kw)
    # SM contention off: the backward's TP all-reduces beside the weight gradients would slow them
    res = simulate(str(TOPO), str(prefix), comm_groups=str(tmp_path / "comm_groups.json"), sm_contention="off")
    expect = compute_per_rank(_shape(spec), spec.layers, microbatches=m, seq=seq, **kw)
    assert len(res.finish) == len(expect) == kw["tp"] * kw["pp"] * kw["dp"]
    np.testing.assert_allclose(res.compute, expect, rtol=1e-12)
    assert np.all(res.finish >= res.compute * (1 - 1e-12))
    return res


def test_group_layout_tp2_pp2_dp2():
    _, groups = generate_llm(SMALL, tp=2, pp=2, dp=2, microbatches=2, seq=128)
    tp = [sorted(g) for k, g in groups.items() if int(k) <= 4]
    dp = [sorted(g) for k, g in groups.items() if int(k) > 4]
    assert list(groups) == [str(i) for i in range(1, 9)]
    assert tp == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert dp == [[0, 2], [1, 3], [4, 6], [5, 7]]


def test_ep_groups_inside_dp():
    _, groups = generate_llm(SMALL_MOE, tp=1, pp=1, dp=4, ep=2, microbatches=1, seq=64)
    # DP, then EP (blocks of 2), then expert DP: the ranks holding the same experts
    assert list(groups.values()) == [[0, 1, 2, 3], [0, 1], [2, 3], [0, 2], [1, 3]]


@pytest.mark.parametrize("overlap", [False, True])
@pytest.mark.parametrize("dp,ep", [(4, 2), (4, 4), (4, 1), (8, 2)])
def test_expert_gradients_reduce_over_expert_data_parallel_group(dp, ep, overlap):
    """Megatron-Core's DDP keeps expert weights (EP > 1) in their own buffers, reduced over the ranks that
    hold the same experts (dp / ep of them; none when ep == dp); dense weights over the whole DP group; with
    EP 1 the experts are dense weights."""
    per_rank, groups = generate_llm(SMALL_MOE, tp=1, pp=1, dp=dp, ep=ep, microbatches=2, seq=64,
                                    overlap_grad_reduce=overlap)
    embed, local = SMALL_MOE.vocab * SMALL_MOE.hidden, SMALL_MOE.experts // ep
    experts = SMALL_MOE.layers * local * SMALL_MOE.expert_params
    dense = 2 * embed + SMALL_MOE.layers * (SMALL_MOE.attn_params + SMALL_MOE.router_params)
    for rank in (0, dp - 1):
        nodes = per_rank[rank]
        red = {k: [n for n in nodes if n.name.startswith(f"{k}.grad_allreduce")] for k in ("dp", "edp")}
        want_dp, want_edp = (dense, experts) if ep > 1 else (dense + experts, 0)
        if ep == dp:
            want_edp = 0  # one rank holds these experts: nothing to reduce
        assert sum(n.comm_size for n in red["dp"]) == 2 * want_dp
        assert sum(n.comm_size for n in red["edp"]) == 2 * want_edp
        assert {groups[n.pg_name] == list(range(dp)) for n in red["dp"]} == {True}
        assert all(groups[n.pg_name] == list(range(rank % ep, dp, ep)) for n in red["edp"])


def test_presets_and_yaml(tmp_path):
    assert set(MODEL_PRESETS) == {"gpt3-175b", "llama3-8b", "llama3-70b", "llama3-405b", "mixtral-8x7b",
                                  "mixtral-8x22b", "deepseek-v3"}
    assert load_model_spec("deepseek-v3").experts == 256
    p = tmp_path / "m.yaml"
    p.write_text("name: m\nlayers: 2\nhidden: 64\nffn: 256\nheads: 2\nvocab: 100\n")
    assert load_model_spec(p) == ModelSpec("m", 2, 64, 256, 2, 100)
    p.write_text("layers: 2\nhidden: 64\n")
    with pytest.raises(InputError):
        load_model_spec(p)
    with pytest.raises(InputError):
        load_model_spec("no-such-model")


def test_1f1b_order():
    for pp in (1, 2, 4):
        for stage in range(pp):
            order = one_f_one_b(stage, pp, 5)
            assert sorted(order) == sorted([("F", m) for m in range(5)] + [("B", m) for m in range(5)])
            assert order[: pp - 1 - stage] == [("F", m) for m in range(pp - 1 - stage)]


def test_nodes_well_formed():
    per_rank, groups = generate_llm(SMALL, tp=2, pp=2, dp=2, microbatches=4, seq=512)
    for r, nodes in enumerate(per_rank):
        assert [n.id for n in nodes] == list(range(1, len(nodes) + 1))
        for n in nodes:
            assert all(d < n.id for d in n.data_deps)
            if n.type == NodeType.COMM_COLL_NODE:
                assert r in groups[n.pg_name]
            if n.type in (NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE):
                assert r in (n.comm_src, n.comm_dst) and n.comm_src != n.comm_dst
        comps = [n for n in nodes if n.type == NodeType.COMP_NODE]
        assert all(n.num_ops > 0 and n.tensor_size > 0 and n.duration_micros == 0 for n in comps)
    # sends and receives pair up in order
    sends = {}
    for nodes in per_rank:
        for n in nodes:
            if n.type == NodeType.COMM_SEND_NODE:
                sends.setdefault((n.comm_src, n.comm_dst), []).append(n.comm_tag)
    recvs = {}
    for nodes in per_rank:
        for n in nodes:
            if n.type == NodeType.COMM_RECV_NODE:
                recvs.setdefault((n.comm_src, n.comm_dst), []).append(n.comm_tag)
    assert sends == recvs and sends


def test_simulate_dense(tmp_path):
    res = _run(tmp_path, SMALL, tp=2, pp=2, dp=2)
    files = sorted(tmp_path.glob("llm.*.et"))
    assert len(files) == 8
    last = read_et(tmp_path / "llm.0.et").nodes[-1]
    assert last.comm_type == CommType.ALL_REDUCE and last.pg_name in ("5", "6", "7", "8")
    assert np.all(res.exposed_comm > 0)


def test_simulate_moe(tmp_path):
    per_rank, _ = generate_llm(SMALL_MOE, tp=2, pp=2, dp=2, ep=2, microbatches=2, seq=256)
    assert any(n.comm_type == CommType.ALL_TO_ALL for n in per_rank[0])
    _run(tmp_path, SMALL_MOE, tp=2, pp=2, dp=2, ep=2, microbatches=2, seq=256)


@pytest.mark.parametrize("tp,pp,dp", [(2, 1, 4), (1, 2, 4), (1, 4, 1), (8, 1, 1)])
def test_simulate_edge_layouts(tmp_path, tp, pp, dp):
    _run(tmp_path, SMALL, tp=tp, pp=pp, dp=dp, microbatches=3, seq=256)


def test_pp1_tp1_dp1_is_pure_compute():
    per_rank, groups = generate_llm(SMALL, tp=1, pp=1, dp=1, microbatches=2, seq=64)
    assert groups == {} and len(per_rank) == 1
    assert all(n.type == NodeType.COMP_NODE for n in per_rank[0])


def test_uneven_pipeline_split_follows_llama3():
    assert [len(r) for r in stage_layers(126, 16)] == [7] + [8] * 14 + [7]
    assert [len(r) for r in stage_layers(4, 3)] == [1, 2, 1]
    per_rank, _ = generate_llm(SMALL, tp=1, pp=3, dp=1, microbatches=2, seq=64)
    fwd = [sum(".fwd." in n.name and n.name.endswith(".attn") for n in nodes) for nodes in per_rank]
    assert fwd == [2, 4, 2]  # 2 microbatches x layers of the stage


def test_bad_arguments():
    with pytest.raises(InputError):
        generate_llm(SMALL, tp=1, pp=5, dp=1, microbatches=2, seq=64)
    with pytest.raises(InputError):
        generate_llm(SMALL_MOE, tp=1, pp=1, dp=4, ep=3, microbatches=2, seq=64)
    with pytest.raises(InputError):
        generate_llm(SMALL, tp=0, pp=1, dp=1, microbatches=2, seq=64)
    with pytest.raises(InputError):
        ModelSpec("bad", layers=2, hidden=64, ffn=64, heads=2, vocab=10, experts=4, top_k=0, expert_ffn=8)


def test_dp_gradient_buckets_overlap_backward():
    """Megatron's buckets: filled in backward order (LM head first, input embedding last), each
    reduced as soon as it holds bucket_params parameters, off the chain (nothing waits for it)."""
    from netsim.workload.generate.plan import bucket_params

    per_rank, groups = generate_llm(SMALL, tp=1, pp=1, dp=2, microbatches=2, seq=64, overlap_grad_reduce=True)
    nodes = per_rank[0]
    dp = [n for n in nodes if n.name.startswith("dp.grad_allreduce")]
    cap, embed = bucket_params(2), SMALL.vocab * SMALL.hidden
    layer = SMALL.attn_params + SMALL.mlp_params
    sizes = [n.comm_size // 2 for n in dp]  # parameters (2-byte gradients)
    assert sum(sizes) == 2 * embed + SMALL.layers * layer
    assert all(s >= cap for s in sizes[:-1]) and sizes[0] == embed + layer  # LM head + one layer fill the first
    dp_ids = {n.id for n in dp}
    later = [n for n in nodes if n.id > min(dp_ids) and n.id not in dp_ids]
    assert later and not any(set(n.data_deps) & dp_ids for n in later)  # nothing waits for them
    assert all(n.data_deps for n in dp)  # each starts when its last layer's backward is done


# ----------------------------------------------------------------------------- closed forms
def _buckets(plan, stage: int) -> int:
    """Gradient reductions of a 1F1B stage: stages after the first reduce everything at once; the
    first fills max(40M, 1M * group)-parameter buckets in backward order (Megatron's defaults)."""
    if stage > 0:
        return 1
    spec, pp, group = plan.cost.spec, plan.lay.pp, plan.lay.dp * plan.lay.cp
    layers = list(plan.chunks[0])[::-1]
    grads = [spec.vocab * spec.hidden] * (pp == 1) + [plan.cost.layer_params(x) for x in layers] + \
        [spec.vocab * spec.hidden]
    n, fill = 0, 0
    for k, g in enumerate(grads):
        fill += g
        if fill >= max(40_000_000, 1_000_000 * group) or k == len(grads) - 1:
            n, fill = n + 1, 0
    return n


@pytest.mark.parametrize("spec,tp,pp,dp,cp,ep", [
    (SMALL, 2, 2, 2, 1, 1), (SMALL, 1, 4, 1, 1, 1), (SMALL, 2, 1, 2, 2, 1), (SMALL, 1, 2, 1, 2, 1),
    (SMALL_MOE, 2, 2, 2, 1, 2), (SMALL_MOE, 1, 1, 4, 1, 4), (SMALL_MOE, 1, 2, 2, 1, 1),
])
def test_node_counts_per_rank_follow_the_parallelism(spec, tp, pp, dp, cp, ep):
    m = 3
    per_rank, groups = generate_llm(spec, tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, microbatches=m, seq=128,
                                    overlap_grad_reduce=True)
    for r, nodes in enumerate(per_rank):
        got = kind_counts(nodes)
        stage = r // (tp * cp * dp)
        expect = node_counts(spec.layers, tp=tp, pp=pp, dp=dp, cp=cp, microbatches=m, stage=stage,
                             moe_ep=ep if spec.experts else None)
        if dp * cp > 1:  # node_counts has one bucket per layer; the generator fills Megatron's buckets
            expect["coll"] += _buckets(plan_llm(spec, tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, microbatches=m, seq=128,
                                                 overlap_grad_reduce=True), stage) - (spec.layers // pp + (stage in (0, pp - 1)))
        assert got == expect, r
    # groups: one per TP, CP and DP x CP line of the layout and per EP block
    world = tp * cp * dp * pp
    n_groups = (world // tp if tp > 1 else 0) + (world // cp if cp > 1 else 0) + \
        (world // (dp * cp) if dp * cp > 1 else 0) + (world // ep if spec.experts and ep > 1 else 0)
    assert len(groups) == n_groups


def _box4(tmp_path):
    """Four H100s wired all to all by NVLink: every pipeline edge has its own link each way."""
    path = tmp_path / "box4.yaml"
    path.write_text("name: box4\nnode:\n  preset: nvlink-box4\n  gpu: H100\n")
    return path


@pytest.mark.parametrize("pp,m,seq", [(4, 4, 512), (2, 3, 256)])
@pytest.mark.parametrize("model", ["analytical", "flow"])
def test_1f1b_iteration_is_the_closed_form_on_a_contention_free_topology(tmp_path, pp, m, seq, model):
    """Fill + m periods of the last (LM-head) stage + drain, with each activation or gradient
    taking the link's latency + bytes / achievable rate; the bubble is what is left."""
    from netsim.topology.spec import load_topology

    topo_path = _box4(tmp_path)
    topo = load_topology(topo_path)
    prefix = write_llm_workload(tmp_path / "w", SMALL, tp=1, pp=pp, dp=1, microbatches=m, seq=seq)
    res = simulate(str(topo_path), str(prefix), comm_groups=str(tmp_path / "w" / "comm_groups.json"), model=model)
    h, layers = SMALL.hidden, SMALL.layers // pp
    attn, mlp, head = 4 * h * h, 2 * h * SMALL.ffn, SMALL.vocab * h
    scores, qkvo = 2 * seq * seq * h, 4 * seq * h * 2  # causal core attention; Q, K, V, O of seq x h in BF16
    x, f = seq * h * 2, seq * SMALL.ffn * 2  # one activation and one MLP hidden state in BF16
    # element-wise: 2 norms + 2 residual adds + rotary on Q and K (2 x read/write) + GELU, in bytes
    ew_fwd, ew_bwd = (2 * 2 * x + 2 * 3 * x + 2 * 2 * x + 2 * f) / STREAM, \
        (2 * 3 * x + 2 * 3 * x + 2 * 2 * x + 3 * f) / STREAM
    fwd = layers * (roofline(scores, qkvo, ATTN_FWD) + roofline(2 * seq * attn, 2 * attn)
                    + roofline(2 * seq * mlp, 2 * mlp) + ew_fwd)
    bwd = layers * (roofline(2 * scores, qkvo, ATTN_BWD) + roofline(2 * 2 * seq * attn, 2 * attn)
                    + roofline(4 * seq * mlp, 2 * mlp) + ew_bwd)
    assert np.unique(topo.link_bw).size == 1 and np.unique(topo.link_lat).size == 1
    p2p = float(topo.link_lat[0] + seq * h * 2 / topo.link_bw[0])
    expect = one_f_one_b_iteration(pp=pp, microbatches=m, fwd=fwd, bwd=bwd,
                                   head_fwd=roofline(2 * seq * head, 2 * head) + 2 * x / STREAM,
                                   head_bwd=roofline(4 * seq * head, 2 * head) + 3 * x / STREAM, p2p=p2p,
                                   first_fwd=2 * x / STREAM, first_bwd=3 * x / STREAM)
    assert res.finish.max() == pytest.approx(expect, rel=1e-12)
    busy = res.compute[0]  # stage 0: m forwards and backwards
    assert busy == pytest.approx(m * (fwd + bwd + 5 * x / STREAM), rel=1e-12)
    assert res.finish.max() - busy > (pp - 1) * (fwd + bwd)  # at least the (p - 1)-slot bubble of GPipe/1F1B
