"""Sweep executor scaling (issue: sweeps on Dask).

S1  200 small bench configurations (h100-superpod-1su, flow model: 4 ops x 5 GPU counts x 10 sizes)
    on a local Dask cluster of 1 and of 2 worker processes            (target: speed-up >= 1.8x)
S2  overhead per configuration: wall x workers / configs - mean simulation time (Dask round trip,
    Parquet writes, scheduling, tail idle), of which write_ms is the Parquet writing; workers_busy_%
    = time inside run_task / (workers x wall).  Also for the default process-pool executor.
    The speed-up needs 2 free CPUs: the load average is printed, since other processes on the
    machine take CPU from the workers (then busy_% stays high while the speed-up drops).

Workers are warmed up (imports, topology cache) by a throw-away sweep before timing; cluster start-up
is reported separately.  Each timing is the best of --repeat runs into fresh directories.

Run: python benchmarks/bench_sweep.py [--quick] [--configs N] [--repeat R]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import print_table  # noqa: E402

OPS = ["all_reduce", "all_gather", "reduce_scatter", "alltoall"]
GPUS = [8, 16, 32, 64, 96]
SIZES = [f"{1 << k}K" for k in range(10, 20)]  # 1M .. 512M


def sweep_doc(n: int) -> dict:
    """``n`` configurations (a prefix of the 4 x 5 x 10 grid, extended by seeds when n > 200)."""
    from itertools import product

    combos = list(product(OPS, GPUS, SIZES))
    seeds = -(-n // len(combos))
    combos = [(op, g, s, seed) for seed in range(seeds) for op, g, s in combos][:n]
    return {"kind": "bench", "base": {"topology": str(ROOT / "topologies" / "h100-superpod-1su.yaml"),
                                      "model": "flow"},
            "zip": {"op": [c[0] for c in combos], "gpus": [c[1] for c in combos],
                    "size": [c[2] for c in combos], "seed": [c[3] for c in combos]}}


def timed(sweep, executor) -> dict:
    from netsim.sweep import run_sweep

    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        rep = run_sweep(sweep, out, executor=executor, progress=False)
        wall = time.perf_counter() - t0
    assert rep.done == len(sweep) and not rep.failed, rep.line()
    sims = [s["wall_time_s"] for s in rep.summaries]
    return {"wall_s": wall, "sim_mean_ms": statistics.mean(sims) * 1e3, "sim_sum_s": sum(sims),
            "task_sum_s": sum(s.get("task_s", s["wall_time_s"]) for s in rep.summaries)}


def measure(label: str, make, workers: int, sweep, warm, repeat: int) -> dict:
    t0 = time.perf_counter()
    ex = make()
    start = time.perf_counter() - t0
    try:
        timed(warm, ex)
        best = min((timed(sweep, ex) for _ in range(repeat)), key=lambda r: r["wall_s"])
    finally:
        ex.close()
    n = len(sweep)
    overhead = (best["wall_s"] * workers - best["sim_sum_s"]) / n
    return {"executor": label, "workers": workers, "configs": n, "startup_s": start, **best,
            "per_cfg_ms": best["wall_s"] / n * 1e3, "overhead_ms": overhead * 1e3,
            "write_ms": (best["task_sum_s"] - best["sim_sum_s"]) / n * 1e3,
            "busy_pct": 100 * best["task_sum_s"] / (workers * best["wall_s"])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="60 configurations, one repeat")
    ap.add_argument("--no-pool", action="store_true", help="skip the process-pool rows")
    args = ap.parse_args()
    if args.quick:
        args.configs, args.repeat = 60, 1
    from netsim.sweep import make_executor, parse_sweep

    sweep = parse_sweep(sweep_doc(args.configs), "bench_sweep")
    warm = parse_sweep({**sweep_doc(8), "base": {**sweep_doc(8)["base"], "datatype": "half"}}, "warm-up")
    print(f"{len(sweep)} configurations; {os.cpu_count()} CPUs; load average "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    rows = []
    for w in (1, 2):
        rows.append(measure("dask LocalCluster", lambda w=w: make_executor(workers=w), w, sweep, warm, args.repeat))
    if not args.no_pool:
        for w in (1, 2):
            rows.append(measure("process pool", lambda w=w: make_executor(jobs=w), w, sweep, warm, args.repeat))
    for r in rows:
        same = next(x for x in rows if x["executor"] == r["executor"] and x["workers"] == 1)
        r["speedup"] = same["wall_s"] / r["wall_s"]
    print_table(rows, [("executor", "executor", ""), ("workers", "workers", "d"), ("configs", "configs", "d"),
                       ("startup_s", "start_s", ".2f"), ("wall_s", "wall_s", ".2f"), ("speedup", "speedup", ".2f"),
                       ("sim_mean_ms", "sim_ms/cfg", ".1f"), ("per_cfg_ms", "wall_ms/cfg", ".1f"),
                       ("overhead_ms", "overhead_ms/cfg", ".1f"), ("write_ms", "write_ms/cfg", ".1f"),
                       ("busy_pct", "workers_busy_%", ".0f")])
    dask2 = next(r for r in rows if r["executor"].startswith("dask") and r["workers"] == 2)
    print(f"target: Dask speed-up 1 -> 2 workers >= 1.8x: {dask2['speedup']:.2f}x "
          f"({'met' if dask2['speedup'] >= 1.8 else 'NOT met'})")


if __name__ == "__main__":
    main()
