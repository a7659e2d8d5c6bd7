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
* **channels** — NCCL's channel count (:func:`ring_channels`, the steps of NCCL's graph
  search; NVLS: ``nvlsChannels``), reduced for small messages exactly as ``enqueue.cc`` does
  (``nBytes < nc·nThreads·threadThreshold``); every channel is one thread block whose
  throughput is capped where NCCL's model caps it (LL: ``llMaxBw`` shared by the channels;
  ring LL128: ``perChMaxRingLL128Bw``; tree: ``perChMaxTreeBw``, and ``perChMaxTreeLL128Bw``
  for LL128); ring/Simple and NVLS have no per-channel cap (the links bound them).

Constants are NCCL 2.30.7's (tag v2.30.7-1), each with its file and line below.

Bandwidth itself comes from the topology (achievable link rates, see
:mod:`netsim.topology.spec`) and the network model, not from these tables.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from netsim.collectives.nvlstune import (  # noqa: F401  (re-exported: NCCL's NVLS rules at scale)
    MAX_NVLS_ARITY, NVLS_CHANNELS, NVLS_CHUNK, NVLS_TREE_MAX_PIECES, PER_CH_NVLS_TREE, nvls_chunk, nvls_heads,
    nvls_pieces, nvls_tree_chunk, nvls_tree_head_rate, nvls_tree_pieces, nvls_tuning)
from netsim.ncclfacts import DEFAULT_CPU, MAXCHANNELS, SIMPLE_CHUNK, arch_of, nvlink_gbps
from netsim.topology.model import Topology

PROTOCOLS = ("LL", "LL128", "Simple")
#: NCCL's algorithms we model, in NCCL's own order (ties go to the earlier one).
NCCL_ALGOS = ("tree", "ring", "nvls", "nvls_tree")

#: Every constant below is NCCL's, read from tag v2.30.7-1 (commit 73cf1122, :data:`NCCL_VERSION`);
#: "tuning.cc:N" is ``src/graph/tuning.cc`` line N of that tag (likewise search.cc, connect.cc,
#: enqueue.cc, nvls.cc, topo.h, device.h, comm.h).  Rows are (1 node, 2 nodes, >= 3 nodes) where NCCL
#: indexes them by ``index2 = nNodes <= 2 ? nNodes - 1 : 2`` (tuning.cc:267).  The facts other layers
#: read too (GPU architectures, host CPUs, MAXCHANNELS, NVLink rates) are in :mod:`netsim.ncclfacts`.

BASE_LATENCY_US = {"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4), "nvls": (0, 0, 0),
             "nvls_tree": (0, 0, 0)}  # baseLatencies, tuning.cc:149-155
