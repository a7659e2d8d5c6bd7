"""Read and write Chakra execution traces (``.et``), fast.

File layout (``reference.md`` §3.1): records, each a base-128 varint length
then one protobuf message; record 0 is ``GlobalMetadata``, the rest ``Node``.
The whole stream may be gzipped (detected by the ``1f 8b`` magic).

Two reading APIs share one decoder:

* :func:`read_et_table` → columnar :class:`NodeTable` (numpy, deps as CSR).
  This is the one the simulator uses.
* :func:`iter_nodes` / :func:`read_et` → one :class:`EtNode` per node.

Why it is fast: the node head (fields 1-9) of a chunk of records is scanned
with numpy in lock-step (one vectorized step per *field*, not per node),
packed dependency lists are decoded with numpy, and the attribute block (the
run of field-10 entries that ends a record) is decoded once per distinct byte
string; generated traces repeat attribute blocks, so most nodes cost one dict
lookup.  A record the fast path does not fully understand (unknown fields,
fields after the attributes, odd encodings) is re-parsed with the protobuf
classes, so the result never depends on which path ran.

Attribute normalisation (reference §3.4) lives in
:func:`netsim.workload.chakra_schema.normalize_attrs`.

Examples
--------
>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "w.0.et")
>>> write_et(path, [EtNode(id=1, name="ar", type=NodeType.COMM_COLL_NODE, comm_type=0, comm_size=1 << 20)])
>>> read_et(path).nodes[0].comm_size
1048576
"""

from __future__ import annotations

import gzip
import os
import tempfile
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from netsim.errors import InputError
from netsim.workload.chakra_schema import (
    NORMALIZED_ATTRS,
    AttrTypeError,
    CommType,
    NodeType,
    attr_to_python,
    chakra_classes,
    known_attr_list,
    normalize_attrs,
    python_to_attr,
)

__all__ = [
    "MISSING", "CommType", "EtMetadata", "EtNode", "EtTrace", "NodeTable", "NodeType",
    "iter_nodes", "iter_records", "read_et", "read_et_table", "read_metadata", "write_et", "write_workload",
]

#: Marks an absent integer attribute in :class:`NodeTable` int64 columns.
MISSING = -(2**63)
_INT64_MAX = 2**63 - 1
_MAX_LEN = 2**32
_CHUNK = 1 << 16
_MEMO_CAP = 1 << 16
_SEND_RECV = frozenset((int(NodeType.COMM_SEND_NODE), int(NodeType.COMM_RECV_NODE)))
_INT_COLS = ("comm_type", "comm_size", "comm_src", "comm_dst", "comm_tag", "comm_priority", "num_ops", "tensor_size")
# Node head tags the vectorized scanner understands: tag byte -> kind.
_HEAD_KINDS = {0x08: 1, 0x12: 2, 0x18: 3, 0x22: 4, 0x2A: 5, 0x30: 6, 0x38: 7, 0x42: 8, 0x4A: 8}
_ATTR_TAG = 0x52


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
    other: dict[str, Any] | None = None


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


@dataclass(slots=True)
class NodeTable:
    """Columnar view of one trace file (row i = i-th node in file order).

    Integer attribute columns are int64 with :data:`MISSING` for absent values
    (``comm_type`` is also MISSING on SEND/RECV); ``pg``/``involved_dim`` index
    ``pg_names``/``involved_dims`` (-1 = absent); ``is_cpu_op`` is -1/0/1.
    Dependencies are CSR: node i's data deps are
    ``data_deps[data_ptr[i]:data_ptr[i + 1]]`` (likewise ctrl).
    """

    source: str
    metadata: EtMetadata
    id: np.ndarray
    name: list[str]
    type: np.ndarray
    duration_micros: np.ndarray
    comm_type: np.ndarray
    comm_size: np.ndarray
    comm_src: np.ndarray
    comm_dst: np.ndarray
    comm_tag: np.ndarray
    comm_priority: np.ndarray
    num_ops: np.ndarray
    tensor_size: np.ndarray
    pg: np.ndarray
    pg_names: list[str]
    is_cpu_op: np.ndarray
    involved_dim: np.ndarray
    involved_dims: list[tuple[bool, ...]]
    data_ptr: np.ndarray
    data_deps: np.ndarray
    ctrl_ptr: np.ndarray
    ctrl_deps: np.ndarray
    other: list[dict[str, Any]] | None = None

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
        pg, dim, cpu = int(self.pg[i]), int(self.involved_dim[i]), int(self.is_cpu_op[i])
        return EtNode(
            int(self.id[i]), self.name[i], int(self.type[i]),
            tuple(self.ctrl_deps[self.ctrl_ptr[i]:self.ctrl_ptr[i + 1]].tolist()),
            tuple(self.data_deps[self.data_ptr[i]:self.data_ptr[i + 1]].tolist()),
            int(self.duration_micros[i]), *(opt(getattr(self, c)) for c in _INT_COLS[:6]),
            pg_name=self.pg_names[pg] if pg >= 0 else None, is_cpu_op=None if cpu < 0 else bool(cpu),
            num_ops=opt(self.num_ops), tensor_size=opt(self.tensor_size),
            involved_dim=self.involved_dims[dim] if dim >= 0 else None,
            other=dict(self.other[i]) if self.other is not None else None)

    def iter_nodes(self) -> Iterator[EtNode]:
        """Yield every row as an :class:`EtNode`."""
        return (self.node(i) for i in range(len(self)))


