"""``netsim astra``: drop-in flags and output, the Parquet dataset, ``export`` and ``compare``."""

import os
import stat

import pytest

from netsim.astra.output import parse_output, stl_order, type_order
from netsim.cli import main
from netsim.results.dataset import open_results

ASTRA = "astra-sim__astra-sim"


@pytest.fixture
def rt(traces):
    d = traces / ASTRA / "tests/rt_template"
    mb = traces / ASTRA / "examples/workload/microbenchmarks/all_reduce/8npus_1MB/all_reduce"
    flags = [f"--workload-configuration={mb}", f"--system-configuration={d / 'inputs/system_cfg.json'}",
             f"--network-configuration={d / 'inputs/network_cfg.yml'}",
             f"--remote-memory-configuration={d / 'inputs/remote_memory_cfg.json'}"]
    return d, flags


def test_drop_in_prints_astra_sim_lines(rt, capsys):
    d, flags = rt
    assert main(["astra", *flags]) == 0
    out = capsys.readouterr()
    assert out.out.splitlines() == (d / "refs/stdout.txt").read_text().splitlines()
    assert "boost-mode: ignored by ASTRA-sim" in out.err


def test_space_separated_flags_and_unknown_flags(rt, capsys):
    _, flags = rt
    spaced = [x for f in flags for x in f.split("=", 1)]
    assert main(["astra", *spaced, "--num-queues-per-dim", "1", "--comm-scale=2", "--frobnicate=3",
                 "--rendezvous-protocol=false", "--engine", "full"]) == 0
    out = capsys.readouterr()
    assert "sys[7] finished, 117780 cycles, exposed communication 117780 cycles." in out.out
    assert "ignoring unknown option '--frobnicate=3' (ASTRA-sim accepts unknown options silently)" in out.err
    assert "--comm-scale is unused" in out.err


def test_models_from_the_command_line(rt, capsys):
    _, flags = rt
    assert main(["astra", *flags, "--model", "congestion-aware"]) == 0
    assert "sys[0] finished, 117780 cycles" in capsys.readouterr().out
    assert main(["astra", *flags, "--model=flow"]) == 0
    assert "sys[0] finished, 117800 cycles" in capsys.readouterr().out  # max-min flows: 117,799.7 ns


