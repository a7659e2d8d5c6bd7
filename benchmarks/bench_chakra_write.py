"""Writing generated LLM workloads as Chakra files (issue chakra-at-scale, item 1: fast writing).

Each case runs ``netsim workload llm --llm llama3-405b --tp 8 --pp 16 --dp DP --out DIR``
as a user would (a fresh ``python -m netsim`` process, its worker processes included) and
reports wall time, CPU seconds (user + system of the command and its workers), the peak
RSS of the largest process, nodes written and nodes per wall second.

C1  DP1    (128 ranks), the plain writer (generate_llm + write_workload: one EtNode
    and one protobuf-built record per node; what ``--out`` did before) beside the fast one
C2  DP8    (1,024 ranks)
C3  DP128  (16,384 ranks, about 43M nodes, 4.5 GB): target <= 60 s wall on 2 cores

Run: python benchmarks/bench_chakra_write.py [--quick] [--jobs N]   (--quick: C1 and C2 only)
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GEN = ["--llm", "llama3-405b", "--tp", "8", "--pp", "16", "--seq", "4096"]
_PLAIN = """
import sys
from pathlib import Path
from netsim.chakra import write_workload
from netsim.workload.generate.llm import generate_llm
nodes, _ = generate_llm("llama3-405b", tp=8, pp=16, dp=int(sys.argv[2]), seq=4096)
write_workload(Path(sys.argv[1]) / "llm", nodes)
print(f"({sum(map(len, nodes)):,} nodes,")
"""


def _measure(argv: list[str]) -> dict:
    """Run ``argv``; wall, CPU and peak RSS of it and its worker processes (os.wait4), its node count."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, text=True, env=env)
        _, status, usage = os.wait4(proc.pid, 0)  # usage covers the process and the children it waited for
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {stderr.strip()[-500:]}")
    m = re.search(r"\(([\d,]+) nodes,", stdout)
    nodes = int(m.group(1).replace(",", "")) if m else 0
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "rss_MB": usage.ru_maxrss / 1024,
            "nodes": nodes, "nodes_per_s": nodes / wall}


def _case(label: str, dp: int, *, plain: bool = False, jobs: int | None = None) -> dict:
    out = Path(tempfile.mkdtemp(prefix="netsim-bench-write-"))
    try:
        if plain:
            row = _measure([sys.executable, "-c", _PLAIN, str(out), str(dp)])
        else:
            extra = ["--jobs", str(jobs)] if jobs else []
            row = _measure([sys.executable, "-m", "netsim", "workload", "llm", *GEN, "--dp", str(dp),
                            "--out", str(out / "wl"), "-q", *extra])
        files = list(out.rglob("llm.*.et"))
        row["bytes_GB"] = sum(p.stat().st_size for p in files) / 1e9
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return {"case": label, "ranks": 128 * dp, **row}


def main(quick: bool = False, jobs: int | None = None) -> None:
    from netsim.workload.generate.writer import default_jobs

    cores = jobs or default_jobs()
    rows = [_case("C1 plain writer", 1, plain=True), _case(f"C1 fast, {cores} jobs", 1, jobs=jobs),
            _case(f"C2 fast, {cores} jobs", 8, jobs=jobs)]
    if not quick:
        rows.append(_case(f"C3 fast, {cores} jobs", 128, jobs=jobs))
    cols = [("case", "case", "s"), ("ranks", "ranks", ",d"), ("nodes", "nodes", ",d"), ("bytes_GB", "GB", ".2f"),
            ("wall_s", "wall s", ".1f"), ("cpu_s", "CPU s", ".1f"), ("rss_MB", "peak RSS MB", ".0f"),
            ("nodes_per_s", "nodes/s", ",.0f")]
    widths = [max(len(h), *(len(format(r[k], f)) for r in rows)) for k, h, f in cols]
    print("  ".join(h.rjust(w) for (_, h, _), w in zip(cols, widths)))
    for r in rows:
        print("  ".join(format(r[k], f).rjust(w) for (k, _, f), w in zip(cols, widths)))
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (shared machines skew wall time)")


if __name__ == "__main__":
    args = sys.argv[1:]
    main("--quick" in args, int(args[args.index("--jobs") + 1]) if "--jobs" in args else None)
