"""How NCCL runs point-to-point operations (``ncclSend``/``ncclRecv``: nccl-tests ``sendrecv``
and ``alltoall``), as the NCCL 2.30.7 sources (tag v2.30.7-1) set it up.

Every number below is NCCL's; "paths.cc:N" is ``src/graph/paths.cc`` line N of that tag (likewise
``enqueue.cc``, ``init.cc``, ``channel.h``, ``device.h``, ``topo.h``).

* **Channels per peer** (``ncclTopoGetNchannels``, paths.cc:920-954): an NVLink peer gets two
  channels per NVLink (``2 * path_bw / nvlBw``), a network peer one per NIC and enough to carry
  the NIC at ``NCCL_P2P_PER_CHANNEL_NET_BW`` = 14 GB/s each (``max(nNics, ceil(netBw / 14))``).
  ``p2pnChannelsPerPeer`` is the minimum over peers, a power of two (paths.cc:961-972, 989);
  ``p2pnChannels`` is the ring channel count rounded up to a power of two (paths.cc:980-990).
  Across nodes the channels per peer halve while ``perPeer * ceil(nRanks / 8) > p2pnChannels``
  (paths.cc:993-1001), otherwise they are capped at ``p2pnChannels`` (paths.cc:1003).
* **Parts of one send** (``scheduleP2pTasksToPlan``, enqueue.cc:1143-1146, and ``addP2pToPlan``,
  enqueue.cc:914-926): ``nChannelsMin`` halves from the per-peer count while
  ``nChannelsMin * nRanks > p2pnChannels``; a send of B bytes takes ``min(nChannelsMin,
  ceil(B / minPart))`` channels, doubled up to the per-peer count while a part exceeds
  ``maxPart`` (minPart, maxPart: chunk/2 and chunk across nodes, chunk/8 and 32 chunks on one
  node).
* **Protocol** per send (enqueue.cc:932): LL when ``B <= parts * NCCL_P2P_LL_THRESHOLD`` (16 KiB,
  enqueue.cc:859), else Simple.
* **Chunk** (``p2pChunkSize``, init.cc:818-843): ``NCCL_P2P_NET_CHUNKSIZE`` 128 KiB across nodes,
  ``NCCL_P2P_NVL_CHUNKSIZE`` 512 KiB on one all-NVLink node; it sets the part sizes above.
* **Concurrency** (enqueue.cc:1051-1055, device.h:391, channel.h:21-33): rounds (peers) are
  grouped 8 to a work batch (``NCCL_MAX_DEV_WORK_P2P_PER_BATCH``); a channel runs its batches one
  after another, so ``p2pnChannels / parts * 8`` peers are in flight at once.  netsim runs that
  many peers per step (:meth:`P2PSetup.window`).
* **Per-channel rate**: a p2p channel is one thread block.  The p2p kernel launches
  ``NCCL_MAX_NTHREADS`` = 640 threads per channel (enqueue.cc:1135, device.h:93); the block's warps
  are split among the up to 8 operations of its work batch and, within one, between the send
  (10 of 20 warps) and the receive (9) (sendrecv.h:106-109).  NCCL states one figure for what a
  p2p channel carries, ``NCCL_P2P_PER_CHANNEL_NET_BW`` = 14 GB/s (paths.cc:918), and sizes network
  peers' channels by it (paths.cc:950): a network send moves at most 14 GB/s per channel.
* **P2P read (Ampere)**: between SM80 GPUs over NVLink NCCL uses P2P *read* (paths.cc:416-417,
  p2p.cc:433/508): the receiver's warps pull the data with remote loads (prims_simple.h:144-146,
  the sender's side is "empty", :138-140), so a channel moves what its loads in flight carry per
  NVLink round trip, however many links there are.  Hopper and Blackwell use P2P *write*: posted
  stores, which the links bound (8xH100 alltoall reaches 370 GB/s, 18 x 20.6, on 32 channels).
  NCCL states no rate for a read channel; netsim gives it the one per-channel p2p rate NCCL
  states, 14 GB/s (borrowed: paths.cc:918 names network peers).  On one 8xA100 node a 128 MiB
  send takes 8 channels, 112 GB/s, below the 240 GB/s the NVLinks carry.  In read mode the Simple
  FIFO sits in the sender's memory (p2p.cc:408-409): the sender copies into it and the receiver
  pulls it over NVLink, once per byte.  With ranks in one process ("P2P/direct pointer", p2p.cc:414-417)
  the path is the same unless the user buffers are registered (``ipcRegFlag``,
  prims_simple.h:501-514, 548-561).  What is not modelled: measured A100 sendrecv levels off below the
  links (189-195 GB/s on 16 channels); no sourced figure gives it (docs/validation.md, "P").
* **Sharing**: a rank's sends in one step share its ``p2pnChannels`` blocks, so a capped send gets
  at most ``min(parts, p2pnChannels / sends) x 14`` GB/s (:func:`channel_caps`).
* **Channel ids** (:func:`base_channels`, :func:`key_by_channel`): a send's parts run on
  consecutive channels from its round's base channel (init.cc:889-953, channel.h:21-33,
  device.h:277-279), and channel c leaves by the GPU's NIC ``c mod netsPerGpu`` (topo.cc:2070-2072).
  netsim splits a network send into its parts, keyed by channel, so a GPU's NICs share it evenly.

What is left out: PXN (a send to another rail's NIC relayed over NVLink to the GPU on that rail,
``NCCL_PXN_DISABLE``): on the rail-optimised, non-blocking fabrics shipped it moves the same
bytes through the same NICs; the proxy thread's CPU time per network post (NCCL models it as a
latency, ``getNetOverhead``, tuning.cc:228-233, which :mod:`netsim.collectives.plan` charges);
NIC message rate (ConnectX-7: hundreds of millions of messages per second, far above what
64 KiB-128 KiB chunks or 7 KB DeepEP tokens need at 400 Gb/s).

>>> s = P2PSetup.for_comm(nranks=64, nnodes=8, ring_channels=16, nvl_links=18, nvl_link_GBps=20.6,
...                      nic_GBps=48.0)
>>> s.channels, s.per_peer, s.min_parts, s.chunk
(16, 2, 1, 131072)
>>> s.parts(128 << 10), s.parts(1 << 20), s.protocol(16 << 10), s.protocol(1 << 20), s.window(1)
(1, 2, 'LL', 'Simple', 63)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from netsim.collectives.schedule import Schedule
from netsim.ncclfacts import DEFAULT_ARCH, MAXCHANNELS, NVLINK_GBPS, SIMPLE_CHUNK

#: ``NCCL_P2P_PER_CHANNEL_NET_BW`` default, GB/s per channel to a network peer (paths.cc:918).
P2P_PER_CHANNEL_NET_GBPS = 14.0
#: GB/s one p2p channel (one thread block) moves where a channel bounds it (network peers, and
#: NVLink peers in P2P read mode): NCCL's one stated per-channel p2p rate, the one above.
P2P_PER_CHANNEL_GBPS = P2P_PER_CHANNEL_NET_GBPS
#: GPU architectures whose NVLink peers NCCL connects in P2P read mode (paths.cc:416-417: SM80).
P2P_READ_ARCHS = ("ampere",)
#: ``NCCL_P2P_NET_CHUNKSIZE`` / ``NCCL_P2P_NVL_CHUNKSIZE`` defaults (init.cc:818, 820).
NET_CHUNK = 1 << 17
NVL_CHUNK = 1 << 19
#: ``NCCL_MAX_DEV_WORK_P2P_PER_BATCH`` (device.h:391): p2p operations one channel runs at once.
P2P_PER_BATCH = 8
#: ``NCCL_P2P_LL_THRESHOLD`` default (enqueue.cc:859): bytes per channel sent with LL.
P2P_LL_THRESHOLD = 16 << 10
#: ``NCCL_MAX_P2P_NCHANNELS`` default: ``MAXCHANNELS`` (paths.cc:958).
MAX_P2P_CHANNELS = MAXCHANNELS


def _pow2_up(x: int) -> int:
    return 1 << max(0, int(x) - 1).bit_length()


@dataclass(frozen=True)
class P2PSetup:
    """NCCL's p2p channel setup for one communicator (see the module docstring).

    channels: ``p2pnChannels``; per_peer: ``p2pnChannelsPerPeer`` (an operation's
    ``nChannelsMax``); min_parts: ``nChannelsMin``; chunk: ``p2pChunkSize`` (bytes)."""

    nranks: int
    nnodes: int
    channels: int
    per_peer: int
    min_parts: int
    chunk: int
    read: bool = False  # NVLink peers in P2P read mode (paths.cc:416-417)

    @classmethod
    def for_comm(cls, *, nranks: int, nnodes: int, ring_channels: int, nvl_links: int, nvl_link_GBps: float,
                 nic_GBps: float, nics: int = 1, read: bool = False) -> "P2PSetup":
        """From the communicator's shape: ranks, nodes, NCCL's ring channel count, the GPU's
        NVLinks and NCCL's per-link rate, the NIC rate (GB/s) and NICs per GPU."""
        nvl = 2 * max(1, int(nvl_links)) if nvl_links > 0 else 2  # paths.cc:936 (PCIe peers: 2, :939)
        per_peer = nvl if nranks > 1 else 1
        if nnodes > 1:  # network peers exist: paths.cc:943-952
            per_peer = min(per_peer, max(nics, math.ceil(nic_GBps / P2P_PER_CHANNEL_NET_GBPS)) if nics > 0 else 2)
        per_peer = _pow2_up(per_peer)  # paths.cc:989
        channels = _pow2_up(max(1, min(ring_channels, MAX_P2P_CHANNELS)))  # paths.cc:984-990
        if nnodes > 1:  # paths.cc:993-1001
            while per_peer * math.ceil(nranks / P2P_PER_BATCH) > channels and per_peer > 1:
                per_peer //= 2
        else:
            per_peer = min(channels, per_peer)  # paths.cc:1003
        min_parts = per_peer
        while min_parts * nranks > channels and min_parts > 1:  # enqueue.cc:1146
            min_parts //= 2
        chunk = NET_CHUNK if nnodes > 1 else NVL_CHUNK  # init.cc:830-839
        chunk = min(chunk, SIMPLE_CHUNK)  # init.cc:842-843
        return cls(int(nranks), int(nnodes), int(channels), int(per_peer), int(min_parts), int(chunk), bool(read))

    def parts_of(self, nbytes: np.ndarray) -> np.ndarray:
        """:meth:`parts` of every send size in ``nbytes`` (int64 array)."""
        sizes, inv = np.unique(np.asarray(nbytes, dtype=np.float64), return_inverse=True)
        return np.array([self.parts(b) for b in sizes], dtype=np.int64)[inv.reshape(-1)]

    def parts(self, nbytes: float) -> int:
        """Channels one send of ``nbytes`` is split over (enqueue.cc:914-926)."""
        if nbytes <= 0:
            return 1
        multi = self.nnodes > 1
        min_part = self.chunk // 2 if multi else self.chunk // 8
        max_part = self.chunk if multi else self.chunk * 32
        nc = min(self.min_parts, math.ceil(nbytes / min_part))
        part = max(min_part, math.ceil(nbytes / nc))
        while part > max_part and nc <= self.per_peer // 2:
            nc *= 2
            part = math.ceil(nbytes / nc)
        return int(nc)

    def protocol(self, nbytes: float) -> str:
        """LL when a send carries at most 16 KiB per channel, else Simple (enqueue.cc:932)."""
        return "LL" if nbytes <= self.parts(nbytes) * P2P_LL_THRESHOLD else "Simple"

    def window(self, parts: int) -> int:
        """Peers in flight at once: ``p2pnChannels / parts`` channel groups of 8 operations each
        (enqueue.cc:1055), at most every peer."""
        return int(max(1, min(self.nranks - 1, self.channels // max(1, parts) * P2P_PER_BATCH)))

    def net_cap_GBps(self, nbytes: float) -> float:
        """Most GB/s one send to a network peer moves: its channels at 14 GB/s each."""
        return self.parts(nbytes) * P2P_PER_CHANNEL_NET_GBPS

    @classmethod
    def from_info(cls, info) -> "P2PSetup":
        """From a :class:`~netsim.collectives.nccl.CommInfo`.  NVLinks per GPU: the topology's
        (``info.nvlinks``, as its builder wired them); a topology that does not know them (ASTRA-sim
        dimensions) gives NCCL's effective NVLink bandwidth over its per-link rate.  NIC rate: the
        achievable one, which rounds to the same channel count as NCCL's line rate for 200G and
        400G NICs."""
        link = NVLINK_GBPS.get(info.arch, NVLINK_GBPS[DEFAULT_ARCH])
        links = info.nvlinks if info.nvlinks is not None else int(round(info.bw_intra / link))
        return cls.for_comm(nranks=info.nranks, nnodes=info.nnodes, ring_channels=info.channels,
                            nvl_links=links if info.bw_intra > 0 else 0, nvl_link_GBps=link,
                            nic_GBps=info.bw_inter, read=info.arch in P2P_READ_ARCHS and info.bw_intra > 0)


def channel_caps(sched: Schedule, ranks: np.ndarray, local_size: int, setup: P2PSetup) -> Schedule:
    """``sched`` with the sends a channel bounds capped by their channels (wire bytes: the step's
    framing included): sends to network peers, and NVLink sends in P2P read mode.  A send of B
    bytes runs on ``parts(B)`` channels of :data:`P2P_PER_CHANNEL_GBPS` each, and a rank's sends in
    one step share its ``p2pnChannels`` blocks (a channel runs up to 8 operations at once and splits
    its warps among them, sendrecv.h:106-109), so a send gets ``min(parts, p2pnChannels / sends of
    its rank in the step)`` channels' worth.  Other sends keep their cap."""
    ranks = np.asarray(ranks, dtype=np.int64)
    g = max(1, int(local_size))

    def capped(st):
        bound = ranks[st.src] // g != ranks[st.dst] // g
        if setup.read:
            bound[:] = True
        if not bound.any():
            return st
        parts = setup.parts_of(st.nbytes).astype(np.float64)
        sends = np.bincount(st.src, minlength=int(st.src.max()) + 1)[st.src].astype(np.float64)
        share = np.minimum(parts, setup.channels / sends) * P2P_PER_CHANNEL_GBPS * 1e9 * st.wire
        cap = np.broadcast_to(np.asarray(st.rate_cap, dtype=np.float64), st.nbytes.shape).copy()
        cap[bound] = np.minimum(cap[bound], share[bound])
        return replace(st, rate_cap=cap)

    return sched.map_steps(capped)


def _reverse_bits(x: np.ndarray, nbits: int) -> np.ndarray:
    """The bottom ``nbits`` bits of ``x`` reversed (NCCL ``reverseBits``, bitops.h:441-463)."""
    out = np.zeros_like(x)
    for b in range(nbits):
        out |= ((x >> b) & 1) << (nbits - 1 - b)
    return out


def base_channels(src: np.ndarray, dst: np.ndarray, node: np.ndarray, local: np.ndarray,
                  setup: P2PSetup) -> np.ndarray:
    """NCCL's first p2p channel of each send ``src -> dst`` (communicator ranks; ``node[r]``,
    ``local[r]``: rank r's node index and local rank).  The p2p schedule (init.cc:889-953) orders a
    rank's peers in rounds: one node, round = (dst - src) mod n; across nodes, ranks form groups of
    ``NCCL_P2P_SCHEDULE_GROUP_SIZE`` = 8 local ranks (reduced to a divisor of the ranks per node),
    group deltas follow the quadratic sequence (x² + x)/2 mod pow2 (skipping those >= groups), and
    round = (index of the group delta) x group size + local delta.  The round's base channel is
    ``reverseBits(base, log2 p2pnChannels)`` with base = round on one node, else group index x
    ceil(size / 8) + local delta // 8 (channel.h:21-33); part p runs on base + p (device.h:277-279)."""
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    n = int(node.size)
    nbits = max(0, int(setup.channels - 1).bit_length())
    counts = np.bincount(node)
    if setup.nnodes <= 1 or counts.size <= 1:
        base = np.mod(local[dst] - local[src], max(1, int(counts.max())))
    else:
        gs = P2P_PER_BATCH  # init.cc:887, 893-897
        for c in counts[counts > 0]:
            if c % gs or c < gs:
                gs = math.gcd(gs, int(c))
        first = np.concatenate([[0], np.cumsum(counts // gs)])[:-1]
        group = first[node] + local // gs
        ngroups = n // gs
        pos = np.full(ngroups, -1, dtype=np.int64)
        pow2, gd, k = _pow2_up(ngroups), 0, 0
        for rnd in range(1, pow2 + 1):  # init.cc:931-953
            if gd < ngroups:
                pos[gd], k = k, k + 1
            gd = (gd + rnd) & (pow2 - 1)
        idx = pos[np.mod(group[dst] - group[src], ngroups)]
        delta = np.mod(local[dst] % gs - local[src] % gs, gs)
        base = idx * -(-gs // P2P_PER_BATCH) + delta // P2P_PER_BATCH
    return _reverse_bits(base, nbits) & (setup.channels - 1)


def nic_key(channel: np.ndarray, gpus_per_node: int, nics_per_gpu: int) -> np.ndarray:
    """The flow key whose NIC (:meth:`netsim.topology.hostio.NicLayout.local_nic`: port
    ``(key + key // G) mod k``, a rule written for rings) is NCCL's p2p one, port ``channel mod k``
    (topo.cc:2072: ``net += channelId % netsPerGpu``): ``channel mod G + G k (channel // G)``,
    distinct per channel, so ECMP still spreads channels (exact when k divides G)."""
    g, k = max(1, int(gpus_per_node)), max(1, int(nics_per_gpu))
    c = np.asarray(channel, dtype=np.int64)
    return c % g + g * k * (c // g)


def key_by_channel(sched: Schedule, ranks: np.ndarray, local_size: int, setup: P2PSetup,
                   nics_per_gpu: int = 1, through_nic: bool = False) -> Schedule:
    """``sched``'s sends keyed by the NCCL channels they run on: a send that leaves through a NIC
    (cross-node; every send when ``through_nic``) becomes one transfer per part, each 1/parts of its
    bytes and cap, keyed by its channel (base + part), so a GPU's NICs share its sends as NCCL's
    channels do; other sends keep one transfer, keyed by their base channel."""
    ranks = np.asarray(ranks, dtype=np.int64)
    g = max(1, int(local_size))
    _, node = np.unique(ranks // g, return_inverse=True)
    node = node.reshape(-1)
    order = np.lexsort((ranks, node))
    local = np.empty(ranks.size, dtype=np.int64)
    local[order] = np.arange(ranks.size) - np.searchsorted(node[order], node[order])

    def keyed(st):
        base = base_channels(st.src, st.dst, node, local, setup)
        net = (node[st.src] != node[st.dst]) | bool(through_nic)
        parts = np.where(net, setup.parts_of(st.nbytes), 1)
        rep = np.repeat(np.arange(st.n_transfers), parts)
        part = np.arange(rep.size) - np.repeat(np.cumsum(parts) - parts, parts)
        chan = (base[rep] + part) & (setup.channels - 1)
        cap = np.broadcast_to(np.asarray(st.rate_cap, dtype=np.float64), st.nbytes.shape)[rep] / parts[rep]
        hop = None if st.hop is None else st.hop[rep]
        return replace(st, src=st.src[rep], dst=st.dst[rep], nbytes=st.nbytes[rep] / parts[rep],
                       key=nic_key(chan, g, nics_per_gpu), hop=hop, rate_cap=cap)

    return sched.map_steps(keyed)
