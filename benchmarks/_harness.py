"""Tiny benchmark harness: run a case in a fresh process, report wall time and peak memory."""

from __future__ import annotations

import multiprocessing as mp
import resource
import time
import tracemalloc
from typing import Callable


def _child(fn: Callable[[], dict], queue, trace: bool) -> None:
    if trace:
        tracemalloc.start()
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0, c0 = time.perf_counter(), time.process_time()
    extra = fn() or {}
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak_alloc = tracemalloc.get_traced_memory()[1] if trace else 0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    queue.put({"wall_s": wall, "cpu_s": cpu, "peak_rss_MB": rss / 1024, "rss_before_MB": base_rss / 1024,
               "peak_alloc_MB": peak_alloc / 2**20, **extra})


def run_case(fn: Callable[[], dict], trace: bool = False) -> dict:
    """Run ``fn`` in a fresh spawned process; return wall_s, cpu_s (its process's CPU seconds),
    peak_rss_MB and fn's dict (whose own ``cpu_s``, if any, wins).

    Wall time excludes interpreter start-up; it includes everything ``fn`` does (imports inside
    it too). Peak RSS is the process high-water mark (interpreter and libraries included).
    ``trace=True`` also reports tracemalloc's peak (it slows numpy-heavy code several-fold, so
    wall times of traced runs are not comparable).
    """
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(fn, queue, trace))
    proc.start()
    result = queue.get()
    proc.join()
    return result


def print_table(rows: list[dict], columns: list[tuple[str, str, str]]) -> None:
    """Print rows as a fixed-width table; columns are (key, header, format)."""
    def cell(row, key, fmt):
        v = row.get(key, "")
        return format(v, fmt) if v != "" else ""

    widths = [max([len(h), 8] + [len(cell(r, k, f)) for r in rows]) for k, h, f in columns]
    print("  ".join(h.rjust(w) for (_, h, _), w in zip(columns, widths)))
    for row in rows:
        print("  ".join(cell(row, k, f).rjust(w) for (k, _, f), w in zip(columns, widths)))
