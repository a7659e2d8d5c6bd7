"""Shared vocabulary: the names and codes every layer may use, with no dependencies.

A leaf module (standard library only): the simulation (``workload/``, ``astra/``), the
results writer (``results/``) and the analyses (``analysis/``) all read these, so they
live below all of them instead of inside one of them.

* :data:`TIER_ORDER`, :data:`SWITCH_KINDS`: how links are grouped into tiers;
* :data:`LINK_STATUS`: the codes of a link's fault status;
* :func:`normalize_group_name`: the canonical key of a communicator-group name;
* :class:`NodeType`, :class:`CommType`, :data:`MISSING`: the Chakra node and collective
  codes (reference §3.3) and the marker of an absent integer attribute in node tables.

>>> LINK_STATUS[2], TIER_ORDER.index("spine") > TIER_ORDER.index("leaf")
('failed', True)
"""

from __future__ import annotations

import enum
import re

__all__ = ["TIER_ORDER", "SWITCH_KINDS", "LINK_STATUS", "OP_KINDS", "normalize_group_name", "NodeType", "CommType",
           "MISSING"]

#: A link's tier is the kind of its higher endpoint in this order (gpu-nvswitch: nvswitch; leaf-spine: spine).
TIER_ORDER = ("gpu", "nic", "nvswitch", "leaf", "spine", "core", "switch")
#: Node kinds that are switches.
SWITCH_KINDS = ("nvswitch", "leaf", "spine", "core", "switch")
#: A link's status code indexes this tuple: 0 ok, 1 degraded, 2 failed.
LINK_STATUS = ("ok", "degraded", "failed")

#: Kernel kinds of a compute node (the ``op_kind`` string attribute netsim's generator writes; a node table
#: holds the index, -1 when absent).  A GPU preset gives each kind its achieved fraction of the roofline:
#: ``gemm`` (matrix multiplies: projections, MLPs, experts, router, LM head), ``attn_fwd`` / ``attn_bwd`` (the
#: fused core-attention kernel, FlashAttention, forward and backward), ``elementwise`` (memory-bound kernels:
#: norms, residual adds, activations, rotary embeddings, embedding lookups).
OP_KINDS = ("gemm", "attn_fwd", "attn_bwd", "elementwise")

#: Marks an absent integer attribute in Chakra node-table int64 columns.
MISSING = -(2**63)

_DECIMAL = re.compile(r"\s*([+-]?\d+)(?:\.(\d*))?\s*", re.ASCII)


def normalize_group_name(name: str) -> str:
    """Canonical key of a communicator-group name: integral decimal names by value
    ("1.0" -> "1", "007" -> "7"), others unchanged.

    >>> normalize_group_name("1.0"), normalize_group_name("c2f2f8a1"), normalize_group_name("1.5")
    ('1', 'c2f2f8a1', '1.5')
    >>> normalize_group_name("1e3")
    '1e3'
    """
    m = _DECIMAL.fullmatch(name)
    if m is None or (m.group(2) or "").strip("0"):
        return name
    return str(int(m.group(1)))


class NodeType(enum.IntEnum):
    """Chakra ``NodeType`` (the ``Node.type`` field).

    Examples
    --------
    >>> NodeType(7).name
    'COMM_COLL_NODE'
    """

    INVALID_NODE = 0
    METADATA_NODE = 1
    MEM_LOAD_NODE = 2
    MEM_STORE_NODE = 3
    COMP_NODE = 4
    COMM_SEND_NODE = 5
    COMM_RECV_NODE = 6
    COMM_COLL_NODE = 7


class CommType(enum.IntEnum):
    """Chakra ``CollectiveCommType`` (the value of the ``comm_type`` attribute).

    Examples
    --------
    >>> CommType(7).name
    'REDUCE_SCATTER'
    """

    ALL_REDUCE = 0
    REDUCE = 1
    ALL_GATHER = 2
    GATHER = 3
    SCATTER = 4
    BROADCAST = 5
    ALL_TO_ALL = 6
    REDUCE_SCATTER = 7
    REDUCE_SCATTER_BLOCK = 8
    BARRIER = 9
