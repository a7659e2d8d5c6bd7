"""The delivery path's grouping by time (``_by_time``) equals the plain rule: one group per distinct time."""

import numpy as np
from hypothesis import given, settings, strategies as st

from netsim.network.base import _by_time


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([0.0, 1e-9, 0.5, 0.5 + 2**-40, 3.0, 7.25]), min_size=1, max_size=120))
def test_by_time_groups_in_time_order_keeping_index_order(ts):
    times = np.array(ts)
    indices = np.arange(100, 100 + times.size)
    got = _by_time(indices, times)
    want = [(t, indices[times == t]) for t in sorted(set(ts))]
    assert [t for t, _ in got] == [t for t, _ in want]
    assert all(isinstance(t, float) for t, _ in got)
    assert all(np.array_equal(g, w) for (_, g), (_, w) in zip(got, want))
