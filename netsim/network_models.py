"""The network models by their ``--model`` name: the one table ``bench``, ``moe_bench`` and the
workload runner share (it lives here, below all three, so none of them imports another for it).

>>> sorted(MODELS)
['analytical', 'flow']
"""

from __future__ import annotations

from types import MappingProxyType

from netsim.network.analytical import AnalyticalNetwork
from netsim.network.flow import FlowNetwork

#: ``--model`` name -> :class:`~netsim.network.base.Network` class (read-only).
MODELS = MappingProxyType({"flow": FlowNetwork, "analytical": AnalyticalNetwork})
