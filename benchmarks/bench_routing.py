"""Fabric routing (issue: fabric-routing): InfiniBand by its subnet manager, RoCE by hashing.

R1  64 MiB all-to-all over all 1,024 GPUs of h100-superpod-1024 (InfiniBand), flow model: ``ftree``
    (the default) against ``spray`` (balanced); ``--ecmp`` adds static ECMP (minutes).
R2  RoCE queue pairs per connection (``scale_out.qps_per_connection``, NCCL_IB_QPS_PER_CONNECTION):
    64 GPUs placed at random on a 2-tier RoCE tree of 16 x 8-GPU nodes with 4:1 leaves, ECMP,
    flow model: all-to-all 16 MiB and ring all-reduce 64 MiB, 1 / 2 / 4 / 8 queue pairs, three
    placements.  More queue pairs give the hash more flows to spread.
R3  the same job on a rail-optimized vs a top-of-rack 3-tier fabric of the same switches
    (topologies/studies/fat_tree_3tier.yaml), ftree and PXN: 1,024-GPU all-to-all 64 MiB.
R4  1 GiB NCCL ring all-reduce (``--algo ring``) over all 16,384 GPUs of h100-fat-tree-16k, default
    routing (ftree), flow model, default engine (ranks drift out of step: mode ``staggered``); and on
    a 2,048-GPU cut, the default engine against ``--engine event`` (same finish times).

Every row is a fresh process: wall s, CPU s, peak RSS.  Run: python benchmarks/bench_routing.py [--quick] [--ecmp]
"""

from __future__ import annotations

import sys
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import print_table, run_case  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _bench(topo, op, size, gpus, placement="packed", routing=None):
    from netsim.perftests import bench
    t0 = time.process_time()
    row = bench(topo, op, [size], gpus=gpus, placement=placement, routing=routing)[0]
    return row.time_us, time.process_time() - t0


def _r1(routing):
    us, cpu = _bench(str(ROOT / "topologies" / "h100-superpod-1024.yaml"), "alltoall", 64 << 20, 1024,
                     routing=routing)
    return {"case": "R1 alltoall 64 MiB 1024 GPUs", "setting": routing, "time_us": us, "cpu_s": cpu}


def _roce_tree(qps: int):
    from netsim.topology.spec import build_topology, parse_spec
    spec = {"name": "roce-4to1", "node": {"kind": "nvswitch", "gpus": 8, "links_per_gpu": 4, "link_bw": "25GB/s"},
            "nodes": 16,
            "scale_out": {"kind": "fat_tree", "fabric": "roce", "qps_per_connection": qps, "nic_bw": "400Gbps",
                          "rail_optimized": False,
                          "tiers": [{"name": "leaf", "down": 16, "up": 4, "oversubscription": 4},
                                    {"name": "spine", "down": 16}]}}
    return build_topology(parse_spec(spec))


def _r2(op, size, qps, seed):
    us, cpu = _bench(_roce_tree(qps), op, size, 64, placement=f"random:{seed}")
    return {"case": f"R2 {op} {size >> 20} MiB random:{seed}", "setting": f"{qps} QP", "time_us": us, "cpu_s": cpu}


def _r3(rail):
    from netsim.topology.overrides import load_topology_set
    topo = load_topology_set(ROOT / "topologies" / "studies" / "fat_tree_3tier.yaml",
                             [f"scale_out.rail_optimized={rail}"])
    us, cpu = _bench(topo, "alltoall", 64 << 20, 1024)
    return {"case": "R3 alltoall 64 MiB 1024 GPUs", "setting": "rail-optimized" if rail == "true" else "top-of-rack",
            "time_us": us, "cpu_s": cpu}


def _r4(gpus: int, engine: str):
    from netsim.perftests import BenchConfig, run_one
    from netsim.topology.spec import load_topology
    topo = load_topology(ROOT / "topologies" / "h100-fat-tree-16k.yaml")
    t0 = time.process_time()
    row, stats = run_one(topo, BenchConfig("all_reduce", algo="ring", gpus=gpus, engine=engine), 1 << 30)
    return {"case": f"R4 ring all_reduce 1 GiB {gpus} GPUs", "setting": f"{engine} ({stats['mode']})",
            "time_us": row.time_us, "cpu_s": time.process_time() - t0}


def main(quick: bool = False, ecmp: bool = False) -> None:
    cases = [partial(_r1, r) for r in (["ftree", "spray"] + (["ecmp"] if ecmp else []))]
    for op, size in (("alltoall", 16 << 20), ("all_reduce", 64 << 20)):
        for seed in ((0,) if quick else (0, 1, 2)):
            cases += [partial(_r2, op, size, q, seed) for q in (1, 2, 4, 8)]
    cases += [partial(_r3, rail) for rail in ("true", "false")]
    cases += [partial(_r4, 2048, "auto"), partial(_r4, 2048, "event")] + ([] if quick else [partial(_r4, 16384, "auto")])
    rows = [run_case(c) for c in cases]
    print_table(rows, [("case", "case", "s"), ("setting", "setting", "s"), ("time_us", "time us", ".2f"),
                       ("cpu_s", "CPU s", ".2f"), ("wall_s", "wall s", ".2f"), ("peak_rss_MB", "peak RSS MB", ".0f")])


if __name__ == "__main__":
    main("--quick" in sys.argv, "--ecmp" in sys.argv)
