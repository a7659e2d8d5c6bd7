"""Results datasets: layout, round trip, overwrite refusal, atomic writes, determinism, real runs."""

import json
import os

import numpy as np
import pandas as pd
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import netsim
from netsim.cli import main
from netsim.errors import InputError
from netsim.results import dataset
from netsim.results.dataset import (SCHEMA_VERSION, TABLES, canonical_config, is_complete, open_results,
                                    part_path, run_id_for, write_run)
from netsim.results.record import RunRecorder
from netsim.topology.builders import nvswitch_domain
from netsim.chakra import write_workload
from netsim.chakra.schema import CommType, NodeType
from netsim.chakra.model import EtNode
from netsim.workload.simulation import simulate

TOPO = nvswitch_domain(4, links_per_gpu=1, link_bw=1e9, latency=0.0)
COMP, COLL, SEND, RECV = (int(NodeType.COMP_NODE), int(NodeType.COMM_COLL_NODE),
                          int(NodeType.COMM_SEND_NODE), int(NodeType.COMM_RECV_NODE))


def small_workload(tmp_path):
    """4 ranks: compute, an all-reduce overlapping it, compute after, and a send/recv pair."""
    def rank(r):
        nodes = [EtNode(1, "fwd", COMP, duration_micros=100, is_cpu_op=False),
                 EtNode(2, "ar", COLL, comm_type=int(CommType.ALL_REDUCE), comm_size=4_000_000, is_cpu_op=False),
                 EtNode(3, "bwd", COMP, data_deps=(1, 2), duration_micros=50, is_cpu_op=False)]
        if r == 0:
            nodes.append(EtNode(4, "send", SEND, data_deps=(3,), comm_dst=1, comm_tag=7, comm_size=1_000_000))
        if r == 1:
            nodes.append(EtNode(4, "recv", RECV, data_deps=(3,), comm_src=0, comm_tag=7, comm_size=1_000_000))
        return nodes
    write_workload(tmp_path / "w", [rank(r) for r in range(4)])
    return str(tmp_path / "w")


def test_canonical_config_and_run_id():
    assert canonical_config({"b": 1, "a": {"d": 2, "c": [1, 2]}}) == '{"a":{"c":[1,2],"d":2},"b":1}'
    rid = run_id_for({"a": 1})
    assert len(rid) == 16 and int(rid, 16) >= 0 and rid == run_id_for({"a": 1}) != run_id_for({"a": 2})


def test_round_trip_layout_and_metadata(tmp_path):
    cfg = {"model": "flow", "nested": {"x": 1}}
    rid = run_id_for(cfg)
    ops = pd.DataFrame({"rank": [0, 1], "node_id": [5, 6], "name": ["a", "b"], "kind": ["compute", "send"],
                        "comm_type": [None, None], "group": [None, None], "bytes": [0, 8],
                        "start_ns": [0.0, 1.0], "end_ns": [2.0, 3.0]})
    write_run(tmp_path, rid, {"ops": ops}, cfg)
    for table in ("ops", "runs"):
        path = part_path(tmp_path, table, rid)
        assert path.is_file() and path.parent.name == f"run_id={rid}" and path.parent.parent.name == table
        meta = pq.read_metadata(path).metadata
        assert json.loads(meta[b"netsim.config"]) == cfg and meta[b"netsim.schema_version"] == str(SCHEMA_VERSION).encode()
        assert str(pq.read_schema(path).field("run_id").type).startswith("dictionary")
    assert pq.read_schema(part_path(tmp_path, "ops", rid)).field("name").type.value_type == "string"
    res = open_results(tmp_path)
    assert res.run_ids == [rid] and is_complete(tmp_path, rid)
    assert res.ops["name"].tolist() == ["a", "b"] and res.ops["run_id"].tolist() == [rid, rid]
    assert res.ops["bytes"].dtype == np.int64 and res.ops["rank"].dtype == np.int32
    assert res.runs.loc[0, "nested.x"] == 1 and res.runs.loc[0, "model"] == "flow"
    assert res.config(rid) == cfg
    assert list(res.ranks.columns) == list(dataset.schema("ranks").names) and res.ranks.empty  # absent table
    assert isinstance(res.dataset("ops"), ds.Dataset)
    assert res.dataset("ops").to_table(filter=ds.field("run_id") == rid).num_rows == 2
    assert len(pd.read_parquet(tmp_path / "ops")) == 2  # plain pandas reads the hive layout too
    with pytest.raises(InputError, match="no complete run"):
        res.config("0" * 16)


