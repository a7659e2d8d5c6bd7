"""NCCL's cost model: algorithm/protocol selection, channels and protocol effects.

``--algo auto`` chooses like NCCL 2.30 does (``src/graph/tuning.cc``, ``src/enqueue.cc``;
reference §6): every enabled (algorithm, protocol) pair gets

    time_us = latency + nBytes / (1000 * algBw)

from NCCL's published base/hardware latencies and bandwidth rules, and the cheapest wins.
The chosen pair then *runs* on the simulated network; its protocol shapes the run
(:class:`Protocol`):

* **payload efficiency** — LL sends 8 B of flags per 8 B of data (wire ×2), LL128 8 B per
  120 B (×128/120), Simple none;
* **per-hop latency** — NCCL's latency for the pair, spread over the schedule's dependent
  steps (minus the physical latency the network already charges);
* **channels** — NCCL's channel count, reduced for small messages exactly as
  ``enqueue.cc`` does (``nBytes < nc·nThreads·threadThreshold``); every channel is one
  thread block whose throughput is capped (LL: ``llMaxBw`` shared by the channels; LL128:
  ``perChMaxRingLL128Bw``; Simple: ``perChMaxTreeBw``, NCCL's per-channel Simple limit).

Bandwidth itself comes from the topology (achievable link rates, see
:mod:`netsim.topology.spec`) and the network model, not from these tables.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from netsim.topology.model import Topology

PROTOCOLS = ("LL", "LL128", "Simple")
#: NCCL's algorithms we model, in NCCL's own order (ties go to the earlier one).
NCCL_ALGOS = ("tree", "ring", "nvls", "nvls_tree")

BASE_LATENCY_US = {"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4), "nvls": (0, 0, 0), "nvls_tree": (0, 0, 0)}
HW_LATENCY_US = {  # [hardware][algorithm] -> (LL, LL128, Simple) µs
    "nvlink": {"tree": (.6, 1.25, 4.0), "ring": (.6, 1.9, 3.4), "nvls": (0, 0, 25), "nvls_tree": (0, 0, 25)},
    "pcie": {"tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7), "nvls": (0, 0, 0), "nvls_tree": (0, 0, 0)},
    "net": {"tree": (5.0, 8.5, 14), "ring": (2.7, 4.0, 14.0), "nvls": (0, 0, 18), "nvls_tree": (0, 0, 20.9)},
}
_LL_MAX_BW = {"volta": (39, 39, 20.4), "ampere": (87.7, 22.5, 19), "hopper": (141, 45, 35),
              "blackwell": (282, 90, 70)}
_PER_CH_RING_LL128 = {"volta": 20, "ampere": 20, "hopper": 36.7, "blackwell": 40}
_PER_CH_TREE = {"volta": (24, 23.6, 17.8), "ampere": (24, 23.6, 17.8), "hopper": (38.7, 41.4, 36),
                "blackwell": (70, 42.8, 24)}
_PER_CH_NVLS_TREE = {"hopper": (57.7, 45.5), "blackwell": (96, 80)}
NVLS_EFFICIENCY = {"hopper": .85, "blackwell": .74}
_ARCH = {"V100": "volta", "A100": "ampere", "H100": "hopper", "H200": "hopper", "B200": "blackwell",
         "GB200": "blackwell"}
#: enqueue.cc: per-thread bytes before adding channels, and threads per channel.
_THREAD_THRESHOLD = {"LL": 8, "LL128": 8, "Simple": 64}
_MAX_THREADS = {"LL": 512, "LL128": 640, "Simple": 512}
_NET_OVERHEAD_US = 1.0  # Intel hosts
#: Pipeline chunk per channel (NCCL step size: 4 MiB Simple / 8 steps; LL 512 KiB / 8; LL128 4.69 MiB / 8).
CHUNK_BYTES = {"LL": 64 << 10, "LL128": 600 << 10, "Simple": 512 << 10}
WIRE = {"LL": 2.0, "LL128": 128 / 120, "Simple": 1.0}


@dataclass(frozen=True)
class CommInfo:
    """What NCCL's tuner knows about a communicator (bandwidths in GB/s per GPU)."""

    nranks: int
    nnodes: int
    ppn: int
    arch: str
    bw_intra: float  # achievable scale-up egress per GPU
    bw_inter: float  # achievable scale-out egress per GPU (0 on one node)
    nvls: bool
    channels: int
    local_size: int  # GPUs per node in the topology (for schedule shapes)

    @classmethod
    def from_topology(cls, topo: Topology, ranks: np.ndarray, channels: int | None = None) -> "CommInfo":
        ranks = np.asarray(ranks, dtype=np.int64)
        g = int(topo.meta.get("gpus_per_node") or topo.n_gpus)
        node = ranks // g
        nodes, counts = np.unique(node, return_counts=True)
        ppn = int(counts.max())
        eff = topo.meta.get("link_efficiency", {})
        up = float(topo.meta.get("scaleup_Bps_per_gpu") or _gpu_egress(topo, int(ranks[0])))
        bw_intra = up * eff.get("nvlink", 1.0) / 1e9
        nic = float(topo.meta.get("scaleout_Bps_per_gpu") or 0.0) * eff.get("ib", 1.0) / 1e9
        nvls = bool(topo.meta.get("nvls")) and ppn > 4  # NVLink SHARP gains nothing at <= 4 GPUs
        if channels is None:  # NCCL: 2 channels per NIC across nodes; 16 on NVSwitch nodes
            channels = 16 if nodes.size == 1 else max(2, min(32, 2 * ppn))
        arch = _ARCH.get(str(topo.meta.get("gpu_model")), "hopper")
        return cls(int(ranks.size), int(nodes.size), ppn, arch, bw_intra, nic, nvls, int(channels), g)


