"""Components that start out of step are re-timed exactly (``netsim.collectives.lockstep.Stagger``).

When a step's transfers that share links do not start at one instant, the default engine times
each such component as the fluid max-min model of its own transfers with their own starts
(:func:`netsim.network.maxmin.drain_staggered`) instead of falling back to the event queue.
These tests check the drain against the simultaneous one and the collectives against the
event-driven executor, on layouts where the re-timing is used (``steps_staggered`` > 0).
"""

import numpy as np
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.collectives.executor import run_collective
from netsim.network.flow import FlowNetwork
from netsim.network.maxmin import drain_alone, drain_staggered
from netsim.perftests import BenchConfig, build_plan, placed_ranks, validated
from test_engine_exact import tree

RTOL = 1e-9


@st.composite
def batches(draw):
    n_links = draw(st.integers(1, 6))
    n = draw(st.integers(1, 10))
    routes = [draw(st.lists(st.integers(0, n_links - 1), min_size=0, max_size=3, unique=True)) for _ in range(n)]
    indptr = np.r_[0, np.cumsum([len(r) for r in routes])].astype(np.int64)
    links = np.array([link for r in routes for link in r], dtype=np.int64)
    nbytes = np.array(draw(st.lists(st.sampled_from([0.0, 1.0, 2.5, 4.0, 7.0]), min_size=n, max_size=n)))
    capacity = np.array(draw(st.lists(st.sampled_from([1.0, 2.0, 3.0]), min_size=n_links, max_size=n_links)))
    caps = np.array(draw(st.lists(st.sampled_from([np.inf, 0.5, 1.5]), min_size=n, max_size=n)))
    return indptr, links, nbytes, capacity, caps


@settings(max_examples=200, deadline=None)
@given(batches())
def test_together_equals_the_simultaneous_drain(b):
    indptr, links, nbytes, capacity, caps = b
    alone, complete, _ = drain_alone(indptr, links, nbytes, capacity, caps, max_rounds=64)
    assert complete
    fin = drain_staggered(indptr, links, nbytes, capacity, np.zeros(nbytes.size), caps)
    np.testing.assert_allclose(fin, alone, rtol=RTOL, atol=1e-12)


@settings(max_examples=200, deadline=None)
@given(batches(), st.lists(st.sampled_from([0.0, 0.25, 1.0, 3.0]), min_size=10, max_size=10))
def test_staggered_drain_is_feasible_and_never_faster_than_alone(b, offsets):
    """A flow never drains faster than alone on its path at its cap, and shifting every start
    by the same amount shifts every finish by it."""
    indptr, links, nbytes, capacity, caps = b
    start = np.array(offsets[:nbytes.size])
    fin = drain_staggered(indptr, links, nbytes, capacity, start, caps)
    lengths = np.diff(indptr)
    for f in range(nbytes.size):
        path = links[indptr[f]:indptr[f + 1]]
        if lengths[f] and nbytes[f] > 0:
            best = min(float(capacity[path].min()), float(caps[f]))
            assert fin[f] >= start[f] + nbytes[f] / best * (1 - 1e-12)
        else:
            assert fin[f] == start[f]
    np.testing.assert_allclose(drain_staggered(indptr, links, nbytes, capacity, start + 5.0, caps), fin + 5.0,
                               rtol=1e-12)


def test_a_late_flow_meets_what_is_left():
    """Two flows of 2 bytes on one link of 2 B/s, the second 0.5 s late: the first drains alone at
    2 B/s for 0.5 s, then both share (1 B/s each): the first ends at 1.5 s, the second at 2.0 s."""
    ip, lk = np.array([0, 1, 2]), np.array([0, 0])
    fin = drain_staggered(ip, lk, np.array([2.0, 2.0]), np.array([2.0]), np.array([0.0, 0.5]))
    assert fin.tolist() == [1.5, 2.0]
    apart = drain_staggered(ip, lk, np.array([2.0, 2.0]), np.array([2.0]), np.array([0.0, 1.0]))
    assert apart.tolist() == [1.0, 2.0]  # no overlap: each alone