# --------------------------------------------------------------------------- framing


def _load(path: str | os.PathLike) -> tuple[bytes, bool]:
    """Read a file, gunzipping it when it starts with the gzip magic."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read trace file: {exc.strerror or exc}", source=str(path)) from exc
    if data[:2] != b"\x1f\x8b":
        return data, False
    try:
        return gzip.decompress(data), True
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(f"starts with the gzip magic 1f 8b but does not decompress: {exc}",
                         source=str(path)) from exc


def _read_len(data: bytes, pos: int, index: int, source: str) -> tuple[int, int]:
    """Decode a multi-byte record length at ``pos``; return (length, body offset)."""
    value = shift = 0
    start, n = pos, len(data)
    while True:
        if pos >= n:
            raise InputError(f"truncated record length at byte offset {start}: expected a base-128 varint "
                             f"but the file ends", source=source, field=f"record[{index}]")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if value > _MAX_LEN or shift > 35:
            raise InputError(f"record length at byte offset {start} exceeds the 2**32-byte cap; "
                             f"expected a record length (is this a Chakra .et file?)",
                             source=source, field=f"record[{index}]")
        if b < 0x80:
            return value, pos


def _frame(data: bytes, pos: int, index: int, limit: int, source: str) -> tuple[list[int], list[int], int]:
    """Split up to ``limit`` records from ``pos``; return (body starts, body ends, next pos)."""
    starts: list[int] = []
    ends: list[int] = []
    n = len(data)
    for k in range(index, index + limit):
        if pos >= n:
            break
        b = data[pos]
        length, body = (b, pos + 1) if b < 0x80 else _read_len(data, pos, k, source)
        if body + length > n:
            raise InputError(f"truncated record at byte offset {pos}: expected {length} bytes of message, "
                             f"found {n - body}", source=source, field=f"record[{k}]")
        starts.append(body)
        ends.append(body + length)
        pos = body + length
    return starts, ends, pos


def iter_records(path: str | os.PathLike) -> Iterator[bytes]:
    """Yield the raw message bytes of every record (gzip handled, empty records kept).

    Examples
    --------
    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "t.et")
    >>> _ = Path(p).write_bytes(b"\\x02ab\\x00\\x01c")
    >>> list(iter_records(p))
    [b'ab', b'', b'c']
    """
    data, _ = _load(path)
    pos = index = 0
    while pos < len(data):
        starts, ends, pos = _frame(data, pos, index, _CHUNK, str(path))
        index += len(starts)
        yield from (data[s:e] for s, e in zip(starts, ends))


# --------------------------------------------------------------------------- vectorized scanning


def _varints(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Decode one varint at each offset; return (value uint64, byte length, ok)."""
    first = buf.take(pos, mode="clip")
    val = (first & 0x7F).astype(np.uint64)
    length = np.ones(pos.size, np.int64)
    ok = np.ones(pos.size, bool)
    multi = np.flatnonzero(first >= 0x80)
    if multi.size:
        b = buf.take(pos[multi, None] + np.arange(10), mode="clip")
        term = b < 0x80
        ln = term.argmax(axis=1) + 1
        parts = (b & 0x7F).astype(np.uint64) << (np.arange(10, dtype=np.uint64) * np.uint64(7))
        parts[np.arange(10) >= ln[:, None]] = 0
        val[multi] = parts.sum(axis=1, dtype=np.uint64)
        length[multi] = ln
        ok[multi] = term.any(axis=1) & ~((ln == 10) & (b[:, 9] > 1))
    return val, length, ok


