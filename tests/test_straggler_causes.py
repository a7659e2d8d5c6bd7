"""Analysis that tells causes apart (issue 35 item 5): a pipeline stage is not a straggler, a slow GPU
is not a slow host, and plots read in units that suit their span."""

import re

import numpy as np
import pandas as pd
import pytest

from netsim.analysis import plots as P
from netsim.analysis import stragglers as S


def _job(factor_of, ranks=64, steps=4, stage_of=lambda r: 0, seed=7, sigma=0.01):
    """Compute ops of a synchronous job: per rank and microbatch, the ops of its pipeline stage, each
    taking its base time x the rank's jitter (log-normal, clipped to ±5 %, as the notebook's faults)
    x ``factor_of(rank)``.  Stage 0 runs an embedding and layer 0; stage 1 layer 1 and the LM head,
    about three times the compute."""
    work = {0: (("embedding", 200.0), ("L0", 1000.0)), 1: (("L1", 1000.0), ("lm_head", 2500.0))}
    jitter = np.clip(np.random.default_rng(seed).lognormal(0.0, sigma, ranks), 0.95, 1.05)
    rows = []
    for r in range(ranks):
        t = 0.0
        for s in range(steps):
            for name, base in work[stage_of(r)]:
                d = base * jitter[r] * factor_of(r)
                rows.append({"rank": r, "kind": "compute", "name": f"mb{s}.fwd.{name}", "start_ns": t,
                             "end_ns": t + d})
                t += d
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ heat map
def test_pipeline_stages_do_not_show_as_hot_in_the_heat_map():
    stage = lambda r: r // 8  # noqa: E731  ranks 0-7 stage 0, 8-15 stage 1 (three times the compute)
    ops = _job(lambda r: 1.0, ranks=16, stage_of=stage)
    absolute = S.compute_heatmap(ops, relative=False)
    assert absolute.loc[8:].to_numpy().min() > 2.5 * absolute.loc[:7].to_numpy().max()  # what the old map showed
    heat = S.compute_heatmap(ops)
    assert heat.attrs["value"] == "ratio" and heat.shape == (16, 4)
    assert np.abs(heat.to_numpy() - 1.0).max() < 0.05  # every stage as fast as its peers: nothing hot
    # a slow GPU on the light stage is the hottest row; on the absolute map a heavy-stage rank is
    slow = _job(lambda r: 1.1 if r == 3 else 1.0, ranks=16, stage_of=stage)
    assert S.compute_heatmap(slow).mean(axis=1).idxmax() == 3
    assert S.compute_heatmap(slow, relative=False).mean(axis=1).idxmax() >= 8
    assert S.compute_heatmap(slow).loc[3].to_numpy() == pytest.approx(np.full(4, 1.1), rel=0.05)


def test_heat_map_compares_the_same_op_at_the_same_step():
    # occurrence steps: the 2nd "fwd" of every rank is twice the 1st; neither step is hot on any rank
    ops = pd.DataFrame({"rank": [0, 0, 1, 1, 2, 2], "kind": "compute", "name": "fwd",
                        "start_ns": [0, 10, 0, 10, 0, 10], "end_ns": [10, 30, 10, 30, 10, 40]})
    heat = S.compute_heatmap(ops)
    assert heat.loc[[0, 1]].to_numpy().tolist() == [[1.0, 1.0], [1.0, 1.0]] and heat.loc[2].tolist() == [1.0, 1.5]


def test_heat_map_plot_is_centred_on_peers_and_marks_hosts():
    ops = _job(lambda r: 1.1 if r == 5 else 1.0, ranks=32)
    fig = P.plot_heatmap(S.compute_heatmap(ops), hosts=8)
    ax, image = fig.axes[0], fig.axes[0].images[0]
    lo, hi = image.get_clim()
    assert lo == pytest.approx(2 - hi) and hi == pytest.approx(1.1, abs=0.02)  # centred on 1.0: red = slower
    assert "as fast as peers" in fig.axes[1].get_ylabel()
    assert [line.get_ydata()[0] for line in ax.lines] == [7.5, 15.5, 23.5]  # lines between the 4 hosts
    # an absolute map keeps its own scale, in a unit that suits it
    fig = P.plot_heatmap(S.compute_heatmap(ops, relative=False))
    assert fig.axes[1].get_ylabel() == "compute time (µs)" and "compute time" in fig.axes[0].get_title()


