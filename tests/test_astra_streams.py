"""ASTRA-sim's stream numbering (:mod:`netsim.astra.streams`, issue 38 item 2).

ASTRA-sim numbers every stream of a rank from one counter (sub-group streams included) and tags a
collective's messages with the stream id alone.  Where ranks created different numbers of sub-group
streams before a world collective, its tags differ and ASTRA-sim stalls ("Hardware Resource ... has
unreleased nodes", exit 0, no finished lines); netsim, by default, stalls the same way and reports
which ranks, nodes and stream ids (exit status 2).  ``--stream-matching per-group`` matches streams per
communicator, as netsim did before, and notes that ASTRA-sim would not finish.
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
from netsim.astra.streams import Numbering, chunk_count, static_divergence
from netsim.chakra import EtNode, write_workload
from netsim.chakra.schema import CommType, NodeType
from netsim.cli import main
from netsim.errors import DeadlockError, InputError
from test_astra_batched import system

COMP, COLL = int(NodeType.COMP_NODE), int(NodeType.COMM_COLL_NODE)
MiB = 1 << 20
MODELS = ("analytical", "congestion-aware")


def write(root: Path, per, groups: dict, kind: str = "Ring", splits: int = 4) -> list[str]:
    """Inputs on disk; returns ASTRA-sim's flags for them."""
    n = len(per)
    write_workload(root / "w", per)
    (root / "g.json").write_text(json.dumps(groups))
    (root / "n.yml").write_text(f"topology: [{kind}]\nnpus_count: [{n}]\nbandwidth: [50]\nlatency: [500]\n")
    (root / "s.json").write_text(json.dumps({"scheduling-policy": "LIFO", "endpoint-delay": 10,
                                             "active-chunks-per-dimension": 1, "preferred-dataset-splits": splits,
                                             "all-reduce-implementation": ["ring"],
                                             "all-gather-implementation": ["ring"],
                                             "reduce-scatter-implementation": ["ring"],
                                             "collective-optimization": "localBWAware", "local-mem-bw": 1600}))
    (root / "m.json").write_text(json.dumps({"memory-type": "NO_MEMORY_EXPANSION"}))
    return [f"--workload-configuration={root / 'w'}", f"--system-configuration={root / 's.json'}",
            f"--network-configuration={root / 'n.yml'}", f"--remote-memory-configuration={root / 'm.json'}",
            f"--comm-group-configuration={root / 'g.json'}"]


def run(root: Path, **kw):
    return run_astra(root / "w", root / "s.json", root / "n.yml", root / "m.json", root / "g.json", **kw)


def chain(colls, comp=0) -> list[EtNode]:
    """A chain: each (op, bytes, pg_name) collective, then ``comp`` us of compute."""
    nodes = []
    for k, (op, size, pg) in enumerate(colls):
        deps = (nodes[-1].id,) if nodes else ()
        nodes.append(EtNode(len(nodes), f"x{k}", COLL, data_deps=deps, comm_type=int(op), comm_size=size,
                            is_cpu_op=False, pg_name=pg))
        if comp:
            nodes.append(EtNode(len(nodes), f"c{k}", COMP, data_deps=(nodes[-1].id,), duration_micros=comp))
    return nodes


AR = CommType.ALL_REDUCE


def four_npus() -> list:
    """Ranks 0 and 1 all-reduce 1 MiB on group {0, 1}, then all four all-reduce 1 MiB on the world."""
    return [chain([(AR, MiB, "1"), (AR, MiB, None)]) if r < 2 else chain([(AR, MiB, None)]) for r in range(4)]


def unequal_chunks() -> list:
    """Equal collective counts, different chunk counts: 1 MiB + 1 B cuts into 5 chunks, 1 MiB into 4."""
    return [chain([(AR, MiB + 1 if r < 2 else MiB, "1" if r < 2 else "2"), (AR, MiB, None)]) for r in range(4)]


HW = [line for r in range(4) for line in (f"!!!Hardware Resource sys.id={r} has unreleased nodes!!!",
                                           f"GPU comm node id: {int(r < 2)}")] + ["Exiting"]


