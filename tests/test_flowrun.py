"""A collective that runs alone on the flow model runs whole in one compiled kernel
(:mod:`netsim.network.runkernel`, :meth:`netsim.network.flow.FlowNetwork.run_program`).

The kernel replays the event path (SimPy queue, executor, flow table on compiled kernels) on
arrays, so its floats are the event path's: every rank's finish, every link counter and every
network counter must be equal bit for bit, on layouts that do not line up (random placements,
odd node counts, oversubscribed leaves, ECMP collisions, ranks that start apart).  Against the
numpy reference (``engine="reference"``) they agree to 1e-9, as the compiled table does.
"""

import os
import subprocess
import sys

import numpy as np
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.collectives import executor
from netsim.collectives.executor import run_collective
from netsim.network import flowrun
from netsim.network.flow import FlowNetwork
from netsim.perftests import BenchConfig, build_plan, placed_ranks, validated
from test_engine_exact import tree

EXAMPLES = int(os.environ.get("NETSIM_HYPOTHESIS_EXAMPLES", "25"))


def _run(monkeypatch, topo, cfg, size, program: bool, engine="event", offsets=None, kernel="compiled"):
    """One run; ``program``: the whole-run kernel allowed at any size (else never)."""
    cfg = validated(cfg, topo)
    plan = build_plan(topo, cfg, float(size))
    monkeypatch.setattr(executor, "PROGRAM_MIN_TRANSFERS", 0 if program else 1 << 62)
    net = FlowNetwork(simpy.Environment(), topo, kernel=kernel)
    used = []
    whole = net.run_program
    net.run_program = lambda *args: used.append(whole(*args)) or used[-1]
    n = plan.schedule.nranks
    start = None if offsets is None else np.resize(np.asarray(offsets, dtype=float), n)
    res = run_collective(net, plan.schedule, placed_ranks(topo, cfg), start=start, engine=engine)
    return res, net, bool(used) and used[-1] is not None


def _same(a, b):
    (ra, na, _), (rb, nb, _) = a, b
    assert np.array_equal(ra.finish, rb.finish)
    for key, value in na.link_stats().items():
        assert np.array_equal(value, nb.link_stats()[key]), key
    assert na.stats == nb.stats and ra.stats == rb.stats and na.env.now == nb.env.now


LAYOUTS = st.tuples(st.sampled_from([1, 4]), st.booleans(), st.sampled_from(["ecmp", "ftree"]),
                    st.sampled_from([(4, 3), (5, 4), (6, 3), (8, 4)]))  # (nodes, GPUs a node)
OPS = st.sampled_from([("alltoall", "auto"), ("all_reduce", "ring"), ("all_reduce", "tree"),
                       ("all_gather", "ring"), ("reduce_scatter", "ring"), ("sendrecv", "auto")])


@settings(max_examples=EXAMPLES, deadline=None)
@given(layout=LAYOUTS, op=OPS, gpus=st.sampled_from([6, 8, 12, 20]), seed=st.integers(0, 50),
       size=st.sampled_from([1 << 12, 1 << 18, 3 << 20]),
       offsets=st.none() | st.lists(st.sampled_from([0.0, 1e-6, 3.5e-6, 2e-5]), min_size=1, max_size=7),
       engine=st.sampled_from(["event", "auto"]))
def test_the_whole_run_kernel_is_the_event_path_bit_for_bit(layout, op, gpus, seed, size, offsets, engine):
    """``event``: every collective; ``auto``: those the vectorized paths leave to the event path,
    fast-forward included."""
    over, rail, routing, (nodes, gpn) = layout
    topo = tree(over, rail, nodes=nodes, gpn=gpn, routing=routing)
    gpus = min(gpus, nodes * gpn)
    cfg = BenchConfig(op[0], algo=op[1], gpus=gpus, placement=f"random:{seed}")
    with pytest.MonkeyPatch.context() as mp:
        ref = _run(mp, topo, cfg, size, False, engine, offsets=offsets)
        got = _run(mp, topo, cfg, size, True, engine, offsets=offsets)
    assert got[2] == (ref[0].stats["mode"] == "event") and not ref[2]  # the kernel ran the one, the event path the other
    _same(ref, got)


@pytest.mark.parametrize("room", [0, 4096])
def test_growing_the_run_and_the_table_changes_nothing(monkeypatch, room):
    """The table starts with 256 slots and the run's arrays with ``room`` spare entries: both grow
    mid-run (the kernel returns, Python grows, the run resumes), with the same floats."""
    grown = []
    grow = flowrun._grow
    monkeypatch.setattr(flowrun, "_grow", lambda a, need: grown.append(a.shape[0] < need) or grow(a, need))
    monkeypatch.setattr(flowrun, "INITIAL_ROOM", room)
    topo = tree(4, False, nodes=8)
    cfg = BenchConfig("alltoall", gpus=32, placement="random:5")
    ref = _run(monkeypatch, topo, cfg, 1 << 20, False)
    got = _run(monkeypatch, topo, cfg, 1 << 20, True)
    _same(ref, got)
    assert got[1].stats["transfers"] > 256  # more flows than the table's first slots
    if room == 0:
        assert any(grown)


