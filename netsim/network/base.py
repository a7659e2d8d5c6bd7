"""The network seam: move bytes between ranks and say when the last byte lands.

A :class:`Network` belongs to one SimPy environment (one simulation).  Two
ways in:

* :meth:`Network.transfer` — one transfer, returns a SimPy event whose value
  is a :class:`TransferRecord` (start, end, bytes, path);
* :meth:`Network.submit` — a batch of transfers with one callback
  ``on_done(indices, time)`` called once per distinct completion instant.
  Collectives use this so that symmetric steps cost a handful of Python
  events, not one per rank.

Implementations: :class:`~netsim.network.analytical.AnalyticalNetwork`
(each collective step timed as if it ran alone, its transfers sharing their links; ASTRA-sim
congestion-unaware semantics on ASTRA topologies) and
:class:`~netsim.network.flow.FlowNetwork` (max-min fair sharing of every link, event by event).

The contract the collectives rely on, beside :meth:`Network.submit`:
:meth:`Network.alone` (a batch that starts together and runs alone, timed without events, or
``None``), :meth:`Network.step_rates` (the rate bound a model puts on one step's transfers),
:attr:`Network.live_sharing`, and the counting hooks :meth:`Network.count_alone`,
:meth:`Network.tally` / :meth:`Network.add_tally`.

Per-link counters (arrays over link ids, see :meth:`Network.link_stats`):
``link_bytes`` (wire bytes of every submitted transfer, added along its route),
``link_busy_s`` and ``link_peak_flows``, whose meaning depends on the model
(documented on each model).  They count what is simulated: collectives run by the
vectorized fast path (:func:`~netsim.collectives.fastpath.run_fixed`) bypass ``submit``,
and steps skipped by fast-forward add their bytes (:meth:`Network.count_bytes`) but not their
busy time or peaks (the workload runner uses neither).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import simpy

from netsim.topology.model import Topology

DoneCallback = Callable[[np.ndarray, float], None]

#: Priority of work that must run after every ordinary event of the same instant (SimPy's public
#: priorities: ``simpy.events.URGENT`` = 0, ``NORMAL`` = 1; ``Environment.schedule`` takes any), so
#: that same-instant requests are handled as one batch.
LATE = simpy.events.NORMAL + 1


class _Late(simpy.Event):
    """An event that fires at the current time after every ordinary event of this instant; built
    the way SimPy's own :class:`simpy.Timeout` is (triggered on creation, scheduled directly).

    SimPy has no public way to trigger an event at a priority of one's choosing (``succeed()``
    schedules at ``NORMAL``), so this sets the event's ``_ok`` and ``_value`` as ``Timeout`` does:
    the one private use of SimPy, pinned to SimPy 4 in ``pyproject.toml`` and tested, with the
    ordering the collectives and the flow model rely on, in ``tests/test_simpy_ordering.py``."""

    def __init__(self, env: simpy.Environment, fn: Callable[[], None]):
        super().__init__(env)
        self._ok, self._value = True, None
        self.callbacks.append(lambda _e: fn())
        env.schedule(self, priority=LATE)


class _Call:
    """A timer of :meth:`Network.call_at` on SimPy's queue: what ``Environment.step`` reads of an event
    (its ``callbacks``, ``_ok``, ``_value``) and nothing more (a ``Timeout`` costs a third more to make)."""

    __slots__ = ("callbacks", "_ok", "_value")

    def __init__(self, callback):
        self.callbacks, self._ok, self._value = [callback], True, None


def call_late(env: simpy.Environment, fn: Callable[[], None]) -> None:
    """Call ``fn`` at the current time, after all ordinary events of this instant."""
    _Late(env, fn)


def _by_time(indices: np.ndarray, times: np.ndarray) -> list[tuple[float, np.ndarray]]:
    """``indices`` grouped by their ``times``: ``(time, indices)`` in increasing time, each group
    in the given order.  A few are grouped in Python (cheaper than sorting in numpy).

    >>> [(t, g.tolist()) for t, g in _by_time(np.array([4, 5, 6]), np.array([2.0, 1.0, 2.0]))]
    [(1.0, [5]), (2.0, [4, 6])]
    """
    if indices.size == 1:
        return [(float(times[0]), indices)]
    if indices.size <= 16:
        groups: dict[float, list] = {}
        for i, t in zip(indices.tolist(), times.tolist()):
            groups.setdefault(t, []).append(i)
        return [(t, np.asarray(groups[t], dtype=indices.dtype)) for t in sorted(groups)]
    order = np.argsort(times, kind="stable")  # by time, each time's indices in their given order
    ts = times[order]
    bounds = np.flatnonzero(ts[1:] != ts[:-1]) + 1
    return [(float(ts[a]), indices[order[a:b]]) for a, b in zip([0, *bounds.tolist()], [*bounds.tolist(), ts.size])]


@dataclass(frozen=True)
class TransferRecord:
    """What :meth:`Network.transfer` reports: times in seconds, the path as link ids."""

    src: int
    dst: int
    nbytes: float
    start: float
    end: float
    path: tuple[int, ...]


class Tally:
    """Link counters of batches evaluated by :meth:`Network.alone`, summed per link as they come
    (``append((routes, bytes, busy, transfers))``, by the network's own rules), so that a
    collective run many times is counted by :meth:`Network.add_tally` with a few array
    operations, and no batch's routes are kept."""

    def __init__(self, net: "Network"):
        n = net.topo.n_links
        self._net = net
        self._into = (np.zeros(n), np.zeros(n), np.zeros(n, dtype=np.int32))
        self.transfers = 0

    def append(self, item: tuple) -> None:
        """``(routes, bytes, busy, transfers[, weight])`` (weight: see :meth:`Network.alone`)."""
        routes, nbytes, busy, transfers, *weight = item
        self.transfers += transfers
        if routes is not None:
            if weight and weight[0] is not None:
                self._net._count(routes, nbytes, busy, self._into, weight[0])
            else:
                self._net._count(routes, nbytes, busy, self._into)

    def summary(self) -> tuple:
        """``(links, bytes, busy_s, peak_flows, transfers)`` over the links used."""
        nbytes, busy, peak = self._into
        used = np.flatnonzero((nbytes > 0) | (busy > 0) | (peak > 0))
        return used, nbytes[used], busy[used], peak[used], self.transfers


class Network:
    """Base class: routing, delivery scheduling and counters shared by both models."""

    model = "base"

    def __init__(self, env: simpy.Environment, topo: Topology):
        self.env, self.topo = env, topo
        self.stats = {"transfers": 0, "deliveries": 0, "rate_solves": 0, "cache_hits": 0, "shifted_s": 0.0}
        self.exclusive = None  # the collective that owns the network alone (enables fast-forward)
        self._epoch_shift = [0.0]  # cumulative shift at the start of each epoch
        n = topo.n_links
        self.link_bytes = np.zeros(n)
        self.link_busy_s = np.zeros(n)
        self.link_peak_flows = np.zeros(n, dtype=np.int32)

    # ------------------------------------------------------------- the seam
    def submit(self, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray, on_done: DoneCallback,
               key: np.ndarray | None = None, routes: tuple[np.ndarray, np.ndarray] | None = None,
               cap: np.ndarray | float | None = None) -> None:
        """Start transfers now; ``on_done(indices, t)`` fires as (groups of) them complete.

        ``cap`` bounds each transfer's rate (B/s): what one sender can push whatever the
        links offer (e.g. one NCCL channel = one thread block).

        ``routes`` (CSR ``(indptr, links)``, one path per transfer) skips routing when the
        caller already has the paths (collectives route each step pattern once).
        """
        raise NotImplementedError

    #: Whether a transfer's rate depends on what else runs at the same time (flow model): a
    #: collective is then evaluated off the event queue only while it runs alone on its links.
    live_sharing = False

    def alone(self, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray, key: np.ndarray | None = None,
              routes: tuple[np.ndarray, np.ndarray] | None = None, cap: np.ndarray | None = None,
              parts: int = 1, weight: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray] | None:
        """Timing of transfers that all start now and run alone on the network (one collective
        step): ``(seconds until each one's last byte lands, seconds each one occupies its links)``,
        or ``None`` where the model cannot tell without simulating them.  ``cap``: each one's own
        rate bound (B/s) or None; ``parts``: the transfers are that many equal consecutive blocks
        (copies of one collective) that the model may treat as not sharing (see
        :meth:`step_rates`).  ``weight``: each transfer stands for that many identical ones (only
        models without live sharing take it).  Counters are not touched (:meth:`count_alone` does
        that)."""
        return None

    def step_rates(self, routes: tuple[np.ndarray, np.ndarray], nbytes: np.ndarray,
                   cap: np.ndarray | None = None, parts: int = 1) -> np.ndarray | None:
        """Per-transfer rate (B/s) that the model gives the transfers of one collective step
        because they share links, or ``None`` when the model shares links itself as transfers
        run (flow) or not at all.  ``routes``: their CSR paths; ``nbytes``: wire bytes;
        ``cap``: each one's own rate bound, or None; ``parts``: the transfers are that many
        equal consecutive blocks (copies of one collective) that do not share.  Collectives
        pass the result as ``cap`` to :meth:`submit`."""
        return None

    def transfer(self, src: int, dst: int, nbytes: float, key: int = 0) -> simpy.Event:
        """One transfer; the event succeeds with a :class:`TransferRecord` when the last byte lands."""
        event = self.env.event()
        start = self.env.now
        path = tuple(int(x) for x in self.topo.route(src, dst, key))

        def done(_idx: np.ndarray, t: float) -> None:
            event.succeed(TransferRecord(src, dst, float(nbytes), start, t, path))

        self.submit(np.array([src]), np.array([dst]), np.array([float(nbytes)]), done, np.array([key]))
        return event

    # ---------------------------------------------------------- the clock
    def call_at(self, t: float, fn: Callable[[], None]) -> None:
        """Call ``fn`` at absolute time ``t``, moved later by any :meth:`shift` made meanwhile."""
        epoch = len(self._epoch_shift) - 1
        # queued as SimPy queues a Timeout of that delay (same time, priority and sequence number)
        self.env.schedule(_Call(lambda _e: self._fire(t, epoch, fn)), simpy.events.NORMAL, max(t - self.env.now, 0.0))

    def _fire(self, t: float, epoch: int, fn: Callable[[], None]) -> None:
        moved = self._epoch_shift[-1] - self._epoch_shift[epoch]
        if moved:
            self.call_at(t + moved, fn)
        else:
            fn()

    def can_shift(self, owner: object) -> bool:
        """Whether ``owner`` runs alone, so that its future may be shifted in time."""
        return self.exclusive is owner

    def shift(self, dt: float) -> None:
        """Delay everything pending (deliveries, timers) by ``dt`` seconds (fast-forward)."""
        self._epoch_shift.append(self._epoch_shift[-1] + dt)
        self.stats["shifted_s"] += dt

    # ------------------------------------------------------------- helpers
    def _account(self, indptr: np.ndarray, links: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
        """Add each transfer's bytes to the links of its path; returns the path lengths."""
        lengths = indptr[1:] - indptr[:-1]
        if links.size:
            if lengths.size == 1:  # one path never repeats a link
                self.link_bytes[links] += nbytes[0]
            else:
                np.add.at(self.link_bytes, links, np.repeat(nbytes, lengths))
        return lengths

    def _count(self, routes, nbytes: np.ndarray, busy: np.ndarray, into: tuple | None = None) -> None:
        """Add one batch of transfers evaluated by :meth:`alone` to the link counters ``into``
        (``(bytes, busy_s, peak_flows)`` arrays; default: this network's own), by the model's rules."""
        raise NotImplementedError

    def count_alone(self, counts: list) -> None:
        """Count batches evaluated by :meth:`alone`: ``counts`` holds ``(routes, bytes, busy,
        transfers[, weight])`` items (``routes`` None: nothing to put on links)."""
        for routes, nbytes, busy, transfers, *weight in counts:
            self.stats["transfers"] += transfers
            if routes is None:
                continue
            if weight and weight[0] is not None:  # weighted transfers: models without live sharing
                self._count(routes, nbytes, busy, None, weight[0])
            else:
                self._count(routes, nbytes, busy)

    def tally(self) -> "Tally":
        """An empty :class:`Tally` of this network's counting rules."""
        return Tally(self)

    def add_tally(self, t: tuple) -> None:
        """Count one run of a collective summarized by :meth:`Tally.summary`."""
        used, nbytes, busy, peak, transfers = t
        self.stats["transfers"] += transfers
        self.link_bytes[used] += nbytes
        self.link_busy_s[used] += busy
        self.link_peak_flows[used] = np.maximum(self.link_peak_flows[used], peak)

    def count_bytes(self, routes: tuple[np.ndarray, np.ndarray], nbytes: np.ndarray) -> None:
        """Add traffic that was not submitted (steps skipped by fast-forward) to ``link_bytes``."""
        self._account(routes[0], routes[1], np.asarray(nbytes, dtype=np.float64))

    def link_stats(self) -> dict[str, np.ndarray]:
        """Per-link counters: ``bytes``, ``busy_s``, ``peak_flows`` (arrays over physical link ids:
        under ``spray`` routing, a class representative's counters are spread over its members,
        :meth:`~netsim.topology.model.Topology.spread`)."""
        return self._spread(self.link_bytes, self.link_busy_s, self.link_peak_flows)

    def _spread(self, nbytes: np.ndarray, busy: np.ndarray, peak: np.ndarray) -> dict[str, np.ndarray]:
        t = self.topo
        return {"bytes": t.spread(nbytes), "busy_s": t.spread(busy, additive=False),
                "peak_flows": t.spread(peak, additive=False)}

    def _deliver(self, indices: np.ndarray, times: np.ndarray, on_done: DoneCallback) -> None:
        """Call ``on_done`` once per distinct time in ``times`` (absolute seconds)."""
        for t, group in _by_time(indices, times):
            self.call_at(t, lambda g=group, tt=t: on_done(g, tt + self._since(tt)))
            self.stats["deliveries"] += 1

    def _since(self, t: float) -> float:
        """How far a callback planned for ``t`` was moved by shifts (it fires at now)."""
        return self.env.now - t

    def summary(self) -> dict:
        """Counters for benchmarks and run metadata."""
        return {"model": self.model, **self.stats}
