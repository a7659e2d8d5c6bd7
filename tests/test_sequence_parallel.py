"""Element-wise kernels, sequence parallelism and the backward's TP reductions beside the weight gradients
in the LLM generator (netsim.workload.generate.layers)."""

import json
from pathlib import Path

import numpy as np
import pytest

from netsim.chakra.schema import CommType, NodeType
from netsim.cli import main
from netsim.errors import InputError
from netsim.workload.simulation import simulate
from netsim.workload.generate import ModelSpec, generate_llm, write_llm_workload
from netsim.workload.llmrun import simulate_llm

from llm_closed_form import Shape, compute_per_rank, kind_counts, node_counts

DGX = str(Path(__file__).resolve().parents[1] / "topologies" / "dgx-h100.yaml")
#: Llama-like: SwiGLU, grouped-query attention.
GATED = ModelSpec("gated", layers=4, hidden=1024, ffn=2816, heads=16, vocab=32000, kv_heads=4, gated_mlp=True)
MOE = ModelSpec("moe", layers=4, hidden=1024, ffn=4096, heads=16, vocab=32000, experts=4, top_k=2, expert_ffn=2048,
                shared_experts=1, gated_mlp=True)


def _shape(spec):
    return Shape(spec.hidden, spec.ffn, spec.heads, spec.vocab, kv_heads=spec.kv_heads, experts=spec.experts,
                 top_k=spec.top_k, expert_ffn=spec.expert_ffn, gated=spec.gated_mlp,
                 shared_experts=spec.shared_experts)


@pytest.mark.parametrize("sp", [False, True])
@pytest.mark.parametrize("spec,tp,pp,dp,ep", [(GATED, 2, 2, 2, 1), (GATED, 4, 2, 1, 1), (GATED, 1, 2, 4, 1),
                                             (MOE, 2, 2, 2, 2)])
def test_compute_is_the_closed_form(tmp_path, sp, spec, tp, pp, dp, ep):
    """Every rank's compute is the roofline sum of its GEMMs, attention and element-wise kernels (SwiGLU, GQA,
    routed and shared experts); under SP the norms and residual adds cover 1/tp of the tokens."""
    m, seq = 3, 512
    prefix = write_llm_workload(tmp_path, spec, tp=tp, pp=pp, dp=dp, ep=ep, microbatches=m, seq=seq,
                                sequence_parallel=sp)
    res = simulate(DGX, str(prefix), comm_groups=str(tmp_path / "comm_groups.json"), sm_contention="off")
    expect = compute_per_rank(_shape(spec), spec.layers, tp=tp, pp=pp, dp=dp, ep=ep, microbatches=m, seq=seq,
                              sp=sp and tp > 1)
    np.testing.assert_allclose(res.compute, expect, rtol=1e-12)


@pytest.mark.parametrize("spec,moe_ep", [(GATED, None), (MOE, 2)])
@pytest.mark.parametrize("sp", [False, True])
def test_node_counts(spec, moe_ep, sp):
    tp, pp, dp, m = 2, 2, 2, 3
    per_rank, _ = generate_llm(spec, tp=tp, pp=pp, dp=dp, ep=moe_ep or 1, microbatches=m, seq=128,
                               sequence_parallel=sp)
    for r, nodes in enumerate(per_rank):
        got = kind_counts(nodes)
        stage = r // (tp * dp)
        expect = node_counts(spec.layers, tp=tp, pp=pp, dp=dp, microbatches=m, stage=stage, moe_ep=moe_ep, sp=sp,
                             shared=bool(spec.shared_experts))
        # node_counts reduces gradients per layer (buckets); without overlap it is one all-reduce per chunk
        expect["coll"] -= spec.layers // pp + (stage in (0, pp - 1)) - 1
        assert got == expect, r


