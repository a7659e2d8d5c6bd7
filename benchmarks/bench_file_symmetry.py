"""Benchmark replica symmetry found in Chakra file sets against the generator path (issue 19).

Each case runs ``netsim run --workload PREFIX`` (``--symmetry auto``, and ``none`` where it is
affordable) and ``netsim run --llm`` with the same flags, each in a fresh child process so that
its CPU seconds and peak RSS are its own, and prints one row per run: ranks, distinct traces
(distinct files / distinct up to renaming), simulated ranks, wall s, CPU s, peak RSS and the
iteration time against ``--llm``'s.

Usage (from the repository root)::

    python benchmarks/bench_file_symmetry.py                 # small case (256 ranks), ~1 min
    python benchmarks/bench_file_symmetry.py --big /tmp/wl   # + Llama-3-405B TP8 PP16 DP128 on 16,384 GPUs

``--big DIR`` uses the file set in DIR (``DIR/llm.<rank>.et``, ``DIR/comm_groups.json``) and writes it
there first with ``netsim workload llm`` when it is missing (minutes).  A set written by another netsim
version gives another iteration time than ``--llm``: the row's last column shows it.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SMALL = dict(model="llama3-8b", tp=8, pp=4, dp=8, topology="topologies/h100-superpod-1su.yaml", net="flow")
BIG = dict(model="llama3-405b", tp=8, pp=16, dp=128, topology="topologies/h100-fat-tree-16k.yaml", net="flow")


def _child(args: list[str]) -> tuple[dict, float, float, float]:
    """(JSON summary, wall s, CPU s, peak RSS GiB) of ``python -m netsim ARGS --json -q`` (its own rusage)."""
    import os
    import tempfile

    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "netsim", *args, "--json", "-q"], cwd=ROOT,
                                stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise SystemExit(f"netsim {' '.join(args)} failed: {err.read().strip()[-400:]}")
        summary = json.loads(out.read())
    return summary, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 2**20  # KiB on Linux


def _write(case: dict, out: Path) -> None:
    if (out / "comm_groups.json").exists():
        return
    flags = ["workload", "llm", "--llm", case["model"], "--tp", str(case["tp"]), "--pp", str(case["pp"]),
             "--dp", str(case["dp"]), "--out", str(out)]
    proc = subprocess.run([sys.executable, "-m", "netsim", *flags], cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"netsim {' '.join(flags)} failed: {proc.stderr.strip()[-400:]}")


def _traces(notes: list[str]) -> str:
    for n in notes:
        m = re.search(r"(\d+) distinct files, (\d+) distinct up to renaming", n)
        if m:
            return f"{int(m.group(1)):,} / {int(m.group(2)):,}"
    return "-"


def _simulated(summary: dict) -> int:
    for n in summary["notes"]:
        m = re.search(r"simulated (\d+) of (\d+) ranks", n)
        if m:
            return int(m.group(1))
    return summary["ranks"]


def run_case(name: str, case: dict, folder: Path, full: bool) -> list[tuple]:
    _write(case, folder)
    common = ["--topology", case["topology"], "--model", case["net"]]
    layout = ["--tp", str(case["tp"]), "--pp", str(case["pp"]), "--dp", str(case["dp"])]
    files = ["--workload", str(folder / "llm"), "--comm-groups", str(folder / "comm_groups.json")]
    rows = []
    ref, *m = _child(["run", *common, "--llm", case["model"], *layout])
    rows.append((f"{name} --llm", ref, *m))
    for sym in ("auto",) + (("none",) if full else ()):
        res, *m = _child(["run", *common, *files, "--symmetry", sym])
        rows.append((f"{name} files --symmetry {sym}", res, *m))
    out = []
    for label, res, wall, cpu, rss in rows:
        rel = res["iteration_us"] / ref["iteration_us"] - 1
        out.append((label, res["ranks"], _traces(res["notes"]), _simulated(res), wall, cpu, rss,
                    res["iteration_us"], rel))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", default=None, help="folder of the small file set (default: a fresh temporary "
                    "folder; a folder that already holds one is reused as it is, so it must match this netsim)")
    ap.add_argument("--big", default=None, metavar="DIR", help="also run the 16,384-rank Llama-3-405B set in DIR")
    args = ap.parse_args(argv)
    import tempfile

    small = Path(args.small or tempfile.mkdtemp(prefix="netsim-bench-fsym-"))
    rows = run_case("llama3-8b TP8 PP4 DP8", SMALL, small, full=True)
    if args.big:
        rows += run_case("llama3-405b TP8 PP16 DP128", BIG, Path(args.big), full=False)
    head = ("case", "ranks", "distinct traces (files / renamed)", "simulated ranks", "wall s", "CPU s",
            "peak RSS GiB", "iteration us", "vs --llm")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for label, ranks, traces, sim, wall, cpu, rss, it, rel in rows:
        print(f"| {label} | {ranks:,} | {traces} | {sim:,} | {wall:.1f} | {cpu:.1f} | {rss:.2f} | {it:,.3f} | "
              f"{rel:+.1e} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
