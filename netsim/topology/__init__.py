"""Topologies as data: the array model, builders, routing and YAML specs."""

from netsim.topology.bom import bill_of_materials
from netsim.topology.cost import cost_table, fabric_cost
from netsim.topology.builders import (dgx1_v100, gb200_nvl72, hgx_a100, hgx_h100, nvlink_box4,
                                      nvlink_mesh, nvswitch_domain)
from netsim.topology.facts import DimFacts, TopologyFacts, XgftLevel
from netsim.topology.fattree import Tier, fat_tree
from netsim.topology.model import Topology
from netsim.topology.multidim import Dim, multi_dim
from netsim.topology.policy import with_routing
from netsim.topology.spec import load_topology
from netsim.topology.summary import summarize

__all__ = ["Dim", "bill_of_materials", "cost_table", "fabric_cost", "DimFacts", "Tier", "Topology", "TopologyFacts", "XgftLevel", "dgx1_v100", "fat_tree",
           "gb200_nvl72", "hgx_a100", "hgx_h100", "load_topology", "multi_dim", "nvlink_box4", "nvlink_mesh", "nvswitch_domain", "summarize",
           "with_routing"]
