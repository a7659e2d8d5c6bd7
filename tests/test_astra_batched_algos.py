"""The batched direct / halvingDoubling / doubleBinaryTree kernels (netsim.astra.batched_algos) equal the
event engine (``engine="full"``) to the ns: random configs (benchmarks/fuzz_astra_engines.py's generator)
through hypothesis, a few small in the default run, more under ``-m slow``."""

import importlib
import random
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from netsim.astra import run_astra
from netsim.astra.batched_algos import hd_schedule
from netsim.astra.system import parse_system
from netsim.chakra import EtNode, write_workload
from netsim.chakra.schema import CommType, NodeType

ROOT = Path(__file__).resolve().parents[1]
COMP, COLL = int(NodeType.COMP_NODE), int(NodeType.COMM_COLL_NODE)


def fuzz_module():
    """``benchmarks/fuzz_astra_engines.py``, the random-config generator and comparer."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        return importlib.import_module("fuzz_astra_engines")
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def _check(tmp_path, seed, model):
    fz = fuzz_module()
    cfg = fz.draw(random.Random(seed))
    res = fz.compare(cfg, tmp_path / str(seed), model)
    assert res["mismatch"] is None, (res, cfg)
    return res, cfg


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**9))
def test_random_configs_equal_the_event_engine(tmp_path, seed):
    _check(tmp_path, seed, "analytical")


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**9), model=st.sampled_from(["analytical", "congestion-aware"]))
def test_random_configs_equal_the_event_engine_many(tmp_path, seed, model):
    _check(tmp_path, seed, model)


def _uneven(n, ops, sizes, rng):
    per = []
    for r in range(n):
        nodes = [EtNode(0, "c", COMP, duration_micros=rng.randrange(0, 30))]
        for k, (op, size) in enumerate(zip(ops, sizes)):
            nodes.append(EtNode(2 * k + 1, f"x{k}", COLL, data_deps=(2 * k,), comm_type=int(op), comm_size=size,
                                is_cpu_op=False))
            nodes.append(EtNode(2 * k + 2, f"c{k}", COMP, data_deps=(2 * k + 1,), duration_micros=rng.randrange(0, 30)))
        per.append(nodes)
    return per


@pytest.mark.parametrize("kind", ["Ring", "Switch", "FullyConnected"])
@pytest.mark.parametrize("algos", [("doubleBinaryTree", "direct", "halvingDoubling"),
                                   ("direct", "halvingDoubling", "direct"),
                                   ("halvingDoubling", "direct", "direct")])
def test_each_kernel_runs_batched_and_exact(tmp_path, kind, algos):
    """Every kernel on every topology, several active chunks and splits, uneven compute: the default engine
    is the batched one (no hand-back) and equals the event engine."""
    rng = random.Random(hash((kind, algos)) % 1000)
    n = 16
    per = _uneven(n, [CommType.ALL_REDUCE, CommType.ALL_GATHER, CommType.REDUCE_SCATTER],
                  [1 << 20, 65536, 100_003], rng)
    write_workload(tmp_path / "w", per)
    (tmp_path / "n.yml").write_text(f"topology: [{kind}]\nnpus_count: [{n}]\nbandwidth: [50]\nlatency: [500]\n")
    sysc = parse_system({"scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 3,
                         "preferred-dataset-splits": 8, "collective-optimization": "localBWAware",
                         "local-mem-bw": 1600, "all-reduce-implementation": [algos[0]],
                         "all-gather-implementation": [algos[1]], "reduce-scatter-implementation": [algos[2]]})
    ref = run_astra(tmp_path / "w", sysc, tmp_path / "n.yml", engine="full")
    new = run_astra(tmp_path / "w", sysc, tmp_path / "n.yml")
    assert new.engine == "batched" and ref.notes == new.notes
    for key in ("finish", "exposed", "gpu", "wall", "overlap"):
        assert np.array_equal(getattr(ref, key), getattr(new, key)), key
    assert sorted(ref.lines()) == sorted(new.lines()) and ref.stats["messages"] == new.stats["messages"]


@pytest.mark.parametrize("why, algo, n", [
    ("window of 3", "direct3", 8),
    ("not a power of two", "halvingDoubling", 6),
    ("an all-reduce on a power of two only", "doubleBinaryTree", 6),
])
def test_refused_where_not_proven(tmp_path, why, algo, n):
    per = [[EtNode(0, "c", COMP, duration_micros=r),  # uneven: not the symmetric engine
            EtNode(1, "ar", COLL, data_deps=(0,), comm_type=int(CommType.ALL_REDUCE), comm_size=4096,
                   is_cpu_op=False)] for r in range(n)]
    write_workload(tmp_path / "w", per)
    (tmp_path / "n.yml").write_text(f"topology: [Switch]\nnpus_count: [{n}]\nbandwidth: [50]\nlatency: [500]\n")
    sysc = parse_system({"scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
                         "preferred-dataset-splits": 1, "collective-optimization": "localBWAware",
                         "local-mem-bw": 1600, "all-reduce-implementation": [algo]})
    with pytest.raises(Exception, match=f"batched engine does not apply: .*{why}"):
        run_astra(tmp_path / "w", sysc, tmp_path / "n.yml", engine="batched")


def test_halving_doubling_schedule():
    """The partner offsets and sizes of ASTRA-sim's halvingDoubling on 8 NPUs, then the exit insert."""
    assert hd_schedule("all_reduce", 8, 800) == [(1, 400, False), (2, 200, True), (4, 100, True),
                                                 (4, 100, False), (2, 200, False), (1, 400, False), (0, 800, False)]
    assert hd_schedule("all_gather", 8, 100) == [(4, 100, False), (2, 200, False), (1, 400, False), (0, 800, False)]
    assert hd_schedule("reduce_scatter", 8, 800) == [(1, 400, False), (2, 200, True), (4, 100, True),
                                                     (8, 50, False)]


