"""Communicator groups from PyTorch ``## process_group:init ##`` metadata (netsim.chakra.groups)."""

import gzip
import hashlib
import json

import pytest

from conftest import TOPOLOGIES, need_traces
from netsim.errors import InputError
import netsim.chakra.files as chakra
from netsim.chakra import EtNode, read_et, read_et_table, write_et, write_workload
from netsim.chakra.schema import CommType, NodeType
from netsim.cli.workload import format_summary
from netsim.workload.simulation import simulate
from netsim.vocab import normalize_group_name as _norm
from netsim.chakra.groups import groups_from_traces, load_groups, process_groups
from netsim.chakra.inspect import read_workload, summarize_trace

PG_INIT = "## process_group:init ##"
META, COLL = int(NodeType.METADATA_NODE), int(NodeType.COMM_COLL_NODE)
# PyTorch's hashed process-group names are sha1 hex digests of the rank list
EVEN = hashlib.sha1(b"0_2_4_6").hexdigest()
ODD = hashlib.sha1(b"1_3_5_7").hexdigest()


def entry(name, ranks, desc="", size=None):
    return {"pg_name": name, "pg_desc": desc, "backend_config": "cuda:nccl", "ranks": ranks,
            "group_size": size if size is not None else len(ranks), "group_count": 5}


def converted(entries):
    """``inputs.values`` as the Chakra PyTorch converter writes it: str() of the host-ET input list."""
    return str([json.dumps(entries)])


def meta(entries=None, text=None, nid=1):
    return EtNode(nid, PG_INIT, META, inputs=text if text is not None else converted(entries))


def coll(nid, ctype, pg, deps=()):
    return EtNode(nid, f"coll{nid}", COLL, data_deps=tuple(deps), comm_type=int(ctype), comm_size=1 << 20,
                  pg_name=pg, is_cpu_op=False)


def member_entries(rank):
    """The groups rank ``rank`` belongs to, as PyTorch records them (world size 8)."""
    half = [0, 1, 2, 3] if rank < 4 else [4, 5, 6, 7]
    par = [0, 2, 4, 6] if rank % 2 == 0 else [1, 3, 5, 7]
    return [entry("0", [], "default_pg", 8), entry("1" if rank < 4 else "2", half, "tp"),
            entry(EVEN if rank % 2 == 0 else ODD, par, "dp")]


def pytorch_like(tmp_path, with_meta=True):
    """8 ranks: a world all-reduce, one on the rank's half ("1"/"2"), an all-gather on a hashed group."""
    ranks = []
    for r in range(8):
        nodes = [meta(member_entries(r))] if with_meta else []
        nodes += [coll(2, CommType.ALL_REDUCE, "0", deps=(1,) if with_meta else ()),
                  coll(3, CommType.ALL_REDUCE, "1.0" if r < 4 else "2", deps=(2,)),
                  coll(4, CommType.ALL_GATHER, EVEN if r % 2 == 0 else ODD, deps=(3,))]
        ranks.append(nodes)
    prefix = tmp_path / ("pt" if with_meta else "bare")
    write_workload(prefix, ranks)
    return str(prefix)


def test_metadata_groups_run_on_the_right_members(tmp_path):
    prefix = pytorch_like(tmp_path)
    assert groups_from_traces(read_workload(prefix)) == {
        "0": list(range(8)), "1": [0, 1, 2, 3], EVEN: [0, 2, 4, 6], "2": [4, 5, 6, 7], ODD: [1, 3, 5, 7]}
    # every rank simulated (symmetry none): the collectives table then lists every instance
    res = simulate(str(TOPOLOGIES / "dgx-h100.yaml"), prefix, model="analytical", symmetry="none")
    assert res.finish.min() > 0
    colls = res.tables()["collectives"]
    got = sorted(zip(colls["op"].astype(str), colls["group"].astype(str), colls["group_size"]))
    assert got == sorted([("all_reduce", "world", 8), ("all_reduce", "1", 4), ("all_reduce", "2", 4),
                          ("all_gather", EVEN, 4), ("all_gather", ODD, 4)])
    assert sorted(inst["members"] for inst in res.run._colls.values()) == sorted(
        [tuple(range(8)), (0, 1, 2, 3), (4, 5, 6, 7), (0, 2, 4, 6), (1, 3, 5, 7)])
    # without the metadata the same pg_names are unknown: the groups above came from it
    with pytest.raises(InputError, match="pg_name '1.0' names no communicator group"):
        simulate(str(TOPOLOGIES / "dgx-h100.yaml"), pytorch_like(tmp_path, with_meta=False), model="analytical")


