"""netsim.analysis: known answers on synthetic frames, a brute-force cross-check, the CLI."""

import json
import time

import numpy as np
import pandas as pd
import pytest

from netsim.analysis import links as L
from netsim.analysis import overlap as O
from netsim.analysis import stragglers as S
from netsim.cli.analyze import parse_ranks
from netsim.analysis.timeline import chrome_trace, write_chrome_trace
from netsim.cli import main
from netsim.errors import InputError


def op(rank, kind, start, end, name="x", comm_type=None, group=None, node_id=0):
    return {"rank": rank, "node_id": node_id, "name": name, "kind": kind, "comm_type": comm_type, "group": group,
            "bytes": 0, "start_ns": float(start), "end_ns": float(end)}


def frame(rows, run_id="r1"):
    return pd.DataFrame(rows).assign(run_id=run_id)


# ------------------------------------------------------------------ overlap
def test_temporal_breakdown_known_answer():
    ops = frame([op(0, "compute", 0, 100), op(0, "collective", 50, 150, comm_type="ALL_REDUCE", group="g"),
                 op(0, "compute", 200, 300),
                 op(1, "collective", 0, 40, comm_type="ALL_REDUCE", group="g"),
                 op(2, "compute", 10, 20), op(2, "memory", 30, 35)])
    b = O.temporal_breakdown(ops).set_index("rank")
    assert b.loc[0, ["kernel_ns", "compute_ns", "non_compute_ns", "idle_ns"]].tolist() == [300, 200, 50, 50]
    assert b.loc[0, ["comm_ns", "overlap_ns", "exposed_comm_ns", "overlap_pct"]].tolist() == [100, 50, 50, 50.0]
    assert b.loc[0, "compute_pct"] == pytest.approx(200 / 3)
    assert b.loc[1, ["compute_ns", "non_compute_ns", "overlap_pct"]].tolist() == [0, 40, 0.0]
    # memory is neither compute nor comm (HTA MEMORY class): non-compute, and no comm -> overlap NaN
    assert b.loc[2, ["kernel_ns", "non_compute_ns", "idle_ns"]].tolist() == [25, 5, 10]
    assert np.isnan(b.loc[2, "overlap_pct"])
    assert O.comm_comp_overlap(ops).set_index("rank").loc[0, "overlap_pct"] == 50.0
    s = O.overlap_summary(ops)
    assert s["overlap_pct"] == pytest.approx(25.0)  # mean over the two ranks that communicate
    assert s["step_ns"] == 300 and s["megascale_exposed_ns"] == 100


def _brute(ops):
    """Per (run, rank) unions on a boolean ns timeline."""
    out = {}
    for (run, rank), g in ops.groupby(["run_id", "rank"]):
        t0, t1 = int(g.start_ns.min()), int(g.end_ns.max())
        line = {k: np.zeros(t1 - t0, bool) for k in ("all", "comp", "comm")}
        for r in g.itertuples():
            sl = slice(int(r.start_ns) - t0, int(r.end_ns) - t0)
            line["all"][sl] = True
            if r.kind == "compute":
                line["comp"][sl] = True
            if r.kind in ("collective", "send", "recv"):
                line["comm"][sl] = True
        out[(run, rank)] = (t1 - t0, line["comp"].sum(), (t1 - t0) - line["all"].sum(),
                            line["comm"].sum(), (line["comm"] & line["comp"]).sum())
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_breakdown_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = 400
    start = rng.integers(0, 500, n)
    ops = pd.DataFrame({"run_id": rng.choice(["a", "b"], n), "rank": rng.integers(0, 7, n),
                        "kind": rng.choice(["compute", "collective", "recv", "memory"], n),
                        "start_ns": start, "end_ns": start + rng.integers(0, 60, n)})
    b = O.temporal_breakdown(ops)
    want = _brute(ops)
    assert len(b) == len(want)
    for row in b.itertuples():
        kernel, comp, idle, comm, ov = want[(row.run_id, row.rank)]
        assert (row.kernel_ns, row.compute_ns, row.idle_ns, row.comm_ns, row.overlap_ns) == (kernel, comp, idle,
                                                                                            comm, ov)


