"""Megatron-LM rank layout, communicator groups and one rank's node chain (the LLM generator's core).

See :mod:`netsim.workload.generate.llm` for the model of each node.  This module lays the ranks
out and runs one rank's pipeline schedule (:func:`rank_nodes`: microbatches, stage-to-stage sends,
gradient reduction); :mod:`netsim.workload.generate.layers` writes each layer's nodes.  The rank
order is ``rank = t + tp * (c + cp * (d + dp * s))``.

Examples
--------
>>> lay = Layout(tp=2, cp=2, dp=1, pp=1)
>>> groups, member = layout_groups(lay, ep=1)
>>> groups, member[3]  # with dp = 1 the gradient (DP x CP) groups are the CP groups
({'1': [0, 1], '2': [2, 3], '3': [0, 2], '4': [1, 3], '5': [0, 2], '6': [1, 3]}, {'tp': '2', 'cp': '4', 'dp': '6'})
"""

from __future__ import annotations

from dataclasses import dataclass

from netsim.chakra.model import EtNode
from netsim.chakra.schema import CommType
from netsim.workload.generate.kernels import GRAD_ACCUM_ELEMENTS, fp16_optimizer_bytes
from netsim.workload.generate.layers import Builder, Costs, LayerNodes
from netsim.workload.generate.schedules import interleaved_order, one_f_one_b

__all__ = ["Layout", "layout_groups", "rank_nodes"]


@dataclass(frozen=True)
class Layout:
    """Megatron-LM rank order: ``rank = t + tp * (c + cp * (d + dp * s))``."""

    tp: int
    cp: int
    dp: int
    pp: int

    @property
    def world(self) -> int:
        return self.tp * self.cp * self.dp * self.pp

    @property
    def stride(self) -> int:
        """Rank distance between consecutive pipeline stages."""
        return self.tp * self.cp * self.dp

    def rank(self, t: int, c: int, d: int, s: int) -> int:
        return t + self.tp * (c + self.cp * (d + self.dp * s))


