"""Matplotlib figures of the analysis DataFrames (Agg canvas; no pyplot global state).

Every function takes DataFrames (the results tables or the outputs of
:mod:`netsim.analysis`), an optional output ``path`` (PNG, SVG, PDF: by
suffix) and returns the :class:`matplotlib.figure.Figure`.  Used by
``netsim analyze --plots`` and the notebooks; analysis modules never plot.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from netsim.analysis.links import hottest_links, link_tiers, TIER_ORDER
from netsim.analysis.overlap import temporal_breakdown
from netsim.analysis.stragglers import compute_heatmap, host_of
from netsim.units import time_unit

__all__ = ["plot_breakdown", "plot_heatmap", "plot_launch_skew", "plot_link_utilization", "plot_timeline",
           "save_report_plots", "time_axis"]

KIND_COLORS = {"compute": "#4C72B0", "collective": "#DD8452", "send": "#C44E52", "recv": "#8172B3",
               "memory": "#937860"}


def _figure(w: float, h: float) -> Figure:
    fig = Figure(figsize=(w, h), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Figure, path: str | os.PathLike | None) -> Figure:
    if path is not None:
        from netsim.results.io import atomic_file

        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(path, "wb") as fh:
            fig.savefig(fh, dpi=110, format=Path(path).suffix.lstrip(".") or "png")
    return fig


def time_axis(span_ns: float) -> tuple[float, str]:
    """Divisor (ns) and unit label of a time axis spanning ``span_ns``: ns, µs, ms or s, so the
    largest value lies in [1, 1000) (a 0.6 s timeline reads 0-600 ms, not 0-600,000 µs).

    >>> time_axis(6e8), time_axis(2500)
    ((1000000.0, 'ms'), (1000.0, 'µs'))
    """
    name, _ = time_unit(float(span_ns) * 1e-9)
    return {"s": 1e9, "ms": 1e6, "us": 1e3, "ns": 1.0}[name], {"us": "µs"}.get(name, name)


def plot_heatmap(heatmap: pd.DataFrame, path: str | os.PathLike | None = None, *, title: str | None = None,
                 ops: pd.DataFrame | None = None, hosts=None) -> Figure:
    """MegaScale-style heat map of :func:`~netsim.analysis.stragglers.compute_heatmap`; or pass ``ops``.

    A relative heat map (the default of ``compute_heatmap``: each op against the
    same op on the other ranks) is drawn on a diverging scale centred on 1.0
    (red = slower than peers, at least ±5 % wide so jitter stays pale); an
    absolute one (``relative=False``) in a time unit that suits it.  ``hosts``
    (as in :func:`~netsim.analysis.stragglers.slow_ranks`) draws a line between
    hosts: a slow host is a red block, a slow GPU one red row.
    """
    if ops is not None:
        heatmap = compute_heatmap(ops)
    data = heatmap.to_numpy(dtype=float)
    relative = heatmap.attrs.get("value", "ratio" if data.size and np.nanmax(data, initial=0.0) < 100 else "ns") \
        == "ratio"
    if title is None:
        title = ("compute per rank and step / the same ops' median on all ranks" if relative
                 else "compute time per rank and step")
    fig = _figure(max(6.0, min(14.0, 0.35 * data.shape[1] + 2.5)), max(2.5, min(8.0, 0.12 * data.shape[0] + 1.5)))
    ax = fig.add_subplot()
    if data.size == 0:
        ax.text(0.5, 0.5, "no compute ops", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(title)
        return _save(fig, path)
    if relative:
        half = max(float(np.nanmax(np.abs(data - 1.0), initial=0.0)), 0.05)
        im = ax.imshow(data, aspect="auto", interpolation="nearest", cmap="RdBu_r", vmin=1 - half, vmax=1 + half)
        label = "compute / same ops on other ranks (1 = as fast as peers)"
    else:
        scale, unit = time_axis(np.nanmax(data, initial=0.0))
        im = ax.imshow(data / scale, aspect="auto", interpolation="nearest", cmap="viridis")
        label = f"compute time ({unit})"
    ax.set_xlabel("step")
    ax.set_ylabel("rank")
    _ticks(ax.set_yticks, ax.set_yticklabels, heatmap.index.tolist())
    _ticks(ax.set_xticks, ax.set_xticklabels, heatmap.columns.tolist())
    if hosts is not None:
        host = host_of(pd.Series(heatmap.index, dtype=np.int64), hosts)
        for y in np.flatnonzero(host[1:] != host[:-1]):
            ax.axhline(y + 0.5, color="black", linewidth=0.6)
        ax.set_ylabel("rank (lines between hosts)")
    fig.colorbar(im, ax=ax, label=label)
    ax.set_title(title, fontsize="medium")
    return _save(fig, path)


def _ticks(set_pos, set_labels, labels: list, most: int = 32) -> None:
    step = max(1, int(np.ceil(len(labels) / most)))
    pos = list(range(0, len(labels), step))
    set_pos(pos)
    set_labels([str(labels[p]) for p in pos])


def plot_timeline(ops: pd.DataFrame, path: str | os.PathLike | None = None, *, ranks=None,
                  max_ranks: int = 32, title: str = "per-rank timeline", flagged=None) -> Figure:
    """Gantt chart of ops per rank, colored by kind.

    Without ``ranks``: every rank when at most ``max_ranks``, else the ranks
    :func:`~netsim.analysis.timeline.timeline_ranks` picks (flagged slow ranks,
    latest and earliest finishers); the tick labels and title say which.
    """
    from netsim.analysis.timeline import timeline_ranks

    if ranks is None:
        pick = timeline_ranks(ops, max_ranks=max_ranks, flagged=flagged)
        shown = pick["rank"].tolist()
        why = dict(zip(shown, pick["reason"]))
        total = int(ops["rank"].nunique())
        if len(shown) < total:
            counts = pick["reason"].value_counts()
            words = {"flagged": "flagged slow", "latest": "latest-finishing", "earliest": "earliest-finishing"}
            parts = [f"{counts[k]} {v}" for k, v in words.items() if k in counts]
            title = f"{title}: {len(shown)} of {total} ranks ({', '.join(parts)})"
    else:
        shown = sorted(ops.loc[ops["rank"].isin(list(ranks)), "rank"].unique().tolist())[:max_ranks]
        why = {}
    sel = ops[ops["rank"].isin(shown)]
    fig = _figure(10.0, max(2.5, 0.3 * len(shown) + 1.2))
    ax = fig.add_subplot()
    row = {r: i for i, r in enumerate(shown)}
    t0 = float(ops["start_ns"].min()) if len(ops) else 0.0
    scale, unit = time_axis(float(sel["end_ns"].max()) - t0 if len(sel) else 0.0)
    kinds = sel["kind"].astype(str).to_numpy()
    for kind in sorted(set(kinds.tolist())):
        part = sel[kinds == kind]
        start = (part["start_ns"].to_numpy(float) - t0) / scale
        width = np.maximum((part["end_ns"] - part["start_ns"]).to_numpy(float) / scale, 1e-9)
        color, label = KIND_COLORS.get(kind, "#999999"), kind
        # compute above a rank's centre line, communication and the rest below it: one collection per row
        for r, idx in pd.Series(np.arange(len(part))).groupby(part["rank"].to_numpy()).groups.items():
            idx = np.asarray(idx)
            y = row[r] + (-0.4 if kind == "compute" else 0.05)
            ax.broken_barh(list(zip(start[idx], width[idx])), (y, 0.35), facecolors=color, label=label,
                           linewidth=0)
            label = None
    ax.set_yticks(range(len(shown)))
    mark = {"flagged": " slow", "latest": " late", "earliest": " early"}
    ax.set_yticklabels([f"{r}{mark.get(why.get(r), '')}" for r in shown], fontsize="small")
    ax.invert_yaxis()
    ax.set_xlabel(f"time ({unit})")
    ax.set_ylabel("rank")
    ax.set_title(title)
    if len(sel):
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    return _save(fig, path)


def plot_breakdown(breakdown: pd.DataFrame, path: str | os.PathLike | None = None, *,
                   title: str = "temporal breakdown per rank", ops: pd.DataFrame | None = None) -> Figure:
    """Stacked bars of compute / non-compute (exposed comm) / idle per rank from :func:`temporal_breakdown`."""
    if ops is not None:
        breakdown = temporal_breakdown(ops)
    fig = _figure(max(5.0, min(14.0, 0.25 * len(breakdown) + 3)), 3.5)
    ax = fig.add_subplot()
    x = np.arange(len(breakdown))
    bottom = np.zeros(len(breakdown))
    cols = ("compute_ns", "non_compute_ns", "idle_ns")
    scale, unit = time_axis(float(breakdown[list(cols)].sum(axis=1).max()) if len(breakdown) else 0.0)
    for col, color, label in zip(cols, ("#4C72B0", "#DD8452", "#BBBBBB"),
                                 ("compute", "non-compute (exposed comm)", "idle")):
        v = breakdown[col].to_numpy(float) / scale
        ax.bar(x, v, bottom=bottom, color=color, label=label, width=0.85)
        bottom += v
    _ticks(ax.set_xticks, ax.set_xticklabels, breakdown["rank"].tolist())
    ax.set_xlabel("rank")
    ax.set_ylabel(f"time ({unit})")
    ax.set_title(title)
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _save(fig, path)


def plot_link_utilization(links: pd.DataFrame, path: str | os.PathLike | None = None, *, k: int = 10,
                          title: str = "link utilization") -> Figure:
    """Left: utilization distribution per tier over the links that carried traffic (idle links,
    ``bytes == 0``, would pull every box to 0; each tick says how many links were active);
    right: the ``k`` hottest links."""
    t = link_tiers(links)
    t = t.assign(_active=t["bytes"].to_numpy(float) > 0 if "bytes" in t.columns else t["utilization"] > 0)
    tiers = sorted(t["tier"].unique().tolist(),
                   key=lambda x: (TIER_ORDER.index(x) if x in TIER_ORDER else len(TIER_ORDER), x))
    fig = _figure(11.0, 3.8)
    ax1, ax2 = fig.subplots(1, 2, width_ratios=[1, 1.3])
    data = [t.loc[(t["tier"] == tier) & t["_active"], "utilization"].to_numpy(float) for tier in tiers]
    n_all = [int((t["tier"] == tier).sum()) for tier in tiers]
    if data:
        ax1.boxplot([d if len(d) else [np.nan] for d in data], showfliers=True)
        ax1.set_xticks(range(1, len(tiers) + 1))
        ax1.set_xticklabels([f"{tier}\n{len(d)}/{n} active" for tier, d, n in zip(tiers, data, n_all)],
                            fontsize="small")
    ax1.set_ylabel("utilization")
    idle = sum(n_all) - sum(len(d) for d in data)
    ax1.set_title(f"per tier, active links only ({idle:,} idle excluded)")
    hot = hottest_links(links, k=k)
    labels = [f"{s}→{d}" for s, d in zip(hot.get("src", hot.index), hot.get("dst", hot.index))]
    ax2.barh(range(len(hot)), hot["utilization"].to_numpy(float), color="#C44E52")
    ax2.set_yticks(range(len(hot)))
    ax2.set_yticklabels(labels, fontsize="small")
    ax2.invert_yaxis()
    ax2.set_xlabel("utilization")
    ax2.set_title(f"{len(hot)} hottest links")
    fig.suptitle(title)
    return _save(fig, path)


def plot_launch_skew(skew: pd.DataFrame, path: str | os.PathLike | None = None, *,
                     title: str = "collective launch skew") -> Figure:
    """Launch skew (max − min issue time) of every collective instance in issue order, in time units that
    suit each axis."""
    fig = _figure(8.0, 3.2)
    ax = fig.add_subplot()
    xs, xu = time_axis(float(skew["first_issue_ns"].max()) if len(skew) else 0.0)
    ys, yu = time_axis(float(skew["skew_ns"].max()) if len(skew) else 0.0)
    for ctype, part in skew.groupby("comm_type", sort=True):
        ax.plot(part["first_issue_ns"].to_numpy(float) / xs, part["skew_ns"].to_numpy(float) / ys, "o",
                ms=3, label=str(ctype))
    ax.set_xlabel(f"first issue ({xu})")
    ax.set_ylabel(f"skew ({yu})")
    ax.set_title(title)
    if len(skew) and float(skew["skew_ns"].max()) > 0:
        w = skew.loc[skew["skew_ns"].idxmax()]
        x, y = float(w["first_issue_ns"]) / xs, float(w["skew_ns"]) / ys
        ax.plot([x], [y], "o", ms=8, mfc="none", mec="#C44E52")
        ax.annotate(f"{w['comm_type']} #{w['seq']} on group {w['group']}: {y:,.1f} {yu}, last rank {w['last_rank']}",
                    (x, y), xytext=(6, -4), textcoords="offset points", fontsize="small", va="top",
                    ha="right" if x > 0.6 * float(skew["first_issue_ns"].max()) / xs else "left")
    if len(skew):
        ax.legend(fontsize="small")
    return _save(fig, path)


def save_report_plots(outdir: str | os.PathLike, ops: pd.DataFrame, links: pd.DataFrame | None = None, *,
                      skew: pd.DataFrame | None = None, breakdown: pd.DataFrame | None = None,
                      hosts=None) -> list[Path]:
    """Write ``heatmap.png`` (relative to peers; ``hosts`` draws host lines), ``timeline.png``,
    ``breakdown.png``, ``launch_skew.png`` and ``links.png``."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    jobs = [("heatmap.png", lambda p: plot_heatmap(compute_heatmap(ops), p, hosts=hosts)),
            ("timeline.png", lambda p: plot_timeline(ops, p)),
            ("breakdown.png", lambda p: plot_breakdown(temporal_breakdown(ops) if breakdown is None else breakdown, p))]
    if skew is not None and len(skew):
        jobs.append(("launch_skew.png", lambda p: plot_launch_skew(skew, p)))
    if links is not None and len(links):
        jobs.append(("links.png", lambda p: plot_link_utilization(links, p)))
    for name, job in jobs:
        job(out / name)
        written.append(out / name)
    return written
