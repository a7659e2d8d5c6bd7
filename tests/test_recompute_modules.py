"""Selective recomputation by module (Megatron-Core's recompute_modules) and pipeline layouts in the LLM generator:
the re-run nodes' FLOPs and bytes against closed forms written out by hand for a small MLA MoE model, their place
in the backward, and the layer split a layout gives."""

from __future__ import annotations

import dataclasses

import pytest

from netsim.cli import main
from netsim.chakra.model import NodeType
from netsim.errors import InputError
from netsim.workload.generate.llm import ModelSpec, generate_llm
from netsim.workload.generate.plan import plan_llm
from netsim.workload.llmrun import simulate_llm

# hidden 64, 4 heads, query latent 32, key/value latent 16, q/k head dim 8 + 4 (rotary), v 8; 8 experts of width
# 32, top 2, one shared expert; layer 0 dense.
H, HEADS, QL, KVL, NOPE, ROPE, DV = 64, 4, 32, 16, 8, 4, 8
E, K, EFF = 8, 2, 32
SPEC = ModelSpec("mlamoe", layers=3, hidden=H, ffn=128, heads=HEADS, vocab=100, q_lora_rank=QL, kv_lora_rank=KVL,
                 qk_nope_head_dim=NOPE, qk_rope_head_dim=ROPE, v_head_dim=DV, experts=E, top_k=K, expert_ffn=EFF,
                 shared_experts=1, dense_layers=1, gated_mlp=True)
SEQ, TP, B = 32, 2, 2  # tokens of a microbatch = SEQ; bf16


def _rank0(kernels="fa3-te", **kw) -> list:
    nodes, _ = generate_llm(SPEC, tp=TP, pp=1, dp=1, microbatches=1, seq=SEQ, kernels=kernels, **kw)
    return nodes[0]


def _comp(nodes) -> dict:
    return {n.name: n for n in nodes if n.type == NodeType.COMP_NODE}


def test_default_modules_are_the_core_attention():
    assert [(n.name, n.num_ops) for n in _rank0(recompute="selective")] == \
        [(n.name, n.num_ops) for n in _rank0(recompute="selective", recompute_modules=["core_attn"])]