@pytest.fixture(autouse=True)
def _small_patterns_compiled(monkeypatch):
    """These layouts are small: run their steps compiled as a large pattern's would be."""
    from netsim.collectives import lockstep
    monkeypatch.setattr(lockstep, "STEP_KERNEL_MIN_TRANSFERS", 0)


def _run(topo, cfg, size, engine):
    cfg = validated(cfg, topo)
    p = build_plan(topo, cfg, float(size))
    net = FlowNetwork(simpy.Environment(), topo)
    res = run_collective(net, p.schedule, placed_ranks(topo, cfg), engine=engine)
    return res, net.link_stats()["bytes"].copy()


@pytest.mark.parametrize("over,rail,op,algo,gpus,placement", [
    (1, True, "all_reduce", "ring", 16, "random:11"),
    (4, True, "all_gather", "ring", 16, "random:11"),
    (1, False, "all_reduce", "tree", 8, "strided:3"),
    (4, False, "all_reduce", "tree", 8, "strided:3"),
    (1, True, "all_reduce", "tree", 10, "random:3"),
])
@pytest.mark.parametrize("size", [1 << 12, 1 << 18, 3 << 20])
def test_staggered_steps_equal_the_event_driven_run(over, rail, op, algo, gpus, placement, size):
    topo = tree(over, rail, routing="ftree")
    cfg = BenchConfig(op, algo=algo, gpus=gpus, placement=placement)
    auto, b_auto = _run(topo, cfg, size, "auto")
    ref, b_ref = _run(topo, cfg, size, "event")
    np.testing.assert_allclose(auto.finish, ref.finish, rtol=RTOL, atol=0)
    np.testing.assert_allclose(b_auto, b_ref, rtol=RTOL, atol=0)
    if size == 1 << 18:  # the layouts were chosen because they stagger: keep them doing so
        assert auto.stats["mode"] == "staggered" and auto.stats["steps_staggered"] > 0


@pytest.mark.slow
def test_nccl_ring_out_of_step_equals_the_event_driven_run():
    """1 GiB NCCL ring all-reduce on a 2,048-GPU cut of h100-fat-tree-16k (the rings' hops cross
    leaves and spines with different latencies, ranks drift out of step): staggered steps, equal to
    the event-driven run."""
    from conftest import TOPOLOGIES
    from netsim.topology.spec import load_topology
    topo = load_topology(TOPOLOGIES / "h100-fat-tree-16k.yaml")
    cfg = BenchConfig("all_reduce", algo="ring", gpus=2048)
    auto, b_auto = _run(topo, cfg, 1 << 30, "auto")
    ref, b_ref = _run(topo, cfg, 1 << 30, "event")
    assert auto.stats["mode"] == "staggered" and auto.stats["steps_staggered"] > 0
    np.testing.assert_allclose(auto.finish, ref.finish, rtol=RTOL, atol=0)
    np.testing.assert_allclose(b_auto, b_ref, rtol=RTOL, atol=0)


@settings(max_examples=300, deadline=None)
@given(batches(), st.lists(st.sampled_from([0.0, 0.25, 1.0, 1.5, 3.0]), min_size=10, max_size=10))
def test_compiled_drain_equals_the_numpy_reference(b, offsets):
    from netsim.network.drainkernel import drain_staggered_batch
    indptr, links, nbytes, capacity, caps = b
    start = np.array(offsets[:nbytes.size])
    ref = drain_staggered(indptr, links, nbytes, capacity, start, caps)
    got = drain_staggered_batch(indptr, links, nbytes, capacity, start, caps, np.array([0, nbytes.size]))
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-15)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(batches(), st.lists(st.sampled_from([0.0, 0.5, 2.0]), min_size=10, max_size=10)),
                min_size=1, max_size=4))
