"""Tests of the max-min fair solver against hand cases and an exact reference."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.network.maxmin import link_loads, max_min_rates


def csr(paths: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """CSR incidence from a list of paths."""
    indptr = np.zeros(len(paths) + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([len(p) for p in paths])
    links = np.array([l for p in paths for l in p], dtype=np.int64)
    return indptr, links


def reference(paths, capacity, rate_cap=None) -> list[float]:
    """Slow, exact progressive filling in rational arithmetic."""
    n = len(paths)
    caps = [float("inf")] * n if rate_cap is None else [float(c) for c in rate_cap]
    rates: list = [None] * n
    rem = {l: Fraction(float(capacity[l])) for p in paths for l in p}
    active = set()
    for f in range(n):
        if paths[f] or caps[f] != float("inf"):
            active.add(f)
        else:
            rates[f] = float("inf")
    while active:
        count = {l: sum(1 for f in active if l in paths[f]) for l in rem}
        share = {l: rem[l] / count[l] for l in rem if count[l]}
        bounds = list(share.values()) + [Fraction(caps[f]) for f in active if caps[f] != float("inf")]
        level = min(bounds)
        frozen = {
            f
            for f in active
            if (caps[f] != float("inf") and Fraction(caps[f]) == level)
            or any(share.get(l) == level for l in paths[f])
        }
        for f in frozen:
            rates[f] = level
            for l in paths[f]:
                rem[l] -= level
        active -= frozen
    return [float(r) for r in rates]


def check_fair(indptr, links, capacity, rates, rate_cap=None, tol=1e-6) -> None:
    """Feasibility and the bottleneck property of max-min fairness."""
    loads = link_loads(indptr, links, rates, capacity.size)
    used = np.unique(links)
    assert np.all(loads[used] <= capacity[used] * (1 + 1e-9))
    caps = np.full(rates.size, np.inf) if rate_cap is None else rate_cap
    assert np.all(rates <= caps * (1 + 1e-12))
    on = np.zeros((rates.size, capacity.size), dtype=bool)
    on[np.repeat(np.arange(rates.size), np.diff(indptr)), links] = True
    max_on_link = np.where(on, rates[:, None], -np.inf).max(axis=0, initial=-np.inf)
    saturated = loads >= capacity * (1 - tol)
    for f in range(rates.size):
        path = links[indptr[f] : indptr[f + 1]]
        if rates[f] >= caps[f] * (1 - tol) or (path.size == 0 and rates[f] == np.inf):
            continue
        assert np.any(saturated[path] & (rates[f] >= max_on_link[path] * (1 - tol))), f"flow {f}: no bottleneck"


def test_two_flows_share_one_link():
    indptr, links = csr([[0], [0]])
    assert max_min_rates(indptr, links, np.array([10.0])).tolist() == [5.0, 5.0]


def test_one_flow_alone_gets_full_link():
    indptr, links = csr([[0, 1]])
    assert max_min_rates(indptr, links, np.array([10.0, 7.0])).tolist() == [7.0]


def test_three_flow_bottleneck():
    # A = 0 (cap 10), B = 1 (cap 4); flow 1: A,B; flow 2: B; flow 3: A
    indptr, links = csr([[0, 1], [1], [0]])
    rates = max_min_rates(indptr, links, np.array([10.0, 4.0]))
    assert rates.tolist() == [2.0, 2.0, 8.0]


def test_parking_lot():
    # long flow over 3 links, one short flow per link; link capacities 1, 2, 3
    paths = [[0, 1, 2], [0], [1], [2]]
    indptr, links = csr(paths)
    capacity = np.array([1.0, 2.0, 3.0])
    rates = max_min_rates(indptr, links, capacity)
    np.testing.assert_allclose(rates, [0.5, 0.5, 1.5, 2.5])
    equal = max_min_rates(indptr, links, np.ones(3))
    np.testing.assert_allclose(equal, [0.5, 0.5, 0.5, 0.5])


def test_rate_caps():
    indptr, links = csr([[0], [0], [0, 1], []])
    cap = np.array([1.0, np.inf, np.inf, 2.5])
    rates = max_min_rates(indptr, links, np.array([10.0, 3.0]), rate_cap=cap)
    # flow 0 capped at 1; flow 2 bottlenecked on link 1 at 3; flow 1 takes the rest; flow 3 local, capped
    np.testing.assert_allclose(rates, [1.0, 6.0, 3.0, 2.5])


def test_empty_path_without_cap_is_infinite_and_zero_cap_is_zero():
    indptr, links = csr([[], [0], [0]])
    rates = max_min_rates(indptr, links, np.array([4.0]), rate_cap=np.array([np.inf, 0.0, np.inf]))
    assert rates.tolist() == [np.inf, 0.0, 4.0]


def test_empty_input():
    rates = max_min_rates(np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int32), np.ones(3))
    assert rates.shape == (0,) and rates.dtype == np.float64


def test_sparse_use_of_a_large_topology_and_int32_links():
    rng = np.random.default_rng(0)
    capacity = rng.uniform(1.0, 2.0, 500_000)
    paths = [[499_999, 17, 250_000], [17], [250_000, 3]]
    indptr, links = csr(paths)
    rates = max_min_rates(indptr, links.astype(np.int32), capacity)
    np.testing.assert_allclose(rates, reference(paths, capacity), rtol=1e-12)


def test_bad_input_raises():
    indptr, links = csr([[0, 1]])
    with pytest.raises(ValueError):
        max_min_rates(indptr, np.array([0, 5]), np.ones(2))
    with pytest.raises(ValueError):
        max_min_rates(np.array([0, 3]), links, np.ones(2))
    with pytest.raises(ValueError):
        max_min_rates(indptr, links, np.array([1.0, 0.0]))
    with pytest.raises(ValueError):
        max_min_rates(indptr, links, np.ones(2), rate_cap=np.ones(2))


@st.composite
def instances(draw):
    """Random small instances; integer capacities make exact ties common."""
    n_links = draw(st.integers(1, 8))
    n_flows = draw(st.integers(0, 12))
    paths = [
        draw(st.lists(st.integers(0, n_links - 1), max_size=n_links, unique=True)) for _ in range(n_flows)
    ]
    value = st.one_of(st.integers(1, 12).map(float), st.floats(0.01, 100.0))
    capacity = np.array([draw(value) for _ in range(n_links)])
    rate_cap = None
    if draw(st.booleans()):
        rate_cap = np.array([draw(st.one_of(st.just(np.inf), value)) for _ in range(n_flows)])
    return paths, capacity, rate_cap


@settings(max_examples=300, deadline=None)
@given(instances())
def test_matches_exact_reference(inst):
    paths, capacity, rate_cap = inst
    indptr, links = csr(paths)
    rates = max_min_rates(indptr, links, capacity, rate_cap=rate_cap)
    expected = np.array(reference(paths, capacity, rate_cap))
    np.testing.assert_allclose(rates, expected, rtol=1e-7)
    check_fair(indptr, links, capacity, rates, rate_cap)


@settings(max_examples=100, deadline=None)
@given(instances(), st.randoms(use_true_random=False))
def test_deterministic_and_order_independent(inst, rnd):
    paths, capacity, rate_cap = inst
    indptr, links = csr(paths)
    first = max_min_rates(indptr, links, capacity, rate_cap=rate_cap)
    again = max_min_rates(indptr.copy(), links.copy(), capacity.copy(), rate_cap=rate_cap)
    assert first.tobytes() == again.tobytes()
    perm = list(range(len(paths)))
    rnd.shuffle(perm)
    p_indptr, p_links = csr([paths[i] for i in perm])
    p_cap = None if rate_cap is None else rate_cap[perm]
    permuted = max_min_rates(p_indptr, p_links, capacity, rate_cap=p_cap)
    np.testing.assert_allclose(permuted, first[perm], rtol=1e-7)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_medium_random_matches_reference_and_is_fair(seed):
    """Many distinct levels (near-equal capacities, caps): rounds of local bottlenecks give
    what level-by-level progressive filling gives."""
    rng = np.random.default_rng(seed)
    n_flows, n_links = 400, 300
    paths = [list(rng.choice(n_links, rng.integers(1, 7), replace=False)) for _ in range(n_flows)]
    indptr, links = csr(paths)
    capacity = rng.choice([1.0, 2.0, 4.0], n_links) * rng.uniform(1.0, 1.0 + 1e-3, n_links)
    rate_cap = np.where(rng.random(n_flows) < 0.2, rng.uniform(0.01, 0.2, n_flows), np.inf)
    rates = max_min_rates(indptr, links, capacity, rate_cap=rate_cap)
    np.testing.assert_allclose(rates, reference(paths, capacity, rate_cap), rtol=1e-7)
    check_fair(indptr, links, capacity, rates, rate_cap)


def test_link_loads_sum_rates():
    indptr, links = csr([[0, 2], [2], []])
    loads = link_loads(indptr, links, np.array([1.0, 2.0, 5.0]), 4)
    assert loads.tolist() == [1.0, 0.0, 3.0, 0.0]
