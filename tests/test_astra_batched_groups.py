"""The batched engine on comm groups of different sizes equals the event engine (``engine="full"``) to the ns.

Random workloads (hypothesis draws the seed and the shape): a partition of the ranks into
groups of different sizes (JSON member order shuffled, some ranks in no group), optionally a
second family of groups across the first, optionally world collectives, per-rank compute of
random length between collectives; every group picks its own collective and size.

These workloads often give ranks different numbers of sub-group streams before a world collective
(a rank in no group, groups with other chunk counts), where ASTRA-sim's one stream counter per rank
stalls; :func:`run_both` therefore matches streams per communicator (``stream_matching="per-group"``)
to compare the engines' arithmetic.  tests/test_astra_streams.py runs the default numbering on them.
"""

import json
import random
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netsim.astra import run_astra
from netsim.chakra import EtNode, write_workload
from netsim.chakra.schema import CommType, NodeType
from netsim.errors import DeadlockError
from test_astra_batched import assert_same, system

COMP, COLL = int(NodeType.COMP_NODE), int(NodeType.COMM_COLL_NODE)
OPS = (CommType.ALL_REDUCE, CommType.ALL_GATHER, CommType.REDUCE_SCATTER)
SIZES = (4096, 65536, 100_003, 1 << 20)


def partition(ranks: list[int], rng: random.Random, contiguous: bool) -> list[list[int]]:
    """Groups of different sizes (>= 2) over ``ranks``; a leftover rank joins no group."""
    order = list(ranks) if contiguous else rng.sample(ranks, len(ranks))
    groups, i = [], 0
    while len(order) - i >= 2:
        size = rng.randint(2, max(2, min(len(order) - i, len(ranks) // 2 + 1)))
        groups.append(order[i:i + size])
        i += size
    if not contiguous:
        groups = [rng.sample(g, len(g)) for g in groups]  # the ring follows the JSON order
    return groups


def workload(n: int, rng: random.Random, *, cross: bool, world: bool, contiguous: bool = False):
    """(per-rank nodes, comm-group JSON) as described in the module docstring."""
    fams = [partition(list(range(n)), rng, contiguous)]
    if cross:  # ranks with equal index inside blocks of 2..4 (a DP-like family across TP-like blocks)
        b = rng.randint(2, 4)
        fams.append([g for g in ([r for r in range(n) if r % b == k] for k in range(b)) if len(g) >= 2])
    steps = []  # (family index or None = world, per-group (op, size))
    for _ in range(rng.randint(1, 3)):
        for f, fam in enumerate(fams):
            steps.append((f, [(rng.choice(OPS), rng.choice(SIZES)) for _ in fam]))
        if world:
            steps.append((None, [(rng.choice(OPS), rng.choice(SIZES))]))
    names, gid = {}, 1
    for f, fam in enumerate(fams):
        for k, g in enumerate(fam):
            names[(f, k)] = (str(gid), g)
            gid += 1
    per = []
    for r in range(n):
        nodes = [EtNode(0, "c", COMP, duration_micros=rng.randrange(0, 30))]
        for f, colls in steps:
            if f is None:
                op, size, pg = *colls[0], None
            else:
                k = next((k for k, g in enumerate(fams[f]) if r in g), None)
                if k is None:
                    continue
                op, size = colls[k]
                pg = names[(f, k)][0]
            last = nodes[-1].id
            nodes.append(EtNode(last + 1, f"coll{last}", COLL, data_deps=(last,), comm_type=int(op), comm_size=size,
                                is_cpu_op=False, pg_name=pg))
            nodes.append(EtNode(last + 2, f"comp{last}", COMP, data_deps=(last + 1,),
                                duration_micros=rng.randrange(0, 30), is_cpu_op=rng.random() < 0.2))
        per.append(nodes)
    return per, {name: g for name, g in names.values()}


def overlapping_rings(n: int = 4) -> list:
    """Ranks 1 and 2 all-reduce in group "1" (ring 2 -> 1), then all ranks in the world ring;
    rank 0 starts 50 us early, so rank 1's down-link gets both rings' messages at overlapping times."""
    per = []
    for r in range(n):
        nodes = [EtNode(0, "c", COMP, duration_micros=0 if r == 0 else 50)]
        if r in (1, 2):
            nodes.append(EtNode(1, "g", COLL, data_deps=(0,), comm_type=0, comm_size=1 << 20, is_cpu_op=False,
                                pg_name="1"))
        last = nodes[-1].id
        nodes.append(EtNode(last + 1, "w", COLL, data_deps=(last,), comm_type=0, comm_size=1 << 20, is_cpu_op=False))
        per.append(nodes)
    return per


def run_both(root: Path, per, groups, kind: str, model: str, sysc, dims=None, matching="per-group"):
    """``dims``: [(kind, npus, GiB/s, ns)] of a multi-dimensional network (default: 1-D ``kind``);
    ``matching``: the runs' ``stream_matching`` (see the module docstring)."""
    dims = dims or [(kind, len(per), 50, 500)]
    write_workload(root / "w", per)
    cols = [", ".join(str(d[k]) for d in dims) for k in range(4)]
    (root / "n.yml").write_text(f"topology: [{cols[0]}]\nnpus_count: [{cols[1]}]\nbandwidth: [{cols[2]}]\n"
                                f"latency: [{cols[3]}]\n")
    (root / "g.json").write_text(json.dumps(groups))
    args = (root / "w", sysc, root / "n.yml")
    ref = run_astra(*args, comm_groups=root / "g.json", model=model, engine="full", stream_matching=matching)
    new = run_astra(*args, comm_groups=root / "g.json", model=model, stream_matching=matching)
    return ref, new


def check(ref, new) -> None:
    if new.engine == "full":  # fell back while running: it says why, and the numbers are the event engine's
        assert any("gave way to the event engine" in x for x in new.notes)
        assert np.array_equal(ref.finish, new.finish) and sorted(ref.lines()) == sorted(new.lines())
    else:
        assert_same(ref, new)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), n=st.integers(4, 20), kind=st.sampled_from(["Ring", "Switch", "FullyConnected"]),
       world=st.booleans(), splits=st.sampled_from([1, 2, 4]), chunks=st.sampled_from([1, 2]))
def test_analytical_groups_batched_equal_full(seed, n, kind, world, splits, chunks):
    """Analytical: always batched (no link state), groups of different sizes and across each other."""
    rng = random.Random(seed)
    per, groups = workload(n, rng, cross=rng.random() < 0.5, world=world)
    with tempfile.TemporaryDirectory() as tmp:
        ref, new = run_both(Path(tmp), per, groups, kind, "analytical", system(chunks, splits))
    assert_same(ref, new)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), n=st.integers(4, 20), kind=st.sampled_from(["Switch", "FullyConnected"]),
       cross=st.booleans(), world=st.booleans(), splits=st.sampled_from([1, 2, 4]))
