"""Tests for netsim.results.nccl_table (nccl-tests 2.19.6 layout and definitions)."""

from __future__ import annotations

import doctest
import json
import math
import os

import pytest

from netsim.errors import InputError
from netsim.results import nccl_table as nt
from netsim.results.nccl_table import (
    OPS,
    BenchRow,
    average_busbw,
    bus_factor,
    canonical_op,
    device_line,
    fmt_float,
    format_row,
    format_table,
    header_lines,
    make_row,
    rows_to_frame,
    size_and_count,
    to_nccl_json,
    write_nccl_json,
)

# Header lines of nccl-tests 2.19.6 (src/util.cu writeResultHeader, no -C/-S/-I);
# trailing blanks are part of the real output.
LABELS = "#" + " " * 62 + "out-of-place" + " " * 23 + "in-place" + " " * 10
NAMES = ("#       size         count      type   redop    root"
         "     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong ")
UNITS = ("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
         "             (us)  (GB/s)  (GB/s)" + " " * 9)


def test_doctests():
    result = doctest.testmod(nt, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 10 and result.failed == 0


# --- names -----------------------------------------------------------------

def test_ops_and_alias():
    assert OPS == ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv")
    assert canonical_op("all_to_all") == "alltoall"
    assert canonical_op("All-Reduce") == "all_reduce"


def test_unknown_op_lists_valid_names():
    with pytest.raises(InputError) as err:
        canonical_op("allreduce_v2")
    msg = str(err.value)
    assert "allreduce_v2" in msg and all(op in msg for op in OPS)
    with pytest.raises(InputError):
        make_row("gather_all", 1024, 2, 1e-6)
    with pytest.raises(InputError):
        bus_factor("bogus", 4)


# --- fmt_float (getFloatStr) ------------------------------------------------

@pytest.mark.parametrize("value,width,expected", [
    (0.5, 6, "  0.50"), (12.34, 6, " 12.34"), (123.456, 6, "123.46"), (1234.5, 6, "1234.5"),
    (99999, 6, " 99999"), (123456.7, 6, "123457"), (1e9, 6, " 1e+09"), (999.996, 6, "1000.0"),
    (999999.6, 6, " 1e+06"), (0.0, 6, "  0.00"), (0.004, 6, "  0.00"),
    (0.5, 7, "   0.50"), (12.34, 7, "  12.34"), (123.456, 7, " 123.46"), (1234.5, 7, "1234.50"),
    (12345.67, 7, "12345.7"), (99999, 7, "99999.0"), (1234567.4, 7, "1234567"),
    (12345678, 7, "1.2e+07"), (1e9, 7, "1.0e+09"),
])
def test_fmt_float(value, width, expected):
    assert fmt_float(value, width) == expected


def test_fmt_float_edge_cases():
    assert fmt_float(float("nan"), 6) == "   nan"
    assert fmt_float(float("inf"), 7) == "    inf"
    assert fmt_float(1.5e100, 7) == "1.5e+10"  # C snprintf cuts "1.5e+100" to the width
    assert len(fmt_float(-1e100, 6)) == 6


# --- busbw factors and size/count rules -------------------------------------

@pytest.mark.parametrize("op,n,factor", [
    ("all_reduce", 8, 1.75), ("all_reduce", 2, 1.0), ("all_reduce", 1, 0.0),
    ("all_gather", 8, 0.875), ("reduce_scatter", 4, 0.75), ("alltoall", 16, 15 / 16),
    ("all_to_all", 2, 0.5), ("broadcast", 8, 1.0), ("reduce", 8, 1.0), ("sendrecv", 8, 1.0),
])
def test_bus_factor(op, n, factor):
    assert bus_factor(op, n) == pytest.approx(factor)


@pytest.mark.parametrize("op,nbytes,n,dtype,expected", [
    ("all_reduce", 1000, 8, "float", (1000, 250, 1000)),
    ("all_reduce", 1003, 8, "float", (1000, 250, 1000)),   # count = nbytes // elt
    ("broadcast", 1 << 20, 8, "double", (1 << 20, 131072, 1 << 20)),
    ("reduce", 7, 2, "half", (6, 3, 6)),
    ("sendrecv", 4096, 2, "bfloat16", (4096, 2048, 4096)),
    # all_gather: size = total received; count = per-rank, rounded down to 16 B
    ("all_gather", 1000, 3, "float", (960, 80, 320)),
    ("all_gather", 1 << 20, 8, "float", (1 << 20, 32768, 131072)),
    ("all_gather", 8, 8, "float", (0, 0, 0)),
    ("all_gather", 100, 3, "int8", (96, 32, 32)),
    ("all_gather", 1000, 3, "double", (960, 40, 320)),
    ("all_gather", 1000, 3, "f8e5m2", (960, 320, 320)),
    # reduce_scatter: size = total sent; count = per-rank received
    ("reduce_scatter", 1000, 3, "float", (960, 80, 320)),
    ("reduce_scatter", 1 << 30, 6, "half", (1073741760, 89478480, 178956960)),
    # alltoall: size = whole per-rank send buffer; count = per-peer
    ("alltoall", 1 << 20, 8, "half", (1 << 20, 65536, 131072)),
    ("all_to_all", 1000, 3, "uint32", (960, 80, 320)),
])
def test_size_and_count(op, nbytes, n, dtype, expected):
    assert size_and_count(op, nbytes, n, dtype) == expected


def test_size_and_count_alignment_invariant():
    for dtype, elt in nt.DTYPE_SIZES.items():
        for n in (1, 2, 3, 7, 8, 24):
            for nbytes in (0, 17, 4095, 1 << 20, 10**9 + 7):
                for op in ("all_gather", "reduce_scatter", "alltoall"):
                    size, count, per_rank = size_and_count(op, nbytes, n, dtype)
                    assert size == count * n * elt and per_rank == count * elt
                    assert (count * elt) % 16 == 0 and size <= nbytes


def test_size_and_count_bad_input():
    with pytest.raises(InputError, match="dtype"):
        size_and_count("all_reduce", 1024, 2, "float32")
    with pytest.raises(InputError):
        size_and_count("all_reduce", -1, 2)
    with pytest.raises(InputError):
        size_and_count("all_reduce", 1024, 0)


# --- rows -------------------------------------------------------------------

def test_make_row_metrics():
    row = make_row("all_gather", 1 << 20, 8, 50e-6, dtype="half", algorithm="ring")
    assert (row.size_bytes, row.count, row.dtype, row.redop, row.root) == (1 << 20, 65536, "half", "none", -1)
    assert row.time_us == pytest.approx(50.0)
    assert row.algbw_GBps == pytest.approx((1 << 20) / 50e-6 / 1e9)
    assert row.busbw_GBps == pytest.approx(row.algbw_GBps * 7 / 8)
    assert (row.inplace_time_us, row.inplace_busbw_GBps) == (row.time_us, row.busbw_GBps)
    assert row.algorithm == "ring"


def test_make_row_inplace_time():
    row = make_row("reduce_scatter", 4096, 4, 2e-6, inplace_time_s=4e-6)
    assert row.inplace_time_us == pytest.approx(4.0)
    assert row.inplace_algbw_GBps == pytest.approx(row.algbw_GBps / 2)


@pytest.mark.parametrize("op,redop,root", [
    ("all_reduce", "sum", -1), ("reduce_scatter", "sum", -1), ("reduce", "sum", 0),
    ("all_gather", "none", -1), ("alltoall", "none", -1), ("broadcast", "none", 0),
    ("sendrecv", "sum", -1),  # nccl-tests passes its -o op to sendrecv and prints it
])
def test_default_redop_and_root(op, redop, root):
    row = make_row(op, 4096, 4, 1e-6)
    assert (row.redop, row.root) == (redop, root)


def test_make_row_rejects_bad_values():
    with pytest.raises(InputError):
        make_row("all_reduce", 1024, 4, 0.0)
    with pytest.raises(InputError):
        make_row("all_reduce", 1024, 4, float("nan"))
    with pytest.raises(InputError):
        make_row("all_reduce", 1024, 4, 1e-6, root=2)
    with pytest.raises(InputError):
        make_row("all_gather", 1024, 4, 1e-6, redop="sum")
    with pytest.raises(InputError):
        make_row("all_reduce", 1024, 4, 1e-6, redop="xor")
    with pytest.raises(InputError):
        make_row("broadcast", 1024, 4, 1e-6, root=4)
    assert make_row("reduce", 1024, 4, 1e-6, redop="max", root=3).root == 3


def test_benchrow_is_frozen():
    row = BenchRow(8, 2, "float", "sum", -1, 1.0, 2.0, 3.0)
    assert (row.inplace_time_us, row.inplace_algbw_GBps, row.inplace_busbw_GBps) == (1.0, 2.0, 3.0)
    with pytest.raises(AttributeError):
        row.time_us = 5.0  # type: ignore[misc]


# --- text output ------------------------------------------------------------

def _small_rows():
    return [
        make_row("all_reduce", 8, 4, 20e-6),
        make_row("all_reduce", 1 << 20, 4, 100e-6, inplace_time_s=98e-6, algorithm="ring"),
        make_row("all_reduce", 1 << 30, 4, 5000e-6, inplace_time_s=12345678e-6),
    ]


def test_header_lines_exact():
    assert header_lines() == ["#", LABELS, NAMES, UNITS]
    assert header_lines("cputime")[2].startswith("#       size         count      type   redop    root  cputime")


def test_small_table_exact():
    devices = [device_line(r, host="node0", name="NVIDIA H100 (sim)") for r in range(4)]
    text = format_table("all_reduce", _small_rows(), nranks=4, min_bytes=8, max_bytes=1 << 30,
                        step_factor=2, device_lines=devices)
    assert text.endswith("\n")
    expected = [
        "# netsim 0.1.0 simulated benchmark (nccl-tests 2.19.6 table format)",
        "# Collective test starting: all_reduce_perf",
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 1073741824 step: 2(factor) warmup iters: 0 iters: 1"
        " agg iters: 1 validation: 0 graph: 0 unalign: 0",
        "#",
        "# Using devices",
        "#  Rank  0 Group  0 Pid      0 on      node0 device  0 [0000:00:00] NVIDIA H100 (sim)",
        "#  Rank  1 Group  0 Pid      0 on      node0 device  1 [0000:00:00] NVIDIA H100 (sim)",
        "#  Rank  2 Group  0 Pid      0 on      node0 device  2 [0000:00:00] NVIDIA H100 (sim)",
        "#  Rank  3 Group  0 Pid      0 on      node0 device  3 [0000:00:00] NVIDIA H100 (sim)",
        "#", LABELS, NAMES, UNITS,
        "           8             2     float     sum      -1    20.00    0.00    0.00    N/A    20.00    0.00    0.00    N/A",
        "     1048576        262144     float     sum      -1   100.00   10.49   15.73    N/A    98.00   10.70   16.05    N/A",
        "  1073741824     268435456     float     sum      -1  5000.00  214.75  322.12    N/A  1.2e+07    0.09    0.13    N/A",
        "# Out of bounds values : 0 OK",
        "# Avg bus bandwidth    : 59.0054 ",
        "#",
        "# Collective test concluded: all_reduce_perf",
        "#",
    ]
    assert text.splitlines() == expected


def test_algorithm_column_comes_after_nccl_tests_columns():
    rows = [make_row("all_reduce", 8, 4, 20e-6, algorithm="ring/LL"),
            make_row("all_reduce", 1 << 30, 4, 5e-3, algorithm="nvls/Simple")]
    kw = dict(nranks=4, min_bytes=8, max_bytes=1 << 30)
    plain = format_table("all_reduce", rows, **kw).splitlines()
    extra = format_table("all_reduce", rows, algo_column=True, **kw).splitlines()
    changed = [(a, b) for a, b in zip(plain, extra) if a != b]
    assert len(plain) == len(extra) and len(changed) == 3
    assert changed[0] == (NAMES, NAMES + " algorithm")
    for (a, b), algo in zip(changed[1:], ("ring/LL", "nvls/Simple")):  # nccl-tests' text, then the algorithm
        assert b.startswith(a) and b.split() == a.split() + [algo] and b.index(algo) == len(NAMES) + 1  # under its name


def test_row_columns_align_with_header():
    names = header_lines()[2]
    row = format_row(_small_rows()[1], nwrong=0)
    ends = [i + len(w) for w in ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong")
            for i in [names.index(w)]]
    for end in ends:  # right edge of each header name = right edge of the value under it
        assert row[end - 1] != " " and (end == len(row) or row[end] == " ")
    assert len(row) == len(names) - 1  # header lines keep one trailing blank


def test_rows_from_a_real_nccl_tests_run():
    # all_reduce_perf, 2 ranks (two DGX Spark, NVIDIA GB10), nccl-tests output posted in
    # NVIDIA/dgx-spark-playbooks PR #103: times (us) re-used, bandwidths recomputed.
    real = [
        (8192, 35.15, 30.33,
         "        8192          2048     float     sum      -1    35.15    0.23    0.23       0    30.33    0.27    0.27       0"),
        (16384, 31.67, 30.75,
         "       16384          4096     float     sum      -1    31.67    0.52    0.52       0    30.75    0.53    0.53       0"),
        (32768, 39.56, 37.44,
         "       32768          8192     float     sum      -1    39.56    0.83    0.83       0    37.44    0.88    0.88       0"),
        (65536, 67.93, 64.71,
         "       65536         16384     float     sum      -1    67.93    0.96    0.96       0    64.71    1.01    1.01       0"),
    ]
    for size, oop_us, ip_us, line in real:
        row = make_row("all_reduce", size, 2, oop_us * 1e-6, inplace_time_s=ip_us * 1e-6)
        assert format_row(row, nwrong=0) == line


def test_footer_average_and_format():
    rows = _small_rows()
    values = [r.busbw_GBps for r in rows] + [r.inplace_busbw_GBps for r in rows]
    assert average_busbw(rows) == pytest.approx(sum(values) / 6)
    text = format_table("all_reduce", rows, nranks=4, min_bytes=8, max_bytes=1 << 30)
    assert "# Avg bus bandwidth    : %g \n" % (sum(values) / 6) in text
    one = format_table("broadcast", [make_row("broadcast", 1000, 2, 1e-6)], nranks=2, min_bytes=1000, max_bytes=1000)
    assert "# Avg bus bandwidth    : 1 \n" in one
    assert math.isnan(average_busbw([]))


def test_params_line_step_bytes_and_title():
    rows = [make_row("sendrecv", 4096, 2, 1e-6)]
    text = format_table("sendrecv", rows, nranks=2, min_bytes=1024, max_bytes=4096, title="my run", iters=20,
                        warmup_iters=5)
    lines = text.splitlines()
    assert lines[0] == "# my run"
    assert lines[2] == ("# nThread 1 nGpus 1 minBytes 1024 maxBytes 4096 step: 1048576(bytes) warmup iters: 5"
                        " iters: 20 agg iters: 1 validation: 0 graph: 0 unalign: 0")
    assert "step: 4096(bytes)" in format_table("sendrecv", rows, nranks=2, min_bytes=0, max_bytes=1,
                                               step_bytes=4096)
    assert "# Collective test concluded: sendrecv_perf" in lines


def test_many_ranks_are_summarised():
    text = format_table("all_to_all", [make_row("alltoall", 1 << 20, 1024, 1e-3)], nranks=1024,
                        min_bytes=1 << 20, max_bytes=1 << 20)
    lines = text.splitlines()
    start = lines.index("# Using devices")
    assert lines[start + 1] == "#  Rank  0 Group  0 Pid      0 on     netsim device  0 [0000:00:00] simulated GPU"
    assert lines[start + 8].startswith("#  Rank  7 ")
    assert lines[start + 9] == "# ... (1024 ranks)"
    assert lines[start + 10] == "#"
    assert "# Collective test starting: alltoall_perf" in lines


def test_format_table_errors():
    with pytest.raises(InputError):
        format_table("all_reduce", [], nranks=2, min_bytes=8, max_bytes=8)
    with pytest.raises(InputError):
        format_table("all_reduce", _small_rows(), nranks=4, min_bytes=8, max_bytes=8, device_lines=["x"])
    with pytest.raises(InputError):
        format_table("nope", _small_rows(), nranks=4, min_bytes=8, max_bytes=8)


# --- JSON and Parquet ---------------------------------------------------------

def test_json_keys():
    rows = _small_rows()
    doc = to_nccl_json("all_reduce", rows, config={"iterations": 20, "step_factor": 2}, args=["netsim", "bench"],
                       timestamp="2026-01-02 03:04:05")
    assert {"version", "start_time", "args", "env", "nccl_version", "config", "results", "out_of_bounds",
            "average_bus_bandwidth", "errors", "end_time"} <= set(doc)
    assert doc["version"] == 3 and doc["start_time"] == "2026-01-02 03:04:05"
    assert doc["config"]["iterations"] == 20 and doc["config"]["step_factor"] == 2
    assert {"nthreads", "ngpus", "minimum_bytes", "maximum_bytes", "warmup_iters", "aggregated_iterations",
            "validation", "graph", "devices"} <= set(doc["config"])
    assert (doc["config"]["minimum_bytes"], doc["config"]["maximum_bytes"]) == (8, 1 << 30)
    res = doc["results"][1]
    assert set(res) == {"size", "count", "type", "redop", "root", "out_of_place", "in_place",
                        "actual_iterations", "experiment_name", "algorithm"}
    assert (res["size"], res["count"], res["type"], res["redop"], res["root"]) == (1 << 20, 262144, "float", "sum", "    -1")
    assert set(res["out_of_place"]) == {"time", "alg_bw", "bus_bw", "nwrong"}
    assert res["in_place"]["time"] == pytest.approx(98.0) and res["out_of_place"]["nwrong"] is None
    assert res["actual_iterations"] == 20 and res["algorithm"] == "ring"
    assert doc["out_of_bounds"] == {"count": 0, "okay": True}
    assert doc["average_bus_bandwidth"]["bandwidth"] == pytest.approx(average_busbw(rows))
    assert doc["netsim"]["collective"] == "all_reduce"
    json.dumps(doc, allow_nan=False)


def test_write_json_atomic(tmp_path):
    target = tmp_path / "out.json"
    target.write_text("old")
    path = write_nccl_json(target, "reduce", [make_row("reduce", 4096, 4, 2e-6)], config={})
    assert path == target
    data = json.loads(target.read_text())
    assert data["results"][0]["root"] == "     0" and data["results"][0]["redop"] == "sum"
    assert os.listdir(tmp_path) == ["out.json"]


def test_write_json_failure_leaves_no_temp(tmp_path):
    with pytest.raises(InputError):
        write_nccl_json(tmp_path / "x.json", "nope", [], config={})
    assert os.listdir(tmp_path) == []


def test_rows_to_frame(tmp_path):
    rows = _small_rows()
    df = rows_to_frame("all_reduce", rows, 4)
    assert list(df.columns) == ["seq", "op", "algorithm", "group", "group_size", "bytes", "count", "dtype", "redop",
                                "root", "in_place", "start_ns", "last_start_ns", "end_ns", "algbw_GBps",
                                "busbw_GBps"]
    assert len(df) == 6
    assert df["in_place"].tolist()[:2] == [False, True] and df["in_place"].dtype == bool
    assert df["busbw_GBps"].mean() == pytest.approx(average_busbw(rows))
    assert df.loc[3, "end_ns"] == pytest.approx(98.0e3) and df.loc[3, "algorithm"] == "ring"
    assert set(df["op"]) == {"all_reduce"} and set(df["group_size"]) == {4} and df["seq"].tolist() == [0, 0, 1, 1, 2, 2]
    assert df["bytes"].dtype == "int64"
    df.to_parquet(tmp_path / "t.parquet")


def test_sendrecv_accepts_none_redop():
    assert make_row("sendrecv", 64, 2, 1e-6, redop="none").redop == "none"
    assert make_row("sendrecv", 64, 2, 1e-6, redop="max").redop == "max"
    with pytest.raises(InputError, match="expected one of none"):
        make_row("alltoall", 64, 2, 1e-6, redop="sum")
