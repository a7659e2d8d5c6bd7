"""Closed forms for generated LLM workloads, written from the published formulas, not from the generator.

* FLOPs of a transformer block: 2 x tokens x weights for every matrix product (Kaplan et al.,
  arXiv:2001.08361 §2.1), plus the attention scores 4 x b x s^2 x h (Narayanan et al., SC'21,
  arXiv:2104.04473 §5.1) halved by the causal mask (the kernel skips blocks above the diagonal),
  backward twice the forward; Megatron-LM splits every matrix over TP.
* The roofline time of a kernel: ops / (e x min(peak, HBM bandwidth x ops / bytes)) (Williams et al.,
  CACM 2009), with the GPU's datasheet figures and the achieved fraction e of the roofline measured for
  the kernel: matmuls at the Maximum Achievable Matmul FLOPS (stas00/ml-engineering, H100 SXM BF16
  794.5 of 989 TFLOP/s), the fused attention kernel at FlashAttention-3's (arXiv:2407.08608: H100,
  BF16, head dim 128, 8k, no causal mask: 646 forward, 559 backward); it reads Q, K, V and writes O.
* Element-wise kernels stream their operands through HBM once: time = bytes / the bandwidth BabelStream's
  Add reaches on an H100 (2.97 TB/s, Azure ND H100 v5).  Per layer: two RMSNorms (forward reads x and
  writes y; backward reads dy and x and writes dx), two residual adds (read two, write one, both passes),
  rotary embeddings on Q and K (read and write) and the MLP activation (SwiGLU: reads gate and up, writes
  their product; backward reads dy, gate and up, writes two gradients; GELU: 2 and 3 tensors).  Sequence
  parallelism (Korthikanti et al., arXiv:2205.05198) runs the norms and residual adds on 1/tp of the
  tokens.  The first stage also looks up the embedding (read rows, write x; backward 3 tensors), the last
  runs the final norm.
* Megatron-LM's backward with TP > 1: a block's row-parallel GEMM backward and its column-parallel GEMM's
  dgrad run as one kernel stretch before the TP reduction, the column GEMM's wgrad beside it (separate
  roofline terms: dgrad reads every weight of the block, wgrad the column GEMM's).
* The node counts per rank follow from Megatron-LM's layout: per layer and microbatch one core
  attention, one attention-projection and one MLP kernel per pass, a TP all-reduce after each, a CP all-gather (forward) and
  reduce-scatter (backward), one gradient bucket per layer, activations and gradients between stages.
* 1F1B (PipeDream-Flush, Narayanan et al. arXiv:2006.09503) on stages that are equal but the last
  (which also runs the LM head), with a point-to-point time ``c`` that blocks the sender: the last
  stage is the bottleneck, so the iteration is the fill, ``m`` periods of the last stage and the
  drain back to stage 0.
"""

from __future__ import annotations

from dataclasses import dataclass

#: H100 SXM datasheet: dense BF16 tensor FLOP/s and HBM3 bytes/s.
H100_PEAK, H100_HBM = 989e12, 3.35e12
#: Achieved TFLOP/s on an H100 SXM: matmul (MAMF), FlashAttention-3 forward and backward.
GEMM, ATTN_FWD, ATTN_BWD = 794.5e12, 646e12, 559e12
#: BabelStream Add on an H100 80GB HBM3 (Azure/AI-benchmarking-guide, ND_H100_v5_results.md): bytes/s.
STREAM = 2.97e12


def roofline(ops: float, nbytes: float, achieved: float = GEMM, hbm: float = H100_HBM) -> float:
    """Seconds of a kernel of ``ops`` operations touching ``nbytes`` (weights, or Q/K/V/O for attention)
    that reaches ``achieved`` FLOP/s when compute-bound (the same fraction of the HBM roof when not)."""
    return ops / (achieved / H100_PEAK * min(H100_PEAK, hbm * ops / nbytes))


def elementwise_seconds(shape: "Shape", *, tokens: int, tp: int, sp: bool = False, dtype: int = 2,
                        layer_moe: bool | None = None) -> tuple[float, float]:
    """Forward and backward seconds of one layer's element-wise kernels on one rank."""
    h = shape.hidden
    kv = h * (shape.kv_heads or shape.heads) // shape.heads
    x = tokens * h * dtype / (tp if sp else 1)  # what a norm or residual add sees
    qk = tokens * (h + kv) * dtype / tp
    moe = bool(shape.experts) if layer_moe is None else layer_moe
    f = tokens * ((shape.top_k + shape.shared_experts) * shape.expert_ffn if moe else shape.ffn) * dtype / tp
    act_f, act_b = (3 * f, 5 * f) if shape.gated else (2 * f, 3 * f)
    fwd = (2 * x + 3 * x) * 2 + 2 * qk + act_f
    bwd = (3 * x + 3 * x) * 2 + 2 * qk + act_b
    return fwd / STREAM, bwd / STREAM