def test_inspect_reports_process_groups(tmp_path):
    s = summarize_trace(pytorch_like(tmp_path))
    assert s["process_groups"]["count"] == 5
    assert {g["pg_name"]: g["size"] for g in s["process_groups"]["groups"]} == {
        "0": 8, "1": 4, "2": 4, EVEN: 4, ODD: 4}
    text = format_summary(s)
    assert "proc. groups  5: 0 default_pg (8 ranks), 1 tp (4 ranks)" in text
    plain = summarize_trace(write_workload(tmp_path / "w", [[coll(1, 0, None)]] * 2)[0])
    assert plain["process_groups"] == {"count": 0, "groups": []}
    assert "proc. groups" not in format_summary(plain)


def test_ranks_disagree_across_files(tmp_path):
    paths = write_workload(tmp_path / "d", [[meta([entry("7", [0, 1])])], [meta([entry("7.0", [0, 1, 2])])],
                                            [meta([entry("0", [])])]])
    with pytest.raises(InputError) as err:
        groups_from_traces(read_workload(tmp_path / "d"))
    msg = str(err.value)
    assert "\n" not in msg and "'7.0'" in msg and str(paths[1]) in msg and str(paths[0]) in msg
    # inspect still works and says why the metadata is unusable
    assert "unusable" in format_summary(summarize_trace(tmp_path / "d"))


def test_malformed_json_is_one_line_naming_file_and_field(tmp_path):
    bad = str(['[{"pg_name": "0", "ranks": [}]'])
    path = write_workload(tmp_path / "m", [[meta(text=bad, nid=9)]])[0]
    with pytest.raises(InputError) as err:
        groups_from_traces(read_workload(tmp_path / "m"))
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"{path}: node 9 '{PG_INIT}' inputs.values: ")
    assert "not valid JSON" in msg
    for text, what in ((converted([{"pg_name": "1", "ranks": ["a"]}]), "ranks"),
                       (converted([{"ranks": [0]}]), "pg_name"), ("[5]", "list of objects")):
        write_et(tmp_path / "x.0.et", [meta(text=text)])
        with pytest.raises(InputError, match=what):
            groups_from_traces({0: read_et_table(tmp_path / "x.0.et")})


def test_empty_ranks_mean_every_rank_and_world_overrides(tmp_path):
    write_et(tmp_path / "e.0.et", [meta([entry("0", [], size=2), entry("3", [1, 0, 1])])])
    tables = {0: read_et_table(tmp_path / "e.0.et"), 1: read_et_table(tmp_path / "e.0.et")}
    assert groups_from_traces(tables) == {"0": [0, 1], "3": [0, 1]}
    assert groups_from_traces(tables, world=4)["0"] == [0, 1, 2, 3]  # e.g. replicas: world > files
    with pytest.raises(InputError, match="rank 1 is outside the workload's 1 ranks.*global ranks"):
        groups_from_traces({0: tables[0]})


@pytest.mark.parametrize("text", [
    '[{"pg_name": "4", "ranks": [0, 1]}]',  # plain JSON
    '[[{"pg_name": "4", "ranks": [0, 1]}]]',  # nested once more
    json.dumps([json.dumps([{"pg_name": "4", "ranks": [0, 1]}])]),  # JSON list of a JSON string
    str([{"pg_name": 4, "ranks": [0, 1]}]),  # Python str() of the objects, integer pg_name
    str(['[{"pg_name": "4", "pg_desc": "it\'s", "ranks": [0, 1]}]']),  # str() switches to double quotes
])
def test_tolerated_encodings(tmp_path, text):
    write_et(tmp_path / "q.0.et", [meta(text=text)])
    assert groups_from_traces({0: read_et_table(tmp_path / "q.0.et")}, world=2) == {"4": [0, 1]}


def test_nothing_declared(tmp_path):
    nodes = [meta(text=""), meta(text="[]", nid=2), EtNode(3, "other metadata", META, inputs="[{]"),
             EtNode(4, PG_INIT, int(NodeType.COMP_NODE), inputs="[{]")]  # only METADATA nodes named so count
    write_et(tmp_path / "n.0.et", nodes)
    assert groups_from_traces({0: read_et_table(tmp_path / "n.0.et")}) == {}


