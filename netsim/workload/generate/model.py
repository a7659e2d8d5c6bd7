"""Transformer shapes for the LLM workload generator: :class:`ModelSpec` and the presets.

Examples
--------
>>> spec = MODEL_PRESETS["llama3-70b"]
>>> spec.kv_heads, spec.kv_hidden
(8, 1024)
>>> spec.attn_params == 2 * 8192 * 8192 + 2 * 8192 * 1024  # Q, O full; K, V kv_hidden wide
True
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from netsim.errors import InputError

__all__ = ["MODEL_PRESETS", "ModelSpec", "load_model_spec"]

#: ModelSpec fields a YAML model file may leave out.
_OPTIONAL = ("experts", "top_k", "expert_ffn", "kv_heads")


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
        if self.kv_heads is None:
            object.__setattr__(self, "kv_heads", self.heads)
        kv = self.kv_heads
        if not isinstance(kv, int) or isinstance(kv, bool) or kv <= 0 or self.heads % kv:
            raise InputError(f"expected a positive divisor of heads ({self.heads}), got {kv!r}",
                             source=f"model {self.name}", field="kv_heads")

    @property
    def kv_hidden(self) -> int:
        """Width of the K (and of the V) projection: ``hidden * kv_heads / heads``."""
        return self.hidden * self.kv_heads // self.heads

    @property
    def attn_params(self) -> int:
        """Parameters of one attention block: Q and output projections ``hidden`` wide,
        K and V projections ``kv_hidden`` wide (``4 * hidden**2`` without GQA)."""
        return 2 * self.hidden * self.hidden + 2 * self.hidden * self.kv_hidden

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


#: The built-in models, by name (read-only).  Llama 3 70B/405B use 8 KV heads
#: (arXiv:2407.21783 Table 3), Mixtral 8x7B 8 (arXiv:2401.04088 Table 1); DeepSeek-V3's
#: multi-head latent attention is modelled as plain multi-head attention.
MODEL_PRESETS: Mapping[str, ModelSpec] = MappingProxyType({
    "gpt3-175b": ModelSpec("gpt3-175b", 96, 12288, 49152, 96, 50257),
    "llama3-70b": ModelSpec("llama3-70b", 80, 8192, 28672, 64, 128256, kv_heads=8),
    "llama3-405b": ModelSpec("llama3-405b", 126, 16384, 53248, 128, 128256, kv_heads=8),
    "mixtral-8x7b": ModelSpec("mixtral-8x7b", 32, 4096, 14336, 32, 32000, experts=8, top_k=2, expert_ffn=14336,
                              kv_heads=8),
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
    from netsim import inputs

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
    return ModelSpec(**data)
