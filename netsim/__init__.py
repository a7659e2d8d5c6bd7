"""netsim: simulate how GPU clusters communicate.

Public API (more arrives as modules land)::

    import netsim
    topo = netsim.load_topology("topologies/dgx-h100.yaml")
    netsim.bill_of_materials(topo)   # switches, NICs, cables, transceivers: a DataFrame
"""

from __future__ import annotations

from netsim.version import __version__  # noqa: E402,F401

from netsim.errors import InputError, NetsimError, ResultsError  # noqa: F401
from netsim.topology import Topology, bill_of_materials, load_topology, summarize  # noqa: F401
from netsim.shipped import find_shipped  # noqa: F401


# Imported eagerly on purpose: the function shares its name with the submodule, and binding it
# after the submodule is loaded keeps ``netsim.bench`` the function for good.
from netsim.bench import bench  # noqa: E402,F401
from netsim.results.dataset import open_results  # noqa: E402,F401  (pyarrow loads on first use)


# The real function (its signature and docstring show in help()); netsim.workload.simulation imports
# nothing heavy at module level.
from netsim.workload.simulation import simulate  # noqa: E402,F401


__all__ = ["InputError", "NetsimError", "ResultsError", "Topology", "__version__", "bench", "bill_of_materials", "find_shipped", "load_topology", "open_results",
           "simulate", "summarize"]
