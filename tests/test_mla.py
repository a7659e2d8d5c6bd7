"""Multi-head latent attention (MLA) in the LLM generator: node FLOPs, bytes and GEMM shapes against closed
forms written out by hand for a small MLA model, the DeepSeek-V3 preset's attention against its config.json,
and every non-MLA trace unchanged bit for bit."""

from __future__ import annotations

import dataclasses
import hashlib

import pytest

from netsim.errors import InputError
from netsim.workload.generate.llm import ModelSpec, generate_llm, load_model_spec
from netsim.workload.generate.kernels import PROFILES

# A small MLA model: hidden 64, 4 heads, query latent 32, key/value latent 16, q/k head dim 8 + 4 (rotary), v 8.
H, HEADS, QL, KVL, NOPE, ROPE, DV = 64, 4, 32, 16, 8, 4, 8
MLA = ModelSpec("mla", layers=1, hidden=H, ffn=128, heads=HEADS, vocab=100, q_lora_rank=QL, kv_lora_rank=KVL,
                qk_nope_head_dim=NOPE, qk_rope_head_dim=ROPE, v_head_dim=DV)
DQK = NOPE + ROPE  # 12: every head's query and key
SEQ, TP = 32, 2
T = SEQ  # tokens of one micro-batch of 1 on one CP rank (cp = 1)


def _nodes(kernels: str, tp: int = TP, cp: int = 1, **kw) -> dict:
    nodes, _ = generate_llm(MLA, tp=tp, pp=1, dp=1, cp=cp, microbatches=1, seq=SEQ, kernels=kernels, **kw)
    return {n.name: n for n in nodes[0]}


def test_parameters_are_deepseek_v3_eqs_1_to_11():
    q = H * QL + QL * HEADS * DQK  # W^DQ (eq. 6), W^UQ and W^QR (eqs. 7-8)
    kv = H * (KVL + ROPE) + KVL * HEADS * (NOPE + DV)  # W^DKV, W^KR (eqs. 1, 3); W^UK, W^UV (eqs. 2, 5)
    out = HEADS * DV * H  # W^O (eq. 11)
    assert MLA.attn_params == q + kv + out == 7936
    assert MLA.attn_replicated_params == H * (QL + KVL + ROPE)
    assert (MLA.qk_width, MLA.v_width, MLA.kv_width) == (HEADS * DQK, HEADS * DV, HEADS * (DQK + DV))
    direct = dataclasses.replace(MLA, q_lora_rank=0)  # the query projected directly (Megatron's linear_q_proj)
    assert direct.attn_params == H * HEADS * DQK + kv + out


