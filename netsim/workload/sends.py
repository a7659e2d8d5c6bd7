"""A workload's point-to-point sends as NCCL runs them (:mod:`netsim.collectives.p2p`).

A send that leaves its GPU through a NIC (to another node, or to any GPU on a topology whose
same-node traffic goes through the NICs) runs on ``parts`` p2p channels
(:meth:`~netsim.collectives.p2p.P2PSetup.parts`, ``enqueue.cc:914-926`` of NCCL v2.30.7-1).  Each
channel is its own connection, so the send becomes one transfer per part, 1/parts of its bytes
each, keyed by its channel (ECMP hashes each part on its own; channel ``c`` leaves by the GPU's NIC
``c mod netsPerGpu``, :func:`~netsim.collectives.p2p.nic_key`), and capped at what one channel
carries (``NCCL_P2P_PER_CHANNEL_NET_BW`` = 14 GB/s, ``paths.cc:918``), in wire bytes of the send's
protocol.  This is what ``netsim bench --op sendrecv`` runs for one send
(:func:`~netsim.collectives.plan.shape_p2p`).  The communicator is the two GPUs of the send.

Other sends (NVLink, and every send on ASTRA-sim's networks) stay one transfer of their bytes,
as before.  Left out here, as in ASTRA-sim: NCCL's launch and per-hop latency of a send.

>>> from netsim.topology.spec import load_topology
>>> s = Sends(load_topology("topologies/h100-superpod-1su.yaml"))
>>> s.parts(0, 8, 256 << 20), s.parts(0, 1, 256 << 20), s.split(0, 8, 256 << 20)[1].tolist()
(4, 0, [67108864.0, 67108864.0, 67108864.0, 67108864.0])
"""

from __future__ import annotations

import numpy as np
import simpy

from netsim.collectives.qps import QP_KEY_STRIDE
from netsim.network.base import TransferRecord

__all__ = ["Sends"]


class Sends:
    """How the sends of one run go onto the network (see the module docstring)."""

    def __init__(self, topo):
        self.topo = topo
        self.g = max(1, int(topo.gpus_per_node))
        self.nccl = not topo.facts.astra_network
        self.through_nic = topo.facts.intra_node == "nic"
        self._setups: dict = {}
        self._splits: dict = {}

    def setup(self, src_gpu: int, dst_gpu: int):
        """NCCL's p2p setup of the communicator of the two GPUs (cached per layout on the nodes)."""
        key = (src_gpu % self.g, dst_gpu % self.g, src_gpu // self.g == dst_gpu // self.g)
        hit = self._setups.get(key)
        if hit is None:
            from netsim.collectives import nccl, p2p
            info = nccl.CommInfo.from_topology(self.topo, np.array([src_gpu, dst_gpu], dtype=np.int64))
            hit = self._setups[key] = p2p.P2PSetup.from_info(info)
        return hit

    def networked(self, src_gpu: int, dst_gpu: int) -> bool:
        """Whether the send leaves through a NIC as NCCL runs it."""
        return self.nccl and src_gpu != dst_gpu and (self.through_nic or src_gpu // self.g != dst_gpu // self.g)

    def blocks(self, src_gpu: int, dst_gpu: int, nbytes: int) -> int:
        """Thread blocks the send's kernel (and its receive's) holds: its channels, over any path
        (0 on ASTRA-sim's networks, which run no NCCL kernels)."""
        return self.setup(src_gpu, dst_gpu).parts(float(nbytes)) if self.nccl else 0

    def parts(self, src_gpu: int, dst_gpu: int, nbytes: int) -> int:
        """Channels the send runs on (0: not an NCCL send over the network)."""
        if not self.networked(src_gpu, dst_gpu):
            return 0
        return self.setup(src_gpu, dst_gpu).parts(float(nbytes))

    def split(self, src_gpu: int, dst_gpu: int, nbytes: int) -> tuple:
        """(keys, wire bytes, caps in B/s) of the send's parts (cached)."""
        key = (src_gpu % self.g, dst_gpu % self.g, src_gpu // self.g == dst_gpu // self.g, int(nbytes))
        hit = self._splits.get(key)
        if hit is None:
            from netsim.collectives import nccl, p2p
            setup = self.setup(src_gpu, dst_gpu)
            n = setup.parts(float(nbytes))
            node = np.array([0, 0 if src_gpu // self.g == dst_gpu // self.g else 1])
            local = np.array([0, 1] if src_gpu < dst_gpu else [1, 0]) if node[1] == 0 else np.zeros(2, np.int64)
            base = int(p2p.base_channels(np.array([0]), np.array([1]), node, local, setup)[0])
            chan = (base + np.arange(n)) & (setup.channels - 1)
            wire = nccl.WIRE[setup.protocol(float(nbytes))]
            keys = p2p.nic_key(chan, self.g, self.topo.facts.nics_per_gpu)
            q = int(self.topo.facts.qps_per_connection or 1)  # every channel's queue pairs (collectives.qps)
            keys = (keys[:, None] + QP_KEY_STRIDE * np.arange(q)[None, :]).ravel()
            hit = self._splits[key] = (keys, np.full(n * q, float(nbytes) * wire / (n * q)),
                                       np.full(n * q, p2p.P2P_PER_CHANNEL_NET_GBPS * 1e9 * wire / q))
        return hit

    def transfer(self, net, src_gpu: int, dst_gpu: int, nbytes: int) -> simpy.Event:
        """Put the send on ``net`` (a network or :class:`~netsim.workload.replicas.Mirrored`); the event
        succeeds when its last byte lands."""
        if not self.networked(src_gpu, dst_gpu) or nbytes <= 0:
            return net.transfer(src_gpu, dst_gpu, nbytes)
        keys, sizes, caps = self.split(src_gpu, dst_gpu, nbytes)
        event, start, left = net.env.event(), net.env.now, [keys.size]

        def done(idx: np.ndarray, t: float) -> None:
            left[0] -= int(np.asarray(idx).size)
            if left[0] == 0:
                event.succeed(TransferRecord(src_gpu, dst_gpu, float(nbytes), start, t, ()))

        net.submit(np.full(keys.size, src_gpu), np.full(keys.size, dst_gpu), sizes, done, keys, None, caps)
        return event
