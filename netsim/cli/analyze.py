"""``netsim analyze DIR`` (stragglers, overlap, links) and ``netsim timeline DIR --out trace.json``."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from netsim.errors import InputError
from netsim.cli.options import float_arg, int_arg

TABLES = ("ops", "collectives", "links", "ranks", "runs")


def register_cli(sub) -> None:
    """Add ``netsim analyze`` and ``netsim timeline`` to the CLI."""
    a = sub.add_parser("analyze", help="report stragglers, exposed communication and link load of a results dir")
    a.add_argument("dir", help="results directory written by --out")
    a.add_argument("--run", default=None, help="run id (required when DIR holds several runs)")
    a.add_argument("--json", action="store_true", help="machine-readable report")
    a.add_argument("--plots", default=None, metavar="OUTDIR", help="also write PNG plots to OUTDIR")
    a.add_argument("--top", type=int_arg("top"), default=5, help="rows in the top-k tables (default 5)")
    a.add_argument("--z", type=float_arg(0, what="a z-score threshold"), default=3.5, help="robust z-score threshold for slow ranks (default 3.5)")
    a.add_argument("--pct", type=float_arg(0, what="a percentage"), default=5.0, help="%% over the median for slow ranks (default 5)")
    a.add_argument("--suspects", type=int_arg("suspects"), default=2, help="late-start suspects to report (HTA k, default 2)")
    a.set_defaults(func=_cmd_analyze)
    t = sub.add_parser("timeline", help="write the per-rank timeline as Chrome-trace / Perfetto JSON")
    t.add_argument("dir", help="results directory written by --out")
    t.add_argument("--out", required=True, help="output JSON file")
    t.add_argument("--run", default=None, help="run id (required when DIR holds several runs)")
    t.add_argument("--ranks", default=None, help="ranks to include, e.g. 0-7,16 (default all)")
    t.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    t.set_defaults(func=_cmd_timeline)


def load_run(path: str, run_id: str | None = None) -> tuple[str, dict[str, pd.DataFrame]]:
    """The tables of one run of a results directory: ``(run_id, {table: DataFrame})``.

    Raises :class:`InputError` for a missing directory, a directory that is not
    a netsim dataset, several runs without ``run_id``, or an unknown ``run_id``, and its
    subclass :class:`~netsim.errors.ResultsError` for a damaged or foreign part file.
    """
    import pandas as pd  # here, not at import: every command's start builds this module's parser
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


def _clean(obj):
    """JSON-safe: NaN -> None, ±inf -> "inf"/"-inf" (a robust z with MAD = 0), numpy scalars -> Python."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if hasattr(obj, "item") and not isinstance(obj, (str, bytes)):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    return obj


def _records(frame: pd.DataFrame, k: int) -> list[dict]:
    return _clean(frame.head(k).to_dict(orient="records"))


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
    import pandas as pd

    if exposed.empty:
        return pd.DataFrame(columns=["comm_type", "groups", "comm_ns", "exposed_ns", "exposed_pct",
                                     "exposed_ns_per_rank"])
    out = exposed.groupby("comm_type", sort=False).agg(groups=("group", "nunique"), comm_ns=("comm_ns", "sum"),
                                                       exposed_ns=("exposed_ns", "sum")).reset_index()
    out["exposed_pct"] = 100.0 * out["exposed_ns"] / out["comm_ns"].where(out["comm_ns"] > 0)
    out["exposed_ns_per_rank"] = out["exposed_ns"] / max(n_ranks, 1)
    return out.sort_values("exposed_ns", ascending=False, kind="stable")


def _f(v, spec: str = ".2f") -> str:
    """A cleaned number ("inf" strings and None pass through as text)."""
    return "n/a" if v is None else v if isinstance(v, str) else format(v, spec)


def _us(ns) -> str:
    return "n/a" if ns is None or (isinstance(ns, float) and math.isnan(ns)) else f"{ns / 1e3:,.3f} us"