def layout_groups(lay: Layout, ep: int) -> tuple[dict[str, list[int]], dict[int, dict[str, str]]]:
    """Communicator groups (id -> ranks: TP, CP, DP x CP, EP) and, per rank, the group id of each kind."""
    groups: dict[str, list[int]] = {}
    member: dict[int, dict[str, str]] = {r: {} for r in range(lay.world)}
    tp, cp, dp, pp, rank = lay.tp, lay.cp, lay.dp, lay.pp, lay.rank

    def add(kind: str, ranks: list[int]) -> None:
        gid = str(len(groups) + 1)
        groups[gid] = ranks
        for r in ranks:
            member[r][kind] = gid

    if tp > 1:
        for s in range(pp):
            for d in range(dp):
                for c in range(cp):
                    add("tp", [rank(t, c, d, s) for t in range(tp)])
    if cp > 1:
        for s in range(pp):
            for d in range(dp):
                for t in range(tp):
                    add("cp", [rank(t, c, d, s) for c in range(cp)])
    if dp * cp > 1:
        for s in range(pp):
            for t in range(tp):
                add("dp", [rank(t, c, d, s) for d in range(dp) for c in range(cp)])
    if ep > 1:
        for s in range(pp):
            for c in range(cp):
                for t in range(tp):
                    for block in range(dp // ep):
                        add("ep", [rank(t, c, block * ep + e, s) for e in range(ep)])
    if ep > 1 and dp // ep * cp > 1:  # the ranks holding the same experts: their gradients' reduction group
        for s in range(pp):
            for t in range(tp):
                for e in range(ep):
                    add("edp", [rank(t, c, block * ep + e, s) for block in range(dp // ep) for c in range(cp)])
    return groups, member


class _Pipeline:
    """One rank's pipeline schedule written into a :class:`~netsim.workload.generate.layers.Builder`:
    each microbatch's forward and backward over the rank's model chunks, the activations and gradients
    sent between stages, the data-parallel gradient reduction and, where the kernel profile has them
    (:mod:`~netsim.workload.generate.kernels`), the gradient accumulations and the optimizer step."""

    def __init__(self, r: int, lay: Layout, g: dict[str, str], cost: Costs, chunks: list[range], vpp: int,
                 microbatches: int):
        self.r, self.lay, self.g, self.cost, self.chunks, self.vpp = r, lay, g, cost, chunks, vpp
        self.stage = r // lay.stride
        self.nchunks = lay.pp * vpp
        self.last_mb = microbatches - 1
        self.b = Builder()
        self.layers = LayerNodes(self.b, cost, g)
        self.embed = cost.spec.vocab * cost.spec.hidden
        # Megatron's buckets: filled in backward order and reduced when full; one bucket per model chunk on
        # stages after the first and on chunks after a rank's first (distributed_data_parallel.py 164-171,
        # megatron/training dist_utils.py 358); all of a chunk's gradients in one reduction after the
        # backward without overlap_grad_reduce (bucket_size None, distributed_data_parallel.py 136-137).
        # Expert weights (allreduce=False, moe/experts.py 252-253, when EP > 1) have their own buffers, reduced
        # over the expert-data-parallel group, the ranks holding the same experts (Megatron-LM 0d8e071
        # distributed_data_parallel.py 143-146, 311-321; parallel_state.py 745-748: world / (TP x EP x PP)
        # ranks); with one such rank they need no reduction.
        self.overlap = cost.overlap_grad_reduce and "dp" in g
        self.grads = {kind: _Buffer(kind, self.nchunks) for kind in ("edp", "dp")}  # expert grads are ready first
        self.side: list[int] = []  # the reductions off the chain (the optimizer step waits for them)
        prof = cost.kernels
        # scatter/gather (megatron-2021): each TP rank sends 1/tp of the activation, gathered over TP on arrival
        self.gather = prof.pipeline_scatter_gather and "tp" in g
        self.p2p = cost.act // lay.tp if self.gather else cost.act
        self.accumulate = prof.grad_accumulation

    def peer(self, chunk: int) -> int:
        """The same (tp, cp, dp) position on the stage holding ``chunk``."""
        return self.r + self.lay.stride * (chunk % self.lay.pp - self.stage)

    def tag(self, m: int, boundary: int, grad: int) -> int:
        return 2 * (m * self.vpp + boundary // self.lay.pp) + grad

    def forward(self, m: int, ch: int) -> None:
        """Microbatch ``m``'s forward through chunk ``ch``: receive (or embed), the layers, send (or the
        final norm and the LM head)."""
        b, lay, cost = self.b, self.layers, self.cost
        mb = f"mb{m}" if self.vpp == 1 else f"mb{m}.c{ch}"
        if ch > 0:
            self.receive(f"{mb}.recv_act", self.peer(ch - 1), self.tag(m, ch - 1, 0))
        else:  # vocab-parallel embedding: each TP rank looks up its rows, then the sum over TP
            lay.ew(f"mb{m}.fwd.embedding", "embedding", True)
            lay.tp_out(f"mb{m}.fwd.embedding")
        for layer in self.chunks[ch]:
            lay.layer_forward(f"mb{m}.fwd.L{layer}", layer)
        if ch == self.nchunks - 1:  # the final norm, then the LM head (column-parallel over the vocabulary)
            lay.ew(f"mb{m}.fwd.final_norm", "final", True)
            lay.tp_in(f"mb{m}.fwd.lm_head")
            b.comp(f"mb{m}.fwd.lm_head", cost.ops(self.embed), cost.weights(self.embed))
        else:
            b.send(f"{mb}.send_act", self.peer(ch + 1), self.tag(m, ch, 0), self.p2p, self.r)

    def receive(self, name: str, src: int, tag: int) -> None:
        """A pipeline receive; under scatter/gather the ``1/tp`` pieces are then all-gathered over TP
        (``comm_size``: one piece)."""
        self.b.recv(name, src, tag, self.p2p, self.r)
        if self.gather:
            self.b.coll(f"{name}_allgather", CommType.ALL_GATHER, self.p2p, self.g["tp"])

    def accumulated(self, name: str, params: int, m: int) -> None:
        """Microbatch ``m``'s weight gradients of ``params`` weights (before the TP split) added to the ones
        of the earlier microbatches: none on a weight's first backward of the step (autograd keeps the fresh
        gradient), then one in-place add per backward (kernels.GRAD_ACCUM_ELEMENTS elements per weight)."""
        if self.accumulate and m > 0 and params:
            cost = self.cost
            self.b.elementwise(name, params // cost.tp * GRAD_ACCUM_ELEMENTS * cost.dtype_bytes, cost.dtype_bytes)

    def backward(self, m: int, ch: int) -> None:
        """Microbatch ``m``'s backward through chunk ``ch``, in reverse; on the last microbatch each
        layer's gradients are ready as its backward ends (:meth:`ready`)."""
        b, lay, cost, embed = self.b, self.layers, self.cost, self.embed
        mb = f"mb{m}" if self.vpp == 1 else f"mb{m}.c{ch}"
        last = m == self.last_mb
        if ch == self.nchunks - 1:
            lay.column_bwd(f"mb{m}.bwd.lm_head", 0, embed)
            self.accumulated(f"mb{m}.bwd.lm_head.grad_accum", embed, m)
            lay.ew(f"mb{m}.bwd.final_norm", "final", False)
            if last:  # the output layer's gradients are the first ready
                self.ready(embed, ch, False)
        else:
            self.receive(f"{mb}.recv_grad", self.peer(ch + 1), self.tag(m, ch, 1))
        for layer in reversed(self.chunks[ch]):
            lay.layer_backward(f"mb{m}.bwd.L{layer}", layer)
            self.accumulated(f"mb{m}.bwd.L{layer}.grad_accum", cost.layer_params(layer), m)
            if last:  # this layer's gradients are ready
                dense, experts = self.layer_grads(layer)
                self.ready(dense, ch, False, experts)
        if ch == 0:
            lay.tp_in(f"mb{m}.bwd.embedding")  # SP: the gradient's shards (the forward reduce-scatter's backward)
            lay.ew(f"mb{m}.bwd.embedding", "embedding", False)
            if ch < self.nchunks - 1:  # with one chunk the LM head's weight is this one (tied), added above
                self.accumulated(f"mb{m}.bwd.embedding.grad_accum", embed, m)
        if last:  # the input embedding's gradients come last; the chunk's backward is done
            self.ready(embed if ch == 0 else 0, ch, True)
        if ch > 0:
            b.send(f"{mb}.send_grad", self.peer(ch - 1), self.tag(m, ch - 1, 1), self.p2p, self.r)

    def layer_grads(self, layer: int) -> tuple[int, int]:
        """Layer ``layer``'s gradients on this rank: (dense, expert) weights before the TP split; the routed
        experts' are expert weights only under expert parallelism (else they sit in the dense buffer)."""
        cost = self.cost
        every = cost.layer_params(layer)
        experts = cost.local_experts * cost.spec.expert_params if "ep" in self.g and cost.spec.moe_layer(layer) else 0
        return every - experts, experts

    def ready(self, params: int, ch: int, chunk_done: bool, experts: int = 0) -> None:
        """``params`` dense and ``experts`` expert gradients of chunk ``ch`` are ready: under
        ``overlap_grad_reduce`` each buffer's bucket being filled is reduced, off the chain, when full or
        when the chunk is done."""
        split = self.stage == 0 and ch // self.lay.pp == 0
        for buf, n in ((self.grads["edp"], experts), (self.grads["dp"], params)):
            buf.chunk[ch] += n
            buf.pending += n
            if self.overlap and buf.kind in self.g and buf.pending and \
                    (chunk_done or (split and buf.pending >= self.cost.bucket_params)):
                self.b.coll(f"{buf.kind}.grad_allreduce.c{ch}.b{buf.buckets}", CommType.ALL_REDUCE,
                            buf.pending * self.cost.dtype_bytes // self.cost.tp, self.g[buf.kind], side=True)
                self.side.append(len(self.b.nodes))
                buf.buckets += 1
                buf.pending = 0

    def reduce_grads(self, chunks: set[int]) -> None:
        """Without ``overlap_grad_reduce``: one synchronous reduction per chunk and buffer after the whole
        backward, dense before expert (``bucket_groups + expert_parallel_bucket_groups``, 0d8e071
        distributed_data_parallel.py 533)."""
        if "dp" in self.g and not self.overlap:
            for ch in sorted(chunks, reverse=True):
                for buf in (self.grads["dp"], self.grads["edp"]):
                    if buf.kind in self.g and buf.chunk[ch]:
                        self.b.coll(f"{buf.kind}.grad_allreduce.c{ch}", CommType.ALL_REDUCE,
                                    buf.chunk[ch] * self.cost.dtype_bytes // self.cost.tp, self.g[buf.kind])

    def step(self, chunks: set[int]) -> None:
        """The optimizer step over the weights of ``chunks`` (kernels.fp16_optimizer_bytes per weight), after
        every reduction; a chunk holding both the embedding and the LM head holds one tied weight."""
        if not self.cost.kernels.optimizer:
            return
        cost, embed = self.cost, self.embed
        params = sum(sum(cost.layer_params(x) for x in self.chunks[c]) + (embed if c == 0 else 0)
                     + (embed if c == self.nchunks - 1 and c > 0 else 0) for c in chunks)
        self.b.join(self.side)
        self.b.elementwise("optimizer.step", params // cost.tp * fp16_optimizer_bytes(cost.dtype_bytes),
                           cost.dtype_bytes)


class _Buffer:
    """One gradient buffer of Megatron's DDP (dense or expert): its group kind, the parameters of the
    bucket being filled, the buckets reduced so far and each chunk's parameters."""

    __slots__ = ("kind", "pending", "buckets", "chunk")

    def __init__(self, kind: str, chunks: int):
        self.kind, self.pending, self.buckets, self.chunk = kind, 0, 0, [0] * chunks


def rank_nodes(r: int, lay: Layout, g: dict[str, str], cost: Costs, chunks: list[range], vpp: int,
               microbatches: int) -> list[EtNode]:
    """The node chain of rank ``r`` (``g``: its group id per kind): its stage's 1F1B (or interleaved)
    order of forward and backward passes, then the gradient reduction."""
    stage = r // lay.stride
    if vpp == 1:
        order = [(phase, m, stage) for phase, m in one_f_one_b(stage, lay.pp, microbatches)]
    else:
        order = interleaved_order(stage, lay.pp, microbatches, vpp)
    pipe = _Pipeline(r, lay, g, cost, chunks, vpp, microbatches)
    for phase, m, ch in order:
        if phase == "F":
            pipe.forward(m, ch)
        else:
            pipe.backward(m, ch)
    chunks = {c for _, _, c in order}
    pipe.reduce_grads(chunks)
    pipe.step(chunks)
    return pipe.b.nodes
