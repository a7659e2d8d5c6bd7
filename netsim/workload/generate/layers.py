"""One rank's transformer layers as Chakra nodes: the LLM generator's per-layer half.

:class:`Builder` appends nodes to a rank's dependency chain; :class:`Costs` sizes every node
(operations, bytes); :class:`LayerNodes` writes a layer's blocks (attention, MLP or MoE) with
their tensor-, sequence-, context- and expert-parallel collectives, forward and backward.  The
pipeline schedule that orders the layers of every microbatch is
:func:`~netsim.workload.generate.ranks.rank_nodes`; :mod:`netsim.workload.generate.llm` describes
the model of each node.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from netsim.chakra.model import EtNode
from netsim.chakra.schema import CommType, NodeType
from netsim.workload.generate.kernels import DEFAULT, DROPOUT_MASK_BYTES, PROFILES, KernelProfile, fp16_optimizer_bytes
from netsim.workload.generate.model import ModelSpec

__all__ = ["Builder", "Costs", "LayerNodes", "TP_SPLITS"]


class Builder:
    """Appends nodes to one rank's linear dependency chain."""

    def __init__(self) -> None:
        self.nodes: list[EtNode] = []
        self.tail = 0  # id of the chain's last node (side branches hang off it)
        self.pending_join: list[int] = []  # side nodes the next node also waits for (join)

    def _add(self, side: bool = False, **kw: Any) -> None:
        nid = len(self.nodes) + 1
        deps = (self.tail,) if self.tail else ()
        if not side and self.pending_join:
            deps, self.pending_join = deps + tuple(self.pending_join), []
        self.nodes.append(EtNode(id=nid, data_deps=deps, **kw))
        if not side:
            self.tail = nid

    def join(self, ids: list[int]) -> None:
        """Make every node in ``ids`` (side branches included) a dependency of the next node."""
        self.pending_join = [i for i in ids if i != self.tail]

    def comp(self, name: str, ops: int, weight_bytes: int, kind: str = "gemm",
             shape: tuple[int, int] | None = None) -> None:
        """A compute node of kernel kind ``kind`` (netsim.vocab.OP_KINDS; the GPU preset's efficiency);
        ``shape``: the output rows and columns of a node that is one GEMM (``gemm_m``, ``gemm_n``)."""
        m, n = shape if shape else (None, None)
        self._add(name=name, type=int(NodeType.COMP_NODE), num_ops=int(ops), tensor_size=max(int(weight_bytes), 1),
                  is_cpu_op=False, op_kind=kind, gemm_m=m, gemm_n=n)

    def elementwise(self, name: str, nbytes: int, dtype_bytes: int) -> None:
        """A memory-bound element-wise node: ``nbytes`` of HBM traffic and one operation per element, an
        arithmetic intensity far below any GPU's ridge point, so the roofline's memory roof times it."""
        self.comp(name, max(nbytes // dtype_bytes, 1), nbytes, "elementwise")

    def coll(self, name: str, ctype: CommType, size: int, group: str, *, side: bool = False) -> None:
        """A collective; ``side=True`` branches it off the chain (later nodes do not wait for it)."""
        self._add(side, name=name, type=int(NodeType.COMM_COLL_NODE), comm_type=int(ctype), comm_size=int(size),
                  pg_name=group, is_cpu_op=False)

    def send(self, name: str, dst: int, tag: int, size: int, me: int) -> None:
        self._add(name=name, type=int(NodeType.COMM_SEND_NODE), comm_src=me, comm_dst=dst, comm_tag=tag,
                  comm_size=int(size), is_cpu_op=False)

    def recv(self, name: str, src: int, tag: int, size: int, me: int) -> None:
        self._add(name=name, type=int(NodeType.COMM_RECV_NODE), comm_src=src, comm_dst=me, comm_tag=tag,
                  comm_size=int(size), is_cpu_op=False)


@dataclass(frozen=True)
class Costs:
    """Per-node operation counts and byte sizes of one rank (see the module docstring)."""

    spec: ModelSpec
    tp: int
    cp: int
    tokens: int  # tokens of one microbatch on one CP rank
    seq: int
    dtype_bytes: int
    local_experts: int
    recompute: str = "none"  # activation recomputation: none, selective or full (generate_llm)
    # Megatron --overlap-grad-reduce: buckets reduced during the backward; off by default as in Megatron
    # (megatron/core/distributed/distributed_data_parallel_config.py: overlap_grad_reduce = False)
    overlap_grad_reduce: bool = False
    tp_comm_overlap: bool = False  # Megatron --tp-comm-overlap: TP collectives pipelined with their GEMMs
    comm_streams: str = "communicator"  # comm-lane policy the traces declare (netsim.workload.streams)
    bucket_params: int = 40_000_000  # gradient bucket in parameters (plan.bucket_params)
    sequence_parallel: bool = False  # Megatron --sequence-parallel: norms and residuals on 1/tp of the tokens
    kernels: KernelProfile = PROFILES[DEFAULT]  # how the layer's kernels are written (--kernels)
    # what selective recomputation re-runs (Megatron-Core recompute_modules; plan.RECOMPUTE_MODULES)
    recompute_modules: tuple[str, ...] = ("core_attn",)

    def recomputes(self, module: str) -> bool:
        """Whether selective recomputation re-runs ``module`` (Megatron-Core's ``recompute_modules``)."""
        return self.recompute == "selective" and module in self.recompute_modules

    def recompute_elementwise(self, module: str) -> int:
        """HBM bytes of the element-wise kernels a selective ``module`` re-runs, as the forward counts them
        (:meth:`elementwise`).  ``mla_up_proj``: the query and key/value latents' RMSNorms (read and write
        each) and the rotary embedding on the heads' q_pe and the shared k_pe.  ``moe_act``: the routed
        experts' activation (SwiGLU reads the gate and up projections and writes their product: 3 F over the
        top-k tokens' ``expert_ffn``; a plain activation 2 F); the shared experts are another module."""
        s = self.spec
        if module == "mla_up_proj":
            qk = self.tokens * (s.heads + self.tp) * s.qk_rope_head_dim * self.dtype_bytes // self.tp
            return 2 * qk + 2 * self.tokens * (s.q_lora_rank + s.kv_lora_rank) * self.dtype_bytes
        f = self.tokens * s.top_k * s.expert_ffn * self.dtype_bytes // self.tp
        return (3 if s.gated_mlp else 2) * f

    @property
    def shard(self) -> int:
        """Bytes of one activation as the norms and residual adds see it: the whole ``act``, or its
        ``1/tp`` sequence shard under sequence parallelism (Korthikanti et al., arXiv:2205.05198 §4.2.2)."""
        return self.act // self.tp if self.sequence_parallel else self.act

    def elementwise(self, block: str, forward: bool, layer: int = 0) -> int:
        """HBM bytes of one block's element-wise kernels (each reads its inputs once and writes its outputs once).

        ``attn``: the input RMSNorm (forward reads x, writes y: 2 activations; backward reads dy and x,
        writes dx: 3), rotary embeddings on Q and K (read and write each, both passes) and the residual
        add (reads 2, writes 1; its backward sums two gradients: the same).  ``mlp``: the RMSNorm, the
        residual add and the activation over the ``ffn``-wide hidden state F: SwiGLU reads the gate and up
        projections and writes their product (3 F), its backward reads dy, gate and up and writes two
        gradients (5 F); a plain GELU MLP 2 F and 3 F.  MoE layers apply it to the top-k routed tokens'
        expert_ffn and to the shared experts.  ``final``: the last RMSNorm before the LM head.
        ``embedding``: the lookup (read rows, write the activation), and its backward's scatter-add
        (read the gradient, read and write the rows).  Norms and residual adds cover ``shard``; the
        other kernels work on heads or the ffn split over TP."""
        s, a = self.spec, self.shard
        if self.kernels.elementwise == "megatron-2021" and block in ("attn", "mlp"):
            return self._elementwise_2021(block, forward, layer)
        norm = 2 * a if forward else 3 * a
        if block == "final":
            return norm
        if block == "embedding":
            return 2 * self.act if forward else 3 * self.act
        if block == "attn" and s.mla:  # rotary on the heads' q_pe and the shared k_pe; the latents' RMSNorms
            qk = self.tokens * (s.heads + self.tp) * s.qk_rope_head_dim * self.dtype_bytes // self.tp
            latent = self.tokens * (s.q_lora_rank + s.kv_lora_rank) * self.dtype_bytes
            return norm + 2 * qk + (2 if forward else 3) * latent + 3 * a
        if block == "attn":
            qk = self.tokens * (s.hidden + s.kv_hidden) * self.dtype_bytes // self.tp
            return norm + 2 * qk + 3 * a
        width = (s.top_k + s.shared_experts) * s.expert_ffn if s.moe_layer(layer) else s.ffn
        f = self.tokens * width * self.dtype_bytes // self.tp
        act_fn = (3 if forward else 5) * f if s.gated_mlp else (2 if forward else 3) * f
        return norm + act_fn + 3 * a

    def _elementwise_2021(self, block: str, forward: bool, layer: int) -> int:
        """Megatron-LM 2021's element-wise kernels of a block (:mod:`~netsim.workload.generate.kernels`): the
        LayerNorm (forward 2 activations, backward 3), bias + dropout + add (forward reads x and the residual,
        writes the sum and a one-byte mask; backward reads dy and the mask, writes dx) and, in the MLP,
        bias + GeLU over the ffn-wide hidden state F (forward 2 F, backward 3 F)."""
        a, s = self.shard, self.spec
        mask = a // self.dtype_bytes * DROPOUT_MASK_BYTES
        total = (2 * a + 3 * a if forward else 3 * a + 2 * a) + mask
        if block == "mlp":
            width = (s.top_k + s.shared_experts) * s.expert_ffn if s.moe_layer(layer) else s.ffn
            total += (2 if forward else 3) * self.tokens * width * self.dtype_bytes // self.tp
        return total

    def linears(self, block: str) -> tuple[tuple[tuple[str, int, int], ...], tuple[str, int, int]]:
        """The block's GEMMs before the core attention (or activation) and its row-parallel GEMM, as
        ``(name, n, k)`` on one rank (``n`` output columns, ``k`` reduction depth; the ``tokens`` rows are the
        ``m``): QKV and the output projection, or the MLP's up (and gate) and down projections.  MLA: the
        query's down- and up-projections (or its one projection), the key/value down-projection (latent and
        rotary key, whole on every TP rank: :attr:`ModelSpec.attn_replicated_params`) and up-projection, in
        the order DeepSeek-V3 runs them (arXiv:2412.19437 eqs. 1-3, 6-8)."""
        s, tp = self.spec, self.tp
        if block == "attn" and s.mla:
            q = (("q_down", s.q_lora_rank, s.hidden), ("q_up", s.qk_width // tp, s.q_lora_rank)) if s.q_lora_rank \
                else (("q", s.qk_width // tp, s.hidden),)
            kv = (("kv_down", s.kv_lora_rank + s.qk_rope_head_dim, s.hidden),
                  ("kv_up", s.heads * (s.qk_nope_head_dim + s.v_head_dim) // tp, s.kv_lora_rank))
            return q + kv, ("proj", s.hidden, s.v_width // tp)
        if block == "attn":
            return (("qkv", (s.hidden + 2 * s.kv_hidden) // tp, s.hidden),), ("proj", s.hidden, s.hidden // tp)
        up = (2 if s.gated_mlp else 1) * s.ffn
        return (("fc1", up // tp, s.hidden),), ("fc2", s.hidden, s.ffn // tp)

    @property
    def attn_params(self) -> int:
        """The attention's weights as the TP split sees them: each rank holds ``attn_params / tp`` of them, the
        whole of MLA's down-projections included (``attn_params`` itself unless MLA)."""
        return self.spec.attn_params + (self.tp - 1) * self.spec.attn_replicated_params

    @property
    def score_elements(self) -> int:
        """Elements of one rank's attention scores (``heads / tp`` matrices of tokens x seq): what unfused
        attention writes to HBM between its kernels."""
        return self.tokens * self.seq * (self.spec.heads // self.tp)

    def ops(self, params: int) -> int:  # forward operations of a block with ``params`` weights, split over TP
        return 2 * self.tokens * params // self.tp

    def weights(self, params: int) -> int:
        return params * self.dtype_bytes // self.tp

    @property
    def act(self) -> int:
        return self.tokens * self.spec.hidden * self.dtype_bytes

    @property
    def kv(self) -> int:
        return self.tokens * self.spec.kv_width * self.dtype_bytes // self.tp

    @property
    def score_ops(self) -> int:
        """Core attention (QK^T and the weighted sum of V) under a causal mask: half of Megatron's 4·b·s²·h
        (a causal kernel skips the blocks above the diagonal; FlashAttention counts them so), over tp.  Each
        product is 2·s·d per query and head (d: the query/key head dimension for the scores, the value's for
        the weighted sum), so MLA's is ``tokens·seq·(qk_width + v_width)`` over tp: ``2·hidden`` unless MLA."""
        return self.tokens * self.seq * (self.spec.qk_width + self.spec.v_width) // self.tp

    def bmm_ops(self, width: int) -> int:
        """One of unfused attention's two batched products with its mask applied to the full ``s x s`` (nothing
        skipped): 2·tokens·seq·width over tp, ``width`` the heads' summed depth (scores) or output (values)."""
        return 2 * self.tokens * self.seq * width // self.tp

    @property
    def core_bytes(self) -> int:  # what a fused attention kernel reads and writes: Q and O, and K and V of all cp
        return (self.tokens * (self.spec.qk_width + self.spec.v_width) + self.cp * self.tokens * self.spec.kv_width) \
            * self.dtype_bytes // self.tp

    @property
    def a2a(self) -> int:
        return self.tokens * self.spec.top_k * self.spec.hidden * self.dtype_bytes

    def largest(self, microbatches: int, vpp: int) -> int:
        """An upper bound of every integer a node of the plan carries (operations, bytes, tags):
        each quantity :func:`~netsim.workload.generate.ranks.rank_nodes` writes, at its largest
        (backward passes double the operations), without building a node."""
        s = self.spec
        blocks = (self.attn_params, s.mlp_params, s.vocab * s.hidden, (s.top_k + s.shared_experts) * s.expert_params,
                  self.local_experts * s.expert_params)
        elementwise = max(self.elementwise(b, False, layer) for b in ("attn", "mlp", "embedding", "final")
                          for layer in (0, s.layers - 1))  # the last layer: a MoE one when the model has experts
        step = fp16_optimizer_bytes(self.dtype_bytes) * s.params() if self.kernels.optimizer else 0
        return max(2 * self.score_ops, 2 * self.ops(max(blocks)), 4 * self.tokens * s.router_params,
                   self.weights(s.params()) * self.tp, self.core_bytes, self.a2a, self.kv * self.cp, self.act,
                   elementwise, step, 2 * (microbatches + 1) * vpp + 1)

    def layer_params(self, layer: int) -> int:
        """Weights of layer ``layer`` held by one rank before the TP split (its local experts)."""
        s = self.spec
        if s.moe_layer(layer):
            return self.attn_params + s.router_params + (self.local_experts + s.shared_experts) * s.expert_params
        return self.attn_params + s.mlp_params


#: Pieces a TP block's compute and all-reduce are cut into under ``tp_comm_overlap``: Transformer
#: Engine's default ``num_splits`` for its "pipeline" userbuffers method (GEMM + reduce-scatter of
#: proj_fprop / fc2_fprop), ``transformer_engine/pytorch/module/base.py`` line 387 (NVIDIA/
#: TransformerEngine d0067d0: ``tp_size if method == "ring_exchange" else 4``).
TP_SPLITS = 4


class LayerNodes:
    """Writes one rank's layers into a :class:`Builder` (``g``: the rank's group id per kind, as
    :func:`~netsim.workload.generate.ranks.layout_groups` gives them)."""

    def __init__(self, b: Builder, cost: Costs, g: dict[str, str]):
        self.b, self.cost, self.g = b, cost, g
        self.spec = cost.spec
        self.sp = cost.sequence_parallel and "tp" in g and not cost.tp_comm_overlap  # SP's collectives replace the AR
        # backward TP comm overlapped with the weight gradients (not in 2021's Megatron-LM: kernels.py)
        self.split = "tp" in g and not cost.tp_comm_overlap and cost.kernels.async_tp_backward
        self.shapes = cost.kernels.gemm_shapes and not cost.tp_comm_overlap  # one node per GEMM, with its shape

    def ew(self, name: str, block: str, forward: bool, layer: int = 0) -> None:
        """A block's element-wise kernels (:meth:`Costs.elementwise`)."""
        self.b.elementwise(name, self.cost.elementwise(block, forward, layer), self.cost.dtype_bytes)

    def tp_in(self, name: str) -> None:
        """SP: the sequence shards all-gathered before a column-parallel GEMM (``comm_size``: one shard)."""
        if self.sp:
            self.b.coll(f"{name}_allgather", CommType.ALL_GATHER, self.cost.act // self.cost.tp, self.g["tp"])

    def tp_out(self, name: str) -> None:
        """After a row-parallel GEMM: the partial sums all-reduced, or reduce-scattered to shards (SP)."""
        if self.sp:
            self.b.coll(f"{name}_reducescatter", CommType.REDUCE_SCATTER, self.cost.act, self.g["tp"])
        elif "tp" in self.g:
            self.b.coll(f"{name}_allreduce", CommType.ALL_REDUCE, self.cost.act, self.g["tp"])

    def gemms(self, name: str, block: str, passes: tuple[str, ...]) -> None:
        """One node per GEMM of ``block`` (:meth:`Costs.linears`), with its output shape; ``passes``: ``col`` or
        ``row``, then ``fwd``, ``dgrad`` or ``wgrad``.  A linear of ``m`` tokens, ``n`` outputs and depth ``k``:
        the forward is m x n deep k, the input gradient m x k deep n, the weight gradient k x n deep m."""
        cost, m = self.cost, self.cost.tokens
        cols, row = cost.linears(block)
        lin = {"col": cols, "row": (row,)}
        for p in passes:
            which, kind = p.split(".")
            for label, n, k in lin[which]:
                shape = {"fwd": (m, n, k), "dgrad": (m, k, n), "wgrad": (k, n, m)}[kind]
                self.b.comp(f"{name}.{label}.{kind}", 2 * shape[0] * shape[1] * shape[2], n * k * cost.dtype_bytes,
                            shape=shape[:2])

    def block(self, name: str, ops: int, weight_bytes: int, gemm: tuple[str, tuple[str, ...]] | None = None) -> None:
        """A block's compute, then its TP collective; under ``tp_comm_overlap`` both cut into
        TP_SPLITS pieces, piece k of the all-reduce right after piece k of the compute, off the
        chain, so only the last piece's all-reduce is exposed (TE userbuffers' "pipeline").
        ``gemm``: the block and the passes of its GEMMs, one node each under a profile with GEMM
        shapes (:meth:`gemms`)."""
        b, act = self.b, self.cost.act
        if not (self.cost.tp_comm_overlap and "tp" in self.g):
            if gemm and self.shapes:
                self.gemms(name, *gemm)
            else:
                b.comp(name, ops, weight_bytes)
            self.tp_out(name)
            return
        pieces = []
        for k in range(TP_SPLITS):
            b.comp(f"{name}.split{k}", ops // TP_SPLITS + (k < ops % TP_SPLITS), max(weight_bytes // TP_SPLITS, 1))
            b.coll(f"{name}_allreduce.split{k}", CommType.ALL_REDUCE, act // TP_SPLITS + (k < act % TP_SPLITS),
                   self.g["tp"], side=True)
            pieces.append(len(b.nodes))
        b.join(pieces)

    def column_bwd(self, name: str, row: int, col: int) -> None:
        """The backward of a block whose last forward GEMM is row-parallel (``row`` weights) and first is
        column-parallel (``col`` weights).  The row GEMM's backward (dgrad and wgrad) and the column GEMM's
        input gradient (dgrad) come first; then that gradient's TP all-reduce (SP: reduce-scatter) runs off
        the chain while the column GEMM's weight gradient (wgrad) runs; under SP the input's shards are
        all-gathered again for that wgrad, while the dgrad runs.  Megatron-LM
        ``LinearWithGradAccumulationAndAsyncCommunication.backward`` (tensor_parallel/layers.py)."""
        b, cost, act = self.b, self.cost, self.cost.act
        block = name.rsplit(".", 1)[1]
        shaped = self.shapes and block in ("attn", "mlp")  # the LM head keeps one node per pass
        if not self.split:
            self.block(name, 2 * cost.ops(row + col), cost.weights(row + col),
                       (block, ("row.dgrad", "row.wgrad", "col.dgrad", "col.wgrad")) if shaped else None)
            return
        tp = self.g["tp"]
        regather = 0
        if self.sp:
            b.coll(f"{name}_regather", CommType.ALL_GATHER, act // cost.tp, tp, side=True)
            regather = len(b.nodes)
        if shaped:
            self.gemms(name, block, ("row.dgrad", "row.wgrad", "col.dgrad"))
        else:
            b.comp(f"{name}.dgrad", 2 * cost.ops(row) + cost.ops(col), cost.weights(row + col))
        if self.sp:
            b.coll(f"{name}_reducescatter", CommType.REDUCE_SCATTER, act, tp, side=True)
        else:
            b.coll(f"{name}_allreduce", CommType.ALL_REDUCE, act, tp, side=True)
        reduce = len(b.nodes)
        if regather:
            b.join([regather])
        if shaped:
            self.gemms(name, block, ("col.wgrad",))
        else:
            b.comp(f"{name}.wgrad", cost.ops(col), cost.weights(col))
        b.join([reduce])

    def mlp(self, name: str, mult: int, layer: int) -> None:
        """The element-wise kernels (norm, activation, residual: first in the forward, last in the backward)
        and the GEMMs with their TP collectives; MoE layers: router, shared experts, all-to-alls, experts.
        ``mult``: 1 forward, 2 backward (twice the operations)."""
        if mult == 1:
            self.ew(f"{name}.mlp_elementwise", "mlp", True, layer)
        self.tp_in(f"{name}.mlp")  # SP: in the backward, the output gradient's shards
        self._mlp_gemms(name, mult, layer)
        if mult == 2:
            self.ew(f"{name}.mlp_elementwise", "mlp", False, layer)

    def _mlp_gemms(self, name: str, mult: int, layer: int) -> None:
        b, cost, spec, g = self.b, self.cost, self.spec, self.g
        if not spec.moe_layer(layer):
            if mult == 1:
                self.block(f"{name}.mlp", cost.ops(spec.mlp_params), cost.weights(spec.mlp_params),
                           ("mlp", ("col.fwd", "row.fwd")))
            else:  # the down projection is row-parallel; the up (and gate) projections column-parallel
                self.column_bwd(f"{name}.mlp", spec.hidden * spec.ffn, spec.mlp_params - spec.hidden * spec.ffn)
            return
        b.comp(f"{name}.router", mult * 2 * cost.tokens * spec.router_params, spec.router_params * cost.dtype_bytes)
        if spec.shared_experts:  # every token, where it is (DeepSeekMoE's shared experts)
            shared = spec.shared_experts * spec.expert_params
            b.comp(f"{name}.shared_experts", mult * cost.ops(shared), cost.weights(shared))
        if "ep" in g:
            b.coll(f"{name}.a2a_dispatch", CommType.ALL_TO_ALL, cost.a2a, g["ep"])
        if mult == 2 and cost.recomputes("moe_act"):  # the activation's output, discarded, re-made for fc2's backward
            b.elementwise(f"{name}.moe_act.recompute", cost.recompute_elementwise("moe_act"), cost.dtype_bytes)
        b.comp(f"{name}.experts", mult * cost.ops(spec.top_k * spec.expert_params),
               cost.weights(cost.local_experts * spec.expert_params))
        if "ep" in g:
            b.coll(f"{name}.a2a_combine", CommType.ALL_TO_ALL, cost.a2a, g["ep"])
        self.tp_out(f"{name}.mlp")

    def attention(self, name: str, forward: bool) -> None:
        """The element-wise kernels (norm, rotary, residual: first in the forward, last in the backward), the
        core attention (one fused kernel, FlashAttention: QK^T, softmax, .V) and the Q, K, V and output
        projections (GEMMs) with their TP collectives; CP's K/V all-gather before the forward core attention,
        reduce-scatter after its backward.  MLA (:attr:`ModelSpec.mla`) keeps these collectives, one activation
        each; which tensors Megatron-Core reduces around its duplicated down-projections is not modelled."""
        if forward:
            self.ew(f"{name}.attn_elementwise", "attn", True)
        self.tp_in(f"{name}.attn")
        self._attention_kernels(name, forward)
        if not forward:
            self.ew(f"{name}.attn_elementwise", "attn", False)

    def _attention_kernels(self, name: str, forward: bool) -> None:
        b, cost, spec, g = self.b, self.cost, self.spec, self.g
        if forward and "cp" in g:
            b.coll(f"{name}.cp_allgather_kv", CommType.ALL_GATHER, cost.kv, g["cp"])
        if forward:
            self.core_forward(f"{name}.core_attn")
            self.block(f"{name}.attn", cost.ops(cost.attn_params), cost.weights(cost.attn_params),
                       ("attn", ("col.fwd", "row.fwd")))
            return
        if cost.recomputes("mla_up_proj") and spec.mla:  # the up-projections re-made for the core attention
            self.mla_up_recompute(f"{name}.mla_up_proj.recompute")
        if cost.recomputes("core_attn"):  # re-run the core attention's forward first (Korthikanti et al.)
            self.core_forward(f"{name}.core_attn.recompute")
        self.core_backward(f"{name}.core_attn")
        if "cp" in g:
            if not self.split:
                b.comp(f"{name}.attn", 2 * cost.ops(cost.attn_params), cost.weights(cost.attn_params))
            b.coll(f"{name}.cp_reducescatter_kv", CommType.REDUCE_SCATTER, cost.kv * cost.cp, g["cp"])
            if not self.split:
                self.tp_out(f"{name}.attn")
                return
        # the output projection (row-parallel) joins the Q, K, V projections' dgrad: the chain's order within
        # a stretch without communication does not change its time
        self.column_bwd(f"{name}.attn", spec.attn_out_params, cost.attn_params - spec.attn_out_params)

    def mla_up_recompute(self, name: str) -> None:
        """MLA's up-projections re-run before the core attention's backward (Megatron-Core ``mla_up_proj``:
        ``qkv_up_proj_and_rope_apply`` under ``CheckpointWithoutOutput``, its output discarded after the
        forward and re-made when the core attention's output gradient arrives; multi_latent_attention.py
        lines 315-318, 656-681, 783-787 at NVIDIA/Megatron-LM 0d8e071): the query's up-projection (or its one
        projection when ``q_lora_rank`` is 0) and the key/value up-projection, one node per GEMM under a
        profile with GEMM shapes, then the latents' norms and the rotary embedding."""
        cost, m = self.cost, self.cost.tokens
        ups = [(label, n, k) for label, n, k in cost.linears("attn")[0] if label in ("q", "q_up", "kv_up")]
        if self.shapes:
            for label, n, k in ups:
                self.b.comp(f"{name}.{label}", 2 * m * n * k, n * k * cost.dtype_bytes, shape=(m, n))
        else:
            self.b.comp(name, sum(2 * m * n * k for _, n, k in ups), sum(n * k for _, n, k in ups) * cost.dtype_bytes)
        self.b.elementwise(f"{name}_elementwise", cost.recompute_elementwise("mla_up_proj"), cost.dtype_bytes)

    def core_forward(self, name: str) -> None:
        """The core attention's forward: one fused kernel, or (unfused profile) Q·Kᵀ, scale + mask + softmax,
        dropout and probabilities·V, the scores written to and read from HBM between them."""
        b, cost = self.b, self.cost
        if cost.kernels.attention == "fused":
            b.comp(name, cost.score_ops, cost.core_bytes, "attn_fwd")
            return
        rows, (dq, dv), s, score, (qk, v), mask = self._unfused()
        qk_ops, v_ops = cost.bmm_ops(self.spec.qk_width), cost.bmm_ops(self.spec.v_width)
        b.comp(f"{name}.scores", qk_ops, 2 * qk + score, shape=(rows, s))  # reads Q, K; writes the scores
        b.elementwise(f"{name}.softmax", 2 * score, cost.dtype_bytes)
        b.elementwise(f"{name}.dropout", 2 * score + mask, cost.dtype_bytes)
        b.comp(f"{name}.context", v_ops, score + 2 * v, shape=(rows, dv))  # reads P and V; writes O

    def core_backward(self, name: str) -> None:
        """The core attention's backward: one fused kernel (twice the forward's operations), or (unfused) the
        gradients of both bmm (two GEMMs each) around the dropout's and the softmax's backward."""
        b, cost = self.b, self.cost
        if cost.kernels.attention == "fused":
            b.comp(name, 2 * cost.score_ops, cost.core_bytes, "attn_bwd")
            return
        rows, (dq, dv), s, score, (qk, v), mask = self._unfused()
        qk_ops, v_ops = cost.bmm_ops(self.spec.qk_width), cost.bmm_ops(self.spec.v_width)
        b.comp(f"{name}.context.dgrad", v_ops, 2 * v + score, shape=(rows, s))  # dP = dO·Vᵀ
        b.comp(f"{name}.context.wgrad", v_ops, score + 2 * v, shape=(rows, dv))  # dV = Pᵀ·dO
        b.elementwise(f"{name}.dropout.bwd", 2 * score + mask, cost.dtype_bytes)  # reads dy and the mask
        b.elementwise(f"{name}.softmax.bwd", 3 * score, cost.dtype_bytes)  # reads dy and y
        b.comp(f"{name}.scores.dgrad", qk_ops, score + 2 * qk, shape=(rows, dq))  # dQ = dS·K
        b.comp(f"{name}.scores.wgrad", qk_ops, score + 2 * qk, shape=(rows, dq))  # dK = dSᵀ·Q

    def _unfused(self) -> tuple[int, tuple[int, int], int, int, tuple[int, int], int]:
        """Unfused attention's sizes on one rank: score rows (heads/tp x tokens), the query/key and the value
        head dimensions, sequence, bytes of the scores, bytes of Q (or K) and of V (or O), bytes of the dropout
        mask.  Q, K, V and O are ``hidden`` wide unless MLA (:attr:`ModelSpec.qk_width`, ``v_width``)."""
        cost, spec = self.cost, self.spec
        score = cost.score_elements * cost.dtype_bytes
        qk = cost.tokens * spec.qk_width * cost.dtype_bytes // cost.tp
        v = cost.tokens * spec.v_width * cost.dtype_bytes // cost.tp
        return (cost.score_elements // cost.seq, (spec.qk_width // spec.heads, spec.v_width // spec.heads), cost.seq,
                score, (qk, v), cost.score_elements * DROPOUT_MASK_BYTES)

    def layer_forward(self, name: str, layer: int) -> None:
        """Layer ``layer``'s forward: attention, then the MLP (or MoE)."""
        self.attention(name, True)
        self.mlp(name, 1, layer)

    def layer_backward(self, name: str, layer: int) -> None:
        """Layer ``layer``'s backward: the MLP's, then the attention's; under full recomputation the
        layer's forward (with its TP/CP/EP collectives) runs again first."""
        if self.cost.recompute == "full":
            self.layer_forward(f"{name}.recompute", layer)
        self.mlp(name, 2, layer)
        self.attention(name, False)
