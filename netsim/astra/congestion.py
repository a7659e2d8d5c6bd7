"""ASTRA-sim's congestion-aware analytical backend: store-and-forward, one FIFO per link.

(astra-network-analytical ``congestion_aware/{Link,Device,Chunk}.cpp``, our own code.)
Links are unidirectional.  A message ("chunk") follows its route hop by hop; at each
hop it waits for the link (first come, first served), occupies it for
``trunc(size / bw)`` ns and reaches the next device ``trunc(latency + size / bw)`` ns
after it started: every hop pays the full serialization, there is no packetization
and a switch has no internal limit.  Routes: Ring takes the shorter direction
(clockwise on ties), FullyConnected is direct, Switch goes NPU -> switch -> NPU.
Like ASTRA-sim 518bd513 this backend is 1-D only.

:class:`StoreAndForward` is the ``transmit`` callable of netsim's ASTRA-sim system
layer; :class:`StoreAndForwardNetwork` puts the same model behind netsim's
:class:`~netsim.network.base.Network` seam so netsim's own collectives can use it.

>>> from netsim.astra.engine import AstraNetwork, HeapClock, NetDim
>>> clock = HeapClock()
>>> links = StoreAndForward(clock, AstraNetwork("x", (NetDim("Switch", 4, 50.0, 500.0),)))
>>> done = []
>>> for dst in (1, 2):
...     links(0, dst, 32768, lambda: done.append(clock.now))
>>> clock.run(); done          # the second message queues behind the first on NPU 0's up-link
[2220, 2830]
"""

from __future__ import annotations

from collections import deque
from heapq import heappush
from functools import partial
from typing import Callable

import numpy as np

from netsim import astra_arith as arith
from netsim.astra.engine import AstraNetwork, HeapClock, SimPyClock, load_network
from netsim.errors import InputError
from netsim.network.base import Network


class _Link:
    __slots__ = ("clock", "lat", "bw", "busy", "pending", "owner", "times")

    def __init__(self, clock, lat: float, bw: float, owner: "StoreAndForward"):
        self.clock, self.lat, self.bw, self.owner = clock, lat, bw, owner
        self.busy = False
        self.pending: deque = deque()
        self.times = owner.times  # {size: (arrival ns, busy ns)}, shared by the links of one network

    def send(self, chunk: list) -> None:
        if self.busy:
            self.pending.append(chunk)
        else:
            self._transmit(chunk)

    def _transmit(self, chunk: list) -> None:
        self.busy = True
        now, size = self.clock.now, chunk[2]
        t = self.times.get(size)
        if t is None:
            t = self.times[size] = (arith.link_ns(size, self.lat, self.bw), arith.serialization_ns(size, self.bw))
        at = self.clock.at
        at(now + t[0], partial(self.owner._arrived, chunk))
        at(now + t[1], self._free)

    def _free(self) -> None:
        self.busy = False
        if self.pending:
            self._transmit(self.pending.popleft())


class _Chunk:
    """A message on its route; called when it reaches the end of hop ``i``."""

    __slots__ = ("path", "i", "size", "cb")

    def __init__(self, path: list, size: int, cb):
        self.path, self.i, self.size, self.cb = path, 0, size, cb

    def __call__(self) -> None:
        self.i += 1
        if self.i == len(self.path):
            self.cb()
        else:
            self.path[self.i].send(self)


class _HeapLink:
    """:class:`_Link` on a :class:`~netsim.astra.engine.HeapClock`, with the same events in the same
    order, less the link-free events that would find nothing waiting.

    A transmission takes the free event's sequence number when it starts, as :class:`_Link` does,
    but pushes that event only once a message waits behind it; a message that comes finds the link
    busy exactly when the free event (``free_at``, ``free_seq``) would not have run yet: the clock
    runs events in (time, sequence) order, and ``clock.seq`` is the running event's."""

    __slots__ = ("clock", "lat", "bw", "pending", "times", "free_at", "free_seq", "queued", "free_cb")

    def __init__(self, clock, lat: float, bw: float, owner: "StoreAndForward"):
        self.clock, self.lat, self.bw = clock, lat, bw
        self.pending: deque = deque()
        self.times = owner.times
        self.free_at, self.free_seq, self.queued = -1, 0, False
        self.free_cb = self._free

    def send(self, chunk: _Chunk) -> None:
        clock = self.clock
        now = clock.now
        if now < self.free_at or (now == self.free_at and clock.seq < self.free_seq):
            if not self.queued:
                heappush(clock._q, (self.free_at, self.free_seq, self.free_cb))
                self.queued = True
            self.pending.append(chunk)
        else:
            self._transmit(chunk, now)

    def _transmit(self, chunk: _Chunk, now: int) -> None:
        size = chunk.size
        t = self.times.get(size)
        if t is None:
            t = self.times[size] = (arith.link_ns(size, self.lat, self.bw), arith.serialization_ns(size, self.bw))
        clock = self.clock
        q, seq = clock._q, clock._seq
        heappush(q, (now + t[0], next(seq), chunk))
        free_at = self.free_at = now + t[1]
        self.free_seq = next(seq)
        # pushed at once where a message already waits, or at t = 0 (the clock counts events there)
        self.queued = bool(self.pending) or free_at == 0
        if self.queued:
            heappush(q, (free_at, self.free_seq, self.free_cb))

    def _free(self) -> None:
        self.queued = False
        if self.pending:
            self._transmit(self.pending.popleft(), self.clock.now)


