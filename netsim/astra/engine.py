"""Event core of netsim's ASTRA-sim system layer: clocks, per-rank event lists, message matching.

Time is integer nanoseconds (ASTRA-sim's cycles) on :class:`HeapClock`; events at one
instant run in the order they were scheduled, like ASTRA-sim's event queue.  A rank's
own delayed work (``Sys::register_event``) is grouped per instant by :class:`Ticker`,
so it runs where ASTRA-sim runs it: at the position of the rank's first event for
that instant.  :class:`Fabric` matches sends and receives exactly like ASTRA-sim's
analytical frontend (``CallbackTracker``): by (tag, src, dst, size) and a per-key
sequence number; a send's and its receive's callbacks fire when the message lands,
or a late receive completes at once.  The network is a ``transmit(src, dst, size,
on_arrival)`` callable: :class:`AnalyticalLinks` (congestion-unaware), the
store-and-forward model in :mod:`netsim.astra.congestion`, or netsim's max-min
:class:`~netsim.network.flow.FlowNetwork` through :class:`FlowLinks`.

>>> net = AstraNetwork("x", (NetDim("Ring", 8, 50.0, 500.0),))
>>> net.delay_ns(0, 1, 32768)
1110
"""

from __future__ import annotations

import gc
import heapq
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from netsim import inputs, units
from netsim import astra_arith as arith
from netsim.errors import InputError


# ------------------------------------------------------------------ clocks
class HeapClock:
    """Integer-ns event queue: ``at(t, fn)``; same-time events run in scheduling order."""

    exact = True

    def __init__(self) -> None:
        self.now = 0
        self.seq = 0  # the running event's sequence number (its place among same-time events)
        self._q: list = []
        self._seq = itertools.count(1)
        self.events = 0
        self.at_zero = 0

    def at(self, t, fn: Callable[[], None]) -> None:
        """Run ``fn`` at absolute time ``t`` (ns, not earlier than now)."""
        heapq.heappush(self._q, (t, next(self._seq), fn))

    def run(self) -> None:
        """Process events until none are left; ``at_zero`` counts those at t = 0 (ASTRA-sim's
        event queue asserts that every event list is later than its start time, 0).

        The cyclic garbage collector is paused meanwhile (as :mod:`netsim.chakra.files` does while
        it builds tables): it would rescan every pending event and live stream each time, and what
        the engine drops per message is acyclic (matched messages leave :class:`Fabric`, a finished
        stream lets go of its phase), so reference counting frees it."""
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            self._run()
        finally:
            if was_enabled:
                gc.enable()

    def _run(self) -> None:
        q, pop = self._q, heapq.heappop
        while q and q[0][0] == 0:
            _, self.seq, fn = pop(q)
            self.events += 1
            self.at_zero += 1
            fn()
        events = self.events
        try:
            while q:
                t, self.seq, fn = pop(q)
                self.now = t
                events += 1
                fn()
        finally:
            self.events = events


class SimPyClock:
    """The same interface on a SimPy environment whose unit is the second (for netsim networks)."""

    exact = False

    def __init__(self, env) -> None:
        self.env = env
        self.events = 0

    @property
    def now(self) -> float:
        return self.env.now * 1e9

    def at(self, t, fn: Callable[[], None]) -> None:
        ev = self.env.timeout(max(t * 1e-9 - self.env.now, 0.0))
        ev.callbacks.append(lambda _e: self._fire(fn))

    def _fire(self, fn) -> None:
        self.events += 1
        fn()

    def run(self) -> None:
        self.env.run()


class Ticker:
    """One rank's ``Sys::register_event``: work for one instant runs as one batch, at the
    position of the rank's first registration for that instant (delay-0 work joins it)."""

    __slots__ = ("clock", "_lists")

    def __init__(self, clock) -> None:
        self.clock = clock
        self._lists: dict = {}

    def register(self, delay, fn: Callable[[], None]) -> None:
        t = self.clock.now + delay
        lst = self._lists.get(t)
        if lst is None:
            lst = self._lists[t] = [fn]
            self.clock.at(t, lambda: self._run(t))
        else:
            lst.append(fn)

    def _run(self, t) -> None:
        lst = self._lists[t]
        i = 0
        while i < len(lst):  # work registered meanwhile for this instant joins the end
            lst[i]()
            i += 1
        del self._lists[t]


# ----------------------------------------------------------------- network
@dataclass(frozen=True)
class NetDim:
    """One ASTRA-sim network dimension exactly as written in the YAML (GiB/s, ns)."""

    kind: str
    npus: int
    bw: float
    latency: float


