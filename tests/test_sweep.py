"""netsim sweep: expansion, run ids, topology overrides, failures, resume after a killed worker."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from netsim.cli import main
from netsim.errors import InputError
from netsim.results.dataset import PART, is_complete, open_results, run_id_for
from netsim.sweep import failures, load_sweep, make_executor, parse_sweep, results, run_sweep
from netsim.topology.overrides import apply_overrides, load_with_overrides

REPO = Path(__file__).resolve().parents[1]
SU = str(REPO / "topologies" / "h100-superpod-1su.yaml")
DGX = str(REPO / "topologies" / "dgx-h100.yaml")


def _bench(grid=None, zip_=None, seeds=None, **base):
    doc = {"kind": "bench", "base": {"topology": DGX, "op": "all_reduce", "size": "1M", "model": "analytical",
                                     **base}}
    if grid:
        doc["grid"] = grid
    if zip_ is not None:
        doc["zip"] = zip_
    if seeds:
        doc["seeds"] = seeds
    return doc


def _write(tmp_path, doc, name="sweep.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _parts(out: Path) -> list[Path]:
    return sorted(out.glob("*/run_id=*/*"))


# ------------------------------------------------------------------ expansion
def test_grid_is_cartesian_product_last_key_fastest():
    s = parse_sweep(_bench(grid={"gpus": [2, 4, 8], "algo": ["ring", "tree"]}))
    assert len(s) == 6 and s.swept == ["gpus", "algo"]
    assert [(c["gpus"], c["algo"]) for c in s.configs] == [(g, a) for g in (2, 4, 8) for a in ("ring", "tree")]
    assert len(set(s.run_ids)) == 6
    assert all(c["op"] == "all_reduce" and c["size"] == 1 << 20 for c in s.configs)


def test_zip_groups_run_in_parallel_and_multiply_with_grid_and_seeds():
    s = parse_sweep(_bench(grid={"algo": ["ring", "tree"]},
                           zip_=[{"gpus": [2, 4, 8], "size": ["1K", "1M", "1G"]}, {"datatype": ["float", "half"]}],
                           seeds=2))
    assert len(s) == 2 * 3 * 2 * 2
    assert {(c["gpus"], c["size"]) for c in s.configs} == {(2, 1024), (4, 1 << 20), (8, 1 << 30)}
    assert sorted({c["seed"] for c in s.configs}) == [0, 1]
    assert s.swept == ["algo", "gpus", "size", "datatype", "seed"]
    single = parse_sweep(_bench(zip_={"gpus": [2, 4], "algo": ["ring", "tree"]}))
    assert [(c["gpus"], c["algo"]) for c in single.configs] == [(2, "ring"), (4, "tree")]


def test_topology_parameters_are_dotted_keys_and_duplicates_collapse():
    s = parse_sweep(_bench(grid={"topology.scale_out.tiers[1].oversubscription": [1, 2],
                                 "scale_out.nic_bw": ["400Gbps", "800Gbps"], "algo": ["ring", "ring"]}))
    assert len(s) == 4  # the repeated algo value is one configuration
    assert {"scale_out.tiers.1.oversubscription", "scale_out.nic_bw"} <= set(s.configs[0])


@pytest.mark.parametrize("doc, field", [
    ({"kind": "bench", "base": {"topology": DGX, "op": "all_reduce", "size": 8}, "grid": {"gpu": [1]}}, "grid.gpu"),
    ({"kind": "bench", "base": {"topology": DGX, "op": "all_reduce", "size": 8}, "grid": {"gpus": 4}}, "grid.gpus"),
    ({"kind": "bench", "base": {"topology": DGX, "op": "all_reduce", "size": 8},
      "zip": {"gpus": [2, 4], "algo": ["ring"]}}, "zip"),
    ({"kind": "bench", "base": {"topology": DGX, "op": "all_reduce", "size": 8},
      "grid": {"gpus": [2]}, "zip": {"gpus": [4]}}, "zip.gpus"),
    ({"kind": "bench", "base": {"topology": DGX, "op": "all_reduce", "size": 8, "seed": 1}, "seeds": 2}, "seeds"),
    ({"kind": "bench", "base": {"topology": DGX, "op": "allreduce_x", "size": 8}}, "base.op"),
    ({"kind": "bench", "base": {"topology": "nope.yaml", "op": "all_reduce", "size": 8}}, "base.topology"),
    ({"kind": "bench", "base": {"topology": DGX, "size": 8}}, "base"),
    ({"kind": "nccl", "base": {}}, "kind"),
    ({"kind": "run", "base": {"topology": DGX}}, "base"),
])
def test_bad_sweep_files_name_the_field(doc, field):
    with pytest.raises(InputError) as err:
        parse_sweep(doc, "s.yaml")
    assert err.value.source == "s.yaml" and err.value.field == field


def test_run_kind_accepts_generator_and_fault_keys():
    s = parse_sweep({"kind": "run", "base": {"topology": DGX, "llm.model": "gpt3-175b", "llm.tp": 8, "llm.pp": 1},
                     "grid": {"llm.dp": [1], "model": ["flow", "analytical"]}})
    assert len(s) == 2 and s.configs[0]["streams"] == 1 and s.configs[0]["no_ctrl_deps"] is False


# ------------------------------------------------------------------ run ids
def test_run_id_is_stable_and_independent_of_spelling(tmp_path):
    a = parse_sweep(_bench(size="1G", algo="auto", op="all-reduce"))
    b = parse_sweep({"kind": "bench", "base": {"model": "analytical", "size": 1 << 30, "topology": DGX,
                                               "op": "all_reduce"}})
    assert a.run_ids == b.run_ids == [run_id_for(a.configs[0])]
    assert parse_sweep(_bench(size="2G")).run_ids != a.run_ids
    (tmp_path / "w.0.et").write_bytes(b"")  # paths are hashed as written: stable across machines
    path = _write(tmp_path, {"kind": "run", "base": {"topology": "w.0.et", "workload": "w"}})
    s = load_sweep(path)
    assert s.configs == [{"kind": "run", "model": "flow", "no_ctrl_deps": False, "streams": 1, "placement": "packed",
                          "engine": "auto", "topology": "w.0.et", "workload": "w"}]
    assert s.run_ids == ["391439edb5993532"]  # as before placement and engine existed: defaults are not hashed
    assert s.paths[0]["workload"] == str(tmp_path / "w")


# --------------------------------------------------------- topology overrides
def test_overrides_set_index_delete_and_keep_the_port_rate():
    data = yaml.safe_load(Path(SU).read_text())
    out = apply_overrides(data, {"scale_out.nic_bw": "800Gbps", "scale_out.tiers.0.oversubscription": 2,
                                 "scale_out.tiers.1.latency": None, "nodes": 16}, "t.yaml")
    leaf = out["scale_out"]["tiers"][0]
    assert out["scale_out"]["nic_bw"] == "800Gbps" and out["nodes"] == 16
    # oversubscription is built as fewer uplinks at the port rate: up_bw (the port rate) stays
    assert leaf["oversubscription"] == 2 and leaf["up_bw"] == "400Gbps" and "latency" not in out["scale_out"]["tiers"][1]
    assert data["scale_out"]["tiers"][0]["up_bw"] == "400Gbps"  # the input is untouched
    with pytest.raises(InputError, match="list index"):
        apply_overrides(data, {"scale_out.tiers.7.down": 1}, "t.yaml")
    with pytest.raises(InputError) as err:
        apply_overrides(data, {"node.nothing.x": 1}, "t.yaml")
    assert err.value.field == "node.nothing"


def test_overridden_topology_is_built_and_validated():
    base = load_with_overrides(SU)
    fast = load_with_overrides(SU, {"scale_out.nic_bw": "800Gbps", "nodes": 16})
    assert base.n_gpus == 256 and fast.n_gpus == 128
    with pytest.raises(InputError) as err:
        load_with_overrides(SU, {"scale_out.tiers.0.oversubscription": 0.5})
    assert err.value.field == "scale_out.tiers[0].oversubscription"


# ------------------------------------------------------------------ running
def test_sweep_writes_dataset_and_rerun_skips(tmp_path):
    doc = _bench(grid={"gpus": [4, 8], "scale_out.nic_bw": ["400Gbps"]}, topology=SU)
    out = tmp_path / "out"
    rep = run_sweep(parse_sweep(doc), out, jobs=2, progress=False)
    assert (rep.done, rep.skipped, rep.failed) == (2, 0, [])
    res = open_results(out)
    assert len(res.runs) == 2 and set(res.runs["gpus"]) == {4, 8}
    assert {"status", "wall_time_s", "netsim_version", "scale_out.nic_bw"} <= set(res.runs.columns)
    joined = results(out)
    assert len(joined) == 2 and (joined["busbw_GBps"] > 0).all() and set(joined["gpus"]) == {4, 8}
    assert (out / "collectives" / f"run_id={rep.summaries[0]['run_id']}" / PART).is_file()
    again = run_sweep(parse_sweep(doc), out, jobs=2, progress=False)
    assert (again.done, again.skipped) == (0, 2)


def test_failing_config_is_reported_and_the_rest_finish(tmp_path, capsys):
    path = _write(tmp_path, _bench(grid={"gpus": [4, 1000, 8]}, topology=SU, model="flow"))
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--out", str(out), "--jobs", "2", "--no-progress"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "gpus=1000" in err[0] and "--gpus: expected 2 <= GPUs <= 256" in err[0]
    s = load_sweep(path)
    assert [is_complete(out, r) for r in s.run_ids] == [True, False, True]
    fail = failures(out)
    assert list(fail["run_id"]) == [s.run_ids[1]] and fail["error"][0].startswith("--gpus")
    rep = run_sweep(s, out, jobs=1, progress=False, retries=3)  # retried, still failing, once (input error)
    assert rep.skipped == 2 and len(rep.failed) == 1 and rep.retried == 0


def test_crash_is_retried_then_recorded(tmp_path, monkeypatch):
    doc = _bench(grid={"gpus": [4]}, topology=SU)
    doc["base"]["scale_out.tiers.0.radix"] = "sixty-four"  # raises InputError in the spec: no retry
    rep = run_sweep(parse_sweep(doc), tmp_path / "o", jobs=1, progress=False, retries=2)
    assert rep.retried == 0 and "radix" in rep.failed[0]["error"]
    from netsim.sweep.worker import run_task
    task = {"run_id": "x" * 16, "config": {"kind": "bench", "topology": SU, "op": "all_reduce", "size": 8,
                                            "gpus": "four"}, "out_dir": str(tmp_path / "o"), "attempt": 0}
    summary = run_task(task)  # the API checks its integers (issue 36): an input error, not retried
    assert summary["status"] == "failed" and not summary["retry"] and summary["error"].startswith("--gpus")

    def crash(*args, **kwargs):
        raise TypeError("a bug, not an input")
    import importlib
    monkeypatch.setattr(importlib.import_module("netsim.perftests.collective"), "run_one", crash)  # 
    task["config"]["gpus"] = 4
    summary = run_task(task)  # a TypeError is not an input error: retried by the driver
    assert summary["status"] == "failed" and summary["retry"] and summary["error"].startswith("TypeError")


def test_cli_rejects_bad_sweep_file_with_one_line(tmp_path, capsys):
    path = _write(tmp_path, {"kind": "bench", "base": {"topology": DGX, "op": "all_reduce", "size": 8, "gpsu": 2}})
    assert main(["sweep", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"{path}: base.gpsu: unknown key for kind bench" in err
    assert main(["sweep", str(path), "--out", str(tmp_path / "o"), "--workers", "2", "--jobs", "2"]) == 2


def test_dry_run_lists_run_ids(tmp_path, capsys):
    path = _write(tmp_path, _bench(grid={"gpus": [2, 4]}))
    assert main(["sweep", str(path), "--out", str(tmp_path / "o"), "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "2 configurations (bench)" and "todo  gpus=2" in lines[0]


def test_killed_pool_worker_loses_nothing(tmp_path):
    """The default executor: a worker process killed mid-sweep breaks the pool; it is rebuilt."""
    doc = {"kind": "bench", "base": {"topology": SU, "op": "alltoall", "model": "flow", "gpus": 64},
           "grid": {"size": [f"{m}M" for m in range(1, 9)]}}
    sweep = parse_sweep(doc)
    out = tmp_path / "out"
    ex = make_executor(jobs=2)
    killed = []

    def kill():
        killed.append(len(list(out.glob(f"runs/run_id=*/{PART}"))))
        os.kill(next(p for p in ex.pool.processes if p.is_alive()).pid, signal.SIGKILL)

    killer = threading.Thread(target=_kill_when_started, args=(out, kill))
    killer.start()
    try:
        rep = run_sweep(sweep, out, executor=ex, progress=False, retries=2)
    finally:
        ex.close()
        killer.join()
    assert killed and killed[0] < len(sweep) and rep.retried >= 1
    _assert_exactly_once(out, sweep, rep)


def _kill_when_started(out: Path, kill, timeout: float = 60.0) -> None:
    """Kill once the first run is complete (the sweep is under way, tasks are in flight)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if list(out.glob(f"runs/run_id=*/{PART}")):
            kill()
            return
        time.sleep(0.01)