@dataclass(frozen=True)
class Shape:
    """A dense or MoE decoder layer as the papers describe it (no GQA unless ``kv_heads``)."""

    hidden: int
    ffn: int
    heads: int
    vocab: int
    kv_heads: int | None = None
    experts: int = 0
    top_k: int = 0
    expert_ffn: int = 0
    gated: bool = False
    shared_experts: int = 0

    @property
    def attn_weights(self) -> int:  # Q and O: h x h; K and V: h x (h * kv_heads / heads)
        kv = self.hidden * (self.kv_heads or self.heads) // self.heads
        return 2 * self.hidden ** 2 + 2 * self.hidden * kv


def _backward(row: float, col: float, *, tokens: int, tp: int, dtype: int) -> float:
    """Backward GEMMs of a block with ``row`` row-parallel and ``col`` column-parallel weights."""
    if tp == 1:
        w = row + col
        return roofline(4 * tokens * w, w * dtype)
    return (roofline((4 * tokens * row + 2 * tokens * col) / tp, (row + col) * dtype / tp)
            + roofline(2 * tokens * col / tp, col * dtype / tp))


def layer_seconds(shape: Shape, *, tokens: int, seq: int, tp: int, ep: int = 1, cp: int = 1, dtype: int = 2,
                  sp: bool = False) -> float:
    """Forward + backward compute of one layer for one microbatch on one rank."""
    h = shape.hidden
    kv = h * (shape.kv_heads or shape.heads) // shape.heads
    qkvo = (2 * tokens * h + 2 * cp * tokens * kv) * dtype / tp  # K and V gathered over the CP group
    scores = 4 * tokens * seq * h / tp / 2  # halved by the causal mask
    attn = roofline(scores, qkvo, ATTN_FWD) + roofline(2 * tokens * shape.attn_weights / tp,
                                                     shape.attn_weights * dtype / tp)
    attn_b = roofline(2 * scores, qkvo, ATTN_BWD) + _backward(h * h, shape.attn_weights - h * h, tokens=tokens,
                                                              tp=tp, dtype=dtype)
    ew = sum(elementwise_seconds(shape, tokens=tokens, tp=tp, sp=sp, dtype=dtype))
    mats = 3 if shape.gated else 2  # SwiGLU: gate, up, down; else up, down
    if not shape.experts:
        w = mats * h * shape.ffn
        return attn + attn_b + ew + roofline(2 * tokens * w / tp, w * dtype / tp) + _backward(
            h * shape.ffn, w - h * shape.ffn, tokens=tokens, tp=tp, dtype=dtype)
    router = h * shape.experts
    expert = mats * h * shape.expert_ffn
    local = shape.experts // ep
    moe = 0.0
    for mult in (1, 2):
        moe += roofline(mult * 2 * tokens * router, router * dtype)
        moe += roofline(mult * 2 * tokens * shape.top_k * expert / tp, local * expert * dtype / tp)
        if shape.shared_experts:  # every token through them, where it is
            shared = shape.shared_experts * expert
            moe += roofline(mult * 2 * tokens * shared / tp, shared * dtype / tp)
    return attn + attn_b + ew + moe


def head_seconds(shape: Shape, *, tokens: int, tp: int, dtype: int = 2, sp: bool = False) -> float:
    """Forward + backward of the final norm and the LM head (vocab x hidden) for one microbatch on the
    last stage."""
    w = shape.vocab * shape.hidden
    norm = 5 * tokens * shape.hidden * dtype / (tp if sp else 1) / STREAM  # 2 tensors forward, 3 backward
    return norm + roofline(2 * tokens * w / tp, w * dtype / tp) + _backward(0, w, tokens=tokens, tp=tp, dtype=dtype)


def embedding_seconds(shape: Shape, *, tokens: int, dtype: int = 2) -> float:
    """Forward + backward of the embedding lookup on the first stage: every TP rank writes the whole x."""
    return 5 * tokens * shape.hidden * dtype / STREAM


