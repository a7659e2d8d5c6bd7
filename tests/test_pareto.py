"""The design answer (issue 34 item 5): Pareto fronts of time vs cost and power, the cheapest within a
tolerance of the best time (netsim/analysis/pareto.py), a study of several parts, the answer
`netsim sweep` prints, and a user price file changing it (netsim/sweep/study.py)."""

import pandas as pd
import pytest
import yaml

import netsim
from netsim.analysis.pareto import cheapest_within, design_points, pareto_answer, pareto_front, with_front
from netsim.cli import main
from netsim.errors import InputError
from netsim.sweep import parse_sweep, run_sweep
from netsim.sweep.study import design_answer, fabric_columns, study_points
from netsim.topology.overrides import load_with_overrides
from netsim.topology.prices import load_prices

from conftest import TOPOLOGIES

STUDIES = TOPOLOGIES / "studies"


def _pts(rows, workload="w"):
    """Hand-built design points: (fabric, time_s, cost_usd[, power_w])."""
    return pd.DataFrame([{"workload": workload, "fabric": r[0], "time_s": r[1], "cost_usd": r[2],
                          "power_w": r[3] if len(r) > 3 else 1.0} for r in rows])


# ------------------------------------------------------------------ the front
def test_front_drops_dominated_points_and_keeps_the_staircase():
    pts = _pts([("fast-dear", 1.0, 100), ("mid", 2.0, 50), ("dominated", 2.5, 60), ("slow-cheap", 4.0, 10),
                ("same-cost-slower", 5.0, 10), ("same-time-dearer", 1.0, 120)])
    front = pareto_front(pts)
    assert front["fabric"].tolist() == ["fast-dear", "mid", "slow-cheap"]
    marked = with_front(pts)
    assert marked.set_index("fabric")["on_front"].to_dict() == {
        "fast-dear": True, "mid": True, "dominated": False, "slow-cheap": True, "same-cost-slower": False,
        "same-time-dearer": False}


def test_front_keeps_exact_ties_on_the_front_and_drops_tied_dominated_pairs():
    pts = _pts([("a", 1.0, 10), ("b", 1.0, 10), ("c", 2.0, 5), ("d", 3.0, 8), ("e", 3.0, 8)])
    assert pareto_front(pts)["fabric"].tolist() == ["a", "b", "c"]  # a = b: neither dominates; d = e: both by c


def test_front_per_workload_and_by_power():
    pts = pd.concat([_pts([("x", 1.0, 10, 5.0), ("y", 2.0, 5, 9.0)], "w1"),
                     _pts([("x", 3.0, 10, 5.0), ("y", 2.0, 5, 9.0)], "w2")])
    by_cost = pareto_front(pts)
    assert by_cost.groupby("workload")["fabric"].apply(list).to_dict() == {"w1": ["x", "y"], "w2": ["y"]}
    by_power = pareto_front(pts, metric="power_w")
    assert by_power.groupby("workload")["fabric"].apply(list).to_dict() == {"w1": ["x"], "w2": ["y", "x"]}
    assert pareto_front(pts, by=None)["fabric"].tolist() == ["x", "y", "y"]  # one front over all rows (y ties itself)


def test_times_equal_to_the_last_bits_are_ties():
    """The same schedule timed on two fabrics differs in the last bits of its sums: such times tie."""
    t = 5.008976e-3
    pts = _pts([("dear", t, 9), ("cheap", t * (1 + 3e-12), 4), ("slower", t * 1.001, 1)])
    assert pareto_front(pts)["fabric"].tolist() == ["cheap", "slower"]  # "dear" is no faster than "cheap"
    row = cheapest_within(pts, 0.0).iloc[0]
    assert (row["fabric"], row["best_fabric"], row["slower"]) == ("cheap", "cheap", 0.0)
    assert row["time_s"] == t * (1 + 3e-12)  # the row's own time is reported
    assert "cheap (cost 4 USD, the fastest)" in pareto_answer(pts, 0.0)


def test_front_skips_rows_without_a_time_or_cost():
    pts = _pts([("a", 1.0, 10), ("b", float("nan"), 1), ("c", 2.0, float("nan"))])
    assert pareto_front(pts)["fabric"].tolist() == ["a"]


