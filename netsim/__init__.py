"""netsim: simulate how GPU clusters communicate.

Public API (more arrives as modules land)::

    import netsim
    topo = netsim.load_topology("topologies/dgx-h100.yaml")
"""

from __future__ import annotations

__version__ = "0.1.0"

from netsim.errors import InputError, NetsimError  # noqa: F401
from netsim.topology import Topology, load_topology, summarize  # noqa: F401

__all__ = ["InputError", "NetsimError", "Topology", "__version__", "load_topology", "summarize"]
