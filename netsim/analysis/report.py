"""One run's analyses together: the report ``netsim analyze`` prints (and ``--json`` writes).

:func:`load_run` reads one run of a results directory (checked: a damaged file is one line naming
it); :func:`analyze` runs every analysis of this package on it and returns a JSON-ready dict
(DataFrames of the plots under ``"_frames"``).
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from netsim.errors import InputError

#: The tables of a run the report reads.
TABLES = ("ops", "collectives", "links", "ranks", "runs")


def load_run(path: str, run_id: str | None = None) -> tuple[str, dict[str, pd.DataFrame]]:
    """The tables of one run of a results directory: ``(run_id, {table: DataFrame})``.

    Raises :class:`InputError` for a missing directory, a directory that is not
    a netsim dataset, several runs without ``run_id``, or an unknown ``run_id``, and its
    subclass :class:`~netsim.errors.ResultsError` for a damaged or foreign part file.
    """
    from netsim.results.dataset import open_results, part_path
    from netsim.results.reader import read_part

    root = Path(path)
    if not root.exists():
        raise InputError("no such results directory", source=str(root))
    if not root.is_dir():
        raise InputError("is a file; expected a results directory written by --out", source=str(root))
    ids = open_results(root).run_ids
    if not ids:
        raise InputError("not a netsim results dataset (no runs/run_id=<id>/part-0.parquet)", source=str(root))
    if run_id is None:
        if len(ids) > 1:
            shown = ", ".join(ids[:8]) + (", ..." if len(ids) > 8 else "")
            raise InputError(f"holds {len(ids)} runs ({shown}); choose one with --run", source=str(root))
        run_id = ids[0]
    elif run_id not in ids:
        raise InputError(f"no complete run {run_id!r} in {root} (runs: {', '.join(ids[:8])})", source="--run")
    tables = {}
    for name in TABLES:  # a damaged or foreign file: ResultsError, one line naming it
        f = part_path(root, name, run_id)
        tables[name] = read_part(f, name) if f.is_file() else pd.DataFrame()
    need = {"rank", "kind", "start_ns", "end_ns"}
    if tables["ops"].empty or not need <= set(tables["ops"].columns):
        raise InputError(f"run {run_id} has no ops table with columns {sorted(need)}", source=str(root))
    return run_id, tables


def clean(obj):
    """JSON-safe: NaN -> None, ±inf -> "inf"/"-inf" (a robust z with MAD = 0), numpy scalars -> Python."""
    if isinstance(obj, dict):
        return {str(k): clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean(v) for v in obj]
    if hasattr(obj, "item") and not isinstance(obj, (str, bytes)):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    return obj


def _records(frame: pd.DataFrame, k: int) -> list[dict]:
    return clean(frame.head(k).to_dict(orient="records"))


def analyze(tables: dict[str, pd.DataFrame], *, top: int = 5, z: float = 3.5, pct: float = 5.0,
            suspects: int = 2) -> dict:
    """Every analysis of one run as a JSON-ready dict (the ``netsim analyze --json`` report)."""
    from netsim.analysis import links as L
    from netsim.analysis import overlap as O
    from netsim.analysis import stragglers as S

    ops, ranks, links = tables["ops"], tables.get("ranks"), tables.get("links")
    breakdown = O.temporal_breakdown(ops)
    summary = O.overlap_summary(ops, breakdown)
    hosts = ranks if ranks is not None and {"rank", "host"} <= set(ranks.columns) and len(ranks) else None
    slow = S.slow_ranks(ops, z_threshold=z, pct_threshold=pct, hosts=hosts)
    late = S.late_start_stragglers(ops, n_stragglers=suspects)
    skew = S.launch_skew(ops)
    exposed = O.exposed_comm_by_collective(ops)
    report = {
        "ranks": int(len(ranks)) if ranks is not None and len(ranks) else int(ops["rank"].nunique()),
        "ranks_in_ops": int(ops["rank"].nunique()), "ops": int(len(ops)),
        "stragglers": [int(r) for r in slow.loc[slow["flagged"], "rank"]],
        "overlap_pct": summary["overlap_pct"], "exposed_comm_ns": summary["exposed_comm_ns"],
        "non_compute_ns": summary["non_compute_ns"], "compute_ns": summary["compute_ns"],
        "idle_ns": summary["idle_ns"], "step_ns": summary["step_ns"],
        "megascale_exposed_ns": summary["megascale_exposed_ns"],
        "slow_ranks": _records(slow[slow["flagged"]].sort_values("pct_over_median", ascending=False), top),
        "slowest_rank": _records(slow.sort_values("pct_over_median", ascending=False), 1),
        "late_start": {"kernel": late.kernel, "suspects": late.stragglers, "caveat": None},
        "exposed_by_type": _records(_by_type(exposed, ops["rank"].nunique()), 50),
        "exposed_by_collective": _records(exposed, top),
        "launch_skew": {"instances": int(len(skew)),
                        "max_ns": float(skew["skew_ns"].max()) if len(skew) else 0.0,
                        "mean_ns": float(skew["skew_ns"].mean()) if len(skew) else 0.0,
                        "worst": _records(skew.sort_values("skew_ns", ascending=False, kind="stable"), top)},
    }
    if hosts is not None and hosts["host"].nunique() > 1:
        sh = S.slow_hosts(ops, hosts, z_threshold=z, pct_threshold=pct)
        report["slow_hosts"] = [int(h) for h in sh.loc[sh["flagged"], "host"]]
        causes = S.straggler_causes(ops, hosts, z_threshold=z, pct_threshold=pct)
        report["causes"] = [{"cause": c.cause, "host": int(c.host), "rank": None if pd.isna(c.rank) else int(c.rank),
                             "gpus": int(c.gpus), "pct_over_median": float(c.pct_over_median)}
                            for c in causes.itertuples()]
    else:
        sh = None
    report["late_start"]["caveat"] = S.late_start_caveat(late, slow, sh)
    if links is not None and len(links) and {"utilization", "bytes", "capacity_GBps"} <= set(links.columns):
        report["hottest_links"] = _records(L.hottest_links(links, k=top), top)
        report["tiers"] = _records(L.utilization_by_tier(links), 50)
        report["oversubscription"] = _records(L.oversubscription_pressure(links), 50)
    report["_frames"] = {"breakdown": breakdown, "skew": skew}
    return report


def _by_type(exposed: pd.DataFrame, n_ranks: int) -> pd.DataFrame:
    """Exposed communication per collective type, per rank of the run (all groups together)."""
    if exposed.empty:
        return pd.DataFrame(columns=["comm_type", "groups", "comm_ns", "exposed_ns", "exposed_pct",
                                     "exposed_ns_per_rank"])
    out = exposed.groupby("comm_type", sort=False).agg(groups=("group", "nunique"), comm_ns=("comm_ns", "sum"),
                                                       exposed_ns=("exposed_ns", "sum")).reset_index()
    out["exposed_pct"] = 100.0 * out["exposed_ns"] / out["comm_ns"].where(out["comm_ns"] > 0)
    out["exposed_ns_per_rank"] = out["exposed_ns"] / max(n_ranks, 1)
    return out.sort_values("exposed_ns", ascending=False, kind="stable")