def _scan_heads(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> dict[str, np.ndarray]:
    """Scan Node fields 1-9 of every record in lock-step until the first attribute tag."""
    n = starts.size
    kinds = np.zeros(256, np.int8)
    kinds[list(_HEAD_KINDS)] = list(_HEAD_KINDS.values())
    out = {k: np.zeros(n, np.uint64) for k in ("id", "type", "dur")}
    out.update({k: np.full(n, -1, np.int64) for k in ("ctrl_a", "ctrl_b", "data_a", "data_b")})
    out.update(name_a=np.zeros(n, np.int64), name_b=np.zeros(n, np.int64), attr_a=ends.copy(),
               fallback=np.zeros(n, bool))
    idx = np.flatnonzero(starts < ends)
    cur = starts[idx]
    while idx.size:
        tag = buf.take(cur, mode="clip")
        at_attr = tag == _ATTR_TAG
        out["attr_a"][idx[at_attr]] = cur[at_attr]
        idx, cur, tag = idx[~at_attr], cur[~at_attr], tag[~at_attr]
        val, ln, ok = _varints(buf, cur + 1)
        body = cur + 1 + ln
        kind = kinds[tag]
        is_len = (tag & 7) == 2
        room = ends[idx] - body
        bad = (kind == 0) | ~ok | (room < 0) | (is_len & (val > np.maximum(room, 0).astype(np.uint64)))
        bad |= ((kind == 4) & (out["ctrl_a"][idx] >= 0)) | ((kind == 5) & (out["data_a"][idx] >= 0))
        bad |= (kind == 3) & (val >= 2**31)
        out["fallback"][idx[bad]] = True
        good = ~bad
        idx, val, body, kind = idx[good], val[good], body[good], kind[good]
        nxt = body + np.where(is_len[good], val, 0).astype(np.int64)
        for k, col in ((1, "id"), (3, "type"), (7, "dur")):
            sel = kind == k
            out[col][idx[sel]] = val[sel]
        for k, col in ((2, "name"), (4, "ctrl"), (5, "data")):
            sel = kind == k
            out[f"{col}_a"][idx[sel]] = body[sel]
            out[f"{col}_b"][idx[sel]] = nxt[sel]
        more = nxt < ends[idx]
        idx, cur = idx[more], nxt[more]
    return out


def _unpack(buf: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Decode packed varint lists buf[a:b] (a < 0 = absent); return (values, CSR ptr, bad record)."""
    n = a.size
    lens = np.where(a >= 0, b - a, 0)
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(lens, out=ptr[1:])
    bad = np.zeros(n, bool)
    if ptr[-1] == 0:
        return np.zeros(0, np.uint64), ptr.copy(), bad
    rec = np.repeat(np.arange(n), lens)
    byt = buf[np.arange(ptr[-1]) + (a - ptr[:-1])[rec]]
    term = byt < 0x80
    start = np.empty(byt.size, bool)
    start[0] = True
    start[1:] = term[:-1]
    nonempty = lens > 0
    start[ptr[:-1][nonempty]] = True
    bad[nonempty] = ~term[ptr[1:][nonempty] - 1]
    sidx = np.flatnonzero(start)
    k = np.arange(byt.size) - sidx[np.cumsum(start) - 1]
    over = (k >= 10) | ((k == 9) & (byt > 1))
    bad[rec[over]] = True
    parts = (byt & 0x7F).astype(np.uint64) << (np.minimum(k, 9).astype(np.uint64) * np.uint64(7))
    values = np.add.reduceat(parts, sidx)
    cstart = np.zeros(byt.size + 1, np.int64)
    np.cumsum(start, out=cstart[1:])
    vptr = np.zeros(n + 1, np.int64)
    np.cumsum(cstart[ptr[1:]] - cstart[ptr[:-1]], out=vptr[1:])
    return values, vptr, bad


# --------------------------------------------------------------------------- attribute memo


class _AttrDecoder:
    """Per-read memo: attribute-block bytes → code → normalised attribute tuple."""

    def __init__(self, with_other: bool):
        self.with_other = with_other
        self.memo: dict[bytes, int] = {}
        self.values: list[tuple[Any, ...]] = []
        self.bad_comm_type: set[int] = set()  # codes whose comm_type is unreadable (ok on SEND/RECV)
        self.pg_index: dict[str, int] = {}
        self.dim_index: dict[tuple[bool, ...], int] = {}
        self._cols: dict[str, np.ndarray] = {}

    def add(self, attrs: Any) -> int:
        """Normalise an AttributeProto list and return its new code."""
        try:
            norm = normalize_attrs(attrs, self.with_other)
        except AttrTypeError as exc:
            if exc.name != "comm_type":
                raise
            norm = normalize_attrs([a for a in attrs if a.name != "comm_type"], self.with_other)
            self.bad_comm_type.add(len(self.values))
        self.values.append(norm)
        return len(self.values) - 1

    def learn(self, block: bytes) -> int:
        """Code of an attribute block, or -1 if the record must take the full-parse path."""
        code = self.memo.get(block)
        if code is not None:
            return code
        classes = chakra_classes()
        try:
            parts = list(classes.NodeRaw.FromString(block).attr)
            exact = classes.NodeRaw(attr=parts).SerializeToString() == block
            attrs = [classes.AttributeProto.FromString(p) for p in parts] if exact else None
        except DecodeError:
            attrs = None
        code = -1 if attrs is None else self.add(attrs)
        self.memo[block] = code
        return code

    def codes(self, keys: list[bytes]) -> list[int]:
        """Codes for many blocks (the fast path: one dict lookup per node)."""
        get = self.memo.get
        codes = [get(k, -2) for k in keys]
        if -2 in codes:
            codes = [c if c != -2 else self.learn(k) for c, k in zip(codes, keys)]
        return codes

    def columns(self) -> dict[str, np.ndarray]:
        """Table columns indexed by code (extended incrementally)."""
        done = self._cols["comm_size"].size if self._cols else 0
        new = self.values[done:]
        if new or not self._cols:
            cols = dict(zip(NORMALIZED_ATTRS, zip(*new))) if new else dict.fromkeys(NORMALIZED_ATTRS, ())
            ext = {c: np.array([MISSING if v is None else v for v in cols[c]], np.int64) for c in _INT_COLS}
            ext["pg"] = np.array([-1 if v is None else self.pg_index.setdefault(v, len(self.pg_index))
                                  for v in cols["pg_name"]], np.int32)
            ext["is_cpu_op"] = np.array([-1 if v is None else int(v) for v in cols["is_cpu_op"]], np.int8)
            ext["involved_dim"] = np.array([-1 if v is None else self.dim_index.setdefault(v, len(self.dim_index))
                                            for v in cols["involved_dim"]], np.int32)
            self._cols = {k: np.concatenate([self._cols[k], v]) if self._cols else v for k, v in ext.items()}
        return self._cols

    def maybe_reset(self) -> None:
        """Bound memory on traces whose attribute blocks never repeat (call between chunks)."""
        if len(self.values) > _MEMO_CAP:
            self.memo.clear()
            self.values.clear()
            self.bad_comm_type.clear()
            self._cols = {}


# --------------------------------------------------------------------------- chunk decoding


@dataclass(slots=True)
class _Chunk:
    """Decoded records of one chunk (attributes as codes into the decoder's values)."""

    ids: np.ndarray
    names: list[str]
    types: np.ndarray
    dur: np.ndarray
    ctrl: tuple[np.ndarray, np.ndarray]
    data: tuple[np.ndarray, np.ndarray]
    codes: np.ndarray


def _legacy_error(source: str, rec: bytes) -> InputError:
    return InputError(
        "this is a legacy Chakra v0.0.x (pre-2023-10, proto2) trace: record 0 is a Node (it starts with "
        "varint field 1, a node id) instead of a GlobalMetadata record, and attributes use field 11. That "
        "format is not wire-compatible with the current Chakra schema; re-generate the trace with a current "
        "chakra (converter or et_generator) to get a GlobalMetadata-first file", source=source, field="record[0]")


def _patch_csr(csr: tuple[np.ndarray, np.ndarray], rows: list[int], lists: list[Sequence[int]]
               ) -> tuple[np.ndarray, np.ndarray]:
    """Replace the lists of ``rows`` in a CSR pair."""
    values, ptr = csr
    pieces = np.split(values, ptr[1:-1]) if ptr.size > 1 else []
    for r, lst in zip(rows, lists):
        pieces[r] = np.array(lst, np.uint64)
    new_ptr = np.zeros(ptr.size, np.int64)
    np.cumsum([p.size for p in pieces], out=new_ptr[1:])
    return (np.concatenate(pieces) if pieces else values), new_ptr


class _Reader:
    """One open trace: bytes, metadata and the chunked fast decoder."""

    def __init__(self, path: str | os.PathLike, with_other: bool):
        self.source = str(path)
        self.data, _ = _load(path)
        self.buf = np.frombuffer(self.data, np.uint8)
        self.decoder = _AttrDecoder(with_other)
        self.metadata, self.pos = self._read_metadata()

    def _read_metadata(self) -> tuple[EtMetadata, int]:
        starts, ends, pos = _frame(self.data, 0, 0, 1, self.source)
        if not starts:
            raise InputError("empty file: expected a GlobalMetadata record", source=self.source)
        rec = self.data[starts[0]:ends[0]]
        if rec[:1] == b"\x08":
            raise _legacy_error(self.source, rec)
        try:
            meta = chakra_classes().GlobalMetadata.FromString(rec)
        except DecodeError as exc:
            raise InputError(f"record 0 is not a valid GlobalMetadata message: {exc}",
                             source=self.source, field="record[0]") from exc
        if meta.version.startswith("\n"):
            raise InputError("GlobalMetadata field 1 holds attributes, not a version string: this is the "
                             "transitional 2023-08..10 Chakra format; re-generate the trace with a current chakra",
                             source=self.source, field="record[0]")
        attrs: dict[str, Any] = {}
        for a in meta.attr:
            attrs.setdefault(a.name, attr_to_python(a))
        return EtMetadata(meta.version, attrs), pos

    def chunks(self) -> Iterator[_Chunk]:
        pos, index = self.pos, 1
        while pos < len(self.data):
            starts, ends, pos = _frame(self.data, pos, index, _CHUNK, self.source)
            self.decoder.maybe_reset()
            yield self._decode(np.array(starts, np.int64), np.array(ends, np.int64), index)
            index += len(starts)

    def _error(self, msg: str, index: int, field: str = "") -> InputError:
        return InputError(msg, source=self.source, field=f"record[{index}]{field}")

    def _decode(self, starts: np.ndarray, ends: np.ndarray, index: int) -> _Chunk:
        h = _scan_heads(self.buf, starts, ends)
        ctrl, data = _unpack(self.buf, h["ctrl_a"], h["ctrl_b"]), _unpack(self.buf, h["data_a"], h["data_b"])
        fb = h["fallback"] | ctrl[2] | data[2]
        names = self._names(h["name_a"].tolist(), h["name_b"].tolist(), fb)
        keys = [self.data[a:b] for a, b in zip(h["attr_a"].tolist(), ends.tolist())]
        codes = np.array(self._codes(keys, h["id"], index), np.int64)
        fb |= codes < 0
        chunk = _Chunk(h["id"], names, h["type"].astype(np.int64), h["dur"], ctrl[:2], data[:2], codes)
        if fb.any():
            self._fallback(chunk, np.flatnonzero(fb).tolist(), starts, ends, index)
        return self._finish(chunk, index)

    def _names(self, a: list[int], b: list[int], fb: np.ndarray) -> list[str]:
        data = self.data
        try:
            return [data[i:j].decode() for i, j in zip(a, b)]
        except UnicodeDecodeError:
            names = []
            for k, (i, j) in enumerate(zip(a, b)):
                try:
                    names.append(data[i:j].decode())
                except UnicodeDecodeError:
                    names.append("")
                    fb[k] = True  # the full parse reports it
            return names

    def _codes(self, keys: list[bytes], ids: np.ndarray, index: int) -> list[int]:
        get = self.decoder.memo.get
        codes = [get(k, -2) for k in keys]
        if -2 not in codes:
            return codes
        for k, code in enumerate(codes):
            if code == -2:
                try:
                    codes[k] = self.decoder.learn(keys[k])
                except AttrTypeError as exc:
                    raise self._error(str(exc), index + k, f".attr.{exc.name} (node id {ids[k]})") from exc
        return codes

    def _fallback(self, chunk: _Chunk, rows: list[int], starts: np.ndarray, ends: np.ndarray, index: int) -> None:
        """Re-parse ``rows`` with the protobuf Node class and patch the chunk."""
        node_cls = chakra_classes().Node
        ctrl_lists, data_lists = [], []
        for r in rows:
            s, e = int(starts[r]), int(ends[r])
            try:
                m = node_cls.FromString(self.data[s:e])
            except DecodeError as exc:
                raise self._error(f"record at byte offset {s} is not a valid Chakra Node: {exc}", index + r) from exc
            chunk.ids[r], chunk.types[r], chunk.dur[r] = m.id, m.type, m.duration_micros
            chunk.names[r] = m.name
            try:
                chunk.codes[r] = self.decoder.add(m.attr)
            except AttrTypeError as exc:
                raise self._error(str(exc), index + r, f".attr.{exc.name} (node id {m.id})") from exc
            ctrl_lists.append(list(m.ctrl_deps))
            data_lists.append(list(m.data_deps))
        chunk.ctrl = _patch_csr(chunk.ctrl, rows, ctrl_lists)
        chunk.data = _patch_csr(chunk.data, rows, data_lists)

    def _finish(self, chunk: _Chunk, index: int) -> _Chunk:
        """Range-check uint64 fields into int64 and enforce the comm_type rule."""
        for what, arr in (("node id", chunk.ids), ("duration_micros", chunk.dur),
                          ("ctrl_deps", chunk.ctrl[0]), ("data_deps", chunk.data[0])):
            if arr.size and int(arr.max()) > _INT64_MAX:
                raise self._error(f"{what} value {int(arr.max())} does not fit in int64", index)
        chunk.ids, chunk.dur = chunk.ids.astype(np.int64), chunk.dur.astype(np.int64)
        chunk.ctrl = (chunk.ctrl[0].astype(np.int64), chunk.ctrl[1])
        chunk.data = (chunk.data[0].astype(np.int64), chunk.data[1])
        bad = self.decoder.bad_comm_type
        if bad:
            hit = np.isin(chunk.codes, list(bad)) & ~np.isin(chunk.types, list(_SEND_RECV))
            if hit.any():
                r = int(np.flatnonzero(hit)[0])
                raise self._error(bad[int(chunk.codes[r])], index + r, f".attr.comm_type (node id {chunk.ids[r]})")
        return chunk


# --------------------------------------------------------------------------- public readers


def read_et_table(path: str | os.PathLike, *, other: bool = False) -> NodeTable:
    """Read a trace into a columnar :class:`NodeTable` (the fast reader).

    Parameters
    ----------
    path
        A ``.et`` file (plain or gzipped).
    other
        Also collect every non-normalised attribute into ``table.other``
        (one dict per node; slower on traces with unique attributes).

    Examples
    --------
    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "t.0.et")
    >>> write_et(p, [EtNode(0, "a", NodeType.COMP_NODE, duration_micros=5),
    ...              EtNode(1, "b", NodeType.COMM_COLL_NODE, data_deps=(0,), comm_type=2, comm_size=64)])
    >>> t = read_et_table(p)
    >>> t.type.tolist(), t.comm_size.tolist()[1], t.data_deps[t.data_ptr[1]:t.data_ptr[2]].tolist()
    ([4, 7], 64, [0])
    """
    reader = _Reader(path, other)
    parts, sels, others = [], [], []
    for ch in reader.chunks():
        cols = reader.decoder.columns()
        sel = {k: v[ch.codes] for k, v in cols.items()}
        sel["comm_type"][np.isin(ch.types, list(_SEND_RECV))] = MISSING
        if other:
            vals = reader.decoder.values
            others.extend(vals[c][-1] for c in ch.codes.tolist())
        parts.append(ch)
        sels.append(sel)
    return _assemble(reader, parts, sels, others if other else None)


def _concat_csr(pairs: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate CSR (values, ptr) pairs."""
    if not pairs:
        return np.zeros(0, np.int64), np.zeros(1, np.int64)
    offsets = np.cumsum([0] + [int(p[1][-1]) for p in pairs[:-1]])
    ptr = np.concatenate([pairs[0][1][:1]] + [p[1][1:] + off for p, off in zip(pairs, offsets)])
    return np.concatenate([p[0] for p in pairs]), ptr


def _assemble(reader: _Reader, parts: list[_Chunk], sels: list[dict[str, np.ndarray]],
              others: list[dict[str, Any]] | None) -> NodeTable:
    """Concatenate decoded chunks into one NodeTable."""
    def cat(arrs: list[np.ndarray], dtype: Any) -> np.ndarray:
        return np.concatenate(arrs).astype(dtype, copy=False) if arrs else np.zeros(0, dtype)
    dcol = {k: cat([s[k] for s in sels], v.dtype) for k, v in reader.decoder.columns().items()}
    data_deps, data_ptr = _concat_csr([p.data for p in parts])
    ctrl_deps, ctrl_ptr = _concat_csr([p.ctrl for p in parts])
    return NodeTable(
        source=reader.source, metadata=reader.metadata,
        id=cat([p.ids for p in parts], np.int64), name=[n for p in parts for n in p.names],
        type=cat([p.types for p in parts], np.int32), duration_micros=cat([p.dur for p in parts], np.int64),
        **{c: dcol[c] for c in _INT_COLS}, pg=dcol["pg"], pg_names=list(reader.decoder.pg_index),
        is_cpu_op=dcol["is_cpu_op"], involved_dim=dcol["involved_dim"],
        involved_dims=list(reader.decoder.dim_index),
        data_ptr=data_ptr, data_deps=data_deps, ctrl_ptr=ctrl_ptr, ctrl_deps=ctrl_deps, other=others)


def _chunk_nodes(ch: _Chunk, values: list[tuple[Any, ...]]) -> Iterator[EtNode]:
    """Yield the EtNodes of a decoded chunk."""
    cv, cp = ch.ctrl[0].tolist(), ch.ctrl[1].tolist()
    dv, dp = ch.data[0].tolist(), ch.data[1].tolist()
    for i, (nid, name, typ, dur, code) in enumerate(zip(ch.ids.tolist(), ch.names, ch.types.tolist(),
                                                       ch.dur.tolist(), ch.codes.tolist())):
        node = EtNode(nid, name, typ, tuple(cv[cp[i]:cp[i + 1]]), tuple(dv[dp[i]:dp[i + 1]]), dur, *values[code])
        if typ in _SEND_RECV:
            node.comm_type = None
        if node.other is not None:
            node.other = dict(node.other)
        yield node


def iter_nodes(path: str | os.PathLike, *, other: bool = False) -> Iterator[EtNode]:
    """Stream the nodes of a trace as :class:`EtNode` (metadata is checked up front).

    Examples
    --------
    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "t.0.et")
    >>> write_et(p, [EtNode(3, "x", NodeType.COMM_SEND_NODE, comm_dst=1, comm_size=8, comm_tag=7)])
    >>> [(n.id, n.comm_dst, n.comm_tag) for n in iter_nodes(p)]
    [(3, 1, 7)]
    """
    reader = _Reader(path, other)

    def gen() -> Iterator[EtNode]:
        for ch in reader.chunks():
            yield from _chunk_nodes(ch, reader.decoder.values)
    return gen()


def read_et(path: str | os.PathLike, *, other: bool = False) -> EtTrace:
    """Read a whole trace as metadata plus a list of :class:`EtNode`.

    Parameters
    ----------
    path
        A ``.et`` file (plain or gzipped).
    other
        Fill ``EtNode.other`` with every non-normalised attribute.

    Examples
    --------
    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "t.0.et")
    >>> write_et(p, [EtNode(0, "c", NodeType.COMP_NODE, other={"rf_id": 9})], metadata_attrs={"schema": "x"})
    >>> tr = read_et(p, other=True)
    >>> tr.metadata.version, tr.metadata.attrs, tr.nodes[0].other
    ('0.0.4', {'schema': 'x'}, {'rf_id': 9})
    """
    reader = _Reader(path, other)
    nodes = [n for ch in reader.chunks() for n in _chunk_nodes(ch, reader.decoder.values)]
    return EtTrace(reader.metadata, nodes)


def read_metadata(path: str | os.PathLike) -> EtMetadata:
    """Return only the GlobalMetadata of a trace (legacy files are rejected).

    Examples
    --------
    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "t.0.et")
    >>> write_et(p, [], metadata_version="1.0.0")
    >>> read_metadata(p).version
    '1.0.0'
    """
    return _Reader(path, False).metadata
