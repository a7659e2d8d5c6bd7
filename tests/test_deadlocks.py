"""Deadlocks are reported on every model and engine: a rank that skips a collective,
communicators told apart by name (not members), sends nobody receives."""

import json
from pathlib import Path

import pytest

from netsim.cli import main
from netsim.errors import DeadlockError
from netsim.topology.builders import nvswitch_domain
from netsim.chakra import write_workload
from netsim.chakra.schema import CommType, NodeType
from netsim.chakra.model import EtNode
from netsim.workload.simulation import simulate
from netsim.workload.generate.llm import generate_llm
from netsim.workload.generate.model import ModelSpec

REPO = Path(__file__).resolve().parents[1]
SU = str(REPO / "topologies" / "h100-superpod-1su.yaml")
DGX = str(REPO / "topologies" / "dgx-h100.yaml")
TOPO = nvswitch_domain(4, links_per_gpu=1, link_bw=1e9, latency=0.0)
COLL, SEND, RECV, COMP = (int(NodeType.COMM_COLL_NODE), int(NodeType.COMM_SEND_NODE),
                          int(NodeType.COMM_RECV_NODE), int(NodeType.COMP_NODE))
ENGINES = [(m, e) for m in ("flow", "analytical") for e in ("auto", "event")]


def ar(i, pg, deps=(), size=1000):
    return EtNode(i, f"ar{i}.{pg}", COLL, data_deps=tuple(deps), comm_type=int(CommType.ALL_REDUCE),
                  comm_size=size, pg_name=pg, is_cpu_op=False)


def drop_node(nodes, victim):
    """``nodes`` without ``victim``; its children inherit its dependencies."""
    out = []
    for n in nodes:
        if n.id == victim.id:
            continue
        if victim.id in n.data_deps:
            n.data_deps = tuple(d for d in n.data_deps if d != victim.id) + victim.data_deps
        out.append(n)
    return out


@pytest.fixture(scope="module")
def skipped_tp_allreduce(tmp_path_factory):
    """A TP8 x PP2 iteration (16 ranks) where rank 3 leaves out its first TP all-reduce."""
    spec = ModelSpec("tiny", layers=2, hidden=1024, ffn=4096, heads=8, vocab=32000)
    per_rank, groups = generate_llm(spec, tp=8, pp=2, dp=1, microbatches=2, seq=1024)
    first = next(n for n in per_rank[3] if n.type == COLL)
    per_rank[3] = drop_node(per_rank[3], first)
    d = tmp_path_factory.mktemp("skipped")
    write_workload(d / "llm", per_rank)
    (d / "groups.json").write_text(json.dumps(groups))
    return str(d / "llm"), str(d / "groups.json")


def headline(exc) -> str:
    return str(exc).split("\n")[0].split("; ")[0]


def test_skipped_collective_is_the_same_deadlock_everywhere(skipped_tp_allreduce):
    """The flow model used to repeat the run event-driven and exit 0 with an iteration time."""
    prefix, groups = skipped_tp_allreduce
    heads = set()
    for model, engine in ENGINES:
        with pytest.raises(DeadlockError) as info:
            simulate(SU, prefix, groups, model=model, engine=engine)
        text = str(info.value)
        assert "7 of 16 ranks cannot finish" in text and "waits for ranks [3]" in text, (model, engine)
        heads.add(headline(info.value))
    assert heads == {"deadlock: ALL_REDUCE #9 on group '1' [0, 1, 2, 3, 4, 5, 6, 7] never completed: rank(s) [3] "
                     "never issued it (rank 0 issued it as node 39 'mb1.bwd.L0.attn_allreduce')"}


def test_skipped_collective_exits_2(skipped_tp_allreduce, capsys):
    prefix, groups = skipped_tp_allreduce
    assert main(["run", "--topology", SU, "--workload", prefix, "--comm-groups", groups]) == 2
    err = capsys.readouterr().err
    assert err.startswith("netsim: error: deadlock: ALL_REDUCE #9") and "Traceback" not in err


