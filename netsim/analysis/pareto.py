"""The designer's answer from a design study: Pareto fronts of time against cost or power, and the
cheapest (or least-power) fabric within a tolerance of the best time, per workload.

DataFrames in, DataFrames (and one string) out; nothing here plots.  Every function takes a table
with one row per (workload, fabric): :func:`design_points` builds it from a sweep's ``runs`` table
(``netsim.open_results(DIR).runs``), whose rows carry ``cost_usd`` and ``power_w`` (docs/cost.md).

>>> import pandas as pd
>>> pts = pd.DataFrame({"workload": ["w"] * 3, "fabric": ["a", "b", "c"], "time_s": [1.0, 1.04, 2.0],
...                     "cost_usd": [10.0, 5.0, 6.0], "power_w": [1.0, 1.0, 1.0]})
>>> pareto_front(pts)["fabric"].tolist()
['a', 'b']
>>> print(pareto_answer(pts))
cheapest within 5 % of the best: w: b (cost 5 USD, 4 % slower than the fastest, a)
"""

from __future__ import annotations

import math

#: Metrics a front or an answer may be taken over: column -> (what the answer calls it, its unit).
METRICS = {"cost_usd": ("cost", "USD"), "power_w": ("power", "W"), "cost_usd_per_gpu": ("cost per GPU", "USD"),
           "power_w_per_gpu": ("power per GPU", "W")}


def design_points(runs, fabric=None, workload=None):
    """One row per complete configuration of a sweep's ``runs`` table with the columns the other
    functions take: ``workload``, ``fabric``, ``time_s`` (a bench's ``time_ns``, a run's
    ``iteration_ns``), ``cost_usd``, ``power_w`` and their per-GPU figures, ``run_id``.

    ``fabric`` / ``workload``: a column name to take the label from, or None to build it from the
    columns that vary — the topology file's stem and its swept dotted keys (``scale_out....``,
    ``nodes``) for the fabric; the kind, op or generated model, GPUs and size for the workload.
    A row whose topology has a swept ``name`` (a dotted topology key) is labelled with it."""
    import pandas as pd

    df = runs.copy()
    if "status" in df:
        df = df[df["status"] == "ok"]
    time_ns = pd.Series(float("nan"), index=df.index)
    for col in ("iteration_ns", "time_ns"):
        if col in df:
            time_ns = time_ns.fillna(pd.to_numeric(df[col], errors="coerce"))
    out = pd.DataFrame({"run_id": df.get("run_id", pd.Series(range(len(df)), index=df.index))})
    out["workload"] = df[workload].astype(str) if workload else _workload_labels(df)
    out["fabric"] = df[fabric].astype(str) if fabric else _fabric_labels(df)
    out["time_s"] = time_ns / 1e9
    for col in ("cost_usd", "power_w", "cost_usd_per_gpu", "power_w_per_gpu", "cost_unpriced"):
        if col in df:
            out[col] = pd.to_numeric(df[col], errors="coerce")
    return out.sort_values(["workload", "time_s", "fabric"], kind="stable").reset_index(drop=True)


def _workload_labels(df):
    def label(row) -> str:
        if row.get("kind") == "bench":
            size = row.get("size")
            text = f"{row.get('op')} {int(row['n_gpus']) if _num(row.get('n_gpus')) else row.get('gpus')} GPUs"
            return text + (f" {_size(size)}" if _num(size) else "")
        model = row.get("llm.model")
        ranks = row.get("n_ranks")
        what = f"{model}" if isinstance(model, str) else str(row.get("workload", "run"))
        return what + (f" {int(ranks)} GPUs" if _num(ranks) else "")

    return df.apply(label, axis=1).astype(str)