def test_congestion_aware_groups_equal_full(seed, n, kind, cross, world, splits):
    """Congestion-aware: batched, or (Switch down-link shared in time by two rings) the event engine, with a note."""
    rng = random.Random(seed)
    per, groups = workload(n, rng, cross=cross, world=world)
    with tempfile.TemporaryDirectory() as tmp:
        ref, new = run_both(Path(tmp), per, groups, kind, "congestion-aware", system(1, splits))
    check(ref, new)
    if kind == "FullyConnected" or not (cross or world):
        assert new.engine == "batched"  # one sender per link: nothing to check


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), shape=st.sampled_from([(2, 3), (4, 2), (3, 4), (2, 2, 3), (4, 4)]),
       kinds=st.lists(st.sampled_from(["Ring", "Switch", "FullyConnected"]), min_size=3, max_size=3),
       splits=st.sampled_from([1, 4]), chunks=st.sampled_from([1, 2]))
def test_analytical_sub_groups_on_multi_dimensional_networks(seed, shape, kinds, splits, chunks):
    """Sub-group rings on 2-D / 3-D networks: a message costs its first differing dimension's delay."""
    rng = random.Random(seed)
    n = int(np.prod(shape))
    per, groups = workload(n, rng, cross=rng.random() < 0.5, world=False)
    groups = {k: g for k, g in groups.items() if len(g) < n}
    dims = [(kinds[d], k, rng.choice([25, 50, 200]), rng.choice([0, 100, 500])) for d, k in enumerate(shape)]
    sysc = system(chunks, splits, **{k: ["ring"] * len(shape) for k in ("all-reduce-implementation",
                                                                        "all-gather-implementation",
                                                                        "reduce-scatter-implementation")})
    with tempfile.TemporaryDirectory() as tmp:
        ref, new = run_both(Path(tmp), per, groups, "", "analytical", sysc, dims)
    assert_same(ref, new)


def test_world_collective_on_a_multi_dimensional_network_is_not_batched(tmp_path):
    per = [[EtNode(0, "c", COMP, duration_micros=r),
            EtNode(1, "ar", COLL, data_deps=(0,), comm_type=0, comm_size=4096, is_cpu_op=False)] for r in range(4)]
    write_workload(tmp_path / "w", per)
    (tmp_path / "n.yml").write_text("topology: [Ring, Ring]\nnpus_count: [2, 2]\nbandwidth: [50, 50]\n"
                                    "latency: [500, 500]\n")
    with pytest.raises(Exception, match="world-group collective on a multi-dimensional network"):
        run_astra(tmp_path / "w", system(), tmp_path / "n.yml", engine="batched")


