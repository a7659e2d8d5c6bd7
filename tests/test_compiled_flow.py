"""The compiled flow engine (:mod:`netsim.network.flowkernel`, :mod:`netsim.network.flowrepair`)
equals the numpy flow table it follows step for step.

Random transfers (random instants, sizes and caps, oversubscribed trees, every routing) and whole
all-to-alls finish at the same instants (1e-9 relative) on ``kernel="compiled"``,
``kernel="numpy"`` and ``kernel="auto"`` (which moves its flows to the compiled table mid-run),
incremental or not; the kernels also run as plain Python (``NUMBA_DISABLE_JIT=1``).
"""

import importlib
import os
import subprocess
import sys

import numpy as np
import pytest
import simpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netsim.network import flow as flow_mod
from netsim.network.compiled import CompiledFlowTable, available
from netsim.network.flow import FlowNetwork
from test_engine_exact import tree
from test_flow_incremental import finish_times as _finish_times
from test_flow_incremental import job

EXAMPLES = int(os.environ.get("NETSIM_EXAMPLES", 40))
pytestmark = pytest.mark.skipif(available() is not None, reason="numba unavailable")


def finish_times(topo, jobs, kernel: str, incremental: bool = True):
    return _finish_times(topo, jobs, incremental, kernel)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(over=st.sampled_from([1, 2, 4, 8]), rail=st.booleans(), jobs=st.lists(job, min_size=2, max_size=60),
       routing=st.sampled_from(["ecmp", "ftree", "spray", "adaptive"]), incremental=st.booleans())
def test_compiled_equals_numpy(over, rail, jobs, routing, incremental):
    topo = tree(over, rail, routing=routing)
    ref, net_r = finish_times(topo, jobs, "numpy", incremental)
    got, net_c = finish_times(topo, jobs, "compiled", incremental)
    assert isinstance(net_c._flows, CompiledFlowTable)
    np.testing.assert_allclose(got, ref, rtol=1e-9, atol=0)
    np.testing.assert_allclose(net_c.link_stats()["busy_s"], net_r.link_stats()["busy_s"], rtol=1e-9, atol=1e-15)
    np.testing.assert_array_equal(net_c.link_stats()["peak_flows"], net_r.link_stats()["peak_flows"])
    if not incremental:
        assert net_c.stats["partial_solves"] == 0


#: one end of a transfer through a hub GPU: (start, the other GPU, bytes, cap, True: the hub sends)
spoke = st.tuples(st.sampled_from([0.0, 0.0, 1e-6, 3e-6]), st.integers(0, 31), st.sampled_from([1e6, 1e6, 2e6, 3.3e6]),
                  st.sampled_from([None, None, 5e9, 2e10]), st.booleans())


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hub=st.integers(0, 31), spokes=st.lists(spoke, min_size=8, max_size=60),
       others=st.lists(job, max_size=20), over=st.sampled_from([1, 4]), routing=st.sampled_from(["ecmp", "ftree"]))
def test_many_flows_on_one_nic(hub, spokes, others, over, routing):
    """Many flows through one GPU's NIC, most of equal size (ties), some capped, some starting
    later, with background flows: as flows end and start, whole sets of flows change bottleneck
    at once (the hub's NIC, the far NICs, a leaf uplink, their caps).  Same finishes."""
    jobs = [(t0, hub, peer, size, cap) if out else (t0, peer, hub, size, cap) for t0, peer, size, cap, out in spokes]
    jobs += others
    topo = tree(over, False, routing=routing)
    ref, net_r = finish_times(topo, jobs, "numpy")
    got, net_c = finish_times(topo, jobs, "compiled")
    assert isinstance(net_c._flows, CompiledFlowTable)
    np.testing.assert_allclose(got, ref, rtol=1e-9, atol=0)
    np.testing.assert_allclose(net_c.link_stats()["busy_s"], net_r.link_stats()["busy_s"], rtol=1e-9, atol=1e-15)
    np.testing.assert_array_equal(net_c.link_stats()["peak_flows"], net_r.link_stats()["peak_flows"])


def test_auto_moves_to_compiled_mid_run(monkeypatch):
    """``auto`` starts on numpy and hands its live flows, rates and link summaries to the
    compiled table after COMPILE_AFTER events: nothing changes."""
    rng = np.random.default_rng(7)
    jobs = [(float(rng.choice([0.0, 1e-6, 3e-6])), int(rng.integers(32)), int(rng.integers(32)),
             float(rng.choice([1e5, 1e6, 4e6])), None) for _ in range(120)]
    topo = tree(4, False, routing="ecmp")
    ref, _ = finish_times(topo, jobs, "numpy")
    monkeypatch.setattr(flow_mod, "COMPILE_AFTER", 5)
    got, net = finish_times(topo, jobs, "auto")
    assert isinstance(net._flows, CompiledFlowTable) and net.stats["events"] > 5
    np.testing.assert_allclose(got, ref, rtol=1e-9, atol=0)


