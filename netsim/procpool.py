"""A process pool that knows its worker processes, so a command can stop them at once.

A leaf module (standard library only).  :class:`concurrent.futures.ProcessPoolExecutor` keeps its
workers in a private attribute and offers no public way to reach them before Python 3.14
(``terminate_workers``).  :class:`TrackedPool` starts them through a multiprocessing context of its
own (the documented ``mp_context`` argument: "a multiprocessing context to launch the workers"),
which records every process it creates; :meth:`TrackedPool.stop` cancels what is queued and
terminates, then kills, those processes.  The sweep runner, the LLM trace writer and the trace
scanner stop their pools this way (Ctrl-C, SIGTERM, a failed task).

>>> with TrackedPool(1) as pool:
...     pool.submit(abs, -3).result(), len(pool.processes)
(3, 1)
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import multiprocessing as mp
import threading

__all__ = ["TrackedPool"]


class _RecordingContext:
    """A multiprocessing context that keeps every :class:`multiprocessing.Process` it creates;
    everything else is the wrapped context's."""

    def __init__(self, ctx):
        self._ctx = ctx
        self._lock = threading.Lock()
        self.processes: list = []

    def Process(self, *args, **kwargs):  # noqa: N802 (the context API's name)
        proc = self._ctx.Process(*args, **kwargs)
        with self._lock:
            self.processes.append(proc)
        return proc

    def __getattr__(self, name):
        return getattr(self._ctx, name)


class TrackedPool(cf.ProcessPoolExecutor):
    """A :class:`~concurrent.futures.ProcessPoolExecutor` whose worker processes are
    :attr:`processes` (see the module docstring)."""

    def __init__(self, max_workers: int | None = None, mp_context=None, initializer=None, initargs=()):
        self._recorder = _RecordingContext(mp_context or mp.get_context())
        super().__init__(max_workers, mp_context=self._recorder, initializer=initializer, initargs=initargs)

    @property
    def processes(self) -> list:
        """Every worker process the pool has started (dead ones included)."""
        with self._recorder._lock:
            return list(self._recorder.processes)

    def stop(self, grace_s: float = 2.0) -> None:
        """Stop now: cancel queued tasks, terminate the workers, and kill any still alive after
        ``grace_s`` seconds."""
        procs = self.processes
        self.shutdown(wait=False, cancel_futures=True)
        for p in procs:
            with contextlib.suppress(Exception):
                p.terminate()
        for p in procs:
            with contextlib.suppress(Exception):
                p.join(grace_s)
                if p.is_alive():
                    p.kill()
                    p.join(grace_s)
