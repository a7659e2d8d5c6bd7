"""Collectives off the event queue on the flow model, link reservations, replica symmetry."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.errors import InputError
from netsim.units import parse_time
from netsim.topology.spec import load_topology
from netsim.chakra import write_workload
from netsim.chakra.schema import CommType, NodeType
from netsim.chakra.model import EtNode
from netsim.workload.generate.llm import ModelSpec, write_llm_workload
from netsim.chakra.groups import CommGroups
from netsim.chakra.inspect import read_workload
from netsim.workload.replicas import LinkGuard, Mirrored, Replicas, RunConflict
from netsim.workload.runner import WorkloadRun
from netsim.workload.symmetry import Verifier

TINY = ModelSpec("tiny", layers=4, hidden=1024, ffn=4096, heads=8, vocab=1000)
SUPERPOD = "topologies/h100-superpod-1su.yaml"


@pytest.fixture(scope="module")
def superpod():
    return load_topology(SUPERPOD)


def megatron_replicas(tp, pp, dp, ep=1):
    """Replicas of the generator's layout: rank = t + tp * (d + dp * s)."""
    r = np.arange(tp * pp * dp)
    t, d, s = r % tp, (r // tp) % dp, r // (tp * dp)
    return Replicas(np.flatnonzero(d < ep), np.array([t + tp * ((d + k * ep) % dp) + tp * dp * s
                                                      for k in range(dp // ep)]))


@pytest.fixture(scope="module")
def llm(tmp_path_factory):
    out = tmp_path_factory.mktemp("llm")
    prefix = write_llm_workload(out, TINY, tp=8, pp=2, dp=4, microbatches=4, seq=1024)
    raw = json.loads((out / "comm_groups.json").read_text())
    tables = read_workload(str(prefix))
    return tables, raw


@pytest.mark.parametrize("model", ["flow", "analytical"])
def test_off_queue_collectives_equal_event_driven(superpod, llm, model):
    tables, raw = llm
    groups = CommGroups(raw, len(tables))
    fast = WorkloadRun(superpod, tables, groups, model)
    slow = WorkloadRun(superpod, tables, groups, model, fast=False)
    a, b = fast.run(), slow.run()
    assert fast.colls.stats["fixed"] > 0 and fast.colls.stats["event"] == 0
    assert slow.colls.stats["fixed"] == 0
    np.testing.assert_allclose(a.finish, b.finish, rtol=1e-9)
    np.testing.assert_allclose(fast.net.link_bytes, slow.net.link_bytes, rtol=1e-9)


@pytest.mark.parametrize("model", ["flow", "analytical"])
def test_replicas_equal_full_run(superpod, llm, model):
    tables, raw = llm
    groups = CommGroups(raw, len(tables))
    rep = megatron_replicas(8, 2, 4)
    rep.check_groups(raw)
    sym = WorkloadRun(superpod, {r: tables[r] for r in rep.reps.tolist()}, groups, model, replicas=rep)
    full = WorkloadRun(superpod, tables, groups, model)
    a, b = sym.run(), full.run()
    assert len(sym.ranks) == 16 and a.finish.size == 64
    np.testing.assert_allclose(a.finish, b.finish, rtol=1e-12)
    np.testing.assert_allclose(a.compute, b.compute, rtol=1e-12)
    assert any("simulated 16 of 64 ranks" in n for n in a.notes)
    # every replica's traffic is on the links, so link counters agree too
    np.testing.assert_allclose(sym.net.link_bytes, full.net.link_bytes, rtol=1e-9)
    ra, rb = a.tables()["ranks"], b.tables()["ranks"]
    assert len(ra) == 64
    for col in ("finish_ns", "compute_ns", "exposed_comm_ns", "ops"):
        np.testing.assert_allclose(ra[col].to_numpy(), rb[col].to_numpy(), rtol=1e-9)


def test_replicas_ignored_when_faults_differ(superpod, llm):
    tables, raw = llm
    groups, rep = CommGroups(raw, len(tables)), megatron_replicas(8, 2, 4)
    scale = np.ones(64)
    scale[5] = 2.0
    run = WorkloadRun(superpod, tables, groups, "analytical", replicas=rep, compute_scale=scale)
    assert run.replicas is None and len(run.ranks) == 64
    with pytest.raises(InputError, match="faults differ per rank"):
        WorkloadRun(superpod, {r: tables[r] for r in rep.reps.tolist()}, groups, "analytical", replicas=rep,
                    compute_scale=scale)


def test_replica_validation():
    with pytest.raises(ValueError, match="identity"):
        Replicas(np.array([0]), np.array([[1, 0], [0, 1]]))
    with pytest.raises(ValueError, match="cover every rank"):
        Replicas(np.array([0, 1]), np.array([[0, 1, 2, 3], [1, 0, 3, 2]]))
    rep = Replicas(np.array([0, 1]), np.array([[0, 1, 2, 3], [2, 3, 0, 1]]))
    rep.check_groups({"1": [0, 1], "2": [2, 3], "3": [0, 2], "4": [1, 3]})
    with pytest.raises(InputError, match="neither inside one replica"):
        rep.check_groups({"5": [0, 3, 1]})


def _coll(i, size, pg):
    return EtNode(i, f"ar{i}", int(NodeType.COMM_COLL_NODE), comm_type=int(CommType.ALL_REDUCE), comm_size=size,
                  pg_name=pg, is_cpu_op=False)


def _send_beside_allreduce(size):
    """16 ranks: rank 0 all-reduces with rank 8 (group "1", next node) and then, on a second
    stream, sends to rank 8 over the same links; the others compute for 1 us."""
    send = EtNode(2, "send", int(NodeType.COMM_SEND_NODE), comm_src=0, comm_dst=8, comm_tag=7, comm_size=size,
                  is_cpu_op=False)
    recv = EtNode(2, "recv", int(NodeType.COMM_RECV_NODE), comm_src=0, comm_dst=8, comm_tag=7, comm_size=size,
                  is_cpu_op=False)
    per_rank = [[EtNode(1, "c", int(NodeType.COMP_NODE), duration_micros=1)]] * 16
    per_rank[0], per_rank[8] = [_coll(1, size, "1"), send], [_coll(1, size, "1"), recv]
    return per_rank


def _run_both(tmp_path, superpod, per_rank, groups):
    """The default run and the all-event-driven reference of ``per_rank`` with ``groups``."""
    write_workload(tmp_path / "w", per_rank)
    tables = read_workload(str(tmp_path / "w"))
    groups = CommGroups(groups, 16)
    fast = WorkloadRun(superpod, tables, groups, "flow", streams=2)
    a = fast.run()
    b = WorkloadRun(superpod, tables, groups, "flow", streams=2, fast=False).run()
    np.testing.assert_allclose(a.finish, b.finish, rtol=1e-12)
    return fast, a


def test_reservation_conflict_reruns_event_driven(tmp_path, superpod):
    # the all-reduce cannot run alone, so the runner repeats the run with it event-driven, and
    # the result equals the all-event-driven run
    fast, a = _run_both(tmp_path, superpod, _send_beside_allreduce(64 << 20), {"1": [0, 8]})
    assert any("repeated with them event-driven" in n for n in a.notes)
    assert fast.colls.stats["event"] == 1
    # the workload's one family has conflicted: nothing is left to find, the first run stops there
    assert any(n.startswith("simulation pass 1 stopped early, at ") for n in a.notes)


def test_a_repeat_stops_at_its_first_conflict(tmp_path, superpod):
    # a run with a family already event-driven is a repeat: it stops at the conflict, before
    # the all-reduce has ended, and the next run equals the all-event-driven reference
    write_workload(tmp_path / "w", _send_beside_allreduce(64 << 20))
    tables = read_workload(str(tmp_path / "w"))
    groups = CommGroups({"1": [0, 8]}, 16)
    other = ("family", 3, (1, 1))  # no such communicator: only makes the first run a repeat
    a = WorkloadRun(superpod, tables, groups, "flow", streams=2, event_only={other}).run()
    b = WorkloadRun(superpod, tables, groups, "flow", streams=2, fast=False).run()
    np.testing.assert_allclose(a.finish, b.finish, rtol=1e-12)
    stop = next(n for n in a.notes if n.startswith("simulation pass 1 stopped early, at "))
    assert parse_time(stop.split("stopped early, at ")[1].split(" of simulated time")[0]) < a.finish.max()
    assert "nothing to do" in stop and "--engine event" in stop
    assert not any(n.startswith("simulation pass") for n in b.notes)  # --engine event: no repeats, as the note says


def test_repeat_note_is_written_for_users():
    # issue 35: "run 2: stopped at 389432.858 us" meant nothing to a user
    note = WorkloadRun._repeat_note(2, 0.389432858, 3, "them event-driven")
    assert note.startswith("simulation pass 2 stopped early, at 389.4 ms of simulated time: 3 collective(s)")
    assert "389432" not in note and "repeated with them event-driven" in note
    assert WorkloadRun._repeat_note(1, None, 1, "them event-driven").startswith("simulation pass 1: 1 collective")


def test_link_guard_stops_once_every_expected_family_has_conflicted():
    g = LinkGuard(4, stop_after=frozenset())  # a repeat: stop at the first conflict
    g.hold(np.array([1]), "A")
    g(np.array([2]), 0.5)  # another link: no conflict
    with pytest.raises(RunConflict):
        g(np.array([1]), 0.5)
    assert g.conflicts == {"A"}
    g = LinkGuard(4, stop_after=frozenset({"A", "B"}))  # a first run: stop when A and B both have
    g.hold(np.array([1]), "A")
    g.hold(np.array([2]), "B")
    g(np.array([1]), 0.5)
    with pytest.raises(RunConflict):
        g(np.array([2]), 0.5)
    assert g.conflicts == {"A", "B"}
    g = LinkGuard(4)  # no stopping
    g.hold(np.array([1]), "A")
    g(np.array([1]), 0.5)
    assert g.conflicts == {"A"}


def test_conflict_repeats_the_whole_family_event_driven(tmp_path, superpod):
    # groups {0, 8} and {1, 9} are one family (two members, stride 8); only {0, 8} meets a send on
    # its links, yet the repeat runs both event-driven (a symmetric job's siblings would conflict
    # too), while {2, 3} (stride 1) stays off the event queue; the result equals the reference
    size = 64 << 20
    per_rank = _send_beside_allreduce(size)
    per_rank[1] = per_rank[9] = [_coll(1, size, "2")]
    per_rank[2] = per_rank[3] = [_coll(1, size, "3")]
    fast, a = _run_both(tmp_path, superpod, per_rank, {"1": [0, 8], "2": [1, 9], "3": [2, 3]})
    assert sum("repeated with them event-driven" in n for n in a.notes) == 1  # one repeat
    assert fast.colls.stats == {"fixed": 1, "event": 2}
    assert not any("stopped early" in n for n in a.notes)  # {2, 3}'s family might still conflict


def test_link_guard():
    g = LinkGuard(6)
    load = np.zeros(6, dtype=np.int32)
    assert g.idle(np.array([1, 2]), load, 0.0)
    ticket = g.hold(np.array([1, 2]), "A")
    assert not g.idle(np.array([2, 3]), load, 0.0)
    g(np.array([4, 5]), 0.5)
    assert not g.conflicts
    g.release(ticket, np.array([1, 2]), 1.0)
    g(np.array([0, 1]), 1.0)  # at the reservation's end: no conflict
    assert not g.conflicts
    g(np.array([2]), 0.9)
    assert g.conflicts == {"A"}
    load[3] = 1
    assert not g.idle(np.array([3]), load, 2.0)


class _Uneven:
    """A fake network whose copies k finish at t = 1 + k."""

    def __init__(self):
        self.calls = []

    def submit(self, src, dst, nbytes, on_done, key=None, routes=None, cap=None):
        m = src.size // 3
        for k in (0, 1, 2):  # in time order, as a network calls back
            self.calls.append((k, lambda k=k: on_done(np.arange(k * m, (k + 1) * m), 1.0 + k)))


def _uneven_mirror(strict: bool):
    """Three replicas of ranks (0, 1) on the fake network whose copy k finishes at t = 1 + k."""
    rep = Replicas(np.array([0, 1]), np.array([[0, 1, 2, 3, 4, 5], [2, 3, 4, 5, 0, 1], [4, 5, 0, 1, 2, 3]]))
    net = _Uneven()
    net.topo = type("T", (), {"routes": staticmethod(lambda s, d, k=None: (np.zeros(s.size + 1, np.int64),
                                                                         np.zeros(0, np.int64)))})()
    return net, Mirrored(net, rep, Verifier(strict=strict))


def test_mirrored_waits_for_slowest_copy():
    net, mirror = _uneven_mirror(strict=False)
    got = []
    mirror.submit(np.array([0, 1]), np.array([1, 0]), np.array([8.0, 8.0]), lambda idx, t: got.append((idx, t)))
    for _k, fire in net.calls:
        fire()
    assert len(got) == 1 and got[0][0].tolist() == [0, 1] and got[0][1] == 3.0
    assert mirror.verifier.max_skew_s == pytest.approx(2.0)


def test_mirrored_copies_apart_stop_an_exact_run():
    from netsim.workload.symmetry import SymmetryBroken

    net, mirror = _uneven_mirror(strict=True)
    mirror.submit(np.array([0, 1]), np.array([1, 0]), np.array([8.0, 8.0]), lambda idx, t: None)
    net.calls[0][1]()
    net.calls[1][1]()
    with pytest.raises(SymmetryBroken, match=r"copies of transfer 0->1 finished up to 2 s apart \(at 3 s simulated\)"):
        net.calls[2][1]()


def test_identical_rank_traces_share_one_file(tmp_path):
    import os

    from netsim.chakra import read_et_table

    node = EtNode(1, "c", int(NodeType.COMP_NODE), duration_micros=3)
    paths = write_workload(tmp_path / "w", [[node]] * 3 + [[EtNode(1, "d", int(NodeType.COMP_NODE))]])
    inodes = [os.stat(p).st_ino for p in paths]
    assert inodes[0] == inodes[1] == inodes[2] != inodes[3]
    assert read_et_table(paths[2]).name == ["c"] and read_et_table(paths[3]).name == ["d"]
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_replicas_smaller_than_a_node_exact_or_approximate(tmp_path, superpod):
    # tp2: four replicas share a node, and the DP members that one representative stands for finish
    # their gradient all-reduce at different times.  It is every rank's last node, so the exact run keeps
    # one replica and gives each member its own finish: equal to the full run, ranks table included.
    # Approximate: the representatives wait for their slowest copy, and say so.
    from netsim.workload.generate.llm import llm_replicas

    prefix = write_llm_workload(tmp_path, TINY, tp=2, pp=2, dp=8, microbatches=4, seq=1024)
    tables = read_workload(str(prefix))
    groups = CommGroups(json.loads((tmp_path / "comm_groups.json").read_text()), len(tables))
    exact = WorkloadRun(superpod, tables, groups, "analytical", replicas=llm_replicas(2, 2, 8))
    a = exact.run()
    b = WorkloadRun(superpod, tables, groups, "analytical").run()
    assert exact.replicas is not None and len(exact.ranks) == 4
    np.testing.assert_allclose(a.finish, b.finish, rtol=1e-12)
    assert np.ptp(a.finish) > 1e-6  # the members did finish apart
    assert any("their last collective at its own time" in n for n in a.notes), a.notes
    ra, rb = a.tables()["ranks"], b.tables()["ranks"]
    for col in ("finish_ns", "compute_ns", "comm_ns", "exposed_comm_ns", "idle_ns", "ops"):
        np.testing.assert_allclose(ra[col].to_numpy(), rb[col].to_numpy(), rtol=1e-9, atol=1e-3, err_msg=col)
    c = WorkloadRun(superpod, tables, groups, "analytical", replicas=llm_replicas(2, 2, 8),
                    symmetry="approximate").run()
    assert any("replica symmetry is approximate" in n and "not a bound" in n for n in c.notes), c.notes
    assert not np.array_equal(c.finish, b.finish)  # some ranks paced by a slower copy


def _mid_divergence(tmp_path):
    """16 ranks, 8 replicas of 2 (TP pairs): a TP all-reduce, a DP all-reduce across two nodes whose members
    finish apart, then another TP all-reduce (so the divergence is not the ranks' last node)."""
    def coll(i, pg, size, deps=()):
        return EtNode(i, f"c{i}", int(NodeType.COMM_COLL_NODE), comm_type=int(CommType.ALL_REDUCE), comm_size=size,
                      pg_name=pg, is_cpu_op=False, data_deps=deps)
    per = [[coll(1, f"t{r // 2}", 1 << 20), coll(2, f"d{r % 2}", 1 << 24, (1,)), coll(3, f"t{r // 2}", 1 << 20, (2,))]
           for r in range(16)]
    groups = {f"t{g}": [2 * g, 2 * g + 1] for g in range(8)}
    groups.update({f"d{i}": list(range(i, 16, 2)) for i in range(2)})
    write_workload(tmp_path / "w", per)
    return read_workload(str(tmp_path / "w")), CommGroups(groups, 16)


def test_divergence_before_the_last_node_falls_back(tmp_path, superpod):
    tables, groups = _mid_divergence(tmp_path)
    rep = Replicas(np.array([0, 1]), np.array([(np.arange(16) + 2 * k) % 16 for k in range(8)]))
    run = WorkloadRun(superpod, tables, groups, "analytical", replicas=rep)
    a = run.run()
    b = WorkloadRun(superpod, tables, groups, "analytical", fast=False).run()
    np.testing.assert_allclose(a.finish, b.finish, rtol=1e-12)
    assert run.replicas is None and len(run.ranks) == 16
    why = next(n for n in a.notes if n.startswith("replica symmetry not exact for this run: "))
    assert "apart" in why and why.endswith("simulated every rank"), why
    # only the representatives' tables: nothing to fall back to, so an exact run refuses
    with pytest.raises(InputError, match="replica symmetry is not exact for this run .* holds only the repr"):
        WorkloadRun(superpod, {0: tables[0], 1: tables[1]}, groups, "analytical", replicas=rep).run()


def test_cli_run_llm(tmp_path, capsys):
    from netsim.cli import main

    model = tmp_path / "tiny.yaml"
    model.write_text("layers: 4\nhidden: 1024\nffn: 4096\nheads: 8\nvocab: 1000\n")
    args = ["run", "--topology", SUPERPOD, "--llm", str(model), "--tp", "8", "--pp", "2", "--dp", "4",
            "--microbatches", "4", "--seq", "1024", "--json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ranks"] == 64 and any("simulated 16 of 64 ranks" in n for n in out["notes"])
    assert main(args[:-1] + ["--symmetry", "none", "--json"]) == 0
    full = json.loads(capsys.readouterr().out)
    assert full["iteration_us"] == pytest.approx(out["iteration_us"], rel=1e-12) and full["notes"] == out["notes"][:2]
    assert main(["run", "--topology", SUPERPOD, "--llm", str(model), "--pp", "2", "--dp", "4"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--llm needs --tp" in err[0]


def test_mirrored_copies_keep_in_switch_hops():
    # TP8 all-reduces run as NVLS (UP to the NVSwitch, DOWN from it); event-driven under replica
    # symmetry, every replica's copy must be cut to the same hop as the representative's, or the
    # copies cross a switch->GPU link they never use (it was 1.1 % slow, and said to be exact)
    from netsim.workload.generate.llm import ModelSpec
    from netsim.workload.llmrun import simulate_llm
    spec = ModelSpec("small", layers=2, hidden=4096, ffn=16384, heads=32, vocab=32000)
    run = lambda sym: simulate_llm(SUPERPOD, spec, model="flow", tp=8, pp=1,  # noqa: E731
                                   dp=2, microbatches=1, seq=2048, symmetry=sym, engine="event")
    mirrored, full = run("auto"), run("none")
    assert any("simulated 8 of 16 ranks" in n for n in mirrored.notes)
    assert not any("approximate" in n for n in mirrored.notes)
    np.testing.assert_allclose(mirrored.finish, full.finish, rtol=1e-12)


def test_hops_of_inverts_cut_routes():
    from netsim.collectives.fastpath import cut_routes, hops_of
    from netsim.collectives.schedule import DOWN, PATH, UP
    full = (np.array([0, 2, 4, 7, 8]), np.array([1, 2, 3, 4, 5, 6, 7, 8]))
    hop = np.array([PATH, UP, DOWN, PATH])
    assert hops_of(full, full) is None
    assert hops_of(cut_routes(*full, hop), full).tolist() == hop.tolist()
    with pytest.raises(ValueError):  # cut to a middle link: no hop says that
        hops_of((np.array([0, 2, 4, 5, 6]), np.array([1, 2, 3, 4, 6, 8])), full)


@settings(max_examples=12, deadline=None)
@given(st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2]), st.sampled_from([2, 4]),
       st.sampled_from(["auto", "event"]))
def test_replica_symmetry_is_exact_or_says_so(tp, pp, dp, engine):
    # one replica standing for all: equal to simulating every rank, unless the notes say
    # the symmetry was approximate (copies of a transfer that finished apart)
    from netsim.workload.generate.llm import ModelSpec
    from netsim.workload.llmrun import simulate_llm
    spec = ModelSpec("small", layers=2, hidden=2048, ffn=8192, heads=16, vocab=32000)
    run = lambda sym: simulate_llm(SUPERPOD, spec, model="flow", tp=tp, pp=pp, dp=dp,  # noqa: E731
                                   microbatches=pp, seq=1024, symmetry=sym, engine=engine)
    mirrored, full = run("auto"), run("none")
    if not any("approximate" in n for n in mirrored.notes):
        np.testing.assert_allclose(mirrored.finish, full.finish, rtol=1e-9)