def test_elementwise_bytes_follow_the_kernels():
    """Forward of one layer: RMSNorm 2x, residual 3x, rotary on Q and K, SwiGLU 3F; backward 3x, 3x, 5F."""
    tp, seq = 2, 256
    x, f = seq * GATED.hidden * 2, seq * GATED.ffn * 2 // tp
    qk = seq * (GATED.hidden + GATED.kv_hidden) * 2 // tp
    for sp, shard in ((False, x), (True, x // tp)):
        nodes = {n.name: n for n in generate_llm(GATED, tp=tp, pp=1, dp=1, microbatches=1, seq=seq,
                                                 sequence_parallel=sp)[0][0]}
        sizes = {k: nodes[f"mb0.{k}"].tensor_size for k in ("fwd.L0.attn_elementwise", "fwd.L0.mlp_elementwise",
                                                           "bwd.L0.attn_elementwise", "bwd.L0.mlp_elementwise",
                                                           "fwd.final_norm", "bwd.final_norm", "fwd.embedding",
                                                           "bwd.embedding")}
        assert sizes == {"fwd.L0.attn_elementwise": 5 * shard + 2 * qk, "fwd.L0.mlp_elementwise": 5 * shard + 3 * f,
                         "bwd.L0.attn_elementwise": 6 * shard + 2 * qk, "bwd.L0.mlp_elementwise": 6 * shard + 5 * f,
                         "fwd.final_norm": 2 * shard, "bwd.final_norm": 3 * shard,
                         "fwd.embedding": 2 * x, "bwd.embedding": 3 * x}  # every TP rank writes the whole lookup
        assert {nodes[f"mb0.{k}"].op_kind for k in sizes} == {"elementwise"}
        assert all(nodes[f"mb0.{k}"].num_ops == sizes[k] // 2 for k in sizes)  # one op per BF16 element


def test_sp_collectives_replace_each_all_reduce():
    """Forward: all-gather (one shard) before each block, reduce-scatter (the whole activation) after it;
    backward: the gradient's shards gathered, the input re-gathered beside the dgrad for the wgrad, the input
    gradient reduce-scattered beside the wgrad."""
    tp, seq = 4, 256
    act = seq * GATED.hidden * 2
    nodes = generate_llm(GATED, tp=tp, pp=1, dp=1, microbatches=1, seq=seq, sequence_parallel=True)[0][0]
    by_name = {n.name: n for n in nodes}
    by_id = {n.id: n for n in nodes}
    colls = [n for n in nodes if n.type == NodeType.COMM_COLL_NODE]
    assert not any(n.comm_type == CommType.ALL_REDUCE for n in colls)
    assert {(n.comm_type, n.comm_size) for n in colls} == {(CommType.ALL_GATHER, act // tp),
                                                           (CommType.REDUCE_SCATTER, act)}
    names = [n.name for n in nodes]
    fwd = names[names.index("mb0.fwd.L0.mlp_elementwise"):names.index("mb0.fwd.L1.attn_elementwise")]
    assert fwd == ["mb0.fwd.L0.mlp_elementwise", "mb0.fwd.L0.mlp_allgather", "mb0.fwd.L0.mlp",
                   "mb0.fwd.L0.mlp_reducescatter"]
    regather, dgrad = by_name["mb0.bwd.L0.mlp_regather"], by_name["mb0.bwd.L0.mlp.dgrad"]
    rs, wgrad = by_name["mb0.bwd.L0.mlp_reducescatter"], by_name["mb0.bwd.L0.mlp.wgrad"]
    gather = by_name["mb0.bwd.L0.mlp_allgather"]
    assert regather.data_deps == dgrad.data_deps == (gather.id,)  # side by side
    assert rs.data_deps == (dgrad.id,) and set(wgrad.data_deps) == {dgrad.id, regather.id}
    after = by_id[wgrad.id + 1]
    assert after.name == "mb0.bwd.L0.mlp_elementwise" and set(after.data_deps) == {wgrad.id, rs.id}


def test_the_backward_all_reduce_runs_beside_the_weight_gradient():
    """Without SP: the input gradient's all-reduce starts when the dgrad ends and overlaps the wgrad; the
    next kernel starts when both are done (Megatron's async all-reduce; SM contention off)."""
    res = simulate_llm(DGX, GATED, tp=8, pp=1, dp=1, microbatches=1, seq=2048, model="flow", sm_contention="off")
    ops = {name: (start, end) for rank, _, name, _, start, end, _ in res.ops if rank == 0}
    for block in ("attn", "mlp"):
        d, ar, w = (ops[f"mb0.bwd.L1.{block}{s}"] for s in (".dgrad", "_allreduce", ".wgrad"))
        nxt = ops[f"mb0.bwd.L1.{block}_elementwise"]
        assert ar[0] == pytest.approx(d[1], abs=1e-12) and w[0] == pytest.approx(d[1], abs=1e-12)
        assert nxt[0] == pytest.approx(max(ar[1], w[1]), abs=1e-12)


def test_sp_is_off_by_default_and_a_flag(tmp_path, capsys):
    a = generate_llm(GATED, tp=2, pp=1, dp=1, microbatches=1, seq=128)[0][0]
    b = generate_llm(GATED, tp=2, pp=1, dp=1, microbatches=1, seq=128, sequence_parallel=False)[0][0]
    assert [(n.name, n.tensor_size) for n in a] == [(n.name, n.tensor_size) for n in b]
    # tp = 1: nothing to shard, the same job
    c = generate_llm(GATED, tp=1, pp=1, dp=1, microbatches=1, seq=128, sequence_parallel=True)[0][0]
    d = generate_llm(GATED, tp=1, pp=1, dp=1, microbatches=1, seq=128)[0][0]
    assert [(n.name, n.tensor_size) for n in c] == [(n.name, n.tensor_size) for n in d]
    with pytest.raises(InputError, match="sequence_parallel"):
        generate_llm(GATED, tp=2, pp=1, dp=1, microbatches=1, seq=128, sequence_parallel="yes")
    argv = ["run", "--topology", DGX, "--llm", "llama3-8b", "--tp", "8", "--pp", "1", "--dp", "1",
            "--microbatches", "1", "--seq", "1024", "--model", "analytical", "--json", "-q"]
    assert main(argv) == 0
    off = json.loads(capsys.readouterr().out)
    assert main(argv + ["--sequence-parallel"]) == 0
    on = json.loads(capsys.readouterr().out)
    # 1/8 of the norms' HBM traffic, but at 8 MiB a reduce-scatter plus an all-gather take longer than
    # NCCL's all-reduce on NVSwitch, and the backward re-gathers the input
    assert on["compute_us_mean"] < off["compute_us_mean"] and on["exposed_comm_us_mean"] > off["exposed_comm_us_mean"]
    res = simulate_llm(DGX, "llama3-8b", tp=8, pp=1, dp=1, microbatches=1, seq=1024, model="analytical",
                       sequence_parallel=True)
    assert res.config["llm"]["sequence_parallel"] is True  # recorded in the run's config (runs table)
    out = tmp_path / "w"
    assert main(["workload", "llm", "--llm", "llama3-8b", "--tp", "2", "--pp", "1", "--dp", "1", "--microbatches",
                 "1", "--seq", "128", "--sequence-parallel", "--out", str(out), "-q"]) == 0
    capsys.readouterr()
    assert main(["trace", "inspect", str(out / "llm.0.et"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert {c["comm_type"] for c in summary["collectives"]} == {"ALL_GATHER", "REDUCE_SCATTER"}


def test_sweep_key():
    from netsim.sweep.spec import parse_sweep

    base = {"topology": DGX, "llm.model": "llama3-8b", "llm.tp": 8, "llm.pp": 1, "llm.dp": 1}
    s = parse_sweep({"kind": "run", "base": base, "grid": {"llm.sequence_parallel": [False, True]}})
    assert len(set(s.run_ids)) == 2
