"""A trace's signature straight from its bytes, without building a NodeTable (the common case).

:func:`fast_sig` frames the records and scans the node heads with the vectorised scanner of
:mod:`netsim.chakra.scan`, then takes the body of :class:`~netsim.chakra.canonical.TraceSig`
from the *bytes*: the GlobalMetadata record, every node head (fields 1-9, ids and names
included) and every attribute block with its ``comm_src``, ``comm_dst`` and ``pg_name``
entries cut out (their values become the signature's peers and group slots).  Equal fast
bodies mean equal bytes outside those three attributes, hence equal decoded traces up to the
renaming; unequal fast bodies prove nothing (node ids may differ, attributes may be ordered
differently), so :mod:`netsim.workload.file_symmetry` then compares the decoded signatures
(:func:`~netsim.chakra.canonical.trace_sig`) of the two files.

Anything the scanner does not fully understand (a record the decoder would re-parse with
protobuf, IOInfo, METADATA nodes, an attribute that does not normalise, a peer or group given
twice in one node) returns None: the caller decodes that file.
"""

from __future__ import annotations

import hashlib

import numpy as np
from google.protobuf.message import DecodeError

from netsim.chakra.model import SEND_RECV_TYPES
from netsim.chakra.scan import frame_records, scan_heads, split_attrs
from netsim.chakra.schema import AttrTypeError, NodeType, chakra_classes, normalize_attr

_RENAMED = ("comm_src", "comm_dst", "pg_name")
_MISSING = np.iinfo(np.int64).min


def _block(block: bytes, memo: dict) -> tuple | None:
    """(kept attribute payloads, src, dst, pg) of one attribute block, or None (decode the file)."""
    parts = split_attrs(block)
    if parts is None:
        return None
    kept, found = [], {}
    for raw in parts:
        pair = memo.get(raw)
        if pair is None:
            try:
                pair = normalize_attr(chakra_classes().AttributeProto.FromString(raw))
            except (AttrTypeError, DecodeError, ValueError, TypeError):
                return None
            memo[raw] = pair
        name, value = pair
        if name in _RENAMED:
            if name in found or (name != "pg_name" and not isinstance(value, int)) or \
                    (name == "pg_name" and not isinstance(value, str)):
                return None
            found[name] = value
        else:
            kept.append(raw)
    return tuple(kept), found.get("comm_src"), found.get("comm_dst"), found.get("pg_name")


def fast_sig(data: bytes, source: str, memo: dict) -> tuple | None:
    """(body, src, dst, group names in slot order, nodes) of a file's (decompressed) bytes, the
    fields of a fast :class:`~netsim.chakra.canonical.TraceSig`, or None."""
    try:
        starts, ends, _ = frame_records(data, 0, 0, len(data), source)
    except Exception:  # noqa: BLE001 - the decoder reports it, with its own message
        return None
    if starts.size == 0 or data[starts[0]:starts[0] + 1] == b"\x08":
        return None
    s, e = starts[1:], ends[1:]
    buf = np.frombuffer(data, np.uint8)
    h = scan_heads(buf, s, e)
    types = h["type"].astype(np.int64)
    if h["fallback"].any() or h["io_rec"].size or (types == int(NodeType.METADATA_NODE)).any():
        return None
    ids = h["id"]
    if ids.size and int(ids.max()) > np.iinfo(np.int64).max:
        return None
    attr_a = h["attr_a"]
    blocks = [data[a:b] for a, b in zip(attr_a.tolist(), e.tolist())]
    distinct: dict[bytes, int] = {}
    which = np.array([distinct.setdefault(b, len(distinct)) for b in blocks], np.int64)
    canon: dict[tuple, int] = {}
    slots: dict[str, int] = {}
    table = np.empty((len(distinct), 4), np.int64)  # per distinct block: canonical id, src, dst, pg slot
    for k, block in enumerate(distinct):
        parsed = _block(block, memo)
        if parsed is None:
            return None
        kept, bsrc, bdst, bpg = parsed
        table[k] = (canon.setdefault(kept, len(canon)), _MISSING if bsrc is None else bsrc,
                    _MISSING if bdst is None else bdst, -1 if bpg is None else slots.setdefault(bpg, len(slots)))
    code, src, dst, pg = table[which].T if which.size else np.zeros((4, 0), np.int64)
    # the decoder drops comm_type on SEND/RECV: a comm_type there must not make bodies differ
    sendrecv = np.isin(types, list(SEND_RECV_TYPES))
    hsh = hashlib.blake2b(digest_size=16, person=b"netsim-fast")
    hsh.update(data[starts[0]:ends[0]])
    lens = attr_a - s
    hsh.update(b"".join([data[a:b] for a, b in zip(s.tolist(), attr_a.tolist())]))
    hsh.update(np.concatenate([lens, code, pg, src != _MISSING, dst != _MISSING, sendrecv]).astype(np.int64)
               .tobytes())
    hsh.update(repr(list(canon)).encode())
    return hsh.digest(), src[src != _MISSING], dst[dst != _MISSING], tuple(slots), int(s.size)
