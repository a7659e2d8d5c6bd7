"""Comm lanes per communicator: how PyTorch runs a rank's communication (``comm_streams``).

ASTRA-sim keeps at most one GPU comm op in flight per rank (``astra-sim/workload/HardwareResource.cc``,
``is_available``: ``num_in_flight_gpu_comm_ops == 0``); its ``comm_priority`` attribute only orders
ready collectives under the EXPLICIT scheduling policy, and it reads no stream.  Chakra's
PyTorch converter records each GPU op's CUDA stream as a ``stream`` attribute
(``src/converter/pytorch_converter.py``, mlcommons/chakra 21585d8, lines 324-325).  PyTorch's
``ProcessGroupNCCL`` gives every process group its own NCCL stream per device, and every
point-to-point pair its own communicator and stream (``getKeySendRecv``), so collectives of
different communicators (TP, DP, EP, CP) and sends to different peers run concurrently, while
those of one communicator run one after another.  ``comm_streams="communicator"`` is that rule:
one comm lane per communicator (``pg``) and one per send destination.

>>> from types import SimpleNamespace
>>> coll, send = int(NodeType.COMM_COLL_NODE), int(NodeType.COMM_SEND_NODE)
>>> t = SimpleNamespace(type=[coll, send, coll, coll, send], pg=[1, -1, 0, 1, -1], comm_dst=[-1, 5, -1, -1, 6])
>>> comm_lanes(t, np.array([2, 2, 2, 2, 2], dtype=np.int8), 2).tolist()
[2, 3, 4, 2, 5]
"""

from __future__ import annotations

import numpy as np

from netsim.chakra.model import MISSING, NodeTable
from netsim.vocab import NodeType

__all__ = ["COMM_STREAMS", "comm_lanes", "node_lanes"]

#: The runner's lanes: host CPU, GPU compute, GPU communication (the first comm lane).
CPU, GPU, COMM = 0, 1, 2

#: Comm-lane policies: ASTRA-sim's one comm lane, or one per communicator / send peer (PyTorch).
COMM_STREAMS = ("one", "communicator")


def node_lanes(t: NodeTable) -> np.ndarray:
    """Lane of every node: CPU (``is_cpu_op`` compute and host-side comm), GPU compute, COMM
    (GPU collectives and sends), or -1 (receives, memory, metadata: no lane)."""
    typ = np.asarray(t.type)
    cpu = np.asarray(t.is_cpu_op) == 1
    out = np.full(typ.size, -1, dtype=np.int8)
    comp = typ == NodeType.COMP_NODE
    out[comp] = np.where(cpu[comp], CPU, GPU)
    coll = typ == NodeType.COMM_COLL_NODE
    out[coll] = np.where(cpu[coll] | (np.asarray(t.comm_type)[coll] == MISSING), CPU, COMM)
    out[typ == NodeType.COMM_SEND_NODE] = COMM
    return out


def comm_lanes(t: NodeTable, lanes: np.ndarray, comm: int) -> np.ndarray:
    """``lanes`` with every node on lane ``comm`` moved to a lane of its communicator (``pg``) or,
    for a send, of its destination: lanes ``comm``, ``comm + 1``, ... in order of first use."""
    out = lanes.astype(np.int16)
    rows = np.flatnonzero(lanes == comm)
    if rows.size:
        send = np.asarray(t.type)[rows] == NodeType.COMM_SEND_NODE
        key = np.where(send, -2 - np.asarray(t.comm_dst)[rows], np.asarray(t.pg)[rows])  # pg >= -1, peers <= -2
        _, first, inv = np.unique(key, return_index=True, return_inverse=True)
        rank_of = np.empty(first.size, dtype=np.int64)
        rank_of[np.argsort(first)] = np.arange(first.size)  # number the keys in order of first use
        out[rows] = comm + rank_of[inv.ravel()]
    return out
