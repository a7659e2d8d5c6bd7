"""One vocabulary and one unit per surface: bench Parquet file vs dataset, open_results on a file."""

import json
from pathlib import Path

import pandas as pd
import pytest

import netsim
from netsim.cli import main
from netsim.errors import InputError
from netsim.results import dataset

REPO = Path(__file__).resolve().parents[1]
TOPO = str(REPO / "topologies" / "dgx-h100.yaml")


def test_bench_file_and_dataset_share_names_dtypes_and_units(tmp_path, capsys):
    args = ["bench", "--topology", TOPO, "--op", "all_reduce", "-b", "1M", "-e", "4M", "-f", "2", "--model",
            "analytical", "--quiet"]
    assert main(args + ["--out", str(tmp_path / "x.parquet"), "-J", str(tmp_path / "x.json")]) == 0
    assert main(args + ["--out", str(tmp_path / "d")]) == 0
    capsys.readouterr()
    f = netsim.open_results(tmp_path / "x.parquet")  # a single file opens too
    d = netsim.open_results(tmp_path / "d")
    assert len(f.run_ids) == 1 and f.config(f.run_ids[0])["op"] == "all_reduce"
    fc, dc = f.collectives, d.collectives
    assert list(dc.columns) == list(fc.columns[: len(dc.columns)])  # the dataset's names, in its order
    for col in dc.columns:
        if col != "run_id":
            assert fc[col].dtype == dc[col].dtype, col
    assert not {"size_bytes", "time_us", "nranks"} & set(fc.columns)
    oop = fc[~fc["in_place"]].reset_index(drop=True)
    assert oop["bytes"].tolist() == dc["bytes"].tolist() and oop["seq"].tolist() == dc["seq"].tolist()
    assert oop["end_ns"].tolist() == pytest.approx(dc["end_ns"].tolist(), rel=1e-12)
    # text and nccl-tests JSON are in µs (nccl-tests' convention), Parquet in ns
    js = json.loads((tmp_path / "x.json").read_text())
    t_us = js["results"][0]["out_of_place"]["time"]
    assert oop["end_ns"].iloc[0] / 1e3 == pytest.approx(float(t_us), rel=1e-9)
    assert f.ops.empty and f.links.empty and "rank" in f.ranks.columns


def test_collective_and_op_bytes_are_one_dtype():
    assert dataset.schema("collectives").field("bytes").type == dataset.schema("ops").field("bytes").type
    assert str(dataset.schema("ops").field("bytes").type) == "int64"
    # a float byte count (a mean, as the MoE table writes) is rounded, not refused
    t = dataset.conform_table(dataset.as_arrow(pd.DataFrame({"bytes": [1234.6]})), "collectives", "r")
    assert t.column("bytes").to_pylist() == [1235]


def test_open_results_reads_old_bench_files_and_refuses_others(tmp_path):
    old = pd.DataFrame({"size_bytes": [1024, 1024, 2048, 2048], "count": 256, "dtype": "float", "redop": "sum",
                        "root": -1, "time_us": [10.0, 11.0, 20.0, 21.0], "algbw_GBps": 1.0, "busbw_GBps": 1.0,
                        "placement": ["out_of_place", "in_place"] * 2, "op": "all_reduce", "nranks": 8,
                        "algorithm": "ring"})
    old.to_parquet(tmp_path / "old.parquet")
    res = netsim.open_results(tmp_path / "old.parquet")
    c = res.collectives
    assert c["bytes"].tolist() == [1024, 1024, 2048, 2048] and c["group_size"].tolist() == [8] * 4
    assert c["end_ns"].tolist() == [1e4, 1.1e4, 2e4, 2.1e4] and c["seq"].tolist() == [0, 0, 1, 1]
    assert c["in_place"].tolist() == [False, True] * 2 and "placement" not in c.columns  # the old column, renamed
    assert (c["op"] + "/" + c["algorithm"] + " run " + c["run_id"]).tolist()[0] == "all_reduce/ring run file"
    assert res.run_ids == ["file"] and res.config("file") == {}
    pd.DataFrame({"a": [1]}).to_parquet(tmp_path / "other.parquet")
    with pytest.raises(InputError, match="bench --out x.parquet"):
        netsim.open_results(tmp_path / "other.parquet")
    with pytest.raises(InputError, match="no such results directory"):
        netsim.open_results(tmp_path / "missing")


def test_datasets_store_ns_metrics():
    runs = dataset.runs_row({"op": "moe_dispatch"}, time_us=12.5, bound_time_us=3.0, rdma_GBps=1.0)
    assert runs.loc[0, "time_ns"] == 12500.0 and runs.loc[0, "bound_time_ns"] == 3000.0
    assert "time_us" not in runs.columns and runs.loc[0, "rdma_GBps"] == 1.0


def test_readme_documents_units_and_bench_columns():
    text = (REPO / "README.md").read_text()
    units = text[text.index("## Units"):]
    assert "µs" in units and "ns" in units and "`size_bytes`" in units and "`end_ns`" in units
