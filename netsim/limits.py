"""Bounds of every integer a user gives netsim: one table for flags, sweep keys and API arguments.

A flag (``--tokens``), a sweep key (``tokens``, ``llm.seq``) and a Python argument
(``MoEConfig(tokens=...)``, ``plan_llm(seq=...)``) that mean the same thing share one range
here, checked before the value is used: the command line reads it with
:func:`netsim.cli.options.int_arg`, the API with :func:`check_int`.  A range bounds a value
alone; what a combination of values would allocate is estimated where it is allocated
(:func:`netsim.collectives.moe.check_memory`, :func:`netsim.workload.generate.plan.check_memory`).

>>> check_int(64, "tokens", "--tokens")
64
>>> check_int(2**63, "tokens", "--tokens")
Traceback (most recent call last):
...
netsim.errors.InputError: --tokens: expected an integer in 1..2,147,483,647, got 9223372036854775808
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from netsim.ncclfacts import MAXCHANNELS

#: GPUs in one topology: twice the largest shipped example (65,536 GPUs, fat-tree-64k.yaml).
MAX_GPUS = 131_072
#: Seeds are stored as int64 (numpy's generators take any non-negative integer).
SEED = (0, 2**63 - 1)
#: Counts held in int32 arrays (tokens per rank, generator degrees and lengths).
INT32 = 2**31 - 1
#: Processes a command starts (netsim.sweep.runner.MAX_WORKERS).
PROCESSES = (1, 1024)

#: Key (a flag's long name with ``_`` for ``-``) -> (lowest, highest) accepted value.
INTS = MappingProxyType({
    # every bench op, netsim run
    "gpus": (2, MAX_GPUS),  # the largest topology netsim builds
    "channels": (1, MAXCHANNELS),
    "seed": SEED,
    "streams": (1, 1024),
    "stepfactor": (2, 2**50),  # a size is at most 1 PiB (netsim.units.MAX_SIZE)
    # MoE layers (bench --op moe_*, run --llm with MoE flags)
    "tokens": (1, INT32),
    "hidden": (1, 2**20),  # models today: 4,096 to 25,600
    "topk": (1, 1024),
    "experts": (1, 2**16),  # DeepSeek-V3: 256 routed experts
    "redundant_experts": (0, 2**16),
    "max_nodes": (0, MAX_GPUS),
    "chunks": (1, 1024),
    # the LLM generator (netsim workload llm, netsim run --llm, llm.* sweep keys)
    **{k: (1, INT32) for k in ("tp", "pp", "dp", "ep", "cp", "microbatches", "seq", "micro_batch", "vpp",
                                "global_batch")},
    "dtype_bytes": (1, 64),  # bytes per element (FP8 1 ... FP64 8)
    # a generated model's shape (workloads/models/*.yaml; today's largest: 126 layers, 25,600 wide)
    "model.layers": (1, 1024), "model.hidden": (1, 2**20), "model.ffn": (1, 2**24), "model.heads": (1, 2**16),
    "model.kv_heads": (1, 2**16), "model.vocab": (1, INT32), "model.experts": (0, 2**16), "model.top_k": (0, 1024),
    "model.expert_ffn": (0, 2**24), "model.shared_experts": (0, 2**16), "model.dense_layers": (0, 1024),
    # multi-head latent attention (DeepSeek-V3: ranks 1,536 and 512, head dimensions 128, 64, 128)
    **{f"model.{k}": (0, 2**20) for k in ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                                            "v_head_dim")},
    # processes and reports
    "jobs": PROCESSES, "workers": PROCESSES, "retries": (0, 100),
    "top": (1, 10**6), "suspects": (0, 10**6),
})
#: Flags whose key differs from their long name.
ALIASES = MappingProxyType({"moe_chunks": "chunks", "moe_seed": "seed"})


def bounds(key: str) -> tuple[int, int]:
    """(lowest, highest) of ``key`` (a flag name with or without dashes, or an alias)."""
    key = key.lstrip("-").replace("-", "_")
    return INTS[ALIASES.get(key, key)]


def check_int(value: Any, key: str, source: str | None, field: str | None = None) -> int:
    """``value`` as an int if it is an integer within ``key``'s bounds; else InputError."""
    from netsim.inputs import bounded_int

    lo, hi = bounds(key)
    if hasattr(value, "dtype") and getattr(value.dtype, "kind", "") in "iu":  # a numpy integer
        value = int(value)
    return int(bounded_int(value, source, field, lo, hi))
