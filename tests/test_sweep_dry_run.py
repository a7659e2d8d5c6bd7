"""``netsim sweep --dry-run`` checks every configuration exactly as the real sweep's workers do
before they simulate: what a real sweep records as a failed configuration, the dry run refuses
with one line and exit status 2, simulating nothing; a sound sweep still lists its configurations."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from netsim.cli import main
from netsim.sweep import failures, parse_sweep, run_sweep
from netsim.sweep.runner import check_configs

REPO = Path(__file__).resolve().parents[1]
DGX = str(REPO / "topologies" / "dgx-h100.yaml")
SU = str(REPO / "topologies" / "h100-superpod-1su.yaml")


def write(tmp_path, doc, name="s.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return str(path)


def bench(grid=None, **base):
    doc = {"kind": "bench", "base": {"topology": DGX, "op": "all_reduce", "size": "1M", "model": "analytical", **base}}
    if grid:
        doc["grid"] = grid
    return doc


def dry_run(path: str, tmp_path, capsys) -> tuple[int, str, str]:
    status = main(["sweep", path, "--out", str(tmp_path / "o"), "--dry-run"])
    out, err = capsys.readouterr()
    return status, out, err.strip()


def not_topology(tmp_path) -> str:
    other = tmp_path / "other.yaml"
    other.write_text("kind: bench\nbase: {op: all_reduce}\n")  # valid YAML, a sweep file: not a topology
    return str(other)


CASES = {  # name -> (sweep document, what the one line says after "configuration <run id> (<label>): ")
    "algo": (lambda tmp: bench(grid={"algo": ["ring", "bogus"]}),
             "(algo=bogus): --algo: algorithm 'bogus' is not available for all_reduce; expected one of auto, ring"),
    "node.gpus": (lambda tmp: bench(grid={"node.gpus": [8, -1]}),
                  f"(node.gpus=-1): {DGX}: node.gpus: expected a positive integer up to 576"),
    "not YAML": (lambda tmp: bench(topology=str(REPO / "README.md")),
                 f"(base): {REPO / 'README.md'}: line 3, column 2: not valid YAML"),
    "not a topology": (lambda tmp: bench(topology=not_topology(tmp)),
                       "(base): {tmp}/other.yaml: base: unknown key; expected one of description, dims"),
    "whole nodes": (lambda tmp: bench(topology=SU, grid={"gpus": [16, 12], "algo": ["hierarchical"]}),
                    "(gpus=12 algo=hierarchical): --gpus: hierarchical needs whole nodes"),
    "run kind": (lambda tmp: {"kind": "run", "base": {"topology": DGX, "llm.model": "llama3-8b", "llm.tp": 2,
                                                      "llm.pp": 2, "llm.dp": 2, "llm.seq": 256,
                                                      "model": "analytical"},
                              "grid": {"placement": ["packed", "strided:64"]}},
                 "(placement=strided:64): --placement: "),
}


@pytest.mark.parametrize("name", CASES)
def test_dry_run_refuses_what_the_sweep_fails(tmp_path, capsys, name):
    make, says = CASES[name]
    path = write(tmp_path, make(tmp_path))
    status, out, err = dry_run(path, tmp_path, capsys)
    assert status == 2 and out == "" and "\n" not in err and "Traceback" not in err
    assert err.startswith(f"netsim: error: {path}: configuration "), err
    assert says.format(tmp=tmp_path) in err, err
    # the real sweep fails exactly that configuration, for the same reason
    sweep = parse_sweep(yaml.safe_load(Path(path).read_text()), path, Path(path).parent)
    report = run_sweep(sweep, tmp_path / "real", jobs=1, progress=False)
    assert len(report.failed) == 1 and report.done == len(sweep) - 1
    failed = report.failed[0]
    assert f"configuration {failed['run_id']} ({failed['label'] or 'base'}): {failed['error']}" in err
    assert failures(tmp_path / "real")["error"].tolist() == [failed["error"]]


def test_dry_run_counts_every_failing_configuration(tmp_path, capsys):
    path = write(tmp_path, bench(topology=SU, grid={"gpus": [8, 12, 16, 20], "algo": ["ring", "hierarchical"]}))
    status, _out, err = dry_run(path, tmp_path, capsys)
    assert status == 2 and "(gpus=8 algo=hierarchical)" in err and err.endswith("(3 of 8 configurations fail)")


def test_a_sound_sweep_still_dry_runs_and_simulates_nothing(tmp_path, capsys, monkeypatch):
    import importlib

    import netsim.workload.runner

    def no_simulation(*_a, **_k):
        raise AssertionError("a dry run simulated")
    monkeypatch.setattr(importlib.import_module("netsim.perftests.collective"), "run_one", no_simulation)  # the module
    monkeypatch.setattr(netsim.workload.runner.WorkloadRun, "run", no_simulation)
    path = write(tmp_path, bench(topology=SU, grid={"gpus": [16, 256], "algo": ["ring", "hierarchical", "auto"]},
                                 proto="Simple"))
    status, out, err = dry_run(path, tmp_path, capsys)
    assert status == 0 and err == "" and out.splitlines()[-1] == "6 configurations (bench)"
    run = write(tmp_path, {"kind": "run", "base": {"topology": DGX, "llm.model": "llama3-8b", "llm.tp": 2, "llm.pp": 2,
                                                   "llm.seq": 256},
                           "grid": {"llm.dp": [1, 2], "placement": ["packed", "random:1"]}}, "r.yaml")
    status, out, err = dry_run(run, tmp_path, capsys)
    assert status == 0 and err == "" and out.splitlines()[-1] == "4 configurations (run)"


def test_the_planned_schedule_is_checked_not_built(monkeypatch):
    """The dry run asks the plan's choices (algorithm, protocol, whole nodes), not its schedule: a
    16,384-GPU all-reduce checks in well under a second."""
    import time

    import netsim.collectives.plan as plan

    def no_build(*_a, **_k):
        raise AssertionError("a dry run built a schedule")
    monkeypatch.setattr(plan, "_build", no_build)
    sweep = parse_sweep(bench(topology=str(REPO / "topologies" / "h100-fat-tree-16k.yaml"), gpus=16384,
                              size="1G", grid={"algo": ["auto", "tree", "nvls_tree"]}), "s.yaml", REPO)
    t0 = time.perf_counter()
    check_configs(sweep)
    assert time.perf_counter() - t0 < 5


def test_protocol_outside_nccls_is_one_line_everywhere(tmp_path, capsys):
    """``proto: bogus`` on an all-to-all raised ValueError from the p2p shaping; now the plan refuses it."""
    path = write(tmp_path, bench(op="alltoall", proto="bogus"))
    status, _out, err = dry_run(path, tmp_path, capsys)
    assert status == 2 and err.endswith("(base): --proto: expected one of LL, LL128, Simple, got 'bogus'")
    assert main(["bench", "--topology", DGX, "--op", "alltoall", "-b", "1M", "--proto", "bogus"]) == 2
    assert capsys.readouterr().err.strip() == "netsim: error: --proto: expected one of LL, LL128, Simple, got 'bogus'"