def test_exposed_comm_by_collective():
    ops = frame([op(0, "compute", 0, 100), op(0, "collective", 50, 150, comm_type="ALL_REDUCE", group="g1"),
                 op(1, "collective", 0, 100, comm_type="ALL_REDUCE", group="g1"),
                 op(1, "compute", 100, 145), op(1, "collective", 110, 140, comm_type="ALL_GATHER", group="g2"),
                 op(1, "recv", 140, 160)])
    e = O.exposed_comm_by_collective(ops).set_index(["comm_type", "group"])
    ar = e.loc[("ALL_REDUCE", "g1")]
    assert (ar["ops"], ar["ranks"], ar["comm_ns"], ar["exposed_ns"]) == (2, 2, 200, 150)
    assert ar["exposed_pct"] == 75.0 and ar["exposed_ns_per_rank"] == 75.0
    assert e.loc[("ALL_GATHER", "g2"), "exposed_ns"] == 0  # fully under compute
    assert e.loc[("recv", "p2p"), "exposed_ns"] == 15
    # concurrent ops of one type and group (gradient buckets) count once per rank
    buckets = frame([op(0, "compute", 0, 20), op(0, "collective", 0, 100, comm_type="ALL_REDUCE", group="g"),
                     op(0, "collective", 50, 150, comm_type="ALL_REDUCE", group="g")])
    row = O.exposed_comm_by_collective(buckets).iloc[0]
    assert (row["ops"], row["ranks"], row["comm_ns"], row["exposed_ns"]) == (2, 1, 150, 130)


def test_exposed_matches_brute_force():
    rng = np.random.default_rng(5)
    n = 300
    start = rng.integers(0, 400, n)
    ops = pd.DataFrame({"rank": rng.integers(0, 5, n), "kind": rng.choice(["compute", "collective", "send"], n),
                        "comm_type": rng.choice(["a", "b"], n), "group": rng.choice(["1", "2"], n),
                        "start_ns": start, "end_ns": start + rng.integers(0, 50, n)})
    ops.loc[ops["kind"] == "send", ["comm_type", "group"]] = None
    got = O.exposed_comm_by_collective(ops).set_index(["comm_type", "group"])["exposed_ns"]
    want = {}
    for rank, g in ops.groupby("rank"):
        comp = np.zeros(500, bool)
        for r in g[g["kind"] == "compute"].itertuples():
            comp[r.start_ns:r.end_ns] = True
        comm = g[g["kind"] != "compute"].fillna({"comm_type": "send", "group": "p2p"})
        for key, c in comm.groupby(["comm_type", "group"]):
            line = np.zeros(500, bool)
            for r in c.itertuples():
                line[r.start_ns:r.end_ns] = True
            want[key] = want.get(key, 0) + int((line & ~comp).sum())
    assert got.to_dict() == pytest.approx(want)


def test_breakdown_scales_to_16k_ranks():
    ranks, per_rank = 16384, 64
    rng = np.random.default_rng(0)
    dur = rng.integers(1_000, 50_000, (ranks, per_rank))
    start = np.cumsum(dur, axis=1) - dur
    kind = np.where(np.arange(per_rank) % 2 == 0, "compute", "collective")
    ops = pd.DataFrame({"rank": np.repeat(np.arange(ranks), per_rank), "kind": np.tile(kind, ranks),
                        "start_ns": start.ravel().astype(float), "end_ns": (start + dur).ravel().astype(float)})
    t = time.perf_counter()
    b = O.temporal_breakdown(ops)
    assert time.perf_counter() - t < 10
    assert len(b) == ranks and (b["idle_ns"] == 0).all() and (b["overlap_pct"] == 0).all()


# -------------------------------------------------------------- stragglers
def _dp_job(ranks=64, steps=4, slow=(), factor=1.10, seed=0, noise=5.0):
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(ranks):
        t = 0.0
        for s in range(steps):
            for name, base in (("fwd", 1000.0), ("bwd", 2000.0)):
                d = base * (factor if r in slow else 1.0) + rng.normal(0, noise)
                rows.append(op(r, "compute", t, t + d, name=f"mb{s}.{name}"))
                t += d
    return frame(rows)