@pytest.mark.parametrize("model", MODELS + ("flow",))
@pytest.mark.parametrize("engine", ["auto", "full"])
def test_four_npus_stall_as_astra_sim_does(tmp_path, model, engine):
    write(tmp_path, four_npus(), {"1": [0, 1]})
    with pytest.raises(DeadlockError) as info:
        run(tmp_path, model=model, engine=engine)
    text = str(info.value)
    assert "4 rank(s) never finish" in text
    assert "rank 1 sends stream(s) 4 to rank 2, which waits for stream(s) 0 from it" in text
    assert "rank 3 sends stream(s) 0 to rank 0, which waits for stream(s) 4 from it" in text
    assert ("rank(s) 0-1: world all_reduce (node 1) is stream(s) 4-7, after 4 stream(s) on comm groups "
            "(4 on group '1')") in text
    assert "rank(s) 2-3: world all_reduce (node 0) is stream(s) 0-3\n" in text
    lines = info.value.lines
    assert not any(" finished, " in x for x in lines)  # ASTRA-sim prints no finished line
    assert lines[-len(HW):] == HW


def test_four_npus_fast_engines_do_not_apply(tmp_path):
    write(tmp_path, four_npus(), {"1": [0, 1]})
    with pytest.raises(InputError, match="batched engine does not apply: stream ids diverge between ranks: "
                                         "ASTRA-sim would number world stream #0 4 on rank 0 but 0 on rank 2"):
        run(tmp_path, engine="batched")
    with pytest.raises(InputError, match="symmetric engine does not apply"):
        run(tmp_path, engine="symmetric")


@pytest.mark.parametrize("model, finish", [("analytical", [67620, 67620, 64180, 65900]),
                                           ("congestion-aware", [67620, 67620, 66600, 67110])])
def test_per_group_matching_finishes_with_a_note(tmp_path, model, finish):
    """netsim's previous numbers (matching per communicator), on the full and the batched engine."""
    write(tmp_path, four_npus(), {"1": [0, 1]})
    full = run(tmp_path, model=model, engine="full", stream_matching="per-group")
    auto = run(tmp_path, model=model, stream_matching="per-group")
    assert auto.engine == "batched"
    assert full.finish.tolist() == auto.finish.tolist() == finish
    assert full.notes == auto.notes
    assert any("ASTRA-sim would number world stream #0 4 on rank 0 but 0 on rank 2" in x
               and "would not finish this workload" in x for x in full.notes)


