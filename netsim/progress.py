"""Progress bars for long commands: tqdm on stderr, only on a terminal, never in the hot loop.

``netsim run``, ``bench`` and ``astra`` show a bar once a command has run for
:data:`DELAY_S` seconds, when stderr is a terminal and ``--quiet`` is not given
(:func:`wanted`).  Simulations are not slowed: :class:`Poller` reads a counter the
simulation keeps anyway (ops executed, nodes done) from a background thread every
:data:`INTERVAL_S` seconds, so nothing is added to the event loop.

>>> with Poller(10, lambda: 10, "demo", enabled=False) as p:  # disabled: no thread, no output
...     p.enabled
False
"""

from __future__ import annotations

import sys
import threading
from typing import Callable

#: Seconds before a bar appears: quick commands print nothing.
DELAY_S = 2.0
#: Seconds between two reads of a polled counter.
INTERVAL_S = 0.5


def wanted(quiet: bool = False, stream=None) -> bool:
    """Whether to show progress: not ``quiet`` and ``stream`` (default stderr) is a terminal."""
    stream = sys.stderr if stream is None else stream
    if quiet:
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def bar(total: float | None, desc: str, unit: str, enabled: bool, **kw):
    """A tqdm bar on stderr, shown after :data:`DELAY_S` seconds (a no-op when not ``enabled``)."""
    from tqdm import tqdm

    kw.setdefault("delay", DELAY_S)
    return tqdm(total=total, desc=desc, unit=unit, disable=not enabled, file=sys.stderr, dynamic_ncols=True,
                leave=False, **kw)


class Poller:
    """A bar whose count is read by a daemon thread: ``count()`` every :data:`INTERVAL_S` seconds.

    ``count`` and ``postfix`` (optional, a short text such as the simulated time) are called from
    the thread, so they must only read state (a ``len()``, an attribute).
    """

    def __init__(self, total: float | None, count: Callable[[], float], desc: str, unit: str = "op",
                 enabled: bool = True, postfix: Callable[[], str] | None = None, interval: float | None = None):
        self.total, self.count, self.desc, self.unit = total, count, desc, unit
        self.enabled, self.postfix = enabled, postfix
        self.interval = INTERVAL_S if interval is None else interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._bar = None

    def __enter__(self) -> "Poller":
        if self.enabled:
            self._bar = bar(self.total, self.desc, self.unit, True)
            self._thread = threading.Thread(target=self._loop, name="netsim-progress", daemon=True)
            self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.poll()

    def poll(self) -> None:
        """Read the counter once and redraw (also called by the thread)."""
        if self._bar is None:
            return
        try:
            n = self.count()
            text = self.postfix() if self.postfix is not None else None
        except Exception:  # noqa: BLE001 - state changing under our feet: skip this tick
            return
        if text:
            self._bar.set_postfix_str(text, refresh=False)
        self._bar.update(n - self._bar.n)  # tqdm throttles, waits DELAY_S, and estimates the rate

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            if exc[0] is None:
                self.poll()  # the final count (drawn only if the bar is showing)
        if self._bar is not None:
            self._bar.close()
