"""Closed forms for generated LLM workloads, written from the published formulas, not from the generator.

* FLOPs of a transformer block: 2 x tokens x weights for every matrix product (Kaplan et al.,
  arXiv:2001.08361 §2.1), plus the attention scores 4 x b x s^2 x h (Narayanan et al., SC'21,
  arXiv:2104.04473 §5.1) halved by the causal mask (the kernel skips blocks above the diagonal),
  backward twice the forward; Megatron-LM splits every matrix over TP.
* The roofline time of a kernel: ops / min(e x peak, HBM bandwidth x ops / bytes) (Williams et al.,
  CACM 2009), with the GPU's datasheet figures and the achieved fraction e of the peak measured for
  the kernel: matmuls at the Maximum Achievable Matmul FLOPS (stas00/ml-engineering, H100 SXM BF16
  794.5 of 989 TFLOP/s), the fused attention kernel at FlashAttention-3's (arXiv:2407.08608: H100,
  BF16, head dim 128, 8k, no causal mask: 646 forward, 559 backward); it reads Q, K, V and writes O.
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


def roofline(ops: float, nbytes: float, achieved: float = GEMM, hbm: float = H100_HBM) -> float:
    """Seconds of a kernel of ``ops`` operations touching ``nbytes`` (weights, or Q/K/V/O for attention)
    that reaches ``achieved`` FLOP/s when compute-bound."""
    return ops / min(achieved, hbm * ops / nbytes)


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

    @property
    def attn_weights(self) -> int:  # Q and O: h x h; K and V: h x (h * kv_heads / heads)
        kv = self.hidden * (self.kv_heads or self.heads) // self.heads
        return 2 * self.hidden ** 2 + 2 * self.hidden * kv


def layer_seconds(shape: Shape, *, tokens: int, seq: int, tp: int, ep: int = 1, cp: int = 1, dtype: int = 2) -> float:
    """Forward + backward compute of one layer for one microbatch on one rank."""
    h = shape.hidden
    kv = h * (shape.kv_heads or shape.heads) // shape.heads
    qkvo = (2 * tokens * h + 2 * cp * tokens * kv) * dtype / tp  # K and V gathered over the CP group
    scores = 4 * tokens * seq * h / tp / 2  # halved by the causal mask
    attn = roofline(scores, qkvo, ATTN_FWD) + roofline(2 * tokens * shape.attn_weights / tp,
                                                     shape.attn_weights * dtype / tp)
    attn_b = roofline(2 * scores, qkvo, ATTN_BWD) + roofline(2 * 2 * tokens * shape.attn_weights / tp,
                                                           shape.attn_weights * dtype / tp)
    if not shape.experts:
        w = 2 * h * shape.ffn  # up and down projections
        return attn + attn_b + roofline(2 * tokens * w / tp, w * dtype / tp) + roofline(4 * tokens * w / tp, w * dtype / tp)
    router = h * shape.experts
    expert = 2 * h * shape.expert_ffn
    local = shape.experts // ep
    moe = 0.0
    for mult in (1, 2):
        moe += roofline(mult * 2 * tokens * router, router * dtype)
        moe += roofline(mult * 2 * tokens * shape.top_k * expert / tp, local * expert * dtype / tp)
    return attn + attn_b + moe


def head_seconds(shape: Shape, *, tokens: int, tp: int, dtype: int = 2) -> float:
    """Forward + backward of the LM head (vocab x hidden) for one microbatch on the last stage."""
    w = shape.vocab * shape.hidden
    return roofline(2 * tokens * w / tp, w * dtype / tp) + roofline(4 * tokens * w / tp, w * dtype / tp)


def compute_per_rank(shape: Shape, layers: int, *, tp: int, pp: int, dp: int, cp: int = 1, ep: int = 1,
                     microbatches: int, seq: int, micro_batch: int = 1) -> list[float]:
    """GPU compute seconds of every rank (rank = t + tp * (c + cp * (d + dp * stage)))."""
    assert layers % pp == 0, "equal stages only"
    tokens = micro_batch * seq // cp
    per_layer = layer_seconds(shape, tokens=tokens, seq=seq, tp=tp, ep=ep, cp=cp)
    head = head_seconds(shape, tokens=tokens, tp=tp)
    out = []
    for rank in range(tp * cp * dp * pp):
        stage = rank // (tp * cp * dp)
        out.append(microbatches * (layers // pp * per_layer + (head if stage == pp - 1 else 0.0)))
    return out


def node_counts(layers: int, *, tp: int, pp: int, dp: int, cp: int = 1, microbatches: int, stage: int,
                moe_ep: int | None = None) -> dict[str, int]:
    """Nodes of one rank of ``stage`` by kind, counted from the parallelism (1F1B, no recompute)."""
    ls, m, last, first = layers // pp, microbatches, stage == pp - 1, stage == 0
    moe = moe_ep is not None
    comp_per_pass = 4 if moe else 3  # core attention, attention projections, MLP (or router + experts)
    colls = m * ls * ((4 if tp > 1 else 0) + (2 if cp > 1 else 0) + (4 if moe and moe_ep > 1 else 0))
    colls += (ls + (1 if first or last else 0)) if dp * cp > 1 else 0
    return {"comp": m * (2 * ls * comp_per_pass + (2 if last else 0)), "coll": colls,
            "send": m * ((0 if last else 1) + (0 if first else 1)),
            "recv": m * ((0 if first else 1) + (0 if last else 1))}


def one_f_one_b_iteration(*, pp: int, microbatches: int, fwd: float, bwd: float, head_fwd: float,
                          head_bwd: float, p2p: float) -> float:
    """Iteration time of 1F1B where every stage runs ``fwd`` + ``bwd`` per microbatch and the last
    stage also ``head_fwd`` + ``head_bwd`` (the bottleneck while ``head_fwd + head_bwd > p2p``).

    Fill: stage s starts its first forward at s x (fwd + p2p).  The last stage then runs
    F, B, send-gradient back to back ``microbatches`` times.  Drain: the last gradient crosses
    pp - 2 middle stages (backward + send) and stage 0's backward.
    """
    assert head_fwd + head_bwd > p2p
    fill = (pp - 1) * (fwd + p2p)
    steady = microbatches * (fwd + head_fwd + bwd + head_bwd + p2p)
    drain = (pp - 2) * (bwd + p2p) + bwd
    return fill + steady + drain