# ------------------------------------------------------------------ the answer
def test_cheapest_within_the_tolerance():
    pts = _pts([("best", 100.0, 1000), ("4pc", 104.0, 600), ("5pc", 105.0, 500), ("6pc", 106.0, 100)])
    ans = cheapest_within(pts, 0.05).iloc[0]
    assert (ans["fabric"], ans["best_fabric"], ans["candidates"]) == ("5pc", "best", 3)  # 105 <= 100 * 1.05
    assert ans["slower"] == pytest.approx(0.05) and ans["saving"] == pytest.approx(0.5)
    assert cheapest_within(pts, 0.03).iloc[0]["fabric"] == "best"
    assert cheapest_within(pts, 0.10).iloc[0]["fabric"] == "6pc"
    assert cheapest_within(pts, 0.0).iloc[0]["fabric"] == "best"


def test_answer_ties_go_to_the_faster_then_are_named_together():
    cost_tie = _pts([("best", 10.0, 9), ("slower-same-cost", 10.4, 5), ("faster-same-cost", 10.2, 5)])
    assert cheapest_within(cost_tie).iloc[0]["fabric"] == "faster-same-cost"
    exact_tie = _pts([("best", 10.0, 9), ("p", 10.2, 5), ("q", 10.2, 5)])
    assert cheapest_within(exact_tie).iloc[0]["fabric"] == "p = q"
    best_tie = _pts([("b2", 10.0, 9), ("b1", 10.0, 9)])
    row = cheapest_within(best_tie).iloc[0]
    assert row["fabric"] == row["best_fabric"] == "b1 = b2" and row["saving"] == 0
    fast_tie = _pts([("dear", 10.0, 9), ("cheap", 10.0, 4), ("slow", 10.3, 3)])
    row = cheapest_within(fast_tie).iloc[0]  # the fastest is the cheaper of the two equally fast rows
    assert (row["fabric"], row["best_fabric"], row["saving"]) == ("slow", "cheap", pytest.approx(0.25))
    assert pareto_answer(fast_tie[fast_tie["fabric"] != "slow"]).endswith("w: cheap (cost 4 USD, the fastest)")


def test_answer_text_per_workload_cost_and_power():
    pts = pd.concat([_pts([("big", 1.0, 3000, 50.0), ("small", 1.03, 2000, 80.0)], "dense"),
                     _pts([("big", 1.0, 3000, 50.0), ("small", 2.0, 2000, 80.0)], "moe")])
    assert pareto_answer(pts) == ("cheapest within 5 % of the best:\n"
                                  "  dense: small (cost 2,000 USD, 3 % slower than the fastest, big)\n"
                                  "  moe: big (cost 3,000 USD, the fastest)")
    assert pareto_answer(pts, metric="power_w").splitlines()[0] == "least power within 5 % of the best:"
    assert "dense: big (power 50 W, the fastest)" in pareto_answer(pts, metric="power_w")
    assert pareto_answer(pts[pts["workload"] == "moe"], 0.5) == \
        "cheapest within 50 % of the best: moe: big (cost 3,000 USD, the fastest)"
    assert pareto_answer(pts, 1.0).count("small") == 2
    assert design_answer(pts).splitlines()[0] == "cheapest within 5 % of the best:"
    assert design_answer(pts.drop(columns=["cost_usd"])) == ""


def test_bad_tolerance_and_missing_columns_are_input_errors():
    pts = _pts([("a", 1.0, 1)])
    for bad in (-0.1, float("inf"), "5"):
        with pytest.raises(InputError, match="tolerance"):
            cheapest_within(pts, bad)
    with pytest.raises(InputError, match="missing cost_usd"):
        pareto_front(pts.drop(columns=["cost_usd"]))


def test_design_points_from_a_runs_table():
    runs = pd.DataFrame({"run_id": ["r1", "r2", "r3"], "status": ["ok", "ok", "ok"], "kind": ["bench", "run", "bench"],
                         "op": ["alltoall", None, "alltoall"], "n_gpus": [64.0, None, 64.0],
                         "size": [1 << 20, None, 1 << 20], "llm.model": [None, "llama3-8b", None],
                         "n_ranks": [None, 16.0, None], "time_ns": [2e6, None, 1e6], "iteration_ns": [None, 5e9, None],
                         "topology": ["a/f2.yaml", "a/f2.yaml", "a/f3.yaml"],
                         "scale_out.tiers.0.oversubscription": [1, 1, 2],
                         "cost_usd": [10.0, 10.0, 20.0], "power_w": [1.0, 1.0, 2.0]})
    pts = design_points(runs)
    assert pts["workload"].tolist() == ["alltoall 64 GPUs 1 MiB", "alltoall 64 GPUs 1 MiB", "llama3-8b 16 GPUs"]
    assert pts["time_s"].tolist() == [1e-3, 2e-3, 5.0]
    assert pts["fabric"].tolist() == ["f3 oversubscription=2", "f2 oversubscription=1", "f2 oversubscription=1"]