def test_mla_up_proj_reruns_the_up_projections_before_the_core_attention_backward():
    base, sel = _comp(_rank0()), _comp(_rank0(recompute="selective", recompute_modules=["mla_up_proj"]))
    extra = {n: sel[n] for n in sel if n not in base}
    ups = QL * HEADS * (NOPE + ROPE) + KVL * HEADS * (NOPE + DV)  # W^UQ, W^QR; W^UK, W^UV (arXiv:2412.19437)
    rope = SEQ * (HEADS + TP) * ROPE * B // TP  # q_pe of the rank's heads and the shared k_pe
    want = {}
    for layer in range(3):
        name = f"mb0.bwd.L{layer}.mla_up_proj.recompute"
        want[name] = (2 * SEQ * ups // TP, ups * B // TP)
        ew = 2 * rope + 2 * SEQ * (QL + KVL) * B  # the latents' norms read and write, not split over TP
        want[name + "_elementwise"] = (ew // B, ew)
    assert {n: (v.num_ops, v.tensor_size) for n, v in extra.items()} == want
    assert not any("core_attn.recompute" in n for n in sel)  # the modules replace Megatron-Core's default
    names = [n.name for n in _rank0(recompute="selective", recompute_modules=["mla_up_proj"])]
    for layer in range(3):
        i = names.index(f"mb0.bwd.L{layer}.mla_up_proj.recompute")
        assert names[i + 1:i + 3] == [f"mb0.bwd.L{layer}.mla_up_proj.recompute_elementwise",
                                      f"mb0.bwd.L{layer}.core_attn"]


def test_mla_up_proj_with_gemm_shapes_and_a_direct_query():
    sel = _comp(_rank0("megatron-2021", recompute="selective", recompute_modules=["mla_up_proj"]))
    q_up, kv_up = sel["mb0.bwd.L0.mla_up_proj.recompute.q_up"], sel["mb0.bwd.L0.mla_up_proj.recompute.kv_up"]
    assert (q_up.gemm_m, q_up.gemm_n, q_up.num_ops) == (SEQ, HEADS * (NOPE + ROPE) // TP,
                                                         2 * SEQ * QL * HEADS * (NOPE + ROPE) // TP)
    assert (kv_up.gemm_m, kv_up.gemm_n) == (SEQ, HEADS * (NOPE + DV) // TP)
    direct = dataclasses.replace(SPEC, q_lora_rank=0)  # Megatron's linear_q_proj runs inside the checkpoint too
    nodes, _ = generate_llm(direct, tp=TP, pp=1, dp=1, microbatches=1, seq=SEQ, recompute="selective",
                            recompute_modules=["mla_up_proj"])
    got = {n.name: n.num_ops for n in nodes[0]}["mb0.bwd.L0.mla_up_proj.recompute"]
    assert got == 2 * SEQ * (H * HEADS * (NOPE + ROPE) + KVL * HEADS * (NOPE + DV)) // TP


def test_moe_act_reruns_the_routed_activation_on_moe_layers():
    base, sel = _comp(_rank0()), _comp(_rank0(recompute="selective", recompute_modules=["moe_act"]))
    extra = {n: (v.num_ops, v.tensor_size, v.op_kind) for n, v in sel.items() if n not in base}
    f = SEQ * K * EFF * B // TP  # the top-k tokens' expert_ffn-wide hidden state on one rank
    assert extra == {f"mb0.bwd.L{layer}.moe_act.recompute": (3 * f // B, 3 * f, "elementwise") for layer in (1, 2)}
    names = [n.name for n in _rank0(recompute="selective", recompute_modules=["moe_act"])]
    assert all(names[names.index(f"mb0.bwd.L{layer}.moe_act.recompute") + 1] == f"mb0.bwd.L{layer}.experts"
               for layer in (1, 2))


def test_bad_modules():
    for kw, what in ((dict(recompute="selective", recompute_modules=["mlp"]), "expected modules"),
                     (dict(recompute="none", recompute_modules=["moe_act"]), "need recompute='selective'"),
                     (dict(recompute="selective", recompute_modules="moe_act"), "list of module names")):
        with pytest.raises(InputError, match=what):
            _rank0(**kw)
    plain = ModelSpec("tiny", layers=2, hidden=64, ffn=128, heads=4, vocab=100)
    for module in ("mla_up_proj", "moe_act"):
        with pytest.raises(InputError, match=f"{module} needs"):
            generate_llm(plain, tp=1, pp=1, dp=1, seq=16, recompute="selective", recompute_modules=[module])


def test_pipeline_layout_sets_each_chunks_layers():
    spec = dataclasses.replace(SPEC, layers=13)
    plan = plan_llm(spec, tp=1, pp=2, dp=1, seq=16, microbatches=2, schedule="interleaved", vpp=2,
                    pipeline_layout=[4, 4, 4, 1])
    assert [list(c) for c in plan.chunks] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12]]
    layers = {r: sorted({int(n.name.split(".L")[1].split(".")[0]) for n in plan.nodes(r) if ".fwd.L" in n.name})
              for r in (0, 1)}
    assert layers == {0: [0, 1, 2, 3, 8, 9, 10, 11], 1: [4, 5, 6, 7, 12]}  # chunk c on stage c % pp
    assert [len(c) for c in plan_llm(spec, tp=1, pp=2, dp=1, seq=16, microbatches=2, schedule="interleaved",
                                     vpp=2).chunks] == [3, 3, 4, 3]  # the default split
    for bad in ([4, 4, 4], [4, 4, 4, 2], [5, 4, 5, -1], ["a", 4, 4, 1]):
        with pytest.raises(InputError, match="pipeline_layout"):
            plan_llm(spec, tp=1, pp=2, dp=1, seq=16, microbatches=2, schedule="interleaved", vpp=2,
                     pipeline_layout=bad)


def test_run_gets_slower_and_cli(tmp_path, capsys):
    kw = dict(model="analytical", tp=2, pp=1, dp=2, ep=2, microbatches=1, seq=256)
    base = simulate_llm("topologies/dgx-h100.yaml", SPEC, **kw)
    sel = simulate_llm("topologies/dgx-h100.yaml", SPEC, recompute="selective", recompute_modules=["mla_up_proj"], **kw)
    assert sel.config["llm"]["recompute_modules"] == ["mla_up_proj"]
    assert sel.finish.max() > base.finish.max()
    assert main(["workload", "llm", "--llm", "deepseek-v3", "--tp", "1", "--pp", "2", "--dp", "2", "--ep", "2",
                 "--seq", "256", "--microbatches", "2", "--schedule", "interleaved", "--vpp", "2", "--recompute",
                 "selective", "--recompute-modules", "mla_up_proj,moe_act", "--pipeline-layout", "16,16,16,13",
                 "--ranks", "0", "--out", str(tmp_path / "w")]) == 0
    assert main(["workload", "llm", "--llm", "deepseek-v3", "--tp", "1", "--pp", "2", "--dp", "1", "--pipeline-layout",
                 "4,x", "--out", str(tmp_path / "v")]) == 2
    assert "--pipeline-layout: expected comma-separated layer counts" in capsys.readouterr().err