def test_several_runs_and_schema_drift(tmp_path):
    for i, extra in enumerate([{}, {"new_key": 3.5}]):
        cfg = {"i": i, **extra}
        write_run(tmp_path, run_id_for(cfg), {"ranks": pd.DataFrame({"rank": [0, 1], "finish_ns": [1.0, 2.0 + i]})}, cfg)
    res = open_results(tmp_path)
    assert len(res.run_ids) == 2 and len(res.ranks) == 4
    assert set(res.runs["i"]) == {0, 1} and res.runs["new_key"].isna().sum() == 1


def test_overwrite_refusal(tmp_path):
    cfg = {"a": 1}
    rid = run_id_for(cfg)
    write_run(tmp_path, rid, {"links": pd.DataFrame({"link_id": [0]}), "ranks": pd.DataFrame({"rank": [0]})}, cfg)
    with pytest.raises(InputError, match="--overwrite") as info:
        write_run(tmp_path, rid, {"ranks": pd.DataFrame({"rank": [1]})}, cfg)
    assert f"run_id={rid}" in str(info.value)  # names the existing file
    write_run(tmp_path, rid, {"ranks": pd.DataFrame({"rank": [1]})}, cfg, overwrite=True)
    res = open_results(tmp_path)
    assert res.ranks["rank"].tolist() == [1]
    assert not part_path(tmp_path, "links", rid).exists()  # stale table of the old run removed
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="not a results directory"):
        write_run(tmp_path / "file", rid, {}, cfg)


def test_atomic_writes(tmp_path):
    cfg = {"a": 1}
    rid = run_id_for(cfg)
    seen = []

    def chunks():
        yield pd.DataFrame({"rank": [0]})
        part_dir = part_path(tmp_path, "ops", rid).parent
        seen.extend(sorted(os.listdir(part_dir)))  # mid-write: only the hidden temporary file
        yield pd.DataFrame({"rank": [1]})
        raise RuntimeError("simulated crash")

    with pytest.raises(RuntimeError):
        write_run(tmp_path, rid, {"ops": chunks()}, cfg)
    assert len(seen) == 1 and seen[0].startswith(".part-0.parquet.") and seen[0].endswith(".tmp")
    assert os.listdir(part_path(tmp_path, "ops", rid).parent) == []  # nothing partial left behind
    assert not is_complete(tmp_path, rid) and open_results(tmp_path).run_ids == []
    # a crash after some tables but before `runs`: the run is not listed
    write_run(tmp_path, rid, {"ranks": pd.DataFrame({"rank": [0]})}, cfg)
    part_path(tmp_path, "runs", rid).unlink()
    assert open_results(tmp_path).ranks.empty


def test_simulate_tables_and_streaming(tmp_path):
    res = simulate(TOPO, small_workload(tmp_path), model="flow")
    frames = res.tables()
    assert set(frames) == set(TABLES)
    rec = RunRecorder(res, chunk_rows=5)  # 14 op rows -> 3 row groups
    rid = rec.write(tmp_path / "out")
    assert pq.ParquetFile(part_path(tmp_path / "out", "ops", rid)).metadata.num_row_groups == 3
    back = open_results(tmp_path / "out")
    assert len(back.ops) == len(res.ops) == 14
    pd.testing.assert_frame_equal(back.ranks.drop(columns="run_id"), frames["ranks"].drop(columns="run_id"))


def test_text_columns_take_string_operations(tmp_path):
    """Text columns come back as strings, not categoricals: joining them with other strings works
    (a categorical raises TypeError on ``+`` under pandas 2 and 3)."""
    res = simulate(TOPO, small_workload(tmp_path), model="flow")
    RunRecorder(res).write(tmp_path / "out")
    back = open_results(tmp_path / "out")
    for name, frame in [*((n, back.table(n)) for n in TABLES), *res.tables().items()]:
        assert not [c for c in frame.columns if isinstance(frame[c].dtype, pd.CategoricalDtype)], name
    ops, links = back.ops, back.links
    label = "rank " + ops["rank"].astype(str) + ": " + ops["name"] + " (" + ops["kind"] + ", run " + ops["run_id"] + ")"
    assert label.iloc[0] == f"rank {ops['rank'].iloc[0]}: {ops['name'].iloc[0]} ({ops['kind'].iloc[0]}, run {back.run_ids[0]})"
    assert (links["src"] + "->" + links["dst"]).str.contains("->").all()
    assert (pd.Series(["x"] * len(links)) + links["kind"].reset_index(drop=True)).str.startswith("x").all()


