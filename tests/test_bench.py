"""``netsim bench``: table, files, errors."""

import json

import pandas as pd
import pytest

from netsim.perftests import bench, sweep_sizes
from netsim.cli import main

from conftest import TOPOLOGIES

H100 = str(TOPOLOGIES / "dgx-h100.yaml")


def test_sweep_like_nccl_tests():
    assert sweep_sizes(8, 64, factor=2) == [8, 16, 32, 64]
    assert sweep_sizes(1 << 20, 3 << 20, increment=1 << 20) == [1 << 20, 2 << 20, 3 << 20]
    assert sweep_sizes(0, 4, factor=2) == [0, 1, 2, 4]


def test_bench_table(capsys):
    assert main(["bench", "--topology", H100, "--op", "all_reduce", "-b", "1M", "-e", "1G", "-f", "32"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = [line for line in out if line and not line.startswith("#")]
    assert [int(r.split()[0]) for r in rows] == [1 << 20, 1 << 25, 1 << 30]
    assert all(r.split()[4] == "-1" and r.split()[8] == "N/A" for r in rows)
    busbw = float(rows[-1].split()[7])
    # auto picks NVLS (in-switch reduction) at 1 GiB: above the ~370 GB/s ring anchor, below
    # the 2(n-1)/n x 370.8 in-switch bound
    assert 450 < busbw < 560
    assert any(line.startswith("# Avg bus bandwidth") for line in out)
    assert "nvls/Simple" in out[0]


def test_header_names_the_sizes_asked_for(capsys):
    """Like nccl-tests (its header prints -b/-e as given): -b 8 -e 1G -f 4 runs up to 512 MiB,
    the last power of 4 times 8 within 1 GiB, and says maxBytes 1073741824."""
    assert main(["bench", "--topology", H100, "--op", "all_reduce", "-b", "8", "-e", "1G", "-f", "4",
                 "--model", "analytical", "-q"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert any("minBytes 8 maxBytes 1073741824 step: 4(factor)" in line for line in out)
    rows = [line for line in out if line and not line.startswith("#")]
    assert int(rows[-1].split()[0]) == 1 << 29
    # and says so, once, after the table
    notes = [line for line in out if "is not reached" in line]
    assert notes == ["# note: -e 1GiB is not reached with -f 4 from -b 8B: the last size is 512MiB (as in "
                     "nccl-tests, sizes stop at the last one within -e)"]
    assert main(["bench", "--topology", H100, "--op", "all_reduce", "-b", "8", "-e", "2G", "-f", "4",
                 "--model", "analytical", "-q"]) == 0
    assert "is not reached" not in capsys.readouterr().out  # 8 x 4^14 = 2 GiB: reached


def test_each_size_names_its_algorithm(capsys):
    """nccl-tests' columns stay as they are; netsim's algorithm column comes last, one per size."""
    assert main(["bench", "--topology", H100, "--op", "all_reduce", "-b", "8", "-e", "128M", "-f", "64",
                 "--model", "analytical", "-q"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = [line.split() for line in out if line and not line.startswith("#")]
    names = next(line for line in out if line.startswith("#       size"))
    assert names.split()[-2:] == ["#wrong", "algorithm"] and all(len(r) == 14 for r in rows)
    by_size = {int(r[0]): r[13] for r in rows}
    assert by_size[8] == "ring/LL" and by_size[1 << 27] == "nvls/Simple"  # LL for latency, NVLS for bandwidth
    assert f"algorithms {', '.join(dict.fromkeys(by_size.values()))} (simulated" in out[0]


def test_bench_api_busbw_definitions():
    rows = bench(H100, "all_gather", [8 * 2**20], gpus=4)
    r = rows[0]
    assert r.busbw_GBps == pytest.approx(r.algbw_GBps * 3 / 4)
    assert r.algbw_GBps == pytest.approx(r.size_bytes / (r.time_us * 1e-6) / 1e9, rel=1e-3)


@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast",
                                "reduce", "sendrecv"])
@pytest.mark.parametrize("model", ["flow", "analytical"])
def test_every_op_runs(op, model):
    rows = bench(str(TOPOLOGIES / "h100-superpod-1su.yaml"), op, [1 << 16, 1 << 24], gpus=16, model=model)
    assert len(rows) == 2 and all(r.time_us > 0 for r in rows)
    assert rows[1].busbw_GBps > rows[0].busbw_GBps


def test_json_and_parquet(tmp_path, capsys):
    j, pq = tmp_path / "r.json", tmp_path / "r.parquet"
    args = ["bench", "--topology", H100, "--op", "alltoall", "-b", "1M", "-e", "4M", "-J", str(j), "--out", str(pq)]
    assert main(args) == 0
    data = json.loads(j.read_text())
    assert len(data["results"]) == 3
    frame = pd.read_parquet(pq)
    # in_place: nccl-tests' out-of-place / in-place columns (not --placement, which the config records)
    assert frame["in_place"].tolist() == [False, True] * 3 and "placement" not in frame.columns
    capsys.readouterr()
    assert main(args) == 2  # refuses to overwrite
    assert "--overwrite" in capsys.readouterr().err
    assert main(args + ["--overwrite"]) == 0


def test_astra_network_yaml_as_topology(traces, capsys):
    yml = traces / "astra-sim__astra-sim/examples/network/analytical/Ring_8npus.yml"
    assert main(["bench", "--topology", str(yml), "--op", "all_reduce", "-b", "1M", "--model", "analytical"]) == 0
    assert "astra" not in capsys.readouterr().err


@pytest.mark.parametrize("args,needle", [
    (["--op", "allreduce"], "unknown collective"),
    (["--op", "all_reduce", "-b", "1G", "-e", "1M"], "minBytes <= maxBytes"),
    (["--op", "all_reduce", "--gpus", "9"], "--gpus"),
    (["--op", "all_reduce", "--algo", "butterfly"], "--algo"),
    (["--op", "all_reduce", "-b", "1X"], "expected a size"),
    (["--op", "all_reduce", "--model", "packet"], "--model"),
    (["--op", "all_reduce", "-f", "1"], "step factor"),
])
def test_bad_input_one_line_exit_2(args, needle, capsys):
    assert main(["bench", "--topology", H100] + args) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err and "Traceback" not in err
