"""The SimPy ordering netsim.network.base.call_late relies on (its one private use of SimPy, pinned
to SimPy 4): a late call runs at the current instant after every ordinary event of that instant,
those scheduled while the instant runs included, before anything later, and late calls of one
instant run in the order they were asked for.  The collectives' executor and the flow model batch
same-instant requests on it."""

from __future__ import annotations

import re
from pathlib import Path

import simpy

from netsim.network.base import LATE, call_late

ROOT = Path(__file__).resolve().parents[1]


def test_late_calls_follow_every_ordinary_event_of_their_instant():
    env = simpy.Environment()
    log = []

    def proc(name, delay):
        yield env.timeout(delay)
        log.append((env.now, name))
        if name == "a":  # asks for a late call, then makes more ordinary work at the same instant
            call_late(env, lambda: log.append((env.now, "late1")))
            ev = env.event()
            ev.callbacks.append(lambda _e: log.append((env.now, "a.event")))
            ev.succeed()
            env.process(proc("a.child", 0))
            call_late(env, lambda: log.append((env.now, "late2")))

    env.process(proc("a", 1.0))
    env.process(proc("b", 1.0))
    env.process(proc("c", 1.5))
    env.run()
    assert log == [(1.0, "a"), (1.0, "b"), (1.0, "a.event"), (1.0, "a.child"), (1.0, "late1"), (1.0, "late2"),
                   (1.5, "c")]


def test_ordinary_events_made_by_a_late_call_run_before_the_next_late_call():
    """A late call may make ordinary events at its instant (transfers that end now, new requests):
    they run, then the late calls asked for meanwhile, still at the same instant."""
    env = simpy.Environment()
    log = []

    def late():
        log.append("late")
        call_late(env, lambda: log.append(f"late again at {env.now}"))
        env.timeout(0).callbacks.append(lambda _e: log.append("ordinary"))

    env.timeout(2.0).callbacks.append(lambda _e: call_late(env, late))
    env.timeout(2.0).callbacks.append(lambda _e: env.timeout(0).callbacks.append(lambda _e: log.append("same instant")))
    env.timeout(3.0).callbacks.append(lambda _e: log.append("later"))
    env.run()
    assert log == ["same instant", "late", "ordinary", "late again at 2.0", "later"]


def test_late_priority_sorts_after_simpys_public_priorities_and_simpy_is_pinned():
    assert simpy.events.URGENT < simpy.events.NORMAL < LATE
    assert int(simpy.__version__.split(".")[0]) == 4
    pin = re.search(r'"simpy([^"]*)"', (ROOT / "pyproject.toml").read_text()).group(1)
    assert "<5" in pin.replace(" ", "")
