"""A topology routes the same pairs and keys once (``Topology.routes`` remembers them): the paths
are the router's, a caller may change what it gets, adaptive routing is never remembered, and the
memory held stays under ``ROUTE_MEMO_BYTES``."""

import dataclasses

import numpy as np

from netsim.topology import model
from netsim.topology.policy import with_routing
from test_engine_exact import tree


def _fresh(routing: str = "ecmp"):
    """A topology of its own (``tree`` is shared between tests), remembering nothing yet."""
    return dataclasses.replace(with_routing(tree(4, False), routing))


def _pairs(seed: int, n: int = 64, gpus: int = 32):
    rng = np.random.default_rng(seed)
    return rng.integers(0, gpus, n), rng.integers(0, gpus, n), rng.integers(0, 1 << 30, n)


def test_remembered_routes_are_the_routers_and_stay_unchanged_by_callers():
    topo = _fresh()
    for seed in range(5):
        src, dst, key = _pairs(seed)
        fresh = topo._routed(src, dst, key, None)
        first = topo.routes(src, dst, key)
        first[1][:] = -1  # a caller changing its arrays
        again = topo.routes(src, dst, key)
        assert all(np.array_equal(a, b) for a, b in zip(fresh, again))
        assert not np.array_equal(topo.routes(src, dst, None)[1], np.full_like(again[1], -1))
    assert len(topo._route_memo) == 10


def test_adaptive_routes_follow_the_load_and_are_not_remembered():
    topo = _fresh("adaptive")
    src, dst, key = _pairs(1)
    topo.routes(src, dst, key, load=np.zeros(topo.n_links, np.int32))
    assert len(topo._route_memo) == 0


def test_the_memory_held_is_bounded(monkeypatch):
    monkeypatch.setattr(model, "ROUTE_MEMO_BYTES", 32 << 10)
    topo = _fresh()
    for seed in range(40):
        topo.routes(*_pairs(seed))
        assert topo._route_memo.bytes <= 32 << 10
        assert topo._route_memo.bytes == sum(a.nbytes + b.nbytes for a, b in topo._route_memo.values())
    assert 0 < len(topo._route_memo) < 40
