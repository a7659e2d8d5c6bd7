"""benchmarks/bench_astra_scale.py runs, checks the batched engine against the event engine and prints CPU and
wall microseconds per message."""

import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))  # spawned cases unpickle bench_astra_scale by name
    return importlib.import_module("bench_astra_scale")


def test_groups_and_world_at_16_npus_equal_the_event_engine(bench, capsys):
    assert bench.main(["--npus", "16", "--shapes", "groups+world", "--symmetric", "--check", "16"]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = lines[0].split()
    assert "CPU" in head and "wall" in head
    rows = [x.split() for x in lines[1:]]
    assert [r[3] for r in rows] == ["batched", "full", "batched", "full"]
    assert [r[-1] for r in rows if r[3] == "full"] == ["yes", "yes"]


def test_group_sizes_fill_the_ranks(bench):
    for n in (16, 64, 256, 1024):
        sizes = bench.group_sizes(n)
        assert sum(sizes) == n and min(sizes) >= 2 and len(set(sizes)) > (1 if n > 16 else 0)
