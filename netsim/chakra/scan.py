"""Byte-level internals of the fast Chakra reader: framing and vectorised scanning.

* Framing: :func:`load_bytes` (gunzip on the ``1f 8b`` magic) and :func:`frame_records`
  (split a byte range into length-prefixed records).
* Vectorised scanning: :func:`_varints` decodes one varint per offset,
  :func:`scan_heads` walks Node fields 1-9 of many records in lock-step,
  :func:`unpack_varint_lists` decodes packed dependency lists, :func:`split_attrs` cuts
  an attribute block into its field-10 payloads.

Nothing here builds Python objects per node; :mod:`netsim.chakra.decode`
turns the arrays into chunks.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import numpy as np

from netsim.errors import InputError

_MAX_LEN = 2**32
# Node head tags the vectorized scanner understands: tag byte -> kind.
_HEAD_KINDS = {0x08: 1, 0x12: 2, 0x18: 3, 0x22: 4, 0x2A: 5, 0x30: 6, 0x38: 7, 0x42: 8, 0x4A: 8}  # 8: IOInfo
_ATTR_TAG = 0x52


# --------------------------------------------------------------------------- framing


def load_bytes(path: str | os.PathLike) -> bytes:
    """Read a file, gunzipping it when it starts with the gzip magic (offsets then count decompressed bytes)."""
    from netsim import inputs

    if not os.path.lexists(path):
        raise InputError("cannot read trace file: no such file", source=str(path))
    data = inputs.read_bytes(path, MAX_TRACE_BYTES, "Chakra trace (.et) file")
    if data[:2] != b"\x1f\x8b":
        return data
    try:
        return _gunzip(data, str(path))
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(f"starts with the gzip magic 1f 8b but does not decompress: {exc}",
                         source=str(path)) from exc


#: Bytes of one rank's trace, on disk or decompressed (per-rank PyTorch/Chakra traces are tens to
#: hundreds of MB; the decoder needs several times the trace in memory).
MAX_TRACE_BYTES = 2 << 30
#: Decompressed / compressed size beyond 64 MiB: Chakra traces compress 5-20x, gzip bombs ~1000x.
MAX_GZIP_RATIO = 200


def _gunzip(data: bytes, source: str) -> bytes:
    """Decompress every gzip member of ``data``, refusing output beyond the caps (a gzip bomb)."""
    cap = min(MAX_TRACE_BYTES, max(64 << 20, MAX_GZIP_RATIO * len(data)))
    out, rest = [], data
    total = 0
    while rest[:2] == b"\x1f\x8b":
        d = zlib.decompressobj(wbits=31)
        piece = d.decompress(rest, cap - total + 1)
        total += len(piece)
        if total > cap or d.unconsumed_tail:
            raise InputError(f"decompresses to more than {cap:,} bytes ({len(data):,} compressed); expected a "
                             f"trace of at most {MAX_TRACE_BYTES:,} bytes and {MAX_GZIP_RATIO}x compression "
                             "(a gzip bomb?)", source=source)
        if not d.eof:
            raise EOFError("compressed file ended before the end-of-stream marker was reached")
        out.append(piece)
        rest = d.unused_data
    return b"".join(out)


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


def frame_records(data: bytes, pos: int, index: int, stop: int, source: str) -> tuple[np.ndarray, np.ndarray, int]:
    """Split the records that start in ``[pos, stop)``; return (body starts, body ends, next pos)."""
    heads: list[int] = []
    add = heads.append
    n = len(data)
    stop = min(stop, n)
    while pos < stop:  # sequential by nature; kept to a few bytecodes per record
        b = data[pos]
        add(pos)
        if b < 0x80:
            pos += b + 1
        else:
            length, body = _read_len(data, pos, index + len(heads) - 1, source)
            pos = body + length
    prefix = np.array(heads, np.int64)
    length, width, _ = _varints(np.frombuffer(data, np.uint8), prefix)
    starts = prefix + width
    ends = starts + length.astype(np.int64)
    if pos > n:
        raise InputError(f"truncated record at byte offset {heads[-1]}: expected {int(length[-1])} bytes of "
                         f"message, found {n - int(starts[-1])}", source=source,
                         field=f"record[{index + len(heads) - 1}]")
    return starts, ends, pos

# --------------------------------------------------------------------------- vectorized scanning


def _varints(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Decode one varint at each offset; return (value uint64, byte length, ok)."""
    byte = buf.take(pos, mode="clip")
    val = (byte & 0x7F).astype(np.uint64)
    length = np.ones(pos.size, np.int64)
    ok = np.ones(pos.size, bool)
    more = np.flatnonzero(byte >= 0x80)
    for k in range(1, 10):  # continuation bytes, on a shrinking set of offsets
        if not more.size:
            return val, length, ok
        byte = buf.take(pos[more] + k, mode="clip")
        val[more] |= (byte & 0x7F).astype(np.uint64) << np.uint64(7 * k)
        length[more] += 1
        if k == 9:
            ok[more] = byte <= 1
        more = more[byte >= 0x80]
    ok[more] = False
    return val, length, ok


def scan_heads(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> dict[str, np.ndarray]:
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
    io: list[tuple[np.ndarray, ...]] = [(idx[:0], cur[:0], cur[:0])]
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
        sel = kind == 8
        io.append((idx[sel], body[sel], nxt[sel]))
        more = nxt < ends[idx]
        idx, cur = idx[more], nxt[more]
    out["io_rec"], out["io_a"], out["io_b"] = (np.concatenate([t[k] for t in io]) for k in range(3))
    return out


def byte_ranges(a: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Byte offsets covering ``[a[i], a[i] + lens[i])`` for all i, and the owning i of each."""
    rec = np.repeat(np.arange(a.size), lens)
    first = np.cumsum(lens) - lens
    return np.arange(int(lens.sum())) + (a - first)[rec], rec


def unpack_varint_lists(buf: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Decode packed varint lists buf[a:b] (a < 0 = absent); return (values, CSR ptr, bad record)."""
    n = a.size
    lens = np.where(a >= 0, b - a, 0)
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(lens, out=ptr[1:])
    bad = np.zeros(n, bool)
    if ptr[-1] == 0:
        return np.zeros(0, np.uint64), ptr.copy(), bad
    src, rec = byte_ranges(a, lens)
    byt = buf[src]
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


# --------------------------------------------------------------------------- attribute blocks


def split_attrs(block: bytes) -> list[bytes] | None:
    """Split a run of field-10 entries into attribute payloads (None if it is anything else)."""
    parts, pos, n = [], 0, len(block)
    while pos < n:
        if block[pos] != _ATTR_TAG or pos + 1 >= n:
            return None
        length = block[pos + 1]
        pos += 2
        if length >= 0x80:  # multi-byte length (attributes of 128 B or more)
            length &= 0x7F
            for shift in range(7, 64, 7):
                if pos >= n:
                    return None
                length |= (block[pos] & 0x7F) << shift
                pos += 1
                if block[pos - 1] < 0x80:
                    break
            else:
                return None
        if pos + length > n:
            return None
        parts.append(block[pos:pos + length])
        pos += length
    return parts

