"""Progress of long commands on stderr (never stdout, which carries results): a tqdm bar with an ETA
on a terminal, one status line every 30 s elsewhere (logs, CI, notebooks); never in the hot loop.

``netsim run``, ``bench``, ``sweep`` and ``astra`` report progress unless ``--quiet``
(:func:`wanted`).  Where stderr is a terminal (:func:`on_terminal`) they draw a tqdm bar once the
command has run :data:`DELAY_S` seconds.  Elsewhere they write the bar's text without the bar, one
line at a time: the first after :data:`STATUS_AFTER_S` seconds, then one every
:data:`STATUS_EVERY_S` seconds, so a short run prints nothing and a log gets a line per 30 s, e.g.::

    bench:  42% [01:03<01:27, size 1GiB (1 of 1), 3,051.2 us simulated]

The ETA is tqdm's: the work left over the rate so far.  Simulations are not slowed: :class:`Poller`
reads a counter the simulation keeps anyway (ops executed, nodes done) from a background thread
every :data:`INTERVAL_S` seconds, so nothing is added to the event loop.

>>> with Poller(10, lambda: 10, "demo", enabled=False) as p:  # disabled: no thread, no output
...     p.enabled
False
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Callable

#: Seconds before a bar appears on a terminal: quick commands print nothing.
DELAY_S = 2.0
#: Seconds between two reads of a polled counter.
INTERVAL_S = 0.5
#: Not on a terminal: seconds before the first status line (shorter runs print none) ...
STATUS_AFTER_S = 10.0
#: ... and between two status lines.
STATUS_EVERY_S = 30.0


def wanted(quiet: bool = False, stream=None) -> bool:
    """Whether to report progress: unless ``quiet``.  ``stream`` (default stderr) decides how
    (:func:`on_terminal`: a bar, else status lines); it is kept for callers that pass it."""
    return not quiet


def on_terminal(stream=None) -> bool:
    """Whether ``stream`` (default stderr) is a terminal: a bar there, status lines elsewhere."""
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def _tqdm_class():
    from tqdm import tqdm

    class StatusLines(tqdm):
        """tqdm for logs: each display is one whole line (no carriage return, no bar), the first
        after :data:`STATUS_AFTER_S` seconds, then at most one per :data:`STATUS_EVERY_S`."""

        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            if not self.disable:  # tqdm prints once mininterval has passed since the last print (at first: the start)
                self.last_print_t = self.start_t - max(self.mininterval - STATUS_AFTER_S, 0.0)

        def display(self, msg=None, pos=None):
            if msg == "":  # tqdm clearing its line on close: a log has nothing to clear
                return False
            self.fp.write(f"{self.__str__() if msg is None else msg}\n")
            self.fp.flush()
            return True

    return tqdm, StatusLines


def bar(total: float | None, desc: str, unit: str, enabled: bool, **kw):
    """A tqdm bar on stderr after :data:`DELAY_S` seconds on a terminal, else status lines
    (see the module docstring); a no-op when not ``enabled``.  ``kw`` goes to tqdm."""
    tqdm, lines = _tqdm_class()
    if on_terminal():
        kw.setdefault("delay", DELAY_S)
        return tqdm(total=total, desc=desc, unit=unit, disable=not enabled, file=sys.stderr, dynamic_ncols=True,
                    leave=False, **kw)
    kw.setdefault("delay", STATUS_AFTER_S)
    kw.setdefault("mininterval", STATUS_EVERY_S)
    kw["smoothing"] = 0  # the rate over the whole run: a steadier ETA between lines far apart
    kw.setdefault("miniters", 1)
    fmt = kw.pop("bar_format", None) or ("{desc}: {percentage:3.0f}% ({n_fmt}/{total_fmt} {unit}) "
                                         "[{elapsed}<{remaining}, {rate_fmt}]{postfix}" if total else None)
    fmt = fmt.replace("|{bar}| ", " ").replace("{bar}", "") if fmt else None
    return lines(total=total, desc=desc, unit=unit, disable=not enabled, file=sys.stderr, leave=False,
                 bar_format=fmt, **kw)


class Poller:
    """A bar whose count is read by a daemon thread: ``count()`` every :data:`INTERVAL_S` seconds.

    ``count`` and ``postfix`` (optional, a short text such as the simulated time) are called from
    the thread, so they must only read state (a ``len()``, an attribute).  ``kw`` goes to
    :func:`bar` (e.g. a ``bar_format``).  Not on a terminal, a status line is written every
    :data:`STATUS_EVERY_S` seconds even when the count does not move (a long step).
    """

    def __init__(self, total: float | None, count: Callable[[], float], desc: str, unit: str = "op",
                 enabled: bool = True, postfix: Callable[[], str] | None = None, interval: float | None = None,
                 **kw):
        self.total, self.count, self.desc, self.unit = total, count, desc, unit
        self.enabled, self.postfix, self.kw = enabled, postfix, kw
        self.interval = INTERVAL_S if interval is None else interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._bar = None
        self._lines = False

    def __enter__(self) -> "Poller":
        if self.enabled:
            self._lines = not on_terminal()
            self._bar = bar(self.total, self.desc, self.unit, True, **self.kw)
            self._thread = threading.Thread(target=self._loop, name="netsim-progress", daemon=True)
            self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.poll()

    def poll(self) -> None:
        """Read the counter once and redraw (also called by the thread)."""
        b = self._bar
        if b is None:
            return
        try:
            n = self.count()
            text = self.postfix() if self.postfix is not None else None
        except Exception:  # noqa: BLE001 - state changing under our feet: skip this tick
            return
        if text:
            b.set_postfix_str(text, refresh=False)
        if not b.update(n - b.n) and self._lines:  # tqdm throttles, waits, and estimates the rate
            now = time.time()
            if now - b.start_t >= STATUS_AFTER_S and now - b.last_print_t >= STATUS_EVERY_S:
                b.refresh()  # the count did not move: still say where the work is
                b.last_print_t, b.last_print_n = now, b.n

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            if exc[0] is None and not self._lines:
                self.poll()  # the final count (drawn only if the bar is showing)
        if self._bar is not None:
            self._bar.close()