# ------------------------------------------------------------------ a study of several parts
FABRICS = {"2-tier": ("fat_tree_2tier_4k.yaml", 1), "2-tier 4:1": ("fat_tree_2tier_4k.yaml", 4),
           "3-tier": ("fat_tree_3tier_4k.yaml", 1)}


def _study(**top):
    doc = {"name": "s", "base": {"model": "analytical"},
           "zip": {"name": list(FABRICS), "topology": [str(STUDIES / f) for f, _ in FABRICS.values()],
                   "scale_out.tiers.0.oversubscription": [o for _, o in FABRICS.values()]},
           "parts": [{"kind": "bench", "base": {"op": "all_reduce", "size": "1M", "gpus": 16, "nodes": 2}},
                     {"kind": "bench", "base": {"op": "alltoall", "size": "1M", "gpus": 32, "nodes": 4}}]}
    doc.update(top)
    return doc


def test_parts_share_the_top_level_axes():
    s = parse_sweep(_study(), "s.yaml")
    assert len(s) == 6 and s.kind == "bench"
    assert [(c["op"], c["name"]) for c in s.configs] == [(op, f) for op in ("all_reduce", "alltoall") for f in FABRICS]
    assert fabric_columns(s) == ["name"]
    same = parse_sweep(_study(parts=[_study()["parts"][0]] * 2), "s.yaml")
    assert len(same) == 3  # the same configuration twice runs once
    run = {"kind": "run", "base": {"llm.model": "llama3-8b", "llm.tp": 8, "llm.pp": 1, "llm.dp": 2, "nodes": 2}}
    mixed = parse_sweep(_study(parts=[_study()["parts"][0], run]), "s.yaml")
    assert mixed.kind == "bench+run" and [c["kind"] for c in mixed.configs] == ["bench"] * 3 + ["run"] * 3


@pytest.mark.parametrize("change, field", [
    ({"kind": "bench"}, "kind"),
    ({"parts": []}, "parts"),
    ({"parts": [{"kind": "bench", "bogus": 1}]}, "parts[0].bogus"),
    ({"parts": [{"kind": "bench", "base": {"op": "all_reduce", "size": 1, "gpu": 2}}]}, "parts[0]: base.gpu"),
    ({"parts": [{"base": {"op": "all_reduce", "size": 1}}]}, "parts[0]: kind"),
    ({"grid": {"gpus": [8]}, "parts": [{"kind": "bench", "base": {"op": "all_reduce", "size": 1},
                                        "grid": {"gpus": [16]}}]}, "parts[0].grid.gpus"),
])
def test_bad_parts_are_one_line_naming_the_field(change, field):
    with pytest.raises(InputError) as exc:
        parse_sweep(_study(**change), "s.yaml")
    assert f"s.yaml: {field}" in str(exc.value) and "\n" not in str(exc.value)


def test_the_shipped_study_has_at_least_12_fabrics_and_2_workloads_at_1k_to_4k_gpus():
    from netsim.sweep import load_sweep

    s = load_sweep(STUDIES / "fabric_pareto.yaml")
    names = {c["name"] for c in s.configs}
    assert len(names) >= 12 and len(s) == 2 * len(names) and s.kind == "run+bench"
    assert {c.get("llm.model", c.get("op")) for c in s.configs} == {"llama3-70b", "alltoall"}
    gpus = {c["llm.tp"] * c["llm.pp"] * c["llm.dp"] if c["kind"] == "run" else c["gpus"] for c in s.configs}
    assert min(gpus) >= 1024 and max(gpus) <= 4096
    text = (STUDIES / "fabric_pareto.yaml").read_text()
    assert all(word in text for word in ("multi-plane", "HPN", "rail-only", "ToR", "RoCE", "3-tier", "4:1"))


