"""benchmarks/bench_astra.py prints ASTRA-sim figures only from a run of a binary (issue 15)."""

import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))  # spawned cases unpickle bench_astra by name
    return importlib.import_module("bench_astra")


def test_without_a_binary_the_astra_columns_are_empty(bench, capsys, monkeypatch):
    monkeypatch.delenv("ASTRA_SIM_BIN", raising=False)
    assert bench.main(["--npus", "8"]) == 0
    out = capsys.readouterr().out
    row = out.splitlines()[1].split()
    assert row[0] == "8" and row[-3:] == ["nan", "nan", "nan"]
    assert "no binary given" in out


def test_astra_figures_come_from_the_binary_it_runs(bench, tmp_path):
    """A stand-in binary (netsim's own drop-in CLI, which prints ASTRA-sim's result lines) gives
    the simulated time the closed form predicts, and a measured wall time and RSS."""
    fake = tmp_path / "AstraSim_Analytical_Congestion_Unaware"
    fake.write_text(f"#!/bin/sh\nexec {sys.executable} -m netsim astra \"$@\"\n")
    fake.chmod(0o755)
    paths = bench.make_inputs(tmp_path, 8)
    got = bench.AstraCase(paths, str(fake))()
    assert got["astra_ns"] == bench.expected_ns(8)
    assert got["astra_s"] > 0 and got["astra_MB"] > 0