def _fabric_labels(df):
    import pandas as pd

    if "name" in df and df["name"].notna().all():
        return df["name"].astype(str)
    topo = df["topology"].astype(str).str.rsplit("/", n=1).str[-1].str.replace(r"\.ya?ml$", "", regex=True) \
        if "topology" in df else pd.Series("", index=df.index)
    keys = [c for c in df.columns if c.split(".")[0] in ("scale_out", "nodes", "node")
            and df[c].astype(str).nunique(dropna=False) > 1]
    parts = [topo] + [f"{c.rsplit('.', 1)[-1]}=" + df[c].astype(str) for c in keys]
    label = parts[0]
    for p in parts[1:]:
        label = label + " " + p
    return label.str.strip()


def _num(v) -> bool:
    """A real number that is not NaN (numpy scalars included, booleans not)."""
    import numbers

    return isinstance(v, numbers.Real) and not isinstance(v, bool) and not math.isnan(v)


def _size(nbytes) -> str:
    n = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:g} {unit}"
        n /= 1024
    return f"{n:g} GiB"


#: Times within this relative distance of each other count as equal (the same schedule timed on two
#: topologies differs in the last bits of its floating-point sums).
RTOL = 1e-9


def _snapped(times, rtol: float = RTOL):
    """``times`` with each value within ``rtol`` (relative) of the smallest value of its run of close
    values replaced by that value, so near-equal times compare equal (NaN stays NaN)."""
    import pandas as pd

    out = pd.Series(times, dtype=float).copy()
    start = None
    for idx, t in out.dropna().sort_values(kind="stable").items():
        if start is None or t > start * (1 + rtol):
            start = t
        out.loc[idx] = start
    return out


def _check(points, time: str, metric: str, by: str | None) -> None:
    from netsim.errors import InputError

    need = [c for c in (time, metric, by, "fabric") if c]
    missing = [c for c in need if c not in points]
    if missing:
        raise InputError(f"expected columns {', '.join(need)}; missing {', '.join(missing)} (a sweep without "
                         "cost columns? docs/cost.md)", source="design points")


def _groups(points, by: str | None):
    if by is None:
        yield None, points
    else:
        yield from points.groupby(by, sort=True)


def pareto_front(points, time: str = "time_s", metric: str = "cost_usd", by: str | None = "workload"):
    """The rows of ``points`` on the Pareto front of (``time``, ``metric``), both minimised, per ``by``
    group (None: one front): a row is on it unless another row is no worse in both and better in
    one.  Rows equal in both are all kept (neither dominates the other); times within :data:`RTOL`
    of each other count as equal.  Rows with a missing time or metric are left out.  Sorted by group,
    then time, then metric (the rows' own times are returned)."""
    import pandas as pd

    _check(points, time, metric, by)
    points = points.reset_index(drop=True)  # labels are positions (a concatenated frame repeats labels)
    keep = []
    for _, g in _groups(points, by):
        g = g.dropna(subset=[time, metric])
        g = g.assign(**{time: _snapped(g[time])}).sort_values([time, metric], kind="stable")
        best = math.inf  # lowest metric of the rows faster than the current time
        prev, prev_kept = None, False
        for idx, t, m in zip(g.index, g[time].to_numpy(), g[metric].to_numpy()):
            kept = m < best or (prev_kept and (t, m) == prev)  # an equal twin of a row on the front
            if kept:
                keep.append(idx)
                best = min(best, m)
            prev, prev_kept = (t, m), kept
    front = points.loc[keep] if keep else points.iloc[0:0]
    order = ([by] if by else []) + [time, metric]
    return pd.DataFrame(front).sort_values(order, kind="stable").reset_index(drop=True)


def with_front(points, time: str = "time_s", metric: str = "cost_usd", by: str | None = "workload"):
    """``points`` with a boolean column ``on_front`` (for plots that draw every point and mark the front)."""
    _check(points, time, metric, by)
    front = pareto_front(points.assign(_row=range(len(points))), time, metric, by)
    out = points.copy()
    out["on_front"] = False
    out.iloc[front["_row"].to_numpy(), out.columns.get_loc("on_front")] = True
    return out


