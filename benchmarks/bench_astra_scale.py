"""Benchmark ``netsim astra`` on workloads where ranks differ, with both ASTRA-sim network models.

Workload (issue 19): per rank a COMP node of rank-dependent length (``(r * 37) % 101``
µs), then a 1 MiB ALL_REDUCE; 1-D ``Switch`` (50 GiB/s, 500 ns); system as in
``bench_astra.py`` (ring, 4 chunks, 1 active chunk, endpoint-delay 10 ns,
local-mem-bw 1600).  Ranks enter the all-reduce at different times, so the symmetric
engine does not apply; ``auto`` picks the batched engine.  ``symmetric`` rows drop the
compute node (every rank alike), which the congestion-aware model can only run
batched.  Each case runs in a fresh process: wall and CPU seconds from the call to
``run_astra`` (reading traces included), peak RSS of the process, µs of wall time per
simulated message.

Usage::

    python benchmarks/bench_astra_scale.py [--npus 64 256 1024] [--symmetric 4096] [--check 64 256]

``--check N ...`` also runs the event engine (``--engine full``, the reference) at those
sizes and asserts the batched results equal it to the ns (1,024 NPUs take it 1-3 min).

Measured on the shared 2-core machine (other jobs running, so wall > CPU), wall incl. the
child's imports; the event engine (``full``) is today's reference:

=====  ================  =========  =========  ===========  ======  =====  ====  =========
NPUs   model             workload   engine     messages     wall s  CPU s  MB    µs/msg
=====  ================  =========  =========  ===========  ======  =====  ====  =========
64     analytical        uneven     batched         32,256    0.86   0.04    44  (imports)
64     analytical        uneven     full            32,256    1.27   0.25    44  39
64     congestion-aware  uneven     batched         32,256    0.43   0.04    44  13
64     congestion-aware  uneven     full            32,256    1.20   0.38    45  37
256    analytical        uneven     batched        522,240    0.89   0.08    45  1.7
256    analytical        uneven     full           522,240   10.70   3.54    48  20
256    congestion-aware  uneven     batched        522,240    1.09   0.09    44  2.1
256    congestion-aware  uneven     full           522,240   17.62   6.24    48  34
1024   analytical        uneven     batched      8,380,416    1.02   0.15    48  0.12
1024   congestion-aware  uneven     batched      8,380,416    0.83   0.18    48  0.10
4096   analytical        symmetric  symmetric       32,760    1.05   0.26    47  (one rank)
4096   congestion-aware  symmetric  batched    134,184,960    1.93   0.71    61  0.014
=====  ================  =========  =========  ===========  ======  =====  ====  =========

Batched equals full to the ns at 64 and 256 (``== full``); messages = chunks x 2(p-1) x p.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _harness import print_table, run_case  # noqa: E402

SYSTEM = {"scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
          "preferred-dataset-splits": 4, "all-reduce-implementation": ["ring"], "all-gather-implementation": ["ring"],
          "reduce-scatter-implementation": ["ring"], "all-to-all-implementation": ["ring"],
          "collective-optimization": "localBWAware", "local-mem-bw": 1600}


def make_inputs(root: Path, n: int, uneven: bool) -> dict:
    """Workload, network and system files for ``n`` NPUs; return their paths."""
    from netsim.chakra import EtNode, write_workload
    from netsim.chakra.schema import NodeType

    d = root / f"n{n}{'u' if uneven else 's'}"
    d.mkdir(parents=True, exist_ok=True)
    per = []
    for r in range(n):
        ar = EtNode(1, "All-Reduce", int(NodeType.COMM_COLL_NODE), comm_type=0, comm_size=1 << 20, is_cpu_op=False,
                    data_deps=(0,) if uneven else ())
        per.append([EtNode(0, "compute", int(NodeType.COMP_NODE), duration_micros=(r * 37) % 101), ar]
                   if uneven else [ar])
    write_workload(d / "wl", per)
    (d / "network.yml").write_text(f"topology: [ Switch ]\nnpus_count: [ {n} ]\nbandwidth: [ 50.0 ]\n"
                                   "latency: [ 500.0 ]\n")
    (d / "system.json").write_text(json.dumps(SYSTEM, indent=2))
    (d / "memory.json").write_text(json.dumps({"memory-type": "NO_MEMORY_EXPANSION"}))
    return {"workload": str(d / "wl"), "system": str(d / "system.json"), "network": str(d / "network.yml"),
            "memory": str(d / "memory.json")}


class Case:
    """A picklable case: ``run_astra`` with one model and engine; returns numbers and the per-rank finish."""

    def __init__(self, paths: dict, model: str, engine: str):
        self.paths, self.model, self.engine = paths, model, engine

    def __call__(self) -> dict:
        p = self.paths
        from netsim.astra import run_astra  # imports outside the timed call

        c0, w0 = time.process_time(), time.perf_counter()
        res = run_astra(p["workload"], p["system"], p["network"], p["memory"], model=self.model, engine=self.engine)
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        return {"cpu_s": cpu, "run_s": wall, "engine": res.engine, "messages": res.stats["messages"],
                "finish": res.finish.tolist(), "exposed": res.exposed.tolist(), "finish_max": int(res.finish.max())}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--npus", type=int, nargs="*", default=[64, 256, 1024])
    ap.add_argument("--symmetric", type=int, nargs="*", default=[4096], help="every rank alike, these sizes")
    ap.add_argument("--check", type=int, nargs="*", default=[], help="also run the event engine and compare")
    ap.add_argument("--models", nargs="+", default=["analytical", "congestion-aware"])
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        plan = [(n, True) for n in args.npus] + [(n, False) for n in args.symmetric]
        for n, uneven in plan:
            paths = make_inputs(Path(tmp), n, uneven)
            for model in args.models:
                engines = ["auto"] + (["full"] if n in args.check and uneven else [])
                got = {}
                for engine in engines:
                    row = run_case(Case(paths, model, engine))
                    got[engine] = row
                    rows.append({**row, "npus": n, "model": model, "workload": "uneven" if uneven else "symmetric",
                                 "us_per_msg": row["run_s"] / row["messages"] * 1e6})
                if "full" in got:
                    same = got["full"]["finish"] == got["auto"]["finish"] and \
                        got["full"]["exposed"] == got["auto"]["exposed"]
                    assert same, f"{n} NPUs {model}: batched != event engine"
                    rows[-1]["same"] = "yes"
    print_table(rows, [("npus", "NPUs", "d"), ("model", "model", "s"), ("workload", "workload", "s"),
                       ("engine", "engine", "s"), ("messages", "messages", ",d"), ("finish_max", "last finish ns", ",d"),
                       ("run_s", "wall s", ".2f"), ("cpu_s", "CPU s", ".2f"), ("peak_rss_MB", "peak MB", ".0f"),
                       ("us_per_msg", "us/message", ".3f"), ("same", "== full", "s")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