def test_json_and_metadata_combined(tmp_path):
    write_workload(tmp_path / "c", [[meta([entry("0", []), entry("1", [0, 1])])]] * 4)
    tables = read_workload(tmp_path / "c")
    agree = tmp_path / "agree.json"
    agree.write_text(json.dumps({"1.0": [1, 0], "2": [2, 3]}))
    g = load_groups(str(agree), tables)
    assert dict(g.items()) == {"1": (0, 1), "2": (2, 3), "0": (0, 1, 2, 3)}
    assert g.resolve("2") == (2, 3) and g.resolve("1") == (0, 1)
    clash = tmp_path / "clash.json"
    clash.write_text(json.dumps({"1": [0, 1, 2]}))
    with pytest.raises(InputError) as err:
        load_groups(str(clash), tables)
    assert str(err.value).startswith(f"{clash}: 1: group '1' has ranks [0, 1, 2]")
    assert "process_group:init metadata of" in str(err.value) and "\n" not in str(err.value)
    only_meta = load_groups(None, tables)
    assert dict(only_meta.items()) == {"0": (0, 1, 2, 3), "1": (0, 1)}
    assert dict(load_groups(str(tmp_path / "empty.json"), tables).items()) == dict(only_meta.items())
    assert len(load_groups(None, read_workload(write_workload(tmp_path / "b", [[coll(1, 0, None)]])[0]))) == 0
    assert dict(load_groups({"5": [3]}, tables).items())["5"] == (3,)


def test_names_match_exactly_unless_decimal():
    assert _norm("1.0") == _norm("1") == _norm("001") == "1"
    assert _norm(EVEN) == EVEN and _norm("1e3") == "1e3"
    long_a, long_b = "1" * 40, "1" * 39 + "2"  # float() would merge these
    assert _norm(long_a) != _norm(long_b)


def test_metadata_inputs_survive_the_decoder(tmp_path, monkeypatch):
    text = converted([entry("0", [])])
    nodes = [coll(i, 0, None) for i in range(1, 400)] + [meta(text=text, nid=1000)]
    nodes += [EtNode(1001, "c", int(NodeType.COMP_NODE), inputs="not kept")]
    write_et(tmp_path / "k.0.et", nodes)
    proto = chakra.chakra_classes().Node(id=1000, name=PG_INIT, type=META)
    proto.inputs.values = text
    assert list(chakra.iter_records(tmp_path / "k.0.et"))[400] == proto.SerializeToString()
    monkeypatch.setattr(chakra, "_CHUNK_BYTES", 256)  # the metadata node lands in a later chunk
    t = read_et_table(tmp_path / "k.0.et")
    assert t.inputs == {399: text} and t.node(399).inputs == text and t.node(400).inputs is None
    assert [n.inputs for n in read_et(tmp_path / "k.0.et").nodes][399:] == [text, None]
    assert [n.inputs for n in chakra.iter_nodes(tmp_path / "k.0.et")][399:] == [text, None]


# --------------------------------------------------------------------------- real traces


def test_real_pytorch_metadata(traces, tmp_path):
    """The host ET of a 2-GPU ResNet run, converted as the Chakra converter does, gives the world group."""
    host = need_traces("facebookresearch__param/et_replay/tests/inputs/1.1.0-chakra.0.0.4/resnet_2gpu_et.json.gz")
    with gzip.open(host, "rt") as f:
        node = next(n for n in json.load(f)["nodes"] if "process_group:init" in n["name"])
    text = str(node["inputs"]["values"])  # pytorch_converter.py: protobuf_node.inputs.values = str(...)
    write_workload(tmp_path / "resnet", [[EtNode(node["id"], node["name"], META, inputs=text),
                                          coll(5, CommType.ALL_REDUCE, "0", deps=(node["id"],))]] * 2)
    tables = read_workload(tmp_path / "resnet")
    found = process_groups(tables)
    assert [(g.name, g.desc, g.ranks) for g in found.values()] == [("0", "default_pg", (0, 1))]
    assert summarize_trace(tmp_path / "resnet")["process_groups"]["groups"] == [
        {"pg_name": "0", "pg_desc": "default_pg", "size": 2}]
    res = simulate(str(TOPOLOGIES / "dgx-h100.yaml"), str(tmp_path / "resnet"), model="analytical")
    assert res.tables()["collectives"]["group_size"].tolist() == [2]


def test_real_converted_trace_has_no_metadata(traces):
    """chakra.0.et (the only real PyTorch-converted .et) and the generated sets declare no groups."""
    chakra0 = traces / "mlcommons__chakra/tests/data/chakra.0.et"
    t3d = traces / "shuoshuc__astra-sim-artifacts/examples/T3D-analytical/trace/trace"
    for prefix in (chakra0, t3d):
        tables = read_workload(prefix)
        assert process_groups(tables) == {}
        assert summarize_trace(prefix)["process_groups"]["count"] == 0
    assert read_et_table(chakra0).inputs == {}  # no METADATA node at all