def _assert_exactly_once(out: Path, sweep, rep) -> None:
    assert rep.failed == [] and rep.done == len(sweep), (rep.line(), rep.summaries)
    for rid in sweep.run_ids:
        for table in ("collectives", "runs"):
            files = list((out / table / f"run_id={rid}").iterdir())
            assert [f.name for f in files] == [PART]
    assert not [p for p in _parts(out) if p.name != PART]  # no temporary files left
    assert len(open_results(out).runs) == len(sweep)
    again = run_sweep(sweep, out, jobs=1, progress=False)
    assert (again.skipped, again.done) == (len(sweep), 0)


def test_killed_dask_worker_loses_and_duplicates_nothing(tmp_path):
    """Resume after interruption: a worker of a Dask LocalCluster (127.0.0.1) is killed mid-sweep."""
    pytest.importorskip("distributed")
    doc = {"kind": "bench", "base": {"topology": SU, "op": "alltoall", "model": "flow", "gpus": 64},
           "grid": {"size": [f"{m}M" for m in range(1, 11)]}}
    sweep = parse_sweep(doc)
    out = tmp_path / "out"
    ex = make_executor(workers=2)
    pids = ex.client.run(os.getpid)  # worker address -> process id
    killed = []

    def kill():  # SIGKILL the worker that is running a task (any worker if none is)
        busy = [w for w, keys in ex.client.processing().items() if keys and w in pids] or list(pids)
        done = len(list(out.glob(f"runs/run_id=*/{PART}")))
        os.kill(pids[busy[0]], signal.SIGKILL)
        killed.append(done)

    killer = threading.Thread(target=_kill_when_started, args=(out, kill))
    killer.start()
    try:
        rep = run_sweep(sweep, out, executor=ex, progress=False, retries=2)
    finally:
        killer.join()
        ex.close()
    assert killed and killed[0] < len(sweep), "the worker was not killed mid-sweep"
    _assert_exactly_once(out, sweep, rep)
    assert failures(out).empty


def test_shipped_study_expands():
    s = load_sweep(REPO / "topologies" / "studies" / "fat_tree_design.yaml")
    assert len(s) >= 100 and s.kind == "bench"
    assert {"scale_out.tiers.0.oversubscription", "scale_out.rail_optimized", "scale_out.nic_bw"} <= set(s.swept)
    ops = pd.Series([c["op"] for c in s.configs])
    assert set(ops) == {"all_reduce", "alltoall"}
