"""Run a sweep on local processes or a Dask cluster; resumable, idempotent, with retries.

* Finished run_ids (their ``runs`` part exists) are skipped before submission, and again
  by the worker, so a configuration is never simulated twice once it is complete.
* Every file is written under a temporary name and renamed; the ``runs`` part goes last.
  Temporary files of killed writers are removed when the sweep starts and ends.
* Stopping the driver (Ctrl-C, SIGTERM) stops its workers: local processes are terminated and
  die with the driver even on SIGKILL; a Dask LocalCluster is closed (:mod:`netsim.sweep.shutdown`).
* Progress and ETA come from predicted and measured work, not counts, and move while configurations
  run (:mod:`netsim.sweep.eta`); a bar on a terminal, a status line every 30 s elsewhere.
* A configuration whose worker dies, or that raises something other than a
  :class:`~netsim.errors.NetsimError`, is resubmitted up to ``retries`` times.  Dask itself
  reschedules tasks of a lost worker; :class:`distributed.KilledWorker` counts as an attempt.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import logging
import os
import re
import time
import uuid
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from netsim.errors import InputError
from netsim.procpool import TrackedPool
from netsim.results.dataset import PART, is_complete, remove_stale_parts
from netsim.results.io import check_output_dir
from netsim.sweep.shutdown import terminate_on_sigterm
from netsim.sweep.spec import Sweep, load_sweep
from netsim.sweep.worker import FAILURES, check_task, one_line, record_failure, run_task


@dataclass
class SweepReport:
    """Outcome of :func:`run_sweep`: counts, the failed configurations, the worker summaries."""

    out_dir: Path
    total: int
    done: int = 0
    skipped: int = 0
    retried: int = 0
    failed: list[dict] = field(default_factory=list)  # run_id, label, error
    summaries: list[dict] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        """True when no configuration failed."""
        return not self.failed

    def line(self) -> str:
        """One-line summary."""
        return (f"{self.total} configurations: {self.done} done, {len(self.failed)} failed, {self.skipped} skipped"
                f" ({self.retried} retries) in {self.wall_s:.1f} s -> {self.out_dir}")


def clean_temp_files(out_dir: str | os.PathLike) -> int:
    """Remove temporary partition files left by killed writers (files that no live writer holds,
    :func:`~netsim.results.dataset.remove_stale_parts`); returns how many."""
    return len(remove_stale_parts(out_dir))


def check_configs(sweep: Sweep) -> None:
    """Check every configuration of ``sweep`` as its worker would before simulating
    (:func:`~netsim.sweep.worker.check_task`), simulating nothing: ``--dry-run``.  Raises one
    :class:`~netsim.errors.InputError` naming the sweep file, the first configuration that a real
    sweep would fail (its run id and swept values), the reason, and how many fail in all."""
    bad = []
    for i, (cfg, paths) in enumerate(zip(sweep.configs, sweep.paths)):
        try:
            check_task(cfg, paths)
        except Exception as exc:  # noqa: BLE001 - what the worker would record as the configuration's failure
            bad.append((i, exc))
    if bad:
        i, exc = bad[0]
        more = f" ({len(bad)} of {len(sweep)} configurations fail)" if len(bad) > 1 else ""
        raise InputError(one_line(exc) + more, source=sweep.source,
                         field=f"configuration {sweep.run_ids[i]} ({sweep.label(i) or 'base'})")


# -------------------------------------------------------------- executors
class _LocalPool:
    """A process pool (:class:`~netsim.procpool.TrackedPool`); a dead worker breaks the pool, so it is
    rebuilt and tasks resubmitted."""

    def __init__(self, jobs: int | None):
        self.jobs = self.slots = jobs or os.cpu_count() or 1  # slots: configurations run at once
        self.gen = 0
        self.pool = self._new_pool()
        self._pending: set = set()
        self._gen_of: dict = {}

    def submit(self, task: dict):
        fut = self.pool.submit(run_task, task)
        self._gen_of[fut] = self.gen
        self._pending.add(fut)
        return fut

    def completed(self):
        while self._pending:
            done, _ = cf.wait(self._pending, return_when=cf.FIRST_COMPLETED)
            for fut in done:
                self._pending.discard(fut)
                yield fut

    def outcome(self, fut) -> tuple[dict | None, str | None]:
        try:
            return fut.result(), None
        except cf.process.BrokenProcessPool:
            if self._gen_of.pop(fut, self.gen) == self.gen:  # first casualty: replace the pool
                self.pool.shutdown(wait=False, cancel_futures=True)
                self.gen += 1
                self.pool = self._new_pool()
            return None, "worker process died"
        except Exception as exc:  # noqa: BLE001 - e.g. a task that could not be pickled
            return None, one_line(exc)
        finally:
            self._gen_of.pop(fut, None)

    def _new_pool(self) -> TrackedPool:
        from netsim.sweep.shutdown import die_with_parent

        return TrackedPool(self.jobs, initializer=die_with_parent)

    def close(self, abort: bool = False) -> None:
        """Shut the pool down: wait for running tasks, or (``abort``: the driver was interrupted)
        terminate the worker processes at once, so none outlives the driver."""
        if abort:
            from netsim.sweep.shutdown import terminate_pool

            terminate_pool(self.pool)
        else:
            self.pool.shutdown(wait=True, cancel_futures=True)


class _DaskPool:
    """Dask futures on an existing scheduler or a loopback LocalCluster."""

    def __init__(self, scheduler: str | None = None, workers: int | None = None):
        try:
            from distributed import Client, LocalCluster, as_completed
        except ImportError:
            raise InputError("needs Dask: pip install 'netsim[dask]' (dask[distributed])",
                             source="--scheduler" if scheduler else "--workers") from None
        self._as_completed = as_completed
        self.cluster = None
        if scheduler:
            try:
                self.client = Client(scheduler, timeout="20s")
            except (OSError, TimeoutError, ValueError, TypeError) as exc:  # ValueError: a bad address
                raise InputError(f"cannot connect to the Dask scheduler: {one_line(exc)}",
                                 source="--scheduler") from None
        else:
            with warnings.catch_warnings():  # "Port 8787 is already in use": another port is used, fine
                warnings.filterwarnings("ignore", message="Port .* is already in use", category=UserWarning)
                self.cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                            host="127.0.0.1", dashboard_address=None, silence_logs=logging.CRITICAL)
            self.client = Client(self.cluster)
        try:  # configurations run at once: the workers' threads
            self.slots = sum(self.client.nthreads().values()) or 1
        except Exception:  # noqa: BLE001 - a scheduler that does not say: one at a time
            self.slots = 1
        self._ac = None
        self._queued: list = []

    def submit(self, task: dict):
        fut = self.client.submit(run_task, task, pure=False, key=f"netsim-sweep-{task['run_id']}-{uuid.uuid4().hex[:8]}")
        if self._ac is None:
            self._queued.append(fut)
        else:
            self._ac.add(fut)
        return fut

    def completed(self):
        self._ac = self._as_completed(self._queued)
        self._queued = []
        yield from self._ac
        self._ac = None

    def outcome(self, fut) -> tuple[dict | None, str | None]:
        try:
            return fut.result(), None
        except Exception as exc:  # noqa: BLE001 - KilledWorker, lost connection, cancelled
            return None, one_line(exc)
        finally:
            fut.release()

    def close(self, abort: bool = False) -> None:
        """Release the client; a LocalCluster we started is closed, its worker processes with it
        (``abort``, the driver interrupted: the same; the client's tasks die with their workers)."""
        try:
            self.client.close()
        finally:
            if self.cluster is not None:
                self.cluster.close()


#: Local worker processes: each holds a whole simulation; far more than the cores only thrashes.
MAX_WORKERS = 1024
#: A Dask address: PROTOCOL://HOST:PORT or HOST:PORT (distributed.comm.addressing).
SCHEDULER_ADDRESS = re.compile(r"((tcp|tls|inproc|ucx|ws|wss)://)?[\w.\-\[\]:]+:\d{1,5}", re.ASCII)


def make_executor(scheduler: str | None = None, workers: int | None = None, jobs: int | None = None):
    """The executor for the CLI flags: Dask scheduler, Dask LocalCluster, or a process pool."""
    check_executor_flags(scheduler, workers, jobs)
    if scheduler or workers:
        return _DaskPool(scheduler, workers)
    return _LocalPool(jobs)


def check_executor_flags(scheduler: str | None = None, workers: int | None = None, jobs: int | None = None) -> None:
    """InputError for bad --scheduler/--workers/--jobs (checked before anything starts)."""
    if scheduler and workers:
        raise InputError("give --scheduler or --workers, not both", source="--workers")
    for flag, n in (("--workers", workers), ("--jobs", jobs)):
        if n is not None and not 1 <= n <= MAX_WORKERS:
            raise InputError(f"expected a number of processes in 1..{MAX_WORKERS}, got {n}", source=flag)
    if scheduler is not None and not SCHEDULER_ADDRESS.fullmatch(scheduler):
        raise InputError(f"expected a Dask scheduler address like tcp://HOST:PORT, got {scheduler!r}",
                         source="--scheduler")


# ------------------------------------------------------------------ driver
def run_sweep(sweep: Sweep | str | os.PathLike, out_dir: str | os.PathLike, *, scheduler: str | None = None,
              workers: int | None = None, jobs: int | None = None, retries: int = 2, progress: bool = True,
              executor=None) -> SweepReport:
    """Run every configuration of ``sweep`` not yet complete in ``out_dir``; see the module docstring.

    ``executor``: an object from :func:`make_executor` (left open), else one is made from
    ``scheduler`` / ``workers`` / ``jobs`` and closed at the end.
    """
    if not isinstance(sweep, Sweep):
        sweep = load_sweep(sweep)
    if retries < 0:
        raise InputError(f"expected retries >= 0, got {retries}", source="--retries")
    check_output_dir(out_dir, flag="--out", what="a results directory")
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    clean_temp_files(out)
    report = SweepReport(out, len(sweep))
    label = {rid: sweep.label(i) for i, rid in enumerate(sweep.run_ids)}
    tasks = []
    for i, rid in enumerate(sweep.run_ids):
        if is_complete(out, rid):
            report.skipped += 1
        else:
            tasks.append({"run_id": rid, "config": sweep.configs[i], "paths": sweep.paths[i],
                          "out_dir": str(out), "attempt": 0})
    bar = _WorkBar(tasks, report, progress, sweep.name)
    own = executor is None
    ex = None
    interrupted = True  # until the loop ends normally: then workers are waited for, else killed
    signals = contextlib.ExitStack()
    signals.enter_context(terminate_on_sigterm())  # SIGTERM -> KeyboardInterrupt: the finally below runs
    try:
        if tasks:
            ex = executor or make_executor(scheduler, workers, jobs)
            bar.begin(getattr(ex, "slots", 1))
            running = {}
            for task in tasks:
                running[ex.submit(task)] = task
            for fut in ex.completed():
                task = running.pop(fut)
                summary, lost = ex.outcome(fut)
                if summary is None:
                    summary = {"run_id": task["run_id"], "attempt": task["attempt"], "status": "failed",
                               "error": lost, "error_type": "WorkerLost", "retry": True}
                if summary["status"] == "failed" and summary.get("retry") and task["attempt"] < retries:
                    task = {**task, "attempt": task["attempt"] + 1}
                    running[ex.submit(task)] = task
                    report.retried += 1
                    bar.retried(task["run_id"])
                    continue
                _account(report, summary, task, label, lost is not None)
                bar.finished(task["run_id"], summary.get("wall_time_s"))
        interrupted = False
    finally:
        bar.close()
        if own and ex is not None:
            ex.close(abort=interrupted)
        clean_temp_files(out)
        report.wall_s = time.perf_counter() - t0
        signals.close()
    return report


def _account(report: SweepReport, summary: dict, task: dict, label: dict, lost: bool) -> None:
    report.summaries.append(summary)
    rid = task["run_id"]
    if summary["status"] in ("ok", "skipped"):
        # "skipped" by a worker: the run was incomplete at submission and is complete now (Dask re-ran a
        # task whose worker died after writing, or a retry found an earlier attempt's files): done.
        report.done += 1
    else:
        if lost:  # the worker died: nobody wrote the failure record
            try:
                record_failure(report.out_dir, rid, task["config"], summary["error"], "WorkerLost",
                               task["attempt"])
            except Exception:  # noqa: BLE001 - still reported below
                pass
        report.failed.append({"run_id": rid, "label": label.get(rid, ""), "error": summary.get("error", "?")})


class _WorkBar:
    """The sweep's progress: the fraction of predicted work done (:mod:`netsim.sweep.eta`), so the ETA
    comes from work, not from counts; the counts are in its postfix.  Read every
    :data:`netsim.progress.INTERVAL_S` seconds with the running configurations' elapsed seconds, so it
    moves within a configuration.  Configurations are taken to start in submission order, ``slots``
    at a time (the executor's worker processes or threads).  A bar on a terminal, else a status
    line every 30 s (:mod:`netsim.progress`)."""

    SCALE = 1000  # the bar counts permille of the work

    def __init__(self, tasks: list[dict], report: SweepReport, enabled: bool, desc: str):
        import threading

        from netsim.sweep.eta import WorkEstimate

        self.report = report
        self.index = {t["run_id"]: i for i, t in enumerate(tasks)}
        self.work = WorkEstimate([t["config"] for t in tasks])
        self.enabled, self.desc = enabled and bool(tasks), desc or "sweep"
        self.waiting = list(range(len(tasks)))  # not started, in submission order
        self.started: dict[int, float] = {}  # running: index -> when it started (monotonic)
        self.slots = 1
        self._lock = threading.Lock()
        self._poller = None

    def begin(self, slots: int) -> None:
        """The executor is up with ``slots`` parallel workers: the first configurations start."""
        from netsim.progress import Poller

        self.slots = max(int(slots or 1), 1)
        with self._lock:
            self._fill(time.monotonic())
        self._poller = Poller(self.SCALE, self._count, self.desc, "permille", self.enabled, postfix=self._postfix,
                              smoothing=0.1, bar_format="{desc}: {percentage:3.0f}% of the work|{bar}| "
                                                        "[{elapsed}<{remaining}{postfix}]").__enter__()

    def _fill(self, now: float) -> None:
        while len(self.started) < self.slots and self.waiting:
            self.started[self.waiting.pop(0)] = now

    def _count(self) -> float:
        with self._lock:
            now = time.monotonic()
            return round(self.work.fraction({i: now - t for i, t in self.started.items()}) * self.SCALE)

    def _postfix(self) -> str:
        r = self.report
        return (f"{r.done + len(r.failed)}/{r.total - r.skipped} configurations "
                f"(failed {len(r.failed)}, skipped {r.skipped})")

    def retried(self, run_id: str) -> None:
        """A configuration was resubmitted: it waits again behind the others."""
        with self._lock:
            i = self.index[run_id]
            self.started.pop(i, None)
            self.waiting.append(i)
            self._fill(time.monotonic())

    def finished(self, run_id: str, wall_s) -> None:
        """A configuration ended (done or failed) after ``wall_s`` seconds of its worker."""
        with self._lock:
            i = self.index[run_id]
            self.started.pop(i, None)
            if i in self.waiting:
                self.waiting.remove(i)
            self.work.finished(i, wall_s)
            self._fill(time.monotonic())

    def close(self) -> None:
        if self._poller is not None:
            self._poller.__exit__(None, None, None)


def failures(out_dir: str | os.PathLike):
    """Failure records of the configurations not (yet) complete in ``out_dir``, as a DataFrame
    (:class:`~netsim.errors.ResultsError` for a damaged record)."""
    import pandas as pd

    from netsim.results.reader import read_part

    root = Path(out_dir)
    frames = []
    for p in sorted((root / FAILURES).glob(f"run_id=*/{PART}")):
        rid = p.parent.name[len("run_id="):]
        if not is_complete(root, rid):
            frames.append(read_part(p).assign(run_id=rid))
    if not frames:
        return pd.DataFrame(columns=["run_id", "status", "error", "error_type", "attempt"])
    return pd.concat(frames, ignore_index=True)


def results(out_dir: str | os.PathLike, table: str = "collectives"):
    """Table ``table`` of a sweep joined with its ``runs`` table (swept parameters as columns).

    Columns in both keep the table's values (e.g. ``op``, ``busbw_GBps`` of ``collectives``).
    """
    from netsim.results.dataset import open_results

    res = open_results(out_dir)
    data, runs = res.table(table).copy(), res.runs.copy()
    for frame in (data, runs):
        frame["run_id"] = frame["run_id"].astype(str)
    runs = runs.drop(columns=[c for c in runs.columns if c in data.columns and c != "run_id"])
    return data.merge(runs, on="run_id", how="left")
