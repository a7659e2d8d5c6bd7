"""Record encoding for :func:`netsim.chakra.write_et` (byte-identical to protobuf's serialization)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from netsim.chakra.schema import WRITE_MEMBERS, chakra_classes, python_to_attr, write_attr
from netsim.chakra.model import EtNode

def encode_varint(n: int) -> bytes:
    """Base-128 varint of a non-negative int."""
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def attr_record(name: str, value: Any, memo: dict[Any, bytes] | None = None) -> bytes:
    """Field-10 entry for one attribute (memoised on (name, value) when a memo is given)."""
    out = memo.get((name, value)) if memo is not None else None
    if out is None:
        body = write_attr(name, value).SerializeToString()
        out = b"\x52" + encode_varint(len(body)) + body
        if memo is not None:
            memo[(name, value)] = out
    return out


def encode_node(node: EtNode, memo: dict[Any, bytes]) -> bytes:
    """Serialize one node as a framed record; byte-identical to protobuf's own serialization.

    ``memo`` caches attribute blocks (keyed by the 11 known values) and single
    attributes (keyed by ``(name, value)``); the key lengths keep them apart.
    """
    msg = chakra_classes().Node(id=node.id, name=node.name, type=int(node.type), ctrl_deps=node.ctrl_deps,
                                data_deps=node.data_deps, duration_micros=node.duration_micros)
    if node.inputs is not None:
        msg.inputs.values = node.inputs
    head = msg.SerializeToString()
    dims = node.involved_dim
    key = (node.is_cpu_op, node.comm_type, node.comm_size, node.comm_src, node.comm_dst, node.comm_tag,
           node.comm_priority, node.pg_name, None if dims is None else tuple(dims), node.num_ops, node.tensor_size)
    block = memo.get(key)
    if block is None:
        block = memo[key] = b"".join(attr_record(name, v, memo) for (name, _), v in zip(WRITE_MEMBERS, key)
                                     if v is not None)
    if node.other:
        block += b"".join(attr_record(k, v) for k, v in node.other.items())
    # Field 10 is the last field, so head + attributes equals the full serialization.
    return encode_varint(len(head) + len(block)) + head + block


def metadata_record(version: str, attrs: Mapping[str, Any] | None) -> bytes:
    """The framed GlobalMetadata record that starts a trace (``version`` and optional attributes)."""
    meta = chakra_classes().GlobalMetadata(version=version)
    meta.attr.extend(python_to_attr(k, v) for k, v in (attrs or {}).items())
    body = meta.SerializeToString()
    return encode_varint(len(body)) + body
