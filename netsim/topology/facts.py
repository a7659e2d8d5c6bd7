"""What a topology's builder knows about it beyond the link arrays: :class:`TopologyFacts`.

The builders (:mod:`~netsim.topology.builders`, :mod:`~netsim.topology.fattree`,
:mod:`~netsim.topology.multidim`, :mod:`~netsim.topology.spec`) fill one frozen
:class:`TopologyFacts` when they build a :class:`~netsim.topology.model.Topology`; nothing sets a
fact afterwards.  A derived topology (link efficiencies applied, compute efficiency, faults) is a
new ``Topology`` with a new facts object (:func:`dataclasses.replace`).

Every fact has a type and a default for "the builder does not know" (``None``, ``0``, empty).
Mapping-valued facts are read-only (:class:`types.MappingProxyType`), so no reader can change a
fact that another reader relies on.

>>> from netsim.topology.builders import hgx_h100
>>> f = hgx_h100().facts
>>> f.gpus_per_node, f.scaleup, f.nvls, f.gpu_model, round(f.scaleup_Bps_per_gpu / 1e9), f.nvlink_links_per_gpu
(8, 'nvswitch', True, 'H100', 450, 18)
>>> f.switches["leaf"] = 1
Traceback (most recent call last):
...
TypeError: 'mappingproxy' object does not support item assignment
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

#: Values of :attr:`TopologyFacts.scaleup`.
SCALEUP_KINDS: tuple[str, ...] = ("nvswitch", "nvlink_mesh", "astra_multidim")
#: Values of :attr:`TopologyFacts.scaleout` (``None``: no scale-out fabric).
SCALEOUT_KINDS: tuple[str, ...] = ("fat_tree",)
#: Values of :attr:`TopologyFacts.intra_node`: how GPUs of one node reach each other.
INTRA_NODE_ROUTES: tuple[str, ...] = ("nvlink", "nic")
#: Where a GPU's NIC hangs: ``pcie`` (on the GPU's PCIe link or PCIe switch: NCCL path PIX/PXB) or
#: ``c2c`` (on the CPU, which the GPU reaches over NVLink-C2C, as on GB200/GB300: NCCL path P2C,
#: ``src/graph/paths.cc:206, 794-806``, v2.30.7-1; GPU Direct RDMA stays on, ``NCCL_NET_GDR_C2C=1``,
#: paths.cc:465, 511).
NIC_ATTACH: tuple[str, ...] = ("pcie", "c2c")


@dataclass(frozen=True)
class DimFacts:
    """One dimension of an ASTRA-sim style multi-dimensional network (:mod:`~netsim.topology.multidim`).

    ``astra_bw`` and ``astra_latency_ns`` are the values in ASTRA-sim's own units (GiB/s per link,
    ns per hop): as an ASTRA-sim network YAML wrote them, else converted from ``bw_Bps`` and
    ``latency_s`` by :mod:`netsim.units`.  ASTRA-sim's integer-ns arithmetic needs them exactly.
    """

    #: ``Ring``, ``FullyConnected`` or ``Switch``.
    kind: str
    #: NPUs along the dimension.
    npus: int
    #: Bytes/s per link per direction.
    bw_Bps: float
    #: Seconds per hop.
    latency_s: float
    #: The bandwidth in ASTRA-sim's YAML unit (GiB/s).
    astra_bw: float
    #: The latency in ASTRA-sim's YAML unit (ns).
    astra_latency_ns: float


@dataclass(frozen=True)
class XgftLevel:
    """One level of a fat-tree as an XGFT (Öhring et al.): ``m`` children per switch, ``w`` parents
    per child, ``p`` parallel links per child-parent pair (:mod:`~netsim.topology.fattree`)."""

    m: int
    w: int
    p: int


@dataclass(frozen=True)
class SwitchTierFacts:
    """One switch tier of a fat-tree as built (:mod:`~netsim.topology.cabling`): what a bill of
    materials needs beyond the link arrays."""

    #: Tier name (``leaf``, ``spine``, ``core`` or another).
    name: str
    #: Switches in the tier.
    count: int
    #: Switch model named in the topology file (``None``: not named).
    model: str | None
    #: Ports per switch: the file's ``radix``, else ``down + up`` (``down`` at the top tier).
    radix: int
    #: Ports facing the tier below.
    down_ports: int
    #: Up ports cabled per switch (0 at the top tier): fewer than ``up`` when oversubscribed.
    uplinks: int
    #: Line rate of one down port and of one up port (0 at the top tier), bytes/s per direction.
    down_port_Bps: float
    up_port_Bps: float
    #: The ``oversubscription`` the file asked for (``None``: none asked); the ratio built is
    #: :attr:`TopologyFacts.oversubscription`.
    oversubscription_asked: float | None = None


def _frozen(mapping: Mapping | None) -> Mapping:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class TopologyFacts:
    """Structure, line rates and hardware of a topology, as its builder derived them."""

    #: GPUs per scale-up domain (server); ``None``: the whole topology is one domain.
    gpus_per_node: int | None = None
    #: Scale-up domains (servers, or lines of ASTRA-sim dimension 0).
    nodes: int = 1
    #: Scale-up kind, one of :data:`SCALEUP_KINDS` (``None``: unknown).
    scaleup: str | None = None
    #: Whether the scale-up switch reduces in the network (NVLink SHARP, NCCL's NVLS).
    nvls: bool = False
    #: Line rate of one GPU's scale-up egress, bytes/s per direction (before link efficiencies).
    scaleup_Bps_per_gpu: float = 0.0
    #: Scale-out fabric kind, one of :data:`SCALEOUT_KINDS`; ``None``: none.
    scaleout: str | None = None
    #: Line rate of one GPU's scale-out egress (its NICs' ports, its share of a shared NIC, or
    #: ASTRA-sim dims 1..), bytes/s per direction: ``nic_port_Bps * nics_per_gpu / gpus_per_nic``.
    #: PCIe caps are not in it (see :attr:`pcie_Bps_per_gpu`).
    scaleout_Bps_per_gpu: float = 0.0
    #: Fat-tree: NIC ports each GPU sends through (several: flows spread by key, :mod:`~netsim.topology.hostio`).
    nics_per_gpu: int = 1
    #: Fat-tree: GPUs sharing one NIC.
    gpus_per_nic: int = 1
    #: Fat-tree: line rate of one NIC port, bytes/s per direction.
    nic_port_Bps: float = 0.0
    #: Fat-tree: line rate of a GPU's PCIe link (to its NIC, or to its PCIe switch).
    pcie_Bps: float = 0.0
    #: Fat-tree: PCIe switches per node (0: each GPU wired straight to its own NIC).
    pcie_switches: int = 0
    #: Fat-tree with PCIe switches: line rate of each NIC's PCIe link to its switch.
    nic_pcie_Bps: float | None = None
    #: Fat-tree: a GPU's share of the PCIe path to the fabric when every GPU sends at once:
    #: ``min(pcie_Bps, nic_pcie_Bps * nics_per_gpu / gpus_per_nic)``; the scale-out egress of a
    #: GPU is ``min(scaleout_Bps_per_gpu, pcie_Bps_per_gpu)`` (NCCL: a path's bandwidth is its
    #: narrowest link, ``src/graph/paths.cc``).
    pcie_Bps_per_gpu: float = 0.0
    #: How GPUs of one node reach each other, one of :data:`INTRA_NODE_ROUTES`: ``nvlink`` (the
    #: scale-up network) or ``nic`` (through their NICs and the fabric: pure-RDMA kernels).
    intra_node: str = "nvlink"
    #: Fat-tree: where each GPU's NIC hangs, one of :data:`NIC_ATTACH` (NCCL's GPU-to-NIC path type).
    nic_attach: str = "pcie"
    #: Smallest one-direction capacity across a balanced cut of the GPUs (``nan``: not computed).
    bisection_Bps: float = float("nan")
    #: Longest shortest route between two GPUs, in links.
    diameter_hops: int = 0
    #: NVLinks of each GPU: into its NVSwitch plane, or to its peers in an NVLink mesh (the fewest any
    #: GPU has); ``None``: the builder does not know (ASTRA-sim dimensions).  NCCL's p2p channels per
    #: NVLink peer count them (:meth:`netsim.collectives.p2p.P2PSetup.from_info`).
    nvlink_links_per_gpu: int | None = None
    #: Line rate of one NVLink, bytes/s per direction (NVSwitch domains and NVLink meshes).
    nvlink_link_Bps: float | None = None
    #: Physical NVSwitch chips of one domain (reports only).
    switch_chips: int | None = None
    #: GPU model, a key of :data:`netsim.topology.builders.GPU_PRESETS`.
    gpu_model: str | None = None
    #: Compute roof for the roofline, FLOP/s (the preset's peak, times any compute efficiency).
    peak_flops: float | None = None
    #: Achieved fraction of the roofline per kernel kind (:data:`netsim.vocab.OP_KINDS`) for compute nodes
    #: that name their kind (:data:`netsim.topology.builders.GPU_EFFICIENCY`); absent kinds run at the roofline.
    compute_efficiency: Mapping[str, float] = field(default_factory=dict)
    #: Streaming multiprocessors per GPU (:data:`netsim.topology.builders.GPU_SMS`); ``None``: unknown, and
    #: communication kernels take no SMs from compute.
    gpu_sms: int | None = None
    #: HBM bandwidth for the roofline, bytes/s.
    mem_bw_Bps: float | None = None
    #: Host CPU vendor (NCCL's tuning tables); ``None``: NCCL's default for the GPU.
    cpu_vendor: str | None = None
    #: Achievable / line rate per link kind, as applied to ``link_bw`` (empty: line rates).
    link_efficiency: Mapping[str, float] = field(default_factory=dict)
    #: Fat-tree: tiers, switches per tier, oversubscription per tier below the top (down:up capacity
    #: as built: cabled uplinks x their rate against the down ports, :mod:`~netsim.topology.cabling`).
    tiers: int = 0
    switches: Mapping[str, int] = field(default_factory=dict)
    oversubscription: Mapping[str, float] = field(default_factory=dict)
    #: Fat-tree: ``infiniband`` (routed by its subnet manager) or ``roce`` (switches hash flows).
    fabric: str | None = None
    #: Fat-tree: queue pairs per NCCL connection (``NCCL_IB_QPS_PER_CONNECTION``), each its own flow
    #: to an ECMP hash (:mod:`netsim.collectives.qps`).
    qps_per_connection: int = 1
    #: Fat-tree: the NICs of a server sit on different leaves (one rail per local GPU index).
    rail_optimized: bool = False
    #: Fat-tree: inter-node traffic crosses NVLink to the GPU on the destination's rail first.
    pxn: bool = False
    #: Fat-tree: independent fabrics (planes) side by side, each its own fat-tree of the same tiers; NIC
    #: port *j* of a node sits in plane ``j mod planes`` (:mod:`~netsim.topology.planes`).  1: one fabric.
    planes: int = 1
    #: Fat-tree: a rail-only fabric (no spine between rails: every NIC port of a node is its own plane).
    rail_only: bool = False
    #: Fat-tree: the levels as an XGFT (of one plane), leaf first.
    xgft: tuple[XgftLevel, ...] = ()
    #: Fat-tree: each switch tier as built, leaf first (:class:`SwitchTierFacts`).
    switch_tiers: tuple[SwitchTierFacts, ...] = ()
    #: Multi-dimensional networks: the dimensions, dimension 0 first.
    dims: tuple[DimFacts, ...] = ()
    #: The topology came from an ASTRA-sim network YAML: the analytical model and the collectives
    #: follow ASTRA-sim's rules (dimension-wise charges, its collective schedules).
    astra_network: bool = False

    def __post_init__(self):
        for name in ("link_efficiency", "switches", "oversubscription", "compute_efficiency"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))
        object.__setattr__(self, "xgft", tuple(self.xgft))
        object.__setattr__(self, "switch_tiers", tuple(self.switch_tiers))
        object.__setattr__(self, "dims", tuple(self.dims))
        if self.scaleup is not None and self.scaleup not in SCALEUP_KINDS:
            raise ValueError(f"scaleup must be one of {', '.join(SCALEUP_KINDS)}, got {self.scaleup!r}")
        if self.nic_attach not in NIC_ATTACH:
            raise ValueError(f"nic_attach must be one of {', '.join(NIC_ATTACH)}, got {self.nic_attach!r}")
        if self.intra_node not in INTRA_NODE_ROUTES:
            raise ValueError(f"intra_node must be one of {', '.join(INTRA_NODE_ROUTES)}, got {self.intra_node!r}")
        if self.scaleout is not None and self.scaleout not in SCALEOUT_KINDS:
            raise ValueError(f"scaleout must be one of {', '.join(SCALEOUT_KINDS)}, got {self.scaleout!r}")
