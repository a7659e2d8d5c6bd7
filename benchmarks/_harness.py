"""Tiny benchmark harness: run a case in a fresh process, report wall time and peak memory."""

from __future__ import annotations

import multiprocessing as mp
import resource
import time
import tracemalloc
from typing import Callable


def _child(fn: Callable[[], dict], queue, trace: bool) -> None:
    if trace:
        tracemalloc.start()
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0, c0 = time.perf_counter(), time.process_time()
    extra = fn() or {}
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak_alloc = tracemalloc.get_traced_memory()[1] if trace else 0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    queue.put({"wall_s": wall, "cpu_s": cpu, "peak_rss_MB": rss / 1024, "rss_before_MB": base_rss / 1024,
               "peak_alloc_MB": peak_alloc / 2**20, **extra})


def run_case(fn: Callable[[], dict], trace: bool = False) -> dict:
    """Run ``fn`` in a fresh spawned process; return wall_s, cpu_s (its process's CPU seconds),
    peak_rss_MB and fn's dict (whose own ``cpu_s``, if any, wins).

    Wall time excludes interpreter start-up; it includes everything ``fn`` does (imports inside
    it too). Peak RSS is the process high-water mark (interpreter and libraries included).
    ``trace=True`` also reports tracemalloc's peak (it slows numpy-heavy code several-fold, so
    wall times of traced runs are not comparable).
    """
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(fn, queue, trace))
    proc.start()
    result = queue.get()
    proc.join()
    return result


def print_table(rows: list[dict], columns: list[tuple[str, str, str]]) -> None:
    """Print rows as a fixed-width table; columns are (key, header, format)."""
    def cell(row, key, fmt):
        v = row.get(key, "")
        return format(v, fmt) if v != "" else ""

    widths = [max([len(h), 8] + [len(cell(r, k, f)) for r in rows]) for k, h, f in columns]
    print("  ".join(h.rjust(w) for (_, h, _), w in zip(columns, widths)))
    for row in rows:
        print("  ".join(cell(row, k, f).rjust(w) for (k, _, f), w in zip(columns, widths)))


#: The launcher of :func:`run_child`: forks, execs the command, kills it after the timeout (SIGALRM),
#: writes ``[status or null, user s, system s, peak RSS KB]`` of the child to the file ``argv[2]``.
_LAUNCH = """import json, os, signal, sys
limit, report, cmd = float(sys.argv[1]), sys.argv[2], sys.argv[3:]
pid = os.fork()
if pid == 0:
    try:
        os.execvp(cmd[0], cmd)
    finally:
        os._exit(127)
killed = []
signal.signal(signal.SIGALRM, lambda *_: (killed.append(1), os.kill(pid, signal.SIGKILL)))
signal.setitimer(signal.ITIMER_REAL, limit)
_pid, raw, ru = os.wait4(pid, 0)
signal.setitimer(signal.ITIMER_REAL, 0)
with open(report, "w") as f:
    json.dump([None if killed else os.waitstatus_to_exitcode(raw), ru.ru_utime, ru.ru_stime, ru.ru_maxrss], f)
"""


def run_child(cmd: list[str], env: dict | None = None, cwd: str | None = None, timeout: float = 1e7) -> dict:
    """Run ``cmd`` in a fresh process; its wall seconds, CPU seconds (user + system of that process
    alone), peak RSS (MB), stdout, stderr and exit status (``None``: killed after ``timeout`` s).

    The command is started by a small launcher (``python -S``), never forked from this process: Linux
    carries the RSS high-water mark of a forked process's pre-exec image over the exec, so a child
    forked from a large benchmark process would report that process's size as its own peak.  A peak
    below the launcher's own (some 10 MB) reads as the launcher's.
    """
    import json
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as tmp, open(f"{tmp}/out", "w+") as out, open(f"{tmp}/err", "w+") as err:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-S", "-c", _LAUNCH, str(timeout), f"{tmp}/report", *cmd], stdout=out,
                       stderr=err, env=env, cwd=cwd, check=True)
        wall = time.perf_counter() - t0
        status, user, system, rss = json.loads(open(f"{tmp}/report").read())
        out.seek(0)
        err.seek(0)
        return {"wall_s": wall, "cpu_s": user + system, "peak_MB": rss / 1024, "stdout": out.read(),
                "stderr": err.read(), "status": status}
