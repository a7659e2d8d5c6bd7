"""Network engine at scale (issue: network-engine).

P1  1 GiB ring all-reduce on all 16,384 GPUs of h100-fat-tree-16k, flow model   (target <= 5 s, <= 2 GiB)
P2  1 MiB ring all-reduce on a 1,024-NPU ASTRA-sim 1-D Switch YAML (50 GB/s, 500 ns),
    analytical, ASTRA-sim semantics (rt_template system: 4 splits, endpoint-delay 10,
    local-mem-bw 50)                                                             (target <= 1 s)
P3  all-to-all, 256 MiB per rank, on 1,024 GPUs of h100-fat-tree-16k: analytical at 1,024;
    flow model at 256 and 64 (EP64).  The flow model's cost grows with the number of distinct
    completion instants (ECMP collisions and uneven PXN relays give each flow its own rate,
    and every completion re-solves max-min): 512+ GPUs run for minutes; see the closing note.
P4  ASTRA-sim 1-D Switch, 4,096 NPUs (ASTRA-sim C++: 339 s / 5.6 GB on this machine class)

Run: python benchmarks/bench_network.py [--quick]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import print_table, run_case  # noqa: E402

ROOT = Path(__file__).resolve().parents[1] / "topologies"


def _run(topo, model, schedule, label):
    import simpy
    from netsim.collectives.executor import run_collective
    from netsim.network.analytical import AnalyticalNetwork
    from netsim.network.flow import FlowNetwork
    net = {"flow": FlowNetwork, "analytical": AnalyticalNetwork}[model](simpy.Environment(), topo)
    t0 = time.perf_counter()
    res = run_collective(net, schedule)
    s = {**res.stats, **net.summary()}
    return {"case": label, "ranks": schedule.nranks, "model": model, "sim_time_ms": res.time * 1e3,
            "run_s": time.perf_counter() - t0, "events": s.get("events", 0) + s.get("deliveries", 0),
            "rate_solves": s.get("rate_solves", 0), "steps": schedule.n_steps,
            "steps_skipped": s.get("steps_skipped", 0), "mode": s.get("mode", "events")}


def p1() -> dict:
    from netsim.collectives.ring import ring_all_reduce
    from netsim.topology.spec import load_topology
    topo = load_topology(ROOT / "h100-fat-tree-16k.yaml")
    return _run(topo, "flow", ring_all_reduce(topo.n_gpus, 2**30), "P1 ring AR 1GiB 16k")


def _astra_switch(npus: int) -> dict:
    from netsim.astra.collectives import astra_ring_all_reduce
    from netsim.topology.spec import load_topology
    with tempfile.TemporaryDirectory() as d:
        yml = Path(d) / f"switch_{npus}.yml"
        yml.write_text(f"topology: [ Switch ]\nnpus_count: [ {npus} ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n")
        topo = load_topology(yml)
    sched = astra_ring_all_reduce(npus, 1 << 20, splits=4, endpoint_delay_ns=10, local_mem_bw_GBps=50)
    return _run(topo, "analytical", sched, f"ASTRA Switch ring AR 1MiB {npus}")


def p2() -> dict:
    return {**_astra_switch(1024), "case": "P2 ASTRA Switch 1MiB 1024"}


def p4() -> dict:
    return {**_astra_switch(4096), "case": "P4 ASTRA Switch 1MiB 4096"}


def _a2a(n: int, model: str) -> dict:
    from netsim.collectives.direct import direct_all_to_all
    from netsim.topology.spec import load_topology
    topo = load_topology(ROOT / "h100-fat-tree-16k.yaml")
    return _run(topo, model, direct_all_to_all(n, 256 * 2**20), f"P3 alltoall 256MiB {n}")


def p3a() -> dict:
    return _a2a(1024, "analytical")


def p3b() -> dict:
    return _a2a(256, "flow")


def p3c() -> dict:
    return _a2a(64, "flow")


if __name__ == "__main__":
    cases = [p1, p2, p4] if "--quick" in sys.argv else [p1, p2, p3a, p3b, p3c, p4]
    rows = [run_case(c) for c in cases]
    print_table(rows, [("case", "case", ""), ("ranks", "ranks", ","), ("model", "model", ""),
                       ("wall_s", "wall s", ".2f"), ("peak_rss_MB", "peak RSS MB", ".0f"),
                       ("events", "events", ","),
                       ("rate_solves", "solves", ","), ("steps", "steps", ","),
                       ("steps_skipped", "skipped", ","), ("mode", "mode", ""),
                       ("sim_time_ms", "sim ms", ".3f")])