def check_astra_network(net: AstraNetwork) -> None:
    """Refuse, as one input error, a network on which ASTRA-sim's congestion-aware backend aborts.

    A Ring of 2 NPUs: its constructor links each NPU to the next in both directions
    (astra-network-analytical ``congestion_aware/basic-topology/Ring.cpp``, ``Ring::Ring``, and
    ``Topology::connect`` with ``bidirectional = true``), so with 2 NPUs the pair 0-1 is connected by
    ``connect(0, 1)`` and again by ``connect(1, 0)``, and ``Device::connect``'s ``assert(!connected(id))``
    aborts the binary before it simulates anything (observed: exit status 134 from the 518bd513 build).
    """
    if len(net.dims) == 1 and net.dims[0].kind == "Ring" and net.dims[0].npus == 2:
        raise InputError("a Ring of 2 NPUs in the congestion-aware model: ASTRA-sim aborts (its Ring connects NPUs "
                         "0 and 1 twice and Device::connect asserts !connected); use Switch or FullyConnected, "
                         "or --model analytical", source=net.source, field="topology")


class StoreAndForward:
    """``transmit(src, dst, size, on_arrival)`` of the congestion-aware model (1-D networks)."""

    def __init__(self, clock, net: AstraNetwork):
        if len(net.dims) != 1:
            raise InputError(f"the congestion-aware model supports 1-D networks only, got {len(net.dims)} "
                             "dimension(s) (ASTRA-sim's congestion-aware backend exits with status 255); use "
                             "--model analytical or --model flow", source=net.source, field="topology")
        d = net.dims[0]
        self.clock, self.kind, self.n = clock, d.kind, d.npus
        self.bw = d.bw  # GiB/s, as written (netsim.astra_arith converts)
        self.lat = d.latency
        self.links: dict[tuple[int, int], _Link] = {}
        self.times: dict[int, tuple[int, int]] = {}
        self._paths: dict[tuple[int, int], list[_Link]] = {}  # the links of each route, built on first use

    def route(self, src: int, dst: int) -> list[int]:
        """Device ids from ``src`` to ``dst`` (the switch of a Switch network is device ``n``)."""
        if self.kind == "Switch":
            return [src, self.n, dst]
        if self.kind == "FullyConnected":
            return [src, dst]
        cw = (dst - src) % self.n
        step = -1 if self.n - cw < cw else 1
        path, cur = [src], src
        while cur != dst:
            cur = (cur + step) % self.n
            path.append(cur)
        return path

    def _link(self, a: int, b: int) -> _Link:
        link = self.links.get((a, b))
        if link is None:
            cls = _HeapLink if isinstance(self.clock, HeapClock) else _Link
            link = self.links[(a, b)] = cls(self.clock, self.lat, self.bw, self)
        return link

    def __call__(self, src: int, dst: int, size: int, on_arrival: Callable[[], None]) -> None:
        path = self._paths.get((src, dst))
        if path is None:
            route = self.route(src, dst)
            path = self._paths[(src, dst)] = [self._link(a, b) for a, b in zip(route, route[1:])]
        if isinstance(path[0], _HeapLink):
            path[0].send(_Chunk(path, size, on_arrival))
        else:
            path[0].send([path, 0, size, on_arrival])

    def _arrived(self, chunk: list) -> None:
        chunk[1] += 1
        path, i = chunk[0], chunk[1]
        if i == len(path):
            chunk[3]()
        else:
            path[i].send(chunk)


class StoreAndForwardNetwork(Network):
    """The store-and-forward model behind netsim's :class:`~netsim.network.base.Network` seam
    (a topology loaded from a 1-D ASTRA-sim network YAML; sizes are rounded up to bytes)."""

    model = "congestion-aware"

    def __init__(self, env, topo):
        super().__init__(env, topo)
        self._links = StoreAndForward(SimPyClock(env), load_network(topo))

    def can_shift(self, owner: object) -> bool:
        """Never: link queues are real state, fast-forward would corrupt them."""
        return False

    def submit(self, src, dst, nbytes, on_done, key=None, routes=None) -> None:
        """See :meth:`Network.submit` (one store-and-forward chunk per transfer)."""
        src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
        nbytes = np.asarray(nbytes, dtype=np.float64)
        self.stats["transfers"] += int(src.size)
        for i, (s, d, b) in enumerate(zip(src.tolist(), dst.tolist(), nbytes.tolist())):
            if s == d or b <= 0:
                self._deliver(np.array([i]), np.array([self.env.now]), on_done)
            else:
                self._links(s, d, int(np.ceil(b)), lambda i=i: on_done(np.array([i]), self.env.now))
