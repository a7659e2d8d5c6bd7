"""The compiled engine (netsim.astra.compiled) is the event engine: on random configs
(benchmarks/fuzz_astra_engines.py's generator, both models) and on the benchmark's general shape it
prints the event engine's lines in the event engine's order, with the same event and message counts."""

import importlib
import random
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from netsim.astra import run_astra
from netsim.astra import compiled
from netsim.astra.system import parse_system
from netsim.chakra import EtNode, write_workload
from netsim.chakra.schema import CommType, NodeType
from netsim.errors import InputError
from test_astra_batched_algos import fuzz_module

ROOT = Path(__file__).resolve().parents[1]
COMP, COLL = int(NodeType.COMP_NODE), int(NodeType.COMM_COLL_NODE)


def _same(ref, new):
    assert new.engine == "compiled"
    for key in ("finish", "exposed", "gpu", "wall", "overlap"):
        assert np.array_equal(getattr(ref, key), getattr(new, key)), key
    assert ref.lines() == new.lines()  # in order: the same events ran in the same order
    assert ref.order == new.order and ref.notes == new.notes
    assert ref.stats["messages"] == new.stats["messages"] and ref.stats["events"] == new.stats["events"]
    assert ref.rows == new.rows  # every node's start and end


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**9), model=st.sampled_from(["analytical", "congestion-aware"]))
def test_random_configs_equal_the_event_engine_in_order(tmp_path, seed, model):
    fz = fuzz_module()
    cfg = fz.draw(random.Random(seed))
    res = fz.compare(cfg, tmp_path / str(seed), model)
    assert res["mismatch"] is None, (res, cfg)


@pytest.mark.parametrize("model", ["analytical", "congestion-aware"])
def test_the_generator_reaches_the_compiled_engine(tmp_path, model):
    """Most draws run compiled (the hypothesis test above is not vacuous)."""
    fz = fuzz_module()
    ran = [fz.compare(fz.draw(random.Random(f"c:{i}")), tmp_path / str(i), model) for i in range(12)]
    assert all(r["mismatch"] is None for r in ran)
    assert sum(r["compiled"] for r in ran) >= 6


def _general(tmp_path, kind, n=16, active=4, splits=16):
    """The benchmark's general shape, smaller: uneven compute, doubleBinaryTree all-reduce, direct
    all-gather, halvingDoubling reduce-scatter."""
    rng = random.Random(kind)
    per = []
    for r in range(n):
        nodes = [EtNode(0, "c", COMP, duration_micros=1 + (r * 37) % 23)]
        for k, (op, size) in enumerate([(CommType.ALL_REDUCE, 1 << 20), (CommType.ALL_GATHER, 1 << 18),
                                        (CommType.REDUCE_SCATTER, 100_003)]):
            nodes.append(EtNode(2 * k + 1, f"x{k}", COLL, data_deps=(2 * k,), comm_type=int(op), comm_size=size,
                                is_cpu_op=False))
            nodes.append(EtNode(2 * k + 2, f"c{k}", COMP, data_deps=(2 * k + 1,), duration_micros=rng.randrange(0, 9)))
        per.append(nodes)
    write_workload(tmp_path / "w", per)
    (tmp_path / "n.yml").write_text(f"topology: [{kind}]\nnpus_count: [{n}]\nbandwidth: [50]\nlatency: [500]\n")
    return parse_system({"scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": active,
                         "preferred-dataset-splits": splits, "collective-optimization": "localBWAware",
                         "local-mem-bw": 1600, "all-reduce-implementation": ["doubleBinaryTree"],
                         "all-gather-implementation": ["direct"], "reduce-scatter-implementation": ["halvingDoubling"]})


@pytest.mark.parametrize("op", ["all_reduce", "reduce_scatter"])
def test_windowed_direct_runs_compiled_in_the_analytical_model(tmp_path, op, monkeypatch):
    """A direct all-reduce / reduce-scatter with fewer messages in flight than peers: the batched kernels
    refuse it (their closed form needs every peer in flight); auto runs it compiled, as the event engine."""
    sysc = _general(tmp_path, "Ring", n=16, active=2, splits=8)
    sysc = parse_system({**sysc.raw, f"{op.replace('_', '-')}-implementation": ["direct3"]})
    ref = run_astra(tmp_path / "w", sysc, tmp_path / "n.yml", engine="full")
    monkeypatch.setattr(compiled, "MIN_MESSAGES", 1)
    _same(ref, run_astra(tmp_path / "w", sysc, tmp_path / "n.yml"))


