"""Benchmark ``netsim astra`` on configs that leave the batched ring engines (issue 38, item 1).

Two cases, inputs written as ASTRA-sim would get them (one ``.et`` per NPU, a network YAML, a
system JSON) into a temporary directory; each run is ``python -m netsim astra ...`` in a fresh
process (the command line as a user types it, start-up included), timed from outside: wall
time, CPU seconds (user + system of the child, from ``wait4``) and its peak RSS.

* ``general``: 64 NPUs on a 1-D Switch (50 GB/s, 500 ns); every rank runs compute of a
  rank-dependent length, a 1 MiB all-reduce (``doubleBinaryTree``), compute, a 1 MiB all-gather
  (``direct``), compute, a 1 MiB reduce-scatter (``halvingDoubling``); 64 dataset splits
  (``preferred-dataset-splits``), 4 active chunks per dimension, LIFO, localBWAware.
* ``sequence``: 32 NPUs on a 1-D Ring (50 GB/s, 500 ns), eight rounds of (uneven compute,
  256 KiB all-reduce with ``direct``, uneven compute, 64 KiB all-gather with ``halvingDoubling``),
  16 splits, 2 active chunks.

Both models (``analytical`` = ASTRA-sim's congestion-unaware backend, ``congestion-aware``).
``--check`` also runs ``--engine full`` (the event engine, which matched ASTRA-sim on 126 random
configs) and asserts that stdout (every finish line) is identical.  No ASTRA-sim figures are
held here: ``--astra-bin PATH`` (or ``$ASTRA_SIM_BIN`` / ``$ASTRA_SIM_AWARE_BIN``) adds the real
binary's columns when one is installed.

Usage::

    python benchmarks/bench_astra_general.py [--cases general sequence] [--models analytical congestion-aware]
                                             [--engines auto full] [--check]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _harness import print_table  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
BASE = {"scheduling-policy": "LIFO", "endpoint-delay": 10, "collective-optimization": "localBWAware",
        "local-mem-bw": 1600, "boost-mode": 0}
CASES = {
    "general": {"npus": 64, "topology": "Switch", "splits": 64, "active": 4, "rounds": 1,
                "steps": [("all_reduce", 1 << 20, "doubleBinaryTree"), ("all_gather", 1 << 20, "direct"),
                          ("reduce_scatter", 1 << 20, "halvingDoubling")]},
    "sequence": {"npus": 32, "topology": "Ring", "splits": 16, "active": 2, "rounds": 8,
                 "steps": [("all_reduce", 1 << 18, "direct"), ("all_gather", 1 << 16, "halvingDoubling")]},
}


def make_inputs(root: Path, name: str) -> dict:
    """Write the workload, network and system files of case ``name``; return the CLI arguments."""
    from netsim.chakra import EtNode, write_workload
    from netsim.chakra.schema import CommType, NodeType

    c = CASES[name]
    n = c["npus"]
    comp, coll = int(NodeType.COMP_NODE), int(NodeType.COMM_COLL_NODE)
    per = []
    for r in range(n):
        nodes = [EtNode(0, "compute0", comp, duration_micros=1 + (r * 37) % 23)]
        for k in range(c["rounds"]):
            for j, (op, size, _algo) in enumerate(c["steps"]):
                last = nodes[-1].id
                nodes.append(EtNode(last + 1, f"{op}{k}", coll, data_deps=(last,), comm_type=int(CommType[op.upper()]),
                                    comm_size=size, is_cpu_op=False))
                nodes.append(EtNode(last + 2, f"compute{k}.{j}", comp, data_deps=(last + 1,),
                                    duration_micros=1 + (r * 53 + 7 * k + j) % 17))
        per.append(nodes)
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    write_workload(d / "wl", per)
    (d / "network.yml").write_text(f"topology: [ {c['topology']} ]\nnpus_count: [ {n} ]\nbandwidth: [ 50.0 ]\n"
                                   "latency: [ 500.0 ]\n")
    system = dict(BASE, **{"preferred-dataset-splits": c["splits"], "active-chunks-per-dimension": c["active"]})
    for op in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all"):
        system[f"{op.replace('_', '-')}-implementation"] = ["ring"]
    for op, _size, algo in c["steps"]:
        system[f"{op.replace('_', '-')}-implementation"] = [algo]
    (d / "system.json").write_text(json.dumps(system, indent=2))
    (d / "memory.json").write_text(json.dumps({"memory-type": "NO_MEMORY_EXPANSION"}))
    return {"--workload-configuration": str(d / "wl"), "--system-configuration": str(d / "system.json"),
            "--network-configuration": str(d / "network.yml"),
            "--remote-memory-configuration": str(d / "memory.json")}


def run_netsim(args: dict, model: str, engine: str) -> dict:
    cmd = [sys.executable, "-m", "netsim", "astra", *[x for kv in args.items() for x in kv], "--model", model,
           "--engine", engine]
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return timed(cmd, env)


def timed(cmd: list[str], env: dict) -> dict:
    """Run ``cmd``; wall seconds, the child's own CPU seconds (user + system, from ``wait4``), its
    peak RSS (MB), stdout, stderr and exit status."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, text=True)
        _pid, status, ru = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        return {"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "peak_MB": ru.ru_maxrss / 1024,
                "stdout": out.read(), "stderr": err.read(), "status": proc.returncode}


