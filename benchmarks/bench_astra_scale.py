"""Benchmark ``netsim astra`` on workloads where ranks differ, with both ASTRA-sim network models.

Workload (issue 19): per rank a COMP node of rank-dependent length (``(r * 37) % 101``
µs), then a 1 MiB ALL_REDUCE; 1-D ``Switch`` (50 GiB/s, 500 ns); system as in
``bench_astra.py`` (ring, 4 chunks, 1 active chunk, endpoint-delay 10 ns,
local-mem-bw 1600).  Ranks enter the all-reduce at different times, so the symmetric
engine does not apply; ``auto`` picks the batched engine.  ``symmetric`` rows drop the
compute node (every rank alike), which the congestion-aware model can only run
batched.  Each case runs in a fresh process: wall and CPU seconds from the call to
``run_astra`` (reading traces included), peak RSS of the process, CPU and wall µs per
simulated message.

Usage::

    python benchmarks/bench_astra_scale.py [--npus 64 256 1024] [--symmetric 4096] [--check 64 256]

``--check N ...`` also runs the event engine (``--engine full``, the reference) at those
sizes and asserts the batched results equal it to the ns (1,024 NPUs take it 1-3 min).

Measured on the shared 2-core machine (load about 2), wall and CPU seconds of the ``run_astra`` call, reading
one trace per rank included (ranks whose traces differ only in compute durations and group names are parsed
once: ``netsim.astra.traces``); ``== full``: finish, exposed and every printed line equal the event engine's.
``python benchmarks/bench_astra_scale.py --npus 64 256 1024 --symmetric 4096 --check 64 256``:

=====  ================  ============  =========  ===========  ======  =====  =======  ==========  ===========  =======
NPUs   model             workload      engine        messages  wall s  CPU s  peak MB  CPU µs/msg  wall µs/msg  == full
=====  ================  ============  =========  ===========  ======  =====  =======  ==========  ===========  =======
64     analytical        uneven        batched         32,256    0.02   0.01       44       0.31         0.56   yes
64     congestion-aware  uneven        batched         32,256    0.02   0.01       44       0.40         0.77   yes
256    analytical        uneven        batched        522,240    0.05   0.03       45       0.051        0.089  yes
256    congestion-aware  uneven        batched        522,240    0.03   0.03       45       0.058        0.058  yes
1024   analytical        uneven        batched      8,380,416    0.09   0.09       50       0.011        0.011
1024   congestion-aware  uneven        batched      8,380,416    0.12   0.12       50       0.014        0.014
64     analytical        groups        batched          3,552    0.01   0.01       45       3.7          3.7    yes
64     congestion-aware  groups        batched          3,552    0.01   0.01       45       3.9          3.9    yes
256    analytical        groups        batched         62,688    0.03   0.03       45       0.51         0.52   yes
256    congestion-aware  groups        batched         62,688    0.03   0.03       46       0.54         0.55   yes
1024   analytical        groups        batched      1,036,512    0.12   0.12       51       0.119        0.119
1024   congestion-aware  groups        batched      1,036,512    0.13   0.13       51       0.128        0.128
64     analytical        groups+world  batched         35,808    0.02   0.02       49       0.42         0.43   yes
64     congestion-aware  groups+world  batched         35,808    0.04   0.04       49       1.16         1.16   yes
256    analytical        groups+world  batched        584,928    0.04   0.04       49       0.071        0.071  yes
256    congestion-aware  groups+world  batched        584,928    0.23   0.18       51       0.30         0.39   yes
1024   analytical        groups+world  batched      9,416,928    0.17   0.17       52       0.018        0.018
1024   congestion-aware  groups+world  batched      9,416,928    1.19   1.19      132       0.127        0.127  yes*
4096   analytical        symmetric     symmetric       32,760    0.25   0.25       53       (one rank simulated)
4096   congestion-aware  symmetric     batched    134,184,960    0.67   0.67       65       0.005        0.005
=====  ================  ============  =========  ===========  ======  =====  =======  ==========  ===========  =======

The event engine on the same cases (``full`` rows of that run): 64 NPUs 6.4-17 CPU µs/msg, 256 NPUs 5.8-12 CPU
µs/msg (``groups+world`` congestion-aware: 5.93 CPU s).  ``yes*``: checked in a separate run
(``--npus 1024 --shapes groups+world --models congestion-aware --check 1024``): the event engine took 125 s wall /
124 CPU s / 91 MB and gave the same finish times, exposed times and lines.  ``groups``: group sizes 2, 4, ..., n/8
repeated (64 NPUs: 2, 4, 8; 1,024: 2 ... 128), every group running side by side.  ``groups+world``
congestion-aware: every group's first rank has its group's last rank and the previous rank as ring predecessors, so
its Switch down-link merges two rings in time; the batched engine computes those runs time-ordered
(``netsim.astra.batched_timed``; it used to hand them to the event engine: 46 µs/msg at 1,024 NPUs).  At 4,096
NPUs (``--npus 4096 --shapes groups+world --models congestion-aware``) that is 150.9M messages in 18 CPU s
(0.12 µs/msg), 1.27 GB peak (9 bytes per message).  Messages:
chunks x 2(p-1) (all-reduce) or (p-1) (all-gather) x p per group.
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


def group_sizes(n: int) -> list[int]:
    """Comm groups of different sizes filling ``n`` ranks: 2, 4, 8, ... up to n/8, repeated (the rest in one)."""
    cycle = [2 ** k for k in range(1, max(2, n.bit_length() - 3))]
    sizes, left, k = [], n, 0
    while left > 0:
        size = min(cycle[k % len(cycle)], left)
        if left - size == 1:
            size += 1
        sizes.append(size)
        left -= size
        k += 1
    return sizes


def make_inputs(root: Path, n: int, shape: str) -> dict:
    """Workload, network, system (and comm-group) files for ``n`` NPUs; return their paths.

    ``uneven``: compute of rank-dependent length, then a 1 MiB world all-reduce;
    ``symmetric``: the all-reduce alone; ``groups``: compute, a 1 MiB all-reduce on the rank's
    comm group (:func:`group_sizes`: groups of different sizes side by side), compute, a
    256 KiB all-gather on it; ``groups+world``: then compute and a 1 MiB world all-reduce."""
    from netsim.chakra import EtNode, write_workload
    from netsim.chakra.schema import NodeType

    comp, coll = int(NodeType.COMP_NODE), int(NodeType.COMM_COLL_NODE)
    d = root / f"n{n}{shape}"
    d.mkdir(parents=True, exist_ok=True)
    groups, of = {}, {}
    if shape.startswith("groups"):
        r0 = 0
        for k, size in enumerate(group_sizes(n)):
            groups[str(k + 1)] = list(range(r0, r0 + size))
            of.update({r: str(k + 1) for r in range(r0, r0 + size)})
            r0 += size
    per = []
    for r in range(n):
        if shape == "symmetric":
            per.append([EtNode(1, "All-Reduce", coll, comm_type=0, comm_size=1 << 20, is_cpu_op=False)])
            continue
        nodes = [EtNode(0, "compute", comp, duration_micros=(r * 37) % 101)]
        if shape == "uneven":
            steps = [(0, 1 << 20, None)]
        else:
            steps = [(0, 1 << 20, of[r]), (2, 1 << 18, of[r])] + ([(0, 1 << 20, None)] if shape == "groups+world" else [])
        for k, (ctype, size, pg) in enumerate(steps):
            last = nodes[-1].id
            nodes.append(EtNode(last + 1, f"coll{k}", coll, data_deps=(last,), comm_type=ctype, comm_size=size,
                                is_cpu_op=False, pg_name=pg))
            if shape != "uneven":
                nodes.append(EtNode(last + 2, f"compute{k}", comp, data_deps=(last + 1,),
                                    duration_micros=(r * 53 + k) % 29))
        per.append(nodes)
    write_workload(d / "wl", per)
    (d / "network.yml").write_text(f"topology: [ Switch ]\nnpus_count: [ {n} ]\nbandwidth: [ 50.0 ]\n"
                                   "latency: [ 500.0 ]\n")
    (d / "system.json").write_text(json.dumps(SYSTEM, indent=2))
    (d / "memory.json").write_text(json.dumps({"memory-type": "NO_MEMORY_EXPANSION"}))
    out = {"workload": str(d / "wl"), "system": str(d / "system.json"), "network": str(d / "network.yml"),
           "memory": str(d / "memory.json"), "groups": None}
    if groups:
        (d / "groups.json").write_text(json.dumps(groups))
        out["groups"] = str(d / "groups.json")
    return out


class Case:
    """A picklable case: ``run_astra`` with one model and engine; returns numbers and the per-rank finish."""

    def __init__(self, paths: dict, model: str, engine: str):
        self.paths, self.model, self.engine = paths, model, engine

    def __call__(self) -> dict:
        p = self.paths
        from netsim.astra import run_astra  # imports outside the timed call

        c0, w0 = time.process_time(), time.perf_counter()
        res = run_astra(p["workload"], p["system"], p["network"], p["memory"], p["groups"], model=self.model,
                        engine=self.engine)
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        return {"cpu_s": cpu, "run_s": wall, "engine": res.engine, "messages": res.stats["messages"],
                "finish": res.finish.tolist(), "exposed": res.exposed.tolist(), "finish_max": int(res.finish.max()),
                "lines": sorted(res.lines())}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--npus", type=int, nargs="*", default=[64, 256, 1024])
    ap.add_argument("--shapes", nargs="+", default=["uneven", "groups", "groups+world"],
                    choices=["uneven", "groups", "groups+world"], help="workloads run at --npus sizes")
    ap.add_argument("--symmetric", type=int, nargs="*", default=[4096], help="every rank alike, these sizes")
    ap.add_argument("--check", type=int, nargs="*", default=[], help="also run the event engine and compare")
    ap.add_argument("--models", nargs="+", default=["analytical", "congestion-aware"])
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        plan = [(n, shape) for shape in args.shapes for n in args.npus] + [(n, "symmetric") for n in args.symmetric]
        for n, shape in plan:
            paths = make_inputs(Path(tmp), n, shape)
            for model in args.models:
                engines = ["auto"] + (["full"] if n in args.check and shape != "symmetric" else [])
                got = {}
                for engine in engines:
                    row = run_case(Case(paths, model, engine))
                    got[engine] = row
                    rows.append({**row, "npus": n, "model": model, "workload": shape,
                                 "us_per_msg": row["run_s"] / row["messages"] * 1e6,
                                 "cpu_us_per_msg": row["cpu_s"] / row["messages"] * 1e6})
                if "full" in got:
                    same = all(got["full"][k] == got["auto"][k] for k in ("finish", "exposed", "lines"))
                    assert same, f"{n} NPUs {model} {shape}: {got['auto']['engine']} != event engine"
                    rows[-1]["same"] = "yes"
    print_table(rows, [("npus", "NPUs", "d"), ("model", "model", "s"), ("workload", "workload", "s"),
                       ("engine", "engine", "s"), ("messages", "messages", ",d"), ("finish_max", "last finish ns", ",d"),
                       ("run_s", "wall s", ".2f"), ("cpu_s", "CPU s", ".2f"), ("peak_rss_MB", "peak MB", ".0f"),
                       ("cpu_us_per_msg", "CPU us/msg", ".3f"), ("us_per_msg", "wall us/msg", ".3f"),
                       ("same", "== full", "s")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