def test_table_values(tmp_path):
    res = simulate(TOPO, small_workload(tmp_path), model="analytical")
    t = res.tables()
    ops, ranks, coll, links = t["ops"], t["ranks"], t["collectives"], t["links"]
    assert set(ops["kind"]) == {"compute", "collective", "send", "recv"}
    ar = ops[ops["kind"] == "collective"]
    assert set(ar["comm_type"]) == {"all_reduce"} and set(ar["group"]) == {"world"} and (ar["bytes"] == 4_000_000).all()
    assert ops.loc[ops["kind"] == "compute", "comm_type"].isna().all()
    t_ar = 2 * 3 * 1e6 / 1e9 + 8.4e-6 + 6 * 3.4e-6  # ring all-reduce of 4 MB on 1 GB/s links + NCCL latency
    assert coll.loc[0, "end_ns"] - coll.loc[0, "start_ns"] == pytest.approx(t_ar * 1e9)
    assert coll.loc[0, "algbw_GBps"] == pytest.approx(4e6 / 1e9 / t_ar)
    assert coll.loc[0, "busbw_GBps"] == pytest.approx(coll.loc[0, "algbw_GBps"] * 1.5)
    assert ranks["compute_ns"].to_numpy() == pytest.approx(res.compute * 1e9)
    total = ranks["compute_ns"] + ranks["exposed_comm_ns"] + ranks["idle_ns"]
    assert total.to_numpy() == pytest.approx(ranks["finish_ns"].to_numpy())
    # the all-reduce (6 ms) overlaps the first 100 us of compute; bwd waits for it
    assert ranks.loc[2, "exposed_comm_ns"] == pytest.approx((t_ar - 100e-6) * 1e9)
    assert ranks.loc[2, "idle_ns"] == pytest.approx(0.0, abs=1e-6)
    assert links["bytes"].sum() == pytest.approx(2 * (4 * 6 * 1e6 + 1e6))  # ring 6 steps x 4 ranks, p2p; 2 hops each
    assert (links["busy_ns"] <= ranks["finish_ns"].max() + 1e-6).all()
    assert set(links["status"]) == {"ok"} and (links["peak_flows"] >= 1).all()


def test_flow_link_counters(tmp_path):
    res = simulate(TOPO, small_workload(tmp_path), model="flow")
    links = res.tables()["links"]
    up = links[links["src"] == "gpu0"].iloc[0]
    # gpu0's up-link: the ring all-reduce (6 steps of 1 MB over NCCL's channels: 2 on a 1 GB/s GPU,
    # one searched channel doubled by connect.cc:460, nccl.ring_channels) then the 1 MB send
    assert up["bytes"] == pytest.approx(7e6) and up["busy_ns"] == pytest.approx(7e6)  # 1 GB/s: 1 B/ns
    assert up["peak_flows"] == 2 and up["utilization"] == pytest.approx(7e6 / res.finish.max() / 1e9)


def test_identical_input_and_seed_give_identical_files(tmp_path):
    wl = small_workload(tmp_path)
    faults = {"compute": [{"distribution": {"lognormal": {"sigma": 0.1}}}],
              "launch_jitter": {"distribution": {"uniform": {"low": "0us", "high": "5us"}}}}
    for name in ("a", "b"):
        simulate("topologies/dgx-h100.yaml", wl, faults=faults, seed=11, out=tmp_path / name)
    rid = open_results(tmp_path / "a").run_ids[0]
    assert open_results(tmp_path / "b").run_ids == [rid]
    for table in ("ops", "collectives", "links", "ranks"):
        assert part_path(tmp_path / "a", table, rid).read_bytes() == part_path(tmp_path / "b", table, rid).read_bytes()
    a, b = open_results(tmp_path / "a").runs, open_results(tmp_path / "b").runs
    pd.testing.assert_frame_equal(a.drop(columns="wall_time_s"), b.drop(columns="wall_time_s"))
    simulate("topologies/dgx-h100.yaml", wl, faults=faults, seed=12, out=tmp_path / "a")
    res = open_results(tmp_path / "a")
    assert len(res.run_ids) == 2 and res.ranks.groupby("run_id", observed=True)["compute_scale"].sum().nunique() == 2


# ------------------------------------------------------------------ CLI
def test_run_out_cli(tmp_path, capsys):
    wl = small_workload(tmp_path)
    out = tmp_path / "res"
    args = ["run", "--topology", "topologies/dgx-h100.yaml", "--workload", wl, "--out", str(out), "--json"]
    assert main(args) == 0
    summary = json.loads(capsys.readouterr().out)
    assert open_results(out).run_ids == [summary["run_id"]]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--overwrite" in err and len(err.strip().splitlines()) == 1
    assert main(args + ["--overwrite"]) == 0


