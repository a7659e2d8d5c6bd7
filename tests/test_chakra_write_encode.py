"""The vectorised Chakra encoder (netsim.chakra.write) gives exactly protobuf's bytes.

The reference here is the protobuf Node class itself (``SerializeToString``), framed with
a varint length, never netsim's own encoder.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netsim.chakra import EtNode, read_et, write_et
from netsim.chakra.schema import WRITE_MEMBERS, chakra_classes, python_to_attr, write_attr
from netsim.vocab import OP_KINDS
from netsim.chakra.write import (columns_from_nodes, encode_columns, encode_heads, encode_node, encode_varint,
                                 join_records, varints)

C = chakra_classes()
U64 = (1 << 64) - 1
I32 = st.integers(-(1 << 31), (1 << 31) - 1)
I64 = st.integers(-(1 << 63), (1 << 63) - 1)
U64S = st.integers(0, U64)
SMALL = st.integers(0, 300)
TEXT = st.text(max_size=12)


def reference(nodes: list[EtNode]) -> bytes:
    """Framed records serialised by the protobuf classes (no netsim encoding involved)."""
    out = []
    for n in nodes:
        m = C.Node(id=n.id, name=n.name, type=n.type, ctrl_deps=n.ctrl_deps, data_deps=n.data_deps,
                   duration_micros=n.duration_micros)
        if n.inputs is not None:
            m.inputs.values = n.inputs
        values = dict(is_cpu_op=n.is_cpu_op, comm_type=n.comm_type, comm_size=n.comm_size, comm_src=n.comm_src,
                      comm_dst=n.comm_dst, comm_tag=n.comm_tag, comm_priority=n.comm_priority, pg_name=n.pg_name,
                      involved_dim=n.involved_dim, num_ops=n.num_ops, tensor_size=n.tensor_size, op_kind=n.op_kind,
                      gemm_m=n.gemm_m, gemm_n=n.gemm_n)
        m.attr.extend(write_attr(name, values[name]) for name, _ in WRITE_MEMBERS if values[name] is not None)
        m.attr.extend(python_to_attr(k, v) for k, v in (n.other or {}).items())
        body = m.SerializeToString()
        out.append(encode_varint(len(body)) + body)
    return b"".join(out)


def _opt(s):
    return st.none() | s


@st.composite
def nodes(draw, big: bool = True) -> EtNode:
    ints = U64S if big else SMALL
    return EtNode(
        id=draw(ints), name=draw(TEXT), type=draw(I32 if big else st.integers(0, 9)),
        ctrl_deps=tuple(draw(st.lists(ints, max_size=4))), data_deps=tuple(draw(st.lists(ints, max_size=4))),
        duration_micros=draw(ints), comm_type=draw(_opt(I64)), comm_size=draw(_opt(I64)), comm_src=draw(_opt(I32)),
        comm_dst=draw(_opt(I32)), comm_tag=draw(_opt(I32)), comm_priority=draw(_opt(I32)), pg_name=draw(_opt(TEXT)),
        is_cpu_op=draw(_opt(st.booleans())), num_ops=draw(_opt(I64)), tensor_size=draw(_opt(U64S)),
        involved_dim=draw(_opt(st.lists(st.booleans(), max_size=3).map(tuple))),
        op_kind=draw(_opt(st.sampled_from(OP_KINDS))), gemm_m=draw(_opt(I64)), gemm_n=draw(_opt(I64)),
        other=draw(_opt(st.dictionaries(st.sampled_from(["rf_id", "x", "op_schema"]),
                                        st.integers(-5, 1 << 40) | TEXT | st.booleans(), max_size=2))),
        inputs=draw(_opt(TEXT)))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(nodes(), max_size=12))
def test_encode_columns_matches_protobuf(ns):
    memo = {}
    ref = reference(ns)
    assert encode_columns(columns_from_nodes(ns, memo)) == ref
    assert b"".join(encode_node(n, memo) for n in ns) == ref  # the per-node encoder too


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(nodes(big=False), min_size=1, max_size=30), st.data())
def test_heads_reused_with_other_attribute_blocks(ns, data):
    """join_records(heads, blocks, codes): the heads of one table framed with another table's attributes."""
    memo = {}
    cols = columns_from_nodes(ns, memo)
    others = [EtNode(n.id, n.name, n.type, n.ctrl_deps, n.data_deps, n.duration_micros,
                     **{"comm_src": data.draw(_opt(I32)), "pg_name": data.draw(_opt(TEXT)),
                        "comm_size": data.draw(_opt(I64))}, inputs=n.inputs) for n in ns]
    other_cols = columns_from_nodes(others, memo)
    assert join_records(encode_heads(cols), other_cols.blocks, other_cols.attr) == reference(others)


@given(st.lists(U64S, max_size=50) | st.lists(I64, max_size=50))
def test_varints_match_scalar_encoder(values):
    b, n = varints(np.array(values, np.uint64 if values and max(values) > (1 << 63) - 1 else np.int64))
    expect = [encode_varint(v & U64) for v in values]
    assert b.tobytes() == b"".join(expect) and n.tolist() == [len(e) for e in expect]


def test_empty_and_extremes():
    assert encode_columns(columns_from_nodes([], {})) == b""
    ns = [EtNode(0), EtNode(U64, "é" * 200, -1, ctrl_deps=(0, U64), duration_micros=U64, comm_src=-1, inputs=""),
          EtNode(1, "x" * 20000)]  # a record longer than 16 KiB (three-byte length)
    assert encode_columns(columns_from_nodes(ns, {})) == reference(ns)


@pytest.mark.parametrize("node,match", [(EtNode(-1), "node id"), (EtNode(1, type=1 << 31), "node type"),
                                        (EtNode(1, data_deps=(-3,)), "data_deps"), (EtNode(1 << 64), "64 bits")])
def test_out_of_range_values_raise(node, match):
    with pytest.raises(ValueError, match=match):
        encode_columns(columns_from_nodes([node], {}))


def test_write_et_file_is_metadata_plus_records(tmp_path):
    ns = [EtNode(1, "a", 4, duration_micros=5, num_ops=10), EtNode(2, "b", 7, data_deps=(1,), comm_type=0,
                                                                  comm_size=64, pg_name="3")]
    p = tmp_path / "t.0.et"
    write_et(p, ns)
    meta = C.GlobalMetadata(version="0.0.4").SerializeToString()
    assert p.read_bytes() == encode_varint(len(meta)) + meta + encode_columns(columns_from_nodes(ns, {}))
    assert [n.name for n in read_et(p).nodes] == ["a", "b"]
