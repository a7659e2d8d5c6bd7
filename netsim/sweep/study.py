"""A sweep's design answer: its complete configurations as design points (time, cost, power per
workload and fabric), optionally re-priced with a user price file, and the Pareto answer that
``netsim sweep`` prints (docs/sweeps.md, "The design answer"; :mod:`netsim.analysis.pareto`)."""

from __future__ import annotations

import os

from netsim.sweep.spec import Sweep, is_topology_param


def fabric_columns(sweep: Sweep) -> list[str]:
    """The columns that name a configuration's fabric: a swept topology ``name`` alone when the
    sweep sets one, else the topology file (when swept) and the swept topology keys."""
    keys = [k for k in sweep.swept if is_topology_param(k)]
    if "name" in keys:
        return ["name"]
    return (["topology"] if "topology" in sweep.swept else []) + keys


def study_points(sweep: Sweep, out_dir: str | os.PathLike, prices=None):
    """:func:`netsim.analysis.pareto.design_points` of the sweep's complete configurations in
    ``out_dir`` (others there are ignored).  ``prices`` (a price file or mapping, docs/cost.md):
    each configuration's topology is rebuilt and its cost and power taken from that table instead
    of the defaults the ``runs`` rows hold.  Empty when nothing is complete."""
    import pandas as pd

    from netsim.analysis.pareto import design_points
    from netsim.results.dataset import open_results

    try:
        runs = open_results(out_dir).runs
    except FileNotFoundError:
        runs = pd.DataFrame()
    if runs.empty or "run_id" not in runs:
        return design_points(pd.DataFrame({"run_id": [], "time_ns": [], "cost_usd": [], "power_w": []}),
                             fabric="run_id", workload="run_id")
    runs = runs.assign(run_id=runs["run_id"].astype(str))
    runs = runs[runs["run_id"].isin(set(sweep.run_ids))].reset_index(drop=True)
    cols = fabric_columns(sweep)
    runs["_fabric"] = _labels(runs, cols) if cols else runs.get("topology", "fabric").astype(str)
    if prices is not None:
        runs = _repriced(sweep, runs, prices)
    return design_points(runs, fabric="_fabric")


def _labels(runs, cols: list[str]):
    def one(row) -> str:
        parts = []
        for c in cols:
            v = row.get(c)
            if c == "topology":
                parts.append(str(v).rsplit("/", 1)[-1].removesuffix(".yaml"))
            elif c == "name":
                parts.append(str(v))
            elif v is not None and str(v) not in ("nan", "None"):
                parts.append(f"{c.rsplit('.', 1)[-1]}={v}")
        return " ".join(parts)

    return runs.apply(one, axis=1)


def _repriced(sweep: Sweep, runs, prices):
    """``runs`` with cost and power from ``prices`` (each distinct topology priced once)."""
    from netsim.sweep.worker import topology_for
    from netsim.topology.cost import fabric_cost
    from netsim.topology.prices import load_prices

    table = load_prices(prices)  # read once; a bad file is one error line before any topology is built
    where = {rid: i for i, rid in enumerate(sweep.run_ids)}
    cache: dict[str, dict] = {}
    runs = runs.copy()
    for col in ("cost_usd", "power_w", "cost_usd_per_gpu", "power_w_per_gpu"):
        runs[col] = float("nan")
    for idx, rid in runs["run_id"].items():
        i = where[rid]
        cfg, paths = sweep.configs[i], sweep.paths[i]
        key = repr(sorted((k, repr(v)) for k, v in cfg.items() if k == "topology" or is_topology_param(k)))
        if key not in cache:
            cache[key] = fabric_cost(topology_for(cfg, paths), prices=table)
        c = cache[key]
        runs.loc[idx, ["cost_usd", "power_w", "cost_usd_per_gpu", "power_w_per_gpu"]] = \
            [c["total_usd"], c["total_w"], c["usd_per_gpu"], c["w_per_gpu"]]
    return runs


def design_answer(points, tolerance: float = 0.05) -> str:
    """The text ``netsim sweep`` prints: the cheapest and the least-power configuration within
    ``tolerance`` of the best time, per workload; empty when the points have no cost columns."""
    from netsim.analysis.pareto import pareto_answer

    if points.empty or "cost_usd" not in points or points["cost_usd"].isna().all():
        return ""
    lines = [pareto_answer(points, tolerance, metric="cost_usd")]
    if "power_w" in points and points["power_w"].notna().any():
        lines.append(pareto_answer(points, tolerance, metric="power_w"))
    return "\n".join(lines)
