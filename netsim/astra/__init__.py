"""ASTRA-sim compatibility: its inputs, its system layer, its results (``netsim astra``).

Python API (mirrors the command line; names load on first use):

* :func:`load_system`, :func:`load_memory`, :func:`load_network`, :func:`load_groups` — the four
  configuration files, validated key by key;
* :func:`run_astra` — run a Chakra workload: per-rank finish and exposed communication in
  ASTRA-sim cycles (ns) with the ``analytical``, ``congestion-aware`` or ``flow`` model;
* :func:`format_lines` / :func:`parse_output` — ASTRA-sim's stdout, both directions;
* :func:`export_topology` — ASTRA-sim network YAML + system JSON for a netsim topology;
* :func:`compare` helpers in :mod:`netsim.astra.compare` — the real binary side by side.
"""

from __future__ import annotations

_API = {
    "load_system": "netsim.astra.system", "parse_system": "netsim.astra.system", "SystemConfig": "netsim.astra.system",
    "load_memory": "netsim.astra.memory", "parse_memory": "netsim.astra.memory",
    "RemoteMemoryConfig": "netsim.astra.memory", "load_network": "netsim.astra.engine",
    "load_groups": "netsim.astra.run", "run_astra": "netsim.astra.run", "AstraResult": "netsim.astra.run",
    "format_lines": "netsim.astra.output", "parse_output": "netsim.astra.output",
    "export_topology": "netsim.astra.export", "run_binary": "netsim.astra.compare",
    "comparison_table": "netsim.astra.compare",
}

__all__ = sorted(_API)


def __getattr__(name: str):
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'netsim.astra' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
