"""The event engine's per-message machinery (issue 38): message matching that forgets matched keys,
the cyclic GC paused while events run, and the general-algorithm benchmark's inputs.

The engine's results are pinned elsewhere (ASTRA-sim's reference output and closed forms in
tests/test_astra_exact.py, the batched engines against it); these tests pin what the speed-ups rely on.
"""

import gc
import importlib
import sys
from pathlib import Path

import numpy as np
from hypothesis import given, settings, strategies as st

from netsim.astra import run_astra
from netsim.astra import engine as astra_engine
from netsim.astra.engine import Fabric, HeapClock

ROOT = Path(__file__).resolve().parents[1]


class ReferenceFabric:
    """ASTRA-sim's matching, spelled out: the n-th send of a (tag, src, dst, size) key pairs with the
    n-th receive of that key, counted over the whole run; nothing is ever forgotten."""

    def __init__(self, clock, transmit):
        self.clock, self.transmit = clock, transmit
        self.sent, self.recvd, self.entries = {}, {}, {}

    def send(self, src, dst, tag, size, cb=None):
        k = (tag, src, dst, size)
        n = self.sent[k] = self.sent.get(k, 0) + 1
        e = self.entries.setdefault((k, n), [None, None, False])
        e[0] = cb
        self.transmit(src, dst, size, lambda: self._arrive((k, n)))

    def _arrive(self, key):
        e = self.entries[key]
        e[2] = True
        if e[0] is not None:
            e[0]()
        if e[1] is not None:
            e[1]()

    def recv(self, src, dst, tag, size, cb):
        k = (tag, src, dst, size)
        n = self.recvd[k] = self.recvd.get(k, 0) + 1
        e = self.entries.setdefault((k, n), [None, None, False])
        if e[2]:
            self.clock.at(self.clock.now, cb)
        else:
            e[1] = cb


def _replay(cls, ops):
    """Run ``ops`` = [(issue time, send?, key index, network delay)] on a fabric; the log of
    (time, what) of every callback, in the order they fire."""
    clock = HeapClock()
    log = []

    def transmit(src, dst, size, on_arrival, delays=iter([op[3] for op in ops if op[1]])):
        clock.at(clock.now + next(delays), on_arrival)

    fab = cls(clock, transmit)
    keys = [(("c", 0), 0, 1, 64), (("c", 0), 1, 0, 64), (("c", 1), 0, 1, 64)]
    for i, (t, is_send, k, _d) in enumerate(ops):
        tag, src, dst, size = keys[k]
        if is_send:
            clock.at(t, lambda i=i, tag=tag, src=src, dst=dst, size=size: fab.send(
                src, dst, tag, size, lambda: log.append((clock.now, "sent", i))))
        else:
            clock.at(t, lambda i=i, tag=tag, src=src, dst=dst, size=size: fab.recv(
                src, dst, tag, size, lambda: log.append((clock.now, "received", i))))
    clock.run()
    return log, fab


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.booleans(), st.integers(0, 2), st.integers(0, 12)),
                min_size=1, max_size=40))
def test_matching_that_forgets_matched_keys_pairs_as_astra_sim(ops):
    """Dropping a key once every send met its receive (and counting again from 0) pairs the same
    messages at the same times, in the same callback order; a matched run leaves nothing behind."""
    got, fab = _replay(Fabric, ops)
    ref, _ = _replay(ReferenceFabric, ops)
    assert got == ref
    sends = {k: sum(1 for op in ops if op[1] and op[2] == k) for k in range(3)}
    recvs = {k: sum(1 for op in ops if not op[1] and op[2] == k) for k in range(3)}
    assert fab.pending() == sum(max(sends[k], recvs[k]) - min(sends[k], recvs[k]) for k in range(3))
    if sends == recvs:
        assert fab._slots == {}  # memory bounded by the messages in flight
    assert len(fab.unmatched()) == fab.pending()


def test_clock_pauses_the_cyclic_gc_only_while_events_run():
    seen = []
    for enabled in (True, False):
        (gc.enable if enabled else gc.disable)()
        try:
            clock = HeapClock()
            clock.at(5, lambda: seen.append(gc.isenabled()))
            clock.run()
            assert gc.isenabled() is enabled
        finally:
            gc.enable()
    assert seen == [False, False] and clock.events == 1


def _bench():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        return importlib.import_module("bench_astra_general")
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def test_garbage_left_by_the_event_loop_does_not_grow_with_messages(tmp_path, monkeypatch):
    """What the engine drops per message is freed by reference counting: the cyclic garbage found
    right after the event loop (GC paused) is the same at 4 and at 32 dataset splits."""
    bench = _bench()
    found = []
    run = HeapClock.run

    def counting_run(self):
        gc.collect()
        run(self)
        found.append(gc.collect())

    monkeypatch.setattr(astra_engine.HeapClock, "run", counting_run)
    messages = []
    for splits in (4, 32):
        monkeypatch.setitem(bench.CASES["general"], "splits", splits)
        cli = bench.make_inputs(tmp_path / str(splits), "general", 8)
        res = run_astra(cli["--workload-configuration"], cli["--system-configuration"],
                        cli["--network-configuration"], engine="full")
        messages.append(res.stats["messages"])
    assert messages[1] > 6 * messages[0]
    assert found[0] == found[1] < messages[0]


