"""Synthetic Chakra workload generators.

:mod:`netsim.workload.generate.llm` builds one training iteration of a
Megatron-style LLM (tensor, pipeline, data and expert parallelism);
:mod:`~netsim.workload.generate.plan` checks a generator call once,
:mod:`~netsim.workload.generate.template` stamps a pipeline stage's trace out for its ranks
and :mod:`~netsim.workload.generate.writer` writes the files fast (``netsim workload llm --out``).
"""

from netsim.workload.generate.llm import MODEL_PRESETS, ModelSpec, generate_llm, load_model_spec, write_llm_workload
from netsim.workload.generate.writer import write_llm_files

__all__ = ["MODEL_PRESETS", "ModelSpec", "generate_llm", "load_model_spec", "write_llm_files", "write_llm_workload"]