@pytest.mark.parametrize("seed", range(4))
def test_congestion_aware_ring_contiguous_groups(tmp_path, seed):
    """Ring network: sub-groups whose ring neighbours are one hop apart are batched."""
    rng = random.Random(seed)
    n = rng.choice([6, 9, 12])
    per, groups = workload(n, rng, cross=False, world=seed % 2 == 0, contiguous=True)
    groups = {k: g for k, g in groups.items() if len(g) == 2 or len(g) == n}  # 2 members: both one hop apart
    keep = set(groups)
    per = [[x if x.pg_name in keep or x.pg_name is None else EtNode(x.id, x.name, COMP, data_deps=x.data_deps,
                                                                      duration_micros=3) for x in nodes]
           for nodes in per]
    ref, new = run_both(tmp_path, per, groups, "Ring", "congestion-aware", system())
    assert_same(ref, new)


def test_ring_groups_not_one_hop_apart_run_on_the_event_engine(tmp_path):
    per = [[EtNode(0, "ar", COLL, comm_type=int(OPS[0]), comm_size=4096, is_cpu_op=False, pg_name="1")]] * 4 + \
        [[EtNode(0, "c", COMP, duration_micros=1)]] * 2
    write_workload(tmp_path / "w", per)
    (tmp_path / "n.yml").write_text("topology: [Ring]\nnpus_count: [6]\nbandwidth: [50]\nlatency: [500]\n")
    (tmp_path / "g.json").write_text('{"1": [0, 2, 1, 3]}')
    with pytest.raises(Exception, match="not one hop apart"):
        run_astra(tmp_path / "w", system(), tmp_path / "n.yml", comm_groups=tmp_path / "g.json",
                  model="congestion-aware", engine="batched")


def test_switch_interleaving_runs_time_ordered(tmp_path):
    """Rank 1's down-link: its sub-group predecessor's messages, then the world ring's, overlap in time;
    the time-ordered batched engine serves them in arrival order (batched_timed)."""
    ref, new = run_both(tmp_path, overlapping_rings(), {"1": [2, 1]}, "Switch", "congestion-aware", system())
    assert_same(ref, new)


def test_groups_that_wait_on_each_other_deadlock_as_in_the_event_engine(tmp_path):
    """Per communicator the crossed order deadlocks.  ASTRA-sim's tags are the stream ids alone, and
    both groups number their streams 0.. with equal sizes on the same pair: its messages match across
    the groups and the run finishes; the batched engine gives way and the event engine says so."""
    coll = {"comm_type": 0, "comm_size": 4096, "is_cpu_op": False}
    per = [[EtNode(0, "a", COLL, pg_name="1", **coll), EtNode(1, "b", COLL, data_deps=(0,), pg_name="2", **coll)],
           [EtNode(0, "b", COLL, pg_name="2", **coll), EtNode(1, "a", COLL, data_deps=(0,), pg_name="1", **coll)]]
    write_workload(tmp_path / "w", per)
    (tmp_path / "n.yml").write_text("topology: [Switch]\nnpus_count: [2]\nbandwidth: [50]\nlatency: [500]\n")
    (tmp_path / "g.json").write_text('{"1": [0, 1], "2": [1, 0]}')
    args = (tmp_path / "w", system(), tmp_path / "n.yml")
    for engine in ("full", "auto"):
        with pytest.raises(DeadlockError):
            run_astra(*args, comm_groups=tmp_path / "g.json", engine=engine, stream_matching="per-group")
    full = run_astra(*args, comm_groups=tmp_path / "g.json", engine="full")
    auto = run_astra(*args, comm_groups=tmp_path / "g.json")
    assert auto.engine == "full" and any("gave way to the event engine" in x for x in auto.notes)
    assert full.finish.tolist() == auto.finish.tolist() and min(full.finish) > 0


def test_pg_name_zero_as_a_json_sub_group_is_batched_with_the_note(tmp_path):
    """The event engine runs pg_name '0' on the JSON group '0' when that is a sub-group (and notes it)."""
    per = [[EtNode(0, "ar", COLL, comm_type=0, comm_size=4096, is_cpu_op=False, pg_name="0")]] * 2 + \
        [[EtNode(0, "c", COMP, duration_micros=1)]] * 2
    ref, new = run_both(tmp_path, per, {"0": [1, 0]}, "Ring", "analytical", system())
    assert_same(ref, new)
    assert any("JSON group '0'" in x for x in new.notes)
