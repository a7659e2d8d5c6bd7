"""netsim.open_results on damaged datasets: netsim.ResultsError naming the file and the problem,
never a bare pyarrow error (truncated, garbage, empty, damaged pages, wrong schema, missing
columns, columns that do not merge, bad metadata, folders that are not datasets)."""

import json
import os
import random

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import netsim
from netsim.cli import main
from netsim.errors import InputError, ResultsError
from netsim.results.bench_tables import write_bench_file
from netsim.results.dataset import part_path, run_id_for, write_run

CFG = {"case": "damaged"}
RID = run_id_for(CFG)


def ops_frame(n=20_000, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"rank": rng.integers(0, 8, n), "node_id": np.arange(n), "name": ["op"] * n,
                         "kind": ["compute"] * n, "comm_type": [None] * n, "group": [None] * n,
                         "bytes": rng.integers(0, 1 << 30, n), "start_ns": rng.random(n) * 1e6,
                         "end_ns": rng.random(n) * 1e6 + 1e6})


@pytest.fixture
def dataset(tmp_path):
    root = tmp_path / "res"
    write_run(root, RID, {"ops": ops_frame(), "ranks": pd.DataFrame({"rank": [0, 1], "finish_ns": [1.0, 2.0]})}, CFG)
    return root


def expect(call, path, *, match):
    """``call()`` raises ResultsError on one line naming ``path`` and matching ``match``."""
    with pytest.raises(ResultsError, match=match) as info:
        call()
    text = str(info.value)
    assert "\n" not in text and str(path) in text and info.value.source == str(path), text
    assert isinstance(info.value, InputError) and isinstance(info.value, ValueError)
    return text


def test_sound_dataset_reads(dataset):
    res = netsim.open_results(dataset)
    assert len(res.ops) == 20_000 and res.config(RID) == CFG and len(res.runs) == 1


@pytest.mark.parametrize("damage,match", [
    ("truncated", r"cannot read Parquet \(ArrowInvalid: .*magic bytes"),
    ("garbage", r"cannot read Parquet \(ArrowInvalid: .*magic bytes"),
    ("empty", r"cannot read Parquet \(ArrowInvalid: Parquet file size is 0 bytes\)"),
    ("pages", r"cannot read Parquet \("),
])
def test_damaged_part_file(dataset, damage, match):
    f = part_path(dataset, "ops", RID)
    data = f.read_bytes()
    rng = random.Random(7)
    if damage == "truncated":
        f.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        f.write_bytes(bytes(rng.randrange(256) for _ in range(len(data))))
    elif damage == "empty":
        f.write_bytes(b"")
    else:  # the footer intact, the pages overwritten: found only when the pages are read
        mid = bytes(rng.randrange(256) for _ in range(len(data) // 2))
        f.write_bytes(data[:64] + mid + data[64 + len(mid):])
        pq.read_schema(f)  # the damage is inside
        with pytest.raises(Exception) as raw:
            pq.read_table(f)
        assert not isinstance(raw.value, InputError)  # what pyarrow alone says
    res = netsim.open_results(dataset)  # opening is lazy: the tables are read when asked for
    assert res.run_ids == [RID]
    expect(lambda: res.ops, f, match=match)
    assert len(res.ranks) == 2  # the other tables still read
    if damage != "pages":
        expect(lambda: res.dataset("ops"), f, match=match)


def test_missing_columns(dataset):
    f = part_path(dataset, "ops", RID)
    pq.write_table(pa.table({"rank": pa.array([0], pa.int32()), "x": ["a"]}), f)
    expect(lambda: netsim.open_results(dataset).ops, f,
           match=r"not a netsim ops table: missing column\(s\) node_id, name, kind, comm_type, group, bytes, "
                 r"start_ns, end_ns$")


def test_wrong_column_type(dataset):
    f = part_path(dataset, "ranks", RID)
    frame = pq.read_table(f).to_pandas()
    frame["finish_ns"] = ["late"] * len(frame)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), f)
    text = expect(lambda: netsim.open_results(dataset).ranks, f, match=r"finish_ns: expected number \(float64\), got (large_)?string$")
    assert text.startswith(f"{f}: finish_ns: ")


def test_columns_that_do_not_merge_across_runs(tmp_path):
    root = tmp_path / "res"
    for i, value in enumerate([1.5, "text"]):
        cfg = {"i": i}
        write_run(root, run_id_for(cfg), {"ranks": pd.DataFrame({"rank": [0], "extra": [value]})}, cfg)
    files = sorted(root.glob("ranks/run_id=*/part-0.parquet"), key=lambda p: p.parent.name)
    res = netsim.open_results(root)
    text = expect(lambda: res.ranks, files[1], match=r"columns do not match the table's other files")
    assert "extra" in text