def test_benchmark_cases_are_the_general_algorithms(tmp_path):
    """The benchmark's inputs use the general algorithms (doubleBinaryTree, direct, halvingDoubling,
    several active chunks); the analytical model runs them batched (netsim.astra.batched_algos), the
    congestion-aware one event by event, and both equal the full engine on them."""
    bench = _bench()
    cli = bench.make_inputs(tmp_path, "general", 8)
    import json

    sysj = json.loads(Path(cli["--system-configuration"]).read_text())
    assert (sysj["all-reduce-implementation"], sysj["all-gather-implementation"],
            sysj["reduce-scatter-implementation"]) == (["doubleBinaryTree"], ["direct"], ["halvingDoubling"])
    assert sysj["preferred-dataset-splits"] == 64 and sysj["active-chunks-per-dimension"] == 4
    args = (cli["--workload-configuration"], cli["--system-configuration"], cli["--network-configuration"])
    for model, engine in (("analytical", "batched"), ("congestion-aware", "full")):
        auto, full = run_astra(*args, model=model), run_astra(*args, model=model, engine="full")
        assert auto.engine == engine and np.array_equal(auto.finish, full.finish)
        assert sorted(auto.lines()) == sorted(full.lines())  # same-instant finishes: rank order vs event order
        assert len(set(auto.finish.tolist())) > 1  # uneven compute: ranks finish apart


def _links_log(lazy: bool, kind: str, sends: list) -> list:
    """Every arrival (time, message) of ``sends`` = [(issue time, src, dst, size, forward?)] on the
    store-and-forward model, with link-free events pushed lazily (``_HeapLink``) or always (``_Link``); a
    ``forward`` message sends one more from its destination when it lands (same-instant chains)."""
    from netsim.astra import congestion
    from netsim.astra.engine import AstraNetwork, NetDim

    class Eager(congestion.StoreAndForward):
        def _link(self, a, b):
            link = self.links.get((a, b))
            if link is None:
                link = self.links[(a, b)] = congestion._Link(self.clock, self.lat, self.bw, self)
            return link

    clock = HeapClock()
    net = AstraNetwork("x", (NetDim(kind, 5, 50.0, 3.0),))
    links = (congestion.StoreAndForward if lazy else Eager)(clock, net)
    log = []

    def send(k, src, dst, size, forward):
        def landed():
            log.append((clock.now, k))
            if forward:
                links(dst, (dst + 1) % 5, size, lambda: log.append((clock.now, -k - 1)))
        links(src, dst, size, landed)

    for k, (t, src, dst, size, forward) in enumerate(sends):
        clock.at(t, lambda a=(k, src, dst, size, forward): send(*a))
    clock.run()
    return log


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(["Switch", "Ring", "FullyConnected"]),
       sends=st.lists(st.tuples(st.sampled_from([0, 55, 58, 110, 113, 116, 165, 3000]), st.integers(0, 4),
                                st.integers(1, 4), st.sampled_from([3000, 3000, 3000, 1, 65536]), st.booleans()),
                      min_size=1, max_size=40))
def test_lazy_link_free_events_keep_every_arrival_and_its_order(kind, sends):
    """A link pushes its free event only once a message waits (``_HeapLink``): every arrival's time and
    the order of same-instant ones are those of the link that always pushes it.  Issue times are
    multiples of a 3,000-byte message's serialization (55 ns) and hop (58 ns), so messages reach
    links in the very nanosecond the link frees, before or after its free event."""
    sends = [(t, s, (s + d) % 5, size, fw) for t, s, d, size, fw in sends]
    assert _links_log(True, kind, sends) == _links_log(False, kind, sends)



def test_cost_benchmark_counts_switch_arrivals_and_their_order_matters(tmp_path):
    """benchmarks/bench_astra_costs.py --ties: its child sees every message reach the switch once (its
    count is the run's messages) and counts tied groups consistently; on the general case at 16 NPUs,
    taking the arrivals at the switch in reverse order and before the other events of their nanosecond
    changes finish times (an engine computing link queues from times alone must reproduce that order)."""
    import json
    import subprocess

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        costs = importlib.import_module("bench_astra_costs")
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    bench = _bench()
    out = {}
    for npus in (4, 16):
        files = list(bench.make_inputs(tmp_path / str(npus), "general", npus).values())
        r = subprocess.run([sys.executable, "-c", costs.TIES, *files], capture_output=True, text=True,
                           env=costs._env(), check=True)
        got = out[npus] = json.loads(r.stdout.strip().splitlines()[-1])
        assert got["arrivals"] == run_astra(*files, model="congestion-aware", engine="full").stats["messages"]
        assert got["tied_messages"] >= 2 * got["tied_groups"] > 0
    assert out[16]["ranks_changed"] > 0 and out[16]["max_change_ns"] > 0