def test_slow_ranks_mad_precision_recall():
    injected = [5, 40]
    ops = _dp_job(slow=injected)
    res = S.slow_ranks(ops, z_threshold=3.5, pct_threshold=5.0, hosts=8)
    flagged = res.loc[res["flagged"], "rank"].tolist()
    assert flagged == injected
    assert res.set_index("rank").loc[5, "pct_over_median"] == pytest.approx(10.0, abs=0.5)
    assert S.detection_scores(flagged, injected)["precision"] == 1.0
    assert S.detection_scores(res.set_index("rank")["flagged"], injected)["recall"] == 1.0
    hosts = S.slow_hosts(ops, 8)
    # one slow GPU on each of hosts 0 and 5: neither host is slow (its other GPUs are not)
    assert not hosts["flagged"].any() and hosts["slow_gpus"].tolist() == [1, 0, 0, 0, 0, 1, 0, 0]
    assert hosts.set_index("host").loc[5, "slowest_rank"] == 40
    assert hosts.set_index("host").loc[5, "max_pct"] == pytest.approx(10.0, abs=0.5)
    # noise of ~0.2 % stays below the MAD floor (0.5 points): even a loose z threshold flags nothing else
    loose = S.slow_ranks(ops, z_threshold=1.0, pct_threshold=0.0)
    assert S.detection_scores(loose.loc[loose["flagged"], "rank"], injected)["precision"] == 1.0
    # with noise above the floor a loose z threshold alone flags noise; the % rule keeps precision
    loose = S.slow_ranks(_dp_job(slow=injected, noise=40.0), z_threshold=1.0, pct_threshold=0.0)
    sc = S.detection_scores(loose.loc[loose["flagged"], "rank"], injected)
    assert sc["recall"] == 1.0 and sc["precision"] < 1.0 and sc["false_positives"]


def test_robust_z_mad_floor():
    # peers identical up to float noise: the raw MAD is ~1e-9 % and a 20 % straggler got z ~ 1e10
    pct = np.r_[np.zeros(15) + 1e-9 * np.arange(15), 20.0]
    assert S.robust_z(pct)[-1] > 1e9
    z = S.robust_z(pct, mad_floor=S.PCT_MAD_FLOOR)
    assert z[-1] == pytest.approx(0.6745 * 20.0 / S.PCT_MAD_FLOOR, rel=1e-6) and abs(z[:-1]).max() < 1e-6
    # a spread above the floor is used as is
    x = np.array([0.0, 1.0, 2.0, 3.0, 10.0])
    assert S.robust_z(x, mad_floor=0.5).tolist() == S.robust_z(x).tolist()
    ops = _dp_job(ranks=16, slow=[3], factor=1.2, noise=0.0)
    res = S.slow_ranks(ops).set_index("rank")
    assert np.isfinite(res["robust_z"]).all() and res.loc[3, "robust_z"] < 100 and res.loc[3, "flagged"]


def test_slow_ranks_identical_peers_and_scores():
    ops = _dp_job(ranks=16, slow=[3], factor=1.03, noise=0.0)
    assert not S.slow_ranks(ops)["flagged"].any()  # MAD = 0, floored at 0.5 points: z = 4.0, but only 3 % over the median
    ops = _dp_job(ranks=16, slow=[3], factor=1.2, noise=0.0)
    assert S.slow_ranks(ops).query("flagged")["rank"].tolist() == [3]
    assert S.detection_scores([3, 7], [3]) == {"precision": 0.5, "recall": 1.0, "f1": pytest.approx(2 / 3),
                                               "true_positives": [3], "false_positives": [7],
                                               "false_negatives": []}
    assert S.detection_scores([], [])["precision"] == 1.0 and S.detection_scores([], [1])["recall"] == 0.0


def test_heatmap_steps():
    ops = _dp_job(ranks=4, steps=3, slow=[2], factor=2.0, noise=0.0)
    hm = S.compute_heatmap(ops, relative=False)
    assert hm.shape == (4, 3) and hm.columns.tolist() == [0, 1, 2] and hm.attrs["value"] == "ns"
    assert hm.loc[0].tolist() == [3000, 3000, 3000] and hm.loc[2].tolist() == [6000, 6000, 6000]
    plain = ops.assign(name=ops["name"].str.replace(r"^mb\d+\.", "", regex=True))
    assert S.compute_heatmap(plain, relative=False).equals(hm)  # occurrence index of same-named ops
    rel = S.compute_heatmap(ops)  # the default: each op against the same op on the other ranks
    assert rel.attrs["value"] == "ratio" and rel.loc[2].tolist() == [2.0] * 3 and rel.loc[0].tolist() == [1.0] * 3
    assert S.assign_steps(ops.assign(iteration=7)).eq(7).all()


