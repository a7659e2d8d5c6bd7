"""Output paths are checked before anything runs, never replace non-regular files, get the
umask's permissions; a run killed while writing does not block its rerun."""

import importlib
import os
import stat
from pathlib import Path

import pandas as pd
import pytest
import yaml

from netsim.cli import main
from netsim.errors import InputError
from netsim.results import dataset
from netsim.results.dataset import open_results, part_path, run_id_for, write_run
from netsim.results.io import check_output_dir, check_output_file, new_file_mode

REPO = Path(__file__).resolve().parents[1]
DGX = str(REPO / "topologies" / "dgx-h100.yaml")
BENCH = ["bench", "--topology", DGX, "--op", "all_reduce", "-b", "1M", "--model", "analytical"]


@pytest.fixture
def no_simulation(monkeypatch):
    """Any simulation started by bench or run fails the test."""
    def boom(*_a, **_k):
        raise AssertionError("simulated before checking the output path")
    monkeypatch.setattr(importlib.import_module("netsim.perftests.collective"), "run_one", boom)
    monkeypatch.setattr(importlib.import_module("netsim.workload.runner").WorkloadRun, "run", boom)


def one_line_error(capsys, *needles) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("netsim: error:") and "\n" not in err and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err
    return err


@pytest.fixture
def umask022():
    old = os.umask(0o022)
    yield 0o644
    os.umask(old)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


# ------------------------------------------------------------ the checks
def test_file_checks(tmp_path):
    (tmp_path / "f").write_text("x")
    os.mkfifo(tmp_path / "fifo")
    os.symlink(tmp_path / "f", tmp_path / "link")
    with pytest.raises(InputError, match="exists; pass --overwrite"):
        check_output_file(tmp_path / "f")
    assert check_output_file(tmp_path / "f", overwrite=True) == tmp_path / "f"
    for name, kind in (("fifo", "a FIFO"), ("link", "a symbolic link")):
        with pytest.raises(InputError, match=f"is {kind}; netsim writes regular files only"):
            check_output_file(tmp_path / name, overwrite=True)
    with pytest.raises(InputError, match="is a character device"):
        check_output_file("/dev/null", overwrite=True)
    with pytest.raises(InputError, match="does not exist"):
        check_output_file(tmp_path / "missing" / "x.json", flag="-J")
    with pytest.raises(InputError, match="is a regular file, not a folder"):
        check_output_file(tmp_path / "f" / "x.json")
    with pytest.raises(InputError, match="is a folder"):
        check_output_file(tmp_path, overwrite=True)


def test_dir_checks(tmp_path):
    (tmp_path / "f").write_text("x")
    assert check_output_dir(tmp_path / "new" / "deeper") == tmp_path / "new" / "deeper"  # may be created
    with pytest.raises(InputError, match="is a regular file, not a results directory"):
        check_output_dir(tmp_path / "f", what="a results directory")
    with pytest.raises(InputError, match=r"f is a regular file, not a folder"):
        check_output_dir(tmp_path / "f" / "sub" / "deeper")