def compute_per_rank(shape: Shape, layers: int, *, tp: int, pp: int, dp: int, cp: int = 1, ep: int = 1,
                     microbatches: int, seq: int, micro_batch: int = 1, sp: bool = False) -> list[float]:
    """GPU compute seconds of every rank (rank = t + tp * (c + cp * (d + dp * stage)))."""
    assert layers % pp == 0, "equal stages only"
    tokens = micro_batch * seq // cp
    per_layer = layer_seconds(shape, tokens=tokens, seq=seq, tp=tp, ep=ep, cp=cp, sp=sp)
    head = head_seconds(shape, tokens=tokens, tp=tp, sp=sp)
    embed = embedding_seconds(shape, tokens=tokens)
    out = []
    for rank in range(tp * cp * dp * pp):
        stage = rank // (tp * cp * dp)
        out.append(microbatches * (layers // pp * per_layer + (head if stage == pp - 1 else 0.0)
                                   + (embed if stage == 0 else 0.0)))
    return out


def node_counts(layers: int, *, tp: int, pp: int, dp: int, cp: int = 1, microbatches: int, stage: int,
                moe_ep: int | None = None, sp: bool = False, shared: bool = False) -> dict[str, int]:
    """Nodes of one rank of ``stage`` by kind, counted from the parallelism (1F1B, no recompute)."""
    ls, m, last, first = layers // pp, microbatches, stage == pp - 1, stage == 0
    moe = moe_ep is not None
    tpc = tp > 1
    # per pass: core attention, attention projections, MLP (or router + experts), two element-wise kernels;
    # with TP the backward splits a dense block's GEMMs into dgrad and wgrad (MoE: the attention block's)
    layer_comp = 2 * (4 + shared if moe else 3) + 4 + tpc * (1 if moe else 2)
    per_layer_tp = 0
    if tpc:  # AR (or RS + AG) per block and pass; SP's backward re-gathers the column GEMMs' input
        per_layer_tp = 8 + (1 if moe else 2) if sp else 4
    colls = m * ls * (per_layer_tp + (2 if cp > 1 else 0) + (4 if moe and moe_ep > 1 else 0))
    colls += (ls + (1 if first or last else 0)) if dp * cp > 1 else 0
    # last stage: final norm and LM head, forward and backward (dgrad + wgrad with TP), and the reduction of
    # the head's input gradient; first stage: the embedding lookup and its sum over TP
    comp = m * (ls * layer_comp + (4 + tpc if last else 0) + (2 if first else 0))
    colls += m * tpc * ((3 if sp else 1) * last + (2 if sp else 1) * first)
    return {"comp": comp,
            "coll": colls,
            "send": m * ((0 if last else 1) + (0 if first else 1)),
            "recv": m * ((0 if first else 1) + (0 if last else 1))}


def kind_counts(nodes) -> dict[str, int]:
    """A generated rank's nodes counted as :func:`node_counts` counts them."""
    from netsim.chakra.schema import NodeType

    names = {NodeType.COMP_NODE: "comp", NodeType.COMM_COLL_NODE: "coll", NodeType.COMM_SEND_NODE: "send",
             NodeType.COMM_RECV_NODE: "recv"}
    got = dict.fromkeys(names.values(), 0)
    for n in nodes:
        got[names[n.type]] += 1
    return got


def one_f_one_b_iteration(*, pp: int, microbatches: int, fwd: float, bwd: float, head_fwd: float,
                          head_bwd: float, p2p: float, first_fwd: float = 0.0, first_bwd: float = 0.0) -> float:
    """Iteration time of 1F1B where every stage runs ``fwd`` + ``bwd`` per microbatch, the last
    stage also ``head_fwd`` + ``head_bwd`` (the bottleneck while ``head_fwd + head_bwd > p2p``) and the
    first stage also ``first_fwd`` + ``first_bwd`` (the embedding; no bottleneck).

    Fill: stage 0 runs its first forward (with the embedding), then stage s starts its first forward at
    s x (fwd + p2p) after it.  The last stage then runs F, B, send-gradient back to back
    ``microbatches`` times.  Drain: the last gradient crosses pp - 2 middle stages (backward + send) and
    stage 0's backward (with the embedding's).
    """
    assert head_fwd + head_bwd > p2p + first_fwd + first_bwd
    fill = first_fwd + (pp - 1) * (fwd + p2p)
    steady = microbatches * (fwd + head_fwd + bwd + head_bwd + p2p)
    drain = (pp - 2) * (bwd + p2p) + bwd + first_bwd
    return fill + steady + drain