def test_the_default_engine_uses_it_and_fast_forwards_as_the_event_path(monkeypatch):
    """``auto``: an all-to-all the vectorized paths leave runs whole; so does a ring whose steps
    become periodic, with the event path's jumps (the same steps skipped, the clock shifted)."""
    topo = tree(4, False, nodes=8)
    a2a = BenchConfig("alltoall", gpus=18, placement="random:3")  # a layout the vectorized paths leave
    ref = _run(monkeypatch, topo, a2a, 1 << 20, False, engine="auto")
    got = _run(monkeypatch, topo, a2a, 1 << 20, True, engine="auto")
    assert got[2] and ref[0].stats["mode"] == "event"
    _same(ref, got)
    ring = BenchConfig("all_reduce", algo="ring", gpus=24, placement="random:1")
    ref = _run(monkeypatch, topo, ring, 1 << 20, False, engine="auto")
    got = _run(monkeypatch, topo, ring, 1 << 20, True, engine="auto")
    assert got[2] and ref[0].stats["steps_skipped"] > 0 and ref[1].stats["shifted_s"] > 0
    _same(ref, got)
    assert not _run(monkeypatch, topo, a2a, 1 << 20, True, engine="reference", kernel="numpy")[2]


def test_the_numpy_reference_agrees(monkeypatch):
    topo = tree(4, True, nodes=5)
    cfg = BenchConfig("alltoall", gpus=20, placement="random:2")
    got, _, used = _run(monkeypatch, topo, cfg, 3 << 20, True)
    ref, _, _ = _run(monkeypatch, topo, cfg, 3 << 20, True, engine="reference", kernel="numpy")
    assert used
    np.testing.assert_allclose(got.finish, ref.finish, rtol=1e-9, atol=0)


def test_the_kernel_as_plain_python_gives_the_same_floats():
    """With ``NUMBA_DISABLE_JIT=1`` the kernels run as Python (how coverage sees them)."""
    code = ("import sys, numpy as np, simpy; sys.path.insert(0, 'tests');"
            "from test_engine_exact import tree; from netsim.collectives import executor;"
            "from netsim.collectives.executor import run_collective; from netsim.network.flow import FlowNetwork;"
            "from netsim.perftests import BenchConfig, build_plan, placed_ranks, validated;"
            "topo = tree(4, False, nodes=3, gpn=4); cfg = validated(BenchConfig('alltoall', gpus=12, placement='random:1'), topo);"
            "p = build_plan(topo, cfg, float(1 << 18)); out = []\n"
            "for lim in (1 << 62, 0):\n"
            "    executor.PROGRAM_MIN_TRANSFERS = lim; net = FlowNetwork(simpy.Environment(), topo, kernel='compiled')\n"
            "    out.append(run_collective(net, p.schedule, placed_ranks(topo, cfg), engine='event').finish)\n"
            "print('same' if np.array_equal(out[0], out[1]) else 'differ')")
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "same"


def test_without_numba_the_event_path_runs():
    code = ("import sys; sys.modules['numba'] = None; sys.path.insert(0, 'tests');"
            "import simpy; from test_engine_exact import tree; from netsim.collectives import executor;"
            "from netsim.collectives.executor import run_collective; from netsim.network.flow import FlowNetwork;"
            "from netsim.perftests import BenchConfig, build_plan, placed_ranks, validated;"
            "executor.PROGRAM_MIN_TRANSFERS = 0; topo = tree(4, False, nodes=3, gpn=4);"
            "cfg = validated(BenchConfig('alltoall', gpus=12), topo); p = build_plan(topo, cfg, 65536.0);"
            "net = FlowNetwork(simpy.Environment(), topo, kernel='compiled');"
            "res = run_collective(net, p.schedule, placed_ranks(topo, cfg), engine='event');"
            "print(res.stats['mode'], type(net._flows).__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["event", "FlowTable"]


@pytest.mark.slow
@pytest.mark.parametrize("gpus", [448, 512])
def test_ecmp_alltoall_at_scale_is_the_event_path_and_the_reference(monkeypatch, gpus):
    """The issue's all-to-all (64 MiB, static ECMP on h100-superpod-1024) at sizes the numpy
    reference finishes: the whole-run kernel equals the event path bit for bit and the reference
    to 1e-9 on every rank's finish."""
    from conftest import TOPOLOGIES
    from netsim.results import nccl_table as nt
    from netsim.topology.policy import with_routing
    from netsim.topology.spec import load_topology
    topo = with_routing(load_topology(TOPOLOGIES / "h100-superpod-1024.yaml"), "ecmp")
    cfg = BenchConfig("alltoall", gpus=gpus)
    size, _, _ = nt.size_and_count("alltoall", 64 << 20, gpus, "float")
    got = _run(monkeypatch, topo, cfg, size, True, engine="auto")
    assert got[2]
    _same(_run(monkeypatch, topo, cfg, size, False, engine="auto"), got)
    ref, _, _ = _run(monkeypatch, topo, cfg, size, False, engine="reference", kernel="numpy")
    np.testing.assert_allclose(got[0].finish, ref.finish, rtol=1e-9, atol=0)
