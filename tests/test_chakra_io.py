"""Chakra framing, normalisation, fallback path, writing, fuzzing and inspection (synthetic data)."""

from __future__ import annotations

import gzip
import os
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import netsim.chakra.files as chakra
from netsim.errors import InputError
from netsim.chakra import (
    EtNode,
    iter_nodes,
    iter_records,
    read_et,
    read_et_table,
    write_et,
    write_workload,
)
from netsim.chakra.schema import WRITE_MEMBERS, NodeType, chakra_classes, python_to_attr, write_attr
from netsim.chakra.inspect import discover_ranks, node_table, summarize_trace

C = chakra_classes()
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _varint(n: int) -> bytes:
    return chakra.encode_varint(n)


def _frame(*messages: bytes) -> bytes:
    return b"".join(_varint(len(m)) + m for m in messages)


def _meta(version: str = "0.0.4") -> bytes:
    return C.GlobalMetadata(version=version).SerializeToString()


def _sample_nodes(n: int = 40, seed: int = 0) -> list[EtNode]:
    rng = random.Random(seed)
    nodes = []
    for i in range(n):
        kind = i % 4
        deps = tuple(sorted({rng.randrange(i) for _ in range(rng.randint(0, 2))})) if i else ()
        if kind == 0:
            node = EtNode(i, f"gemm_{i}", NodeType.COMP_NODE, data_deps=deps, duration_micros=rng.randint(0, 900),
                          is_cpu_op=False, num_ops=rng.choice([0, 1 << 33]), tensor_size=rng.choice([64, 1 << 20]))
        elif kind == 1:
            node = EtNode(i, f"ar_{i}", NodeType.COMM_COLL_NODE, data_deps=deps, is_cpu_op=False,
                          comm_type=rng.choice([0, 2, 7]), comm_size=rng.choice([0, 1 << 20]),
                          pg_name=rng.choice([None, "0", "1.0"]), involved_dim=rng.choice([None, (True, False)]))
        elif kind == 2:
            node = EtNode(i, f"send_{i}", NodeType.COMM_SEND_NODE, data_deps=deps, comm_dst=rng.randrange(8),
                          comm_size=4096, comm_tag=rng.randrange(-3, 300), comm_priority=1)
        else:
            node = EtNode(i, f"recv_{i} ✓", NodeType.COMM_RECV_NODE, ctrl_deps=deps, comm_src=rng.randrange(8),
                          comm_size=4096, comm_tag=7)
        nodes.append(node)
    return nodes


# ----------------------------------------------------------------------------- framing


def test_zero_length_records_are_not_eof(tmp_path: Path) -> None:
    node = C.Node(id=5, name="x", type=4).SerializeToString()
    p = tmp_path / "z.et"
    p.write_bytes(_frame(b"", b"", node))  # empty metadata, an all-default node, then a real one
    assert list(iter_records(p)) == [b"", b"", node]
    nodes = read_et(p).nodes
    assert [(n.id, n.type) for n in nodes] == [(0, 0), (5, 4)]
    assert read_et(p).metadata.version == ""


def test_truncated_length_and_record(tmp_path: Path) -> None:
    p = tmp_path / "t.et"
    p.write_bytes(_frame(_meta()) + b"\x85")
    with pytest.raises(InputError, match=r"truncated record length at byte offset 8.*varint") as info:
        read_et(p)
    assert info.value.source == str(p) and info.value.field == "record[1]"
    p.write_bytes(_frame(_meta()) + b"\x0a\x08\x01")
    with pytest.raises(InputError, match=r"truncated record at byte offset 8: expected 10 bytes.*found 2"):
        list(iter_records(p))
    p.write_bytes(b"\xff\xff\xff\xff\xff\x01")
    with pytest.raises(InputError, match="2\\*\\*32"):
        read_et(p)
    p.write_bytes(b"")
    with pytest.raises(InputError, match="empty file"):
        read_et(p)


def test_gzip_detected(tmp_path: Path) -> None:
    nodes = _sample_nodes(12)
    write_et(tmp_path / "a.et", nodes)
    write_et(tmp_path / "b.et", nodes, gzip=True)
    assert (tmp_path / "b.et").read_bytes()[:2] == b"\x1f\x8b"
    assert gzip.decompress((tmp_path / "b.et").read_bytes()) == (tmp_path / "a.et").read_bytes()
    assert read_et(tmp_path / "b.et").nodes == read_et(tmp_path / "a.et").nodes
    (tmp_path / "c.et").write_bytes(b"\x1f\x8b garbage")
    with pytest.raises(InputError, match="gzip"):
        read_et(tmp_path / "c.et")


