"""netsim.astra_arith against ASTRA-sim's C++ expressions, transcribed with numpy float64/uint64.

Each ``_cpp_*`` below is the C++ expression from astra-sim (commit 518bd51) and
astra-network-analytical (599a047), operation by operation in IEEE double, then cast to
``uint64_t``; hypothesis draws the inputs.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim import astra_arith as arith

f64 = np.float64
sizes = st.integers(0, 1 << 40)
gib = st.one_of(st.integers(1, 4000), st.floats(0.01, 4000, allow_nan=False, allow_infinity=False))
lat = st.one_of(st.integers(0, 100_000), st.floats(0, 100_000, allow_nan=False, allow_infinity=False))


def _u64(x: np.float64) -> int:
    return int(np.uint64(x))


def _cpp_bpns(bw) -> np.float64:
    # NetworkFunction.cpp: bw_GBps * (1 << 30) / (1'000'000'000)
    return f64(bw) * f64(1 << 30) / f64(1_000_000_000)


def _cpp_message(size, hops, latency, bw) -> int:
    # BasicTopology::compute_communication_delay
    return _u64(f64(hops) * f64(latency) + f64(size) / _cpp_bpns(bw))


def _cpp_reduction(size, local_mem_bw) -> int:
    # Sys.cc: local_mem_bw = j["local-mem-bw"] * 1000000000; PacketBundle::call: 3 x uint64(size / bw * 1e9)
    bw = f64(local_mem_bw) * f64(1000000000)
    one = _u64(f64(size) / bw * f64(1e9))
    return one + one + one


@settings(max_examples=400, deadline=None)
@given(sizes, st.integers(1, 64), lat, gib)
def test_message_matches_astra(size, hops, latency, bw):
    assert arith.message_ns(size, hops, latency, bw) == _cpp_message(size, hops, latency, bw)
    got = arith.message_ns_array(np.array([float(size)]), np.array([hops]), latency, bw)
    assert got.tolist() == [float(_cpp_message(size, hops, latency, bw))]


@settings(max_examples=400, deadline=None)
@given(sizes, lat, gib)
def test_link_matches_astra(size, latency, bw):
    # congestion-aware Link::communication_delay / serialization_delay
    assert arith.link_ns(size, latency, bw) == _u64(f64(latency) + f64(size) / _cpp_bpns(bw))
    assert arith.serialization_ns(size, bw) == _u64(f64(size) / _cpp_bpns(bw))


@settings(max_examples=1000, deadline=None)
@given(sizes, gib)
def test_reduction_matches_astra(size, bw):
    assert arith.reduction_ns(size, bw) == _cpp_reduction(size, bw)


@settings(max_examples=300, deadline=None)
@given(sizes, st.integers(0, 1 << 20), st.integers(1, 10_000))
def test_remote_memory_matches_astra(size, latency, bw):
    # AnalyticalRemoteMemory::get_remote_mem_runtime (uint64 latency and bandwidth)
    assert arith.remote_mem_ns(size, latency, bw) == latency + _u64(f64(size) / f64(bw))


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 1 << 50), st.floats(1e6, 1e16, allow_nan=False))
def test_roofline_matches_astra(ops, perf):
    # Workload::issue_comp: uint64(double(num_ops) / perf * 1e9)
    assert arith.roofline_ns(ops, perf) == _u64(f64(ops) / f64(perf) * f64(1e9))


def test_reduction_is_not_the_shortcut():
    """``3*int(n/bw)`` (the old astra.collectives formula) differs from ASTRA-sim on some inputs."""
    rng = np.random.default_rng(0)
    diff = [(n, b) for n, b in zip(rng.integers(1, 1 << 30, 20000).tolist(), rng.integers(1, 2000, 20000).tolist())
            if 3 * int(n / b) != arith.reduction_ns(n, b)]
    assert diff and all(arith.reduction_ns(n, b) == _cpp_reduction(n, b) for n, b in diff)


def test_reference_values():
    """reference §4.10: d = 32768 on 8 NPUs at 50 GiB/s, 500 ns: net 1110, red 1965 (50) and 60 (1600)."""
    assert arith.message_ns(32768, 1, 500, 50) == 1110
    assert (arith.reduction_ns(32768, 50), arith.reduction_ns(32768, 1600)) == (1965, 60)
    with pytest.raises(ValueError):
        arith.reduction_ns(1, 0)


# ------------------------------------------------- the other copies, until they call arith
def _yaml_network(tmp_path, kind: str, npus: int, bw, lat) -> str:
    p = tmp_path / "net.yml"
    p.write_text(f"topology: [ {kind} ]\nnpus_count: [ {npus} ]\nbandwidth: [ {bw!r} ]\nlatency: [ {lat!r} ]\n")
    return str(p)


@pytest.mark.parametrize("latency", [60, 61, 500, 3999.9999999999995])
@pytest.mark.parametrize("size", [0, 32768])
def test_astra_engine_from_topology_keeps_yaml_values(tmp_path, latency, size):
    """A network YAML loaded as a netsim Topology gives ASTRA-sim's delays back exactly:
    the dims keep the YAML's GiB/s and ns (60 ns through seconds is 59.99999999999999 ns)."""
    from netsim.astra.engine import load_network
    from netsim.topology.spec import load_topology

    path = _yaml_network(tmp_path, "Ring", 8, 50, latency)
    want = arith.message_ns(size, 1, latency, 50)
    assert load_network(path).delay_ns(0, 1, size) == want
    assert load_network(load_topology(path)).delay_ns(0, 1, size) == want


def test_analytical_network_astra_delay_uses_yaml_ns(tmp_path):
    import simpy

    from netsim.network.analytical import AnalyticalNetwork
    from netsim.topology.spec import load_topology

    net = AnalyticalNetwork(simpy.Environment(), load_topology(_yaml_network(tmp_path, "Ring", 8, 50, 60)))
    d = net.durations(np.array([0]), np.array([1]), np.array([0.0]))[0]
    assert round(d * 1e9) == arith.message_ns(0, 1, 60, 50) == 60