def test_batched_drains_equal_one_by_one(parts):
    """Link-disjoint batches drained in one compiled call equal each drained alone (numpy)."""
    from netsim.network.drainkernel import drain_staggered_batch
    ips, lks, nb, cap, caps, starts, ptr, ref = [], [], [], [], [], [], [0], []
    base = 0
    for (indptr, links, nbytes, capacity, c), offs in parts:
        start = np.array(offs[:nbytes.size])
        ref.append(drain_staggered(indptr, links, nbytes, capacity, start, c))
        ips.append(np.diff(indptr))
        lks.append(links + base)
        cap.append(capacity)
        base += capacity.size
        nb.append(nbytes), caps.append(c), starts.append(start)
        ptr.append(ptr[-1] + nbytes.size)
    indptr = np.r_[0, np.cumsum(np.concatenate(ips))]
    got = drain_staggered_batch(indptr, np.concatenate(lks), np.concatenate(nb), np.concatenate(cap),
                                np.concatenate(starts), np.concatenate(caps), np.array(ptr))
    np.testing.assert_allclose(got, np.concatenate(ref), rtol=1e-12, atol=1e-15)


def test_without_numba_the_numpy_reference_times_the_same(monkeypatch):
    import sys
    topo = tree(1, True, routing="ftree")
    cfg = BenchConfig("all_reduce", algo="ring", gpus=16, placement="random:11")
    compiled, _ = _run(topo, cfg, 1 << 18, "auto")
    monkeypatch.setitem(sys.modules, "netsim.network.drainkernel", None)  # the imports fail: numpy path
    monkeypatch.setitem(sys.modules, "netsim.network.stepkernel", None)
    ref, _ = _run(topo, cfg, 1 << 18, "auto")
    assert ref.stats["mode"] == "staggered"
    np.testing.assert_allclose(compiled.finish, ref.finish, rtol=1e-12, atol=0)


@pytest.mark.parametrize("collide", [False, True])
def test_shape_classes_are_checked_not_only_hashed(monkeypatch, collide):
    """Components are one class only if they are the same max-min problem up to link names: two
    transfers on one shared link (twice, on different links) are one class; a transfer alone on
    its link is another.  With every hash equal
    (``collide``) the entry-by-entry check must still tell them apart (colliding components may
    then be classes of their own: fewer shared drains, never a wrong one)."""
    from types import SimpleNamespace

    from netsim.collectives import lockstep
    if collide:
        monkeypatch.setattr(lockstep, "mix_hash", lambda *parts: np.zeros(np.broadcast(*parts).shape, np.uint64))
    topo = SimpleNamespace(capacity=np.full(16, 10.0), path_latency=lambda ip, lk: np.diff(ip) * 1e-6)
    # six transfers of one link each: {0,1} on link 0; {2} link 1; {3} link 2; {4,5} link 3; then
    # two components of two 2-link transfers each, sharing their first link (6,7) or not (8,9: the
    # second of one is the first of the other): same sizes, lengths, bytes, latencies
    def classes(routes):
        indptr = np.r_[0, np.cumsum([len(r) for r in routes])]
        links = np.array([x for r in routes for x in r])
        stag = lockstep.Stagger((indptr, links), np.arange(len(routes)), np.ones(len(routes)), None, 0.0, topo)
        stag._build()
        return stag.shapes()[stag.comp]  # class of each transfer's component

    shape = classes([[0], [0], [1], [2], [3], [3], [4, 5], [4, 6], [7, 8], [8, 9]])
    assert shape[0] != shape[2] and shape[4] != shape[3] and shape[6] != shape[8]
    two = classes([[4, 5], [4, 6], [7, 8], [8, 9]])  # alike but for which link they share
    assert two[0] != two[2]
    if not collide:
        assert shape[0] == shape[4]  # two transfers sharing one link, twice
        assert shape[2] == shape[3]  # one transfer alone, twice


def _numpy_steps(monkeypatch):
    """Every step on :meth:`Lockstep.step` (numpy; its drains still numba's)."""
    from netsim.collectives import lockstep
    monkeypatch.setattr(lockstep.Stagger, "kernel", lambda self: False)


