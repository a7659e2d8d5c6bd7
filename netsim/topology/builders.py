"""Scale-up builders: NVLink meshes and NVSwitch domains, and hardware presets.

Free functions that return a :class:`~netsim.topology.model.Topology`.  A
scale-up topology can be used on its own (one server) or as the *node*
template that :func:`netsim.topology.fattree.fat_tree` replicates under an
InfiniBand fabric.

Bandwidths are bytes/s per direction, latencies seconds.  Parallel physical
links between the same two endpoints are aggregated into one directed link
whose ``width`` counts them.

Examples
--------
>>> t = dgx1_v100()
>>> t.n_gpus, t.n_links, int(t.link_width.sum())
(8, 32, 48)
>>> h = hgx_h100()
>>> round(h.facts.scaleup_Bps_per_gpu / 1e9)
450
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Iterable, Sequence

import numpy as np

from netsim.topology.facts import TopologyFacts
from netsim.topology.model import Topology, link_kind_id, node_kind_id
from netsim.topology.routing import TableRouter

# Physical per-hop latency of one NVLink traversal (GPU->switch or GPU->GPU).
# Low confidence: no authoritative figure is published; NCCL's per-step software
# latencies (reference §6) are modelled separately by the collective layer.
NVLINK_HOP_LATENCY_S = 150e-9

#: GPU compute presets (dense BF16 tensor FLOP/s, HBM bytes/s) for the roofline.
#: Sources: NVIDIA H100/A100/V100/GB200 datasheets (dense, no sparsity).
GPU_PRESETS: dict[str, dict[str, float]] = {
    "V100": {"peak_flops": 125e12, "mem_bw_Bps": 900e9},
    "A100": {"peak_flops": 312e12, "mem_bw_Bps": 2.039e12},
    "H100": {"peak_flops": 989e12, "mem_bw_Bps": 3.35e12},
    "B200": {"peak_flops": 2.25e15, "mem_bw_Bps": 8.0e12},
    "GB200": {"peak_flops": 2.5e15, "mem_bw_Bps": 8.0e12},
}

#: Line rate of one NVLink per direction, GB/s, per GPU model: NVLink2 (V100: 6 links, 300 GB/s in
#: both directions, "NVIDIA Tesla V100 GPU Architecture"), NVLink3 (A100: 12 links, 600 GB/s, "NVIDIA
#: A100 Tensor Core GPU Architecture"), NVLink4 (H100 SXM5: 18 links, 900 GB/s, "NVIDIA H100 Tensor Core
#: GPU Architecture"): 25; NVLink5 (B200, GB200: 18 links, 1.8 TB/s, NVIDIA Blackwell datasheets): 50.
NVLINK_LINE_GBPS: dict[str, float] = {"V100": 25.0, "A100": 25.0, "H100": 25.0, "B200": 50.0, "GB200": 50.0}

#: Streaming multiprocessors per GPU (the SM count of the SXM part), for communication kernels that take
#: SMs from compute (:class:`netsim.workload.compute.SmShare`).  NVIDIA whitepapers: "NVIDIA Tesla V100 GPU
#: Architecture" (80 SMs), "NVIDIA A100 Tensor Core GPU Architecture" (108 SMs), "NVIDIA H100 Tensor Core
#: GPU Architecture" (H100 SXM5: 132 SMs).  B200 and GB200: no whitepaper figure found, so their compute is
#: never slowed by communication kernels.
GPU_SMS: dict[str, int] = {"V100": 80, "A100": 108, "H100": 132}

#: Achieved fraction of the roofline per kernel kind (:data:`netsim.vocab.OP_KINDS`), used for compute nodes
#: that name their kind (the LLM generator's); a kind a GPU lacks runs at the roofline.  The fraction applies
#: to the roof that binds the kernel: the peak FLOP/s for the compute-bound kinds, the HBM bandwidth for
#: ``elementwise``.
#:
#: * ``gemm``: Maximum Achievable Matmul FLOPS over the datasheet peak, BF16, best shape found
#:   (stas00/ml-engineering ``compute/accelerator/README.md`` at b9e2972, "Maximum Achievable Matmul FLOPS
#:   comparison table"): A100 SXM 271.2 / 312, H100 SXM 794.5 / 989, B200 SXM 1745.0 / 2250,
#:   GB200 1822.0 / 2500.  V100: not in the table.
#: * ``attn_fwd``, ``attn_bwd``: FlashAttention-3 on H100 80GB SXM5, BF16, head dimension 128, no causal
#:   mask, sequence 8k: 646 and 559 TFLOP/s (Shah et al., arXiv:2407.08608, the forward and backward
#:   speed figures of its benchmark section).  No published figure for the other GPUs here.
#: * ``elementwise``: BabelStream's Add kernel (two arrays read, one written: a residual add's pattern)
#:   over the datasheet HBM bandwidth, on Azure's VMs (Azure/AI-benchmarking-guide at 8fd0c6e,
#:   ``Azure_Results/ND_A100_v4_results.md`` line 39, A100-SXM4-80GB: 1.70 of 2.039 TB/s;
#:   ``ND_H100_v5_results.md`` line 40, H100 80GB HBM3: 2.97 of 3.35 TB/s).
GPU_EFFICIENCY: dict[str, dict[str, float]] = {
    "A100": {"gemm": 271.2 / 312, "elementwise": 1.70 / 2.039},
    "H100": {"gemm": 794.5 / 989, "attn_fwd": 646 / 989, "attn_bwd": 559 / 989, "elementwise": 2.97 / 3.35},
    "B200": {"gemm": 1745.0 / 2250},
    "GB200": {"gemm": 1822.0 / 2500},
}


def assemble(name: str, node_kinds: Sequence[str], gpus: Sequence[int],
             links: Iterable[tuple[int, int, float, float, str, int]], facts: TopologyFacts) -> Topology:
    """Build a small :class:`Topology` with a :class:`TableRouter` from Python lists.

    ``links`` yields ``(src, dst, bw_Bps, latency_s, kind, width)``.  The topology's facts are
    ``facts`` with the bisection and diameter of :func:`small_graph_stats`.
    """
    rows = list(links)
    kinds = np.array([node_kind_id(k) for k in node_kinds], dtype=np.int8)
    gpu_arr = np.asarray(gpus, dtype=np.int32)
    src = np.array([r[0] for r in rows], dtype=np.int32)
    dst = np.array([r[1] for r in rows], dtype=np.int32)
    router = TableRouter(len(kinds), src, dst, gpu_arr)
    topo = Topology(
        name=name, node_kind=kinds, gpus=gpu_arr, link_src=src, link_dst=dst,
        link_bw=np.array([r[2] for r in rows], dtype=np.float64),
        link_lat=np.array([r[3] for r in rows], dtype=np.float64),
        link_kind=np.array([link_kind_id(r[4]) for r in rows], dtype=np.int8),
        link_width=np.array([r[5] for r in rows], dtype=np.int16),
        router=router,
    )
    return replace(topo, facts=replace(facts, **small_graph_stats(topo)))


def small_graph_stats(topo: Topology) -> dict:
    """Bisection bandwidth and diameter of a small topology, by exhaustive search.

    The bisection is the smallest one-direction capacity from side A to side B
    over all balanced splits of the GPUs (non-GPU nodes placed on whichever side
    gives the smaller cut).  Exhaustive up to 16 GPUs and 4 switches; a single
    non-blocking switch (a star) uses the closed form ``n/2`` GPU links.
    """
    g = topo.n_gpus
    src = topo.gpus.tolist()
    idx = np.arange(g)
    indptr, _ = topo.routes(np.repeat(idx, g), np.tile(idx, g))
    diameter = int(np.diff(indptr).max()) if g > 1 else 0
    others = [n for n in range(topo.n_nodes) if n not in set(src)]
    if g <= 1:
        return {"bisection_Bps": 0.0, "diameter_hops": diameter}
    if g > 16 or len(others) > 4:
        if len(others) == 1:  # star around one switch
            up = topo.link_bw[topo.link_dst == others[0]]
            return {"bisection_Bps": float(np.sort(up)[: g // 2].sum()), "diameter_hops": diameter}
        return {"bisection_Bps": float("nan"), "diameter_hops": diameter}
    side = np.zeros(topo.n_nodes, dtype=bool)
    best = np.inf
    for group in itertools.combinations(range(1, g), g // 2 - 1 if g % 2 == 0 else g // 2):
        side[:] = False
        side[[src[0]] + [src[i] for i in group]] = True
        for place in itertools.product((False, True), repeat=len(others)):
            side[others] = place
            cut = topo.link_bw[side[topo.link_src] & ~side[topo.link_dst]].sum()
            best = min(best, cut)
    return {"bisection_Bps": float(best), "diameter_hops": diameter}


def nvlink_mesh(n_gpus: int, pairs: Iterable[tuple[int, int, int]], *, link_bw: float,
                latency: float = NVLINK_HOP_LATENCY_S, name: str = "nvlink-mesh",
                gpu: str | None = None) -> Topology:
    """GPUs wired point to point by NVLink, without a switch.

    Parameters
    ----------
    n_gpus
        Number of GPUs.
    pairs
        ``(a, b, count)``: GPUs ``a`` and ``b`` share ``count`` NVLinks (both directions).
    link_bw
        Bytes/s per NVLink per direction.
    latency
        Seconds per hop.  Pairs without a direct link route through other GPUs
        (shortest paths; NCCL forwards through intermediate GPUs the same way).

    >>> t = nvlink_mesh(2, [(0, 1, 2)], link_bw=25e9)
    >>> t.link_bw.tolist(), t.link_width.tolist()
    ([50000000000.0, 50000000000.0], [2, 2])
    """
    seen: dict[tuple[int, int], int] = {}
    for a, b, count in pairs:
        if not (0 <= a < n_gpus and 0 <= b < n_gpus) or a == b:
            raise ValueError(f"bad NVLink pair ({a}, {b}) for {n_gpus} GPUs")
        if count < 1:
            raise ValueError(f"NVLink pair ({a}, {b}) needs count >= 1, got {count}")
        key = (min(a, b), max(a, b))
        seen[key] = seen.get(key, 0) + int(count)
    links = []
    for (a, b), count in sorted(seen.items()):
        links.append((a, b, count * link_bw, latency, "nvlink", count))
        links.append((b, a, count * link_bw, latency, "nvlink", count))
    per_gpu, nvlinks = np.zeros(n_gpus), np.zeros(n_gpus, dtype=np.int64)  # bytes/s and NVLinks of each GPU
    for (a, b), count in seen.items():
        per_gpu[a] += count * link_bw
        per_gpu[b] += count * link_bw
        nvlinks[[a, b]] += count
    facts = TopologyFacts(gpus_per_node=n_gpus, scaleup="nvlink_mesh", nvls=False,
                          scaleup_Bps_per_gpu=float(per_gpu.min()) if n_gpus else 0.0,
                          nvlink_links_per_gpu=int(nvlinks.min()) if n_gpus else 0,
                          nvlink_link_Bps=float(link_bw), **_gpu_facts(gpu))
    return assemble(name, ["gpu"] * n_gpus, range(n_gpus), links, facts)


def nvswitch_domain(n_gpus: int, *, links_per_gpu: int, link_bw: float,
                    latency: float = NVLINK_HOP_LATENCY_S, nvls: bool = False,
                    name: str = "nvswitch", gpu: str | None = None,
                    switch_chips: int | None = None) -> Topology:
    """``n_gpus`` GPUs, each with ``links_per_gpu`` NVLinks into one switch plane.

    The NVSwitch chips of a domain are modelled as one non-blocking switch
    node (NCCL stripes every transfer over all of a GPU's links), so each GPU
    has one up-link and one down-link of ``links_per_gpu * link_bw``.
    Link ids: GPU *i* -> switch is *i*; switch -> GPU *i* is ``n_gpus + i``.

    Parameters
    ----------
    nvls
        Whether the switch supports in-network reduction (NVLink SHARP).
    switch_chips
        Physical NVSwitch chip count (recorded for reports only).
    """
    sw = n_gpus
    bw = links_per_gpu * link_bw
    links = [(i, sw, bw, latency, "nvlink", links_per_gpu) for i in range(n_gpus)]
    links += [(sw, i, bw, latency, "nvlink", links_per_gpu) for i in range(n_gpus)]
    facts = TopologyFacts(gpus_per_node=n_gpus, scaleup="nvswitch", nvls=bool(nvls),
                          scaleup_Bps_per_gpu=float(bw), nvlink_links_per_gpu=links_per_gpu,
                          nvlink_link_Bps=float(link_bw), switch_chips=switch_chips, **_gpu_facts(gpu))
    return assemble(name, ["gpu"] * n_gpus + ["nvswitch"], range(n_gpus), links, facts)


def _gpu_facts(gpu: str | None) -> dict:
    """The :class:`TopologyFacts` fields of GPU model ``gpu`` (its roofline preset)."""
    if gpu is None:
        return {}
    preset = GPU_PRESETS.get(gpu)
    if preset is None:
        raise ValueError(f"unknown GPU model {gpu!r}; known: {', '.join(GPU_PRESETS)}")
    return {"gpu_model": gpu, **preset, "compute_efficiency": GPU_EFFICIENCY.get(gpu, {}), "gpu_sms": GPU_SMS.get(gpu)}


# ------------------------------------------------------------------ presets
#: DGX-1 (V100) hybrid cube-mesh: a cube whose 12 edges are NVLinks (some
#: doubled) plus the diagonals of two faces; 6 NVLink2 links per GPU.
#: Source: NVIDIA DGX-1 system architecture whitepaper; ``nvidia-smi topo -m``.
DGX1_PAIRS: tuple[tuple[int, int, int], ...] = (
    (0, 1, 1), (0, 2, 1), (0, 3, 2), (0, 4, 2),
    (1, 2, 2), (1, 3, 1), (1, 5, 2),
    (2, 3, 2), (2, 6, 1),
    (3, 7, 1),
    (4, 5, 1), (4, 6, 1), (4, 7, 2),
    (5, 6, 2), (5, 7, 1),
    (6, 7, 2),
)


def dgx1_v100() -> Topology:
    """DGX-1 with 8 V100: hybrid cube-mesh, NVLink2 at 25 GB/s per link per direction."""
    return nvlink_mesh(8, DGX1_PAIRS, link_bw=NVLINK_LINE_GBPS["V100"] * 1e9, name="dgx1-v100", gpu="V100")


def nvlink_box4(link_bw: float = 25e9, links_per_pair: int = 2) -> Topology:
    """Four GPUs fully connected by NVLink (e.g. a 4-GPU V100/A100 SXM board)."""
    pairs = [(a, b, links_per_pair) for a in range(4) for b in range(a + 1, 4)]
    return nvlink_mesh(4, pairs, link_bw=link_bw, name="nvlink-box4")


def hgx_a100(nvls: bool = False) -> Topology:
    """HGX/DGX A100: 8 GPUs x 12 NVLink3 (25 GB/s) into 6 NVSwitch2; no NVLS."""
    return nvswitch_domain(8, links_per_gpu=12, link_bw=NVLINK_LINE_GBPS["A100"] * 1e9, nvls=nvls, name="hgx-a100",
                           gpu="A100", switch_chips=6)


def hgx_h100(nvls: bool = True) -> Topology:
    """HGX/DGX H100: 8 GPUs x 18 NVLink4 (25 GB/s) into 4 NVSwitch3 with NVLink SHARP."""
    return nvswitch_domain(8, links_per_gpu=18, link_bw=NVLINK_LINE_GBPS["H100"] * 1e9, nvls=nvls, name="hgx-h100",
                           gpu="H100", switch_chips=4)


def gb200_nvl72(nvls: bool = True) -> Topology:
    """GB200 NVL72: 72 GPUs x 18 NVLink5 (50 GB/s) into 18 NVSwitch chips (9 trays)."""
    return nvswitch_domain(72, links_per_gpu=18, link_bw=NVLINK_LINE_GBPS["GB200"] * 1e9, nvls=nvls,
                           name="gb200-nvl72",
                           gpu="GB200", switch_chips=18)


SCALEUP_PRESETS = {
    "dgx1-v100": dgx1_v100,
    "nvlink-box4": nvlink_box4,
    "hgx-a100": hgx_a100,
    "hgx-h100": hgx_h100,
    "gb200-nvl72": gb200_nvl72,
}
