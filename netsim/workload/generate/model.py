"""Transformer shapes for the LLM workload generator: :class:`ModelSpec` and its YAML reader.

The presets are the model YAMLs of the repository's ``workloads/models/`` folder (shipped in
the wheel as ``netsim/_workloads/models``), each with its published shapes and citation: one
source of truth, no copy of the numbers in Python.  :mod:`netsim.workload.generate.presets`
lists them (``PRESETS``) and loads one by name (``load_model_spec``); it builds on this module.

Examples
--------
>>> spec = ModelSpec("llama3-70b", layers=80, hidden=8192, ffn=28672, heads=64, vocab=128256, kv_heads=8,
...                  gated_mlp=True)
>>> spec.kv_heads, spec.kv_hidden
(8, 1024)
>>> spec.attn_params == 2 * 8192 * 8192 + 2 * 8192 * 1024  # Q, O full; K, V kv_hidden wide
True
>>> spec.mlp_params == 3 * 8192 * 28672  # SwiGLU: gate, up and down projections
True

Multi-head latent attention (MLA, DeepSeek-V2/V3) is set by ``kv_lora_rank`` and the head dimensions:

>>> mla = ModelSpec("m", layers=2, hidden=64, ffn=128, heads=4, vocab=100, q_lora_rank=32, kv_lora_rank=16,
...                 qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8)
>>> mla.qk_width, mla.v_width, mla.kv_width  # Q (and K) over all heads, V (and O), K and V stored
(48, 32, 80)
>>> mla.attn_params == 64 * 32 + 32 * 48 + 64 * (16 + 4) + 16 * 4 * (8 + 8) + 32 * 64
True
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path

from netsim.errors import InputError
from netsim.inputs import bounded_int
from netsim.limits import bounds

__all__ = ["ModelSpec", "read_model_yaml"]

#: ModelSpec fields a YAML model file may leave out.
_OPTIONAL = ("experts", "top_k", "expert_ffn", "kv_heads", "gated_mlp", "shared_experts", "dense_layers", "source",
             "compute_efficiency", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
#: The fields of multi-head latent attention (DeepSeek-V3, arXiv:2412.19437 §2.1.1); their names are those of
#: DeepSeek's config.json (deepseek-ai/DeepSeek-V3 inference/configs/config_671B.json).
MLA_FIELDS = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")


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
    kv_heads
        Key/value heads (grouped-query attention, GQA); ``None`` (the default)
        means ``heads`` (multi-head attention).  Must divide ``heads``.
    gated_mlp
        Gated MLP (SwiGLU, Shazeer arXiv:2002.05202): gate, up and down projections, three
        ``hidden x ffn`` matrices instead of two (Llama 3, Mixtral, DeepSeek-V3).
    shared_experts
        Experts every token goes through besides its ``top_k`` routed ones (DeepSeekMoE),
        ``expert_ffn`` wide, computed where the token is (no all-to-all).
    dense_layers
        The first ``dense_layers`` layers keep a dense ``ffn``-wide MLP (DeepSeek-V3: 3).
    q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim
        Multi-head latent attention (MLA: DeepSeek-V3 technical report, arXiv:2412.19437 §2.1.1, eqs. 1-11),
        set when ``kv_lora_rank > 0`` (else plain multi-head or grouped-query attention, all of them 0).  The
        input is projected down to a ``kv_lora_rank``-wide latent and a ``qk_rope_head_dim``-wide rotary key
        shared by the heads, and (``q_lora_rank > 0``) to a ``q_lora_rank``-wide query latent; up-projections
        give every head a ``qk_nope_head_dim + qk_rope_head_dim`` query and key and a ``v_head_dim`` value;
        the output projection maps the ``heads * v_head_dim`` values back to ``hidden``.  ``q_lora_rank == 0``:
        the query is projected directly (Megatron-Core's ``linear_q_proj`` when ``q_lora_rank`` is None,
        megatron/core/transformer/multi_latent_attention.py).  Needs ``kv_heads == heads``.
    source
        Where the numbers come from (paper, table, model card); not compared.
    compute_efficiency
        Achieved fraction of the GPU's peak FLOP/s when this model runs (``netsim run --llm``): one
        fraction for every kernel, or a mapping kernel kind -> fraction (``gemm``, ``attn_fwd``,
        ``attn_bwd``) over the GPU preset's; ``--compute-efficiency`` overrides it.  Not part of the
        generated traces (they hold FLOP counts), so not compared.
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
    kv_heads: int | None = None
    gated_mlp: bool = False
    shared_experts: int = 0
    dense_layers: int = 0
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    source: str = field(default="", compare=False)
    compute_efficiency: float | dict | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        for key in ("layers", "hidden", "ffn", "heads", "vocab"):
            val = getattr(self, key)
            if not isinstance(val, int) or isinstance(val, bool) or val <= 0:
                raise InputError(f"expected a positive integer, got {val!r}", source=f"model {self.name}", field=key)
        if not isinstance(self.gated_mlp, bool):
            raise InputError(f"expected true or false, got {self.gated_mlp!r}", source=f"model {self.name}",
                             field="gated_mlp")
        if not isinstance(self.source, str):
            raise InputError(f"expected a citation string, got {self.source!r}", source=f"model {self.name}",
                             field="source")
        for key in ("experts", "top_k", "expert_ffn", "shared_experts", "dense_layers") + MLA_FIELDS:
            val = getattr(self, key)
            if not isinstance(val, int) or isinstance(val, bool) or val < 0:
                raise InputError(f"expected a non-negative integer, got {val!r}", source=f"model {self.name}",
                                 field=key)
        for key in ("layers", "hidden", "ffn", "heads", "vocab", "experts", "top_k", "expert_ffn", "shared_experts",
                    "dense_layers") + MLA_FIELDS:
            lo, hi = bounds(f"model.{key}")
            bounded_int(getattr(self, key), f"model {self.name}", key, lo, hi)
        if self.experts and not (0 < self.top_k <= self.experts and self.expert_ffn > 0):
            raise InputError(f"a MoE model needs 0 < top_k <= experts ({self.experts}) and expert_ffn > 0, "
                             f"got top_k={self.top_k}, expert_ffn={self.expert_ffn}", source=f"model {self.name}")
        if (self.shared_experts or self.dense_layers) and not self.experts:
            raise InputError("shared_experts and dense_layers need a MoE model (experts > 0)",
                             source=f"model {self.name}")
        if self.dense_layers >= self.layers:
            raise InputError(f"expected dense_layers < layers ({self.layers}), got {self.dense_layers}",
                             source=f"model {self.name}", field="dense_layers")
        if self.compute_efficiency is not None:
            from netsim.workload.simulation import check_compute_efficiency
            try:
                object.__setattr__(self, "compute_efficiency", check_compute_efficiency(self.compute_efficiency))
            except InputError as exc:
                raise InputError(exc.message.replace(" (achieved / roofline)", ""), source=f"model {self.name}",
                                 field="compute_efficiency") from None
        if self.kv_heads is None:
            object.__setattr__(self, "kv_heads", self.heads)
        kv = self.kv_heads
        if not isinstance(kv, int) or isinstance(kv, bool) or kv <= 0 or self.heads % kv:
            raise InputError(f"expected a positive divisor of heads ({self.heads}), got {kv!r}",
                             source=f"model {self.name}", field="kv_heads")
        self._check_mla()

    def _check_mla(self) -> None:
        """MLA's fields: all of kv_lora_rank and the three head dimensions, or none (q_lora_rank may be 0)."""
        need = ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
        if not any(getattr(self, k) for k in MLA_FIELDS):
            return
        zero = [k for k in need if not getattr(self, k)]
        if zero:
            raise InputError(f"multi-head latent attention needs {', '.join(need)} > 0 (q_lora_rank may be 0)",
                             source=f"model {self.name}", field=zero[0])
        if self.kv_heads != self.heads:
            raise InputError(f"multi-head latent attention gives every head its key and value: expected kv_heads "
                             f"= heads ({self.heads}), got {self.kv_heads}", source=f"model {self.name}",
                             field="kv_heads")

    @property
    def kv_hidden(self) -> int:
        """Width of the K (and of the V) projection: ``hidden * kv_heads / heads``."""
        return self.hidden * self.kv_heads // self.heads

    @property
    def mla(self) -> bool:
        """Whether the attention is multi-head latent attention (``kv_lora_rank > 0``)."""
        return self.kv_lora_rank > 0

    @property
    def qk_width(self) -> int:
        """Width of the queries over all heads, the depth of the scores' products: ``heads`` x the query
        (and key) head dimension, ``hidden`` unless MLA (``heads * (qk_nope_head_dim + qk_rope_head_dim)``)."""
        return self.heads * (self.qk_nope_head_dim + self.qk_rope_head_dim) if self.mla else self.hidden

    @property
    def v_width(self) -> int:
        """Width of the attention's output over all heads (values weighted per query head): ``hidden`` unless
        MLA (``heads * v_head_dim``); the output projection's input."""
        return self.heads * self.v_head_dim if self.mla else self.hidden

    @property
    def kv_width(self) -> int:
        """Width of the keys and the values the core attention reads: ``2 * kv_hidden``, or under MLA
        every head's up-projected key and value, ``heads * (qk_nope_head_dim + qk_rope_head_dim + v_head_dim)``."""
        return self.qk_width + self.v_width if self.mla else 2 * self.kv_hidden

    @property
    def attn_out_params(self) -> int:
        """Parameters of the output projection (``v_width x hidden``; ``hidden**2`` unless MLA)."""
        return self.v_width * self.hidden

    @property
    def attn_params(self) -> int:
        """Parameters of one attention block: Q and output projections ``hidden`` wide,
        K and V projections ``kv_hidden`` wide (``4 * hidden**2`` without GQA).  MLA (arXiv:2412.19437
        eqs. 1-11): the query's down- and up-projections (or one projection if ``q_lora_rank == 0``), the
        joint key/value down-projection with the rotary key, the key/value up-projection and the output."""
        if not self.mla:
            return 2 * self.hidden * self.hidden + 2 * self.hidden * self.kv_hidden
        q = self.hidden * self.q_lora_rank + self.q_lora_rank * self.qk_width if self.q_lora_rank \
            else self.hidden * self.qk_width
        kv_down = self.hidden * (self.kv_lora_rank + self.qk_rope_head_dim)
        kv_up = self.kv_lora_rank * self.heads * (self.qk_nope_head_dim + self.v_head_dim)
        return q + kv_down + kv_up + self.attn_out_params

    @property
    def attn_replicated_params(self) -> int:
        """Attention weights every tensor-parallel rank holds whole: MLA's down-projections to the query and
        key/value latents and the rotary key, which Megatron-Core builds as plain, duplicated linears
        (``backend.linear()``, megatron/core/models/gpt/gpt_layer_specs.py lines 123, 125 at NVIDIA/Megatron-LM
        d98e8a6; DeepSeek's own inference/model.py lines 427, 430: ``Linear``, not column-parallel); 0 unless MLA."""
        if not self.mla:
            return 0
        return self.hidden * (self.q_lora_rank + self.kv_lora_rank + self.qk_rope_head_dim)

    @property
    def mlp_matrices(self) -> int:
        """Weight matrices of one MLP: 3 when gated (SwiGLU: gate, up, down), else 2 (up, down)."""
        return 3 if self.gated_mlp else 2

    @property
    def mlp_params(self) -> int:
        """Parameters of one dense MLP block (``mlp_matrices`` matrices of ``hidden x ffn``)."""
        return self.mlp_matrices * self.hidden * self.ffn

    @property
    def expert_params(self) -> int:
        """Parameters of one expert MLP (``mlp_matrices`` matrices of ``hidden x expert_ffn``)."""
        return self.mlp_matrices * self.hidden * self.expert_ffn

    def moe_layer(self, layer: int) -> bool:
        """Whether layer ``layer`` (0-based) has a mixture-of-experts MLP."""
        return self.is_moe and layer >= self.dense_layers

    def params(self, tied_embeddings: bool = False) -> int:
        """Total parameters: every layer's attention and MLP (routers, routed and shared experts),
        the embedding and, unless ``tied_embeddings``, the LM head (norms and biases left out)."""
        moe = self.router_params + (self.experts + self.shared_experts) * self.expert_params
        n_moe = self.layers - self.dense_layers if self.is_moe else 0
        body = self.layers * self.attn_params + n_moe * moe + (self.layers - n_moe) * self.mlp_params
        return body + self.vocab * self.hidden * (1 if tied_embeddings else 2)

    @property
    def router_params(self) -> int:
        """Parameters of one MoE router."""
        return self.hidden * self.experts

    @property
    def is_moe(self) -> bool:
        """Whether the MLP blocks are mixtures of experts."""
        return self.experts > 0


def read_model_yaml(path: str | os.PathLike) -> ModelSpec:
    """A :class:`ModelSpec` from a YAML file with its keys (``name`` defaults to the file's stem).

    Raises InputError naming the file on unknown or missing keys and bad values."""
    from netsim import inputs

    path = Path(path)

    data = inputs.load_yaml(path)
    if not isinstance(data, dict):
        raise InputError("expected a mapping of model fields", source=str(path))
    known = {f.name for f in fields(ModelSpec)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise InputError(f"unknown key(s) {unknown}; expected {sorted(known)}", source=str(path))
    data.setdefault("name", path.stem)
    missing = sorted(f.name for f in fields(ModelSpec) if f.name not in data and f.name not in _OPTIONAL)
    if missing:
        raise InputError(f"missing key(s) {missing}", source=str(path))
    try:
        return ModelSpec(**data)
    except InputError as exc:
        raise InputError(exc.message, source=str(path), field=exc.field) from None