# ------------------------------------------------------ slow GPU or slow host
def _gpu_and_host(extra=None):
    """The notebook's case: 64 ranks on 8 hosts, GPU 5 (host 0) and every GPU of host 5 10 % slower."""
    def factor(r):
        f = 1.1 if r == 5 or r // 8 == 5 else 1.0
        return f * (extra or {}).get(r, 1.0)
    return _job(factor)


def test_a_slow_gpu_and_a_slow_host_are_told_apart():
    ops = _gpu_and_host()
    ranks = S.slow_ranks(ops, hosts=8)
    assert ranks.loc[ranks["flagged"], "rank"].tolist() == [5, *range(40, 48)]  # every slow GPU
    hosts = S.slow_hosts(ops, 8)
    assert hosts.loc[hosts["flagged"], "host"].tolist() == [5]  # not host 0: only one of its GPUs is slow
    h = hosts.set_index("host")
    assert h.loc[0, "slow_gpus"] == 1 and h.loc[0, "max_pct"] > 5 and abs(h.loc[0, "pct_over_median"]) < 2
    assert h.loc[5, "pct_over_median"] == pytest.approx(10.0, abs=2.0) and h.loc[5, "slow_gpus"] == 8
    causes = S.straggler_causes(ops, 8)
    assert causes[["cause", "host"]].values.tolist() == [["host", 5], ["gpu", 0]]
    assert causes["rank"].isna().tolist() == [True, False] and causes["rank"].iloc[1] == 5
    assert causes["gpus"].tolist() == [8, 1] and causes["pct_over_median"].iloc[1] == pytest.approx(10, abs=2)


def test_a_gpu_slow_beyond_its_slow_host_is_named_too():
    causes = S.straggler_causes(_gpu_and_host({42: 1.25}), 8)
    assert causes[["cause", "host", "rank"]].astype(object).values.tolist() == [
        ["host", 5, pd.NA], ["gpu", 5, 42], ["gpu", 0, 5]]
    assert causes.set_index("rank").loc[42, "pct_over_host"] == pytest.approx(25.0, abs=3.0)
    # 12 % over its peers but only 2 % over the rest of its slow host: the host explains it
    causes = S.straggler_causes(_gpu_and_host({43: 1.02}), 8)
    assert causes["rank"].dropna().tolist() == [5] and S.slow_ranks(_gpu_and_host({43: 1.02}))["flagged"].iloc[43]


@pytest.mark.parametrize("slow_gpus, host_flagged", [(3, False), (4, False), (5, True), (8, True)])
def test_a_host_is_slow_when_a_majority_of_its_gpus_are(slow_gpus, host_flagged):
    ops = _job(lambda r: 1.1 if 16 <= r < 16 + slow_gpus else 1.0)
    causes = S.straggler_causes(ops, 8)
    assert (causes["cause"] == "host").any() == host_flagged
    named = set(causes.loc[causes["cause"] == "gpu", "rank"])
    assert named == (set() if host_flagged else set(range(16, 16 + slow_gpus)))


def test_hosts_from_the_ranks_table_with_a_strided_placement():
    # rank r on host r % 8: host 5 holds ranks 5, 13, ..., 61
    ops = _job(lambda r: 1.1 if r % 8 == 5 or r == 10 else 1.0)
    table = pd.DataFrame({"rank": range(64), "host": [r % 8 for r in range(64)]})
    causes = S.straggler_causes(ops, table)
    assert causes[["cause", "host"]].values.tolist() == [["host", 5], ["gpu", 2]] and causes["rank"].iloc[1] == 10


def test_nothing_slow_names_nothing():
    causes = S.straggler_causes(_job(lambda r: 1.0), 8)
    assert causes.empty and list(causes.columns) == ["cause", "host", "rank", "gpus", "pct_over_median",
                                                     "pct_over_host", "robust_z"]
    assert not S.slow_hosts(_job(lambda r: 1.0), 8)["flagged"].any()