def test_bad_input_is_one_line_and_exit_2(traces, rt, capsys):
    _, flags = rt
    assert main(["astra", *flags[:2]]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--network-configuration" in err and "Traceback" not in err
    bad = traces / ASTRA / "inputs/network/dgx_v100_8gpu.yml"
    assert main(["astra", *flags[:2], f"--network-configuration={bad}"]) == 2
    err = capsys.readouterr().err
    assert "dgx_v100_8gpu.yml: bandwidth[0]: expected a positive number" in err and "'tbd'" in err
    assert main(["astra", *flags, "--model", "wormhole"]) == 2
    assert "invalid choice" in capsys.readouterr().err
    assert main(["astra", *flags, "--rendezvous-protocol=maybe"]) == 2


def test_help(capsys):
    with pytest.raises(SystemExit) as info:
        main(["astra", "--help"])
    assert info.value.code == 0 and "--workload-configuration" in capsys.readouterr().out


def test_out_writes_the_dataset(rt, tmp_path, capsys):
    _, flags = rt
    out = tmp_path / "res"
    assert main(["astra", *flags, "--out", str(out)]) == 0
    res = open_results(out)
    ranks = res.ranks
    assert ranks["finish_ns"].tolist() == [117780.0] * 8 and ranks["exposed_comm_ns"].tolist() == [117780.0] * 8
    assert ranks["comm_ns"].tolist() == [117780.0] * 8 and ranks["idle_ns"].tolist() == [0.0] * 8
    ops = res.table("ops")
    assert sorted(ops["node_id"].tolist()) == list(range(8))  # the microbenchmark's ids are the ranks
    assert res.runs["model"].tolist() == ["analytical"] and res.runs["engine"].tolist() == ["symmetric"]
    assert main(["astra", *flags, "--out", str(out)]) == 2  # the same run again needs --overwrite
    assert "overwrite" in capsys.readouterr().err
    assert main(["astra", *flags, "--out", str(out), "--overwrite"]) == 0


# ------------------------------------------------------------------ export
def test_export_dgx_and_run_the_export(traces, tmp_path, capsys):
    out = tmp_path / "exp"
    assert main(["astra", "export", "--topology", "topologies/dgx-h100.yaml", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "approximation: NVLink SHARP" in printed
    text = (out / "network.yml").read_text()
    assert "topology: [ Switch ]" in text and "npus_count: [ 8 ]" in text
    assert (out / "approximation.txt").read_text().startswith("- ")
    mb = traces / ASTRA / "examples/workload/microbenchmarks/all_reduce/8npus_1MB/all_reduce"
    assert main(["astra", f"--workload-configuration={mb}", f"--system-configuration={out / 'system.json'}",
                 f"--network-configuration={out / 'network.yml'}",
                 f"--remote-memory-configuration={out / 'remote_memory.json'}"]) == 0
    assert "sys[7] finished" in capsys.readouterr().out
    assert main(["astra", "export", "--topology", "topologies/dgx-h100.yaml", "--out", str(out)]) == 2


def test_export_multi_dimensional(traces, tmp_path):
    from netsim.astra.export import export_topology

    files, lost = export_topology("topologies/h100-superpod-1su.yaml", tmp_path / "a")
    text = files[0].read_text()
    assert "topology: [ Switch, Switch ]" in text and "npus_count: [ 8, 32 ]" in text
    assert any("rails" in x for x in lost) and any("fat-tree" in x for x in lost)
    files, lost = export_topology(traces / ASTRA / "inputs/network/tpu_v3_32_2dtorus.yml", tmp_path / "b")
    assert "npus_count: [ 4, 8 ]" in files[0].read_text() and "bandwidth: [ 80.0, 80.0 ]" in files[0].read_text()
    assert lost == [] and files[3].read_text() == "- nothing: the dimensions are exact\n"


# ------------------------------------------------------------------ compare
def _fake_binary(tmp_path, stdout_file, code=0):
    exe = tmp_path / "AstraSim_Analytical_Congestion_Unaware"
    exe.write_text(f"#!/bin/sh\nsed 's/^/[2026-01-01 00:00:00.000] [workload] [info] /' '{stdout_file}'\nexit {code}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return exe


def test_compare_with_a_binary(rt, tmp_path, capsys):
    d, flags = rt
    exe = _fake_binary(tmp_path, d / "refs/stdout.txt")
    out = tmp_path / "cmp"
    assert main(["astra", "compare", "--astra-bin", str(exe), *flags, "--out", str(out)]) == 0
    summary = capsys.readouterr().out
    assert "exact       8 of 8 ranks to the nanosecond" in summary and "ratio 1.000000 .. 1.000000" in summary
    table = open_results(out).table("comparison")
    assert table["astra_ns"].tolist() == table["netsim_ns"].tolist() == [117780.0] * 8
    assert table["ratio"].tolist() == [1.0] * 8
    assert list((out / "comparison").glob("run_id=*/part-0.parquet"))


def test_compare_binary_from_environment_and_failures(rt, tmp_path, capsys, monkeypatch):
    d, flags = rt
    monkeypatch.delenv("ASTRA_SIM_BIN", raising=False)
    assert main(["astra", "compare", *flags]) == 2
    assert "no ASTRA-sim binary: pass --astra-bin PATH or set ASTRA_SIM_BIN" in capsys.readouterr().err
    monkeypatch.setenv("ASTRA_SIM_BIN", str(_fake_binary(tmp_path, d / "refs/stdout.txt")))
    assert main(["astra", "compare", *flags]) == 0
    assert "exact       8 of 8" in capsys.readouterr().out
    broken = tmp_path / "b"
    broken.mkdir()
    monkeypatch.setenv("ASTRA_SIM_BIN", str(_fake_binary(broken, d / "inputs/network_cfg.yml", code=1)))
    assert main(["astra", "compare", *flags]) == 2
    assert "exited with status 1" in capsys.readouterr().err
    assert main(["astra", "compare", "--astra-bin", os.devnull, *flags]) == 2


# ------------------------------------------------------------------- output
def test_parse_output_with_and_without_prefixes(traces):
    text = (traces / ASTRA / "tests/rt_template/refs/stdout.txt").read_text()
    plain = parse_output(text)
    assert sorted(plain) == list(range(8))
    assert plain[3] == {"finished": 117780, "exposed": 117780, "wall": 117780, "comm": 117780}
    prefixed = "\n".join(f"[2024-05-01 10:00:00.123] [statistics] [info] {x}" for x in text.splitlines())
    assert parse_output(prefixed) == plain
    assert parse_output("sys[2], GPU time: 5\nsys[2], Total compute-communication overlap: 3") == {
        2: {"gpu": 5, "overlap": 3}}


def test_libstdcxx_map_order():
    """Checked against g++ 12 (libstdc++): iteration order of std::unordered_map and the
    order ASTRA-sim prints its per-type times in."""
    assert stl_order([1, 2]) == [2, 1]
    assert stl_order(list(range(20)))[:3] == [19, 18, 17]
    assert type_order([(1, "GPU"), (2, "Comm")]) == ["Comm", "GPU"]
    assert type_order([(1, "Comm"), (2, "GPU")]) == ["GPU", "Comm"]
    assert type_order([(1, "Comm"), (2, "GPU"), (3, "Comm")]) == ["Comm", "GPU"]
    assert type_order([(10, "GPU"), (11, "Comm"), (12, "CPU")]) == ["CPU", "Comm", "GPU"]
    assert type_order([(5, "Comm"), (7, "GPU"), (9, "Invalid"), (11, "Remote mem")]) == [
        "Remote mem", "Invalid", "GPU", "Comm"]