def cheapest_within(points, tolerance: float = 0.05, time: str = "time_s", metric: str = "cost_usd",
                    by: str | None = "workload"):
    """Per ``by`` group, the row of least ``metric`` among those whose ``time`` is within
    ``tolerance`` (a fraction: 0.05 is 5 %) of the group's best time; equal metrics go to the faster
    row; rows equal in both are named together (``fabric``: ``"a = b"``).  Columns: the group,
    ``fabric``, ``time``, ``metric``, ``best_fabric`` (the fastest: of equally fast rows those of
    least metric, named together), ``best_time``, ``slower`` (time / best time - 1), ``saving``
    (1 - metric / the fastest's metric), ``candidates`` (rows within the tolerance)."""
    import pandas as pd
    from netsim.errors import InputError

    if not isinstance(tolerance, (int, float)) or not 0 <= tolerance < math.inf:
        raise InputError(f"expected a tolerance >= 0 (a fraction: 0.05 is 5 %), got {tolerance!r}",
                         source="tolerance")
    _check(points, time, metric, by)
    rows = []
    for key, g in _groups(points, by):
        g = g.dropna(subset=[time, metric])
        if g.empty:
            continue
        own = g[time]
        g = g.assign(**{time: _snapped(own)})  # near-equal times compare equal (RTOL)
        t_best = g[time].min()
        fastest = g[g[time] == t_best]
        fastest = fastest[fastest[metric] == fastest[metric].min()]  # the cheapest of equally fast rows
        ok = g[g[time] <= t_best * (1 + tolerance)]
        m_min = ok[metric].min()
        pick = ok[ok[metric] == m_min]
        pick = pick[pick[time] == pick[time].min()]
        row = {} if by is None else {by: key}
        row.update({"fabric": " = ".join(sorted(pick["fabric"].astype(str))), time: float(own[pick.index[0]]),
                    metric: float(m_min), "best_fabric": " = ".join(sorted(fastest["fabric"].astype(str))),
                    "best_time": float(t_best), "slower": float(pick[time].iloc[0] / t_best - 1),
                    "saving": float(1 - m_min / fastest[metric].iloc[0]) if fastest[metric].iloc[0] else 0.0,
                    "candidates": int(len(ok))})
        rows.append(row)
    return pd.DataFrame(rows)


def pareto_answer(points, tolerance: float = 0.05, time: str = "time_s", metric: str = "cost_usd",
                  by: str | None = "workload") -> str:
    """The answer as text: ``cheapest within 5 % of the best: WORKLOAD: FABRIC (cost C USD, x % slower
    than the fastest, BEST)``, one workload per line (``least power within ...`` for a power metric)."""
    ans = cheapest_within(points, tolerance, time, metric, by)
    what, unit = METRICS.get(metric, (metric, ""))
    head = ("cheapest" if what.startswith("cost") else f"least {what}") + \
        f" within {_pct(tolerance)} % of the best:"
    lines = []
    for r in ans.to_dict(orient="records"):
        where = f"{r[by]}: " if by is not None else ""
        rel = "the fastest" if r["slower"] <= 0 else \
            f"{_pct(r['slower'])} % slower than the fastest, {r['best_fabric']}"
        lines.append(f"{where}{r['fabric']} ({what} {r[metric]:,.0f}{' ' + unit if unit else ''}, {rel})")
    if not lines:
        return f"{head} no complete configuration with a time and a {what}"
    return head + (" " + lines[0] if len(lines) == 1 else "".join("\n  " + x for x in lines))


def _pct(frac: float) -> str:
    """A fraction as a percentage without trailing zeros (0.05 -> '5', 0.0123 -> '1.2')."""
    v = 100 * float(frac)
    return f"{v:.0f}" if abs(v - round(v)) < 1e-9 or v >= 10 else f"{v:.1f}"