def test_read_only_folder(tmp_path, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    if os.geteuid() == 0:  # root writes anyway: pretend the folder is read-only
        real = os.access
        monkeypatch.setattr(os, "access", lambda p, m: False if Path(p) == ro else real(p, m))
    try:
        with pytest.raises(InputError, match="is not writable"):
            check_output_file(ro / "x.json")
        with pytest.raises(InputError, match="is not writable"):
            check_output_dir(ro / "out")
    finally:
        ro.chmod(0o755)


# ------------------------------------------------------------ every command, before it simulates
def test_bench_paths_fail_before_simulating(tmp_path, capsys, no_simulation):
    (tmp_path / "f").write_text("x")
    assert main([*BENCH, "-J", str(tmp_path / "missing" / "a.json")]) == 2
    one_line_error(capsys, "-J", "does not exist")
    assert main([*BENCH, "--out", str(tmp_path / "f" / "ds")]) == 2
    one_line_error(capsys, "--out", "regular file, not a folder")
    assert main([*BENCH, "--out", str(tmp_path / "f")]) == 2
    one_line_error(capsys, "not a results directory")
    (tmp_path / "d.parquet").mkdir()
    assert main([*BENCH, "--out", str(tmp_path / "d.parquet"), "--overwrite"]) == 2
    one_line_error(capsys, "is a folder")


def test_overwrite_never_replaces_fifo_or_symlink(tmp_path, capsys, no_simulation):
    target = tmp_path / "target.json"
    target.write_text("keep")
    os.symlink(target, tmp_path / "link.json")
    os.mkfifo(tmp_path / "fifo.json")
    for name in ("link.json", "fifo.json"):
        assert main([*BENCH, "-J", str(tmp_path / name), "--overwrite"]) == 2
        one_line_error(capsys, "regular files only")
    assert os.path.islink(tmp_path / "link.json") and target.read_text() == "keep"
    assert stat.S_ISFIFO(os.lstat(tmp_path / "fifo.json").st_mode)


def test_run_paths_fail_before_simulating(tmp_path, capsys, no_simulation):
    (tmp_path / "f").write_text("x")
    assert main(["run", "--topology", DGX, "--llm", "llama3-70b", "--tp", "8", "--pp", "1", "--dp", "1",
                 "--out", str(tmp_path / "f" / "ds")]) == 2
    one_line_error(capsys, "--out", "regular file, not a folder")


def test_other_commands(tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    assert main(["workload", "llm", "--model", "llama3-70b", "--tp", "2", "--pp", "1", "--dp", "1",
                 "--out", str(tmp_path / "f")]) == 2
    one_line_error(capsys, "--out", "not a folder for the workload")
    assert main(["astra", "export", "--topology", DGX, "--out", str(tmp_path / "f")]) == 2
    one_line_error(capsys, "--out", "not a folder for the export")
    sweep = tmp_path / "s.yaml"
    sweep.write_text(yaml.safe_dump({"kind": "bench", "base": {"topology": DGX, "op": "all_reduce", "size": "1M",
                                                                "model": "analytical"}}))
    assert main(["sweep", str(sweep), "--out", str(tmp_path / "f"), "--no-progress"]) == 2
    one_line_error(capsys, "--out", "not a results directory")
    wl = tmp_path / "wl"
    assert main(["workload", "llm", "--model", "llama3-70b", "--tp", "2", "--pp", "1", "--dp", "1",
                 "--microbatches", "1", "--out", str(wl)]) == 0
    capsys.readouterr()
    assert main(["trace", "inspect", str(wl / "llm"), "--parquet", str(tmp_path / "f" / "n.parquet")]) == 2
    one_line_error(capsys, "--parquet", "regular file, not a folder")
    os.mkfifo(tmp_path / "fifo")
    assert main(["trace", "inspect", str(wl / "llm"), "--parquet", str(tmp_path / "fifo"), "--overwrite"]) == 2
    one_line_error(capsys, "a FIFO")


# ------------------------------------------------------------ permissions
def test_outputs_get_the_umask_permissions(tmp_path, capsys, umask022):
    assert new_file_mode() == 0o644
    js, pq, ds = tmp_path / "a.json", tmp_path / "a.parquet", tmp_path / "ds"
    assert main([*BENCH, "-J", str(js), "--out", str(pq)]) == 0
    assert main([*BENCH, "--out", str(ds)]) == 0
    wl = tmp_path / "wl"
    assert main(["workload", "llm", "--model", "llama3-70b", "--tp", "2", "--pp", "1", "--dp", "1",
                 "--microbatches", "1", "--out", str(wl)]) == 0
    files = [js, pq, *ds.glob("*/run_id=*/part-0.parquet"), *wl.iterdir()]
    assert len(files) > 5 and {p.name: mode(p) for p in files} == {p.name: 0o644 for p in files}


# ------------------------------------------------------------ a run killed while writing
def test_rerun_replaces_an_incomplete_run(tmp_path):
    cfg = {"a": 1}
    rid = run_id_for(cfg)
    write_run(tmp_path, rid, {"ops": pd.DataFrame({"rank": [0]}), "links": pd.DataFrame({"link_id": [3]})}, cfg)
    part_path(tmp_path, "runs", rid).unlink()  # killed after ops and links, before runs
    assert not dataset.is_complete(tmp_path, rid)
    res = open_results(tmp_path)
    assert res.run_ids == [] and res.ops.empty and res.links.empty  # leftovers are ignored
    write_run(tmp_path, rid, {"ops": pd.DataFrame({"rank": [7]})}, cfg)  # no --overwrite needed
    res = open_results(tmp_path)
    assert res.run_ids == [rid] and res.ops["rank"].tolist() == [7]
    assert not part_path(tmp_path, "links", rid).exists()  # the stale leftover is gone
    with pytest.raises(InputError, match="already holds run"):  # a complete run still needs --overwrite
        write_run(tmp_path, rid, {"ops": pd.DataFrame({"rank": [8]})}, cfg)


def test_cli_rerun_after_a_kill(tmp_path, capsys):
    ds = tmp_path / "ds"
    assert main([*BENCH, "--out", str(ds)]) == 0
    (runs,) = ds.glob("runs/run_id=*/part-0.parquet")
    runs.unlink()
    assert open_results(ds).run_ids == []
    assert main([*BENCH, "--out", str(ds)]) == 0
    assert len(open_results(ds).run_ids) == 1
    assert main([*BENCH, "--out", str(ds)]) == 2
    one_line_error(capsys, "pass --overwrite")