def test_symmetric_collective_ends_after_its_last_member_arrives(tmp_path):
    """No member leaves an all-reduce before every member issued it (event-driven as vectorized)."""
    per_rank = [[ar(1, None, size=8 << 20)] for _ in range(7)] + \
               [[EtNode(1, "c", COMP, duration_micros=500), ar(2, None, deps=(1,), size=8 << 20)]]
    write_workload(tmp_path / "w", per_rank)
    for model, engine in ENGINES:  # NVLS on 8 H100s: its event-driven schedule let early members out
        res = simulate(DGX, str(tmp_path / "w"), model=model, engine=engine)
        coll = [r for r in res.ops if r[1] in (1, 2) and r[3] == COLL]
        assert min(end for *_, end, _row in coll) >= 500e-6, (model, engine)


def test_in_switch_all_reduce_starts_with_its_last_member(tmp_path):
    """NVLS: the switch reduces once every GPU has contributed, so a late member delays every member by
    its lateness, and all end together: at the late arrival plus the all-reduce's own time."""
    late = [EtNode(1, "c", COMP, duration_micros=500), ar(2, None, deps=(1,), size=8 << 20)]
    write_workload(tmp_path / "w", [[ar(1, None, size=8 << 20)] for _ in range(7)] + [late])
    write_workload(tmp_path / "all", [late] * 8)  # everyone late: the all-reduce alone, from 500 us
    for model, engine in ENGINES:
        ends, alone = ([end for _rank, _id, _name, typ, _start, end, _row in
                        simulate(DGX, str(tmp_path / w), model=model, engine=engine, symmetry="none").ops
                        if typ == COLL]
                       for w in ("w", "all"))
        assert len(ends) == len(alone) == 8 and max(ends) == pytest.approx(min(ends), abs=1e-12), (model, engine)
        assert min(ends) == pytest.approx(min(alone), rel=1e-12) and min(alone) > 500e-6 + 20e-6


# ------------------------------------------------------------ communicators by identity
def two_comms(tmp_path, opposite: bool) -> tuple[str, str]:
    r0 = [ar(1, "1"), ar(2, "2", (1,))]
    r1 = [ar(1, "2"), ar(2, "1", (1,))] if opposite else [ar(1, "1"), ar(2, "2", (1,))]
    idle = [EtNode(1, "work", COMP, duration_micros=1)]  # a third rank: the groups are not the world
    write_workload(tmp_path / "w", [r0, r1, idle])
    (tmp_path / "g.json").write_text(json.dumps({"1": [0, 1], "2": [0, 1]}))
    return str(tmp_path / "w"), str(tmp_path / "g.json")


@pytest.mark.parametrize("model,engine", ENGINES)
def test_same_members_opposite_order_deadlocks(tmp_path, model, engine):
    """Real NCCL hangs: rank 0 waits in communicator 1, rank 1 in communicator 2."""
    prefix, groups = two_comms(tmp_path, opposite=True)
    with pytest.raises(DeadlockError) as info:
        simulate(TOPO, prefix, groups, model=model, engine=engine)
    text = str(info.value)
    assert "2 of 3 ranks cannot finish" in text
    assert "ALL_REDUCE #0 on group '1' [0, 1] waits for ranks [1]" in text
    assert "ALL_REDUCE #0 on group '2' [0, 1] waits for ranks [0]" in text


def test_same_members_same_order_runs(tmp_path):
    prefix, groups = two_comms(tmp_path, opposite=False)
    res = simulate(TOPO, prefix, groups, model="analytical")
    assert res.finish.min() > 0
    assert sorted(key[0] for key in res.run._colls) == ["1", "2"]
    assert sorted(res.tables()["collectives"]["group"].astype(str)) == ["1", "2"]


