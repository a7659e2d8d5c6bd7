"""``drain_alone``: the fluid drain of one batch alone, exact and with shrinking rounds."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.network.maxmin import drain_alone


def _instance(seed: int, n_flows: int, n_links: int = 12):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 4, size=n_flows)
    indptr = np.concatenate(([0], np.cumsum(lengths)))
    links = np.concatenate([rng.choice(n_links, size=k, replace=False) for k in lengths])
    nbytes = rng.uniform(1.0, 100.0, size=n_flows)  # distinct sizes: about one level per flow
    capacity = rng.uniform(1.0, 10.0, size=n_links)
    return indptr, links, nbytes, capacity


def _link_cumulative_ok(indptr, links, nbytes, capacity, drain) -> bool:
    """No link has carried more bytes by any flow's finish than its capacity allows since 0."""
    owner = np.repeat(np.arange(nbytes.size), np.diff(indptr))
    for link in np.unique(links):
        flows = owner[links == link]
        order = np.argsort(drain[flows])
        if (np.cumsum(nbytes[flows][order]) > capacity[link] * drain[flows][order] * (1 + 1e-9)).any():
            return False
    return True


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 60), exact=st.integers(1, 6), shrink=st.integers(0, 8))
def test_shrinking_rounds_stay_feasible(seed, n, exact, shrink):
    ip, lk, nb, cap = _instance(seed, n)
    drain, complete, solves = drain_alone(ip, lk, nb, cap, max_rounds=exact, shrink_rounds=shrink)
    assert solves <= exact + shrink
    assert (drain > 0).all()
    assert _link_cumulative_ok(ip, lk, nb, cap, drain)
    full, ok, _ = drain_alone(ip, lk, nb, cap, max_rounds=10_000)
    assert ok
    if complete and solves <= exact:  # every level solved exactly: the fluid model itself
        np.testing.assert_allclose(drain, full, rtol=1e-12)


@pytest.mark.parametrize("seed", [1, 2, 3, 7])
@pytest.mark.parametrize("n", [100, 400])
def test_shrinking_rounds_close_most_of_the_truncation_gap(seed, n):
    # flows of distinct sizes over 12 links: about one level per flow.  Keeping the rates after
    # 8 solves finishes 63-119 % late; 16 shrinking rounds after them, 4-12 % (README claim).
    ip, lk, nb, cap = _instance(seed, n)
    exact = drain_alone(ip, lk, nb, cap, max_rounds=10_000)[0].max()
    truncated = drain_alone(ip, lk, nb, cap, max_rounds=8)[0].max()
    shrinking = drain_alone(ip, lk, nb, cap, max_rounds=8, shrink_rounds=16)[0].max()
    assert truncated > 1.6 * exact
    assert 1.04 * exact <= shrinking <= 1.12 * exact
