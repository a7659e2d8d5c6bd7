"""Data model of a decoded Chakra trace: :class:`EtNode`, :class:`EtMetadata`, :class:`EtTrace`, :class:`NodeTable`.

Everything here is re-exported by :mod:`netsim.chakra`; import it from there.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from netsim.vocab import MISSING, OP_KINDS, NodeType  # MISSING marks an absent integer attribute in NodeTable int64 columns

#: Node types of point-to-point messages (SEND and RECV).
SEND_RECV_TYPES = frozenset((int(NodeType.COMM_SEND_NODE), int(NodeType.COMM_RECV_NODE)))
#: The optional integer attributes a :class:`NodeTable` keeps as int64 columns (MISSING = absent).
INT_COLUMNS = ("comm_type", "comm_size", "comm_src", "comm_dst", "comm_tag", "comm_priority", "num_ops", "tensor_size",
               "gemm_m", "gemm_n")


@dataclass(slots=True)
class EtNode:
    """One Chakra node with normalised attributes (``None`` = attribute absent)."""

    id: int
    name: str = ""
    type: int = int(NodeType.INVALID_NODE)
    ctrl_deps: tuple[int, ...] = ()
    data_deps: tuple[int, ...] = ()
    duration_micros: int = 0
    comm_type: int | None = None
    comm_size: int | None = None
    comm_src: int | None = None
    comm_dst: int | None = None
    comm_tag: int | None = None
    comm_priority: int | None = None
    pg_name: str | None = None
    is_cpu_op: bool | None = None
    num_ops: int | None = None
    tensor_size: int | None = None
    involved_dim: tuple[bool, ...] | None = None
    #: Kernel kind of a compute node, one of :data:`netsim.vocab.OP_KINDS` (netsim's own attribute).
    op_kind: str | None = None
    #: Output rows and columns of a compute node that is one matrix multiply (netsim's own attributes; its
    #: reduction depth is ``num_ops / (2 * gemm_m * gemm_n)``): the GEMM-shape model times it by its tiles
    #: (:mod:`netsim.workload.gemm`).  Absent on other nodes.
    gemm_m: int | None = None
    gemm_n: int | None = None
    other: dict[str, Any] | None = None
    #: IOInfo ``inputs.values`` (a string).  Readers fill it on METADATA nodes only
    #: (e.g. PyTorch's ``## process_group:init ##``); the writer writes it whenever set.
    inputs: str | None = None


@dataclass(slots=True)
class EtMetadata:
    """The GlobalMetadata record: ``version`` string and attributes as Python values."""

    version: str
    attrs: dict[str, Any]


@dataclass(slots=True)
class EtTrace:
    """A whole trace file: metadata plus nodes in file order."""

    metadata: EtMetadata
    nodes: list[EtNode]


def _attr_column(name: str) -> property:
    """A NodeTable column gathered (once, then cached) from the per-code attribute table."""
    def get(self: NodeTable) -> np.ndarray:
        col = self.cache.get(name)
        if col is None:
            col = self.attr_columns[name][self.attr_code]
            if name == "comm_type":
                col[np.isin(self.type, list(SEND_RECV_TYPES))] = MISSING
            self.cache[name] = col
        return col
    return property(get, doc=f"``{name}`` per row (see :class:`NodeTable`).")


@dataclass(slots=True, eq=False)
class NodeTable:
    """Columnar view of one trace file (row i = i-th node in file order).

    Attribute columns (``comm_type``, ``comm_size``, ``comm_src``, ``comm_dst``,
    ``comm_tag``, ``comm_priority``, ``num_ops``, ``tensor_size``: int64 with
    :data:`MISSING` when absent, ``comm_type`` also MISSING on SEND/RECV;
    ``pg``/``involved_dim``: int32 indexes into ``pg_names``/``involved_dims``,
    -1 when absent; ``is_cpu_op``: int8 -1/0/1; ``op_kind``: int8 index into
    :data:`netsim.vocab.OP_KINDS`, -1 when absent) are gathered on first access
    from ``attr_columns`` (one row per distinct attribute set) by ``attr_code``.
    Dependencies are CSR: node i's data deps are
    ``data_deps[data_ptr[i]:data_ptr[i + 1]]`` (likewise ctrl).  ``other``
    (only with ``read_et_table(..., other=True)``) holds one dict per row;
    rows with identical attributes share the dict, so treat it as read-only.
    ``inputs`` maps the row of each METADATA node that has an IOInfo ``inputs``
    to its ``inputs.values`` string (other nodes' IOInfo is not kept).
    """

    source: str
    metadata: EtMetadata
    id: np.ndarray
    name: list[str]
    type: np.ndarray
    duration_micros: np.ndarray
    attr_code: np.ndarray
    attr_columns: dict[str, np.ndarray]
    pg_names: list[str]
    involved_dims: list[tuple[bool, ...]]
    data_ptr: np.ndarray
    data_deps: np.ndarray
    ctrl_ptr: np.ndarray
    ctrl_deps: np.ndarray
    other: list[dict[str, Any]] | None = None
    inputs: dict[int, str] = field(default_factory=dict)
    cache: dict[str, np.ndarray] = field(default_factory=dict, repr=False, compare=False)

    comm_type = _attr_column("comm_type")
    comm_size = _attr_column("comm_size")
    comm_src = _attr_column("comm_src")
    comm_dst = _attr_column("comm_dst")
    comm_tag = _attr_column("comm_tag")
    comm_priority = _attr_column("comm_priority")
    num_ops = _attr_column("num_ops")
    tensor_size = _attr_column("tensor_size")
    pg = _attr_column("pg")
    is_cpu_op = _attr_column("is_cpu_op")
    involved_dim = _attr_column("involved_dim")
    op_kind = _attr_column("op_kind")
    gemm_m = _attr_column("gemm_m")
    gemm_n = _attr_column("gemm_n")

    def __len__(self) -> int:
        return int(self.id.size)

    @property
    def peer(self) -> np.ndarray:
        """Peer rank: comm_dst on SEND, comm_src on RECV, MISSING elsewhere."""
        return np.where(self.type == NodeType.COMM_SEND_NODE, self.comm_dst,
                        np.where(self.type == NodeType.COMM_RECV_NODE, self.comm_src, MISSING))

    def node(self, i: int) -> EtNode:
        """Return row ``i`` as an :class:`EtNode`."""
        def opt(col: np.ndarray) -> int | None:
            v = int(col[i])
            return None if v == MISSING else v
        pg, dim, cpu, kind = int(self.pg[i]), int(self.involved_dim[i]), int(self.is_cpu_op[i]), int(self.op_kind[i])
        return EtNode(
            int(self.id[i]), self.name[i], int(self.type[i]),
            tuple(self.ctrl_deps[self.ctrl_ptr[i]:self.ctrl_ptr[i + 1]].tolist()),
            tuple(self.data_deps[self.data_ptr[i]:self.data_ptr[i + 1]].tolist()),
            int(self.duration_micros[i]), *(opt(getattr(self, c)) for c in INT_COLUMNS[:6]),
            pg_name=self.pg_names[pg] if pg >= 0 else None, is_cpu_op=None if cpu < 0 else bool(cpu),
            num_ops=opt(self.num_ops), tensor_size=opt(self.tensor_size),
            involved_dim=self.involved_dims[dim] if dim >= 0 else None, op_kind=OP_KINDS[kind] if kind >= 0 else None,
            gemm_m=opt(self.gemm_m), gemm_n=opt(self.gemm_n),
            other=dict(self.other[i]) if self.other is not None else None, inputs=self.inputs.get(i))

    def dep_tuples(self, kind: str = "data") -> list[tuple[int, ...]]:
        """Per-row dependency ids as tuples; ``kind`` is ``"data"`` or ``"ctrl"``."""
        return _tuples((self.data_deps, self.data_ptr) if kind == "data" else (self.ctrl_deps, self.ctrl_ptr))

    def iter_nodes(self) -> Iterator[EtNode]:
        """Yield every row as an :class:`EtNode`."""
        return (self.node(i) for i in range(len(self)))


def _tuples(csr: tuple[np.ndarray, np.ndarray]) -> list[tuple[int, ...]]:
    """One tuple per row of a CSR pair."""
    values, ptr = csr
    if not values.size:
        return [()] * (ptr.size - 1)
    v, p = values.tolist(), ptr.tolist()
    return [tuple(v[i:j]) for i, j in zip(p, p[1:])]


def op_kind_codes(values) -> np.ndarray:
    """The ``op_kind`` column of some attribute rows: index into :data:`OP_KINDS`, -1 when absent."""
    return np.array([-1 if v is None else OP_KINDS.index(v) for v in values], np.int8)
