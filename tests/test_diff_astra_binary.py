"""benchmarks/diff_astra_binary.py (netsim against the real ASTRA-sim binaries) and the harness's
``run_child``, with stand-in binaries: the tests never need ASTRA-sim."""

import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def diff(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    return importlib.import_module("diff_astra_binary")


def _stand_in(tmp_path: Path, name: str, shift: str = "") -> str:
    """A binary that is netsim's own drop-in CLI (ASTRA-sim's result lines), optionally with every
    ``finished, N`` turned into ``finished, N<shift>`` (a wrong finish time)."""
    exe = tmp_path / name
    edit = f" | sed 's/finished, \\([0-9]*\\)/finished, \\1{shift}/'" if shift else ""
    exe.write_text(f"#!/bin/sh\nPYTHONPATH={ROOT} {sys.executable} -m netsim astra \"$@\"{edit}\n")
    exe.chmod(0o755)
    return str(exe)


def test_without_a_binary_it_says_so_and_exits_2(diff, capsys, monkeypatch):
    monkeypatch.delenv("ASTRA_SIM_BIN", raising=False)
    monkeypatch.delenv("ASTRA_SIM_AWARE_BIN", raising=False)
    assert diff.main(["--configs", "1"]) == 2
    out = capsys.readouterr()
    assert "no ASTRA-sim binary for analytical" in out.out and "nothing to compare" in out.err


def test_a_stand_in_that_agrees_matches_and_one_that_differs_does_not(diff, tmp_path, capsys):
    same = _stand_in(tmp_path, "same")
    assert diff.main(["--configs", "1", "--seed", "t", "--models", "analytical", "--astra-bin", same]) == 0
    out = capsys.readouterr().out
    assert out.count(" yes") == 1 and "finished" in out and "MISMATCH" not in out
    wrong = _stand_in(tmp_path, "wrong", shift="1")
    assert diff.main(["--configs", "1", "--seed", "t", "--models", "analytical", "--astra-bin", wrong]) == 1
    out = capsys.readouterr().out
    assert "MISMATCH analytical config t:0" in out


def test_outcome_names_how_a_run_ended(diff):
    lines = "[t] [workload] [info] sys[0] finished, 5 cycles, exposed communication 5 cycles.\n"
    assert diff.outcome({"stdout": lines, "stderr": "", "status": 0}, 1) == \
        ("finished", ["sys[0] finished, 5 cycles, exposed communication 5 cycles."])
    hang = "!!!Hardware Resource sys.id=1 has unreleased nodes!!!\nExiting\n"
    assert diff.outcome({"stdout": lines + hang, "stderr": "", "status": 0}, 2)[0] == "stopped"
    assert diff.outcome({"stdout": "", "stderr": "", "status": None}, 2)[0] == "loops"
    err = "netsim: error: s.json: preferred-dataset-splits: a 7-byte all-gather ... (ASTRA-sim loops forever)"
    assert diff.outcome({"stdout": "", "stderr": err, "status": 2}, 2)[0] == "loops"
    assert diff.outcome({"stdout": "", "stderr": "netsim: error: n.yml: ASTRA-sim aborts", "status": 2}, 2)[0] == "aborts"
    err = "netsim: error: doubleBinaryTree cannot run on a sub-group's ring (ASTRA-sim casts the ring to a tree and crashes)"
    assert diff.outcome({"stdout": "", "stderr": err, "status": 2}, 2)[0] == "aborts"
    assert diff.outcome({"stdout": "", "stderr": "Assertion failed", "status": 134}, 2)[0] == "aborts"
    assert diff.outcome({"stdout": "", "stderr": "netsim: error: bad field", "status": 2}, 2)[0] == "refused"


def test_run_child_reports_the_childs_own_peak_and_kills_at_the_timeout(monkeypatch):
    """A child forked from a large process used to report that process's RSS as its peak."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    from _harness import run_child

    ballast = bytearray(300 * 2**20)  # this process now holds 300 MB more than the child ever will
    ballast[::4096] = b"x" * len(ballast[::4096])
    small = run_child([sys.executable, "-S", "-c", "pass"])
    assert small["status"] == 0 and small["peak_MB"] < 100
    big = run_child([sys.executable, "-S", "-c", "b = bytearray(200 * 2**20); b[::4096] = b'x' * len(b[::4096])"])
    assert 200 < big["peak_MB"] < 300
    slow = run_child(["sleep", "5"], timeout=0.3)
    assert slow["status"] is None and slow["wall_s"] < 4
    out = run_child([sys.executable, "-S", "-c", "import sys; print('o'); sys.exit(3)"])
    assert out["stdout"] == "o\n" and out["status"] == 3
    del ballast
