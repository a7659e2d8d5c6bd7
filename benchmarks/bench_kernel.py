"""The flow model's compiled kernels (issue: compiled-engine) against the numpy flow table.

K1  64 MiB all-to-all, 512 GPUs of h100-superpod-1024, static ECMP, flow model, event-driven:
    ``--engine reference`` (numpy table) vs the compiled table, each event a return to Python
    (``compiled-events``), vs the whole run in one kernel (``compiled``,
    :mod:`netsim.network.runkernel`); every rank's finish compared.
K2  the same on all 1,024 GPUs (the issue's case): compiled-events and compiled; ``--full`` adds the
    numpy reference (minutes).
K3  start-up: cold compilation of the kernels (empty NUMBA_CACHE_DIR) and loading them from
    the cache, on a 16-transfer instance (the event kernel the flow model calls, and the table's
    separate calls); then the same with a 16-GPU all-to-all run whole (the whole-run kernel too).
K4  (``--full``) 4,096 GPUs of h100-fat-tree-16k with ECMP, compiled.

Every row is a fresh process: wall s, CPU s (that process), peak RSS.  The compiled rows run on
a warm cache (K3 first warms it).  Run: python benchmarks/bench_kernel.py [--full]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import print_table, run_case  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _alltoall(topology: str, n: int, kernel: str) -> dict:
    import importlib

    import numpy as np
    import simpy

    from netsim.collectives.executor import run_collective
    from netsim.network.flow import FlowNetwork
    from netsim.results import nccl_table as nt
    from netsim.topology.policy import with_routing
    from netsim.topology.spec import load_topology

    from netsim.collectives import executor

    bench = importlib.import_module("netsim.perftests.collective")
    if kernel == "compiled-events":  # the event path on compiled kernels: no whole-run kernel
        executor.PROGRAM_MIN_TRANSFERS, kernel = 1 << 62, "compiled"
    label = kernel if executor.PROGRAM_MIN_TRANSFERS < 1 << 62 else "compiled-events"
    topo = with_routing(load_topology(str(ROOT / "topologies" / topology)), "ecmp")
    cfg = bench.BenchConfig(op="alltoall", model="flow", gpus=n)
    size, _, _ = nt.size_and_count("alltoall", 64 << 20, n, "float")
    sched = bench.build_plan(topo, cfg, float(size)).schedule
    net = FlowNetwork(simpy.Environment(), topo, kernel=kernel)
    t0 = time.process_time()
    res = run_collective(net, sched, bench.placed_ranks(topo, cfg), engine="event")
    out = Path(tempfile.gettempdir()) / f"netsim-kernel-{topology}-{n}-{label}.npy"
    np.save(out, res.finish)
    return {"case": f"alltoall 64 MiB {n} GPUs ECMP", "kernel": label, "time_us": res.time * 1e6,
            "events": net.stats["events"], "cpu_s": time.process_time() - t0, "finish": str(out)}


#: K3's whole-run kernel case: a 16-GPU all-to-all run as one program (compiles runkernel's kernels)
_PROGRAM = ("from netsim.collectives import executor; executor.PROGRAM_MIN_TRANSFERS = 0;"
            "from netsim.collectives.executor import run_collective; from netsim.network.flow import FlowNetwork;"
            "from netsim.perftests import BenchConfig, build_plan, placed_ranks, validated;"
            "from netsim.topology.spec import load_topology;"
            "topo = load_topology('topologies/h100-superpod-1su.yaml');"
            "cfg = validated(BenchConfig('alltoall', gpus=16), topo); p = build_plan(topo, cfg, 1e6);"
            "assert run_collective(FlowNetwork(simpy.Environment(), topo), p.schedule, placed_ranks(topo, cfg),"
            " engine='event').finish.size == 16;")


def _startup(cache: str | None, program: bool = False) -> dict:
    code = ("import time, numpy as np, simpy; t = time.process_time();"
            "from netsim.network.compiled import CompiledFlowTable;"
            "c = CompiledFlowTable(np.ones(4)); ip = np.arange(17); lk = np.arange(16) % 4;"
            "c.add(ip, lk, np.ones(16), np.zeros(16), np.full(16, np.inf), 0, np.arange(16));"
            "_, dt = c.event(0.0); c.drain(dt); c.event(0.0); c.resolve(); c.take_drained(0.0);"
            + (_PROGRAM if program else "") +
            "print(time.process_time() - t)")
    env = dict(os.environ) if cache is None else {**os.environ, "NUMBA_CACHE_DIR": cache}
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True,
                         cwd=ROOT)
    return {"wall_s": time.perf_counter() - t0, "cpu_s": float(out.stdout.strip())}


def _diff(rows: list[dict]) -> None:
    import numpy as np

    by = {(r["case"], r["kernel"]): r for r in rows}
    for (case, kernel), r in by.items():
        ref = by.get((case, "numpy"))
        if kernel != "numpy" and ref is not None:
            a, b = np.load(ref["finish"]), np.load(r["finish"])
            r["max_rel_diff"] = float(np.abs(a - b).max() / a.max())
            r["speedup_cpu"] = ref["cpu_s"] / r["cpu_s"]


def main() -> None:
    full = "--full" in sys.argv
    with tempfile.TemporaryDirectory() as cold:
        start = [{"case": "K3 cold compile", **_startup(cold)}, {"case": "K3 cached load", **_startup(cold)}]
    with tempfile.TemporaryDirectory() as cold:
        start += [{"case": "K3 cold compile, with the whole-run kernel", **_startup(cold, True)},
                  {"case": "K3 cached load, with the whole-run kernel", **_startup(cold, True)}]
    print_table(start, [("case", "case", ""), ("wall_s", "wall s", ".2f"), ("cpu_s", "CPU s", ".2f")])
    _startup(None, True)  # the cache the runs below use, warm
    cases = [("h100-superpod-1024.yaml", 512, "numpy"), ("h100-superpod-1024.yaml", 512, "compiled-events"),
             ("h100-superpod-1024.yaml", 512, "compiled"), ("h100-superpod-1024.yaml", 1024, "compiled-events"),
             ("h100-superpod-1024.yaml", 1024, "compiled")]
    if full:
        cases += [("h100-superpod-1024.yaml", 1024, "numpy"), ("h100-fat-tree-16k.yaml", 4096, "compiled")]
    rows = []
    for topology, n, kernel in cases:
        row = run_case(partial(_alltoall, topology, n, kernel))
        rows.append(row)
        print(f"  {row['case']} {kernel}: {row['cpu_s']:.1f} CPU s", flush=True)
    _diff(rows)
    print_table(rows, [("case", "case", ""), ("kernel", "kernel", ""), ("time_us", "time us", ",.2f"),
                       ("events", "events", ","), ("wall_s", "wall s", ".1f"), ("cpu_s", "CPU s", ".1f"),
                       ("peak_rss_MB", "peak MB", ",.0f"), ("speedup_cpu", "x CPU", ".2f"),
                       ("max_rel_diff", "max rel diff", ".1e")])


if __name__ == "__main__":
    main()
