"""Generate one LLM training iteration as a per-rank Chakra workload.

The layout follows Megatron-LM: ``rank = tp_rank + tp * (dp_rank + dp * stage)``
(tensor parallelism fastest, so a TP group sits inside a node).  Every rank
runs a 1F1B pipeline schedule over the layers of its stage: ``pp - 1 - stage``
warm-up forwards, then alternating forward/backward, then the remaining
backwards, followed by the data-parallel gradient all-reduce.

Per layer and microbatch the forward pass is an attention COMP node and an MLP
COMP node (``num_ops`` = 2 · tokens · block parameters / tp, ``tensor_size`` =
block weight bytes / tp, roofline duration), each followed by a TP all-reduce
of the activations when ``tp > 1``.  Mixture-of-experts layers replace the MLP
by a router, an ALL_TO_ALL dispatch on the expert-parallel group, the expert
compute and an ALL_TO_ALL combine.  The backward pass mirrors the forward pass
with twice the operations.  Nodes form one linear ``data_deps`` chain per rank
in schedule order (sends are eager in netsim, so the 1F1B order cannot
deadlock).

Examples
--------
>>> spec = ModelSpec("tiny", layers=2, hidden=256, ffn=1024, heads=4, vocab=1000)
>>> nodes, groups = generate_llm(spec, tp=2, pp=1, dp=2, microbatches=2, seq=128)
>>> len(nodes), groups["1"], groups["3"]
(4, [0, 1], [0, 2])
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

import numpy as np

from netsim.errors import InputError
from netsim.workload.chakra import write_workload
from netsim.workload.chakra_schema import CommType, NodeType
from netsim.workload.chakra_types import EtNode

__all__ = ["MODEL_PRESETS", "ModelSpec", "generate_llm", "load_model_spec", "write_llm_workload"]


@dataclass(frozen=True)
class ModelSpec:
    """Shape of a decoder-only transformer.

    Parameters
    ----------
    name
        Label used in node names.
    layers, hidden, ffn, heads, vocab
        Number of layers, model width, dense MLP width, attention heads, vocabulary size.
    experts, top_k, expert_ffn
        Mixture of experts: experts per layer, experts chosen per token and the
        width of one expert's MLP (``experts == 0``: dense model).
    """

    name: str
    layers: int
    hidden: int
    ffn: int
    heads: int
    vocab: int
    experts: int = 0
    top_k: int = 0
    expert_ffn: int = 0

    def __post_init__(self) -> None:
        for key in ("layers", "hidden", "ffn", "heads", "vocab"):
            val = getattr(self, key)
            if not isinstance(val, int) or isinstance(val, bool) or val <= 0:
                raise InputError(f"expected a positive integer, got {val!r}", source=f"model {self.name}", field=key)
        for key in ("experts", "top_k", "expert_ffn"):
            val = getattr(self, key)
            if not isinstance(val, int) or isinstance(val, bool) or val < 0:
                raise InputError(f"expected a non-negative integer, got {val!r}", source=f"model {self.name}",
                                 field=key)
        if self.experts and not (0 < self.top_k <= self.experts and self.expert_ffn > 0):
            raise InputError(f"a MoE model needs 0 < top_k <= experts ({self.experts}) and expert_ffn > 0, "
                             f"got top_k={self.top_k}, expert_ffn={self.expert_ffn}", source=f"model {self.name}")

    @property
    def attn_params(self) -> int:
        """Parameters of one attention block (Q, K, V and output projections)."""
        return 4 * self.hidden * self.hidden

    @property
    def mlp_params(self) -> int:
        """Parameters of one dense MLP block (up and down projections)."""
        return 2 * self.hidden * self.ffn

    @property
    def expert_params(self) -> int:
        """Parameters of one expert MLP."""
        return 2 * self.hidden * self.expert_ffn

    @property
    def router_params(self) -> int:
        """Parameters of one MoE router."""
        return self.hidden * self.experts

    @property
    def is_moe(self) -> bool:
        """Whether the MLP blocks are mixtures of experts."""
        return self.experts > 0


#: The built-in models, by name (read-only).
MODEL_PRESETS: Mapping[str, ModelSpec] = MappingProxyType({
    "gpt3-175b": ModelSpec("gpt3-175b", 96, 12288, 49152, 96, 50257),
    "llama3-70b": ModelSpec("llama3-70b", 80, 8192, 28672, 64, 128256),
    "llama3-405b": ModelSpec("llama3-405b", 126, 16384, 53248, 128, 128256),
    "mixtral-8x7b": ModelSpec("mixtral-8x7b", 32, 4096, 14336, 32, 32000, experts=8, top_k=2, expert_ffn=14336),
    "deepseek-v3": ModelSpec("deepseek-v3", 61, 7168, 18432, 128, 129280, experts=256, top_k=8, expert_ffn=2048),
})


def load_model_spec(model: str | os.PathLike | ModelSpec) -> ModelSpec:
    """A preset by name, or a model read from a YAML file with the keys of :class:`ModelSpec`.

    Parameters
    ----------
    model
        A :class:`ModelSpec`, a key of :data:`MODEL_PRESETS` or a path to a YAML file.

    Returns
    -------
    ModelSpec

    Examples
    --------
    >>> load_model_spec("llama3-70b").layers
    80
    """
    if isinstance(model, ModelSpec):
        return model
    if isinstance(model, str) and model in MODEL_PRESETS:
        return MODEL_PRESETS[model]
    path = Path(model)
    if not path.is_file():
        raise InputError(f"not a preset ({', '.join(MODEL_PRESETS)}) nor a YAML file", source=str(model))
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise InputError(f"not valid YAML ({exc})", source=str(path)) from None
    if not isinstance(data, dict):
        raise InputError("expected a mapping of model fields", source=str(path))
    known = {f.name for f in fields(ModelSpec)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise InputError(f"unknown key(s) {unknown}; expected {sorted(known)}", source=str(path))
    data.setdefault("name", path.stem)
    missing = sorted(f.name for f in fields(ModelSpec) if f.name not in data and f.name not in
                     ("experts", "top_k", "expert_ffn"))
    if missing:
        raise InputError(f"missing key(s) {missing}", source=str(path))
    return ModelSpec(**data)


def _check_positive(**kw: int) -> None:
    """Raise InputError unless every argument is a positive integer."""
    for key, val in kw.items():
        if not isinstance(val, int) or isinstance(val, bool) or val <= 0:
            raise InputError(f"expected a positive integer, got {val!r}", source="argument", field=key)


def _layout_groups(tp: int, pp: int, dp: int, ep: int) -> tuple[dict[str, list[int]], dict[int, dict[str, str]]]:
    """Communicator groups (id -> ranks) and, per rank, the group id of each dimension."""
    groups: dict[str, list[int]] = {}
    member: dict[int, dict[str, str]] = {r: {} for r in range(tp * pp * dp)}

    def add(kind: str, ranks: list[int]) -> None:
        gid = str(len(groups) + 1)
        groups[gid] = ranks
        for r in ranks:
            member[r][kind] = gid

    def rank(t: int, d: int, s: int) -> int:
        return t + tp * (d + dp * s)

    if tp > 1:
        for s in range(pp):
            for d in range(dp):
                add("tp", [rank(t, d, s) for t in range(tp)])
    if dp > 1:
        for s in range(pp):
            for t in range(tp):
                add("dp", [rank(t, d, s) for d in range(dp)])
    if ep > 1:
        for s in range(pp):
            for t in range(tp):
                for block in range(dp // ep):
                    add("ep", [rank(t, block * ep + e, s) for e in range(ep)])
    return groups, member


class _Builder:
    """Appends nodes to one rank's linear dependency chain."""

    def __init__(self) -> None:
        self.nodes: list[EtNode] = []
        self.tail = 0  # id of the chain's last node (side branches hang off it)

    def _add(self, side: bool = False, **kw: Any) -> None:
        nid = len(self.nodes) + 1
        deps = (self.tail,) if self.tail else ()
        self.nodes.append(EtNode(id=nid, data_deps=deps, **kw))
        if not side:
            self.tail = nid

    def comp(self, name: str, ops: int, weight_bytes: int) -> None:
        self._add(name=name, type=int(NodeType.COMP_NODE), num_ops=int(ops), tensor_size=max(int(weight_bytes), 1),
                  is_cpu_op=False)

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


