"""What ``netsim run`` needs of a Chakra trace beyond decoding (vectorized over a NodeTable).

The decoder accepts any well-formed protobuf (``netsim trace inspect`` shows whatever a
file holds); a run needs meaningful values, so :func:`check_runnable` refuses, naming the
file, node and field:

* a node ``type`` outside Chakra's ``NodeType`` (0-7);
* a GPU collective (``COMM_COLL_NODE``, ``is_cpu_op`` not true) without ``comm_type``, or
  any collective with one outside ``CollectiveCommType`` (0-9);
* a collective with a ``comm_type`` other than ``BARRIER``, a send or a receive without
  ``comm_size`` (it would move 0 bytes; host-side collectives without ``comm_type``, as
  PyTorch traces hold, need none);
* a negative ``comm_size``, ``tensor_size``, ``num_ops`` or ``duration_micros``
  (:func:`check_sizes`, which ``netsim trace inspect`` applies too);
* a node whose data dependencies name itself.

>>> import numpy as np
>>> from netsim.chakra import EtNode, NodeType, read_et_table, write_et
>>> import os, tempfile
>>> p = os.path.join(tempfile.mkdtemp(), "t.0.et")
>>> write_et(p, [EtNode(0, "c", NodeType.COMM_COLL_NODE, comm_type=99, comm_size=8)])
>>> check_runnable(read_et_table(p))
Traceback (most recent call last):
...
netsim.errors.InputError: ...t.0.et: node 0 (c): comm_type: expected a Chakra CollectiveCommType 0-9, got 99
"""

from __future__ import annotations

import numpy as np

from netsim.errors import InputError
from netsim.chakra.schema import CommType, NodeType
from netsim.chakra.model import MISSING, NodeTable

_NODE_TYPES = np.array([int(t) for t in NodeType])
_COMM_TYPES = np.array([int(t) for t in CommType])
_P2P_TYPES = np.array([int(NodeType.COMM_SEND_NODE), int(NodeType.COMM_RECV_NODE)])


def check_runnable(table: NodeTable) -> None:
    """Raise InputError at the first node ``netsim run`` cannot simulate meaningfully."""
    _first(table, ~np.isin(table.type, _NODE_TYPES), "type",
           lambda i: f"expected a Chakra NodeType {_NODE_TYPES.min()}-{_NODE_TYPES.max()}, got {table.type[i]}")
    coll = table.type == int(NodeType.COMM_COLL_NODE)
    ct = table.comm_type
    gpu = table.is_cpu_op != 1  # host-side collectives without comm_type run on the CPU lane (runner)
    _first(table, coll & gpu & (ct == MISSING), "comm_type",
           lambda i: "a GPU collective (is_cpu_op not true) needs a comm_type attribute")
    _first(table, coll & (ct != MISSING) & ~np.isin(ct, _COMM_TYPES), "comm_type",
           lambda i: f"expected a Chakra CollectiveCommType {_COMM_TYPES.min()}-{_COMM_TYPES.max()}, got {ct[i]}")
    moves = (coll & (ct != MISSING) & (ct != int(CommType.BARRIER))) | np.isin(table.type, _P2P_TYPES)
    _first(table, moves & (table.comm_size == MISSING), "comm_size",
           lambda i: f"a {_what(table, i)} needs a comm_size attribute (bytes; without it nothing would move)")
    check_sizes(table)
    # Data dependencies only: PyTorch-converted traces carry control self-dependencies (e.g. 383 in
    # mlcommons/chakra tests/data/chakra.0.et) that the runner ignores, as Chakra's feeder does.
    owner = np.repeat(np.arange(table.id.size), np.diff(table.data_ptr))
    self_dep = np.zeros(table.id.size, dtype=bool)
    self_dep[owner[table.data_deps == table.id[owner]]] = True
    _first(table, self_dep, "data_deps", lambda i: "a node cannot depend on its own output")


def check_sizes(table: NodeTable) -> None:
    """Raise InputError at the first negative ``comm_size``, ``tensor_size``, ``num_ops`` or
    ``duration_micros`` (Chakra's byte, operation and time counts)."""
    for name in ("comm_size", "tensor_size", "num_ops", "duration_micros"):
        col = getattr(table, name)
        _first(table, (col != MISSING) & (col < 0), name, lambda i, c=col: f"expected >= 0, got {c[i]}")


def _what(table: NodeTable, i: int) -> str:
    """``collective (ALL_REDUCE)``, ``send`` or ``receive``: node ``i`` as a message names it."""
    t = int(table.type[i])
    if t == int(NodeType.COMM_SEND_NODE):
        return "send"
    if t == int(NodeType.COMM_RECV_NODE):
        return "receive"
    return f"collective ({CommType(int(table.comm_type[i])).name})"


def _first(table: NodeTable, bad: np.ndarray, field: str, message) -> None:
    rows = np.flatnonzero(bad)
    if rows.size:
        i = int(rows[0])
        more = f" ({rows.size - 1} more nodes like it)" if rows.size > 1 else ""
        raise InputError(message(i) + more, source=table.source,
                         field=f"node {int(table.id[i])} ({table.name[i]}): {field}")
