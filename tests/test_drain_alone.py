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


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), kinds=st.integers(1, 40), copies=st.integers(2, 12),
       exact=st.integers(1, 8), shrink=st.integers(0, 8), capped=st.booleans())
def test_identical_flows_drained_as_one_weighted_flow_equal_the_unmerged_drain(seed, kinds, copies, exact, shrink,
                                                                             capped):
    """The merge of identical flows (same links in order, bytes and cap) into one weighted flow
    is exact: every flow's drain, the completion flag and the solves equal those of the drain
    with every flow on its own, exact and shrinking rounds alike (shrinking counts flows by
    weight).  Repeats are shuffled among distinct flows, some sharing links but not order."""
    from netsim.network import maxmin

    ip, lk, nb, cap = _instance(seed, kinds)
    rng = np.random.default_rng(seed + 1)
    rows = rng.permutation(np.concatenate([np.arange(kinds)] * copies + [np.arange(kinds)[: kinds // 3]]))
    lengths = np.diff(ip)[rows]
    indptr = np.concatenate(([0], np.cumsum(lengths)))
    links = np.concatenate([lk[ip[r]:ip[r + 1]] for r in rows])
    nbytes = nb[rows]
    caps = np.where(rng.random(kinds) < 0.3, rng.uniform(0.5, 5.0, kinds), np.inf)[rows] if capped else None
    flows = rows.size
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(maxmin, "MERGE_MIN_FLOWS", 1)  # merge however few
        assert maxmin.identical_flows(indptr, links, nbytes, np.full(flows, np.inf) if caps is None else caps,
                                      np.arange(flows)) is not None
        merged = drain_alone(indptr, links, nbytes, cap, caps, exact, shrink)
    alone = maxmin._drain(indptr, links, nbytes, cap, np.full(flows, np.inf) if caps is None else caps, None,
                          exact, shrink)
    np.testing.assert_allclose(merged[0], alone[0], rtol=1e-12, atol=0)
    assert merged[1:] == alone[1:]


def test_identical_flows_refuse_a_hash_collision(monkeypatch):
    """Flows that hash alike but differ are never merged (checked entry by entry)."""
    from netsim.network import maxmin

    n = maxmin.MERGE_MIN_FLOWS
    indptr = np.arange(n + 1)
    links = np.arange(n) % 2  # two different routes
    monkeypatch.setattr(maxmin, "mix_hash", lambda *a: np.zeros(np.broadcast(*a).shape, dtype=np.uint64))
    assert maxmin.identical_flows(indptr, links, np.ones(n), np.full(n, np.inf), np.arange(n)) is None
    monkeypatch.undo()
    rep, which, weight = maxmin.identical_flows(indptr, links, np.ones(n), np.full(n, np.inf), np.arange(n))
    assert sorted(weight.tolist()) == [n // 2, n // 2] and (links[rep[which]] == links).all()
