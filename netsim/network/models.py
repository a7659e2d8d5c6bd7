"""The network models by their ``--model`` name: the one table the benchmarks (:mod:`netsim.perftests`)
and the workload runner share.

>>> sorted(MODELS)
['analytical', 'flow']
"""

from __future__ import annotations

from functools import partial
from types import MappingProxyType

from netsim.network.analytical import AnalyticalNetwork
from netsim.network.flow import FlowNetwork

#: ``--model`` name -> :class:`~netsim.network.base.Network` class (read-only).
MODELS = MappingProxyType({"flow": FlowNetwork, "analytical": AnalyticalNetwork})


def network_class(model: str, engine: str = "auto"):
    """``network(env, topo)`` for ``--model`` and ``--engine``: the ``reference`` engine runs the
    flow model on its numpy flow table (:data:`~netsim.network.flow.KERNELS`), the others let it
    move to the compiled kernels once a run is long enough.

    >>> network_class("flow", "reference").keywords
    {'kernel': 'numpy'}
    """
    if model == "flow" and engine == "reference":
        return partial(FlowNetwork, kernel="numpy")
    return MODELS[model]