# ------------------------------------------------------------ point to point
def test_unreceived_send_is_an_error(tmp_path, capsys):
    r0 = [EtNode(1, "lost", SEND, comm_dst=1, comm_tag=5, comm_size=100)]
    r1 = [EtNode(1, "work", COMP, duration_micros=3)]
    write_workload(tmp_path / "w", [r0, r1])
    for model, engine in ENGINES:
        with pytest.raises(DeadlockError, match=r"^deadlock: rank 0 node 1 'lost' sent 100 B to rank 1 \(tag 5\), "
                                                r"which never receives it$"):
            simulate(TOPO, str(tmp_path / "w"), model=model, engine=engine)
    assert main(["run", "--topology", DGX, "--workload", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "rank 0 node 1 'lost'" in err and "rank 1" in err


def test_receive_without_send_names_it_first(tmp_path):
    r0 = [EtNode(1, "work", COMP, duration_micros=3)]
    r1 = [EtNode(1, "lonely", RECV, comm_src=0, comm_tag=9, comm_size=8)]
    write_workload(tmp_path / "w", [r0, r1])
    with pytest.raises(DeadlockError, match=r"^deadlock: rank 1 node 1 'lonely' receives from rank 0 \(tag 9\), "
                                            r"which never sends it; 1 of 2 ranks cannot finish"):
        simulate(TOPO, str(tmp_path / "w"))


# ------------------------------------------------------------ wait cycles
def recv(i, src, tag=0, deps=()):
    return EtNode(i, f"r{i}", RECV, data_deps=tuple(deps), comm_src=src, comm_tag=tag, comm_size=8)


def send(i, dst, tag=0, deps=()):
    return EtNode(i, f"s{i}", SEND, data_deps=tuple(deps), comm_dst=dst, comm_tag=tag, comm_size=8)


def deadlock(tmp_path, per_rank, groups=None, **kw) -> str:
    write_workload(tmp_path / "w", per_rank)
    g = None
    if groups is not None:
        (tmp_path / "g.json").write_text(json.dumps(groups))
        g = str(tmp_path / "g.json")
    with pytest.raises(DeadlockError) as info:
        simulate(TOPO, str(tmp_path / "w"), g, **kw)
    return str(info.value)


@pytest.mark.parametrize("model,engine", ENGINES)
def test_crossed_communicators_print_their_wait_cycle(tmp_path, model, engine):
    """Both ranks issue both all-reduces, in opposite orders: no rank "never issued" anything."""
    prefix, groups = two_comms(tmp_path, opposite=True)
    with pytest.raises(DeadlockError) as info:
        simulate(TOPO, prefix, groups, model=model, engine=engine)
    assert headline(info.value) == (
        "deadlock: wait cycle of 2 rank(s): rank 0 node 1 'ar1.1' waits in ALL_REDUCE #0 on group '1' [0, 1] for "
        "rank 1 (which issues it later, as node 2 'ar2.1') -> rank 1 node 1 'ar1.2' waits in ALL_REDUCE #0 on "
        "group '2' [0, 1] for rank 0 (which issues it later, as node 2 'ar2.2') -> rank 0")
    assert "never" not in str(info.value)


def test_receive_send_cycle(tmp_path, capsys):
    """Each rank receives before it sends: both sends exist, behind the receives."""
    per_rank = [[recv(1, 1), send(2, 1, deps=(1,))], [recv(1, 0), send(2, 0, deps=(1,))]]
    text = deadlock(tmp_path, per_rank)
    assert headline(text) == (
        "deadlock: wait cycle of 2 rank(s): rank 0 node 1 'r1' receives from rank 1, tag 0 (which sends it later, "
        "as node 2 's2') -> rank 1 node 1 'r1' receives from rank 0, tag 0 (which sends it later, as node 2 's2') "
        "-> rank 0")
    assert "rank 0: 2 node(s) not done; node 1 'r1' recv (src 1, dst 0, tag 0) waits for rank 1's send, which " \
           "comes later (node 2 's2')" in text
    assert "never" not in text and "no matching" not in text
    assert main(["run", "--topology", DGX, "--workload", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("netsim: error: deadlock: wait cycle of 2 rank(s): rank 0 node 1 'r1'") and "Traceback" not in err


def test_cycle_through_a_collective_and_a_receive(tmp_path):
    """Rank 0 all-reduces, then sends; rank 1 receives that send, then all-reduces."""
    per_rank = [[ar(1, None), send(2, 1, deps=(1,))], [recv(1, 0), ar(2, None, deps=(1,))]]
    text = deadlock(tmp_path, per_rank)
    assert headline(text) == (
        "deadlock: wait cycle of 2 rank(s): rank 0 node 1 'ar1.None' waits in ALL_REDUCE #0 on the world [0, 1] "
        "for rank 1 (which issues it later, as node 2 'ar2.None') -> rank 1 node 1 'r1' receives from rank 0, "
        "tag 0 (which sends it later, as node 2 's2') -> rank 0")


def test_cycle_through_a_busy_lane(tmp_path):
    """No dependency at all: each rank's second all-reduce waits behind its first on the one comm lane."""
    r0 = [ar(1, "1"), ar(2, "2")]
    r1 = [ar(1, "2"), ar(2, "1")]
    text = deadlock(tmp_path, [r0, r1, [EtNode(1, "work", COMP, duration_micros=1)]], {"1": [0, 1], "2": [0, 1]})
    assert headline(text).startswith("deadlock: wait cycle of 2 rank(s): rank 0 node 1 'ar1.1' waits in ALL_REDUCE "
                                     "#0 on group '1' [0, 1] for rank 1 (which issues it later, as node 2 'ar2.1')")


def test_a_long_cycle_is_shortened(tmp_path):
    """A ring of 12 ranks, each receiving from the next before sending to the previous."""
    n = 12
    per_rank = [[recv(1, (r + 1) % n), send(2, (r - 1) % n, deps=(1,))] for r in range(n)]
    write_workload(tmp_path / "w", per_rank)
    with pytest.raises(DeadlockError) as info:
        simulate(nvswitch_domain(n, links_per_gpu=1, link_bw=1e9, latency=0.0), str(tmp_path / "w"))
    head = headline(info.value)
    assert head.startswith("deadlock: wait cycle of 12 rank(s): rank 0 node 1 'r1' receives from rank 1, tag 0")
    assert head.count(" -> ") == 7 and "-> ... (6 more) ... -> rank 11 node 1 'r1' receives from rank 0" in head
    assert head.endswith("-> rank 0")


def test_a_blocked_member_without_the_collective_never_issues_it(tmp_path):
    """Rank 1 is stuck too (on a receive rank 0 never sends), but it has no all-reduce at all: the
    report says so, not a cycle."""
    per_rank = [[ar(1, None), send(2, 1, tag=5, deps=(1,))], [recv(1, 0, tag=6)]]
    text = deadlock(tmp_path, per_rank)
    assert headline(text) == ("deadlock: ALL_REDUCE #0 on the world [0, 1] never completed: rank(s) [1] never issue "
                              "it (rank 0 issued it as node 1 'ar1.None')")
    assert "wait cycle" not in text


def test_a_blocked_sender_without_the_send_never_sends_it(tmp_path):
    per_rank = [[recv(1, 1, tag=3), send(2, 1, deps=(1,))], [recv(1, 0), send(2, 0, tag=4, deps=(1,))]]
    text = deadlock(tmp_path, per_rank)
    assert headline(text) == "deadlock: rank 0 node 1 'r1' receives from rank 1 (tag 3), which never sends it"
    assert "rank 1: 2 node(s) not done; node 1 'r1' recv (src 0, dst 1, tag 0) waits for rank 0's send, " \
           "which comes later (node 2 's2')" in text
