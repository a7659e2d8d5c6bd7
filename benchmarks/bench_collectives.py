"""Collective library at scale (issue: collectives).

C1  `netsim bench` curves, 8 B .. 8 GiB (x2): all_reduce and alltoall on dgx-h100    (target: seconds)
C2  EP64 all-to-all over 8 DGX H100 nodes (64 GPUs of h100-superpod-1su), 256 MiB per
    rank, flow model: direct, hierarchical, node-limited (uniform)                    (target <= 2 s)
C3  auto-selected all-reduce over all 16,384 GPUs of h100-fat-tree-16k, 1 MiB and 1 GiB, flow
C4  auto all-reduce 1 GiB at 16 .. 8192 GPUs of h100-fat-tree-16k, flow

Run: python benchmarks/bench_collectives.py [--quick]
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import print_table, run_case  # noqa: E402

ROOT = Path(__file__).resolve().parents[1] / "topologies"


def _curve(topo: str, op: str) -> dict:
    from netsim.perftests import bench, sweep_sizes
    rows = bench(str(ROOT / topo), op, sweep_sizes(8, 8 << 30, 2))
    last = rows[-1]
    return {"case": f"C1 {op} curve 8B-8GiB", "gpus": 8, "algorithm": ",".join(sorted({r.algorithm for r in rows})),
            "sim_time_ms": last.time_us / 1e3, "busbw_GBps": last.busbw_GBps}


def _one(topo: str, op: str, size: int, gpus: int, algo: str = "auto", label: str = "") -> dict:
    from netsim.perftests import BenchConfig, run_one
    from netsim.topology.spec import load_topology
    t = load_topology(str(ROOT / topo))
    row, stats = run_one(t, BenchConfig(op, algo=algo, gpus=gpus), size)
    return {"case": label, "gpus": gpus, "algorithm": row.algorithm, "sim_time_ms": row.time_us / 1e3,
            "busbw_GBps": row.busbw_GBps, "events": stats.get("events", 0) + stats.get("deliveries", 0)}


def main(quick: bool = False) -> None:
    cases = [partial(_curve, "dgx-h100.yaml", "all_reduce"), partial(_curve, "dgx-h100.yaml", "alltoall")]
    for algo in ("direct", "hierarchical", "node_limited"):
        cases.append(partial(_one, "h100-superpod-1su.yaml", "alltoall", 256 << 20, 64, algo,
                             f"C2 EP64 alltoall 256MiB {algo}"))
    for size, name in ((1 << 20, "1MiB"), (1 << 30, "1GiB")):
        cases.append(partial(_one, "h100-fat-tree-16k.yaml", "all_reduce", size, 16384,
                             label=f"C3 16k all_reduce {name}"))
    if not quick:
        for n in (16, 128, 1024, 8192):
            cases.append(partial(_one, "h100-fat-tree-16k.yaml", "all_reduce", 1 << 30, n,
                                 label=f"C4 all_reduce 1GiB x{n}"))
    rows = [run_case(c) for c in cases]
    print_table(rows, [("case", "case", "s"), ("gpus", "GPUs", "d"), ("algorithm", "algorithm", "s"),
                       ("sim_time_ms", "sim ms", ".3f"), ("busbw_GBps", "busbw GB/s", ".1f"),
                       ("wall_s", "wall s", ".2f"), ("peak_rss_MB", "peak RSS MB", ".0f")])


if __name__ == "__main__":
    main("--quick" in sys.argv)
