"""Synthetic Chakra workload generators.

:mod:`netsim.workload.generate.llm` builds one training iteration of a
Megatron-style LLM (tensor, pipeline, data and expert parallelism).
"""

from netsim.workload.generate.llm import MODEL_PRESETS, ModelSpec, generate_llm, load_model_spec, write_llm_workload

__all__ = ["MODEL_PRESETS", "ModelSpec", "generate_llm", "load_model_spec", "write_llm_workload"]
