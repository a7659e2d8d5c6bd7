"""What a sweep worker does with one configuration: simulate, write its partition, report.

:func:`run_task` is importable by module path, so Dask and process pools ship only a
reference to it.  It returns a small summary dict; results stay in files:

* success: ``write_run`` writes ``DIR/<table>/run_id=<id>/part-0.parquet`` atomically, the
  ``runs`` row last; a stale ``failures`` record of the run is removed.
* failure: ``DIR/failures/run_id=<id>/part-0.parquet`` holds the one-line error, the error
  type, the attempt, host and pid, and the flattened config.  The run stays incomplete, so a
  re-run retries it.  :class:`~netsim.errors.NetsimError` (bad input, deadlock) is final for
  this sweep invocation; any other exception may be retried (``--retries``).
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import time

from netsim.errors import NetsimError
from netsim.results.dataset import PartWriter, canonical_config, is_complete, part_path, runs_row, write_run
from netsim.results.layout import FAILURES
from netsim.sweep.spec import RUN_KEYS, is_topology_param

MAX_ERROR = 400


def one_line(exc: BaseException) -> str:
    """The error as one line: NetsimError text as is, others prefixed with their type."""
    text = str(exc).strip() or repr(exc)
    text = " ".join(text.split())
    if not isinstance(exc, NetsimError):
        text = f"{type(exc).__name__}: {text}"
    return text if len(text) <= MAX_ERROR else text[:MAX_ERROR - 3] + "..."


def run_task(task: dict) -> dict:
    """Run one configuration (``task``: run_id, config, paths, out_dir, attempt); return a summary."""
    out, rid, cfg = task["out_dir"], task["run_id"], task["config"]
    summary = {"run_id": rid, "attempt": task.get("attempt", 0), "host": socket.gethostname(),
               "pid": os.getpid()}
    if is_complete(out, rid):
        return {**summary, "status": "skipped", "wall_time_s": 0.0}
    t0 = time.perf_counter()
    try:
        if "seed" in cfg:
            random.seed(cfg["seed"])
            _np_seed(cfg["seed"])
        runner = _run_bench if cfg["kind"] == "bench" else _run_workload
        tables, metrics = runner(cfg, task.get("paths", {}))
        wall = time.perf_counter() - t0
        runs = runs_row(cfg, wall_time_s=wall, status="ok", **metrics)
        extra = tables.pop("runs", None)  # the recorder's runs row: keep its metrics, ours win
        if extra is not None and len(extra) == 1:
            for col in extra.columns:
                if col not in runs.columns and col not in ("run_id", "config"):
                    runs[col] = extra[col].to_numpy()
        tables["runs"] = runs
        write_run(out, rid, tables, cfg, overwrite=True)
        clear_failure(out, rid)
        return {**summary, "status": "ok", "wall_time_s": wall, "task_s": time.perf_counter() - t0}
    except Exception as exc:  # noqa: BLE001 - any failure of one configuration is reported, not raised
        wall = time.perf_counter() - t0
        msg = one_line(exc)
        try:
            record_failure(out, rid, cfg, msg, type(exc).__name__, summary["attempt"], wall)
        except Exception:  # noqa: BLE001 - the summary still carries the error
            pass
        return {**summary, "status": "failed", "error": msg, "error_type": type(exc).__name__,
                "retry": not isinstance(exc, NetsimError), "wall_time_s": wall}


def check_task(cfg: dict, paths: dict | None = None) -> None:
    """Check one configuration exactly as :func:`run_task` does before it simulates (topology and
    its overrides, flags, files, workload, placement, faults, the planned schedule), simulating
    nothing; raises what that run would fail with (:class:`~netsim.errors.InputError` for bad input)."""
    paths = paths or {}
    if cfg["kind"] == "bench":
        _check_bench(cfg, paths)
    else:
        _run_workload(cfg, paths, dry_run=True)


def _np_seed(seed) -> None:
    import numpy as np

    np.random.seed(int(seed) % 2**32)


def record_failure(out, run_id: str, cfg: dict, error: str, error_type: str, attempt: int,
                   wall_time_s: float = float("nan")) -> None:
    """Write (atomically, replacing an older one) the failure record of ``run_id``."""
    row = runs_row(cfg, wall_time_s=wall_time_s, status="failed", error=error, error_type=error_type,
                   attempt=attempt, host=socket.gethostname(), pid=os.getpid())
    with PartWriter(out, FAILURES, run_id, canonical_config(cfg)) as w:
        w.write(row)


def clear_failure(out, run_id: str) -> None:
    """Remove the failure record of ``run_id`` (it succeeded)."""
    folder = part_path(out, FAILURES, run_id).parent
    if folder.is_dir():
        shutil.rmtree(folder, ignore_errors=True)


# ------------------------------------------------------------------ bench
def topology_for(cfg: dict, paths: dict):
    """The configuration's topology: its file with the dotted-path overrides applied."""
    from netsim.topology.overrides import load_with_overrides

    overrides = {k: v for k, v in cfg.items() if is_topology_param(k)}
    return load_with_overrides(paths.get("topology", cfg["topology"]), overrides)


