"""Queue pairs per connection: what an ECMP hash sees of NCCL's InfiniBand/RoCE transport.

NCCL's net transport opens ``NCCL_IB_QPS_PER_CONNECTION`` queue pairs for every connection
(default 1; NCCL's environment-variable documentation, and ``ncclParamIbQpsPerConn`` in
``src/transport/net_ib.cc``).  On RoCEv2 each queue pair is its own UDP flow: its source port is
derived from the queue pair number, so the switches' ECMP hash places each queue pair on its own
path (the entropy the Llama 3 paper §3.3.1 and Meta's RoCE paper, SIGCOMM 2024, raise by
opening several flows per GPU pair).  NCCL spreads a connection's data over its queue pairs,
either message by message (``NCCL_IB_SPLIT_DATA_ON_QPS=0``) or splitting every message
(``=1``); in a fluid model both put an equal share of the bytes on every queue pair.

:func:`split_connections` writes that into a schedule: every transfer that leaves its GPU through
a NIC becomes ``q`` transfers of ``1/q`` of its bytes, keyed apart (so the ECMP hash places each on
its own path) and each capped at ``1/q`` of the connection's rate cap (the channel's thread block
drives all of them).  A transfer is done when all its queue pairs' parts are, as a step waits for
all its transfers.  With ``q = 1`` (the default) nothing changes.
"""

from __future__ import annotations

import numpy as np

from netsim.collectives.schedule import Schedule, Step

#: Key spacing between the queue pairs of one connection (keys are hashed, never compared).
QP_KEY_STRIDE = 1 << 20


def through_nic(topo, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Which (topology GPU) pairs leave through a NIC: different scale-up domains, or any pair when
    the topology routes same-node traffic through the NICs.

    >>> from netsim.topology.spec import load_topology
    >>> t = load_topology("topologies/h100-superpod-1su.yaml")
    >>> through_nic(t, np.array([0, 0]), np.array([1, 8])).tolist()
    [False, True]
    """
    g = max(1, int(topo.gpus_per_node))
    if topo.facts.scaleout is None:
        return np.zeros(np.shape(src), dtype=bool)
    if topo.facts.intra_node == "nic":
        return np.asarray(src) != np.asarray(dst)
    return (np.asarray(src) // g) != (np.asarray(dst) // g)


def split_step(step: Step, networked: np.ndarray, q: int) -> Step:
    """``step`` with every ``networked`` transfer split into ``q`` queue-pair parts (see module docstring).

    >>> st = Step(np.array([0, 1]), np.array([1, 0]), np.array([8.0, 8.0]), rate_cap=4.0)
    >>> s = split_step(st, np.array([True, False]), 2)
    >>> s.src.tolist(), s.nbytes.tolist(), s.key.tolist(), s.rate_cap.tolist()
    ([0, 0, 1], [4.0, 4.0, 8.0], [0, 1048576, 0], [2.0, 2.0, 4.0])
    """
    n = step.src.size
    reps = np.where(networked, q, 1)
    idx = np.repeat(np.arange(n), reps)
    part = np.arange(idx.size) - np.repeat(np.cumsum(reps) - reps, reps)  # 0..q-1 within a transfer
    share = np.repeat(np.where(networked, 1.0 / q, 1.0), reps)
    base = np.zeros(n, dtype=np.int64) if step.key is None else np.asarray(step.key, dtype=np.int64)
    cap = np.broadcast_to(np.asarray(step.rate_cap, dtype=np.float64), (n,))
    return Step(step.src[idx], step.dst[idx], step.nbytes[idx] * share, step.overhead_s, step.delay_s, step.reduce,
                base[idx] + part * QP_KEY_STRIDE, None if step.hop is None else step.hop[idx], step.wire,
                cap[idx] * share)


def split_connections(sched: Schedule, topo, ranks: np.ndarray) -> Schedule:
    """``sched`` (group-local ranks on topology GPUs ``ranks``) with NIC transfers on the topology's
    queue pairs per connection (``scale_out.qps_per_connection``); itself when that is 1."""
    q = int(getattr(topo.facts, "qps_per_connection", 1) or 1)
    if q <= 1:
        return sched
    ranks = np.asarray(ranks, dtype=np.int64)

    def one(step: Step) -> Step:
        net = through_nic(topo, ranks[step.src], ranks[step.dst])
        if step.hop is not None:  # in-switch (NVLS) hops stay inside the scale-up domain
            net &= step.hop == 0
        return split_step(step, net, q) if net.any() else step

    return sched.map_steps(one)