def _alltoall(n: int, kernel: str) -> np.ndarray:
    bench = importlib.import_module("netsim.perftests.collective")
    from netsim.collectives.executor import run_collective
    from netsim.results import nccl_table as nt
    from netsim.topology.policy import with_routing
    from netsim.topology.spec import load_topology

    topo = with_routing(load_topology("topologies/h100-superpod-1024.yaml"), "ecmp")
    cfg = bench.BenchConfig(op="alltoall", model="flow", gpus=n)
    size, _, _ = nt.size_and_count("alltoall", 64 << 20, n, "float")
    sched = bench.build_plan(topo, cfg, float(size)).schedule
    net = FlowNetwork(simpy.Environment(), topo, kernel=kernel)
    return run_collective(net, sched, bench.placed_ranks(topo, cfg), engine="event").finish


@pytest.mark.parametrize("n", [320, pytest.param(448, marks=pytest.mark.slow), pytest.param(512, marks=pytest.mark.slow)])
def test_alltoall_on_ecmp_equals_numpy(n):
    """The contended case the compiled engine is for: a 64 MiB all-to-all hashed by ECMP."""
    np.testing.assert_allclose(_alltoall(n, "compiled"), _alltoall(n, "numpy"), rtol=1e-9, atol=0)


def test_kernels_run_as_plain_python():
    """With ``NUMBA_DISABLE_JIT=1`` the kernels are ordinary Python (what coverage measures), and
    give the same answer."""
    code = ("import numpy as np, sys; sys.path.insert(0, 'tests');"
            "from test_compiled_flow import finish_times; from test_engine_exact import tree;"
            "rng = np.random.default_rng(3);"
            "jobs = [(float(rng.choice([0.0, 2e-6])), int(rng.integers(32)), int(rng.integers(32)),"
            " float(rng.choice([1e5, 1e6])), None) for _ in range(25)];"
            "topo = tree(2, True, routing='ecmp');"
            "a, _ = finish_times(topo, jobs, 'numpy'); b, net = finish_times(topo, jobs, 'compiled');"
            "assert type(net._flows).__name__ == 'CompiledFlowTable';"
            "np.testing.assert_allclose(b, a, rtol=1e-9, atol=0); print('same')")
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "same"