_HAND_BACK = {  # two draws of the generator (at 1db8922, seeds 1:89 and 1:213)
    "frees a bundle before the last second-half send": {
        "kind": "Ring", "n": 7, "ops": ["all_gather", "all_reduce"], "sizes": [1048576, 100003],
        "compute": [[3, 3, 5], [0, 1, 2], [3, 0, 5], [3, 5, 1], [0, 1, 5], [5, 5, 4], [2, 1, 4]],
        "system": {"scheduling-policy": "FIFO", "endpoint-delay": 37, "active-chunks-per-dimension": 2,
                   "preferred-dataset-splits": 3, "collective-optimization": "baseline", "local-mem-bw": 3.3,
                   "all-reduce-implementation": ["direct"], "all-gather-implementation": ["ring"],
                   "reduce-scatter-implementation": ["direct15"]}, "bw": 200.0, "latency": 70.0},
    "at the instant of its last first-half receive": {
        "kind": "Ring", "n": 5, "ops": ["all_reduce", "all_gather", "reduce_scatter"], "sizes": [1, 1048576, 1],
        "compute": [[3, 16, 35, 2], [25, 31, 28, 19], [29, 19, 1, 0], [10, 11, 20, 22], [23, 11, 32, 5]],
        "system": {"scheduling-policy": "FIFO", "endpoint-delay": 1, "active-chunks-per-dimension": 1,
                   "preferred-dataset-splits": 16, "collective-optimization": "localBWAware", "local-mem-bw": 3.3,
                   "all-reduce-implementation": ["direct"], "all-gather-implementation": ["direct"],
                   "reduce-scatter-implementation": ["direct9"]}, "bw": 200.0, "latency": 1.0},
}


@pytest.mark.parametrize("why", list(_HAND_BACK))
def test_direct_all_reduce_hands_back_what_its_closed_form_does_not_carry(tmp_path, why):
    """Two configs where the direct all-reduce kernel meets an event order it does not model (with either
    check switched off its finish times differ from the event engine's): the default engine gives the run
    to the event engine (a note says why) and equals it."""
    fz = fuzz_module()
    cfg = _HAND_BACK[why]
    res = fz.compare(cfg, tmp_path / "a", "analytical")
    assert res["mismatch"] is None and res["handed_back"] and res["engine"] == "full"
    notes = run_astra(*fz.write(cfg, tmp_path / "again")[:3]).notes
    assert any("gave way to the event engine" in n and why in n for n in notes)


@pytest.mark.parametrize("kind", ["Switch", "Ring"])
@pytest.mark.parametrize("model, algo", [("analytical", "direct"), ("analytical", "ring"),
                                         ("congestion-aware", "ring")])
