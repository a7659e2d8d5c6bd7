"""The time-ordered batched engine (:mod:`netsim.astra.batched_timed`) equals the event engine to the ns.

Congestion-aware Switch runs where a rank's ring predecessor changes over its chain (comm
groups, groups across groups, world collectives), so Switch down-links merge several rings
in time.  Hypothesis draws small asymmetric workloads; the batched result must equal the
event engine's line for line, or (same-instant arrivals whose order only the event queue
knows) the run gives way to the event engine with a note.  Streams are matched per communicator
(:func:`test_astra_batched_groups.run_both`), as many of these workloads stall under ASTRA-sim's
own numbering (tests/test_astra_streams.py).
"""

import random
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netsim.astra import run_astra
from netsim.astra.batched_timed import Timed
from netsim.chakra import EtNode, write_workload
from netsim.errors import DeadlockError
from test_astra_batched import assert_same, system
from test_astra_batched_groups import COLL, COMP, check, overlapping_rings, run_both, workload


def _timed_used(monkeypatch):
    calls = []
    orig = Timed.run

    def run(self):
        calls.append(self)
        return orig(self)

    monkeypatch.setattr(Timed, "run", run)
    return calls


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6), n=st.integers(3, 16), cross=st.booleans(), world=st.booleans(),
       contiguous=st.booleans(), splits=st.sampled_from([1, 2, 4]), model=st.sampled_from(["congestion-aware",
                                                                                            "analytical"]),
       delay=st.sampled_from([1, 10, 37]), bw=st.sampled_from([1, 50, 5000]), lat=st.sampled_from([0, 1, 500]))
def test_merged_down_links_equal_the_event_engine(monkeypatch, seed, n, cross, world, contiguous, splits, model,
                                                  delay, bw, lat):
    """Endpoint delays, link latencies (0 included) and bandwidths (sub-ns serialization included) vary."""
    calls = _timed_used(monkeypatch)
    rng = random.Random(seed)
    per, groups = workload(n, rng, cross=cross, world=world, contiguous=contiguous)
    with tempfile.TemporaryDirectory() as tmp:
        ref, new = run_both(Path(tmp), per, groups, "Switch", model, system(1, splits, **{"endpoint-delay": delay}),
                            dims=[("Switch", n, bw, lat)])
    check(ref, new)
    if model == "analytical":
        assert new.engine == "batched" and not calls  # no link state: the waves alone


def test_random_workloads_run_time_ordered_and_rarely_give_way(monkeypatch):
    """Over 40 random contested workloads the time-ordered engine runs (and equals the event engine);
    same-instant ties that send a run to the event engine are rare."""
    calls = _timed_used(monkeypatch)
    engines = []
    rng = random.Random(7)
    for _ in range(40):
        n = rng.randint(4, 14)
        per, groups = workload(n, rng, cross=rng.random() < 0.5, world=True)
        with tempfile.TemporaryDirectory() as tmp:
            ref, new = run_both(Path(tmp), per, groups, "Switch", "congestion-aware", system(1, rng.choice([1, 4])))
        check(ref, new)
        engines.append(new.engine)
    assert len(calls) >= 30
    assert engines.count("batched") >= 36


def _nodes(r: int, colls, comp=lambda r, k: (r * 7 + k * 3) % 11):
    nodes = [EtNode(0, "c", COMP, duration_micros=comp(r, 0))]
    for k, (size, pg) in enumerate(colls):
        last = nodes[-1].id
        nodes.append(EtNode(last + 1, f"x{k}", COLL, data_deps=(last,), comm_type=0, comm_size=size,
                            is_cpu_op=False, pg_name=pg))
        nodes.append(EtNode(last + 2, f"c{k}", COMP, data_deps=(last + 1,), duration_micros=comp(r, k + 1)))
    return nodes


@pytest.mark.parametrize("n", [8, 24])
def test_bench_shape_groups_then_world(tmp_path, monkeypatch, n):
    """bench_astra_scale.py's groups+world: contiguous groups of different sizes, then a world all-reduce."""
    calls = _timed_used(monkeypatch)
    sizes, groups, of, r0 = [2, 4, 2] if n == 8 else [2, 4, 8, 2, 4, 4], {}, {}, 0
    for k, size in enumerate(sizes):
        groups[str(k + 1)] = list(range(r0, r0 + size))
        of.update({r: str(k + 1) for r in range(r0, r0 + size)})
        r0 += size
    per = [_nodes(r, [(1 << 20, of[r]), (1 << 18, of[r]), (1 << 20, None)]) for r in range(n)]
    ref, new = run_both(tmp_path, per, groups, "Switch", "congestion-aware", system())
    assert_same(ref, new)
    assert calls and calls[0].rounds > 0