def finish_lines(stdout: str) -> list[str]:
    return [ln for ln in stdout.splitlines() if "finished" in ln or "cycles" in ln]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    ap.add_argument("--models", nargs="+", default=["analytical", "congestion-aware"])
    ap.add_argument("--engines", nargs="+", default=["auto"], choices=["auto", "full", "batched"])
    ap.add_argument("--check", action="store_true", help="also run --engine full and compare stdout")
    ap.add_argument("--keep", help="write the inputs here instead of a temporary directory")
    args = ap.parse_args(argv)
    engines = list(dict.fromkeys(args.engines + (["full"] if args.check else [])))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.keep or tmp)
        for name in args.cases:
            cli = make_inputs(root, name)
            for model in args.models:
                got = {}
                for engine in engines:
                    r = run_netsim(cli, model, engine)
                    if r["status"] != 0:
                        print(r["stderr"], file=sys.stderr)
                        raise SystemExit(f"{name} {model} {engine}: exit status {r['status']}")
                    got[engine] = r
                    lines = finish_lines(r["stdout"])
                    rows.append({"case": name, "npus": CASES[name]["npus"], "model": model, "engine": engine,
                                 "wall_s": r["wall_s"], "cpu_s": r["cpu_s"], "peak_MB": r["peak_MB"],
                                 "lines": len(lines), "last": _last_cycles(lines)})
                if args.check and len(got) > 1:
                    ref = got["full"]["stdout"]
                    for engine, r in got.items():
                        assert r["stdout"] == ref, f"{name} {model}: --engine {engine} stdout differs from full"
                    for row in rows[-len(got):]:
                        row["same"] = "yes"
    print_table(rows, [("case", "case", "s"), ("npus", "NPUs", "d"), ("model", "model", "s"),
                       ("engine", "engine", "s"), ("lines", "lines", "d"), ("last", "last finish ns", ",d"),
                       ("wall_s", "wall s", ".2f"), ("cpu_s", "CPU s", ".2f"), ("peak_MB", "peak MB", ".0f"),
                       ("same", "== full", "s")])
    return 0


def _last_cycles(lines: list[str]) -> int:
    import re

    vals = [int(m.group(1).replace(",", "")) for ln in lines for m in [re.search(r"([0-9][0-9,]*) cycles", ln)] if m]
    return max(vals, default=0)


if __name__ == "__main__":
    raise SystemExit(main())