def _gpu_egress(topo: Topology, rank: int) -> float:
    node = topo.gpus[rank]
    return float(topo.link_bw[topo.link_src == node].sum())


@dataclass(frozen=True)
class Choice:
    """One (algorithm, protocol) with NCCL's predicted time and the run parameters."""

    algorithm: str
    protocol: str
    time_us: float  # NCCL's model
    latency_us: float  # the model's latency part (base + hops)
    base_us: float  # the launch part of it
    bus_GBps: float  # the model's bus bandwidth
    channels: int  # after NCCL's small-message reduction
    channel_cap_GBps: float  # throughput of one channel (thread block)

    @property
    def label(self) -> str:
        return f"{self.algorithm}/{self.protocol}"


def _nsteps(op: str, n: int) -> int:
    return 2 * (n - 1) if op == "all_reduce" else n - 1 if op in ("all_gather", "reduce_scatter") else n


def _enabled(op: str, algo: str, info: CommInfo) -> bool:
    if op in ("broadcast", "reduce"):
        return algo == "ring"
    if op in ("all_gather", "reduce_scatter"):
        return algo == "ring" or (algo == "nvls" and info.nvls and info.nnodes == 1)
    if op != "all_reduce":
        return False
    if algo == "nvls":
        return info.nvls and info.nnodes == 1
    if algo == "nvls_tree":
        return info.nvls and info.nnodes > 1
    return True


