"""Command-line surfaces (issue 18): --set on topo/bench/run, --quiet and progress bars, help texts,
one error prefix, netsim.simulate's signature, workload llm --llm."""

from __future__ import annotations

import inspect
import io
import json

import pytest

from conftest import REPO, TOPOLOGIES
from netsim import progress
from netsim.cli import main
from netsim.topology.overrides import parse_sets
from netsim.errors import InputError

SU = str(TOPOLOGIES / "h100-superpod-1su.yaml")
TRACE = REPO / "workloads" / "traces" / "llama3-8b-tp2pp2"


def test_topo_set(capsys):
    assert main(["topo", SU, "--json", "--set", "nodes=4", "--set", "scale_out.tiers.0.oversubscription=4"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["gpus"] == 32 and summary["oversubscription"] == {"leaf": 4.0}


@pytest.mark.parametrize("item, expect", [
    ("nodes", "--set: expected KEY=VALUE"),
    ("nodes=-1", "h100-superpod-1su.yaml: nodes: expected a positive integer"),
    ("scale_out.tiers.7.oversubscription=2", "scale_out.tiers.7: expected a list index below 2"),
    ("bogus.key=1", "bogus: not in the topology file"),
    ("nodes=[1, 2]", "--set: nodes: expected a scalar value"),
])
def test_set_errors_are_one_line(capsys, item, expect):
    assert main(["topo", SU, "--set", item]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expect in err, err


def test_parse_sets():
    assert parse_sets(["a.b[1].c=2", "x=null", "y=800Gbps"]) == {"a.b.1.c": 2, "x": None, "y": "800Gbps"}
    with pytest.raises(InputError, match="--set"):
        parse_sets(["=3"])


def test_bench_set_changes_the_result_and_the_run(tmp_path, capsys):
    args = ["bench", "--topology", SU, "--op", "alltoall", "-b", "16M", "--gpus", "32", "--model", "analytical",
            "--quiet"]
    assert main(args) == 0
    full = capsys.readouterr().out
    assert main(args + ["--set", "nodes=4", "--set", "scale_out.nic_bw=100Gbps",
                        "--out", str(tmp_path / "res")]) == 0
    over = capsys.readouterr()
    assert "32 GPUs" in over.out and over.err == ""  # not a TTY: no progress bar

    def busbw(text):
        return float([ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")][0].split()[7])
    assert busbw(over.out) < busbw(full)  # 100G NICs slow the all-to-all down
    import netsim
    res = netsim.open_results(tmp_path / "res")
    assert res.config(res.run_ids[0])["set"] == {"nodes": 4, "scale_out.nic_bw": "100Gbps"}


def test_run_set_and_quiet(capsys):
    if not TRACE.is_dir():
        pytest.skip("workloads/ not present")
    base = ["run", "--topology", SU, "--workload", str(TRACE / "llm"), "--comm-groups", str(TRACE / "comm_groups.json"),
            "--json", "--quiet"]
    assert main(base + ["--set", "nodes=1"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert main(base + ["--set", "nodes=1", "--set", "node.preset=hgx-a100"]) == 0
    a100 = json.loads(capsys.readouterr().out)
    assert a100["iteration_us"] > one["iteration_us"]  # slower GPUs and NVLink
    assert main(base + ["--set", "nodes=0"]) == 2
    assert "nodes: expected a positive integer" in capsys.readouterr().err


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_progress_unless_quiet_a_bar_only_on_a_tty():
    assert progress.wanted() and not progress.wanted(quiet=True)
    assert progress.on_terminal(_Tty()) and not progress.on_terminal(io.StringIO())


def test_run_progress_bar_polls_ops(monkeypatch, capsys):
    if not TRACE.is_dir():
        pytest.skip("workloads/ not present")
    import netsim

    monkeypatch.setattr(progress, "STATUS_AFTER_S", 0.0)  # not a terminal: status lines, at once
    monkeypatch.setattr(progress, "INTERVAL_S", 0.001)
    real_bar = progress.bar
    monkeypatch.setattr(progress, "bar", lambda *a, **kw: real_bar(*a, mininterval=0, miniters=1, **kw))
    res = netsim.simulate(SU, str(TRACE / "llm"), str(TRACE / "comm_groups.json"), engine="event", progress=True)
    err = capsys.readouterr().err
    assert "run:" in err and "op" in err and "simulated" in err
    quiet = netsim.simulate(SU, str(TRACE / "llm"), str(TRACE / "comm_groups.json"), engine="event")
    assert capsys.readouterr().err == ""
    assert (quiet.finish == res.finish).all()


def test_bench_progress_bar(monkeypatch, capsys):
    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    monkeypatch.setattr(progress, "INTERVAL_S", 0.001)
    monkeypatch.setattr(progress, "on_terminal", lambda stream=None: True)
    real_bar = progress.bar
    monkeypatch.setattr(progress, "bar", lambda *a, **kw: real_bar(*a, mininterval=0, miniters=1, **kw))
    assert main(["bench", "--topology", SU, "--op", "all_reduce", "-b", "1M", "-e", "64M", "--gpus", "16"]) == 0
    err = capsys.readouterr().err
    assert "bench:" in err and "100%" in err and "size 64MiB (7 of 7)" in err  # the final count
    assert "<" in err  # tqdm's [elapsed<remaining]: the ETA
    assert main(["bench", "--topology", SU, "--op", "all_reduce", "-b", "1M", "--gpus", "16", "-q"]) == 0
    assert capsys.readouterr().err == ""


def test_status_lines_off_a_terminal(monkeypatch, capsys):
    """Not on a terminal: one whole line per STATUS_EVERY_S with the ETA, also while the count is stuck."""
    import time

    monkeypatch.setattr(progress, "STATUS_AFTER_S", 0.05)
    monkeypatch.setattr(progress, "STATUS_EVERY_S", 0.05)
    monkeypatch.setattr(progress, "INTERVAL_S", 0.005)
    done = [0]
    with progress.Poller(10, lambda: done[0], "demo", "op", True, postfix=lambda: "step x"):
        for _ in range(4):
            time.sleep(0.08)
            done[0] += 1
        time.sleep(0.2)  # the count stays at 4: lines go on
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert "\r" not in err and err.endswith("\n") and len(lines) >= 3, err
    assert all(ln.startswith("demo: ") and "op" in ln and "<" in ln and "step x" in ln for ln in lines), err
    assert sum("4/10" in ln for ln in lines) >= 2, err  # stuck at 4, still reported


def test_no_status_line_for_a_short_run(capsys):
    with progress.Poller(10, lambda: 5, "demo", "op", True):
        pass
    assert main(["bench", "--topology", SU, "--op", "all_reduce", "-b", "1M", "--gpus", "16"]) == 0
    assert capsys.readouterr().err == ""  # not a terminal, shorter than STATUS_AFTER_S: nothing


def test_help_lists_choices_and_subcommands(capsys):
    for argv in (["bench", "--help"], ["astra", "--help"], ["workload", "llm", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)
    out = capsys.readouterr().out
    assert "node_limited" in out and "halving_doubling" in out and "analytical" in out  # bench --algo/--model
    assert "netsim astra export" in out and "netsim astra compare" in out
    assert "--llm MODEL" in out and "deprecated" in out


def test_error_prefix_printed_once(capsys):
    assert main(["bench", "--op", "all_reduce"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("netsim: error: bench: ") and "netsim bench:" not in err


def test_simulate_signature():
    import netsim

    params = inspect.signature(netsim.simulate).parameters
    assert {"topology", "workload", "stragglers", "faults", "overrides"} <= set(params)


def test_workload_llm_flag_and_deprecated_model(tmp_path, capsys):
    assert main(["workload", "llm", "--llm", "llama3-8b", "--tp", "2", "--pp", "1", "--dp", "1",
                 "--seq", "128", "--out", str(tmp_path / "a")]) == 0
    assert main(["workload", "llm", "--model", "llama3-8b", "--tp", "2", "--pp", "1", "--dp", "1",
                 "--seq", "128", "--out", str(tmp_path / "b")]) == 0
    assert (tmp_path / "a" / "llm.0.et").read_bytes() == (tmp_path / "b" / "llm.0.et").read_bytes()
    assert main(["workload", "llm", "--llm", "llama3-8b", "--model", "llama3-8b", "--tp", "2", "--pp", "1",
                 "--dp", "1", "--out", str(tmp_path / "c")]) == 2