def test_fused_profile_nodes_equal_the_closed_forms():
    n = _nodes("fa3-te")
    core = T * SEQ * HEADS * (DQK + DV) // TP  # 2·s·d per product per head, halved by the causal mask
    assert n["mb0.fwd.L0.core_attn"].num_ops == core == 40960
    assert n["mb0.bwd.L0.core_attn"].num_ops == 2 * core
    # Q (12 per head) and O (8 per head), K and V of every head, BF16, over TP
    assert n["mb0.fwd.L0.core_attn"].tensor_size == T * HEADS * (DQK + DV + DQK + DV) * 2 // TP
    split = MLA.attn_params - H * (QL + KVL + ROPE)  # up- and output projections: split over TP
    rep = H * (QL + KVL + ROPE)  # down-projections: whole on every rank
    assert n["mb0.fwd.L0.attn"].num_ops == 2 * T * split // TP + 2 * T * rep == 360448
    assert n["mb0.fwd.L0.attn"].tensor_size == (split // TP + rep) * 2
    out = HEADS * DV * H
    assert n["mb0.bwd.L0.attn.wgrad"].num_ops == 2 * T * (split - out) // TP + 2 * T * rep  # the column GEMMs' wgrad
    assert n["mb0.bwd.L0.attn.dgrad"].num_ops == 4 * T * out // TP + 2 * T * (split - out) // TP + 2 * T * rep
    # norm (read x, write y), rotary on 4 heads' q_pe and the shared k_pe, the latents' norms, residual add
    a = T * H * 2
    rope = T * (HEADS * ROPE // TP + ROPE) * 2
    latent = T * (QL + KVL) * 2
    assert n["mb0.fwd.L0.attn_elementwise"].tensor_size == 2 * a + 2 * rope + 2 * latent + 3 * a
    assert n["mb0.bwd.L0.attn_elementwise"].tensor_size == 3 * a + 2 * rope + 3 * latent + 3 * a


def test_cp_gathers_every_heads_key_and_value():
    n = _nodes("fa3-te", cp=2)
    t = SEQ // 2
    assert n["mb0.fwd.L0.cp_allgather_kv"].comm_size == t * HEADS * (DQK + DV) * 2 // TP
    assert n["mb0.fwd.L0.core_attn"].tensor_size == (t * HEADS * (DQK + DV) + 2 * t * HEADS * (DQK + DV)) * 2 // TP


def test_gemm_profile_shapes_are_the_latent_projections():
    n = _nodes("megatron-2021")
    # (m, n, k) of every forward GEMM: down-projections whole, up-projections column- and output row-parallel
    fwd = {"q_down": (T, QL, H), "q_up": (T, HEADS * DQK // TP, QL), "kv_down": (T, KVL + ROPE, H),
           "kv_up": (T, HEADS * (NOPE + DV) // TP, KVL), "proj": (T, H, HEADS * DV // TP)}
    for label, (m, cols, k) in fwd.items():
        f, d, w = (n[f"mb0.{p}.L0.attn.{label}.{kind}"] for p, kind in (("fwd", "fwd"), ("bwd", "dgrad"),
                                                                        ("bwd", "wgrad")))
        assert (f.gemm_m, f.gemm_n, f.num_ops) == (m, cols, 2 * m * cols * k)
        assert (d.gemm_m, d.gemm_n, d.num_ops) == (m, k, 2 * m * cols * k)
        assert (w.gemm_m, w.gemm_n, w.num_ops) == (k, cols, 2 * m * cols * k)
        assert f.tensor_size == cols * k * 2
    assert sum(n[f"mb0.fwd.L0.attn.{x}.fwd"].num_ops for x in fwd) == _nodes("fa3-te")["mb0.fwd.L0.attn"].num_ops
    rows = HEADS // TP * T  # one score matrix per local head and token, unfused: nothing skipped
    scores, context = n["mb0.fwd.L0.core_attn.scores"], n["mb0.fwd.L0.core_attn.context"]
    assert (scores.gemm_m, scores.gemm_n, scores.num_ops) == (rows, SEQ, 2 * T * SEQ * HEADS * DQK // TP)
    assert (context.gemm_m, context.gemm_n, context.num_ops) == (rows, DV, 2 * T * SEQ * HEADS * DV // TP)
    score_bytes = rows * SEQ * 2
    assert scores.tensor_size == 2 * T * HEADS * DQK * 2 // TP + score_bytes  # reads Q and K, writes the scores
    assert context.tensor_size == score_bytes + 2 * T * HEADS * DV * 2 // TP  # reads P and V, writes O
    for name, cols in (("context.dgrad", SEQ), ("context.wgrad", DV), ("scores.dgrad", DQK), ("scores.wgrad", DQK)):
        node = n[f"mb0.bwd.L0.core_attn.{name}"]
        width = DV if name.startswith("context") else DQK
        assert (node.gemm_m, node.gemm_n, node.num_ops) == (rows, cols, 2 * T * SEQ * HEADS * width // TP)


def test_deepseek_v3_preset_is_its_config():
    """deepseek-ai/DeepSeek-V3 inference/configs/config_671B.json: q_lora_rank 1536, kv_lora_rank 512,
    qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128, 128 heads, dim 7168."""
    s = load_model_spec("deepseek-v3")
    assert (s.q_lora_rank, s.kv_lora_rank, s.qk_nope_head_dim, s.qk_rope_head_dim, s.v_head_dim) == \
        (1536, 512, 128, 64, 128)
    assert s.attn_params == 7168 * 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 * 128 * 256 + 128 * 128 * 7168
    assert s.attn_params == 187_105_280
    assert (s.qk_width, s.v_width) == (128 * 192, 128 * 128)  # 3.43 and 2.29 x hidden (7168)
    assert abs(s.params() / 671e9 - 1) < 0.001  # arXiv:2412.19437: 671B (without the MTP module)


@pytest.mark.parametrize("bad, field", [
    (dict(kv_lora_rank=16), "qk_nope_head_dim"),
    (dict(q_lora_rank=32, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8), "kv_lora_rank"),
    (dict(kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8, kv_heads=2), "kv_heads"),
    (dict(kv_lora_rank=-1, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8), "kv_lora_rank"),
])
def test_bad_mla_fields_name_the_field(bad, field):
    with pytest.raises(InputError) as exc:
        ModelSpec("m", layers=1, hidden=64, ffn=128, heads=4, vocab=100, **bad)
    assert exc.value.field == field


def test_yaml_reads_the_mla_fields(tmp_path):
    p = tmp_path / "m.yaml"
    p.write_text("layers: 1\nhidden: 64\nffn: 128\nheads: 4\nvocab: 100\nq_lora_rank: 32\nkv_lora_rank: 16\n"
                 "qk_nope_head_dim: 8\nqk_rope_head_dim: 4\nv_head_dim: 8\n")
    assert load_model_spec(p) == dataclasses.replace(MLA, name="m")


# --- non-MLA models: the generated traces are the ones of the generator before MLA existed, bit for bit --------

GQA = dict(name="gqa", layers=4, hidden=256, ffn=512, heads=4, vocab=1000, kv_heads=2, gated_mlp=True)
#: sha256 of every node of every generated rank (repr of the node's fields in order), as the generator at 8b34b54
#: (before MLA) wrote them.
BEFORE_MLA = {
    "gqa-fa3-tp2-pp2-cp2-sp": (GQA, dict(tp=2, pp=2, dp=1, cp=2, microbatches=2, seq=128, sequence_parallel=True),
                               "1c71544abb33fd187ae746d17bf3b12b21da3c3a7e7766f96e0b7d1ab1ea408a"),
    "gqa-2021-tp2-pp2-full": (GQA, dict(tp=2, pp=2, dp=1, microbatches=2, seq=128, kernels="megatron-2021",
                                        recompute="full"),
                              "b5000e654d285092e6c303012950c25b7c75d80d4d185a9a4dc1c6dcbefd2bf9"),
    "gqa-2021-tp2-cp2": (GQA, dict(tp=2, pp=1, dp=1, cp=2, microbatches=1, seq=128, kernels="megatron-2021"),
                         "a8ec3397ca66e41c422fcf92994939541a51da588c28cf395e554019af9a28a9"),
    "llama3-8b-fa3-tp2-overlap": ("llama3-8b", dict(tp=2, pp=1, dp=1, microbatches=1, seq=256, tp_comm_overlap=True,
                                                    ranks=[0]),
                                  "c618642ea7b2a0359950bea8b3d0448975377faa55a6b2f85a21c8c5df4972a8"),
    # one node changed since: with EP = DP no other rank holds a rank's experts, so the gradient all-reduce no
    # longer carries them (24,153,948,160 -> 1,605,369,856 bytes; tests/test_generate_llm.py, expert data parallel)
    "mixtral-8x7b-tp2-ep2": ("mixtral-8x7b", dict(tp=2, pp=1, dp=2, ep=2, microbatches=1, seq=128, ranks=[0]),
                             "1067542f34cd425e6041df57a05cef70da88ac5fe16b0bdde334da058cadfd32"),
}


def _digest(nodes) -> str:
    h = hashlib.sha256()
    for r, ns in (nodes.items() if isinstance(nodes, dict) else enumerate(nodes)):
        for n in ns:
            h.update(repr((r, dataclasses.astuple(n))).encode())
    return h.hexdigest()


@pytest.mark.parametrize("case", sorted(BEFORE_MLA))
def test_non_mla_traces_are_unchanged(case):
    spec, kw, before = BEFORE_MLA[case]
    spec = ModelSpec(**spec) if isinstance(spec, dict) else spec
    assert not load_model_spec(spec).mla if isinstance(spec, str) else not spec.mla
    if kw.get("kernels") == "megatron-2021":  # the step around the layers came later (tests/test_megatron_2021_step.py)
        kw = {**kw, "kernels": dataclasses.replace(PROFILES["megatron-2021"], grad_accumulation=False, optimizer=False,
                                                   pipeline_scatter_gather=False)}
    assert _digest(generate_llm(spec, **kw)[0]) == before
