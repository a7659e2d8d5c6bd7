"""Analysis output that must not mislead: timeline ranks, plot labels, idle links, trace rounding."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from netsim.analysis import plots as P
from netsim.analysis.timeline import chrome_trace, timeline_ranks, write_chrome_trace


def _job(ranks=64, slow=range(40, 48), factor=1.3):
    rows = []
    for r in range(ranks):
        t = 0.0
        for s in range(3):
            d = 1000.0 * (factor if r in slow else 1.0)
            rows.append({"rank": r, "node_id": s, "name": f"mb{s}.fwd", "kind": "compute", "comm_type": None,
                         "group": None, "bytes": 0, "start_ns": t, "end_ns": t + d})
            t += d
    return pd.DataFrame(rows)


def test_timeline_shows_the_straggler_and_says_which_ranks():
    ops = _job()
    pick = timeline_ranks(ops, max_ranks=32)
    assert len(pick) == 32 and set(range(40, 48)) <= set(pick["rank"])
    assert set(pick.loc[pick["rank"].between(40, 47), "reason"]) == {"flagged"}
    assert {"flagged", "latest", "earliest"} == set(pick["reason"])
    fig = P.plot_timeline(ops)
    ax = fig.axes[0]
    assert "32 of 64 ranks (8 flagged slow" in ax.get_title()
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert "40 slow" in labels and len(labels) == 32
    # few ranks: all of them, no selection note
    few = _job(ranks=8, slow=[3])
    assert timeline_ranks(few)["reason"].eq("all").all()
    assert P.plot_timeline(few).axes[0].get_title() == "per-rank timeline"
    # explicit ranks are honoured
    assert [t.get_text() for t in P.plot_timeline(ops, ranks=[0, 41]).axes[0].get_yticklabels()] == ["0", "41"]


def test_launch_skew_plot_labels_the_outlier():
    skew = pd.DataFrame({"group": ["1", "1", "2"], "seq": [0, 1, 0], "comm_type": ["ALL_REDUCE"] * 3,
                         "first_issue_ns": [0.0, 5e3, 9e3], "skew_ns": [100.0, 7e4, 200.0], "last_rank": [1, 42, 3]})
    ax = P.plot_launch_skew(skew).axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert texts == ["ALL_REDUCE #1 on group 1: 70.0 µs, last rank 42"]


def test_link_boxplot_excludes_idle_links():
    n = 512
    active = np.zeros(n, bool)
    active[:64] = True
    links = pd.DataFrame({"link_id": range(n), "kind": "ib", "src": [f"leaf{i}" for i in range(n)],
                          "dst": [f"spine{i}" for i in range(n)], "src_kind": "leaf", "dst_kind": "spine",
                          "capacity_GBps": 50.0, "bytes": np.where(active, 1e6, 0.0),
                          "busy_ns": 0.0, "utilization": np.where(active, 0.8, 0.0), "peak_flows": 1})
    ax = P.plot_link_utilization(links).axes[0]
    assert "448 idle excluded" in ax.get_title()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["spine\n64/512 active"]
    ys = np.concatenate([np.asarray(line.get_ydata(), float) for line in ax.lines])
    assert np.nanmin(ys) == pytest.approx(0.8)  # the box is the active links', not pulled to 0


def test_chrome_trace_slices_never_overlap_after_rounding(tmp_path):
    rng = np.random.default_rng(0)
    # back-to-back ops whose boundaries fall on fractional ns (as simulated times do)
    d = rng.uniform(0.1, 5000.0, size=2000)
    ends = np.cumsum(d)
    starts = np.r_[0.0, ends[:-1]]
    ops = pd.DataFrame({"rank": 0, "node_id": np.arange(d.size), "name": "k", "kind": "compute",
                        "start_ns": starts + 1e6 / 3, "end_ns": ends + 1e6 / 3})
    write_chrome_trace(tmp_path / "t.json", ops)
    xs = [e for e in json.loads((tmp_path / "t.json").read_text())["traceEvents"] if e["ph"] == "X"]
    assert {e["tid"] for e in xs} == {0}  # one lane, no spill
    ts = np.array([round(e["ts"] * 1000) for e in xs])
    dur = np.array([round(e["dur"] * 1000) for e in xs])
    assert (ts[:-1] + dur[:-1] <= ts[1:]).all()
    # every value is a whole number of ns: at most 3 decimals in µs
    assert all(abs(e["ts"] * 1000 - round(e["ts"] * 1000)) < 1e-6 for e in xs)
    assert chrome_trace(ops.head(1))["traceEvents"][-1]["ts"] == pytest.approx(round(1e6 / 3) / 1000)


def test_change_phrase_follows_the_number():
    from netsim.analysis.overlap import change_phrase

    assert change_phrase(0.99) == "0.99x: a loss of 1.0 %"
    assert change_phrase(1.08).endswith("a gain of 8.0 %") and change_phrase(0.999).endswith("no measurable change")
    src = (Path(__file__).resolve().parents[1] / "notebooks" / "overlap_analysis.py").read_text()
    assert "small gain" not in src and "change_phrase(summary.loc[name, 'speedup'])" in src


def test_faults_doc_finds_stragglers_by_compute_not_finish():
    doc = (Path(__file__).resolve().parents[1] / "docs" / "faults.md").read_text()
    assert 'sort_values("finish_ns").tail()      # stragglers' not in doc
    assert 'slow_ranks(res.ops, hosts=res.ranks).sort_values("pct_over_median").tail()' in doc
    # two pipeline stages: stage 0 (ranks 0-1) finishes last by design; rank 3 (stage 1) is 10 % slow
    from netsim.analysis.stragglers import slow_ranks

    rows = []
    for r in range(4):
        t = 0.0 if r < 2 else 500.0
        for s in range(4):
            d = 1000.0 * (1.1 if r == 3 else 1.0)
            rows.append({"rank": r, "kind": "compute", "name": f"mb{s}.{'s0' if r < 2 else 's1'}",
                         "start_ns": t, "end_ns": t + d})
            t += d
        if r < 2:
            rows.append({"rank": r, "kind": "compute", "name": "tail", "start_ns": t + 9000, "end_ns": t + 9100})
    ops = pd.DataFrame(rows)
    ranks = pd.DataFrame({"rank": range(4), "host": range(4),
                          "finish_ns": ops.groupby("rank")["end_ns"].max().to_numpy()})
    assert ranks.sort_values("finish_ns").tail(1)["rank"].item() in (0, 1)  # finish order: the pipeline
    assert slow_ranks(ops, hosts=ranks).sort_values("pct_over_median").tail(1)["rank"].item() == 3


def test_utilization_by_tier_reports_active_links_apart():
    from netsim.analysis.links import utilization_by_tier

    n = 8
    links = pd.DataFrame({"link_id": range(n), "kind": "ib", "src_kind": "leaf", "dst_kind": "spine",
                          "src": [f"leaf{i}" for i in range(n)], "dst": [f"spine{i}" for i in range(n)],
                          "capacity_GBps": 50.0, "bytes": [1e6, 1e6] + [0.0] * 6, "busy_ns": 0.0,
                          "utilization": [0.8, 0.6] + [0.0] * 6, "peak_flows": 1})
    row = utilization_by_tier(links).iloc[0]
    assert row["active_links"] == 2 and row["p50_utilization"] == 0.0
    assert row["active_mean_utilization"] == pytest.approx(0.7) and row["active_p50_utilization"] == pytest.approx(0.7)
