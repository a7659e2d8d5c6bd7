"""Benchmark ``netsim astra`` on configs that leave the batched ring engines (issue 38, item 1).

Two cases, inputs written as ASTRA-sim would get them (one ``.et`` per NPU, a network YAML, a
system JSON) into a temporary directory; each run is ``python -m netsim astra ...`` in a fresh
process (the command line as a user types it, start-up included), timed from outside: wall
time, CPU seconds (user + system of the child, from ``wait4``) and its peak RSS (the child is
started by a small launcher, so its peak is its own: ``_harness.run_child``).

* ``general``: 64 NPUs on a 1-D Switch (50 GB/s, 500 ns); every rank runs compute of a
  rank-dependent length, a 1 MiB all-reduce (``doubleBinaryTree``), compute, a 1 MiB all-gather
  (``direct``), compute, a 1 MiB reduce-scatter (``halvingDoubling``); 64 dataset splits
  (``preferred-dataset-splits``), 4 active chunks per dimension, LIFO, localBWAware.
* ``sequence``: 32 NPUs on a 1-D Ring (50 GB/s, 500 ns), eight rounds of (uneven compute,
  256 KiB all-reduce with ``direct``, uneven compute, 64 KiB all-gather with ``halvingDoubling``),
  16 splits, 2 active chunks.

Both models (``analytical`` = ASTRA-sim's congestion-unaware backend, ``congestion-aware``).
``--check`` also runs ``--engine full`` (the event engine, which matched ASTRA-sim on 126 random
configs) and asserts that stdout is identical line for line, except that the blocks of ranks
finishing at the same nanosecond may come in another order (the batched engines print them in
rank order, the event engine in event order): column "== full" says ``yes`` (identical) or
``yes, ties in rank order``; ``--before DIR`` times another checkout of netsim on the same inputs,
run by run, and asserts the same (up to that order).  No ASTRA-sim
figures are held here: ``--astra-bin PATH`` / ``--astra-aware-bin PATH`` (or ``$ASTRA_SIM_BIN`` /
``$ASTRA_SIM_AWARE_BIN``) run the real binaries on the same files (their finish lines must be
netsim's) and add their columns.

Usage::

    python benchmarks/bench_astra_general.py [--cases general sequence] [--models analytical congestion-aware]
                                             [--engines auto full] [--check] [--before DIR] [--npus N]
                                             [--astra-bin PATH] [--astra-aware-bin PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _harness import print_table, run_child  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
BASE = {"scheduling-policy": "LIFO", "endpoint-delay": 10, "collective-optimization": "localBWAware",
        "local-mem-bw": 1600, "boost-mode": 0}
MODELS = ("analytical", "congestion-aware")
CASES = {
    "general": {"npus": 64, "topology": "Switch", "splits": 64, "active": 4, "rounds": 1,
                "steps": [("all_reduce", 1 << 20, "doubleBinaryTree"), ("all_gather", 1 << 20, "direct"),
                          ("reduce_scatter", 1 << 20, "halvingDoubling")]},
    "sequence": {"npus": 32, "topology": "Ring", "splits": 16, "active": 2, "rounds": 8,
                 "steps": [("all_reduce", 1 << 18, "direct"), ("all_gather", 1 << 16, "halvingDoubling")]},
}


def make_inputs(root: Path, name: str, npus: int | None = None) -> dict:
    """Write the workload, network and system files of case ``name`` (on ``npus`` NPUs if given);
    return the command-line arguments."""
    from netsim.chakra import EtNode, write_workload
    from netsim.chakra.schema import CommType, NodeType

    c = CASES[name]
    n = npus or c["npus"]
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


def run_netsim(args: dict, model: str, engine: str, repo: Path = REPO) -> dict:
    cmd = [sys.executable, "-m", "netsim", "astra", *[x for kv in args.items() for x in kv], "--model", model,
           "--engine", engine]
    env = dict(os.environ, PYTHONPATH=str(repo) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return timed(cmd, env)


def timed(cmd: list[str], env: dict) -> dict:
    """Run ``cmd`` (:func:`_harness.run_child`: wall seconds, the child's own CPU seconds, its peak RSS in
    MB, stdout, stderr, exit status), outside any checkout: ``python -m`` puts the working directory
    first on sys.path."""
    return run_child(cmd, env, tempfile.gettempdir())


def finish_lines(stdout: str) -> list[str]:
    """The result lines (``finished`` and ``cycles``), without the ``[time] [logger] [level] `` prefix that
    ASTRA-sim's spdlog puts before each line."""
    import re

    lines = (re.sub(r"^(\[[^\]]*\] )+", "", ln) for ln in stdout.splitlines())
    return [ln for ln in lines if "finished" in ln or "cycles" in ln]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    ap.add_argument("--npus", type=int, help="run the cases on this many NPUs instead of theirs (a power of two)")
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--engines", nargs="+", default=["auto"], choices=["auto", "full", "batched"])
    ap.add_argument("--check", action="store_true", help="also run --engine full and compare stdout")
    ap.add_argument("--keep", help="write the inputs here instead of a temporary directory")
    ap.add_argument("--before", metavar="DIR", help="also time the netsim package in DIR (another checkout, e.g. "
                    "`git archive REV | tar -x -C DIR`), interleaved run by run; its stdout must be the same")
    ap.add_argument("--astra-bin", default=os.environ.get("ASTRA_SIM_BIN"),
                    help="ASTRA-sim's congestion-unaware binary (default $ASTRA_SIM_BIN)")
    ap.add_argument("--astra-aware-bin", default=os.environ.get("ASTRA_SIM_AWARE_BIN"),
                    help="ASTRA-sim's congestion-aware binary (default $ASTRA_SIM_AWARE_BIN)")
    args = ap.parse_args(argv)
    engines = list(dict.fromkeys(args.engines + (["full"] if args.check else [])))
    bins = {"analytical": args.astra_bin, "congestion-aware": args.astra_aware_bin}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.keep or tmp)
        for name in args.cases:
            cli = make_inputs(root, name, args.npus)
            for model in args.models:
                got = [_one(cli, name, model, engine, args.before) for engine in engines]
                rows += got
                if bins[model]:
                    _astra(got, cli, bins[model])
                if args.check:
                    ref = next(r for r in got if r["engine"] == "full")["stdout"]
                    for r in got:
                        assert canonical(r["stdout"]) == canonical(ref), \
                            f"{name} {model}: --engine {r['engine']} stdout differs from full"
                        r["same"] = "yes" if r["stdout"] == ref else "yes, ties in rank order"
    cols = [("case", "case", "s"), ("npus", "NPUs", "d"), ("model", "model", "s"), ("engine", "engine", "s"),
            ("lines", "lines", "d"), ("last", "last finish ns", ",d"), ("wall_s", "wall s", ".2f"),
            ("cpu_s", "CPU s", ".2f"), ("peak_MB", "peak MB", ".0f"), ("same", "== full", "s")]
    if args.before:
        cols += [("b_wall", "before wall s", ".2f"), ("b_cpu", "before CPU s", ".2f"), ("b_MB", "before MB", ".0f")]
    if any(bins.values()):
        cols += [("a_wall", "ASTRA-sim wall s", ".2f"), ("a_cpu", "ASTRA-sim CPU s", ".2f"),
                 ("a_MB", "ASTRA-sim MB", ".0f")]
    else:
        print("no ASTRA-sim binary given (--astra-bin, --astra-aware-bin): no ASTRA-sim columns")
    print_table(rows, cols)
    return 0