def test_bench_out_dataset(tmp_path, capsys):
    out = tmp_path / "bench"
    args = ["bench", "--topology", "topologies/dgx-h100.yaml", "--op", "all_reduce", "-b", "1M", "-e", "4M",
            "--out", str(out)]
    assert main(args) == 0
    res = open_results(out)
    coll = res.collectives
    assert len(coll) == 3 and (coll["op"] == "all_reduce").all() and (coll["group_size"] == 8).all()
    assert coll["bytes"].tolist() == [2**20, 2**21, 2**22] and set(coll["algorithm"]) - {""}
    assert (coll["busbw_GBps"] / coll["algbw_GBps"]).to_numpy() == pytest.approx(1.75)
    assert res.runs.loc[0, "command"] == "bench" and res.runs.loc[0, "op"] == "all_reduce"
    capsys.readouterr()
    assert main(args) == 2 and "--overwrite" in capsys.readouterr().err


# ------------------------------------------------------------------ real traces
def test_run_out_on_real_trace(traces, tmp_path, capsys):
    prefix = traces / ("astra-sim__astra-sim/examples/system/custom_collectives/"
                       "custom_ring_allreduce_8npus_1MB/custom_allreduce")
    out = tmp_path / "r"
    assert main(["run", "--topology", "topologies/dgx-h100.yaml", "--workload", str(prefix), "--model",
                 "analytical", "--out", str(out)]) == 0
    assert "run_id" in capsys.readouterr().out
    ref = simulate("topologies/dgx-h100.yaml", prefix, model="analytical")
    res = netsim.open_results(out)
    for table in TABLES:
        assert part_path(out, table, res.run_ids[0]).is_file()
        assert getattr(res, table).empty == (table == "collectives"), table  # a custom ring of sends/receives
    assert len(res.ops) == len(ref.ops) == 8 * 35
    ranks = res.ranks.sort_values("rank")
    assert ranks["compute_ns"].to_numpy() == pytest.approx(ref.compute * 1e9)
    assert ranks["finish_ns"].to_numpy() == pytest.approx(ref.finish * 1e9)
    assert ranks["ops"].sum() == len(ref.ops)
    assert (ranks["compute_ns"] + ranks["exposed_comm_ns"] + ranks["idle_ns"]).to_numpy() == \
        pytest.approx(ranks["finish_ns"].to_numpy())
    assert (res.ops["end_ns"] >= res.ops["start_ns"]).all() and res.ops["end_ns"].max() == pytest.approx(
        ref.finish.max() * 1e9)
    assert set(res.ops["kind"]) == {"compute", "send", "recv"}
    sends = res.ops[res.ops["kind"] == "send"]
    assert res.links["bytes"].sum() == pytest.approx(2 * sends["bytes"].sum())  # GPU -> NVSwitch -> GPU
    assert (res.links["utilization"] >= 0).all() and (res.links["busy_ns"] <= ranks["finish_ns"].max() + 1e-6).all()
    assert res.runs.loc[0, "n_ops"] == len(ref.ops) and res.runs.loc[0, "wall_time_s"] > 0


def test_collectives_of_real_trace(traces, tmp_path):
    d = traces / "shuoshuc__astra-sim-artifacts/examples/T1D-analytical"
    ref = simulate(d / "inputs/network.yml", d / "trace/trace", comm_groups=d / "inputs/comm_group.json",
                   model="flow", out=tmp_path / "r")
    res = open_results(tmp_path / "r")
    coll, ops = res.collectives, res.ops
    assert len(coll) == ops.loc[ops["kind"] == "collective"].groupby("rank", observed=True).size().max()
    assert (coll["end_ns"] > coll["start_ns"]).all() and (coll["algbw_GBps"] > 0).all()
    assert (coll["last_start_ns"] >= coll["start_ns"]).all() and coll["end_ns"].max() == pytest.approx(
        ref.finish.max() * 1e9)
    n = coll["group_size"].to_numpy()
    assert (coll["busbw_GBps"] / coll["algbw_GBps"]).to_numpy() == pytest.approx(2 * (n - 1) / n)
    assert (res.ranks["exposed_comm_ns"] > 0).all() and res.links["peak_flows"].max() >= 1


def test_pytorch_trace_tables(traces, tmp_path):
    res = simulate("topologies/dgx-h100.yaml", traces / "mlcommons__chakra/tests/data/chakra.0.et",
                   model="analytical")
    t = res.tables()
    assert len(t["ops"]) == 3664 and {"compute"} <= set(t["ops"]["kind"])
    assert t["ranks"]["compute_ns"].to_numpy() == pytest.approx(res.compute * 1e9)