def test_all_to_all_runs_batched(tmp_path, kind, model, algo):
    """All-to-all (ring: p(p-1)/2 messages per chunk, direct: p - 1) runs batched and equals the event engine."""
    rng = random.Random(5)
    n = 6
    per = _uneven(n, [CommType.ALL_TO_ALL, CommType.ALL_REDUCE], [65536, 4096], rng)
    write_workload(tmp_path / "w", per)
    (tmp_path / "n.yml").write_text(f"topology: [{kind}]\nnpus_count: [{n}]\nbandwidth: [50]\nlatency: [500]\n")
    chunks = 1 if model == "congestion-aware" else 2
    sysc = parse_system({"scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": chunks,
                         "preferred-dataset-splits": 4, "collective-optimization": "localBWAware",
                         "local-mem-bw": 1600, "all-reduce-implementation": ["ring"],
                         "all-to-all-implementation": [algo]})
    ref = run_astra(tmp_path / "w", sysc, tmp_path / "n.yml", model=model, engine="full")
    new = run_astra(tmp_path / "w", sysc, tmp_path / "n.yml", model=model)
    assert new.engine == "batched"
    for key in ("finish", "exposed", "gpu", "wall", "overlap"):
        assert np.array_equal(getattr(ref, key), getattr(new, key)), key
    assert sorted(ref.lines()) == sorted(new.lines()) and ref.stats["messages"] == new.stats["messages"]


@pytest.mark.parametrize("net", ["topology: [Switch]\nnpus_count: [8]\nbandwidth: [50]\nlatency: [500]\n",
                                 "topology: [Ring, Switch]\nnpus_count: [2, 4]\nbandwidth: [200, 50]\n"
                                 "latency: [100, 500]\n"])
@pytest.mark.parametrize("algo", ["direct", "halvingDoubling"])
def test_sub_group_kernels(tmp_path, net, algo):
    """direct and halvingDoubling on comm groups (local rings in JSON member order, 10 ns bundles; 1-D and 2-D
    networks): batched, equal to the event engine.  Groups of 4 and of 2 (a direct all-reduce on a sub-group's
    ring reduces in its third batch of bundles only from 3 members on)."""
    import json

    rng = random.Random(11)
    groups = {"1": [6, 0, 3, 5], "2": [1, 7], "3": [4, 2]}
    mine = {r: g for g, m in groups.items() for r in m}
    per = []
    for r in range(8):
        nodes = [EtNode(0, "c", COMP, duration_micros=rng.randrange(0, 20))]
        for k, (op, size) in enumerate([(CommType.ALL_REDUCE, 1 << 20), (CommType.REDUCE_SCATTER, 100_003),
                                        (CommType.ALL_GATHER, 65536)]):
            nodes.append(EtNode(2 * k + 1, f"x{k}", COLL, data_deps=(2 * k,), comm_type=int(op), comm_size=size,
                                is_cpu_op=False, pg_name=mine[r]))
            nodes.append(EtNode(2 * k + 2, f"c{k}", COMP, data_deps=(2 * k + 1,), duration_micros=rng.randrange(0, 20)))
        per.append(nodes)
    write_workload(tmp_path / "w", per)
    (tmp_path / "n.yml").write_text(net)
    (tmp_path / "g.json").write_text(json.dumps(groups))
    sysc = parse_system({"scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 2,
                         "preferred-dataset-splits": 4, "collective-optimization": "localBWAware",
                         "local-mem-bw": 50, "all-reduce-implementation": [algo],
                         "all-gather-implementation": [algo], "reduce-scatter-implementation": [algo]})
    args = (tmp_path / "w", sysc, tmp_path / "n.yml")
    ref = run_astra(*args, comm_groups=tmp_path / "g.json", engine="full")
    new = run_astra(*args, comm_groups=tmp_path / "g.json")
    assert new.engine == "batched" and ref.notes == new.notes
    for key in ("finish", "exposed", "gpu", "wall", "overlap"):
        assert np.array_equal(getattr(ref, key), getattr(new, key)), key
    assert sorted(ref.lines()) == sorted(new.lines()) and ref.stats["messages"] == new.stats["messages"]


@pytest.mark.parametrize("block", range(3))
def test_windowed_direct_all_gather_and_all_to_all(tmp_path, block):
    """directN with a window short of the peers, on all-gathers and all-to-alls (the generator's configs with
    those operations and random windows): the default engine equals the event engine, most of them batched."""
    fz = fuzz_module()
    batched = 0
    for i in range(block * 12, block * 12 + 12):
        rng = random.Random(f"w:{i}")
        cfg = fz.draw(rng)
        cfg["system"]["all-gather-implementation"] = [f"direct{rng.randrange(1, cfg['n'] + 1)}"]
        cfg["system"]["all-to-all-implementation"] = [f"direct{rng.randrange(1, cfg['n'] + 1)}"]
        cfg["ops"] = [rng.choice(["all_gather", "all_to_all"]) for _ in cfg["ops"]]
        res = fz.compare(cfg, tmp_path / str(i), "analytical")
        assert res["mismatch"] is None, (res, cfg)
        batched += res["engine"] == "batched"
    assert batched >= 4