def test_command_line_exit_status_and_output(tmp_path, capsys):
    args = write(tmp_path, four_npus(), {"1": [0, 1]})
    assert main(["astra", *args]) == 2
    out = capsys.readouterr()
    assert " finished, " not in out.out and out.out.splitlines()[-len(HW):] == HW
    assert "stream ids stopped matching" in out.err and "Traceback" not in out.err
    assert main(["astra", *args, "--stream-matching", "per-group"]) == 0
    out = capsys.readouterr()
    assert out.out.count(" finished, ") == 4 and "would not finish this workload" in out.err
    assert main(["astra", *args, "--stream-matching=bogus"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--stream-matching" in err


@pytest.mark.parametrize("model", MODELS)
def test_unequal_chunk_counts_stall(tmp_path, model):
    write(tmp_path, unequal_chunks(), {"1": [0, 1], "2": [2, 3]})
    with pytest.raises(DeadlockError) as info:
        run(tmp_path, model=model)
    text = str(info.value)
    assert "rank(s) 0-1: world all_reduce (node 1) is stream(s) 5-8, after 5 stream(s) on comm groups (5 on group '1')" in text
    assert "rank(s) 2-3: world all_reduce (node 1) is stream(s) 4-7, after 4 stream(s) on comm groups (4 on group '2')" in text
    res = run(tmp_path, model=model, stream_matching="per-group")
    assert res.finish.min() > 0 and any("world stream #0 5 on rank 0 but 4 on rank 2" in x for x in res.notes)


@pytest.mark.parametrize("model", MODELS)
def test_equal_chunk_counts_finish_in_both_modes(tmp_path, model):
    """Both groups cut 4 chunks (sizes differ): the world ids agree and nothing changes."""
    per = [chain([(AR, MiB if r < 2 else MiB // 2, "1" if r < 2 else "2"), (AR, MiB, None)]) for r in range(4)]
    write(tmp_path, per, {"1": [0, 1], "2": [2, 3]})
    a, b = run(tmp_path, model=model), run(tmp_path, model=model, stream_matching="per-group")
    assert a.finish.tolist() == b.finish.tolist() and a.lines() == b.lines() and a.notes == b.notes == []


def test_streams_after_the_last_world_collective_may_differ(tmp_path):
    per = [chain([(AR, MiB, None)] + ([(AR, MiB, "1")] if r < 2 else [])) for r in range(4)]
    write(tmp_path, per, {"1": [0, 1]})
    a, b = run(tmp_path), run(tmp_path, stream_matching="per-group")
    assert a.finish.tolist() == b.finish.tolist() and a.notes == b.notes


def test_crossed_groups_match_across_groups_as_astra_sim_tags_do(tmp_path):
    """Ranks 0 and 1 run groups "1" and "2" (both {0, 1}) in opposite orders: per communicator that is a
    deadlock; ASTRA-sim's tags (stream ids 0..3 in both groups, same sizes) match across the groups."""
    per = [chain([(AR, MiB, "1"), (AR, MiB, "2")]), chain([(AR, MiB, "2"), (AR, MiB, "1")])]
    write(tmp_path, per, {"1": [0, 1], "2": [1, 0]})
    res = run(tmp_path, engine="full")
    assert res.finish.min() > 0
    with pytest.raises(DeadlockError):
        run(tmp_path, engine="full", stream_matching="per-group")


@pytest.mark.parametrize("matching", ["astra", "per-group"])
def test_symmetric_engine_in_both_modes(tmp_path, matching):
    """Every rank alike on the world and on a group of every rank (its ids collide with the world's)."""
    per = [chain([(AR, MiB, None), (CommType.ALL_GATHER, 65536, "5"), (AR, 100_003, None)], comp=3)] * 4
    write(tmp_path, per, {"5": [0, 1, 2, 3]})
    sym = run(tmp_path, stream_matching=matching)
    full = run(tmp_path, engine="full", stream_matching=matching)
    ref = run(tmp_path, engine="full", stream_matching="per-group")
    assert sym.engine == "symmetric"
    assert sym.finish.tolist() == full.finish.tolist() == ref.finish.tolist()


@pytest.mark.parametrize("n", [96, pytest.param(1024, marks=pytest.mark.slow)])
def test_uneven_partitions(tmp_path, n):
    """Two group partitions of uneven sizes (the last rank in neither), then a world all-reduce (the issue's
    1,024-NPU case: the world ring runs until the last rank's ids break it, 0.5M messages, about 10 s)."""
    rng = random.Random(3)
    fams, names = [], {}
    for _ in range(2):
        order, groups, i = rng.sample(range(n - 1), n - 1), [], 0
        while i < n - 1:
            size = min(rng.choice([2, 3, 5, 8]), n - 1 - i)
            if n - 1 - i - size == 1:
                size += 1
            groups.append(sorted(order[i:i + size]))
            i += size
        fams.append(groups)
    of = {}
    for f, groups in enumerate(fams):
        for k, g in enumerate(groups):
            names[f"{f}{k:04d}"] = g
            of.update({(f, r): f"{f}{k:04d}" for r in g})
    per = [chain([(AR, 4096, of[(f, r)]) for f in range(2) if (f, r) in of] + [(AR, 4096, None)]) for r in range(n)]
    write(tmp_path, per, names, kind="Switch", splits=1)
    with pytest.raises(DeadlockError) as info:
        run(tmp_path)
    text = str(info.value)
    assert f"{n} rank(s) never finish" in text and f"rank {n - 2} sends stream(s) 2 to rank {n - 1}" in text
    assert f"rank(s) 0-{n - 2}: world all_reduce (node 2) is stream(s) 2, after 2 stream(s) on comm groups\n" in text
    assert f"rank(s) {n - 1}: world all_reduce (node 0) is stream(s) 0\n" in text
    res = run(tmp_path, stream_matching="per-group")
    assert res.engine == "batched" and any(f"world stream #0 2 on rank 0 but 0 on rank {n - 1}" in x
                                           for x in res.notes)


def test_numbering_counts_every_stream():
    nb, pg = Numbering(), Numbering("per-group")
    for key in ("g", "g", None, "h", None):
        a, b = nb.next(key), pg.next(key)
    assert nb.total == 5 and nb.groups == {"g": 2, "h": 1}
    assert (a, b) == ((4, 4), (1, ("", 1)))  # the last world stream: ASTRA-sim's id 4, per communicator 1
    assert nb.shifts == [(0, 2), (1, 3)]
    assert chunk_count(MiB + 1, "all_reduce", 4, 4) == 5 and chunk_count(MiB, "all_reduce", 4, 4) == 4
    assert chunk_count(10, "all_reduce", 4, 64) == 4  # raised to the NPU count: 4 chunks of 64 B
    assert static_divergence({0: [(False, 4), (True, 4)], 1: [(False, 4), (True, 4)]}) is None
    assert "world stream #0 4 on rank 0 but 0 on rank 1" in static_divergence({0: [(False, 4), (True, 4)],
                                                                                1: [(True, 4)]})


def _workload(n: int, rng: random.Random, uneven: bool):
    """Chains over one or two partitions of the ranks into groups of sizes >= 2, and world collectives;
    each group picks its op and a size that cuts into ``splits`` chunks (a multiple of 4).  ``uneven``:
    maybe sizes of 100,003 B too (one chunk more), maybe a first partition that leaves some ranks out."""
    sizes = (4096, 65536, 1 << 20) + ((100_003,) if uneven and rng.random() < 0.4 else ())
    leave = uneven and rng.random() < 0.4
    fams = []
    for f in range(rng.randint(1, 2)):
        ranks = [r for r in range(n) if not (leave and f == 0 and rng.random() < 0.25)]
        order, groups, i = rng.sample(ranks, len(ranks)), [], 0
        while len(order) - i >= 2:
            size = min(rng.randint(2, max(2, n // 2)), len(order) - i)
            if len(order) - i - size == 1:
                size += 1
            groups.append(order[i:i + size])
            i += size
        fams.append(groups)
    names = {f"{f + 1}{k:02d}": g for f, fam in enumerate(fams) for k, g in enumerate(fam)}
    steps = []
    for _ in range(rng.randint(1, 3)):
        for f, fam in enumerate(fams):
            steps.append([(f"{f + 1}{k:02d}", rng.choice((AR, CommType.ALL_GATHER, CommType.REDUCE_SCATTER)),
                           rng.choice(sizes)) for k in range(len(fam))])
        steps.append([(None, rng.choice((AR, CommType.ALL_GATHER)), rng.choice((4096, 65536)))])
    per = [chain([(op, size, name) for step in steps for name, op, size in step
                  if name is None or r in names[name]], comp=rng.randrange(0, 9)) for r in range(n)]
    return per, names


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), n=st.integers(4, 12), kind=st.sampled_from(["Ring", "Switch", "FullyConnected"]),
       model=st.sampled_from(MODELS), splits=st.sampled_from([1, 2, 4]))
def test_same_group_streams_give_the_same_results(seed, n, kind, model, splits):
    """Every rank creates the same number of group streams before each world collective: the default
    numbering gives every finish time, line and note that matching per communicator (netsim before) gives,
    on the event engine and on auto (batched)."""
    per, groups = _workload(n, random.Random(seed), uneven=False)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write(root, per, groups, kind=kind, splits=splits)
        before = run(root, model=model, engine="full", stream_matching="per-group")
        for engine in ("full", "auto"):
            now = run(root, model=model, engine=engine)
            assert np.array_equal(now.finish, before.finish) and np.array_equal(now.exposed, before.exposed)
            assert sorted(now.lines()) == sorted(before.lines())
            assert [x for x in now.notes if "gave way" not in x] == before.notes


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), n=st.integers(4, 10), model=st.sampled_from(MODELS))
def test_uneven_group_streams_stall_exactly_where_the_ids_diverge(seed, n, model):
    """Where the chains' counters differ at a world collective, the default stalls on both engines and
    says which ids stopped matching (per communicator it finishes, with the note); elsewhere it finishes
    as per communicator."""
    per, groups = _workload(n, random.Random(seed), uneven=True)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write(root, per, groups, kind="Switch")
        before = run(root, model=model, engine="full", stream_matching="per-group")
        noted = any("would not finish this workload" in x for x in before.notes)
        for engine in ("full", "auto"):
            if noted:
                with pytest.raises(DeadlockError, match="stream ids stopped matching"):
                    run(root, model=model, engine=engine)
            else:
                assert run(root, model=model, engine=engine).finish.tolist() == before.finish.tolist()