@dataclass(frozen=True)
class AstraNetwork:
    """An ASTRA-sim network YAML (``dims``), or any netsim topology (``topo``, flow model only)."""

    source: str
    dims: tuple[NetDim, ...]
    topo: object = None

    @property
    def npus_per_dim(self) -> tuple[int, ...]:
        return tuple(d.npus for d in self.dims) if self.dims else (int(self.topo.n_gpus),)

    @property
    def npus(self) -> int:
        return int(np.prod(self.npus_per_dim))

    def coords(self, rank: int) -> list[int]:
        out = []
        for k in self.npus_per_dim:
            out.append(rank % k)
            rank //= k
        return out

    def delay_ns(self, src: int, dst: int, size: int) -> int:
        """ASTRA-sim congestion-unaware delay: the first differing dimension only,
        ``trunc(hops * latency + size / (bw * 2**30 / 1e9))``."""
        for d in self.dims:
            a, b = src % d.npus, dst % d.npus
            if a != b:
                if d.kind == "Ring":
                    cw = (b - a) % d.npus
                    hops = min(cw, d.npus - cw)
                else:
                    hops = 1 if d.kind == "FullyConnected" else 2
                return arith.message_ns(size, hops, d.latency, d.bw)
            src //= d.npus
            dst //= d.npus
        raise InputError(f"a message from NPU {src} to itself (ASTRA-sim: 'src and dest have the same address')")

    def topology(self):
        """The netsim :class:`~netsim.topology.model.Topology` (built on first use)."""
        if self.topo is None:
            from netsim.topology.multidim import Dim, multi_dim

            topo = multi_dim([Dim(d.kind, d.npus, units.astra_bw_to_Bps(d.bw), units.ns_to_s(d.latency),
                                   astra_bw=d.bw, astra_latency_ns=d.latency) for d in self.dims],
                             name=Path(self.source).stem, astra_network=True)
            object.__setattr__(self, "topo", topo)
        return self.topo


def load_network(path) -> AstraNetwork:
    """An ASTRA-sim network YAML (validated key by key) or a netsim topology YAML."""
    import sys

    from netsim.topology.astra_yaml import is_astra_network, parse_astra_network

    if isinstance(path, AstraNetwork):
        return path
    model = sys.modules.get("netsim.topology.model")  # a Topology exists only once its module is imported
    if model is not None and isinstance(path, model.Topology):
        dims = tuple(NetDim(d.kind, d.npus, d.astra_bw, d.astra_latency_ns)
                     for d in path.facts.dims) if path.facts.astra_network else ()
        return AstraNetwork(path.name, dims, path)
    src = str(path)
    data = inputs.load_yaml(path)
    if not is_astra_network(data):
        from netsim.topology.spec import load_topology

        return AstraNetwork(src, (), load_topology(path))
    parse_astra_network(data, src)  # validates every entry (e.g. a literal 'tbd' bandwidth)
    dims = tuple(NetDim(k, int(n), float(b), float(lat)) for k, n, b, lat in
                 zip(data["topology"], data["npus_count"], data["bandwidth"], data["latency"]))
    return AstraNetwork(src, dims)


class AnalyticalLinks:
    """``transmit`` for ASTRA-sim's congestion-unaware backend: every message alone on the network."""

    def __init__(self, clock, net: AstraNetwork):
        if not net.dims:
            raise InputError("the analytical model needs an ASTRA-sim network YAML (topology/npus_count/"
                             "bandwidth/latency); use --model flow for netsim topologies", source=net.source)
        self.clock, self.net = clock, net
        self._cache: dict = {}

    def __call__(self, src: int, dst: int, size: int, on_arrival: Callable[[], None]) -> None:
        key = (src, dst, size)
        d = self._cache.get(key)
        if d is None:
            d = self._cache[key] = self.net.delay_ns(src, dst, size)
            if len(self._cache) > 1 << 20:
                self._cache.clear()
        self.clock.at(self.clock.now + d, on_arrival)


class FlowLinks:
    """``transmit`` on netsim's max-min flow network (SimPy clock, seconds)."""

    def __init__(self, clock: SimPyClock, net: AstraNetwork):
        from netsim.network.flow import FlowNetwork

        self.flow = FlowNetwork(clock.env, net.topology())

    def __call__(self, src: int, dst: int, size: int, on_arrival: Callable[[], None]) -> None:
        self.flow.submit(np.array([src]), np.array([dst]), np.array([float(size)]),
                         lambda _idx, _t: on_arrival())


