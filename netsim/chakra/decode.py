"""Chunked decoder behind the Chakra readers: attribute memo, fast path + protobuf fallback, assembly.

:class:`ChunkReader` opens a trace, checks its GlobalMetadata and yields decoded
:class:`_Chunk` objects (columns as numpy arrays, attributes as codes into an
:class:`_AttrDecoder`); records the vectorised scan cannot fully handle are
re-parsed with the protobuf classes.  :func:`read_table` / :func:`_assemble`
build a :class:`NodeTable`, :func:`chunk_nodes` yields :class:`EtNode`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from netsim.errors import InputError
from netsim.chakra.scan import frame_records, load_bytes, byte_ranges, scan_heads, split_attrs, unpack_varint_lists
from netsim.chakra.schema import (
    NORMALIZED_ATTRS,
    AttrTypeError,
    NodeType,
    attr_to_python,
    chakra_classes,
    combine_attrs,
    normalize_attr,
)
from netsim.chakra.model import INT_COLUMNS, MISSING, SEND_RECV_TYPES, EtMetadata, EtNode, NodeTable, op_kind_codes

_INT64_MAX = 2**63 - 1
_METADATA = int(NodeType.METADATA_NODE)


# --------------------------------------------------------------------------- attribute memo


class _AttrDecoder:
    """Per-read memo: attribute-block bytes → code → normalised tuple, backed by a per-attribute memo."""

    def __init__(self, with_other: bool, memo_cap: int):
        self.with_other = with_other
        self.memo_cap = memo_cap  # maybe_reset drops the memos beyond this many entries
        self.memo: dict[bytes, int] = {}
        self.attr_memo: dict[bytes, tuple[str, Any]] = {}
        self.values: list[tuple[Any, ...]] = []
        self.bad_comm_type: dict[int, str] = {}  # code -> error; comm_type is unreadable (ok on SEND/RECV)
        self.pg_index: dict[str, int] = {}
        self.dim_index: dict[tuple[bool, ...], int] = {}
        self._cols: dict[str, np.ndarray] = {}
        self.offset = 0  # global code of values[0] (codes stay global across memo resets)
        self._done: list[dict[str, np.ndarray]] = []  # columns of the values dropped by resets

    @staticmethod
    def pair(attr: Any) -> tuple[str, Any]:
        """normalize_attr, except that an unreadable comm_type becomes its error (fatal off SEND/RECV)."""
        try:
            return normalize_attr(attr)
        except AttrTypeError as exc:
            if exc.name != "comm_type":
                raise
            return exc.name, exc

    def add(self, pairs: Iterable[tuple[str, Any]]) -> int:
        """Store the normalised tuple of some (name, value) pairs; return its code."""
        norm = combine_attrs(pairs, self.with_other)
        if isinstance(norm[0], AttrTypeError):
            self.bad_comm_type[len(self.values)] = str(norm[0])
            norm = (None, *norm[1:])
        self.values.append(norm)
        return len(self.values) - 1

    def learn(self, block: bytes) -> int:
        """Code of an attribute block, or -1 if the record must take the full-parse path."""
        code = self.memo.get(block)
        if code is None:
            parts = split_attrs(block)
            try:
                memo = self.attr_memo
                code = -1 if parts is None else self.add([memo.get(p) or self._attr(p) for p in parts])
            except DecodeError:
                code = -1
            self.memo[block] = code
        return code

    def _attr(self, raw: bytes) -> tuple[str, Any]:
        hit = self.attr_memo.get(raw)
        if hit is None:
            hit = self.attr_memo[raw] = self.pair(chakra_classes().AttributeProto.FromString(raw))
        return hit

    def columns(self) -> dict[str, np.ndarray]:
        """Table columns indexed by code (extended incrementally)."""
        done = self._cols["comm_size"].size if self._cols else 0
        new = self.values[done:]
        if new or not self._cols:
            cols = dict(zip(NORMALIZED_ATTRS, zip(*new))) if new else dict.fromkeys(NORMALIZED_ATTRS, ())
            ext = {c: np.array([MISSING if v is None else v for v in cols[c]], np.int64) for c in INT_COLUMNS}
            ext["pg"] = np.array([-1 if v is None else self.pg_index.setdefault(v, len(self.pg_index))
                                  for v in cols["pg_name"]], np.int32)
            ext["is_cpu_op"] = np.array([-1 if v is None else int(v) for v in cols["is_cpu_op"]], np.int8)
            ext["involved_dim"] = np.array([-1 if v is None else self.dim_index.setdefault(v, len(self.dim_index))
                                            for v in cols["involved_dim"]], np.int32)
            ext["op_kind"] = op_kind_codes(cols["op_kind"])
            self._cols = {k: np.concatenate([self._cols[k], v]) if self._cols else v for k, v in ext.items()}
        return self._cols

    def global_columns(self) -> dict[str, np.ndarray]:
        """Columns for every global code seen so far."""
        parts = [*self._done, self.columns()]
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[-1]}

    def maybe_reset(self) -> None:
        """Bound memory on traces whose attribute blocks never repeat (call between chunks)."""
        if len(self.values) > self.memo_cap or len(self.attr_memo) > self.memo_cap:
            self._done.append(self.columns())
            self.offset += len(self.values)
            self.memo.clear()
            self.attr_memo.clear()
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
    inputs: dict[int, str] = field(default_factory=dict)  # row -> inputs.values, METADATA rows only


def _legacy_error(source: str) -> InputError:
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


class ChunkReader:
    """One open trace: bytes, metadata and the chunked fast decoder.

    ``chunk_bytes`` is the approximate size of a decoded chunk and ``memo_cap``
    the attribute-memo bound; :mod:`netsim.chakra` passes its
    ``_CHUNK_BYTES`` / ``_MEMO_CAP`` knobs.
    """

    def __init__(self, path: str | os.PathLike, with_other: bool, chunk_bytes: int = 8 << 20,
                 memo_cap: int = 1 << 16, *, data: bytes | None = None):
        self.source = str(path)
        self.chunk_bytes = chunk_bytes
        self.data = load_bytes(path) if data is None else data  # data: the file's bytes, already read
        self.buf = np.frombuffer(self.data, np.uint8)
        self.decoder = _AttrDecoder(with_other, memo_cap)
        self.metadata, self.pos = self._read_metadata()

    def _read_metadata(self) -> tuple[EtMetadata, int]:
        starts, ends, pos = frame_records(self.data, 0, 0, 1, self.source)
        if not starts.size:
            raise InputError("empty file: expected a GlobalMetadata record", source=self.source)
        rec = self.data[starts[0]:ends[0]]
        if rec[:1] == b"\x08":
            raise _legacy_error(self.source)
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
            starts, ends, pos = frame_records(self.data, pos, index, pos + self.chunk_bytes, self.source)
            self.decoder.maybe_reset()
            yield self._decode(starts, ends, index)
            index += len(starts)

    def _error(self, msg: str, index: int, field: str = "") -> InputError:
        return InputError(msg, source=self.source, field=f"record[{index}]{field}")

    def _decode(self, starts: np.ndarray, ends: np.ndarray, index: int) -> _Chunk:
        h = scan_heads(self.buf, starts, ends)
        ctrl, data = unpack_varint_lists(self.buf, h["ctrl_a"], h["ctrl_b"]), unpack_varint_lists(self.buf, h["data_a"], h["data_b"])
        fb = h["fallback"] | ctrl[2] | data[2]
        self._check_io(h, fb)
        names = self._names(h["name_a"], h["name_b"], fb)
        codes = self._codes(h["attr_a"].tolist(), ends.tolist(), h["id"], index)
        fb |= codes < 0
        chunk = _Chunk(h["id"], names, h["type"].astype(np.int64), h["dur"], ctrl[:2], data[:2], codes)
        if fb.any():
            self._fallback(chunk, np.flatnonzero(fb).tolist(), starts, ends, index)
        meta = np.flatnonzero(chunk.types == _METADATA)
        if meta.size:  # rare (PyTorch process-group metadata): keep their inputs.values
            self._meta_inputs(chunk, meta.tolist(), starts, ends, index)
        return self._finish(chunk, index)

    def _meta_inputs(self, chunk: _Chunk, rows: list[int], starts: np.ndarray, ends: np.ndarray,
                     index: int) -> None:
        """Store ``inputs.values`` of the METADATA ``rows`` (full protobuf parse; there are only a few)."""
        node_cls = chakra_classes().Node
        for r in rows:
            try:
                m = node_cls.FromString(self.data[int(starts[r]):int(ends[r])])
            except DecodeError as exc:
                raise self._error(f"the Node message does not parse: {exc}", index + r) from exc
            if m.HasField("inputs"):
                chunk.inputs[r] = m.inputs.values

    def _check_io(self, h: dict[str, np.ndarray], fb: np.ndarray) -> None:
        """Validate IOInfo fields (not exposed, but a bad one must fail like protobuf does)."""
        io_cls = chakra_classes().IOInfo
        for r, a, b in zip(h["io_rec"].tolist(), h["io_a"].tolist(), h["io_b"].tolist()):
            try:
                io_cls.FromString(self.data[a:b])
            except DecodeError:
                fb[r] = True  # the full parse reports it

    def _names(self, a: np.ndarray, b: np.ndarray, fb: np.ndarray) -> list[str]:
        """Decode all names at once: gather them NUL-separated, decode and split in C."""
        lens = b - a
        if (lens > 0).any():
            src, rec = byte_ranges(a, lens)
            raw = self.buf[src]
            packed = np.zeros(int(lens.sum()) + a.size, np.uint8)
            packed[src - a[rec] + (np.cumsum(lens + 1) - lens - 1)[rec]] = raw
            if not (raw == 0).any():
                try:
                    return packed[:-1].tobytes().decode().split("\x00")
                except UnicodeDecodeError:
                    pass
        names = []
        for k, (i, j) in enumerate(zip(a.tolist(), b.tolist())):
            try:
                names.append(self.data[i:j].decode())
            except UnicodeDecodeError:
                names.append("")
                fb[k] = True  # the full parse reports it
        return names

    def _codes(self, a: list[int], b: list[int], ids: np.ndarray, index: int) -> np.ndarray:
        """Attribute-block code per record: each distinct block learnt once, in first-occurrence
        order (which fixes the codes and the ``pg_names`` order), then one dict lookup per record."""
        data, memo = self.data, self.decoder.memo
        blocks = [data[i:j] for i, j in zip(a, b)]
        for block in [bk for bk in dict.fromkeys(blocks) if bk not in memo]:
            try:
                self.decoder.learn(block)
            except AttrTypeError as exc:
                k = blocks.index(block)
                raise self._error(str(exc), index + k, f".attr.{exc.name} (node id {ids[k]})") from exc
        return np.array([memo[bk] for bk in blocks], np.int64)

    def _fallback(self, chunk: _Chunk, rows: list[int], starts: np.ndarray, ends: np.ndarray, index: int) -> None:
        """Re-parse ``rows`` with the protobuf Node class and patch the chunk."""
        node_cls = chakra_classes().Node
        ctrl_lists, data_lists = [], []
        for r in rows:
            s, e = int(starts[r]), int(ends[r])
            try:
                m = node_cls.FromString(self.data[s:e])
            except DecodeError as exc:
                raise self._error(f"the Node message at byte offset {s} does not parse: {exc}", index + r) from exc
            chunk.ids[r], chunk.types[r], chunk.dur[r] = m.id, m.type, m.duration_micros
            chunk.names[r] = m.name
            try:
                chunk.codes[r] = self.decoder.add([self.decoder.pair(a) for a in m.attr])
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
            hit = np.isin(chunk.codes, list(bad)) & ~np.isin(chunk.types, list(SEND_RECV_TYPES))
            if hit.any():
                r = int(np.flatnonzero(hit)[0])
                raise self._error(bad[int(chunk.codes[r])], index + r, f".attr.comm_type (node id {chunk.ids[r]})")
        return chunk


# --------------------------------------------------------------------------- assembly


def read_table(reader: ChunkReader, other: bool) -> NodeTable:
    """Decode every chunk of an open trace into one :class:`NodeTable` (``other``: keep unknown attributes)."""
    parts, codes, others = [], [], []
    for ch in reader.chunks():
        codes.append(ch.codes + reader.decoder.offset)
        if other:
            vals = reader.decoder.values
            others.extend(vals[c][-1] for c in ch.codes.tolist())
        parts.append(ch)
    return _assemble(reader, parts, codes, others if other else None)


def _concat_csr(pairs: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate CSR (values, ptr) pairs."""
    if not pairs:
        return np.zeros(0, np.int64), np.zeros(1, np.int64)
    offsets = np.cumsum([0] + [int(p[1][-1]) for p in pairs[:-1]])
    ptr = np.concatenate([pairs[0][1][:1]] + [p[1][1:] + off for p, off in zip(pairs, offsets)])
    return np.concatenate([p[0] for p in pairs]), ptr


