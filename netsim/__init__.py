"""netsim: simulate how GPU clusters communicate.

Public API::

    import netsim
    topo = netsim.load_topology("topologies/dgx-h100.yaml")
    netsim.bill_of_materials(topo)   # switches, NICs, cables, transceivers: a DataFrame
    netsim.fabric_cost(topo)         # network cost and power, per GPU (netsim.cost_table: per line)
    rows = netsim.bench(topo, "all_reduce", [1 << 30])
    res = netsim.simulate("topologies/dgx-h100.yaml", "workloads/...")
    data = netsim.open_results("out/")

Names load on first use (``import netsim`` stays light, so the command line starts fast); each
is the real object, with its signature and docstring, once touched.
"""

from __future__ import annotations

from importlib import import_module

from netsim.errors import InputError, NetsimError, ResultsError  # noqa: F401
from netsim.version import __version__  # noqa: F401

#: Public name -> the module that defines it.
_LAZY = {"Topology": "netsim.topology", "load_topology": "netsim.topology", "summarize": "netsim.topology",
         "bill_of_materials": "netsim.topology", "cost_table": "netsim.topology", "fabric_cost": "netsim.topology",
         "find_shipped": "netsim.shipped", "bench": "netsim.perftests.collective",
         "open_results": "netsim.results.dataset", "simulate": "netsim.workload.simulation"}

__all__ = ["InputError", "NetsimError", "ResultsError", "Topology", "__version__", "bench", "bill_of_materials",
           "cost_table", "fabric_cost", "find_shipped", "load_topology", "open_results", "simulate", "summarize"]


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'netsim' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
