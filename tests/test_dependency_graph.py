"""The workload runner's dependency graph (``tables.dependency_graph``, vectorized) against the
row-by-row rule it replaces: distinct dependencies per row, self-dependencies dropped, unknown ids
counted once per row, children in ascending order; and compute times (``Roofline.times``) against
``Roofline.time`` row by row."""

from types import SimpleNamespace as NS

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from netsim.errors import InputError
from netsim.vocab import MISSING
from netsim.workload.compute import Roofline
from netsim.workload.tables import dependency_graph


def reference(t, ctrl):
    index = {int(v): i for i, v in enumerate(t.id.tolist())}
    children = [[] for _ in range(len(t.id))]
    indeg = np.zeros(len(t.id), dtype=np.int64)
    unknown = 0
    kinds = [(t.data_ptr, t.data_deps)] + ([(t.ctrl_ptr, t.ctrl_deps)] if ctrl else [])
    for i in range(len(t.id)):
        deps = set()
        for ptr, dep in kinds:
            deps.update(dep[ptr[i]:ptr[i + 1]].tolist())
        for d in deps:
            j = index.get(int(d))
            if j is None or j == i:
                unknown += j is None
                continue
            children[j].append(i)
            indeg[i] += 1
    return children, indeg, unknown


def _csr(draw, n, ids):
    lists = [draw(st.lists(st.one_of(st.sampled_from(ids), st.integers(-3, 60)), max_size=5)) for _ in range(n)]
    ptr = np.cumsum([0] + [len(x) for x in lists]).astype(np.int64)
    return ptr, np.array([d for x in lists for d in x], dtype=np.int64)


@st.composite
def tables(draw):
    n = draw(st.integers(0, 12))
    ids = draw(st.lists(st.integers(0, 40), min_size=n, max_size=n, unique=True))
    ids = ids or [0]
    dp, dd = _csr(draw, n, ids)
    cp, cd = _csr(draw, n, ids)
    return NS(id=np.array(ids[:n], dtype=np.int64), source="t", data_ptr=dp, data_deps=dd, ctrl_ptr=cp, ctrl_deps=cd)


@settings(max_examples=300, deadline=None)
@given(tables(), st.booleans())
def test_dependency_graph_equals_the_row_by_row_rule(t, ctrl):
    children, indeg, unknown = dependency_graph(t, ctrl)
    ref_children, ref_indeg, ref_unknown = reference(t, ctrl)
    assert children == ref_children
    assert indeg.tolist() == ref_indeg.tolist()
    assert unknown == ref_unknown


def test_duplicate_ids_are_refused():
    t = NS(id=np.array([3, 3]), source="f.et", data_ptr=np.array([0, 0, 0]), data_deps=np.zeros(0, np.int64),
           ctrl_ptr=np.array([0, 0, 0]), ctrl_deps=np.zeros(0, np.int64))
    with pytest.raises(InputError, match="not unique"):
        dependency_graph(t, True)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 10**13), st.integers(0, 10**9), st.integers(-1, 4),
                          st.integers(-1, 5000), st.integers(1, 9000)), min_size=1, max_size=20),
       st.sampled_from([None, 108, 132]), st.sampled_from([0.0, 3.35e12]))
def test_roofline_times_equal_time_row_by_row(rows, sms, bw):
    dur, ops, size, kind, gm, gn = (np.array(c) for c in zip(*rows))
    kind = np.where(kind > 3, -1, kind).astype(np.int8)
    t = NS(duration_micros=dur * (dur == 3), num_ops=ops, tensor_size=size, op_kind=kind,
           gemm_m=np.where(gm <= 0, MISSING, gm), gemm_n=gn)
    facts = NS(peak_flops=989e12, mem_bw_Bps=bw, gpu_sms=sms,
               compute_efficiency={"gemm": 0.8, "attn_fwd": 0.6, "elementwise": 0.9, "other": 0.7})
    r = Roofline(facts)
    assert r.times(t).tolist() == [r.time(t, i) for i in range(len(rows))]
