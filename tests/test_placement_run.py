"""``--placement`` and ``--engine`` on ``netsim run`` (and their records in ``runs`` and sweeps).

Job rank r runs on topology GPU ``place(spec)[r]``: collectives and sends reach the network
between placed GPUs, so a fragmented placement changes the result; ``--engine event`` is
the event-driven reference and must agree with the default engine on placed runs.
"""

import json

import numpy as np
import pytest
import yaml

from netsim.cli import main
from netsim.errors import InputError
from netsim.results.dataset import open_results, run_id_for
from netsim.sweep import parse_sweep, run_sweep
from netsim.topology.placement import place
from netsim.topology.spec import load_topology
from netsim.workload.faults import fault_spec, plan_faults
from netsim.workload.generate.llm import ModelSpec, llm_replicas, write_llm_workload
from netsim.chakra.groups import CommGroups
from netsim.chakra.inspect import read_workload
from netsim.workload.llmrun import simulate_llm
from netsim.workload.runner import WorkloadRun

TINY = ModelSpec("tiny", layers=2, hidden=1024, ffn=4096, heads=8, vocab=1000)
RTOL = 1e-9
#: 8 nodes of 4 GPUs (NVSwitch) under a rail-optimized 2-tier tree, leaves 2:1.
TREE = {"name": "tiny-tree", "node": {"kind": "nvswitch", "gpus": 4, "links_per_gpu": 4, "link_bw": "25GB/s"},
        "nodes": 8, "scale_out": {"kind": "fat_tree", "nic_bw": "400Gbps", "rail_optimized": True,
                                  "tiers": [{"name": "leaf", "down": 8, "up": 4, "oversubscription": 2},
                                            {"name": "spine", "down": 8}]}}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A small fat-tree file and a TP4 x PP2 x DP2 workload (16 ranks) written for it."""
    d = tmp_path_factory.mktemp("placement")
    (d / "tree.yaml").write_text(yaml.safe_dump(TREE))
    prefix = write_llm_workload(d / "wl", TINY, tp=4, pp=2, dp=2, microbatches=2, seq=256)
    return {"topology": str(d / "tree.yaml"), "workload": str(prefix), "comm_groups": str(d / "wl" / "comm_groups.json")}


def _run(files, out, *extra):
    return main(["run", "--topology", files["topology"], "--workload", files["workload"],
                 "--comm-groups", files["comm_groups"], "--out", str(out), "--json", *extra])


def test_run_placement_changes_the_result_and_event_engine_agrees(files, tmp_path, capsys):
    out = tmp_path / "out"
    ids = {}
    for placement, engine in [("packed", "auto"), ("random:1", "auto"), ("random:1", "event")]:
        assert _run(files, out, "--placement", placement, "--engine", engine) == 0
        summary = json.loads(capsys.readouterr().out)
        assert (summary["placement"], summary["engine"]) == (placement, engine)
        ids[placement, engine] = summary["run_id"]
    assert len(set(ids.values())) == 3
    res = open_results(out)
    ranks = {k: res.ranks[res.ranks["run_id"] == rid].sort_values("rank") for k, rid in ids.items()}
    packed, auto, event = ranks["packed", "auto"], ranks["random:1", "auto"], ranks["random:1", "event"]
    # TP groups spread over nodes: the iteration is slower than with whole nodes per TP group
    assert auto["finish_ns"].max() > 1.2 * packed["finish_ns"].max()
    np.testing.assert_allclose(event["finish_ns"].to_numpy(), auto["finish_ns"].to_numpy(), rtol=RTOL, atol=0)
    links = {k: res.links[res.links["run_id"] == rid].sort_values("link_id")["bytes"].to_numpy() for k, rid in ids.items()}
    np.testing.assert_allclose(links["random:1", "event"], links["random:1", "auto"], rtol=RTOL, atol=1e-6)
    # the ranks table says where every rank ran
    gpus = place("random:1", 16, 32)
    assert auto["gpu"].tolist() == gpus.tolist() and auto["host"].tolist() == (gpus // 4).tolist()
    assert packed["gpu"].tolist() == list(range(16)) and packed["host"].tolist() == [r // 4 for r in range(16)]
    # runs: placement and engine are string columns; the defaults hash as runs written before they existed
    runs = res.runs.set_index("run_id")
    for (placement, engine), rid in ids.items():
        assert (runs.loc[rid, "placement"], runs.loc[rid, "engine"]) == (placement, engine)
    cfg = res.config(ids["packed", "auto"])
    assert run_id_for({k: v for k, v in cfg.items() if k not in ("placement", "engine")}) == ids["packed", "auto"]


def test_bench_out_records_placement_and_engine(tmp_path, capsys):
    out = tmp_path / "b"
    for placement, engine in [("packed", "auto"), ("strided:2", "event")]:
        assert main(["bench", "--topology", "topologies/dgx-h100.yaml", "--op", "all_reduce", "-b", "1M",
                     "--gpus", "4", "--placement", placement, "--engine", engine, "--out", str(out)]) == 0
    capsys.readouterr()
    runs = open_results(out).runs.sort_values("placement")
    assert runs["placement"].tolist() == ["packed", "strided:2"] and runs["engine"].tolist() == ["auto", "event"]


def test_bad_placement_on_run_is_one_line(files, tmp_path, capsys):
    for spec, expect in [("random:x", "--placement: expected a seed"), ("strided:4", "beyond the topology's 32 GPUs"),
                         ("nowhere.txt", "expected packed, random[:SEED], strided:K or a file")]:
        assert _run(files, tmp_path / "o", "--placement", spec) == 2
        err = capsys.readouterr().err.strip()
        assert expect in err and "\n" not in err and "Traceback" not in err
    assert main(["run", "--topology", files["topology"], "--llm", "gpt3-175b", "--tp", "2", "--pp", "1", "--dp", "2",
                 "--placement", "random:-1"]) == 2
    assert "random:-1" in capsys.readouterr().err


def test_placement_file_runs_ranks_on_the_listed_gpus(files, tmp_path):
    from netsim.workload.simulation import simulate

    gpus = [31 - r for r in range(16)]
    (tmp_path / "gpus.txt").write_text("# reversed\n" + ", ".join(map(str, gpus)) + "\n")
    res = simulate(files["topology"], files["workload"], files["comm_groups"], placement=str(tmp_path / "gpus.txt"))
    assert res.tables()["ranks"]["gpu"].tolist() == gpus
    assert res.config["placement"] == str(tmp_path / "gpus.txt")


def test_sweep_placement_and_engine_keys(files, tmp_path):
    doc = {"kind": "run", "base": {**files, "model": "analytical"}, "grid": {"placement": ["packed", "random:1"]}}
    sweep = parse_sweep(doc)
    assert len(sweep) == 2 and len(set(sweep.run_ids)) == 2 and sweep.swept == ["placement"]
    rep = run_sweep(sweep, tmp_path / "s", jobs=1, progress=False)
    assert (rep.done, rep.failed) == (2, [])
    runs = open_results(tmp_path / "s").runs.set_index("run_id")
    assert runs.loc[sweep.run_ids, "placement"].tolist() == ["packed", "random:1"]
    assert runs.loc[sweep.run_ids, "engine"].tolist() == ["auto", "auto"]
    it = runs.loc[sweep.run_ids, "iteration_ns"].tolist()
    assert it[1] > it[0]
    bench = parse_sweep({"kind": "bench", "base": {"topology": "topologies/dgx-h100.yaml", "op": "all_reduce",
                                                   "size": "1M", "gpus": 4},
                         "zip": {"placement": ["packed", "strided:2"], "engine": ["auto", "event"]}})
    assert [(c["placement"], c["engine"]) for c in bench.configs] == [("packed", "auto"), ("strided:2", "event")]
    with pytest.raises(InputError) as err:
        parse_sweep({**doc, "grid": {"placement": ["random:x"]}})
    assert err.value.field == "grid.placement[0]" and "seed" in err.value.message
    (tmp_path / "gpus.txt").write_text(" ".join(str(g) for g in range(16, 32)))
    by_file = parse_sweep({**doc, "grid": {"placement": ["gpus.txt"]}}, "s.yaml", tmp_path)
    assert by_file.configs[0]["placement"] == "gpus.txt"  # hashed as written, run from the resolved path
    assert by_file.paths[0]["placement"] == str(tmp_path / "gpus.txt")
    with pytest.raises(InputError, match="no such file"):
        parse_sweep({**doc, "grid": {"placement": ["missing.txt"]}}, "s.yaml", tmp_path)


def test_non_packed_placement_switches_replica_symmetry_off(tmp_path):
    topo = load_topology_dict()
    gen = dict(tp=2, pp=2, dp=4, microbatches=2, seq=256)
    sym = simulate_llm(topo, TINY, model="analytical", placement="strided:2", **gen)
    full = simulate_llm(topo, TINY, model="analytical", placement="strided:2", symmetry="none", **gen)
    assert sym.notes[0].startswith("replica symmetry off: placement strided:2")
    assert sym.config["symmetry"] == "none" and len(sym.run.ranks) == 16
    np.testing.assert_allclose(sym.finish, full.finish, rtol=RTOL)
    packed = simulate_llm(topo, TINY, model="analytical", placement="strided:1", **gen)  # strided:1 is packed
    assert any(n.startswith("replica symmetry: simulated 4 of 16") for n in packed.notes)


def test_replicas_with_a_placement_need_every_rank(files):
    topo = load_topology(files["topology"])
    tables = read_workload(files["workload"])
    groups = CommGroups(json.loads(open(files["comm_groups"]).read()), 16)
    rep = llm_replicas(tp=4, pp=2, dp=2)
    gpus = place("random:2", 16, topo.n_gpus)
    with pytest.raises(InputError, match="replica symmetry needs the packed placement"):
        WorkloadRun(topo, {r: tables[r] for r in rep.reps.tolist()}, groups, "analytical", replicas=rep, placement=gpus)
    run = WorkloadRun(topo, tables, groups, "analytical", replicas=rep, placement=gpus)
    assert run.replicas is None and run.notes[0].startswith("replica symmetry off")


def test_fault_hosts_follow_the_placement():
    topo = load_topology_dict()
    gpus = place("random:5", 8, topo.n_gpus)
    plan = plan_faults(fault_spec({"compute": [{"hosts": [int(gpus[3]) // 4], "factor": 2.0}]}), topo, 8, gpus=gpus)
    assert np.flatnonzero(plan.compute_scale != 1).tolist() == np.flatnonzero(gpus // 4 == gpus[3] // 4).tolist()
    packed = plan_faults(fault_spec({"compute": [{"hosts": [1], "factor": 2.0}]}), topo, 8)
    assert np.flatnonzero(packed.compute_scale != 1).tolist() == [4, 5, 6, 7]


def load_topology_dict():
    from netsim.topology.spec import build_topology, parse_spec

    return build_topology(parse_spec(TREE))