def _assemble(reader: ChunkReader, parts: list[_Chunk], codes: list[np.ndarray],
              others: list[dict[str, Any]] | None) -> NodeTable:
    """Concatenate decoded chunks into one NodeTable."""
    def cat(arrs: list[np.ndarray], dtype: Any) -> np.ndarray:
        return np.concatenate(arrs).astype(dtype, copy=False) if arrs else np.zeros(0, dtype)
    data_deps, data_ptr = _concat_csr([p.data for p in parts])
    ctrl_deps, ctrl_ptr = _concat_csr([p.ctrl for p in parts])
    inputs, base = {}, 0
    for p in parts:
        inputs.update((base + r, v) for r, v in p.inputs.items())
        base += p.ids.size
    return NodeTable(
        source=reader.source, metadata=reader.metadata,
        id=cat([p.ids for p in parts], np.int64), name=[n for p in parts for n in p.names],
        type=cat([p.types for p in parts], np.int32), duration_micros=cat([p.dur for p in parts], np.int64),
        attr_code=cat(codes, np.int64), attr_columns=reader.decoder.global_columns(),
        pg_names=list(reader.decoder.pg_index), involved_dims=list(reader.decoder.dim_index),
        data_ptr=data_ptr, data_deps=data_deps, ctrl_ptr=ctrl_ptr, ctrl_deps=ctrl_deps, other=others,
        inputs=inputs)


def chunk_nodes(ch: _Chunk, values: list[tuple[Any, ...]], with_other: bool) -> Iterator[EtNode]:
    """Yield the EtNodes of a decoded chunk (a generator: streamed nodes die young, sparing the GC)."""
    cv, cp = ch.ctrl[0].tolist(), ch.ctrl[1].tolist()
    dv, dp = ch.data[0].tolist(), ch.data[1].tolist()
    inputs = ch.inputs
    for i, (nid, name, typ, dur, code) in enumerate(zip(ch.ids.tolist(), ch.names, ch.types.tolist(),
                                                       ch.dur.tolist(), ch.codes.tolist())):
        node = EtNode(nid, name, typ, tuple(cv[cp[i]:cp[i + 1]]), tuple(dv[dp[i]:dp[i + 1]]), dur, *values[code])
        if typ in SEND_RECV_TYPES:
            node.comm_type = None
        if with_other:  # every node gets its own dict (the memo shares them)
            node.other = dict(node.other)
        if inputs and i in inputs:
            node.inputs = inputs[i]
        yield node