def test_missing_file() -> None:
    with pytest.raises(InputError, match="cannot read"):
        read_et("/nonexistent/x.0.et")


def test_transitional_metadata_rejected(tmp_path: Path) -> None:
    attr = python_to_attr("schema", "1.0.2").SerializeToString()
    (tmp_path / "t.et").write_bytes(_frame(b"\x0a" + _varint(len(attr)) + attr))
    with pytest.raises(InputError, match="transitional"):
        read_et(tmp_path / "t.et")


# ----------------------------------------------------------------------------- normalisation


def _attr_node_file(tmp_path: Path, node_type: int, *attrs) -> Path:
    node = C.Node(id=3, name="n", type=node_type)
    node.attr.extend(attrs)
    p = tmp_path / "n.et"
    p.write_bytes(_frame(_meta(), node.SerializeToString()))
    return p


def test_integer_members_accepted(tmp_path: Path) -> None:
    A = C.AttributeProto
    p = _attr_node_file(tmp_path, 7, A(name="comm_size", uint64_val=1 << 40), A(name="comm_type", int32_val=2),
                        A(name="comm_priority", sint64_val=-3), A(name="num_ops", fixed64_val=9),
                        A(name="tensor_size", int64_val=5), A(name="is_cpu_op", int32_val=1),
                        A(name="pg_name", int64_val=5), A(name="comm_size", int64_val=1))
    (n,) = read_et(p).nodes
    assert (n.comm_size, n.comm_type, n.comm_priority, n.num_ops, n.tensor_size) == (1 << 40, 2, -3, 9, 5)
    assert n.is_cpu_op is True and n.pg_name == "5"  # first comm_size wins
    t = read_et_table(p)
    assert t.pg_names == ["5"] and t.is_cpu_op.tolist() == [1] and t.comm_size.tolist() == [1 << 40]


def test_wrong_member_is_input_error(tmp_path: Path) -> None:
    A = C.AttributeProto
    p = _attr_node_file(tmp_path, 7, A(name="comm_size", string_val="big"))
    with pytest.raises(InputError, match="comm_size.*string_val.*integer") as info:
        read_et(p)
    assert "record[1]" in info.value.field and "node id 3" in info.value.field
    p = _attr_node_file(tmp_path, 7, A(name="comm_size", uint64_val=2**64 - 1))
    with pytest.raises(InputError, match="int64"):
        read_et_table(p)


def test_comm_type_ignored_on_send_recv(tmp_path: Path) -> None:
    A = C.AttributeProto
    p = _attr_node_file(tmp_path, 5, A(name="comm_type", string_val="junk"), A(name="comm_dst", int32_val=2))
    (n,) = read_et(p).nodes
    assert (n.comm_type, n.comm_dst) == (None, 2)
    p = _attr_node_file(tmp_path, 7, A(name="comm_type", string_val="junk"))
    with pytest.raises(InputError, match="comm_type"):
        read_et(p)


# ----------------------------------------------------------------------------- fallback path


def test_unusual_encodings_match_protobuf(tmp_path: Path) -> None:
    """Records the vectorized scanner hands to protobuf decode to the same values."""
    attr = python_to_attr("comm_size", 77).SerializeToString()
    records = [
        b"\x52" + _varint(len(attr)) + attr + b"\x08\x09\x2a\x01\x04",      # attrs before id and deps
        b"\x08\x0a\x28\x04\x28\x05",                                        # unpacked data_deps
        b"\x08\x0b\x2a\x01\x04\x2a\x01\x05",                                # data_deps split in two runs
        b"\x08\x0c\xa0\x06\x01\x18\x04",                                    # unknown field 100
        b"\x08\x8d\x01\x18\x07\x38\xff\xff\x03",                            # multi-byte varints
        b"\x08\x0e\x12\x00",                                                # empty name
    ]
    p = tmp_path / "f.et"
    p.write_bytes(_frame(_meta(), *records))
    nodes = read_et(p).nodes
    assert [(n.id, n.data_deps, n.comm_size) for n in nodes[:3]] == [(9, (4,), 77), (10, (4, 5), None),
                                                                      (11, (4, 5), None)]
    assert (nodes[3].id, nodes[3].type) == (12, 4)
    assert (nodes[4].id, nodes[4].type, nodes[4].duration_micros) == (141, 7, 65535)
    assert list(read_et_table(p).iter_nodes()) == nodes