def test_runs_part_and_config_metadata(dataset):
    f = part_path(dataset, "runs", RID)
    good = f.read_bytes()
    f.write_bytes(b"PAR1" + b"\0" * 40)
    res = netsim.open_results(dataset)
    expect(lambda: res.runs, f, match=r"cannot read Parquet")
    expect(lambda: res.config(RID), f, match=r"cannot read Parquet")
    f.write_bytes(good)
    tbl = pq.read_table(f)
    pq.write_table(tbl.replace_schema_metadata({}), f)
    expect(lambda: netsim.open_results(dataset).config(RID), f, match=r"no netsim.config in the file metadata")
    pq.write_table(tbl.replace_schema_metadata({"netsim.config": "{not json"}), f)
    expect(lambda: netsim.open_results(dataset).config(RID), f, match=r"netsim.config in the file metadata is not JSON")


def test_folders_that_are_not_datasets(tmp_path):
    expect(lambda: netsim.open_results(tmp_path / "absent"), tmp_path / "absent", match="no such results directory$")
    (tmp_path / "empty").mkdir()
    expect(lambda: netsim.open_results(tmp_path / "empty"), tmp_path / "empty",
           match=r"not a netsim results dataset: none of the folders ops, collectives, links, ranks, runs")
    other = tmp_path / "other"
    (other / "notes").mkdir(parents=True)
    (other / "a.txt").write_text("x")
    expect(lambda: netsim.open_results(other), other, match=r"not a netsim results dataset")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    expect(lambda: netsim.open_results(fifo), fifo, match=r"not a results directory nor a")


def test_a_part_that_is_a_folder_is_not_a_run(dataset):
    """``runs/run_id=X/part-0.parquet`` as a folder: the run is not complete, nothing to read."""
    rid = "0123456789abcdef"
    (part_path(dataset, "runs", rid)).mkdir(parents=True)
    assert netsim.open_results(dataset).run_ids == [RID]


def test_incomplete_runs_are_still_a_dataset(tmp_path):
    """A run killed while writing (parts, no ``runs`` part) leaves a dataset with no run."""
    root = tmp_path / "res"
    write_run(root, RID, {"ranks": pd.DataFrame({"rank": [0]})}, CFG)
    part_path(root, "runs", RID).unlink()
    res = netsim.open_results(root)
    assert res.run_ids == [] and res.ranks.empty


def test_bench_file(tmp_path):
    f = tmp_path / "x.parquet"
    frame = pd.DataFrame({"op": ["all_reduce"], "bytes": [8], "end_ns": [1.0], "busbw_GBps": [1.0]})
    write_bench_file(f, frame, {"a": 1})
    assert len(netsim.open_results(f).collectives) == 1
    f.write_bytes(f.read_bytes()[:-10])
    expect(lambda: netsim.open_results(f), f, match=r"cannot read Parquet \(ArrowInvalid")
    pq.write_table(pa.table({"x": [1]}), f)
    expect(lambda: netsim.open_results(f), f, match=r"not a netsim results directory nor a `netsim bench")
    tbl = pa.Table.from_pandas(frame, preserve_index=False)
    pq.write_table(tbl.replace_schema_metadata({"netsim.config": "{"}), f)
    expect(lambda: netsim.open_results(f), f, match=r"netsim.config in the file metadata is not JSON")


def test_sweep_failures_record(tmp_path):
    from netsim.results.layout import FAILURES
    from netsim.sweep.runner import failures

    f = part_path(tmp_path, FAILURES, RID)
    f.parent.mkdir(parents=True)
    f.write_bytes(b"garbage")
    expect(lambda: failures(tmp_path), f, match=r"cannot read Parquet")


def test_cli_analyze_names_the_same_file(dataset, capsys):
    f = part_path(dataset, "ops", RID)
    f.write_bytes(f.read_bytes()[:100])
    assert main(["analyze", str(dataset)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith(f"netsim: error: {f}: cannot read Parquet (ArrowInvalid")


def test_public_name():
    assert netsim.ResultsError is ResultsError and "ResultsError" in netsim.__all__
    assert issubclass(ResultsError, netsim.InputError) and issubclass(ResultsError, netsim.NetsimError)
    err = ResultsError("x", source="f").at(field="c")
    assert type(err) is ResultsError and str(err) == "f: c: x"
    assert json.loads(json.dumps(str(err))) == "f: c: x"