def candidates(op: str, nbytes: float, info: CommInfo) -> list[Choice]:
    """Every enabled (algorithm, protocol) pair with NCCL's predicted time, cheapest first."""
    out = []
    n, nn, ppn, arch = info.nranks, info.nnodes, info.ppn, info.arch
    nch = info.channels
    idx = 0 if nn == 1 else 1 if nn == 2 else 2
    bw_node = info.bw_intra if nn == 1 else min(info.bw_intra, info.bw_inter * ppn)
    nsteps = _nsteps(op, n)
    for algo in NCCL_ALGOS:
        if not _enabled(op, algo, info):
            continue
        for p, proto in enumerate(PROTOCOLS):
            if algo in ("nvls", "nvls_tree") and proto != "Simple":
                continue
            bus = bw_node
            if algo in ("nvls", "nvls_tree"):
                intra = info.bw_intra * NVLS_EFFICIENCY.get(arch, .85) * (nch - 1) / nch
                intra *= 2.0 if op == "all_reduce" else (ppn - 1) / ppn
                inter = info.bw_inter * ppn * (2 if nn <= 2 and algo == "nvls_tree" else 1) if nn > 1 else math.inf
                cap = _PER_CH_NVLS_TREE.get(arch, (57.7, 45.5))[0 if nn <= 2 else 1] * nch \
                    if algo == "nvls_tree" else math.inf
                bus = min(intra, inter, cap)
            if algo == "ring" and proto == "LL":
                bus = min(_LL_MAX_BW[arch][idx], bus * .5)
            if algo == "ring" and proto == "LL128":
                bus = min(bus * .92, nch * _PER_CH_RING_LL128[arch])
            if algo == "tree" and op == "all_reduce":
                bus = min(bus * .92, nch * _PER_CH_TREE[arch][idx])
            if algo == "tree" and proto == "LL":
                bus = min(bus / 3.8, _LL_MAX_BW[arch][idx])
            if algo == "tree" and proto == "LL128":
                bus = min(bus * (7 / 9 if nn == 1 else 120 / 128), nch * _PER_CH_TREE[arch][idx])
            if algo == "tree":
                bus *= .85  # NCCL's plain TREE pattern factor
            alg_bw = bus * (n / nsteps if algo != "tree" else .5)
            base = BASE_LATENCY_US[algo][p]
            intra_lat = HW_LATENCY_US["nvlink"][algo][p]
            inter_lat = HW_LATENCY_US["net"]["tree" if ppn == 1 else algo][p]
            lat = base
            if algo == "ring":
                if op in ("broadcast", "reduce"):
                    lat += nsteps * (HW_LATENCY_US["nvlink"]["tree"][p] if proto == "Simple" else intra_lat)
                else:
                    overhead = _NET_OVERHEAD_US * (3 if proto == "Simple" else 1) if nn > 1 else 0.0
                    ilat = max(intra_lat, overhead)
                    n_inter = 0 if nn == 1 else (2 * (nn - 1) if op == "all_reduce" else nn - 1)
                    lat += (nsteps - n_inter) * ilat + n_inter * inter_lat
                    if op == "all_reduce" and nn > 1 and proto == "Simple":  # NCCL's plateau factor
                        lat *= 1.4 if nbytes / (nch * n) >= 64 else 1.9
            elif algo == "tree":
                lat += 2 * ((ppn - 1) * intra_lat + math.log2(nn) * inter_lat) if nn > 1 else 2 * (ppn - 1) * intra_lat
            elif algo == "nvls":
                lat += intra_lat + (inter_lat if nn > 1 else 0)
            else:
                lat += intra_lat + 2 * math.log2(nn) * inter_lat
            time = lat + nbytes / (1000 * alg_bw) if alg_bw > 0 else math.inf
            nc = _channels(nbytes, algo, proto, n, nch)
            out.append(Choice(algo, proto, time, lat, base, bus, nc, _channel_cap(algo, proto, arch, idx, nch)))
    return sorted(out, key=lambda c: c.time_us)


def _channels(nbytes: float, algo: str, proto: str, n: int, nch: int) -> int:
    """enqueue.cc: drop channels while nBytes < nc * nThreads * threadThreshold."""
    if algo in ("nvls", "nvls_tree"):
        return nch
    thr = _THREAD_THRESHOLD[proto] * (n if algo == "ring" and proto == "LL" else 1)
    nc = nch
    while nc >= 2 and nbytes < nc * _MAX_THREADS[proto] * thr:
        nc -= 1
    return nc


def _channel_cap(algo: str, proto: str, arch: str, idx: int, nch: int) -> float:
    """GB/s one channel (one thread block) can move."""
    if proto == "LL":
        return _LL_MAX_BW[arch][idx] / nch
    if proto == "LL128":
        return _PER_CH_RING_LL128[arch]
    if algo in ("nvls", "nvls_tree"):
        return math.inf
    return _PER_CH_TREE[arch][idx]


def choose(op: str, nbytes: float, info: CommInfo, algorithms=None) -> Choice:
    """NCCL's pick among ``algorithms`` (default: every NCCL algorithm enabled for ``op``)."""
    cands = [c for c in candidates(op, nbytes, info) if algorithms is None or c.algorithm in algorithms]
    if not cands:
        raise ValueError(f"no NCCL algorithm is enabled for {op} here")
    return cands[0]


def protocol_for(algorithm: str, op: str, nbytes: float, info: CommInfo) -> Choice:
    """The best protocol for a fixed algorithm (NCCL picks protocols within an algorithm too).

    Algorithms NCCL does not have (halving-doubling, hierarchical, direct...) run with the
    ring's protocol parameters.
    """
    algo = algorithm if algorithm in NCCL_ALGOS else "ring"
    op_ = op if op in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce") else "all_reduce"
    cands = [c for c in candidates(op_, nbytes, info) if c.algorithm == algo] \
        or [c for c in candidates("all_reduce", nbytes, info) if c.algorithm == algo]
    if not cands:  # e.g. nvls forced where the switch cannot reduce: keep Simple's numbers of the ring
        cands = [c for c in candidates("all_reduce", nbytes, info) if c.algorithm == "ring"]
    return cands[0]