# -------------------------------------------------------------------- units
def test_plots_use_units_that_suit_the_span():
    assert P.time_axis(6e8) == (1e6, "ms") and P.time_axis(2500) == (1e3, "µs") and P.time_axis(3e9) == (1e9, "s")
    # issue 35: a 0.6 s iteration's timeline ran to 600,000 on a µs axis
    ops = pd.DataFrame({"rank": [0, 0, 1], "kind": ["compute", "collective", "compute"], "name": "x",
                        "start_ns": [0.0, 4e8, 0.0], "end_ns": [4e8, 6e8, 5e8]})
    ax = P.plot_timeline(ops).axes[0]
    assert ax.get_xlabel() == "time (ms)" and 600 <= ax.get_xlim()[1] < 1000
    bd = pd.DataFrame({"rank": [0, 1], "compute_ns": [4e8, 5e8], "non_compute_ns": [2e8, 0.0],
                       "idle_ns": [0.0, 1e8]})
    ax = P.plot_breakdown(bd).axes[0]
    assert ax.get_ylabel() == "time (ms)" and ax.get_ylim()[1] < 1000
    skew = pd.DataFrame({"group": ["1", "1"], "seq": [0, 1], "comm_type": "ALL_REDUCE",
                         "first_issue_ns": [1e8, 5e8], "skew_ns": [2e3, 3e6], "last_rank": [1, 3]})
    ax = P.plot_launch_skew(skew).axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("first issue (ms)", "skew (ms)")
    assert [t.get_text() for t in ax.texts] == ["ALL_REDUCE #1 on group 1: 3.0 ms, last rank 3"]


def test_hosts_from_a_ranks_table_of_several_runs():
    table = pd.DataFrame({"rank": list(range(64)) * 2, "host": [r // 8 for r in range(64)] * 2,
                          "run_id": ["a"] * 64 + ["b"] * 64})
    assert S.host_of(pd.Series([5, 42]), table).tolist() == [0, 5]  # one placement: one host per rank
    table.loc[64, "host"] = 3
    with pytest.raises(ValueError, match="several hosts"):
        S.host_of(pd.Series([0]), table)


def test_late_start_caveat_names_slow_hosts_apart_from_slow_ranks():
    from netsim.analysis.late_start import LateStart, late_start_caveat

    ops = _gpu_and_host()
    late = LateStart("ALL_REDUCE", pd.DataFrame(), pd.Series(dtype=int), [20])  # a rank that only waited
    cav = late_start_caveat(late, S.slow_ranks(ops, hosts=8), S.slow_hosts(ops, 8))
    assert "(slow rank(s) 5, 40, 41, 42, 43, 44, 45, 46, 47; slow host(s) 5)" in cav


def test_netsim_analyze_report_names_the_slow_gpu_and_the_slow_host():
    """The report ``netsim analyze`` prints names the same culprits: GPU rank 5 and host 5 (ranks 40-47),
    and reads its times in a unit that suits them."""
    from netsim.analysis.report import analyze, clean
    from netsim.cli.analyze import format_report

    ops = _job(lambda r: 1.1 if r == 5 or 40 <= r < 48 else 1.0, ranks=64)
    ranks = pd.DataFrame({"rank": range(64), "host": [r // 8 for r in range(64)]})
    report = clean(analyze({"ops": ops, "ranks": ranks}))
    assert [(c["cause"], c["host"], c["rank"]) for c in report["causes"]] == [("host", 5, None), ("gpu", 0, 5)]
    assert report["slow_hosts"] == [5]
    text = format_report("r", {k: v for k, v in report.items() if k != "_frames"})
    assert re.search(r"causes      host 5 \(8 GPUs, \+1\d\.\d%\); GPU rank 5 on host 0 \(\+\d+\.\d%\)", text)
    assert re.search(r"iteration     5\.\d+ us ", text)  # 4 steps of ~1.2 us of compute, in us
