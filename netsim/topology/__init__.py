"""Topologies as data: the array model, builders, routing and YAML specs.

The names below are imported on first use (PEP 562), so a module that needs one submodule (e.g.
``netsim astra`` reading an ASTRA-sim network YAML through :mod:`netsim.topology.astra_yaml`) does
not import the builders, costs and specs with it; ``from netsim.topology import X`` works as before.
"""

from __future__ import annotations

import importlib

#: exported name -> the submodule that defines it
_WHERE = {
    "bill_of_materials": "bom", "cost_table": "cost", "fabric_cost": "cost",
    "dgx1_v100": "builders", "gb200_nvl72": "builders", "hgx_a100": "builders", "hgx_h100": "builders",
    "nvlink_box4": "builders", "nvlink_mesh": "builders", "nvswitch_domain": "builders",
    "DimFacts": "facts", "TopologyFacts": "facts", "XgftLevel": "facts", "Tier": "fattree", "fat_tree": "fattree",
    "Topology": "model", "Dim": "multidim", "multi_dim": "multidim", "with_routing": "policy",
    "load_topology": "spec", "summarize": "summary",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'netsim.topology' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"netsim.topology.{where}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
