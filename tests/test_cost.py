"""The cost estimate of ``netsim bench`` (netsim.perftests.cost, issue 35): within its stated factor of
the measured CPU time on mid-size runs, printed with the analytical alternative within 5 s on the
16k-GPU flow-model all-reduce, silent for short runs."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import replace

import pytest

from conftest import REPO, TOPOLOGIES
from netsim.perftests import cost
from netsim.perftests.collective import BenchConfig, run_one, validated
from netsim.cli import main
from netsim.topology.spec import load_topology

FT16K = TOPOLOGIES / "h100-fat-tree-16k.yaml"
SU = TOPOLOGIES / "h100-superpod-1su.yaml"
GiB = 1 << 30


@pytest.fixture(scope="module")
def ft16k():
    return load_topology(FT16K)


def _warm_kernels(monkeypatch):
    """Load (or compile, once per checkout) the flow model's compiled kernels before timing."""
    from netsim.network import flow

    monkeypatch.setattr(flow, "COMPILE_AFTER", 5)
    topo = load_topology(SU)
    run_one(topo, validated(BenchConfig("all_reduce", gpus=64, engine="event"), topo), 1 << 24)


@pytest.mark.parametrize("op, gpus", [("all_reduce", 512),   # nvls_tree: pipelined, fast-forwarded
                                      ("all_gather", 1024)])  # rings of 16 channels
def test_estimate_within_factor_of_cpu_time(ft16k, monkeypatch, op, gpus):
    _warm_kernels(monkeypatch)
    monkeypatch.undo()
    cfg = validated(BenchConfig(op, gpus=gpus), ft16k)
    est = cost.estimate(ft16k, cfg, [GiB])
    t0 = time.process_time()
    _row, stats = run_one(ft16k, cfg, GiB)
    cpu = time.process_time() - t0
    assert stats["mode"] == "event"  # what the flow model is costed as
    assert 1 / cost.FACTOR <= est.total_s / cpu <= cost.FACTOR, (est.total_s, cpu)


def test_estimate_grows_with_the_work(ft16k):
    """A model of the cost, not a constant: more GPUs, more sizes, event engine cost more; analytical less."""
    cfg = validated(BenchConfig("all_reduce", gpus=2048), ft16k)
    base = cost.estimate(ft16k, cfg, [GiB]).total_s
    assert cost.estimate(ft16k, validated(replace(cfg, gpus=16384), ft16k), [GiB]).total_s > 5 * base
    assert cost.estimate(ft16k, cfg, [GiB, GiB // 4]).total_s > base
    assert cost.estimate(ft16k, replace(cfg, engine="event"), [GiB]).total_s > 1.5 * base  # nothing fast-forwarded
    assert cost.estimate(ft16k, replace(cfg, model="analytical"), [GiB]).total_s < base / 3


def test_extrapolated_counts_match_exact_ones(ft16k, monkeypatch):
    """Above EXACT_RANKS the counts come from two smaller scales; here within 10 % of counting whole."""
    cfg = validated(BenchConfig("all_reduce", gpus=4096), ft16k)
    est = cost.estimate(ft16k, cfg, [GiB])
    monkeypatch.setattr(cost, "EXACT_RANKS", 1 << 20)
    exact = cost.estimate(ft16k, cfg, [GiB])
    assert est.extrapolated and not exact.extrapolated
    for a, b in ((est.counts[0].routed, exact.counts[0].routed), (est.counts[0].simulated, exact.counts[0].simulated)):
        assert abs(a / b - 1) < 0.1


def test_16k_flow_bench_prints_estimate_and_alternative_within_5s():
    """From process start to the estimate line on stderr: under 5 s wall; the run is then killed."""
    argv = [sys.executable, "-m", "netsim", "bench", "--topology", str(FT16K), "--op", "all_reduce", "-b", "1G",
            "--model", "flow"]
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    timer = threading.Timer(120, proc.kill)  # never hang CI
    timer.start()
    try:
        line = proc.stderr.readline()
        elapsed = time.monotonic() - t0
    finally:
        proc.kill()
        proc.wait()
        timer.cancel()
    assert "estimate: about" in line and "16,384 GPUs" in line and "--model analytical takes about" in line, line
    assert elapsed < 5.0, f"estimate after {elapsed:.1f} s: {line}"


def test_short_runs_print_no_estimate(capsys):
    assert main(["bench", "--topology", str(SU), "--op", "all_reduce", "-b", "1M", "-e", "4M", "--gpus", "16"]) == 0
    assert capsys.readouterr().err == ""


def test_long_run_note_names_counts_and_quiet_hides_it(ft16k, capsys, monkeypatch):
    from netsim.cli import bench as bench_cli

    cfg = validated(BenchConfig("all_reduce", gpus=4096), ft16k)
    monkeypatch.setattr(bench_cli, "LONG_S", 0.0)
    bench_cli._estimate(ft16k, cfg, [GiB], quiet=True)
    assert capsys.readouterr().err == ""
    est = bench_cli._estimate(ft16k, cfg, [GiB], quiet=False)
    err = capsys.readouterr().err
    assert err.startswith("netsim bench: estimate: about ") and err.count("\n") == 1
    assert f"{est.simulated / 1e6:,.1f}M transfers simulated" in err and "4,096 GPUs" in err


def test_duration_text():
    assert [cost.duration(s) for s in (0.2, 30, 89, 90, 3000, 7200)] == ["1 s", "30 s", "89 s", "2 min", "50 min",
                                                                       "2.0 h"]