@settings(max_examples=12, deadline=None)
@given(st.sampled_from([(1, True), (4, True), (1, False), (4, False)]),
       st.sampled_from([("all_reduce", "ring"), ("all_gather", "ring"), ("reduce_scatter", "ring"),
                        ("all_reduce", "tree")]),
       st.integers(5, 16), st.integers(0, 999), st.sampled_from([1 << 16, 1 << 18, 3 << 20]))
def test_compiled_step_gives_the_numpy_steps_floats(fabric, op_algo, gpus, seed, size):
    """The step in one numba call (``netsim.network.stepkernel``) computes every float as
    :meth:`Lockstep.step` and the vectorized recurrence do: the same finish times, bit for bit,
    and the same outcome of the check, on random placements."""
    topo = tree(*fabric, routing="ftree")
    cfg = BenchConfig(op_algo[0], algo=op_algo[1], gpus=gpus, placement=f"random:{seed}")
    compiled, b_comp = _run(topo, cfg, size, "auto")
    with pytest.MonkeyPatch.context() as mp:
        _numpy_steps(mp)
        ref, b_ref = _run(topo, cfg, size, "auto")
    assert compiled.stats == ref.stats
    assert np.array_equal(compiled.finish, ref.finish)
    assert np.array_equal(b_comp, b_ref)


def test_compiled_step_is_used_and_staggers(monkeypatch):
    """The layout of the test above that staggers does so through the compiled step."""
    from netsim.network import stepkernel
    calls = []
    real = stepkernel.lockstep_advance
    monkeypatch.setattr(stepkernel, "lockstep_advance", lambda *a: calls.append(1) or real(*a))
    res, _ = _run(tree(1, True, routing="ftree"), BenchConfig("all_reduce", algo="ring", gpus=16,
                                                               placement="random:11"), 1 << 18, "auto")
    assert res.stats["mode"] == "staggered" and res.stats["steps_staggered"] > 0 and calls


@pytest.mark.parametrize("entries", [1, 2])
def test_a_small_drain_table_changes_no_result(monkeypatch, entries):
    """The compiled step's drain table grows, and empties when full; a table too small for one
    step's new drains sends the run to the event-driven executor.  None of it changes a result."""
    from netsim.collectives import lockstep
    topo = tree(1, True, routing="ftree")
    cfg = BenchConfig("all_reduce", algo="ring", gpus=16, placement="random:11")
    big, _ = _run(topo, cfg, 3 << 20, "auto")
    monkeypatch.setattr(lockstep, "STAGGER_TABLE_ENTRIES", entries)
    small, _ = _run(topo, cfg, 3 << 20, "auto")
    np.testing.assert_allclose(small.finish, big.finish, rtol=RTOL, atol=0)
    if small.stats["mode"] == "staggered":
        assert np.array_equal(small.finish, big.finish)


def test_step_kernel_runs_as_plain_python():
    """With ``NUMBA_DISABLE_JIT=1`` the step kernel is ordinary Python (what coverage measures) and
    still gives the numpy steps' floats."""
    import os
    import subprocess
    import sys
    code = ("import sys, warnings; sys.path.insert(0, 'tests'); warnings.simplefilter('ignore', RuntimeWarning);"
            "import numpy as np; from test_stagger import _run, tree, BenchConfig;"
            "from netsim.collectives import lockstep; lockstep.STEP_KERNEL_MIN_TRANSFERS = 0;"
            "topo = tree(1, True, routing='ftree');"
            "cfg = BenchConfig('all_reduce', algo='ring', gpus=16, placement='random:11');"
            "a, _ = _run(topo, cfg, 1 << 18, 'auto');"
            "lockstep.Stagger.kernel = lambda self: False;"
            "b, _ = _run(topo, cfg, 1 << 18, 'auto');"
            "assert a.stats['mode'] == 'staggered', a.stats;"
            "assert np.array_equal(a.finish, b.finish); print('same')")
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "same"
