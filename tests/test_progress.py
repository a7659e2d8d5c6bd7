"""Progress off a terminal (issue 35): a sweep's status lines move while its one configuration runs;
a long bench's progress counts work within a size."""

from __future__ import annotations

import re

from conftest import TOPOLOGIES
from netsim import progress
from netsim.sweep.runner import run_sweep
from netsim.sweep.spec import parse_sweep

SU = str(TOPOLOGIES / "h100-superpod-1su.yaml")


def test_sweep_status_moves_within_a_configuration(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(progress, "STATUS_AFTER_S", 0.0)
    monkeypatch.setattr(progress, "STATUS_EVERY_S", 0.2)
    monkeypatch.setattr(progress, "INTERVAL_S", 0.02)
    doc = {"name": "one", "kind": "bench",
           "base": {"topology": SU, "op": "all_reduce", "size": "1G", "model": "flow", "gpus": 256}}
    rep = run_sweep(parse_sweep(doc), tmp_path / "out", jobs=1, progress=True)
    assert rep.done == 1
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "0/1 configurations" in ln]
    shares = [int(m.group(1)) for ln in lines if (m := re.match(r"one:\s+(\d+)% of the work", ln))]
    assert len(shares) == len(lines) >= 3, lines  # every line is a whole status line
    assert shares == sorted(shares) and 0 < shares[-1] < 100 and len(set(shares)) >= 2, lines
    assert all("<" in ln for ln in lines)  # [elapsed<remaining]


def test_bench_work_counts_transfers_within_a_size():
    """bench's progress: permille of the estimated CPU time, a size's simulation share by its transfers."""
    from types import SimpleNamespace

    from netsim.cli.bench import _Work
    from netsim.perftests.estimate import Counts, Estimate

    est = Estimate("flow", 512, (1.0, 3.0), (0.5, 2.0), (Counts(10, 100, 100), Counts(30, 400, 400)), False, False)
    work = _Work([1 << 20, 1 << 30], est)
    assert work.done() == 0
    work.start(1 << 20)
    work.finished()
    assert work.done() == 250  # 1 of 4 estimated seconds
    work.start(1 << 30)
    work.watch(SimpleNamespace(stats={"transfers": 200}, env=SimpleNamespace(now=1e-3)))
    assert work.done() == 250 + 250 + 250  # routed (1 s), half of the 2 s of simulation
    assert work.status() == "size 1GiB (2 of 2), 1,000.0 us simulated"


def test_docs_state_the_sweep_eta_constants():
    from conftest import REPO
    from netsim.sweep import eta

    doc = " ".join((REPO / "docs" / "sweeps.md").read_text().split())
    assert f"at {eta.SECONDS_PER_UNIT * 1e3:g} ms per unit until a configuration finishes" in doc
    assert f"predicted at least {eta.RUNNING_MARGIN * 100:g} % beyond them" in doc
    assert f"the first after {progress.STATUS_AFTER_S:g} s and then one every {progress.STATUS_EVERY_S:g} s" in doc


def test_a_disabled_bar_is_silent_on_and_off_a_terminal(monkeypatch, capsys):
    for tty in (False, True):
        monkeypatch.setattr(progress, "on_terminal", lambda stream=None, tty=tty: tty)
        with progress.bar(5, "x", "op", False) as b:
            b.update(3)
    assert capsys.readouterr().err == ""
