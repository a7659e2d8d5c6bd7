"""Achievable data rate / line rate per link kind: the ``efficiency:`` section of a topology file.

Re-exported by :mod:`netsim.topology.spec`, where it was first defined.
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

import numpy as np

from netsim.errors import InputError
from netsim.ncclfacts import nvlink_gbps
from netsim.topology.builders import NVLINK_LINE_GBPS
from netsim.topology.model import LINK_KINDS, Topology


#: Achievable data rate / line rate per link kind (``efficiency:`` in a topology file).
#: NVLink, per GPU model: NCCL's effective per-link bandwidth (:data:`netsim.ncclfacts.NVLINK_GBPS`,
#: NCCL ``src/graph/topo.h`` v2.30.7-1 lines 19-24) over the per-link line rate
#: (:data:`netsim.topology.builders.NVLINK_LINE_GBPS`): packet headers, flow control and the GPU's copy
#: engines.  InfiniBand: ~48 GB/s per NDR
#: 400G NIC (nccl-tests#290, #267: 46-49 GB/s; IB headers alone cost 0.6 % at 4 KiB MTU, the
#: rest is RDMA/PCIe DMA overhead).  RoCE: ib_write_bw 380-385 Gb/s on 400G.  PCIe: 63 GB/s
#: per Gen5 x16 direction is already a data rate.
NVLINK_EFFICIENCY = MappingProxyType({model: nvlink_gbps(model) / line for model, line in NVLINK_LINE_GBPS.items()})
#: A GPU model netsim does not know: NCCL's own fallback rate (SM80's, topo.h:274-281) over a 25 GB/s
#: link (NVLink2-4).
UNKNOWN_NVLINK_EFFICIENCY = nvlink_gbps(None) / 25.0
DEFAULT_EFFICIENCY = {"ib": 0.96, "ethernet": 0.955, "pcie": 1.0}


def parse_efficiency(v, src, f):
    """The ``efficiency:`` mapping of a topology file, validated (link kind -> (0, 1])."""
    if not isinstance(v, dict):
        raise InputError("expected a mapping of link kind to efficiency, e.g. {nvlink: 0.82, ib: 0.96}",
                         source=src, field=f)
    out = {}
    for kind, e in v.items():
        if kind not in ("nvlink", "ib", "ethernet", "pcie"):
            raise InputError(f"expected one of nvlink, ib, ethernet, pcie, got {kind!r}", source=src,
                             field=f"{f}.{kind}")
        if isinstance(e, bool) or not isinstance(e, (int, float)) or not 0 < e <= 1:
            raise InputError(f"expected a number in (0, 1], got {e!r}", source=src, field=f"{f}.{kind}")
        out[kind] = float(e)
    return out


def nvlink_efficiency(gpu_model: str | None) -> float:
    """NCCL's NVLink efficiency for ``gpu_model`` (:data:`NVLINK_EFFICIENCY`, else the unknown GPU's)."""
    return NVLINK_EFFICIENCY.get(str(gpu_model), UNKNOWN_NVLINK_EFFICIENCY)


def apply_efficiency(topo: Topology, eff: dict[str, float]) -> Topology:
    """Scale every link's bandwidth by its kind's efficiency; line rates stay in ``facts``
    (whose :attr:`~netsim.topology.facts.TopologyFacts.link_efficiency` records ``eff``)."""
    factor = np.ones(len(LINK_KINDS))
    for kind, e in eff.items():
        factor[LINK_KINDS.index(kind)] = e
    facts = replace(topo.facts, link_efficiency=eff)
    return replace(topo, link_bw=topo.link_bw * factor[topo.link_kind], facts=facts)
