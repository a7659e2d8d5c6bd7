"""nccl-tests-compatible benchmark rows, text tables and ``-J`` JSON.

``netsim bench`` output is read side by side with NVIDIA nccl-tests output, so
this module follows nccl-tests' own definitions: what the ``size`` and
``count`` columns mean per collective, the bus-bandwidth factors, the column
widths, the float rule and the footer.  Facts were checked against
NVIDIA/nccl-tests 2.19.6 (commit a0b82b22: ``src/util.cu``, ``src/common.cu``
and ``src/<coll>.cu``); the code is netsim's own.

Units: sizes in bytes, times in microseconds, bandwidths in GB/s (1e9 B/s).
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from netsim.errors import InputError
from netsim.version import __version__

if TYPE_CHECKING:
    import pandas as pd

NCCL_TESTS_VERSION = "2.19.6"
JSON_FILE_VERSION = 3
OPS = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv")
REDOPS = ("sum", "prod", "max", "min", "avg", "mulsum")
DTYPE_SIZES = MappingProxyType({
    "int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8,
    "half": 2, "float": 4, "double": 8, "bfloat16": 2, "f8e4m3": 1, "f8e5m2": 1,
})
_ALIASES = MappingProxyType({"all_to_all": "alltoall"})
_REDUCING = frozenset({"all_reduce", "reduce_scatter", "reduce", "sendrecv"})  # nccl-tests passes an op
_ROOTED = frozenset({"broadcast", "reduce"})
_SHARDED = frozenset({"all_gather", "reduce_scatter", "alltoall"})
# Column widths: size, count, type, redop, root | time, algbw, busbw, #wrong (per placement).
_LEAD_W = (12, 12, 8, 6, 6)
_PLACE_W = (7, 6, 6, 6)
_SEP = "  "
_NA_CELL = "    N/A"
_PLACE_LABELS = " " * 11 + "out-of-place" + " " * 23 + "in-place" + " " * 10
_FOOT_W = 20
_DEFAULT_STEP_BYTES = 1 << 20


def canonical_op(name: str) -> str:
    """Return the nccl-tests spelling of a collective name.

    Examples
    --------
    >>> canonical_op("all_to_all")
    'alltoall'
    """
    key = str(name).strip().lower().replace("-", "_")
    key = _ALIASES.get(key, key)
    if key not in OPS:
        raise InputError(f"unknown collective {name!r}; expected one of {', '.join(OPS)}")
    return key


def _elt_size(dtype: str) -> int:
    if dtype not in DTYPE_SIZES:
        raise InputError(f"unknown dtype {dtype!r}; expected one of {', '.join(DTYPE_SIZES)}")
    return DTYPE_SIZES[dtype]


def _check_nranks(nranks: int) -> int:
    if isinstance(nranks, bool) or not isinstance(nranks, int) or nranks < 1:
        raise InputError(f"expected a positive integer rank count, got {nranks!r}")
    return nranks


def bus_factor(op: str, nranks: int) -> float:
    """nccl-tests busbw/algbw factor (``doc/PERFORMANCE.md``, ``src/<coll>.cu``).

    Examples
    --------
    >>> bus_factor("all_reduce", 8), bus_factor("all_gather", 8), bus_factor("sendrecv", 8)
    (1.75, 0.875, 1.0)
    """
    op, n = canonical_op(op), _check_nranks(nranks)
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op in _SHARDED:
        return (n - 1) / n
    return 1.0


def size_and_count(op: str, nbytes: int, nranks: int, dtype: str = "float") -> tuple[int, int, int]:
    """Size and count columns nccl-tests prints for a requested size ``nbytes``.

    nccl-tests turns ``nbytes`` into ``count = nbytes // elt``.  For all_gather,
    reduce_scatter and alltoall the per-rank (per-peer for alltoall) count is
    ``count // nranks`` rounded down to a multiple of ``16 // elt`` elements
    (16 bytes); the size column is ``max(send, recv)`` bytes.

    Returns
    -------
    tuple
        ``(size_bytes, count, per_rank_bytes)``; ``count`` is the count passed to
        NCCL and ``per_rank_bytes = count * elt``: the whole buffer, the shard a
        rank sends (all_gather) or receives (reduce_scatter), or each peer's chunk
        (alltoall).

    Examples
    --------
    >>> size_and_count("all_gather", 1000, 3)
    (960, 80, 320)
    """
    op, n, elt = canonical_op(op), _check_nranks(nranks), _elt_size(dtype)
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
        raise InputError(f"expected a non-negative integer byte count, got {nbytes!r}")
    count = nbytes // elt
    if op in _SHARDED:
        align = max(1, 16 // elt)
        count = (count // n) // align * align
        return count * n * elt, count, count * elt
    return count * elt, count, count * elt


@dataclass(frozen=True)
class BenchRow:
    """One line of an nccl-tests table; in-place values default to out-of-place."""

    size_bytes: int
    count: int
    dtype: str
    redop: str
    root: int
    time_us: float
    algbw_GBps: float
    busbw_GBps: float
    inplace_time_us: float | None = None
    inplace_algbw_GBps: float | None = None
    inplace_busbw_GBps: float | None = None
    algorithm: str = ""

    def __post_init__(self) -> None:
        for name in ("time_us", "algbw_GBps", "busbw_GBps"):
            if getattr(self, "inplace_" + name) is None:
                object.__setattr__(self, "inplace_" + name, getattr(self, name))

    def placements(self) -> tuple[tuple[str, float, float, float], ...]:
        """``(placement, time_us, algbw, busbw)`` for out-of-place then in-place."""
        return (("out_of_place", self.time_us, self.algbw_GBps, self.busbw_GBps),
                ("in_place", self.inplace_time_us, self.inplace_algbw_GBps, self.inplace_busbw_GBps))


def _default_redop(op: str, redop: str | None) -> str:
    if redop is None:
        return "sum" if op in _REDUCING else "none"
    allowed = REDOPS if op in _REDUCING else ()
    if op not in _REDUCING or op == "sendrecv":  # sendrecv prints an op but does not reduce
        allowed += ("none",)
    if redop not in allowed:
        raise InputError(f"{op}: unsupported redop {redop!r}; expected one of {', '.join(allowed)}")
    return redop


def _default_root(op: str, root: int | None, nranks: int) -> int:
    if root is None:
        return 0 if op in _ROOTED else -1
    if op not in _ROOTED:
        if root != -1:
            raise InputError(f"{op} has no root, got root={root}")
        return -1
    if not 0 <= root < nranks:
        raise InputError(f"root must be in [0, {nranks}), got {root}")
    return root


def _bandwidths(size: int, time_s: float, factor: float) -> tuple[float, float, float]:
    if not (isinstance(time_s, (int, float)) and math.isfinite(time_s) and time_s > 0):
        raise InputError(f"expected a positive finite time in seconds, got {time_s!r}")
    algbw = size / 1.0e9 / time_s
    return time_s * 1.0e6, algbw, algbw * factor


def make_row(op: str, nbytes: int, nranks: int, time_s: float, dtype: str = "float",
             redop: str | None = None, root: int | None = None, algorithm: str = "",
             inplace_time_s: float | None = None) -> BenchRow:
    """Build a row from a requested size and a simulated time (seconds).

    ``algbw = size / time`` in 1e9 B/s and ``busbw = algbw * bus_factor``.
    Defaults follow nccl-tests: redop ``sum`` where an operator is passed
    (all_reduce, reduce_scatter, reduce and, as nccl-tests prints it, sendrecv)
    else ``none``; root 0 for broadcast/reduce else -1.

    Examples
    --------
    >>> r = make_row("broadcast", 4096, 4, 2e-6)
    >>> (r.redop, r.root, r.time_us, r.busbw_GBps)
    ('none', 0, 2.0, 2.048)
    """
    op = canonical_op(op)
    size, count, _ = size_and_count(op, nbytes, nranks, dtype)
    factor = bus_factor(op, nranks)
    t_us, alg, bus = _bandwidths(size, time_s, factor)
    ip = _bandwidths(size, inplace_time_s, factor) if inplace_time_s is not None else (None,) * 3
    return BenchRow(size, count, dtype, _default_redop(op, redop), _default_root(op, root, nranks),
                    t_us, alg, bus, ip[0], ip[1], ip[2], algorithm)


def fmt_float(value: float, width: int) -> str:
    """Format like nccl-tests: 2 decimals, else 1, else 0, else exponent, to fit ``width``.

    The exponent form is ``.1e`` for widths of 7 or more, else ``.0e``, cut to
    ``width`` characters as C ``snprintf`` does.

    Examples
    --------
    >>> [fmt_float(v, 6) for v in (0.5, 1234.5, 99999, 1e9)]
    ['  0.50', '1234.5', ' 99999', ' 1e+09']
    """
    for spec in ("%*.2f", "%*.1f", "%*.0f"):
        text = spec % (width, value)
        if len(text) <= width:
            return text
    return (("%*.1e" if width >= 7 else "%*.0e") % (width, value))[:width]


def _cells(values: Sequence[str], widths: Sequence[int]) -> str:
    return _SEP.join(f"{v:>{w}}" for v, w in zip(values, widths))


def format_row(row: BenchRow, nwrong: int | None = None) -> str:
    """One table line; ``nwrong=None`` prints ``N/A`` (validation off), as netsim does.

    Examples
    --------
    >>> format_row(make_row("all_reduce", 8192, 2, 35.15e-6))[:44]
    '        8192          2048     float     sum'
    """
    lead = _cells([str(row.size_bytes), str(row.count), row.dtype, row.redop, "%6i" % row.root], _LEAD_W)
    # nccl-tests prints "N/A" one column narrower than "#wrong" (4 spaces, not 2 + width 6).
    wrong = _NA_CELL if nwrong is None else _SEP + "%*g" % (_PLACE_W[3], float(nwrong))
    parts = [lead]
    for _, t_us, alg, bus in row.placements():
        vals = [fmt_float(t_us, 7), fmt_float(alg, 6), fmt_float(bus, 6)]
        parts.append(_cells(vals, _PLACE_W[:3]) + wrong)
    return _SEP.join(parts)


def header_lines(time_label: str = "time") -> list[str]:
    """The lone ``#`` and the three header lines (labels, names, units).

    Examples
    --------
    >>> header_lines()[2][:26]
    '#       size         count'
    """
    first = (_LEAD_W[0] - 2,) + _LEAD_W[1:]

    def line(lead: Sequence[str], place: Sequence[str]) -> str:
        return "# " + _cells(lead, first) + _SEP + _cells(place, _PLACE_W * 2) + " "

    return ["#", "# " + _cells([""] * 5, first) + _PLACE_LABELS,
            line(["size", "count", "type", "redop", "root"],
                 [time_label, "algbw", "busbw", "#wrong"] * 2),
            line(["(B)", "(elements)", "", "", ""], ["(us)", "(GB/s)", "(GB/s)", ""] * 2)]


def average_busbw(rows: Sequence[BenchRow]) -> float:
    """Mean busbw over all rows and both placements (the nccl-tests footer value).

    Examples
    --------
    >>> average_busbw([make_row("sendrecv", 1000, 2, 1e-6, inplace_time_s=2e-6)])
    0.75
    """
    values = [bus for r in rows for _, _, _, bus in r.placements()]
    return sum(values) / len(values) if values else float("nan")


def device_line(rank: int, *, host: str = "netsim", device: int | None = None,
                name: str = "simulated GPU") -> str:
    """One ``# Using devices`` line in nccl-tests layout (pid 0, bus id 0000:00:00).

    Examples
    --------
    >>> device_line(3, host="node0")
    '#  Rank  3 Group  0 Pid      0 on      node0 device  3 [0000:00:00] simulated GPU'
    """
    dev = rank if device is None else device
    return f"#  Rank {rank:2d} Group {0:2d} Pid {0:6d} on {host:>10} device {dev:2d} [0000:00:00] {name}"


def _preamble(op: str, min_bytes: int, max_bytes: int, step: str,
              iters: int, warmup_iters: int, title: str | None) -> list[str]:
    banner = title or f"netsim {__version__} simulated benchmark (nccl-tests {NCCL_TESTS_VERSION} table format)"
    return [f"# {banner}", f"# Collective test starting: {op}_perf",
            f"# nThread 1 nGpus 1 minBytes {min_bytes} maxBytes {max_bytes} step: {step} "
            f"warmup iters: {warmup_iters} iters: {iters} agg iters: 1 validation: 0 graph: 0 unalign: 0",
            "#"]


def _device_block(nranks: int, device_lines: Sequence[str] | None, max_lines: int) -> list[str]:
    lines = list(device_lines) if device_lines is not None else [device_line(r) for r in range(nranks)]
    if len(lines) != nranks:
        raise InputError(f"expected {nranks} device lines, got {len(lines)}")
    lines = [ln if ln.startswith("#") else "#  " + ln for ln in lines]
    if nranks > max_lines:
        lines = lines[:max_lines] + [f"# ... ({nranks} ranks)"]
    return ["# Using devices", *lines]


def format_table(op: str, rows: Sequence[BenchRow], *, nranks: int, min_bytes: int, max_bytes: int,
                 step_factor: int | None = None, step_bytes: int | None = None,
                 device_lines: Sequence[str] | None = None, title: str | None = None,
                 iters: int = 1, warmup_iters: int = 0, max_device_lines: int = 8,
                 algo_column: bool = False) -> str:
    """Full nccl-tests-like text: preamble, header, rows (``#wrong`` N/A) and footer.

    ``title`` replaces the netsim banner that stands where nccl-tests prints its
    version.  The step shows ``factor`` when ``step_factor > 1``, else bytes
    (nccl-tests' default 1 MiB).  Trailing spaces on header and footer lines
    match nccl-tests; the text ends with the final ``#`` line nccl-tests prints.
    ``algo_column`` adds netsim's ``algorithm`` column after nccl-tests' columns (which stay
    as they are): the algorithm and protocol each size ran.

    Examples
    --------
    >>> rows = [make_row("all_reduce", 1 << 20, 8, 100e-6)]
    >>> text = format_table("all_reduce", rows, nranks=8, min_bytes=1 << 20, max_bytes=1 << 20)
    >>> text.splitlines()[-4]
    '# Avg bus bandwidth    : 18.3501 '
    """
    op = canonical_op(op)
    _check_nranks(nranks)
    if not rows:
        raise InputError("no benchmark rows to format")
    step = f"{step_factor}(factor)" if step_factor and step_factor > 1 else \
        f"{step_bytes if step_bytes is not None else _DEFAULT_STEP_BYTES}(bytes)"
    lines = _preamble(op, min_bytes, max_bytes, step, iters, warmup_iters, title)
    lines += _device_block(nranks, device_lines, max_device_lines)
    head = header_lines()
    if algo_column:
        head[2] += " algorithm"
    lines += head
    # the algorithm starts under its name (an N/A row is 2 characters short of a numbered one)
    lines += [format_row(r).ljust(len(head[2]) - len(" algorithm") - 1) + _SEP + r.algorithm if algo_column
              else format_row(r) for r in rows]
    lines += [f"# {'Out of bounds values':<{_FOOT_W}} : 0 OK",
              f"# {'Avg bus bandwidth':<{_FOOT_W}} : {'%g' % average_busbw(rows)} ",
              "#", f"# Collective test concluded: {op}_perf", "#"]
    return "\n".join(lines) + "\n"


def _json_num(value: float) -> float | str:
    return "nan" if value != value else value


def _json_result(row: BenchRow, iterations: int) -> dict[str, Any]:
    item: dict[str, Any] = {"size": row.size_bytes, "count": row.count, "type": row.dtype,
                            "redop": row.redop, "root": "%6i" % row.root}  # nccl-tests writes root as text
    for place, t_us, alg, bus in row.placements():
        item[place] = {"time": _json_num(t_us), "alg_bw": _json_num(alg), "bus_bw": _json_num(bus), "nwrong": None}
    item.update(actual_iterations=iterations, experiment_name="", algorithm=row.algorithm)
    return item


def to_nccl_json(op: str, rows: Sequence[BenchRow], *, config: Mapping[str, Any],
                 args: Sequence[str] = (), timestamp: str | None = None) -> dict[str, Any]:
    """nccl-tests ``-J`` style document (JSON file version 3).

    Keys follow nccl-tests: ``config`` (with ``devices``), ``results`` (size,
    count, type, redop, root as the ``%6i`` string, ``out_of_place``/``in_place``
    with time, alg_bw, bus_bw, nwrong), ``out_of_bounds``,
    ``average_bus_bandwidth`` and ``errors``.  netsim adds ``algorithm`` per
    result and a top-level ``netsim`` object.  ``config`` entries override
    the defaults.

    Examples
    --------
    >>> doc = to_nccl_json("all_reduce", [make_row("all_reduce", 1024, 2, 1e-6)], config={})
    >>> doc["results"][0]["root"], doc["average_bus_bandwidth"]["bandwidth"]
    ('    -1', 1.024)
    """
    op = canonical_op(op)
    stamp = timestamp or time.strftime("%Y-%m-%d %H:%M:%S")
    cfg: dict[str, Any] = {
        "nthreads": 1, "ngpus": 1,
        "minimum_bytes": min((r.size_bytes for r in rows), default=0),
        "maximum_bytes": max((r.size_bytes for r in rows), default=0),
        "warmup_iters": 0, "iterations": 1, "aggregated_iterations": 1, "validation": 0, "graph": 0,
        "blocking_collectives": False, "per_iter_timing": False, "per_iter_skip": 0,
        "parallel_init": False, "devices": [],
    }
    cfg.update(config)
    results = [_json_result(r, cfg["iterations"]) for r in rows]
    return {"version": JSON_FILE_VERSION, "start_time": stamp, "args": list(args), "env": [],
            "nccl_version": None, "config": cfg, "results": results,
            "out_of_bounds": {"count": 0, "okay": True},
            "average_bus_bandwidth": {"bandwidth": _json_num(average_busbw(rows)), "okay": "unchecked"},
            "errors": [], "end_time": stamp,
            "netsim": {"version": __version__, "collective": op, "program": f"{op}_perf",
                       "format": f"nccl-tests {NCCL_TESTS_VERSION} -J"}}


def write_nccl_json(path: str | os.PathLike[str], op: str, rows: Sequence[BenchRow], *,
                    config: Mapping[str, Any], **kwargs: Any) -> Path:
    """Write :func:`to_nccl_json` atomically (temp file in the same folder, then ``os.replace``).

    Examples
    --------
    >>> import json, os, tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = write_nccl_json(os.path.join(d, "a.json"), "alltoall", [make_row("alltoall", 64, 2, 1e-6)], config={})
    ...     json.loads(p.read_text())["version"]
    3
    """
    from netsim.results.io import atomic_file

    doc = to_nccl_json(op, rows, config=config, **kwargs)
    target = Path(path)
    with atomic_file(target, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2, allow_nan=False)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    return target


#: Columns of ``netsim bench --out x.parquet``: the dataset's ``collectives`` vocabulary (``bytes`` =
#: nccl-tests size, ``group_size`` = ranks, times in ns from the size's start) plus nccl-tests' count,
#: type, redop, root and ``in_place`` (False: nccl-tests' out-of-place columns, True: in-place; not
#: ``--placement``, which ``runs`` records).  These were once ``size_bytes``, ``nranks``, ``time_us`` and
#: ``placement`` (``"out_of_place"``/``"in_place"``); :func:`netsim.results.bench_file.read_bench_file`
#: still reads such files.
FRAME_COLUMNS = ("seq", "op", "algorithm", "group", "group_size", "bytes", "count", "dtype", "redop", "root",
                 "in_place", "start_ns", "last_start_ns", "end_ns", "algbw_GBps", "busbw_GBps")


def rows_to_frame(op: str, rows: Sequence[BenchRow], nranks: int) -> pd.DataFrame:
    """Long table for Parquet: one record per size, out-of-place then in-place (``in_place``), ns.

    ``seq`` is the size's index (as in the dataset's ``collectives``); ``end_ns`` the
    size's time (``start_ns`` 0), from the same µs the printed table shows.

    Examples
    --------
    >>> df = rows_to_frame("all_to_all", [make_row("alltoall", 4096, 4, 1e-6)], 4)
    >>> df["in_place"].tolist(), df["op"].iloc[0], df["end_ns"].tolist()
    ([False, True], 'alltoall', [1000.0, 1000.0])
    """
    import pandas

    op, n = canonical_op(op), _check_nranks(nranks)
    records = [(i, op, r.algorithm, "world", n, r.size_bytes, r.count, r.dtype, r.redop, r.root, place == "in_place", 0.0,
                0.0, t_us * 1e3, alg, bus)
               for i, r in enumerate(rows) for place, t_us, alg, bus in r.placements()]
    frame = pandas.DataFrame.from_records(records, columns=list(FRAME_COLUMNS))
    return frame.astype({"in_place": "bool", "seq": "int64", "group_size": "int32", "bytes": "int64", "count": "int64",
                         "root": "int64", "start_ns": "float64", "last_start_ns": "float64", "end_ns": "float64", "algbw_GBps": "float64",
                         "busbw_GBps": "float64"})
