"""Chakra ET reader/writer against the real traces in ../shared/traces (``NETSIM_TRACES``; read in place)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from google.protobuf.message import DecodeError
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.errors import InputError
from netsim.chakra import (
    EtNode,
    iter_nodes,
    iter_records,
    read_et,
    read_et_table,
    read_metadata,
    write_et,
)
from netsim.chakra.schema import (
    NORMALIZED_ATTRS,
    AttrTypeError,
    CommType,
    NodeType,
    attr_member_names,
    chakra_classes,
    normalize_attrs,
)

from conftest import TRACES, TRACES_SKIP, trace_params

ASTRA = TRACES / "astra-sim__astra-sim" / "examples"
MICRO = ASTRA / "workload" / "microbenchmarks"
SHUO = TRACES / "shuoshuc__astra-sim-artifacts" / "examples"
SERVICE = TRACES / "astra-sim__astra-sim-service"
CHAKRA0 = TRACES / "mlcommons__chakra" / "tests" / "data" / "chakra.0.et"
LEGACY = TRACES / "mlcommons__chakra-old@e7300c4" / "test" / "standard_output" / "et"


@pytest.fixture(scope="module", autouse=True)
def _need_traces() -> None:
    if not TRACES.is_dir():
        pytest.skip(TRACES_SKIP)


def _all_current_traces(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.et") if "chakra-old" not in str(p))


def _reference_nodes(path: Path) -> list[EtNode]:
    """Slow, obviously-correct reader: protobuf classes for every record."""
    classes = chakra_classes()
    out = []
    for rec in list(iter_records(path))[1:]:
        m = classes.Node.FromString(rec)
        p2p = m.type in (NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE)
        attrs = [a for a in m.attr if not (p2p and a.name == "comm_type")]  # ignored on SEND/RECV
        node = EtNode(m.id, m.name, m.type, tuple(m.ctrl_deps), tuple(m.data_deps), m.duration_micros,
                      *normalize_attrs(attrs, True))
        if m.type == NodeType.METADATA_NODE and m.HasField("inputs"):  # process-group metadata
            node.inputs = m.inputs.values
        out.append(node)
    return out


# ----------------------------------------------------------------------------- schema


def test_schema_oneof_and_enums() -> None:
    attr = chakra_classes().AttributeProto.DESCRIPTOR
    oneof = attr.oneofs_by_name["value"]
    assert [f.name for f in oneof.fields] == list(attr_member_names())
    assert [f.number for f in oneof.fields] == list(range(3, 33))
    by_name = attr.fields_by_name
    assert (by_name["int32_val"].number, by_name["int64_val"].number, by_name["uint64_val"].number,
            by_name["bool_val"].number, by_name["bool_list"].number, by_name["string_val"].number,
            by_name["bytes_list"].number) == (7, 9, 13, 27, 28, 29, 32)
    assert chakra_classes().Node.DESCRIPTOR.file.package == "ChakraProtoMsg"
    assert (NodeType.COMM_COLL_NODE, CommType.REDUCE_SCATTER, CommType.BARRIER) == (7, 7, 9)


def test_schema_lists_packed_like_proto3() -> None:
    lists = chakra_classes().lists
    assert lists["int64"](values=[1, 2]).SerializeToString() == b"\x0a\x02\x01\x02"  # packed
    assert lists["string"](values=["a", "b"]).SerializeToString() == b"\x0a\x01a\x0a\x01b"  # never packed
    node = chakra_classes().Node(id=1, data_deps=[3, 4])
    assert node.SerializeToString() == b"\x08\x01\x2a\x02\x03\x04"


# ----------------------------------------------------------------------------- byte-exact write


@pytest.mark.parametrize("rank,size", [(0, 81), (1, 83)])
def test_microbenchmark_rewrites_byte_for_byte(tmp_path: Path, rank: int, size: int) -> None:
    src = MICRO / "all_reduce" / "4npus_1MB" / f"all_reduce.{rank}.et"
    original = src.read_bytes()
    assert len(original) == size
    node = EtNode(rank, "all_reduce_4npus_1MB", NodeType.COMM_COLL_NODE, is_cpu_op=False,
                  comm_type=CommType.ALL_REDUCE, comm_size=1_048_576)
    write_et(tmp_path / "out.et", [node], metadata_version="0.0.4")
    assert (tmp_path / "out.et").read_bytes() == original
    # and reading then writing reproduces it too
    write_et(tmp_path / "again.et", read_et(src).nodes)
    assert (tmp_path / "again.et").read_bytes() == original


# ----------------------------------------------------------------------------- facts from the README


COLLECTIVES = {"all_reduce": 0, "all_gather": 2, "reduce_scatter": 7, "all_to_all": 6}


@pytest.mark.parametrize("coll", sorted(COLLECTIVES))
@pytest.mark.parametrize("npus", [4, 8, 16])
def test_microbenchmarks(coll: str, npus: int) -> None:
    for rank in range(npus):
        path = MICRO / coll / f"{npus}npus_1MB" / f"{coll}.{rank}.et"
        trace = read_et(path)
        assert trace.metadata.version == "0.0.4"
        (node,) = trace.nodes
        assert (node.id, node.type, node.comm_type, node.comm_size, node.is_cpu_op) == (
            rank, NodeType.COMM_COLL_NODE, COLLECTIVES[coll], 1_048_576, False)
        assert node.pg_name is None and node.involved_dim is None


def test_chakra0_real_pytorch_trace() -> None:
    trace = read_et(CHAKRA0)
    nodes = trace.nodes
    types = Counter(n.type for n in nodes)
    assert len(nodes) == 3664
    assert types == {NodeType.COMP_NODE: 3643, NodeType.COMM_COLL_NODE: 21}
    comp = [n for n in nodes if n.type == NodeType.COMP_NODE]
    assert Counter(n.is_cpu_op for n in comp) == {True: 2434, False: 1209}
    coll = [n for n in nodes if n.type == NodeType.COMM_COLL_NODE]
    host = [n for n in coll if n.is_cpu_op]
    assert len(host) == 14 and all(n.comm_type is None for n in host)
    gpu = [n for n in coll if not n.is_cpu_op]
    assert Counter(n.comm_type for n in gpu) == {CommType.ALL_REDUCE: 5, CommType.BROADCAST: 2}
    assert sorted(n.comm_size for n in gpu if n.comm_type == CommType.BROADCAST) == [424, 212_480]
    assert all(n.involved_dim == (True,) for n in gpu)
    assert sum(len(n.data_deps) for n in nodes) == 181_878
    ids = {n.id for n in nodes}
    missing = [d for n in nodes for d in n.ctrl_deps if d not in ids]
    assert (len(missing), len(set(missing))) == (1277, 210)
    assert all(d in ids for n in nodes for d in n.data_deps)
    assert (min(ids), max(ids)) == (216, 7022)
    assert trace.metadata.version == "" and trace.metadata.attrs["schema"] == "1.0.1"
    assert {"pid", "time", "start_ts", "finish_ts"} <= set(trace.metadata.attrs)


def test_chakra0_other_attrs() -> None:
    nodes = read_et(CHAKRA0, other=True).nodes
    assert {"rf_id", "seq_id", "tid"} <= set(nodes[0].other)
    assert all(n.other is not None for n in nodes)
    assert read_et(CHAKRA0).nodes[0].other is None


def test_t2d_float_pg_names() -> None:
    rows = {"0.0", "1.0", "2.0", "3.0"}
    seen_rows, seen_cols = set(), set()
    for rank in range(16):
        a, comp, b = read_et(SHUO / "T2D-analytical" / "trace" / f"trace.{rank}.et").nodes
        assert a.involved_dim == (True, False) and b.involved_dim == (False, True)
        assert comp.type == NodeType.COMP_NODE and comp.duration_micros == 100 and comp.data_deps == (a.id,)
        assert b.data_deps == (comp.id,)
        seen_rows.add(a.pg_name)
        seen_cols.add(b.pg_name)
    assert seen_rows == rows and seen_cols == {"4", "5", "6", "7"}
    assert (SHUO / "T2D-analytical" / "trace" / "trace.3.et").read_bytes() == (
        SHUO / "T2D-ns3" / "trace" / "trace.3.et").read_bytes()


def test_custom_ring_peers() -> None:
    folder = ASTRA / "system" / "custom_collectives" / "custom_ring_allreduce_8npus_1MB"
    for rank in range(8):
        trace = read_et(folder / f"custom_allreduce.{rank}.et")
        nodes = trace.nodes
        assert Counter(n.type for n in nodes) == {5: 14, 6: 14, 4: 7}
        assert [n.id for n in nodes] == list(range(35))
        for n in nodes:
            if n.type == NodeType.COMM_SEND_NODE:
                assert (n.comm_dst, n.comm_size, n.comm_tag, n.comm_type) == ((rank + 1) % 8, 131_072, 0, None)
            elif n.type == NodeType.COMM_RECV_NODE:
                assert (n.comm_src, n.comm_size, n.comm_tag, n.comm_type) == ((rank - 1) % 8, 131_072, 0, None)
            else:
                assert n.duration_micros == 7
            assert n.is_cpu_op is None
        assert trace.metadata.version == ""
        assert trace.metadata.attrs["schema"] == "1.0.2-chakra.0.0.4"
        assert trace.metadata.attrs["collective"] == "allreduce"
        table = read_et_table(folder / f"custom_allreduce.{rank}.et")
        send = table.type == NodeType.COMM_SEND_NODE
        assert (table.peer[send] == (rank + 1) % 8).all()


def test_service_and_shuoshuc_sets() -> None:
    ar8 = SERVICE / "service" / "tests" / "test-resources" / "ar_8_analytical_mix" / "workload"
    assert [read_et(ar8 / f"AllReduce_1MB.{r}.et").nodes[0].id for r in range(8)] == [64 + r for r in range(8)]
    ar4 = read_et(SERVICE / "service" / "tests" / "test-resources" / "ar_4_ns3_mix" / "allreduce"
                  / "allreduce.2.et").nodes[0]
    assert (ar4.id, ar4.comm_size, ar4.involved_dim) == (1, 8_388_608, (True,))
    mt = read_et(SHUO / "multitenant-T1D-analytical" / "trace" / "J1" / "trace.3.et").nodes[0]
    assert (mt.comm_size, mt.pg_name) == (524_288_000, "0")
    t3d = [n.pg_name for n in read_et(SHUO / "T3D-analytical" / "trace" / "trace.0.et").nodes if n.type == 7]
    assert t3d[0] == "0" and len(t3d) == 3


@pytest.mark.parametrize("path", trace_params(_all_current_traces, ids=lambda p: str(p.relative_to(TRACES))))
def test_fast_reader_matches_protobuf_reference(path: Path) -> None:
    expected = _reference_nodes(path)
    assert read_et(path, other=True).nodes == expected
    table = read_et_table(path, other=True)
    assert list(table.iter_nodes()) == expected
    assert list(iter_nodes(path)) == [EtNode(**{**_asdict(n), "other": None}) for n in expected]


def _asdict(node: EtNode) -> dict:
    return {name: getattr(node, name) for name in EtNode.__slots__}


# ----------------------------------------------------------------------------- legacy


@pytest.mark.parametrize("path", trace_params(lambda _: sorted(LEGACY.glob("*.et")), ids=lambda p: p.name))
def test_legacy_v0_rejected(path: Path) -> None:
    with pytest.raises(InputError) as info:
        read_et(path)
    msg = str(info.value)
    assert "legacy Chakra v0.0.x" in msg and "pre-2023-10" in msg and "not wire-compatible" in msg
    assert "re-generate" in msg and str(path) in msg
    with pytest.raises(InputError):
        read_et_table(path)
    with pytest.raises(InputError):
        read_metadata(path)


def test_table_columns_on_chakra0() -> None:
    table = read_et_table(CHAKRA0)
    assert len(table) == 3664 and table.id.dtype == np.int64
    assert int(np.diff(table.data_ptr).sum()) == table.data_deps.size == 181_878
    coll = table.type == NodeType.COMM_COLL_NODE
    assert int((table.is_cpu_op[coll] == 1).sum()) == 14
    assert set(NORMALIZED_ATTRS) <= set(EtNode.__slots__)


# ----------------------------------------------------------------------------- differential fuzzing


def _fuzz_records() -> list[bytes]:
    """Records (metadata first) of a small trace touching every field and attribute kind."""
    A = chakra_classes().AttributeProto
    nodes = [chakra_classes().Node(id=i, name=f"n{i}", type=t, data_deps=[i - 1] if i else [],
                                   ctrl_deps=[i + 500] if i % 3 == 0 else [], duration_micros=i * 37)
             for i, t in enumerate([4, 7, 5, 6, 7, 4, 2, 1])]
    nodes[0].inputs.values = "[[1, 2, 0, 64, 4, 'cuda:0']]"
    nodes[1].attr.extend([A(name="is_cpu_op", bool_val=False), A(name="comm_type", int64_val=2),
                          A(name="comm_size", uint64_val=1 << 20), A(name="pg_name", string_val="1.0"),
                          A(name="involved_dim", bool_list=chakra_classes().lists["bool"](values=[True, False]))])
    nodes[2].attr.extend([A(name="comm_dst", int32_val=3), A(name="comm_tag", sint32_val=-4),
                          A(name="comm_type", int64_val=5)])
    nodes[3].attr.extend([A(name="comm_src", int64_val=1), A(name="rf_id", uint64_val=2**63 + 1)])
    nodes[5].attr.extend([A(name="num_ops", int64_val=10**12), A(name="tensor_size", uint64_val=4096),
                          A(name="op", string_val="aten::mm"), A(name="f", double_list=chakra_classes().lists[
                              "double"](values=[0.5]))])
    meta = chakra_classes().GlobalMetadata(version="0.0.4")
    return [meta.SerializeToString()] + [n.SerializeToString() for n in nodes]


@settings(max_examples=300, deadline=None)
@given(edits=st.lists(st.tuples(st.integers(1, 8), st.integers(0, 10**4), st.integers(0, 255),
                                st.sampled_from(["set", "insert", "delete"])), min_size=1, max_size=4))
def test_mutated_records_fast_equals_protobuf(tmp_path_factory: pytest.TempPathFactory, edits: list) -> None:
    """Mutate bytes inside records (framing kept): the fast reader agrees with protobuf, or both fail."""
    records = [bytearray(r) for r in _fuzz_records()]
    for rec_i, pos, value, op in edits:
        rec = records[rec_i]
        at = pos % (len(rec) + 1)
        if op == "insert":
            rec[at:at] = bytes([value])
        elif rec and op == "set":
            rec[at % len(rec)] = value
        elif rec:
            del rec[at % len(rec)]
    path = tmp_path_factory.mktemp("diff") / "d.et"
    path.write_bytes(b"".join(_frame_len(len(r)) + bytes(r) for r in records))
    try:
        fast = read_et(path, other=True).nodes
    except InputError:
        fast = None
    try:
        expected = _reference_nodes(path)
    except (DecodeError, AttrTypeError):
        expected = None
    assert fast == expected
    if fast is not None:
        assert list(read_et_table(path, other=True).iter_nodes()) == fast


def _frame_len(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))