@pytest.mark.parametrize("kind", ["Switch", "Ring", "FullyConnected"])
def test_general_shape_equals_the_event_engine(tmp_path, kind):
    sysc = _general(tmp_path, kind)
    ref = run_astra(tmp_path / "w", sysc, tmp_path / "n.yml", model="congestion-aware", engine="full")
    new = run_astra(tmp_path / "w", sysc, tmp_path / "n.yml", model="congestion-aware", engine="compiled")
    _same(ref, new)


def test_auto_runs_it_from_min_messages_on(tmp_path, monkeypatch):
    sysc = _general(tmp_path, "Switch", n=8, active=2, splits=4)
    small = run_astra(tmp_path / "w", sysc, tmp_path / "n.yml", model="congestion-aware")
    assert small.engine == "full"  # below MIN_MESSAGES: the event engine is cheaper than loading the kernel
    monkeypatch.setattr(compiled, "MIN_MESSAGES", 1)
    big = run_astra(tmp_path / "w", sysc, tmp_path / "n.yml", model="congestion-aware")
    _same(small, big)


def test_pools_grow_and_the_run_is_the_same(tmp_path, monkeypatch):
    """Pools (messages, callbacks, heap, tables, queues) that start too small are grown and the run repeated."""
    sysc = _general(tmp_path, "Switch", n=8, active=3, splits=8)
    ref = run_astra(tmp_path / "w", sysc, tmp_path / "n.yml", model="congestion-aware", engine="compiled")
    calls = []
    arrays = compiled._arrays

    def tiny(prep):
        a = arrays(prep)
        a["pool"], a["qcap"] = 8, 1
        return a

    from netsim.astra import compiled_loop

    run = compiled_loop.run

    def counted(*args):
        calls.append(args[0].shape[0])
        return run(*args)

    monkeypatch.setattr(compiled, "_arrays", tiny)
    monkeypatch.setattr(compiled_loop, "run", counted)
    new = run_astra(tmp_path / "w", sysc, tmp_path / "n.yml", model="congestion-aware", engine="compiled")
    assert len(calls) >= 3 and calls == sorted(calls)  # it ran out, grew, ran again
    assert ref.lines() == new.lines() and ref.stats == {**new.stats, "wall_s": ref.stats["wall_s"]}


@pytest.mark.parametrize("why, change", [
    ("the analytical and congestion-aware models only", {"model": "flow"}),
    ("several queues", {"num_queues_per_dim": 2}),
    ("ring, direct, halvingDoubling, doubleBinaryTree", {"algo": "oneRing"}),
])
def test_refused_where_it_does_not_follow_the_event_engine(tmp_path, why, change):
    sysc = _general(tmp_path, "Switch", n=4, active=1, splits=1)
    if "algo" in change:
        sysc = parse_system({**sysc.raw, "all-gather-implementation": [change.pop("algo")]})
    kw = {"model": "congestion-aware", **change}
    with pytest.raises(InputError, match=f"compiled engine does not apply: .*{why}"):
        run_astra(tmp_path / "w", sysc, tmp_path / "n.yml", engine="compiled", **kw)


@pytest.mark.slow
def test_the_benchmark_general_case_in_order(tmp_path):
    """bench_astra_general's 64-NPU general case (its Switch down-links see same-nanosecond arrivals of
    different streams, whose order only the event queue gives): every line in order."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        bench = importlib.import_module("bench_astra_general")
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    cli = bench.make_inputs(tmp_path, "general")
    args = [cli["--workload-configuration"], cli["--system-configuration"], cli["--network-configuration"],
            cli["--remote-memory-configuration"]]
    ref = run_astra(*args, model="congestion-aware", engine="full")
    _same(ref, run_astra(*args, model="congestion-aware"))


def test_without_numba_the_event_engine_runs(tmp_path, monkeypatch):
    import importlib.util

    sysc = _general(tmp_path, "Switch", n=8, active=2, splits=4)
    find = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "numba" else find(name, *a))
    monkeypatch.setattr(compiled, "MIN_MESSAGES", 1)
    assert run_astra(tmp_path / "w", sysc, tmp_path / "n.yml", model="congestion-aware").engine == "full"
    with pytest.raises(InputError, match="compiled engine does not apply: numba is not installed"):
        run_astra(tmp_path / "w", sysc, tmp_path / "n.yml", model="congestion-aware", engine="compiled")
