"""A sweep's driver takes its workers with it when it stops.

* :func:`terminate_on_sigterm`: while a sweep runs, SIGTERM raises :class:`Terminated` (a
  KeyboardInterrupt) in the driver, as Ctrl-C does, so the executor's ``close(abort=True)``
  runs: local worker processes are terminated (:func:`terminate_pool`), a Dask LocalCluster is
  closed with its workers.
* :func:`die_with_parent`: every local worker process asks Linux to kill it when the driver
  dies (``PR_SET_PDEATHSIG``), which covers even SIGKILL, and ignores SIGINT (a Ctrl-C reaches
  the whole process group; the driver decides).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading

from netsim.procpool import TrackedPool

#: Seconds a terminated worker gets before it is killed.
GRACE_S = 2.0


class Terminated(KeyboardInterrupt):
    """SIGTERM received by a sweep's driver."""


@contextlib.contextmanager
def terminate_on_sigterm():
    """While active (main thread only, and only if SIGTERM has its default action), SIGTERM
    raises :class:`Terminated`; the previous handler is restored afterwards."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def raise_terminated(signum, frame):
        raise Terminated(f"signal {signum}")

    signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def die_with_parent() -> None:
    """Process-pool initializer: die with the driver (Linux), leave SIGINT to the driver, and take
    SIGTERM's default action back (a forked worker inherits the driver's handler)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):  # no prctl: the driver's close() still terminates us
        return
    if os.getppid() == 1:  # the driver died before prctl took effect
        os._exit(1)


def terminate_pool(pool: TrackedPool) -> None:
    """Stop a sweep's process pool now: cancel queued tasks, terminate (then kill) its processes."""
    pool.stop(GRACE_S)
