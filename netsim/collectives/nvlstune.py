"""NCCL's NVLS and NVLS-tree rules at scale: heads, channels and chunks per node count, pipeline pieces
and the per-head cap (issue 33).  Split from :mod:`netsim.collectives.nccl`, which re-exports every
name here; constants are NCCL 2.30.7's (tag v2.30.7-1, commit 73cf1122), "nvls.cc:N" is
``src/transport/nvls.cc`` line N of that tag (likewise tuning.cc, search.cc, enqueue.cc, device.h).

A communicator here is anything with NCCL's view of it (``nranks``, ``nnodes``, ``arch``,
``nvls_channels``, ``nvls_heads``, ``ppn``, ``nvls_tree_chunk``): :class:`netsim.collectives.nccl.CommInfo`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from netsim.collectives.nccl import CommInfo

PER_CH_NVLS_TREE = {"volta": (26.5, 18.5, 10.0), "ampere": (24, 23.6, 17.8), "hopper": (0.0, 57.7, 45.5),
                     "blackwell": (0.0, 96.0, 80.0)}  # perChMaxNVLSTreeBws, tuning.cc:205-211
#: NCCL_MAX_NVLS_ARITY (device.h:213): the NVLS graph has at most this many channels, hence heads
#: (search.cc:1127 ``maxChannels = min(NCCL_MAX_NVLS_ARITY, nGPUs)``).
MAX_NVLS_ARITY = 32
#: NVLS channels (nvls.cc:155-157, 210-213): 16 on Hopper; Blackwell 24 on one node, 32 across.
NVLS_CHANNELS = {"hopper": (16, 16), "blackwell": (24, 32)}
#: ``NCCL_NVLS_CHUNKSIZE`` default, ``nvlsChunkSize`` (nvls.cc:160).
NVLS_CHUNK = 128 << 10


def nvls_tuning(arch: str, nnodes: int, ppn: int, nic_line: float, nic_near: bool = True) -> tuple[int, int]:
    """``ncclNvlsTuning`` (nvls.cc:200-244): (``nvlsChannels``, NVLS-tree chunk bytes =
    ``min(nvlsChunkSize, nvlsTreeMaxChunkSize)``, enqueue.cc:2281).

    Channels (NVLS compute channels, one thread block each): 16 on Hopper, Blackwell 24 on one
    node and 32 across (nvls.cc:155-157, 203-208).  Chunk 128 KiB (``NCCL_NVLS_CHUNKSIZE``,
    nvls.cc:160); the tree's maximum, when no rule sets it, 64 KiB from 4 nodes on, else the chunk
    (nvls.cc:227-229).  Across nodes on SM100, ``ncclNvlsTreeSm100Tuning`` (nvls.cc:165-198) sets
    them by the NIC's line rate (GB/s, ``minNetBw``), GPUs per node and whether the NIC is near
    the GPU (``nic_near``: path PIX/PXB, a PCIe switch; not on GB200, where it hangs off Grace):

    * 2 nodes, NIC >= 48: 32 channels, tree max 128 KiB; <= 4 GPUs per node: chunk and max 256 KiB;
      >= 16 GPUs, or <= 8 with a near NIC below 96: max 64 KiB;
    * NIC >= 96: <= 8 GPUs: 24 channels, chunk and max 256 KiB; else 32, max 128 KiB (< 32 GPUs)
      or 64 KiB;
    * NIC >= 48: 24 channels, max 128 KiB (64 KiB with a near NIC).

    >>> nvls_tuning("hopper", 32, 8, 50.0), nvls_tuning("blackwell", 1, 72, 0.0)
    ((16, 65536), (24, 131072))
    >>> nvls_tuning("blackwell", 2, 72, 50.0, False), nvls_tuning("blackwell", 20, 72, 50.0, False)
    ((32, 65536), (24, 131072))
    """
    chunk, tree_max = 128 << 10, 0
    nch = NVLS_CHANNELS.get(arch, (16, 16))[int(nnodes > 1)]
    if arch == "blackwell" and nnodes > 1:
        if nnodes == 2 and nic_line >= 48.0:
            nch, tree_max = 32, 128 << 10
            if ppn <= 4:
                chunk = tree_max = 256 << 10
            elif ppn >= 16 or (ppn <= 8 and nic_near and nic_line < 96.0):
                tree_max = 64 << 10
        elif nic_line >= 96.0:
            if ppn <= 8:
                nch, chunk, tree_max = 24, 256 << 10, 256 << 10
            else:
                nch, tree_max = 32, (128 << 10) if ppn < 32 else (64 << 10)
        elif nic_line >= 48.0:
            nch, tree_max = 24, (64 << 10) if nic_near else (128 << 10)
    if tree_max == 0:
        tree_max = (64 << 10) if nnodes >= 4 else chunk
    return int(nch), int(min(chunk, tree_max))


def nvls_tree_chunk(nbytes: float, channels: int, heads: int, chunk: int) -> int:
    """The NVLS-tree chunk for ``nbytes`` (enqueue.cc:2273-2285): with ``ops = channels x heads``
    chunks in flight, 256 KiB if ``nBytes < 32·ops·chunk``, 128 KiB below 16x, 64 KiB below 4x,
    32 KiB below 1x (each only lowering).

    >>> nvls_tree_chunk(1 << 30, 24, 32, 128 << 10), nvls_tree_chunk(64 << 20, 24, 32, 128 << 10)
    (131072, 65536)
    """
    ops = channels * heads
    for mult, cut in ((32, 256 << 10), (16, 128 << 10), (4, 64 << 10), (1, 32 << 10)):
        if nbytes < mult * ops * chunk and chunk > cut:
            chunk = cut
    return int(chunk)


#: Most pipeline pieces of an NVLS-tree all-reduce (:func:`nvls_tree_pieces`), a runtime budget, not
#: NCCL's: NCCL runs every loop (1,024 at 8 GiB on 32 H100 nodes), but on hashed routing the flow
#: model simulates every repetition of the pipeline's steady step, so its CPU time grows with the
#: pieces (128 instead of 64 took a 256-GPU 1 GiB all-reduce on `llama3-24k` from 19 to 41 CPU-s).
#: Fewer pieces than loops leave a pipeline fill NCCL does not have: up to 17 % at 8 GiB on 32 H100
#: nodes (docs/validation.md, "NCCL's per-head cap").
NVLS_TREE_MAX_PIECES = 64


def nvls_tree_pieces(nbytes: float, info: "CommInfo", limit: int = NVLS_TREE_MAX_PIECES) -> int:
    """Pipeline pieces of an NVLS-tree all-reduce: one piece is one loop of NCCL's kernel, a chunk
    per head per channel (all_reduce.h NVLS_TREE: ``loopCount = nHeads * chunkCount`` per channel,
    the tree store-and-forwards whole chunks), so ``ceil(nBytes / (nvlsChannels·nHeads·chunk))``,
    1 .. ``limit``."""
    heads = info.nvls_heads or min(MAX_NVLS_ARITY, info.ppn)
    chunk = nvls_tree_chunk(nbytes, info.nvls_channels, heads, info.nvls_tree_chunk)
    return int(max(1, min(limit, math.ceil(nbytes / (info.nvls_channels * heads * chunk)))))


def nvls_chunk(nbytes: float, channels: int, heads: int, chunk: int) -> int:
    """The chunk of a one-node NVLS collective for ``nbytes`` (enqueue.cc:2258-2275): at most
    ``nvlsChunkSize`` (128 KiB, nvls.cc:160); with ``ops = channels x heads`` chunks in flight, 64 KiB
    if ``nBytes < 64·ops·chunk``, then 32 KiB below ``8·ops·chunk`` and 16 KiB below ``2·ops·chunk``
    (each only lowering, each test on the chunk as lowered so far).

    >>> nvls_chunk(16 << 30, 24, 32, 128 << 10), nvls_chunk(1 << 30, 24, 32, 128 << 10)
    (131072, 65536)
    >>> nvls_chunk(64 << 20, 16, 8, 128 << 10), nvls_chunk(4 << 20, 16, 8, 128 << 10)
    (65536, 16384)
    """
    ops = channels * heads
    for mult, cut in ((64, 64 << 10), (8, 32 << 10), (2, 16 << 10)):
        if nbytes < mult * ops * chunk and chunk > cut:
            chunk = cut
    return int(chunk)


def nvls_pieces(nbytes: float, info: "CommInfo", limit: int = NVLS_TREE_MAX_PIECES) -> int:
    """Pipeline pieces of a one-node NVLS all-reduce: one piece is one loop of NCCL's kernel, a chunk
    per head per channel (all_reduce.h:410-414 NVLS ``oneNode``: ``loopCount = nHeads * chunkSize``
    per channel; scatter, reduce/broadcast through the switch and gather each move a whole loop), so
    ``ceil(nBytes / (nvlsChannels·nHeads·chunk))``, 1 .. ``limit``, with the chunk of
    :func:`nvls_chunk`.  On one node NCCL's NVLS graph takes ``min(32, nGPUs)`` channels, one head
    each (search.cc:1126-1137: ``minChannels = maxChannels`` there).

    >>> from types import SimpleNamespace as Comm
    >>> nvls_pieces(1 << 30, Comm(ppn=64, nvls_channels=24)), nvls_pieces(16 << 30, Comm(ppn=64, nvls_channels=24))
    (22, 64)
    >>> nvls_pieces(1 << 30, Comm(ppn=8, nvls_channels=16))
    64
    """
    heads = min(MAX_NVLS_ARITY, info.ppn)
    chunk = nvls_chunk(nbytes, info.nvls_channels, heads, NVLS_CHUNK)
    return int(max(1, min(limit, math.ceil(nbytes / (info.nvls_channels * heads * chunk)))))


def nvls_heads(ppn: int, gpus_with_nic: int) -> int:
    """NCCL's NVLS heads per node across nodes: the NVLS graph's channels (init.cc:980-981,
    ``graphs[NVLS_TREE]`` is the NVLS graph), one per head (connect.cc:75-90, duplicates dropped).

    The graph search gives each channel a NIC whose local GPU is not yet a head (search.cc:754-771:
    ``net.localGpu``, ``duplicate``), up to ``min(NCCL_MAX_NVLS_ARITY, nGPUs)`` channels
    (search.cc:1127, device.h:213): so ``min(32, ppn, GPUs with a NIC of their own)``.  A GB200
    NVL72 rack (72 GPUs, 72 NICs) has 32 heads: 32 of its 72 NICs carry NVLS-tree traffic.

    >>> nvls_heads(8, 8), nvls_heads(72, 72), nvls_heads(8, 4)
    (8, 32, 4)
    """
    return int(max(1, min(MAX_NVLS_ARITY, ppn, gpus_with_nic if gpus_with_nic > 0 else ppn)))


def nvls_tree_head_rate(info: "CommInfo") -> float:
    """GB/s at which one NVLS head moves its own share in an NVLS-tree all-reduce (pulling the
    node's reduced share from the switch, and storing the result back).

    NCCL caps the NVLS tree's bus bandwidth per channel of the NVLS graph, i.e. per head, at
    ``perChMaxNVLSTreeBw`` (tuning.cc:276, 321-324: ``busBw = nChannels x min(intraBw, interBw,
    perChMaxNVLSTreeBw)``; the graph's channels are the heads, :func:`nvls_heads`), and turns bus
    into algorithm bandwidth with ``nRanks / nsteps`` = ``n / (2(n-1))`` (tuning.cc:377-382).  A
    head carries ``S/nHeads`` of an all-reduce of ``S``, so its share moves at
    ``perChMaxNVLSTreeBw x n / (2(n-1))`` (inf on one node, where NCCL runs NVLS, not the tree).

    >>> from types import SimpleNamespace as Comm
    >>> round(nvls_tree_head_rate(Comm(nranks=16, nnodes=2, arch="hopper")), 3)
    30.773
    >>> round(nvls_tree_head_rate(Comm(nranks=64, nnodes=8, arch="hopper")), 3)
    23.111
    """
    if info.nnodes <= 1:
        return math.inf
    per_head = PER_CH_NVLS_TREE[info.arch][1 if info.nnodes == 2 else 2]
    return per_head * info.nranks / (2 * (info.nranks - 1)) if per_head > 0 else math.inf