def stage_layers(layers: int, pp: int) -> list[range]:
    """Layers of each pipeline stage.  Uneven counts follow Llama 3 (arXiv:2407.21783 §3.3.2):
    every stage gets ``ceil(layers/pp)`` and the surplus is taken from the first and last
    stages (which also hold the embedding and the LM head), alternately.

    >>> [len(r) for r in stage_layers(126, 16)]
    [7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 7]
    """
    counts = [-(-layers // pp)] * pp
    surplus, i = sum(counts) - layers, 0
    while surplus:
        stage = i // 2 if i % 2 == 0 else pp - 1 - i // 2
        if counts[stage] > 1:
            counts[stage] -= 1
            surplus -= 1
        i = (i + 1) % (2 * pp)
    starts = np.concatenate(([0], np.cumsum(counts)))
    return [range(int(a), int(b)) for a, b in zip(starts[:-1], starts[1:])]


def one_f_one_b(stage: int, pp: int, microbatches: int) -> list[tuple[str, int]]:
    """The 1F1B order of one stage: a list of ``("F" | "B", microbatch)``.

    Examples
    --------
    >>> one_f_one_b(0, 2, 3)
    [('F', 0), ('F', 1), ('B', 0), ('F', 2), ('B', 1), ('B', 2)]
    """
    warm = min(pp - 1 - stage, microbatches)
    order = [("F", m) for m in range(warm)]
    for i in range(microbatches - warm):
        order += [("F", warm + i), ("B", i)]
    order += [("B", m) for m in range(microbatches - warm, microbatches)]
    return order


def generate_llm(spec: ModelSpec | str, *, tp: int, pp: int, dp: int, ep: int = 1, microbatches: int, seq: int,
                 micro_batch: int = 1, dtype_bytes: int = 2) -> tuple[list[list[EtNode]], dict[str, list[int]]]:
    """Build one training iteration for every rank.

    Parameters
    ----------
    spec
        The model, or a preset name / YAML path (see :func:`load_model_spec`).
    tp, pp, dp, ep
        Tensor, pipeline, data and expert parallel degrees; ``ep`` must divide
        ``dp`` (expert groups are formed inside the data-parallel dimension)
        and only matters for MoE models.
    microbatches, seq, micro_batch
        Microbatches per iteration, sequence length and sequences per microbatch.
    dtype_bytes
        Bytes per activation / weight / gradient element.

    Returns
    -------
    per_rank_nodes : list of list of EtNode
        Index = rank; node ids start at 1 on every rank.
    groups : dict
        Communicator group id (``"1"``, ``"2"``, ...) -> ranks: TP groups, then
        DP groups, then EP groups (dimensions of size 1 get none).

    Raises
    ------
    InputError
        On non-positive arguments, layers not divisible by ``pp``, ``ep`` not
        dividing ``dp``, or experts not divisible by ``ep``.
    """
    spec = load_model_spec(spec)
    _check_positive(tp=tp, pp=pp, dp=dp, ep=ep, microbatches=microbatches, seq=seq, micro_batch=micro_batch,
                    dtype_bytes=dtype_bytes)
    if spec.layers < pp:
        raise InputError(f"{spec.layers} layers cannot fill pp={pp} stages", source="argument", field="pp")
    if dp % ep:
        raise InputError(f"ep={ep} must divide dp={dp}", source="argument", field="ep")
    if spec.is_moe and spec.experts % ep:
        raise InputError(f"{spec.experts} experts do not split evenly over ep={ep}", source="argument", field="ep")
    if not spec.is_moe:
        ep = 1
    groups, member = _layout_groups(tp, pp, dp, ep)

    tokens = micro_batch * seq
    act = tokens * spec.hidden * dtype_bytes
    stages = stage_layers(spec.layers, pp)
    local_experts = spec.experts // ep if spec.is_moe else 0
    attn_ops = 2 * tokens * spec.attn_params // tp
    attn_w = spec.attn_params * dtype_bytes // tp
    if spec.is_moe:
        router_ops = 2 * tokens * spec.router_params
        router_w = spec.router_params * dtype_bytes
        expert_ops = 2 * tokens * spec.top_k * spec.expert_params // tp
        expert_w = local_experts * spec.expert_params * dtype_bytes // tp
        a2a = tokens * spec.top_k * spec.hidden * dtype_bytes
        layer_params = spec.attn_params + spec.router_params + local_experts * spec.expert_params
    else:
        mlp_ops = 2 * tokens * spec.mlp_params // tp
        mlp_w = spec.mlp_params * dtype_bytes // tp
        layer_params = spec.attn_params + spec.mlp_params
    embed_params = spec.vocab * spec.hidden

    per_rank: list[list[EtNode]] = []
    for r in range(tp * pp * dp):
        stage = r // (tp * dp)
        g = member[r]
        b = _Builder()
        prev_rank, next_rank = r - tp * dp, r + tp * dp
        first, last = stage == 0, stage == pp - 1

        def tp_ar(name: str) -> None:
            if "tp" in g:
                b.coll(name, CommType.ALL_REDUCE, act, g["tp"])

        def mlp(tag: str, mult: int) -> None:
            if not spec.is_moe:
                b.comp(f"{tag}.mlp", mult * mlp_ops, mlp_w)
            else:
                b.comp(f"{tag}.router", mult * router_ops, router_w)
                if "ep" in g:
                    b.coll(f"{tag}.a2a_dispatch", CommType.ALL_TO_ALL, a2a, g["ep"])
                b.comp(f"{tag}.experts", mult * expert_ops, expert_w)
                if "ep" in g:
                    b.coll(f"{tag}.a2a_combine", CommType.ALL_TO_ALL, a2a, g["ep"])
            tp_ar(f"{tag}.mlp_allreduce")

        def attention(tag: str, mult: int) -> None:
            b.comp(f"{tag}.attn", mult * attn_ops, attn_w)
            tp_ar(f"{tag}.attn_allreduce")

        last_mb = microbatches - 1
        for phase, m in one_f_one_b(stage, pp, microbatches):
            if phase == "F":
                if not first:
                    b.recv(f"mb{m}.recv_act", prev_rank, 2 * m, act, r)
                for layer in stages[stage]:
                    attention(f"mb{m}.fwd.L{layer}", 1)
                    mlp(f"mb{m}.fwd.L{layer}", 1)
                if last:
                    b.comp(f"mb{m}.fwd.lm_head", 2 * tokens * embed_params // tp, embed_params * dtype_bytes // tp)
                else:
                    b.send(f"mb{m}.send_act", next_rank, 2 * m, act, r)
            else:
                if last:
                    b.comp(f"mb{m}.bwd.lm_head", 4 * tokens * embed_params // tp, embed_params * dtype_bytes // tp)
                else:
                    b.recv(f"mb{m}.recv_grad", next_rank, 2 * m + 1, act, r)
                for layer in reversed(stages[stage]):
                    mlp(f"mb{m}.bwd.L{layer}", 2)
                    attention(f"mb{m}.bwd.L{layer}", 2)
                    if m == last_mb and "dp" in g:  # gradient bucket ready: reduce it during backward
                        b.coll(f"dp.grad_allreduce.L{layer}", CommType.ALL_REDUCE,
                               layer_params * dtype_bytes // tp, g["dp"], side=True)
                if not first:
                    b.send(f"mb{m}.send_grad", prev_rank, 2 * m + 1, act, r)
        if "dp" in g and (first or last):  # embedding / LM-head gradients, after the last backward
            params = embed_params * (int(first) + int(last))
            b.coll("dp.grad_allreduce.embed", CommType.ALL_REDUCE, params * dtype_bytes // tp, g["dp"])
        per_rank.append(b.nodes)
    return per_rank, groups


def write_llm_workload(out_dir: str | os.PathLike, spec: ModelSpec | str, **kw: Any) -> Path:
    """Write ``out_dir/llm.<rank>.et`` and ``out_dir/comm_groups.json``.

    Parameters
    ----------
    out_dir
        Output folder (created if needed).
    spec
        The model (see :func:`generate_llm`).
    **kw
        Keyword arguments of :func:`generate_llm`.

    Returns
    -------
    Path
        The workload prefix ``out_dir/llm`` (``comm_groups.json`` sits beside it).
    """
    per_rank, groups = generate_llm(spec, **kw)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    prefix = out / "llm"
    write_workload(prefix, per_rank)
    (out / "comm_groups.json").write_text(json.dumps(groups, indent=1) + "\n")
    return prefix