def test_launch_skew():
    rows = [op(r, "collective", t, 100, comm_type="ALL_REDUCE", group="a", name="ar")
            for r, t in zip(range(4), (10, 20, 50, 15))]
    rows += [op(r, "collective", t, 300, comm_type="ALL_REDUCE", group="a", name="ar2")
             for r, t in zip(range(4), (200, 260, 210, 205))]
    rows += [op(r, "collective", 5, 30, comm_type="ALL_GATHER", group="b", name="ag") for r in (4, 5)]
    sk = S.launch_skew(frame(rows))
    assert sk[["group", "seq", "skew_ns", "last_rank", "first_rank"]].values.tolist() == [
        ["b", 0, 0.0, 4, 4], ["a", 0, 40.0, 2, 0], ["a", 1, 60.0, 1, 0]]
    assert sk.loc[1, "comm_type"] == "ALL_REDUCE" and sk.loc[1, "ranks"] == 4


def test_late_start_last_long_collective():
    rows = []
    for r in range(8):
        comp = 1000 + (400 if r == 3 else 0) + 10 * r
        rows.append(op(r, "compute", 0, comp))
        rows.append(op(r, "collective", 0, 5, comm_type="BROADCAST", group="w"))  # short: filtered out
        rows.append(op(r, "collective", comp, 2000, comm_type="ALL_REDUCE", group="w"))
    res = S.late_start_stragglers(frame(rows), n_stragglers=2)
    assert res.kernel == "ALL_REDUCE"
    assert res.stragglers == [3, 7]
    assert res.metric.set_index("rank").loc[3, "normalized_start"] == pytest.approx(1430 / 2000)
    assert res.counts[3] == 1 and res.counts[0] == 0
    assert S.late_start_stragglers(frame([op(0, "compute", 0, 5)])).stragglers == []


# ------------------------------------------------------------------ links
LINKS = pd.DataFrame({
    "link_id": range(7),
    "kind": ["nvlink", "nvlink", "ib", "ib", "ib", "ib", "ib"],
    "src": ["gpu0", "nvswitch0", "nic0", "nic1", "leaf0", "spine0", "leaf1"],
    "dst": ["nvswitch0", "gpu1", "leaf0", "leaf0", "spine0", "leaf1", "nic2"],
    "src_kind": ["gpu", "nvswitch", "nic", "nic", "leaf", "spine", "leaf"],
    "dst_kind": ["nvswitch", "gpu", "leaf", "leaf", "spine", "leaf", "nic"],
    "capacity_GBps": [450.0, 450.0, 50.0, 50.0, 50.0, 50.0, 50.0],
    "bytes": [9e6, 9e6, 1e6, 1e6, 2e6, 2e6, 2e6],
    "busy_ns": [2e4, 2e4, 2e4, 2e4, 4e4, 4e4, 4e4],
    "utilization": [0.2, 0.2, 0.5, 0.5, 0.95, 0.9, 0.9],
    "peak_flows": [1, 1, 1, 1, 2, 2, 2]})


def test_hottest_links_and_tiers():
    hot = L.hottest_links(LINKS, k=3)
    assert hot["link_id"].tolist() == [4, 5, 6]  # ties broken by link id
    assert hot[["tier", "direction"]].values.tolist() == [["spine", "up"], ["spine", "down"], ["leaf", "down"]]
    tiers = L.utilization_by_tier(LINKS)
    assert tiers[["tier", "kind"]].values.tolist() == [["nvswitch", "nvlink"], ["leaf", "ib"], ["spine", "ib"]]
    assert tiers["links"].tolist() == [2, 3, 2]
    assert tiers.set_index("tier").loc["spine", "max_utilization"] == 0.95
    by_dir = L.utilization_by_tier(LINKS, by=("tier", "direction"))
    assert len(by_dir) == 6


def test_oversubscription_pressure():
    # two NIC->leaf uplinks (100 GB/s) feed one leaf->spine uplink (50 GB/s): taper 0.5
    p = L.oversubscription_pressure(LINKS).set_index("tier")
    assert p.index.tolist() == ["leaf", "spine"]
    assert p.loc["spine", "taper"] == 0.5 and p.loc["spine", "traffic_ratio"] == 1.0
    assert p.loc["spine", "pressure"] == 2.0 and p.loc["leaf", "pressure"] == 1.0
    assert p.loc["spine", "line_rate_ns"] == pytest.approx(2e6 / 50)