def test_chunking_and_memo_reset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nodes = _sample_nodes(300, seed=3)
    write_et(tmp_path / "c.et", nodes)
    expected = read_et(tmp_path / "c.et").nodes
    monkeypatch.setattr(chakra, "_CHUNK_BYTES", 97)
    monkeypatch.setattr(chakra, "_MEMO_CAP", 3)
    assert read_et(tmp_path / "c.et").nodes == expected
    table = read_et_table(tmp_path / "c.et")
    assert list(table.iter_nodes()) == expected
    assert len(table.pg_names) == 2


def test_ids_beyond_int64_rejected(tmp_path: Path) -> None:
    p = tmp_path / "big.et"
    p.write_bytes(_frame(_meta(), C.Node(id=2**64 - 1).SerializeToString()))
    with pytest.raises(InputError, match="does not fit in int64"):
        read_et_table(p)


# ----------------------------------------------------------------------------- writing


def test_roundtrip_sample(tmp_path: Path) -> None:
    nodes = _sample_nodes(60)
    for n in nodes[::5]:
        n.other = {"rf_id": 2**63 + 5, "scope": -1, "op": "aten::mm", "dims": [1.5, 2.0], "flags": [True],
                   "blob": b"\x00\x01", "names": ["a", "b"]}
    write_et(tmp_path / "r.et", nodes, metadata_version="1.0.0", metadata_attrs={"schema": "netsim", "pid": 7})
    trace = read_et(tmp_path / "r.et", other=True)
    assert trace.metadata.version == "1.0.0" and trace.metadata.attrs == {"schema": "netsim", "pid": 7}
    for got, want in zip(trace.nodes, nodes):
        want_other = want.other or {}
        want.other = want_other
        if want.type in (NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE):
            want.comm_type = None
        assert got == want
    assert len(trace.nodes) == len(nodes)


node_strategy = st.builds(
    EtNode,
    id=st.integers(0, 2**63 - 1), name=st.text(max_size=12), type=st.integers(0, 7),
    ctrl_deps=st.lists(st.integers(0, 2**63 - 1), max_size=3).map(tuple),
    data_deps=st.lists(st.integers(0, 2**40), max_size=3).map(tuple),
    duration_micros=st.integers(0, 2**63 - 1),
    comm_type=st.none() | st.integers(0, 9), comm_size=st.none() | st.integers(0, 2**62),
    comm_src=st.none() | st.integers(-(2**31), 2**31 - 1), comm_dst=st.none() | st.integers(0, 2**31 - 1),
    comm_tag=st.none() | st.integers(-(2**31), 2**31 - 1), comm_priority=st.none() | st.integers(0, 9),
    pg_name=st.none() | st.text(max_size=4), is_cpu_op=st.none() | st.booleans(),
    num_ops=st.none() | st.integers(-(2**63) + 1, 2**63 - 1), tensor_size=st.none() | st.integers(0, 2**63 - 1),
    involved_dim=st.none() | st.lists(st.booleans(), max_size=4).map(tuple),
    other=st.none(),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(nodes=st.lists(node_strategy, max_size=8), compress=st.booleans())
def test_roundtrip_property(tmp_path: Path, nodes: list[EtNode], compress: bool) -> None:
    p = tmp_path / "h.et"
    write_et(p, nodes, gzip=compress)
    if not compress:  # the memoised writer must equal protobuf's own serialization, byte for byte
        assert p.read_bytes() == _frame(_meta(), *(_protobuf_node(n) for n in nodes))
    for n in nodes:
        if n.type in (NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE):
            n.comm_type = None
    assert read_et(p).nodes == nodes
    assert list(read_et_table(p).iter_nodes()) == nodes


def _protobuf_node(n: EtNode) -> bytes:
    m = C.Node(id=n.id, name=n.name, type=n.type, ctrl_deps=n.ctrl_deps, data_deps=n.data_deps,
               duration_micros=n.duration_micros)
    m.attr.extend(write_attr(name, getattr(n, name)) for name, _ in WRITE_MEMBERS if getattr(n, name) is not None)
    return m.SerializeToString()


def test_write_is_atomic(tmp_path: Path) -> None:
    p = tmp_path / "keep.et"
    write_et(p, _sample_nodes(4))
    before = p.read_bytes()
    with pytest.raises(InputError, match="cannot encode node"):
        write_et(p, [EtNode(1, comm_src=2**40)])
    assert p.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["keep.et"]


# ----------------------------------------------------------------------------- fuzzing


@FUZZ
@given(data=st.binary(max_size=300))
def test_random_bytes_only_input_error(tmp_path: Path, data: bytes) -> None:
    p = tmp_path / "g.et"
    p.write_bytes(data)
    for reader in (read_et, read_et_table, lambda q: list(iter_nodes(q, other=True))):
        try:
            reader(p)
        except InputError:
            pass


def _valid_file() -> bytes:
    nodes = _sample_nodes(10, seed=1)
    nodes[0].other = {"rf_id": 3, "dims": [1, 2]}
    body = b"".join(chakra.encode_node(n, {}) for n in nodes)
    return chakra.metadata_record("0.0.4", {"schema": "x"}) + body


@FUZZ
@given(edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=6),
       cut=st.none() | st.integers(0, 10**6), gz=st.booleans())