# ------------------------------------------------------------------ the answer of a sweep, and user prices
@pytest.fixture(scope="module")
def small_study(tmp_path_factory):
    out = tmp_path_factory.mktemp("study")
    sweep = parse_sweep(_study(), "s.yaml")
    assert run_sweep(sweep, out, jobs=1, progress=False).ok
    return sweep, out


def _fabric_usd(name, prices=None):
    f, o = FABRICS[name]
    topo = load_with_overrides(STUDIES / f, {"scale_out.tiers.0.oversubscription": o, "nodes": 2})
    return netsim.fabric_cost(topo, prices=prices)["total_usd"]


def test_study_points_label_fabrics_and_workloads(small_study):
    sweep, out = small_study
    pts = study_points(sweep, out)
    assert sorted(pts["fabric"].unique()) == sorted(FABRICS)
    assert sorted(pts["workload"].unique()) == ["all_reduce 16 GPUs 1 MiB", "alltoall 32 GPUs 1 MiB"]
    ar = pts[pts["workload"].str.startswith("all_reduce")]
    assert ar.set_index("fabric")["cost_usd"].to_dict() == {f: _fabric_usd(f) for f in FABRICS}
    other = parse_sweep(_study(parts=[_study()["parts"][0]]), "s.yaml")
    assert len(study_points(other, out)) == 3  # only the configurations of the sweep asked about


def test_a_user_price_file_changes_the_answer_as_expected(small_study, tmp_path, capsys):
    """On 2 nodes every fabric keeps the all-reduce inside its rail leaves, so the times tie and the
    answer is a price comparison: the 2-tier 4:1 fabric (fewest parts) under the shipped table. A
    file raising the price of a port of the 2-tier fabrics' unnamed 128-port switches (the QM9700s
    of the 3-tier one keep their own line) raises each 2-tier fabric by exactly its ports times the
    difference, and the 3-tier fabric becomes the answer."""
    sweep, out = small_study
    default = study_points(sweep, out)
    ar = default[default["workload"].str.startswith("all_reduce")]
    assert ar["time_s"].max() <= ar["time_s"].min() * 1.05
    assert cheapest_within(ar)["fabric"].tolist() == ["2-tier 4:1"]
    prices = tmp_path / "quotes.yaml"
    prices.write_text("lines:\n  switch port infiniband 400G: {usd: 5000, source: quote}\n")
    mine = study_points(sweep, out, prices=str(prices))
    ports = {f: sum(r.ports_used + r.ports_free for r in
                    netsim.bill_of_materials(load_with_overrides(STUDIES / FABRICS[f][0], {
                        "scale_out.tiers.0.oversubscription": FABRICS[f][1], "nodes": 2})).itertuples()
                    if r.item == "switch" and r.model == "128-port 400G") for f in FABRICS}
    assert ports["3-tier"] == 0 and ports["2-tier"] > ports["2-tier 4:1"] > 0
    port_usd = load_prices().lines["switch port infiniband 400G"].usd  # the shipped line the file replaces
    assert port_usd < 5000
    delta = (mine.set_index(["workload", "fabric"])["cost_usd"] - default.set_index(["workload", "fabric"])["cost_usd"])
    for (_, fabric), d in delta.items():
        assert d == pytest.approx(ports[fabric] * (5000 - port_usd))
    ar_mine = mine[mine["workload"].str.startswith("all_reduce")]
    assert cheapest_within(ar_mine)["fabric"].tolist() == ["3-tier"]
    # the same through the command line: netsim sweep ... --prices FILE prints the changed answer
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(_study()))
    assert main(["sweep", str(path), "--out", str(out), "--jobs", "1", "--no-progress"]) == 0
    said = capsys.readouterr().out
    assert "cheapest within 5 % of the best:\n  all_reduce 16 GPUs 1 MiB: 2-tier 4:1 (cost " in said
    assert "least power within 5 % of the best:" in said
    assert main(["sweep", str(path), "--out", str(out), "--jobs", "1", "--no-progress", "--prices", str(prices),
                 "--tolerance", "5"]) == 0
    assert "all_reduce 16 GPUs 1 MiB: 3-tier (cost " in capsys.readouterr().out


def test_a_bad_price_file_stops_the_sweep_before_it_runs(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(_study()))
    bad = tmp_path / "bad.yaml"
    bad.write_text("lines:\n  switch QM9700: {usd: -1}\n")
    assert main(["sweep", str(path), "--out", str(tmp_path / "o"), "--prices", str(bad), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "bad.yaml: lines.switch QM9700.usd" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()