# ---------------------------------------------------------------- timeline
def test_chrome_trace_json(tmp_path):
    ops = frame([op(0, "compute", 0, 1500, name="fwd", node_id=1),
                 op(0, "recv", 100, 900, name="r1"), op(0, "recv", 200, 800, name="r2"),
                 op(1, "collective", 1000, 2000.5, name="ar", comm_type="ALL_REDUCE", group="3")])
    coll = pd.DataFrame({"seq": [0], "op": ["ALL_REDUCE"], "group": ["3"], "start_ns": [1000.0],
                         "end_ns": [2000.5], "bytes": [1e6], "busbw_GBps": [1.0]})
    path = tmp_path / "t.json"
    n = write_chrome_trace(path, ops, coll)
    doc = json.loads(path.read_text())
    ev = doc["traceEvents"]
    assert len(ev) == n and doc["displayTimeUnit"] == "ns"
    xs = [e for e in ev if e["ph"] == "X"]
    assert len(xs) == 5
    for e in xs:
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int) and e["dur"] >= 0
    recv = [e for e in xs if e["cat"] == "recv"]
    assert len({e["tid"] for e in recv}) == 2  # overlapping receives spill onto a second thread
    ar = next(e for e in xs if e["name"] == "ar")
    assert ar["ts"] == 1.0 and ar["dur"] == 1.0 and ar["args"]["group"] == "3"  # µs, ns precision kept
    span = next(e for e in xs if e["cat"] == "collective" and e["pid"] == 2)
    assert span["name"] == "ALL_REDUCE"
    names = {e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {"rank 0", "rank 1", "collectives"}
    with pytest.raises(InputError, match="overwrite"):
        write_chrome_trace(path, ops)
    write_chrome_trace(path, ops, ranks=[1], overwrite=True)
    assert {e["pid"] for e in json.loads(path.read_text())["traceEvents"]} == {1}
    assert chrome_trace(ops)["traceEvents"][0]["ph"] == "M"
    assert parse_ranks("0-2,5") == [0, 1, 2, 5]
    with pytest.raises(InputError):
        parse_ranks("3-1")


# --------------------------------------------------------------------- CLI
def _dataset(root, run_ids=("run-a",), slow=(5,)):
    from netsim.results.dataset import write_run

    for i, rid in enumerate(run_ids):
        ops = _dp_job(ranks=16, slow=slow, factor=1.2, noise=0.0)
        ends = ops.groupby("rank")["end_ns"].max()
        coll = [op(r, "collective", ends[r], ends.max() + 500, name="dp.grad_allreduce", comm_type="ALL_REDUCE",
                   group="1") for r in range(16)]
        ops = pd.concat([ops, frame(coll)], ignore_index=True).drop(columns="run_id")
        ranks = pd.DataFrame({"rank": range(16), "host": [r // 8 for r in range(16)]})
        write_run(root, rid, {"ops": ops, "links": LINKS, "ranks": ranks}, {"i": i})


def test_cli_analyze_json_and_plots(tmp_path, capsys):
    _dataset(tmp_path / "d")
    assert main(["analyze", str(tmp_path / "d"), "--json", "--plots", str(tmp_path / "p")]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["stragglers"] == [5] and rep["slow_hosts"] == []  # one slow GPU: its host is not slow
    assert rep["late_start"] == {"kernel": "ALL_REDUCE", "suspects": [5], "caveat": None}
    assert rep["overlap_pct"] == 0.0 and rep["exposed_comm_ns"] > 0
    assert rep["hottest_links"][0]["link_id"] == 4 and rep["oversubscription"][1]["pressure"] == 2.0
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == ["breakdown.png", "heatmap.png", "launch_skew.png",
                                                                  "links.png", "timeline.png"]
    assert main(["analyze", str(tmp_path / "d")]) == 0
    text = capsys.readouterr().out
    assert "slow ranks    5 (+20.0%)" in text and "late start    ALL_REDUCE" in text


def test_late_start_caveat_when_suspects_are_not_slow(capsys):
    from netsim.analysis.report import analyze
    from netsim.cli.analyze import format_report

    ops = _dp_job(ranks=16, slow=(5,), factor=1.2, noise=0.0)
    ends = ops.groupby("rank")["end_ns"].max()
    # rank 9 computes as fast as its peers but issues the all-reduce late (it waited on something else)
    coll = [op(r, "collective", ends[r] + (4000 if r == 9 else 0), ends.max() + 5000, name="ar",
               comm_type="ALL_REDUCE", group="1") for r in range(16)]
    ops = pd.concat([ops, frame(coll)], ignore_index=True)
    ranks = pd.DataFrame({"rank": range(16), "host": [r // 8 for r in range(16)]})
    rep = analyze({"ops": ops, "ranks": ranks, "links": None})
    assert rep["stragglers"] == [5] and 9 in rep["late_start"]["suspects"]
    cav = rep["late_start"]["caveat"]
    assert cav.startswith("late-start suspects 9") and "(slow rank(s) 5)" in cav  # host 0 is not slow
    assert "caveat      late-start suspects" in format_report("r", rep)
    late = S.late_start_stragglers(ops)
    assert S.late_start_caveat(late, S.slow_ranks(ops)) == late.notes[0]


def test_cli_errors_and_timeline(tmp_path, capsys):
    assert main(["analyze", str(tmp_path / "missing")]) == 2
    assert "no such results directory" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["analyze", str(tmp_path / "empty")]) == 2
    assert "not a netsim results dataset" in capsys.readouterr().err
    _dataset(tmp_path / "two", run_ids=("run-a", "run-b"))
    assert main(["analyze", str(tmp_path / "two"), "--json"]) == 2
    err = capsys.readouterr().err
    assert "holds 2 runs" in err and "--run" in err and err.count("\n") == 1
    assert main(["analyze", str(tmp_path / "two"), "--run", "nope"]) == 2
    assert main(["analyze", str(tmp_path / "two"), "--run", "run-b", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["run_id"] == "run-b"
    out = tmp_path / "trace.json"
    assert main(["timeline", str(tmp_path / "two"), "--run", "run-a", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["otherData"]["run_id"] == "run-a"
    assert main(["timeline", str(tmp_path / "two"), "--run", "run-a", "--out", str(out)]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert main(["timeline", str(tmp_path / "two"), "--run", "run-a", "--out", str(out), "--overwrite",
                 "--ranks", "0-1"]) == 0
    assert {e["pid"] for e in json.loads(out.read_text())["traceEvents"]} == {0, 1}


# -------------------------------------------------------------- end to end
def test_end_to_end_trace_and_llm(tmp_path, capsys, traces):
    topo = "topologies/dgx-h100.yaml"
    prefix = traces / "astra-sim__astra-sim/examples/workload/microbenchmarks/all_reduce/8npus_1MB/all_reduce"
    assert main(["run", "--topology", topo, "--workload", str(prefix), "--out", str(tmp_path / "ar")]) == 0
    capsys.readouterr()
    assert main(["analyze", str(tmp_path / "ar"), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["ranks"] == 8 and rep["stragglers"] == [] and rep["late_start"]["suspects"] == []
    assert rep["exposed_by_collective"][0]["comm_type"] == "all_reduce" and rep["overlap_pct"] == 0.0
    assert rep["hottest_links"] and rep["tiers"][0]["tier"] == "nvswitch"

    model = tmp_path / "tiny.yaml"
    # vocab 32000: the straggler's last all-reduce (embedding gradients) must outlast HTA's 1 % filter
    model.write_text("layers: 2\nhidden: 1024\nffn: 4096\nheads: 8\nvocab: 32000\n")
    wl = tmp_path / "wl"
    assert main(["workload", "llm", "--model", str(model), "--tp", "1", "--pp", "1", "--dp", "8",
                 "--microbatches", "4", "--seq", "4096", "--out", str(wl)]) == 0
    out = tmp_path / "llm"
    assert main(["run", "--topology", topo, "--workload", str(wl / "llm"), "--comm-groups",
                 str(wl / "comm_groups.json"), "--straggler", "3:1.3", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["analyze", str(out), "--json", "--top", "3"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["stragglers"] == [3] and rep["late_start"]["suspects"][0] == 3
    assert rep["launch_skew"]["worst"][0]["last_rank"] == 3
    assert main(["timeline", str(out), "--out", str(tmp_path / "t.json")]) == 0
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert {e["pid"] for e in events if e["ph"] == "X"} == set(range(9))  # 8 ranks + collectives