def _bench_config(cfg: dict, paths: dict):
    """(topology, validated BenchConfig) of a bench configuration."""
    from netsim.perftests.collective import BenchConfig, validated
    from netsim.results import nccl_table as nt
    from netsim.sweep.spec import bench_keys

    topo = topology_for(cfg, paths)
    fields = bench_keys()
    kwargs = {fields[k]: paths.get(k, v) for k, v in cfg.items() if k in fields and k != "op"}
    return topo, validated(BenchConfig(op=nt.canonical_op(cfg["op"]), **kwargs), topo)


def _check_bench(cfg: dict, paths: dict) -> None:
    """Everything :func:`_run_bench` checks before it simulates: the topology with its overrides,
    the flags, and the choices of the schedule :func:`netsim.perftests.collective.run_one` plans (algorithm,
    protocol, whole nodes; :func:`netsim.perftests.collective.check_plan`), without building it."""
    from netsim.perftests.collective import check_plan
    from netsim.results import nccl_table as nt
    from netsim.topology.policy import with_routing

    topo, bc = _bench_config(cfg, paths)
    size = nt.size_and_count(bc.op, int(cfg["size"]), bc.gpus, bc.dtype)[0]
    check_plan(with_routing(topo, bc.routing) if bc.routing is not None else topo, bc, float(size))


def _run_bench(cfg: dict, paths: dict):
    import pandas as pd

    from netsim.perftests.collective import run_one
    from netsim.results import nccl_table as nt
    from netsim.topology.cost import cost_columns

    topo, bc = _bench_config(cfg, paths)
    nbytes = int(cfg["size"])
    row, stats = run_one(topo, bc, nbytes)
    size = nt.size_and_count(bc.op, nbytes, bc.gpus, bc.dtype)[0]
    end_ns = row.time_us * 1e3
    coll = pd.DataFrame([{"seq": 0, "op": bc.op, "algorithm": row.algorithm, "group": "world",
                          "group_size": bc.gpus, "bytes": int(size), "start_ns": 0.0, "last_start_ns": 0.0,
                          "end_ns": end_ns, "algbw_GBps": row.algbw_GBps, "busbw_GBps": row.busbw_GBps}])
    metrics = {"n_gpus": bc.gpus, "algorithm": row.algorithm, "time_ns": end_ns,
               "algbw_GBps": row.algbw_GBps, "busbw_GBps": row.busbw_GBps, **cost_columns(topo)}
    if stats.get("nccl_predicted_us") is not None:
        metrics["nccl_predicted_ns"] = float(stats["nccl_predicted_us"]) * 1e3
    return {"collectives": coll}, metrics


# ------------------------------------------------------------------- run
def _run_workload(cfg: dict, paths: dict, dry_run: bool = False):
    """Simulate a run configuration: (tables, metrics); ``dry_run``: check it only (None)."""
    import inspect

    from netsim.workload.simulation import simulate

    topo = topology_for(cfg, paths)
    params = inspect.signature(simulate).parameters
    kwargs = {"model": cfg.get("model", "flow"), "ctrl_deps": not cfg.get("no_ctrl_deps", False),
              "streams": cfg.get("streams", 1), "dry_run": dry_run}
    for key, value in cfg.items():
        if key in RUN_KEYS or key.startswith("llm.") or is_topology_param(key) or key == "kind":
            continue
        if key in params:
            if key == "stragglers" and isinstance(value, str):
                value = [value]
            kwargs[key] = paths.get(key, value)
    if "llm.model" in cfg:  # generated in memory, one data-parallel replica standing for all
        from netsim.workload.llmrun import simulate_llm

        kw = {k[len("llm."):]: v for k, v in cfg.items() if k.startswith("llm.") and k != "llm.model"}
        kw.setdefault("seq", 4096)
        kwargs.pop("replicas", None)
        res = simulate_llm(topo, paths.get("llm.model", cfg["llm.model"]), **kwargs, **kw)
    else:
        res = simulate(topo, paths.get("workload", cfg["workload"]), paths.get("comm_groups", cfg.get("comm_groups")),
                       **kwargs)
    if dry_run:
        return None
    from netsim.topology.cost import cost_columns

    fin = res.finish
    metrics = {"n_ranks": int(fin.size), "iteration_ns": float(fin.max()) * 1e9,
               "exposed_comm_ns_mean": float(res.exposed_comm.mean()) * 1e9, **cost_columns(topo)}
    return _workload_tables(res), metrics


def _workload_tables(res) -> dict:
    """The results tables of a workload run: the recorder's when available, else ranks and ops."""
    if hasattr(res, "tables"):
        try:
            tables = dict(res.tables())
        except ModuleNotFoundError as exc:
            if exc.name != "netsim.results.record":
                raise
        else:  # keep the recorder's metrics, not its copy of the config (temporary workload paths)
            from netsim.results.dataset import flatten_config

            if "runs" in tables and getattr(res, "config", None):
                tables["runs"] = tables["runs"].drop(columns=list(flatten_config(res.config)), errors="ignore")
            return tables
    import numpy as np
    import pandas as pd

    ranks = pd.DataFrame({"rank": np.arange(res.finish.size, dtype=np.int32), "finish_ns": res.finish * 1e9,
                          "compute_ns": res.compute * 1e9, "exposed_comm_ns": res.exposed_comm * 1e9})
    ops = pd.DataFrame([r[:6] for r in res.ops], columns=["rank", "node_id", "name", "kind", "start_ns", "end_ns"])
    ops["start_ns"] *= 1e9
    ops["end_ns"] *= 1e9
    ops["kind"] = ops["kind"].astype(str)
    return {"ranks": ranks, "ops": ops}