def format_report(run_id: str, r: dict) -> str:
    """The readable ``netsim analyze`` report."""
    tot = r["compute_ns"] + r["non_compute_ns"] + r["idle_ns"] or 1.0
    pc = lambda v: f"{100 * v / tot:.1f}%"  # noqa: E731
    ov = r["overlap_pct"]
    lines = [f"run           {run_id}  ({r['ranks']} ranks, {r['ops']:,} ops)",
             f"iteration     {_us(r['step_ns'])} (first op start to last op end)",
             f"per rank      compute {_us(r['compute_ns'])} ({pc(r['compute_ns'])}), non-compute "
             f"{_us(r['non_compute_ns'])} ({pc(r['non_compute_ns'])}), idle {_us(r['idle_ns'])} "
             f"({pc(r['idle_ns'])})  [HTA, mean]",
             f"overlap       {'n/a' if ov is None or math.isnan(ov) else f'{ov:.1f}%'} of communication "
             f"overlapped by compute; exposed comm {_us(r['exposed_comm_ns'])} per rank; "
             f"step - max compute {_us(r['megascale_exposed_ns'])} [MegaScale]"]
    for row in r["exposed_by_type"]:
        pct = "" if row["exposed_pct"] is None else f" ({row['exposed_pct']:.1f}% of it)"
        lines.append(f"  exposed     {row['comm_type']:<14} {_us(row['exposed_ns_per_rank'])} per rank over "
                     f"{row['groups']} group(s){pct}")
    worst = r["exposed_by_collective"][:1]
    for row in worst:
        lines.append(f"  worst group {row['comm_type']} on group {row['group']}: {_us(row['exposed_ns_per_rank'])} "
                     f"per member rank")
    slow = ", ".join(f"{s['rank']} (+{s['pct_over_median']:.1f}%)" for s in r["slow_ranks"]) or "none"
    lines.append(f"slow ranks    {slow}  [robust z >= threshold and % over median]")
    if r["slowest_rank"] and (r["slowest_rank"][0]["pct_over_median"] or 0) > 0:
        s = r["slowest_rank"][0]
        lines.append(f"  slowest     rank {s['rank']}: {s['pct_over_median']:+.2f}% compute vs same-named peers")
    if "slow_hosts" in r:
        lines.append(f"slow hosts    {', '.join(map(str, r['slow_hosts'])) or 'none'}")
    late = r["late_start"]
    lines.append(f"late start    {late['kernel'] or 'no long communication'}: suspects "
                 f"{', '.join(map(str, late['suspects'])) or 'none'}  [HTA last long collective]")
    if late.get("caveat"):
        lines.append(f"  caveat      {late['caveat']}")
    sk = r["launch_skew"]
    lines.append(f"launch skew   {sk['instances']} collective instance(s); max {_us(sk['max_ns'])}, "
                 f"mean {_us(sk['mean_ns'])}")
    for w in sk["worst"][:3]:
        if w["skew_ns"] > 0:
            lines.append(f"  worst       {w['comm_type']} #{w['seq']} on group {w['group']}: {_us(w['skew_ns'])},"
                         f" last rank {w['last_rank']}")
    for row in r.get("tiers", []):
        act = row.get("active_mean_utilization")
        lines.append(f"tier {row['tier']:<8} {row.get('kind', ''):<8} {row['links']:>6} links "
                     f"({row['active_links']} active), mean util {row['mean_utilization']:.3f} "
                     f"(active {'n/a' if act is None else format(act, '.3f')}), "
                     f"p95 {row['p95_utilization']:.3f}, max {row['max_utilization']:.3f}")
    for row in r.get("hottest_links", [])[:3]:
        lines.append(f"  hot link    {row.get('src')} -> {row.get('dst')} ({row['tier']}): util "
                     f"{row['utilization']:.3f}, peak {row.get('peak_flows')} flows")
    for row in r.get("oversubscription", [])[1:]:
        lines.append(f"  pressure    {row['tier']}: {_f(row['pressure'])} (taper {_f(row['taper'])}; bytes per "
                     f"unit of uplink capacity vs the tier below)")
    for p in r.get("plots", []):
        lines.append(f"plot          {p}")
    return "\n".join(lines)


def _cmd_analyze(args: argparse.Namespace) -> int:
    for flag, val in (("--top", args.top), ("--suspects", args.suspects)):
        if val < 1:
            raise InputError(f"expected a positive integer, got {val}", source=flag)
    if args.plots:
        from netsim.results.io import check_output_dir

        check_output_dir(args.plots, flag="--plots", what="a folder for the plots")
    run_id, tables = load_run(args.dir, args.run)
    report = analyze(tables, top=args.top, z=args.z, pct=args.pct, suspects=args.suspects)
    frames = report.pop("_frames")
    if args.plots:
        from netsim.analysis.plots import save_report_plots

        report["plots"] = [str(p) for p in save_report_plots(args.plots, tables["ops"], tables.get("links"),
                                                             skew=frames["skew"], breakdown=frames["breakdown"])]
    if args.json:
        print(json.dumps(_clean({"run_id": run_id, **report}), indent=2))
    else:
        print(format_report(run_id, _clean(report)))
    return 0


def parse_ranks(text: str | None) -> list[int] | None:
    """``"0-3,8"`` -> ``[0, 1, 2, 3, 8]`` (sorted, distinct; ranks below :data:`netsim.limits.MAX_GPUS`);
    None stays None.

    >>> parse_ranks("0-2,5")
    [0, 1, 2, 5]
    """
    from netsim.inputs import int_text
    from netsim.limits import MAX_GPUS

    if text is None:
        return None
    out: set[int] = set()
    for part in text.split(","):
        lo, dash, hi = part.strip().partition("-")
        try:
            a = int_text(lo, "--ranks", lo=0, hi=MAX_GPUS - 1, what="a rank")
            b = int_text(hi, "--ranks", lo=a, hi=MAX_GPUS - 1, what="a last rank") if dash else a
        except InputError as exc:
            raise InputError(f"expected ranks like 0-7,12: {exc.message} (in {text[:80]!r})",
                             source="--ranks") from None
        out.update(range(a, b + 1))
    return sorted(out)


def _cmd_timeline(args: argparse.Namespace) -> int:
    from netsim.analysis.timeline import write_chrome_trace

    from netsim.results.io import check_output_file

    ranks = parse_ranks(args.ranks)
    out = check_output_file(args.out, overwrite=args.overwrite, flag="--out")
    run_id, tables = load_run(args.dir, args.run)
    coll = tables.get("collectives")
    n = write_chrome_trace(out, tables["ops"], coll if coll is not None and len(coll) else None, ranks=ranks,
                           metadata={"run_id": run_id, "source": str(args.dir)}, overwrite=args.overwrite)
    shown = tables["ops"]["rank"].nunique() if ranks is None else len(set(ranks) & set(tables["ops"]["rank"]))
    print(f"wrote {n:,} events ({shown} ranks) to {out}; open it in https://ui.perfetto.dev or chrome://tracing")
    return 0