def test_world_then_groups_then_world(tmp_path, monkeypatch):
    """A rank's predecessors change twice (world, group, world): every leg before the last run is contested."""
    calls = _timed_used(monkeypatch)
    groups = {"1": [3, 0, 5], "2": [1, 4], "3": [2, 6, 7]}
    of = {r: k for k, g in groups.items() for r in g}
    per = [_nodes(r, [(65536, None), (1 << 20, of[r]), (100_003, None)], comp=lambda r, k: (r * 13 + k) % 17)
           for r in range(8)]
    ref, new = run_both(tmp_path, per, groups, "Switch", "congestion-aware", system(1, 4))
    assert_same(ref, new)
    assert calls and (calls[0].Lstar > calls[0].lstart).sum() > 0


def test_contested_groups_that_wait_on_each_other_deadlock(tmp_path):
    """Rank 0 has different predecessors in its two groups (time-ordered path); the order deadlocks
    per communicator (ASTRA-sim's own numbering: tests/test_astra_streams.py)."""
    coll = {"comm_type": 0, "comm_size": 4096, "is_cpu_op": False}
    seq = {0: ["1", "2"], 1: ["2", "1"], 2: ["1", "2"]}
    per = [[EtNode(0, "a", COLL, pg_name=seq[r][0], **coll),
            EtNode(1, "b", COLL, data_deps=(0,), pg_name=seq[r][1], **coll)] for r in range(3)]
    write_workload(tmp_path / "w", per)
    (tmp_path / "n.yml").write_text("topology: [Switch]\nnpus_count: [3]\nbandwidth: [50]\nlatency: [500]\n")
    (tmp_path / "g.json").write_text('{"1": [0, 1, 2], "2": [2, 1, 0]}')
    for engine in ("full", "auto"):
        with pytest.raises(DeadlockError):
            run_astra(tmp_path / "w", system(), tmp_path / "n.yml", comm_groups=tmp_path / "g.json",
                      model="congestion-aware", engine=engine, stream_matching="per-group")


def test_time_ordered_result_is_what_replay_reports(tmp_path, monkeypatch):
    """Every rank's collective ends in the report are the time-ordered run's leg ends."""
    calls = _timed_used(monkeypatch)
    groups = {"1": [0, 1, 2], "2": [3, 4, 5]}
    per = [_nodes(r, [(1 << 16, "1" if r < 3 else "2"), (1 << 16, None)]) for r in range(6)]
    ref, new = run_both(tmp_path, per, groups, "Switch", "congestion-aware", system())
    assert_same(ref, new)
    t = calls[0]
    assert np.all(t.t_end >= t.t_start) and int(t.t_end.max()) <= int(new.finish.max())


def test_above_the_message_cap_the_waves_hand_overlaps_to_the_event_engine(tmp_path, monkeypatch):
    """Past MAX_MESSAGES the time-ordered engine is not used; overlapping rings then go to the event engine."""
    import netsim.astra.batched as batched

    monkeypatch.setattr(batched, "MAX_MESSAGES", 0)
    ref, new = run_both(tmp_path, overlapping_rings(), {"1": [2, 1]}, "Switch", "congestion-aware", system())
    check(ref, new)
    assert new.engine == "full"


def test_weak_lower_bounds_still_exact(monkeypatch):
    """With the chain bounds switched off (each sender's bound is its last event + b), ports are served mostly
    when no rank can advance (the x0 + delta rule); results stay equal to the event engine."""
    forced = []
    orig = Timed._serve

    def serve(self, force):
        got = orig(self, force)
        if force:
            forced.append(got)
        return got

    monkeypatch.setattr(Timed, "_clocks", lambda self: self.e + self.bmin)
    monkeypatch.setattr(Timed, "_serve", serve)
    rng, engines = random.Random(5), []
    for _ in range(12):
        n = rng.randint(5, 24)
        per, groups = workload(n, rng, cross=rng.random() < 0.5, world=True, contiguous=rng.random() < 0.5)
        with tempfile.TemporaryDirectory() as tmp:
            ref, new = run_both(Path(tmp), per, groups, "Switch", "congestion-aware", system(1, rng.choice([1, 4])))
        check(ref, new)
        engines.append(new.engine)
    assert sum(forced) > 0 and engines.count("batched") >= 10


def test_same_instant_arrivals_from_up_links_started_together_go_to_the_event_engine():
    """A random workload (found by search) where two rings' messages reach a port at the same ns from up-links
    that started at the same ns: only the event queue knows their order, so the event engine runs, with a note."""
    rng = random.Random(324)
    n = rng.randint(3, 10)
    per, groups = workload(n, rng, cross=True, world=True)
    with tempfile.TemporaryDirectory() as tmp:
        ref, new = run_both(Path(tmp), per, groups, "Switch", "congestion-aware", system(1, 4))
    check(ref, new)
    assert new.engine == "full"
    assert any("same instant" in x for x in new.notes)