HW_LATENCY_US = {  # [hardware][algorithm] -> (LL, LL128, Simple) µs; hwLatencies, tuning.cc:156-176
    "nvlink": {"tree": (.6, 1.25, 4.0), "ring": (.6, 1.9, 3.4), "nvls": (0, 0, 25), "nvls_tree": (0, 0, 25)},  # :158-162
    "pcie": {"tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7), "nvls": (0, 0, 0), "nvls_tree": (0, 0, 0)},  # :164-168
    "net": {"tree": (5.0, 8.5, 14), "ring": (2.7, 4.0, 14.0), "nvls": (0, 0, 18), "nvls_tree": (0, 0, 20.9)},  # :170-174
}
#: llMaxBws, tuning.cc:177-183.  NCCL's rows are (Volta-N1/Intel-N2/Intel-N4), (Ampere-N1/AMD-N2/
#: AMD-N4), Hopper, Blackwell: on one node the GPU's row, across nodes the *CPU's* row (Intel: 0,
#: AMD or mixed: 1; tuning.cc:268-271), see :func:`_ll_max_bw`.
_LL_MAX_BW = {"volta": (39, 39, 20.4), "ampere": (87.7, 22.5, 19), "hopper": (141, 45, 35),
              "blackwell": (282, 90, 70)}
_PER_CH_RING_LL128 = {"volta": (20, 20, 20), "ampere": (20, 20, 20), "hopper": (36.7, 36.7, 36.7),
                      "blackwell": (40, 40, 40)}  # perChMaxRingLL128Bws, tuning.cc:184-190
_PER_CH_TREE_LL128 = {"volta": (20, 20, 20), "ampere": (20, 20, 20), "hopper": (36.7, 36.7, 29.0),
                      "blackwell": (55.6, 31.67, 20.0)}  # perChMaxTreeLL128Bws, tuning.cc:191-197
_PER_CH_TREE = {"volta": (26.5, 18.5, 10.0), "ampere": (24, 23.6, 17.8), "hopper": (38.7, 41.4, 36),
                "blackwell": (70, 42.8, 24)}  # perChMaxTreeBws, tuning.cc:198-204
#: nvlsEfficiency, tuning.cc:139-144 (0 on Volta/Ampere: no NVLink SHARP there).
NVLS_EFFICIENCY = {"volta": 0.0, "ampere": 0.0, "hopper": .85, "blackwell": .74}
#: treeCorrectionFactor[proto][log2(nBytes/64)], tuning.cc:623-627 (LL, LL128, Simple): NCCL
#: multiplies the tree all-reduce bandwidth by it when *estimating* time (tuning.cc:640-642; NVLS
#: tree too on Blackwell with x86 hosts, :643-646).  It corrects NCCL's selection model, not the
#: hardware, so it enters ``time_us`` (what is chosen) and never the simulated run.
_TREE_CORRECTION = (
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9),
)
#: getNetOverhead, tuning.cc:228-233: per-step network post overhead (µs) of a multi-node ring.
_NET_OVERHEAD_US = {"intel": 1.0, "amd": 2.0, "arm": 1.0, "mixed": 1.0}
#: enqueue.cc:2070-2096: per-thread bytes before adding channels (comm.h:49-51; ring LL x nRanks,
#: tuning.cc:593) and threads per channel (device.h:95-114; tuning.cc:245-256).
_THREAD_THRESHOLD = {"LL": 8, "LL128": 8, "Simple": 64}
_MAX_THREADS = {"LL": 512, "LL128": 640, "Simple": 512}
#: Ring graph search speeds (GB/s per channel), search.cc:1051-1065: (intra-node, inter-node).
_SPEEDS = {
    "volta": ((40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0),
              (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2)),
    "hopper": ((60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0),
               (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2)),
    "blackwell": ((90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0),
                  (96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0)),
}
_SPEEDS["ampere"] = _SPEEDS["volta"]  # pre-SM90 arrays
#: Pipeline chunk per channel (NCCL step size: 4 MiB Simple / 8 steps; LL 512 KiB / 8; LL128 4.69 MiB / 8;
#: init.cc:810-813, device.h:26).
CHUNK_BYTES = {"LL": 64 << 10, "LL128": 600 << 10, "Simple": SIMPLE_CHUNK}
#: Wire bytes per payload byte: an LL line is 4 B data + 4 B flag, twice (device.h:75-86); an LL128
#: line is 128 B with one 8 B flag element (device.h:109-112).
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
    cpu: str = "intel"  # host CPU vendor (NCCL's multi-node llMaxBw row and net overhead)
    nvls_channels: int = 16  # NCCL's nvlsChannels (nvls.cc:155-157)
    nvlinks: int | None = None  # NVLinks per GPU, as the topology's builder wired them (None: not known)
    nvls_heads: int = 0  # NVLS heads per node across nodes (:func:`nvls_heads`; 0: min(ppn, 32))
    head_nic: float = 0.0  # achievable GB/s of one head's NIC (0: bw_inter)
    nvls_tree_chunk: int = 128 << 10  # min(nvlsChunkSize, nvlsTreeMaxChunkSize) (:func:`nvls_tuning`)

    @classmethod
    def from_topology(cls, topo: Topology, ranks: np.ndarray, channels: int | None = None) -> "CommInfo":
        ranks = np.asarray(ranks, dtype=np.int64)
        g = topo.gpus_per_node
        node = ranks // g
        nodes, counts = np.unique(node, return_counts=True)
        ppn = int(counts.max())
        eff = topo.facts.link_efficiency
        up = float(topo.facts.scaleup_Bps_per_gpu or _gpu_egress(topo, int(ranks[0])))
        bw_intra = up * eff.get("nvlink", 1.0) / 1e9
        nic_line = float(topo.facts.scaleout_Bps_per_gpu) / 1e9
        pcie = float(topo.facts.pcie_Bps_per_gpu) / 1e9
        if 0 < pcie < nic_line:  # a path's bandwidth is its narrowest link (NCCL src/graph/paths.cc)
            nic_line = pcie
        nic = nic_line * eff.get("ib", 1.0)
        model = str(topo.facts.gpu_model)
        arch = arch_of(model)
        # NVLS needs an NVSwitch that reduces, SM90+ (search.cc:1124) and 2+ GPUs (nvls.cc:262; the NVLS
        # graph needs 2 channels, tuning.cc:309); the cost model decides where it pays
        nvls = topo.facts.nvls and ppn >= 2 and NVLS_EFFICIENCY[arch] > 0
        links = topo.facts.nvlink_links_per_gpu
        if channels is None:  # NCCL's graph search sees its own rate per NVLink (topo.h), as it sees NICs' line rate
            nvl = links * nvlink_gbps(model) if links and bw_intra > 0 else bw_intra
            channels = ring_channels(arch, int(nodes.size), ppn, nvl, nic_line)
        cpu = str(topo.facts.cpu_vendor or DEFAULT_CPU.get(model, "intel"))
        port = float(topo.facts.nic_port_Bps or 0.0) / 1e9  # one NIC port: minNetBw; a head crosses on one
        near = topo.facts.nic_attach != "c2c"  # GPU-NIC path PIX/PXB, or P2C through the CPU (GB200)
        nvls_ch, tree_chunk = nvls_tuning(arch, int(nodes.size), ppn, port or nic_line, near)
        gpn = int(topo.facts.gpus_per_nic or 1)
        heads = nvls_heads(ppn, ppn // gpn if topo.facts.scaleout else 0)
        head_nic = min(port, pcie) if 0 < pcie else port
        return cls(int(ranks.size), int(nodes.size), ppn, arch, bw_intra, nic, nvls, int(channels), g, cpu, nvls_ch,
                   links, heads, head_nic * eff.get("ib", 1.0), tree_chunk)


def ring_channels(arch: str, nnodes: int, ppn: int, bw_intra: float, nic_line: float) -> int:
    """NCCL's ring/tree channel count (``comm->nChannels``), from the steps of its graph search.

    * ``ncclTopoCompute`` (search.cc:1074) searches rings at the first per-channel speed of the
      arch's array (search.cc:1051-1065) that the GPU can carry (search.cc:1170-1174); on one node
      we take as many channels as fit in the GPU's NVLink bandwidth (``floor(bw / speed)``, at most
      ``MAXCHANNELS / 2``, init.cc:1177); across nodes every channel leaves through a NIC, one
      channel per NIC (one NIC per GPU, as every shipped topology has);
    * ``ncclTopoDupChannels`` (search.cc:1036-1049) doubles them when the speed is >= 25 GB/s,
      except on SM90+ below 50 GB/s with more than 4 channels;
    * ``ncclTopoPostset`` doubles them again (connect.cc:460), and once more on SM90+ across
      nodes when fewer than 16 and the speed is > 45 GB/s (connect.cc:481-483).

    What this leaves out is the search's timeouts and non-NVSwitch wiring (a ring on an NVLink
    mesh may find fewer channels than the GPU's bandwidth allows); ``--channels`` overrides.
    Results: 8xH100 24, 8xA100 24, 8xB200 32, H100 nodes with one NDR NIC per GPU 16.
    """
    intra, inter = _SPEEDS.get(arch, _SPEEDS["hopper"])
    sm90 = arch in ("hopper", "blackwell")
    if nnodes == 1:
        speed = next((s for s in intra if s <= bw_intra), intra[-1])
        nc = int(max(1, min(MAXCHANNELS // 2, bw_intra // speed)))
    else:
        speed = next((s for s in inter if s <= min(nic_line, bw_intra) or s == inter[-1]), inter[-1])
        nc = max(1, min(ppn, MAXCHANNELS // 2))
    if speed >= 25.0 and not (sm90 and speed < 50.0 and nc > 4):
        nc, speed = min(2 * nc, MAXCHANNELS // 2), speed / 2
    nc = min(MAXCHANNELS, 2 * nc)
    if sm90 and nnodes > 1 and speed > 45.0 and nc < 16:
        nc *= 2
    return int(nc)


def _log2i(n: int) -> int:
    """NCCL's ``log2i``: ``log2Down`` (utils.h:56-57, bitops.h:292), floor(log2 n)."""
    return int(n).bit_length() - 1


def _ll_max_bw(info: "CommInfo", idx: int) -> float:
    """llMaxBw: the GPU's row on one node, the CPU's row across nodes (tuning.cc:268-272)."""
    if info.nnodes == 1:
        return _LL_MAX_BW[info.arch][idx]
    row = "ampere" if info.cpu in ("amd", "mixed") else "volta"  # rows 1 (AMD/mixed) and 0 (Intel, else)
    return _LL_MAX_BW[row][idx]


def _tree_correction(nbytes: float, p: int, limit: int = 23) -> float:
    """treeCorrectionFactor for nBytes (tuning.cc:638-646): index log2(nBytes >> 6)."""
    k = int(nbytes) >> 6
    log_size = k.bit_length() - 1 if k > 0 else -1
    return _TREE_CORRECTION[p][log_size] if 0 <= log_size < limit else 1.0


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
    """Every enabled (algorithm, protocol) pair with NCCL's predicted time, cheapest first.

    ncclTopoTuneModel (tuning.cc:243-617) and ncclTopoGetAlgoTime (tuning.cc:630-655)."""
    out = []
    n, nn, ppn, arch = info.nranks, info.nnodes, info.ppn, info.arch
    nch = info.channels
    idx = 0 if nn == 1 else 1 if nn == 2 else 2
    ll_max = _ll_max_bw(info, idx)
    bw_node = info.bw_intra if nn == 1 else min(info.bw_intra, info.bw_inter * ppn)
    nsteps = _nsteps(op, n)
    for algo in NCCL_ALGOS:
        if not _enabled(op, algo, info):
            continue
        for p, proto in enumerate(PROTOCOLS):
            if algo in ("nvls", "nvls_tree") and proto != "Simple":
                continue
            bus = bw_node
            if algo in ("nvls", "nvls_tree"):  # tuning.cc:307-322
                # busBw = nChannels (the NVLS graph's: one per head, :func:`nvls_heads`) x min(intra, inter, cap)
                heads = (info.nvls_heads or min(MAX_NVLS_ARITY, ppn)) if nn > 1 else min(MAX_NVLS_ARITY, ppn)
                intra = info.bw_intra * NVLS_EFFICIENCY[arch] * (heads - 1) / heads
                intra *= 2.0 if op == "all_reduce" else (ppn - 1) / ppn
                per_nic = info.head_nic or info.bw_inter
                inter = per_nic * heads * (2 if nn <= 2 and algo == "nvls_tree" else 1) if nn > 1 else math.inf
                cap = PER_CH_NVLS_TREE[arch][idx] * heads if algo == "nvls_tree" else math.inf
                bus = min(intra, inter, cap)
            if algo == "ring" and proto == "LL":  # tuning.cc:327
                bus = min(ll_max, bus * .5)
            if algo == "ring" and proto == "LL128":  # tuning.cc:328-329
                bus = min(bus * .92, nch * _PER_CH_RING_LL128[arch][idx])
            if algo == "tree" and op == "all_reduce":  # tuning.cc:330-331
                bus = min(bus * .92, nch * _PER_CH_TREE[arch][idx])
            if algo == "tree" and proto == "LL":  # tuning.cc:332
                bus = min(bus / 3.8, ll_max)
            if algo == "tree" and proto == "LL128":  # tuning.cc:333-335
                bus = min(bus * (7 / 9 if nn == 1 else 120 / 128), nch * _PER_CH_TREE_LL128[arch][idx])
            if algo == "tree":
                bus *= .85  # tuning.cc:336: NCCL's plain TREE pattern factor
            alg_bw = bus * (n / nsteps if algo != "tree" else .5)  # tuning.cc:376-382
            base = BASE_LATENCY_US[algo][p]
            intra_lat = HW_LATENCY_US["nvlink"][algo][p]
            inter_lat = HW_LATENCY_US["net"]["tree" if ppn == 1 else algo][p]
            lat = base
            if algo == "ring":
                if op in ("broadcast", "reduce"):
                    lat += nsteps * (HW_LATENCY_US["nvlink"]["tree"][p] if proto == "Simple" else intra_lat)
                else:  # tuning.cc:403-412
                    overhead = _NET_OVERHEAD_US.get(info.cpu, 1.0) * (3 if proto == "Simple" else 1) if nn > 1 else 0.0
                    ilat = max(intra_lat, overhead)
                    n_inter = 0 if nn == 1 else (2 * (nn - 1) if op == "all_reduce" else nn - 1)
                    lat += (nsteps - n_inter) * ilat + n_inter * inter_lat
            elif algo == "tree":
                # log2i is NCCL's floor(log2) (utils.h:56-57): tuning.cc:416-418
                lat += 2 * ((ppn - 1) * intra_lat + _log2i(nn) * inter_lat) if nn > 1 else 2 * (ppn - 1) * intra_lat
            elif algo == "nvls":
                lat += intra_lat + (inter_lat if nn > 1 else 0)
            else:
                lat += intra_lat + 2 * _log2i(nn) * inter_lat  # tuning.cc:427-428
            # ncclTopoGetAlgoTime: plateau effect of ring (tuning.cc:647-650), only when
            # nBytes / (nChannels * nRanks) >= 64, x1.9 before SM80 and x1.4 from SM80 on
            if algo == "ring" and proto == "Simple" and nn > 1 and op == "all_reduce" and nbytes / (nch * n) >= 64:
                lat *= 1.9 if arch == "volta" else 1.4
            model_bw = alg_bw  # tree correction: selection model only (tuning.cc:640-646)
            if algo == "tree" and op == "all_reduce":
                model_bw *= _tree_correction(nbytes, p)
            if algo == "nvls_tree" and op == "all_reduce" and arch == "blackwell" and info.cpu in ("intel", "amd"):
                model_bw *= _tree_correction(nbytes, p, limit=24)
            time = lat + nbytes / (1000 * model_bw) if model_bw > 0 else math.inf
            nc = _channels(nbytes, algo, proto, n, nch, info.nvls_channels, nn)
            out.append(Choice(algo, proto, time, lat, base, bus, nc, _channel_cap(algo, proto, arch, idx, nc, ll_max)))
    return sorted(out, key=lambda c: c.time_us)


def _channels(nbytes: float, algo: str, proto: str, n: int, nch: int, nvls_channels: int = 16,
              nnodes: int = 1) -> int:
    """enqueue.cc:2070-2096: NVLS runs nvlsChannels (min with nChannels for multi-node NVLS);
    ring and tree drop channels while nBytes < nc * nThreads * threadThreshold."""
    if algo in ("nvls", "nvls_tree"):
        return min(nvls_channels, nch) if algo == "nvls" and nnodes > 1 else nvls_channels
    thr = _THREAD_THRESHOLD[proto] * (n if algo == "ring" and proto == "LL" else 1)
    nc = nch
    while nc >= 2 and nbytes < nc * _MAX_THREADS[proto] * thr:
        nc -= 1
    return nc


def _channel_cap(algo: str, proto: str, arch: str, idx: int, nc: int, ll_max: float | None = None) -> float:
    """GB/s one of the ``nc`` running channels (thread blocks) can move: NCCL's per-channel limits.

    LL: ``llMaxBw`` is the bandwidth of the whole operation (tuning.cc:327, 332), whatever the
    channel count: ``enqueue.cc`` drops channels for small messages (enqueue.cc:2085-2094) after
    the time was estimated with the full ``llMaxBw`` (enqueue.cc:2054-2060, ``ncclTopoGetAlgoTime``
    tuning.cc:630-655 has no channel term), so the ``nc`` channels that run share ``llMaxBw``.
    Ring LL128 ``perChMaxRingLL128Bw`` (:329); tree all-reduce ``perChMaxTreeBw`` for every
    protocol (:331) and, for LL128, also ``perChMaxTreeLL128Bw`` (:335).  Ring/Simple and NVLS
    have none: the links bound them."""
    ll = _LL_MAX_BW[arch][idx] if ll_max is None else ll_max
    if proto == "LL":
        cap = ll / max(nc, 1)
        return min(cap, _PER_CH_TREE[arch][idx]) if algo == "tree" else cap
    if algo == "tree":
        cap = _PER_CH_TREE[arch][idx]
        return min(cap, _PER_CH_TREE_LL128[arch][idx]) if proto == "LL128" else cap
    if proto == "LL128" and algo not in ("nvls", "nvls_tree"):
        return _PER_CH_RING_LL128[arch][idx]
    return math.inf


def nvls_tree_head_cap(info: "CommInfo") -> float:
    """GB/s one NVLS head's network stream may carry in an NVLS-tree all-reduce: NCCL caps the
    tree's bus bandwidth per NVLS-graph channel, i.e. per head, at ``perChMaxNVLSTreeBw``
    (tuning.cc:278, 313-319: ``busBw = nChannels x min(intraBw, interBw, perChMaxNVLSTreeBw)``)
    where the head's network term is ``interBw = bwInter x (2 on <= 2 nodes, else 1)``
    (tuning.cc:316).  The cap on the head's network rate is therefore ``perChMaxNVLSTreeBw / 2``
    on 2 nodes and ``perChMaxNVLSTreeBw`` from 3 nodes on (inf on one node: no NVLS tree there).

    >>> from dataclasses import replace
    >>> h = CommInfo(16, 2, 8, "hopper", 370.8, 48.0, True, 16, 8)
    >>> nvls_tree_head_cap(h), nvls_tree_head_cap(replace(h, nnodes=8, nranks=64))
    (28.85, 45.5)
    """
    if info.nnodes <= 1:
        return math.inf
    idx = 1 if info.nnodes == 2 else 2
    per_head = PER_CH_NVLS_TREE[info.arch][idx]
    return per_head / (2.0 if info.nnodes <= 2 else 1.0) if per_head > 0 else math.inf


def channel_cap(choice: "Choice", info: "CommInfo", nc: int) -> float:
    """:func:`_channel_cap` of ``choice`` when ``nc`` channels run (``--channels`` may differ
    from NCCL's reduced count)."""
    idx = 0 if info.nnodes == 1 else 1 if info.nnodes == 2 else 2
    return _channel_cap(choice.algorithm, choice.protocol, info.arch, idx, nc, _ll_max_bw(info, idx))


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