# ---------------------------------------------------------------- matching
class Fabric:
    """Send/receive matching of ASTRA-sim's analytical frontend (see the module docstring)."""

    def __init__(self, clock, transmit):
        self.clock, self.transmit = clock, transmit
        # per (tag, src, dst, size): [sends so far, receives so far, {sequence number: entry}] where an
        # entry [send callback, receive callback, landed] waits for its partner.  A key whose every
        # send met its receive is dropped: counting again from 0 pairs the same messages (the n-th
        # send with the n-th receive), and memory stays bounded by the messages in flight.
        self._slots: dict = {}
        self.messages = 0

    def send(self, src: int, dst: int, tag, size: int, cb: Callable[[], None] | None = None) -> None:
        if size <= 0:
            raise InputError(f"a {size}-byte message from NPU {src} to NPU {dst}: ASTRA-sim asserts that every "
                             "message has at least 1 byte")
        k = (tag, src, dst, size)
        slot = self._slots.get(k)
        if slot is None:
            slot = self._slots[k] = [0, 0, {}]
        n = slot[0] = slot[0] + 1
        e = slot[2].get(n)
        if e is None:
            e = slot[2][n] = [cb, None, False]
        else:
            e[0] = cb
        self.messages += 1
        self.transmit(src, dst, size, lambda: self._arrive(k, slot, n, e))

    def _arrive(self, k, slot: list, n: int, e: list) -> None:
        if e[1] is not None:
            self._done(k, slot, n)
            if e[0] is not None:
                e[0]()
            e[1]()
        else:
            e[2] = True
            if e[0] is not None:
                e[0]()

    def _done(self, k, slot: list, n: int) -> None:
        waiting = slot[2]
        del waiting[n]
        if not waiting:  # every send of the key met its receive
            del self._slots[k]

    def recv(self, src: int, dst: int, tag, size: int, cb: Callable[[], None]) -> None:
        k = (tag, src, dst, size)
        slot = self._slots.get(k)
        if slot is None:
            slot = self._slots[k] = [0, 0, {}]
        n = slot[1] = slot[1] + 1
        e = slot[2].get(n)
        if e is None:
            slot[2][n] = [None, cb, False]
        elif e[2]:
            self._done(k, slot, n)
            self.clock.at(self.clock.now, cb)
        else:
            e[1] = cb

    def pending(self) -> int:
        """Sends or receives still waiting for their partner."""
        return sum(len(slot[2]) for slot in self._slots.values())

    def unmatched(self) -> list[tuple]:
        """``(kind, tag, src, dst, size)`` of each send (``"send"``) or receive (``"recv"``) still
        without its partner (after a run: nothing is in flight, so a receive's entry is unmatched)."""
        return [("recv" if e[1] is not None else "send", *k) for k, slot in self._slots.items()
                for e in slot[2].values()]


class MirrorFabric(Fabric):
    """Matching for a rank-symmetric run that simulates one rank (``me``) only.

    Every rank then behaves like ``me`` shifted by a symmetry of the network, so the
    message ``me`` receives from ``s`` (with a given tag, size and sequence number) left
    ``s`` exactly when ``me`` sent the same-numbered message to ``mirror(s)``; it lands
    ``delay(s, me, size)`` later.
    """

    def __init__(self, clock, net: AstraNetwork, mirror: Callable[[int], int], me: int = 0):
        super().__init__(clock, None)
        self.net, self.mirror, self.me = net, mirror, me
        self._sent: dict = {}
        self._recvd: dict = {}
        self._times: dict = {}
        self._waiting: dict = {}

    def send(self, src, dst, tag, size, cb=None) -> None:
        if size <= 0:
            super().send(src, dst, tag, size, cb)
        k = (tag, dst, size)
        n = self._sent[k] = self._sent.get(k, 0) + 1
        now = self.clock.now
        self.messages += 1
        if cb is not None:
            self.clock.at(now + self.net.delay_ns(src, dst, size), cb)
        w = self._waiting.pop((k, n), None)
        if w is None:
            self._times[(k, n)] = now
        else:
            self.clock.at(now + self.net.delay_ns(w[0], self.me, size), w[1])

    def recv(self, src, dst, tag, size, cb) -> None:
        k = (tag, src, size)
        n = self._recvd[k] = self._recvd.get(k, 0) + 1
        key = ((tag, self.mirror(src), size), n)
        t = self._times.pop(key, None)
        if t is None:
            self._waiting[key] = (src, cb)
        else:
            self.clock.at(max(t + self.net.delay_ns(src, self.me, size), self.clock.now), cb)

    def pending(self) -> int:
        return len(self._waiting)

    def unmatched(self) -> list[tuple]:
        return []  # every rank alike: stream ids cannot diverge (netsim.astra.streams)
