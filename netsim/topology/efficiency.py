"""Achievable data rate / line rate per link kind: the ``efficiency:`` section of a topology file.

Re-exported by :mod:`netsim.topology.spec`, where it was first defined.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from netsim.errors import InputError
from netsim.topology.model import LINK_KINDS, Topology


#: Achievable data rate / line rate per link kind (``efficiency:`` in a topology file).
#: NVLink: NCCL's effective per-link bandwidth over the per-link line rate (NCCL
#: ``src/graph/topo.h`` v2.30.7-1 lines 20-24: SM70/SM80 20.0, SM90 20.6, SM100 40.1 GB/s per 25/25/50
#: GB/s link):
#: packet headers, flow control and the GPU's copy engines.  InfiniBand: ~48 GB/s per NDR
#: 400G NIC (nccl-tests#290, #267: 46-49 GB/s; IB headers alone cost 0.6 % at 4 KiB MTU, the
#: rest is RDMA/PCIe DMA overhead).  RoCE: ib_write_bw 380-385 Gb/s on 400G.  PCIe: 63 GB/s
#: per Gen5 x16 direction is already a data rate.
NVLINK_EFFICIENCY = {"V100": 20.0 / 25, "A100": 20.0 / 25, "H100": 20.6 / 25, "B200": 40.1 / 50,
                     "GB200": 40.1 / 50}
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


def apply_efficiency(topo: Topology, eff: dict[str, float]) -> Topology:
    """Scale every link's bandwidth by its kind's efficiency; line rates stay in ``facts``
    (whose :attr:`~netsim.topology.facts.TopologyFacts.link_efficiency` records ``eff``)."""
    factor = np.ones(len(LINK_KINDS))
    for kind, e in eff.items():
        factor[LINK_KINDS.index(kind)] = e
    facts = replace(topo.facts, link_efficiency=eff)
    return replace(topo, link_bw=topo.link_bw * factor[topo.link_kind], facts=facts)
