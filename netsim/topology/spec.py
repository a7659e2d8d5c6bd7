"""Topology YAML: parse into frozen dataclasses, validate, build.

Two formats are accepted wherever a topology path is:

* **netsim topology YAML** (documented in ``docs/topology.md``): a ``node``
  (scale-up domain, a preset or explicit NVSwitch / NVLink-mesh fields),
  ``nodes`` (how many), an optional ``scale_out`` fat-tree, or ``dims`` for an
  ASTRA-sim style multi-dimensional network;
* **ASTRA-sim network YAML** (``topology``, ``npus_count``, ``bandwidth``,
  ``latency`` lists; bandwidth in GiB/s, latency in ns), auto-detected.

Every problem raises :class:`~netsim.errors.InputError` naming the file and
the field, e.g. ``topo.yaml: scale_out.tiers[1].down: expected a positive
integer, got -4``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable

from netsim import inputs, units
from netsim.errors import InputError
from netsim.shipped import resolve
from netsim.topology.astra_yaml import is_astra_network, parse_astra_network
from netsim.topology.builders import NVLINK_HOP_LATENCY_S, GPU_PRESETS, SCALEUP_PRESETS, nvlink_mesh, nvswitch_domain
from netsim.ncclfacts import CPU_VENDORS
from netsim.topology.efficiency import DEFAULT_EFFICIENCY, NVLINK_EFFICIENCY, apply_efficiency  # noqa: F401
from netsim.topology.efficiency import nvlink_efficiency
from netsim.topology.efficiency import parse_efficiency as _efficiency
from netsim.topology.fabric_spec import build_fabric
from netsim.topology.facts import INTRA_NODE_ROUTES, NIC_ATTACH, TopologyFacts
from netsim.topology.model import FABRICS, LINK_KINDS, MAX_GPUS, MAX_LINKS, Topology  # noqa: F401 (re-exported)
from netsim.topology.multidim import DIM_KINDS, Dim, check_dims_size, multi_dim
from netsim.topology.planes import MAX_PLANES


# ----------------------------------------------------------- field parsers
def _bw(v, src, f):
    return units.parse_bandwidth(v, source=src, field=f)


def _time(v, src, f):
    return units.parse_time(v, source=src, field=f)


def _pcie(v, src, f):
    from netsim.topology.hostio import parse_pcie_field
    return parse_pcie_field(v, src, f, _bw)


# Ranges of counts (checked before anything is allocated; limits.md-style sources in each comment).
#: GPUs per scale-up domain: GB200 NVL576 is the largest announced NVLink domain; the domain's
#: table router does an all-pairs BFS (576 GPUs: ~18 s, 1024: ~105 s).
MAX_NODE_GPUS = 576
#: NVLinks per GPU: 18 on H100/B200 (link widths are stored as int16).
MAX_LINKS_PER_GPU = 1024
#: Ports per switch (down, up, radix): the largest shipping switch ASICs have 512 ports.
MAX_PORTS = 4096
#: NIC ports per GPU: ConnectX-8 has "up to 8 ports" (NVIDIA, Hot Chips 2025); twice that.
MAX_NICS_PER_GPU = 16


def _int_in(lo: int, hi: int, note: str):
    """A field parser for integers in ``[lo, hi]`` (``note`` says where ``hi`` comes from)."""
    def parse(v, src, f):
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            got = v if not isinstance(v, int) or abs(v) < 10**12 else f"{v:.3g}"
            kind = {0: "a non-negative integer", 1: "a positive integer"}.get(lo, f"an integer >= {lo}")
            raise InputError(f"expected {kind} up to {hi} ({note}), got {got!r}", source=src, field=f)
        return v
    return parse


def _bool(v, src, f):
    if not isinstance(v, bool):
        raise InputError(f"expected true or false, got {v!r}", source=src, field=f)
    return v


def _str(v, src, f):
    if not isinstance(v, str) or not v:
        raise InputError(f"expected a non-empty string, got {v!r}", source=src, field=f)
    return v


def _cpu(v, src, f):
    if v not in CPU_VENDORS:
        raise InputError(f"expected one of {', '.join(CPU_VENDORS)}, got {v!r}", source=src, field=f)
    return v


def _routing(v, src, f):
    from netsim.topology.policy import check_routing
    return check_routing(v, source=src, field=f)


def _one_of(choices: tuple[str, ...]) -> Callable:
    """A field that takes one of ``choices``."""
    def check(v, src, f):
        if v not in choices:
            raise InputError(f"expected one of {', '.join(choices)}, got {v!r}", source=src, field=f)
        return v
    return check


def _ratio(v, src, f):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 1 <= v <= 1e6:
        raise InputError(f"expected a ratio in 1..1e6 (down:up capacity), got {v!r}", source=src, field=f)
    return float(v)


def _pairs(v, src, f):
    ok = isinstance(v, list) and all(isinstance(p, list) and len(p) in (2, 3)
                                     and all(type(x) is int and 0 <= x <= MAX_LINKS_PER_GPU for x in p) for p in v)
    if not ok:
        raise InputError("expected a list of [gpu_a, gpu_b] or [gpu_a, gpu_b, links]", source=src, field=f)
    return tuple((p[0], p[1], p[2] if len(p) == 3 else 1) for p in v)


def _opt(parse: Callable, default: Any = None, doc: str = ""):
    return field(default=default, metadata={"parse": parse, "doc": doc})


def _from_mapping(cls, data: Any, src: str, path: str):
    """Fill dataclass ``cls`` from a YAML mapping; unknown keys are errors."""
    if not isinstance(data, dict):
        raise InputError(f"expected a mapping, got {type(data).__name__}", source=src, field=path or None)
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        where = f"{path}.{unknown[0]}" if path else unknown[0]
        raise InputError(f"unknown key; expected one of {', '.join(sorted(known))}", source=src, field=where)
    kwargs = {}
    for name, value in data.items():
        where = f"{path}.{name}" if path else name
        kwargs[name] = known[name].metadata["parse"](value, src, where)
    return cls(**kwargs)


# ------------------------------------------------------------------ specs
@dataclass(frozen=True)
class NodeSpec:
    """A scale-up domain (one server or one NVL rack).

    preset: a named preset (hgx-h100, hgx-a100, gb200-nvl72, dgx1-v100, nvlink-box4); other fields override it.
    kind: ``nvswitch`` or ``nvlink_mesh``.
    gpus: GPUs in the domain.
    links_per_gpu: NVLinks per GPU into the switch plane (nvswitch).
    link_bw: bandwidth per NVLink per direction.
    latency: seconds per NVLink hop.
    nvls: whether the switch can reduce in-network (NVLink SHARP).
    pairs: ``[a, b, links]`` NVLink wiring (nvlink_mesh).
    gpu: GPU model for compute presets (V100, A100, H100, B200, GB200).
    cpu: host CPU vendor, ``intel``, ``amd``, ``arm`` or ``mixed``: NCCL's multi-node LL
        bandwidth row and ring network overhead depend on it (tuning.cc:228-233, 268-271).
        Default: the GPU's usual server (:data:`netsim.ncclfacts.DEFAULT_CPU`: DGX A100
        AMD, GB200 Arm, others Intel).
    """

    preset: str | None = _opt(_str)
    kind: str | None = _opt(_str)
    gpus: int | None = _opt(_int_in(1, MAX_NODE_GPUS, "GPUs per scale-up domain"))
    links_per_gpu: int | None = _opt(_int_in(1, MAX_LINKS_PER_GPU, "NVLinks per GPU"))
    link_bw: float | None = _opt(_bw)
    latency: float | None = _opt(_time)
    nvls: bool | None = _opt(_bool)
    pairs: tuple | None = _opt(_pairs)
    gpu: str | None = _opt(_str)
    cpu: str | None = _opt(_cpu)


@dataclass(frozen=True)
class TierSpec:
    """A fat-tree switch tier: see :class:`netsim.topology.fattree.Tier`.

    oversubscription: down:up capacity ratio, built by cabling fewer up ports (:mod:`netsim.topology.cabling`).
    model: switch model for the bill of materials (e.g. ``QM9700``).
    """

    name: str = _opt(_str, "switch")
    down: int = _opt(_int_in(1, MAX_PORTS, "switch ports"), 0)
    up: int = _opt(_int_in(0, MAX_PORTS, "switch ports"), 0)
    up_bw: float | None = _opt(_bw)
    latency: float = _opt(_time, 200e-9)
    radix: int | None = _opt(_int_in(1, MAX_PORTS, "switch ports"))
    parallel: int | None = _opt(_int_in(1, MAX_PORTS, "switch ports"))
    oversubscription: float | None = _opt(_ratio)
    model: str | None = _opt(_str)


@dataclass(frozen=True)
class PcieSwitchSpec:
    """PCIe switches between GPUs and NICs (:mod:`netsim.topology.hostio`).

    gpus: GPUs per switch (default: the GPUs of one NIC, or one GPU and its NICs).
    nic_bw: each NIC's PCIe link to the switch, per direction (default: ``pcie_bw``).
    latency: to traverse the switch (default: ``pcie_latency``).
    """

    gpus: int | None = _opt(_int_in(1, MAX_NODE_GPUS, "GPUs per scale-up domain"))
    nic_bw: float | None = _opt(_pcie)
    latency: float | None = _opt(_time)


def _pcie_switch(v, src, f):
    return _from_mapping(PcieSwitchSpec, v, src, f)


def _tiers(v, src, f):
    if not isinstance(v, list) or not v:
        raise InputError("expected a non-empty list of tiers (leaf first)", source=src, field=f)
    return tuple(_from_mapping(TierSpec, t, src, f"{f}[{i}]") for i, t in enumerate(v))


@dataclass(frozen=True)
class ScaleOutSpec:
    """The fabric between scale-up domains.

    kind: ``fat_tree`` (default) or ``rail_only`` (one plane per NIC port, no spine between rails).
    planes: independent fat-trees of the same tiers side by side, NIC port *j* of a node in plane
        ``j mod planes`` (:mod:`netsim.topology.planes`); default 1.
    nic_bw: line rate of each NIC port (the leaf's down ports).
    nics_per_gpu: NIC ports each GPU owns (GB300 + ConnectX-8: 2 x 400G); flows spread over them.
    gpus_per_nic: GPUs sharing one NIC behind a PCIe switch (AWS p4d: 2 A100 per 100G EFA).
    nic_latency: seconds to traverse a NIC.
    pcie_bw: each GPU's PCIe link (to its NIC, or its PCIe switch), per direction; a bandwidth
        or ``gen4x16``-style (the PCIe specification's rate).
    pcie_latency: seconds for the PCIe hop.
    pcie_switch: PCIe switches between GPUs and NICs (implied when a NIC is not one GPU's alone).
    nic_attach: ``pcie`` (default) or ``c2c``: the NIC on the CPU, over NVLink-C2C (GB200; pcie_bw: CPU->NIC).
    intra_node: ``nvlink`` (default) or ``nic``: GPUs of one node talk through their NICs
        and the fabric (pure-RDMA kernels).
    rail_optimized: NIC *i* of every node on the leaf of rail *i*.
    pxn: NCCL PXN routing (NVLink to the GPU on the destination's rail first); default = rail_optimized.
    fabric: ``infiniband`` (default; routed by its subnet manager) or ``roce`` (Ethernet switches hash flows).
    qps_per_connection: queue pairs per NCCL connection (``NCCL_IB_QPS_PER_CONNECTION``, default 1): each
        carries an equal share of the connection's bytes on its own ECMP path.
    routing: path choice among equal-cost paths: ftree (OpenSM's fat-tree engine), ecmp (static hash),
        adaptive or spray (docs/topology.md); default: ftree on InfiniBand, ecmp on RoCE.
    tiers: switch tiers, leaf first.
    """

    kind: str = _opt(_str, "fat_tree")
    planes: int | None = _opt(_int_in(1, MAX_PLANES, "planes of one fabric"))
    nic_bw: float = _opt(_bw, 50e9)
    nics_per_gpu: int = _opt(_int_in(1, MAX_NICS_PER_GPU, "NIC ports per GPU"), 1)
    gpus_per_nic: int = _opt(_int_in(1, MAX_NODE_GPUS, "GPUs per scale-up domain"), 1)
    nic_latency: float = _opt(_time, 400e-9)
    pcie_bw: float = _opt(_pcie, 63e9)
    pcie_latency: float = _opt(_time, 100e-9)
    pcie_switch: PcieSwitchSpec | None = _opt(_pcie_switch)
    intra_node: str = _opt(_one_of(INTRA_NODE_ROUTES), "nvlink")
    nic_attach: str = _opt(_one_of(NIC_ATTACH), "pcie")
    rail_optimized: bool = _opt(_bool, True)
    pxn: bool | None = _opt(_bool)
    fabric: str = _opt(_one_of(FABRICS), "infiniband")
    qps_per_connection: int = _opt(_int_in(1, 128, "NCCL_IB_QPS_PER_CONNECTION's range"), 1)
    routing: str | None = _opt(_routing)
    tiers: tuple = _opt(_tiers, ())


@dataclass(frozen=True)
class DimSpec:
    """One ASTRA-sim style dimension: kind (Ring/FullyConnected/Switch), npus, bw per link, latency per hop."""

    kind: str = _opt(_str, "Ring")
    npus: int = _opt(_int_in(1, MAX_GPUS, "NPUs"), 2)
    bw: float = _opt(_bw, 50e9)
    latency: float = _opt(_time, 500e-9)


def _dims(v, src, f):
    if not isinstance(v, list) or not v:
        raise InputError("expected a non-empty list of dimensions", source=src, field=f)
    return tuple(_from_mapping(DimSpec, d, src, f"{f}[{i}]") for i, d in enumerate(v))


def _node(v, src, f):
    return _from_mapping(NodeSpec, v, src, f)


def _scale_out(v, src, f):
    return _from_mapping(ScaleOutSpec, v, src, f)


@dataclass(frozen=True)
class TopologySpec:
    """A whole topology file.

    name: short name shown in reports.
    description: free text (sources of the numbers belong here or in comments).
    node: the scale-up domain.
    nodes: how many scale-up domains.
    scale_out: the fabric joining them (required when nodes > 1).
    dims: an ASTRA-sim style multi-dimensional network instead of node/scale_out.
    efficiency: achievable data rate / line rate per link kind (defaults: see
        :data:`NVLINK_EFFICIENCY`, :data:`DEFAULT_EFFICIENCY`; ``dims`` networks: 1).
    """

    name: str = _opt(_str, "topology")
    description: str = _opt(lambda v, s, f: str(v), "")
    node: NodeSpec | None = _opt(_node)
    nodes: int = _opt(_int_in(1, MAX_GPUS, "scale-up domains"), 1)
    scale_out: ScaleOutSpec | None = _opt(_scale_out)
    dims: tuple | None = _opt(_dims)
    efficiency: dict | None = _opt(_efficiency)


# ---------------------------------------------------------------- building
def parse_spec(data: Any, source: str = "<topology>") -> TopologySpec:
    """Validate a parsed YAML mapping into a :class:`TopologySpec`."""
    spec = _from_mapping(TopologySpec, data, source, "")
    if spec.dims is None and spec.node is None:
        raise InputError("expected a 'node' (scale-up domain) or 'dims' section", source=source, field="node")
    if spec.dims is not None and (spec.node is not None or spec.scale_out is not None):
        raise InputError("'dims' describes the whole network; do not combine it with node/scale_out",
                         source=source, field="dims")
    if spec.nodes > 1 and spec.scale_out is None:
        raise InputError(f"{spec.nodes} nodes need a 'scale_out' fabric to connect them (the "
                         "topology would be disconnected)", source=source, field="scale_out")
    return spec


def build_node(spec: NodeSpec, source: str, path: str = "node") -> Topology:
    """Build a scale-up domain from a preset and/or explicit fields."""
    base = TopologyFacts()
    if spec.preset is not None:
        if spec.preset not in SCALEUP_PRESETS:
            raise InputError(f"unknown preset {spec.preset!r}; expected one of {', '.join(SCALEUP_PRESETS)}",
                             source=source, field=f"{path}.preset")
        base = SCALEUP_PRESETS[spec.preset]().facts
    if spec.gpu is not None and spec.gpu not in GPU_PRESETS:
        raise InputError(f"unknown GPU model {spec.gpu!r}; expected one of {', '.join(GPU_PRESETS)}",
                         source=source, field=f"{path}.gpu")
    kind = spec.kind or base.scaleup
    _check_kind_fields(spec, kind, source, path)
    latency = spec.latency if spec.latency is not None else NVLINK_HOP_LATENCY_S
    if kind == "nvswitch":
        switch = base if base.scaleup == "nvswitch" else TopologyFacts()  # a mesh preset's links are not a plane's
        need = {"gpus": _given(spec.gpus, base.gpus_per_node),
                "links_per_gpu": _given(spec.links_per_gpu, switch.nvlink_links_per_gpu),
                "link_bw": _given(spec.link_bw, switch.nvlink_link_Bps)}
        for key, value in need.items():
            if value is None:
                raise InputError("required for an nvswitch node", source=source, field=f"{path}.{key}")
        nvls = spec.nvls if spec.nvls is not None else base.nvls
        return nvswitch_domain(need["gpus"], links_per_gpu=need["links_per_gpu"], link_bw=need["link_bw"],
                               latency=latency, nvls=nvls, name=spec.preset or "node",
                               gpu=_given(spec.gpu, base.gpu_model), switch_chips=base.switch_chips)
    if kind == "nvlink_mesh":
        mesh = _mesh_fields(spec)
        for key, value in mesh.items():
            if value is None:
                raise InputError("required for an nvlink_mesh node", source=source, field=f"{path}.{key}")
        try:
            return nvlink_mesh(mesh["gpus"], mesh["pairs"], link_bw=mesh["link_bw"], latency=latency,
                               gpu=_given(spec.gpu, base.gpu_model), name=spec.preset or "nvlink-mesh")
        except ValueError as exc:
            msg = str(exc)
            if "unreachable" in msg:
                msg = f"disconnected GPUs: {msg}"
            raise InputError(msg, source=source, field=f"{path}.pairs") from None
    raise InputError(f"expected kind nvswitch or nvlink_mesh (or a preset), got {kind!r}",
                     source=source, field=f"{path}.kind")


def _given(value, default):
    """A field's value when the file gives it (even 0), else the preset's."""
    return value if value is not None else default


def _check_kind_fields(spec: NodeSpec, kind: str | None, source: str, path: str) -> None:
    """Fields that the node kind would ignore are errors, not silently dropped."""
    ignored = {"nvswitch": ("pairs",), "nvlink_mesh": ("links_per_gpu", "nvls")}.get(kind, ())
    for key in ignored:
        if getattr(spec, key) is not None and not (key == "nvls" and spec.nvls is False):
            raise InputError(f"does not apply to a {kind} node (give it for "
                             f"{'nvswitch' if kind == 'nvlink_mesh' else 'nvlink_mesh'} nodes)",
                             source=source, field=f"{path}.{key}")


def _mesh_fields(spec: NodeSpec) -> dict:
    """gpus, pairs and per-link bandwidth of an NVLink mesh: the file's, else the preset's wiring."""
    out = {"gpus": spec.gpus, "pairs": spec.pairs, "link_bw": spec.link_bw}
    if spec.preset is not None and SCALEUP_PRESETS.get(spec.preset) is not None:
        t = SCALEUP_PRESETS[spec.preset]()
        up = t.link_src < t.link_dst
        pairs = tuple(zip(t.link_src[up].tolist(), t.link_dst[up].tolist(), t.link_width[up].tolist()))
        per_link = float(t.link_bw[0] / t.link_width[0]) if t.n_links else None
        out = {"gpus": _given(spec.gpus, t.n_gpus), "pairs": _given(spec.pairs, pairs),
               "link_bw": _given(spec.link_bw, per_link)}
    return out


def build_topology(spec: TopologySpec, source: str = "<topology>") -> Topology:
    """Build the :class:`Topology` a validated spec describes (link_bw = achievable data rate)."""
    topo = _build(spec, source)
    if spec.node is not None and spec.node.cpu is not None:
        topo = replace(topo, facts=replace(topo.facts, cpu_vendor=spec.node.cpu))
    if spec.dims is not None and not spec.efficiency:
        return topo
    eff = {**DEFAULT_EFFICIENCY, "nvlink": nvlink_efficiency(topo.facts.gpu_model), **(spec.efficiency or {})}
    return apply_efficiency(topo, eff)


def _build(spec: TopologySpec, source: str) -> Topology:
    if spec.dims is not None:
        dims = [Dim(d.kind, d.npus, d.bw, d.latency) for d in spec.dims]
        _check_dims(dims, source, "dims")
        check_dims_size(dims, source)
        return multi_dim(dims, name=spec.name)
    node = build_node(spec.node, source)
    if spec.scale_out is None:
        return node if spec.name == "topology" else replace(node, name=spec.name)
    return build_fabric(node, spec.nodes, spec.scale_out, spec.name, source)


def _check_dims(dims: list[Dim], source: str, path: str) -> None:
    for i, d in enumerate(dims):
        if d.kind not in DIM_KINDS:
            raise InputError(f"expected one of {', '.join(DIM_KINDS)}, got {d.kind!r}",
                             source=source, field=f"{path}[{i}].kind")
        if d.npus < 2:
            raise InputError(f"expected at least 2 NPUs, got {d.npus}", source=source, field=f"{path}[{i}].npus")


def load_topology(path: str | Path) -> Topology:
    """Load a netsim topology YAML or an ASTRA-sim network YAML (auto-detected), or a shipped one
    by name (``dgx-h100``) or repository-relative path (:func:`netsim.shipped.resolve`).

    >>> t = load_topology("topologies/dgx-h100.yaml")  # doctest: +SKIP
    """
    src = str(p := Path(resolve(path, "topology")))
    data = inputs.load_yaml(p)
    if is_astra_network(data):
        return multi_dim(parse_astra_network(data, src), name=p.stem, astra_network=True)
    return build_topology(parse_spec(data, src), src)
