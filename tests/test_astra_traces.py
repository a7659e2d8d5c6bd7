"""``netsim astra``'s trace reader reuses a parsed trace for files that differ only in node ids, dependencies,
compute durations and group names; the reused tables must equal a fresh parse of each file."""

import random

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netsim.astra.traces import read_traces
from netsim.chakra import EtNode, read_et_table, write_workload
from netsim.chakra.schema import NodeType

COMP, COLL = int(NodeType.COMP_NODE), int(NodeType.COMM_COLL_NODE)
COLUMNS = ("id", "name", "type", "duration_micros", "attr_code", "pg_names", "involved_dims", "data_ptr",
           "data_deps", "ctrl_ptr", "ctrl_deps", "comm_type", "comm_size", "pg", "is_cpu_op")


def same_table(a, b) -> None:
    for c in COLUMNS:
        x, y = getattr(a, c), getattr(b, c)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y), c
        else:
            assert x == y, c
    assert a.attr_columns.keys() == b.attr_columns.keys()
    assert all(np.array_equal(a.attr_columns[k], b.attr_columns[k]) for k in a.attr_columns)
    assert [a.node(i) for i in range(len(a))] == [b.node(i) for i in range(len(b))]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6), n=st.integers(2, 8), same_groups=st.booleans(), zero=st.booleans())
def test_reused_tables_equal_a_fresh_parse(tmp_path_factory, seed, n, same_groups, zero):
    rng = random.Random(seed)
    names = ["1", "2", "1.0", "dp_3", "tp", "7"]
    k = rng.randint(1, 4)
    shared = [rng.choice(names) if rng.random() < 0.8 else None for _ in range(k)]
    per = []
    for r in range(n):
        pgs = shared if same_groups else [rng.choice(names) if g is not None else None for g in shared]
        ids = rng.sample(range(100), 2 * k + 1)
        nodes = [EtNode(ids[0], "c", COMP, duration_micros=0 if zero else rng.randrange(0, 50))]
        for j in range(k):
            nodes.append(EtNode(ids[2 * j + 1], f"x{j}", COLL, data_deps=(nodes[-1].id,), comm_type=j % 3,
                                comm_size=4096, is_cpu_op=False, pg_name=pgs[j]))
            nodes.append(EtNode(ids[2 * j + 2], f"c{j}", COMP, data_deps=(nodes[-1].id,),
                                duration_micros=rng.randrange(0, 50), is_cpu_op=rng.random() < 0.3))
        per.append(nodes)
    root = tmp_path_factory.mktemp("t")
    write_workload(root / "w", per)
    got = read_traces(root / "w", n, [])
    for r in range(n):
        same_table(got[r], read_et_table(root / f"w.{r}.et"))


def test_groups_renamed_in_a_different_pattern_are_parsed(tmp_path):
    """Rank 0 uses groups 1, 2; rank 1 uses 3, 3: not a renaming, so rank 1 is parsed in full."""
    per = [[EtNode(0, "a", COLL, comm_type=0, comm_size=64, is_cpu_op=False, pg_name=a),
            EtNode(1, "b", COLL, data_deps=(0,), comm_type=0, comm_size=64, is_cpu_op=False, pg_name=b)]
           for a, b in (("1", "2"), ("3", "3"))]
    write_workload(tmp_path / "w", per)
    got = read_traces(tmp_path / "w", 2, [])
    assert got[1].pg_names == ["3"] and got[0].pg_names == ["1", "2"]
    for r in range(2):
        same_table(got[r], read_et_table(tmp_path / f"w.{r}.et"))


def test_ranks_with_own_durations_and_groups_parse_once(tmp_path, monkeypatch):
    """bench_astra_scale.py's 'groups' shape: every rank computes for its own time in its own group."""
    import netsim.chakra

    per = [[EtNode(0, "c", COMP, duration_micros=r * 3),
            EtNode(1, "x", COLL, data_deps=(0,), comm_type=0, comm_size=4096, is_cpu_op=False, pg_name=str(r // 2)),
            EtNode(2, "d", COMP, data_deps=(1,), duration_micros=(r * 7) % 5)] for r in range(6)]
    write_workload(tmp_path / "w", per)
    calls = []
    orig = netsim.chakra.read_et_table
    monkeypatch.setattr(netsim.chakra, "read_et_table", lambda p, **kw: calls.append(p) or orig(p, **kw))
    got = read_traces(tmp_path / "w", 6, [])
    assert len(calls) == 1
    for r in range(6):
        same_table(got[r], orig(tmp_path / f"w.{r}.et"))