def _one(cli: dict, name: str, model: str, engine: str, before: str | None) -> dict:
    """One netsim run (after the ``before`` checkout's, whose stdout must be the same) as a table row."""
    if before:
        b = run_netsim(cli, model, engine, Path(before))
        _ok(b, f"{name} {model} {engine} (--before)")
    r = run_netsim(cli, model, engine)
    _ok(r, f"{name} {model} {engine}")
    lines = finish_lines(r["stdout"])
    row = {"case": name, "npus": len(lines), "model": model, "engine": engine, "wall_s": r["wall_s"],
           "cpu_s": r["cpu_s"], "peak_MB": r["peak_MB"], "lines": len(lines), "last": _last_cycles(lines),
           "stdout": r["stdout"]}
    if before:
        assert canonical(b["stdout"]) == canonical(r["stdout"]), f"{name} {model} {engine}: stdout differs from --before"
        row.update(b_wall=b["wall_s"], b_cpu=b["cpu_s"], b_MB=b["peak_MB"])
    return row


def _astra(rows: list[dict], cli: dict, binary: str) -> None:
    """The binary on the same files (ASTRA-sim's ``--key=value`` spelling); its finish lines must be netsim's."""
    a = timed([binary, *[f"{k}={v}" for k, v in cli.items()]], dict(os.environ))
    _ok(a, binary)
    assert sorted(finish_lines(a["stdout"])) == sorted(finish_lines(rows[0]["stdout"])), \
        f"{binary}: finish lines differ from netsim's"
    for row in rows:
        row.update(a_wall=a["wall_s"], a_cpu=a["cpu_s"], a_MB=a["peak_MB"])


def canonical(stdout: str) -> list[str]:
    """stdout with the blocks of ranks that finish at the same nanosecond put in rank order (a block: a
    rank's ``sys[r] finished, T cycles`` line and its lines up to the next rank's or a line of no rank)."""
    import re

    out: list[str] = []
    blocks: list[tuple[int, int, list[str]]] = []  # (T, rank, lines) of the current same-T run

    def flush() -> None:
        out.extend(x for _t, _r, lines in sorted(blocks, key=lambda b: b[1]) for x in lines)
        blocks.clear()

    for line in stdout.splitlines():
        m = re.match(r"sys\[(\d+)\] finished, ([0-9,]+) cycles", line)
        if m:
            t = int(m.group(2).replace(",", ""))
            if blocks and blocks[-1][0] != t:
                flush()
            blocks.append((t, int(m.group(1)), [line]))
        elif blocks and line.startswith(f"sys[{blocks[-1][1]}]"):
            blocks[-1][2].append(line)
        else:
            flush()
            out.append(line)
    flush()
    return out


def _ok(r: dict, what: str) -> None:
    if r["status"] != 0:
        print(r["stderr"], file=sys.stderr)
        raise SystemExit(f"{what}: exit status {r['status']}")


def _last_cycles(lines: list[str]) -> int:
    import re

    vals = [int(m.group(1).replace(",", "")) for ln in lines for m in [re.search(r"([0-9][0-9,]*) cycles", ln)] if m]
    return max(vals, default=0)


if __name__ == "__main__":
    raise SystemExit(main())
