"""Benchmark ``netsim astra``: a 1 MiB ring all-reduce on 1,024 and 4,096 NPUs.

Inputs as ASTRA-sim would get them: one ``<prefix>.<rank>.et`` per NPU holding one
ALL_REDUCE of 1,048,576 B (node id = rank, like ASTRA-sim's microbenchmarks), a 1-D
``Switch`` network YAML (50 GB/s, 500 ns) and ``Ring_4chunks``-style system JSON (ring,
4 chunks, 1 active chunk, localBWAware), analytical model.  Each case runs in a fresh
process (wall time from the call to ``run_astra``, reading the traces included; peak
RSS of the whole process).

ASTRA-sim's columns come only from a run of the real binary on the same files
(``--astra-bin PATH`` or ``$ASTRA_SIM_BIN``, e.g. ``AstraSim_Analytical_Congestion_Unaware``):
its wall time, its peak RSS and its simulated time, which must equal netsim's.  Without a
binary the columns are empty and the script says so; it holds no ASTRA-sim figures of its own.

Usage::

    python benchmarks/bench_astra.py [--npus 1024 4096] [--full 64 256] [--astra-bin PATH]

``--full N ...`` also times netsim's every-rank engine (one Python event per message) at
those sizes, for scale.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _harness import print_table, run_case  # noqa: E402

SYSTEM = {"scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
          "preferred-dataset-splits": 4, "all-reduce-implementation": ["ring"], "all-gather-implementation": ["ring"],
          "reduce-scatter-implementation": ["ring"], "all-to-all-implementation": ["ring"],
          "collective-optimization": "localBWAware", "local-mem-bw": 1600, "boost-mode": 0}


def make_inputs(root: Path, n: int) -> dict:
    """Write the workload, network and system files for ``n`` NPUs; return their paths."""
    from netsim.chakra import EtNode, write_workload
    from netsim.chakra.schema import NodeType

    d = root / f"n{n}"
    d.mkdir(parents=True, exist_ok=True)
    write_workload(d / "all_reduce", [[EtNode(r, "All-Reduce", int(NodeType.COMM_COLL_NODE), comm_type=0,
                                              comm_size=1 << 20, is_cpu_op=False)] for r in range(n)])
    (d / "network.yml").write_text(f"topology: [ Switch ]\nnpus_count: [ {n} ]\nbandwidth: [ 50.0 ]\n"
                                   "latency: [ 500.0 ]\n")
    (d / "system.json").write_text(json.dumps(SYSTEM, indent=2))
    (d / "memory.json").write_text(json.dumps({"memory-type": "NO_MEMORY_EXPANSION"}))
    return {"workload": str(d / "all_reduce"), "system": str(d / "system.json"), "network": str(d / "network.yml"),
            "memory": str(d / "memory.json")}


def expected_ns(n: int) -> int:
    """Closed form (reference §4.10 on a Switch: 2 hops per message)."""
    d = (1 << 20) // 4 // n
    hop = int(2 * 500 + d / (50 * 2**30 / 1e9))
    red = 3 * int(d / 1600)
    return 4 * (10 + (n - 1) * (hop + 10 + red) + (n - 1) * (hop + 10))


class Case:
    """A picklable benchmark case (spawned processes need top-level callables)."""

    def __init__(self, paths: dict, engine: str):
        self.paths, self.engine = paths, engine

    def __call__(self) -> dict:
        from netsim.astra import run_astra

        p = self.paths
        res = run_astra(p["workload"], p["system"], p["network"], p["memory"], engine=self.engine)
        return {"finish_ns": int(res.finish.max()), "engine": res.engine, "events": res.stats["events"],
                "messages": res.stats["messages"], "ranks": res.npus}


class AstraCase:
    """The real ASTRA-sim binary on the same files, in a fresh process (its RSS is the child's)."""

    def __init__(self, paths: dict, binary: str):
        self.paths, self.binary = paths, binary

    def __call__(self) -> dict:
        from netsim.astra.compare import run_binary

        p = self.paths
        argv = [f"--workload-configuration={p['workload']}", f"--system-configuration={p['system']}",
                f"--network-configuration={p['network']}", f"--remote-memory-configuration={p['memory']}"]
        parsed, timing = run_binary(self.binary, argv)
        finish = max(int(v["finished"]) for v in parsed.values() if "finished" in v)
        return {"astra_s": timing["wall_s"], "astra_MB": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
                "astra_ns": finish}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--npus", type=int, nargs="+", default=[1024, 4096])
    ap.add_argument("--full", type=int, nargs="*", default=[], help="also time the every-rank engine at these sizes")
    ap.add_argument("--astra-bin", default=os.environ.get("ASTRA_SIM_BIN"),
                    help="the real ASTRA-sim analytical binary (default $ASTRA_SIM_BIN); without it no ASTRA-sim column")
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n, engine in [(n, "auto") for n in args.npus] + [(n, "full") for n in args.full]:
            paths = make_inputs(Path(tmp), n)
            row = run_case(Case(paths, engine))
            assert row["finish_ns"] == expected_ns(n), (row["finish_ns"], expected_ns(n))
            ref = {"astra_s": float("nan"), "astra_MB": float("nan")}
            if args.astra_bin and engine == "auto":
                ref = run_case(AstraCase(paths, args.astra_bin))
                assert ref["astra_ns"] == row["finish_ns"], (ref["astra_ns"], row["finish_ns"])
            rows.append({**row, "npus": n, "astra_s": ref["astra_s"], "astra_MB": ref["astra_MB"],
                         "speedup": ref["astra_s"] / row["wall_s"]})
    print_table(rows, [("npus", "NPUs", "d"), ("engine", "engine", "s"), ("finish_ns", "simulated ns", ",d"),
                       ("messages", "messages", ",d"), ("wall_s", "netsim s", ".2f"),
                       ("peak_rss_MB", "netsim MB", ".0f"), ("astra_s", "ASTRA-sim s", ".1f"),
                       ("astra_MB", "ASTRA-sim MB", ".0f"), ("speedup", "speed-up", ".0f")])
    if not args.astra_bin:
        print("ASTRA-sim: no binary given (--astra-bin PATH or $ASTRA_SIM_BIN), so no ASTRA-sim figures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