def test_mutations_only_input_error(tmp_path: Path, edits: list[tuple[int, int]], cut: int | None, gz: bool) -> None:
    data = bytearray(_valid_file())
    for pos, value in edits:
        data[pos % len(data)] = value
    if cut is not None:
        data = data[: cut % (len(data) + 1)]
    blob = gzip.compress(bytes(data)) if gz else bytes(data)
    p = tmp_path / "m.et"
    p.write_bytes(blob)
    for reader in (read_et, read_et_table, lambda q: list(iter_nodes(q, other=True))):
        try:
            reader(p)
        except InputError:
            pass


# ----------------------------------------------------------------------------- inspect


def test_workload_and_summary(tmp_path: Path) -> None:
    ranks = [_sample_nodes(20, seed=r % 2) for r in range(4)]  # ranks 0/2 and 1/3 identical
    paths = write_workload(tmp_path / "wl" / "job", ranks)
    assert [p.name for p in paths] == [f"job.{r}.et" for r in range(4)]
    s = summarize_trace(tmp_path / "wl" / "job")
    assert s["ranks"] == [0, 1, 2, 3] and s["distinct_files"] == 2 and s["nodes"] == 80
    assert s["node_types"] == {"COMM_COLL_NODE": 20, "COMM_RECV_NODE": 20, "COMM_SEND_NODE": 20, "COMP_NODE": 20}
    assert sum(s["collectives"].values()) == 20 and s["metadata_version"] == "0.0.4"
    assert s["unknown_dep_ids"] == 0 and s["dependency_depth"] >= 2
    df = node_table(tmp_path / "wl" / "job")
    assert len(df) == 80 and sorted(df["rank"].unique().tolist()) == [0, 1, 2, 3]
    (tmp_path / "wl" / "job.1.et").unlink()
    with pytest.raises(InputError, match=r"gaps.*\[1\]"):
        discover_ranks(tmp_path / "wl" / "job")
    with pytest.raises(InputError, match="no trace found"):
        summarize_trace(tmp_path / "wl" / "nothing")


def test_depth_with_out_of_order_rows_and_cycles(tmp_path: Path) -> None:
    chain = [EtNode(3, data_deps=(2,)), EtNode(1), EtNode(2, data_deps=(1,)), EtNode(4, data_deps=(3, 99))]
    write_et(tmp_path / "d.et", chain)
    s = summarize_trace(tmp_path / "d.et")
    assert (s["dependency_depth"], s["unknown_dep_ids"], s["unknown_dep_refs"]) == (4, 1, {"data": 1, "ctrl": 0})
    write_et(tmp_path / "cyc.et", [EtNode(1, data_deps=(2,)), EtNode(2, data_deps=(1,))])
    assert summarize_trace(tmp_path / "cyc.et")["dependency_depth"] is None
