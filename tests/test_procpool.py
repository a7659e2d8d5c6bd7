"""netsim.procpool.TrackedPool: a process pool that knows its workers (no private attribute of
concurrent.futures read) and stops them at once."""

from __future__ import annotations

import multiprocessing as mp
import time

import pytest

from netsim.procpool import TrackedPool


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_stop_terminates_busy_workers_and_cancels_queued_tasks(method):
    pool = TrackedPool(2, mp_context=mp.get_context(method))
    futures = [pool.submit(time.sleep, 60) for _ in range(20)]
    t0 = time.monotonic()
    while not (futures[0].running() and futures[1].running()) and time.monotonic() - t0 < 60:
        time.sleep(0.05)
    procs = pool.processes
    assert len(procs) == 2 and all(p.is_alive() for p in procs)
    t0 = time.monotonic()
    pool.stop(grace_s=5.0)
    # the executor's own thread cancels the queued tasks and may be reaping a worker at this moment
    # (is_alive() stays True until it has)
    while (any(p.is_alive() for p in procs) or not all(f.done() for f in futures)) and time.monotonic() - t0 < 10:
        time.sleep(0.05)
    assert time.monotonic() - t0 < 10  # not the 60 s the tasks would take
    assert not any(p.is_alive() for p in procs)
    assert futures[-1].cancelled() and all(f.cancelled() or f.exception() is not None for f in futures)


def test_processes_are_the_pools_own():
    with TrackedPool(1) as a, TrackedPool(1) as b:
        assert a.submit(int, "7").result() == 7 and b.submit(int, "8").result() == 8
        pa, pb = a.processes, b.processes
        assert len(pa) == len(pb) == 1 and pa[0].pid != pb[0].pid