def test_without_numba_the_numpy_table_runs_with_a_note():
    code = ("import sys; sys.modules['numba'] = None;"
            "import simpy, numpy as np; from netsim.network.flow import FlowNetwork;"
            "sys.path.insert(0, 'tests'); from test_engine_exact import tree;"
            "net = FlowNetwork(simpy.Environment(), tree(2, False), kernel='compiled');"
            "print(type(net._flows).__name__); print(net.notes[0])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    kind, note = out.stdout.strip().splitlines()
    assert kind == "FlowTable" and note.startswith("numba unavailable") and "numpy reference" in note


def test_bench_engines_event_and_reference_agree(monkeypatch):
    """``--engine reference`` keeps the numpy table; ``event`` moves to the compiled one (here after
    20 events): the same nccl-tests row."""
    bench = importlib.import_module("netsim.perftests.collective")
    from netsim.topology.policy import with_routing
    from netsim.topology.spec import load_topology

    monkeypatch.setattr(flow_mod, "COMPILE_AFTER", 20)
    topo = with_routing(load_topology("topologies/h100-superpod-1su.yaml"), "ecmp")
    rows = {}
    for engine in ("event", "reference"):
        cfg = bench.BenchConfig("alltoall", gpus=64, placement="random:3", engine=engine)
        rows[engine], stats = bench.run_one(topo, cfg, 8 << 20)
        assert stats["events"] > 20
    assert rows["event"].time_us == pytest.approx(rows["reference"].time_us, rel=1e-9)


@settings(max_examples=EXAMPLES, deadline=None)
@given(batches=st.lists(st.lists(st.integers(0, 5), min_size=1, max_size=400), min_size=1, max_size=6))
def test_link_blocks_get_exactly_the_room_they_use(batches):
    """``lb_space`` predicts exactly the pool room :func:`add_flows` takes, however many entries
    one call brings a link (a block moves again and again while they keep coming); the table
    then never writes past its link-block pool.  Before, one batch of many flows on one link
    (a RoCE ring all-reduce with 4 queue pairs on a random placement) moved blocks further than
    predicted and corrupted the heap."""
    from netsim.network import flowkernel as fk

    t = CompiledFlowTable(np.full(6, 1e9))
    for links in batches:
        links = np.asarray(links, dtype=np.int64)
        k = links.size
        before_lb = int(t.scalars[fk.M_LB])
        need = fk.lb_space(t.li, links)
        roomy = before_lb + need <= t.lbp.shape[0] and int(t.scalars[fk.M_POOL]) + k <= t.pl.shape[0]
        t.add(np.arange(k + 1), links, np.full(k, 1e6), np.zeros(k), np.full(k, np.inf), 0, np.arange(k))
        if roomy:  # no fresh layout in between: the pool grew by exactly the prediction
            assert int(t.scalars[fk.M_LB]) == before_lb + need
        assert int(t.scalars[fk.M_LB]) <= t.lbp.shape[0]
        assert (t.li[:, fk.LB_COUNT] <= t.li[:, fk.LB_ROOM]).all()


@pytest.mark.slow
def test_roce_ring_with_four_queue_pairs_runs_and_equals_numpy():
    """The case that corrupted the heap (benchmarks/bench_routing.py R2, 4 QPs, random:1)."""
    sys.path.insert(0, str(__import__("conftest").REPO / "benchmarks"))
    import bench_routing
    from netsim.perftests import bench

    topo = bench_routing._roce_tree(4)
    got = [bench(topo, "all_reduce", [64 << 20], gpus=64, placement="random:1", engine=e)[0].time_us
           for e in ("event", "reference")]
    assert got[0] == pytest.approx(got[1], rel=1e-9)


@settings(max_examples=EXAMPLES, deadline=None)
@given(paths=st.lists(st.lists(st.integers(0, 11), min_size=0, max_size=6, unique=True), min_size=1, max_size=40),
       data=st.data())
def test_repair_rounds_compress_only_the_flows_that_joined(paths, data):
    """A repair round compresses only the flows that joined R (``_compress_more``, the earlier
    flows' local link ids kept): the same ids, lengths and starts as compressing all of R afresh,
    however R grew in between."""
    from netsim.network import flowkernel as fk
    from netsim.network import flowrepair as fr

    t = CompiledFlowTable(np.full(12, 1e9))
    links = np.array([l for p in paths for l in p], dtype=np.int64)
    indptr = np.concatenate(([0], np.cumsum([len(p) for p in paths]))).astype(np.int64)
    k = len(paths)
    t.add(indptr, links, np.full(k, 1e6), np.zeros(k), np.full(k, np.inf), 0, np.arange(k))
    slots = np.asarray(data.draw(st.permutations(range(k))), dtype=np.int64)
    cuts = sorted(data.draw(st.lists(st.integers(0, k), max_size=4)))
    w = t.w
    whole = [a.copy() for a in (w.lens, w.starts, w.inv, w.uniq)]
    nu_whole = fr._compress(t.fi, t.li, t.pl, slots, k, *whole)
    t.li[whole[3][:nu_whole], fk.LMAP] = -1
    nu, done = 0, 0
    for nr in [*cuts, k]:
        nu = fr._compress_more(t.fi, t.li, t.pl, slots, done, nr, w.lens, w.starts, w.inv, w.uniq, nu)
        done = nr
    assert nu == nu_whole
    ne = int(indptr[-1])
    for got, want, n in zip((w.lens, w.starts, w.inv, w.uniq), whole, (k, k, ne, nu)):
        assert np.array_equal(got[:n], want[:n])


flow_path = st.lists(st.integers(0, 9), max_size=5, unique=True)


@settings(max_examples=4 * EXAMPLES, deadline=None)
@given(paths=st.lists(flow_path, min_size=1, max_size=40),
       caps=st.lists(st.sampled_from([np.inf, np.inf, 1e8, 3e8, 1e9]), min_size=40, max_size=40),
       resid=st.lists(st.sampled_from([0.0, 1e9, 2e9, 2e9 * (1 + 1e-12), 5e9]), min_size=10, max_size=10))
def test_compiled_solver_equals_the_numpy_solver(paths, caps, resid):
    """``solve_flows`` (the repair's and the drain's solver) gives :func:`solve_compressed`'s rates
    (1e-9) and bottlenecks, ties within the tolerance included."""
    from netsim.network.flowrepair import solve_flows
    from netsim.network.maxmin import solve_compressed

    lens = np.array([len(p) for p in paths], dtype=np.int64)
    inv = np.array([u for p in paths for u in p], dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(lens)[:-1])).astype(np.int64)
    cap, res = np.array(caps[:lens.size]), np.array(resid)
    want_bn = np.empty(lens.size, dtype=np.int64)
    want = solve_compressed(lens, inv, res, cap, 1e-9, want_bn)
    rates, bn = np.zeros(lens.size), np.zeros(lens.size, dtype=np.int64)
    solve_flows(lens.size, lens, starts, inv, res.size, res, cap, 1e-9, rates, bn, np.zeros((5, res.size)))
    assert np.allclose(rates, want, rtol=1e-9, atol=0.0)
    assert np.array_equal(bn, want_bn)
