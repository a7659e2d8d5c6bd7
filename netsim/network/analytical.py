"""Analytical network: each collective step timed as if it ran alone, without events.

``time = sum of link latencies on the path + bytes / rate``.  A lone transfer's rate is its
path's bottleneck.  The transfers of one collective step share their links: their rates
come from the fluid max-min model of that step run alone, all its transfers starting
together (:func:`step_alone_rates`, used through :meth:`Network.step_rates` by the
collectives).  Hence

* a step never ends before ``bytes it puts on a link / the link's capacity`` on any link
  (the bottleneck bound: the rates are feasible at every instant), so endpoint, NIC,
  oversubscribed uplinks and ECMP collisions limit it;
* where the flow model runs a collective in lockstep (each step alone), both give the same
  times; elsewhere they differ by what the flow model's dynamics add: steps of different
  ranks overlapping on a link, and concurrent operations, which do not see one another here.

On a topology loaded from an ASTRA-sim network YAML the model follows
ASTRA-sim's congestion-unaware backend exactly (reference §4.3): only the
first (lowest) dimension in which source and destination differ is charged,
with ``hops`` = ring distance (Ring), 1 (FullyConnected) or 2 (Switch), and

    delay_ns = trunc(hops * latency_ns + bytes / (bw_GiBps * 2**30 / 1e9))

so results agree with ASTRA-sim to the nanosecond.

Link counters (steps do not see one another, so they describe offered load): ``link_bytes``
as in :class:`~netsim.network.base.Network`; ``link_busy_s`` = the sum of the
serialization times (duration minus path latency, i.e. the drain time within the step; the
whole ASTRA-sim delay on ASTRA topologies) of the transfers crossing the link, which may
exceed the elapsed time when transfers overlap (reports cap it at the makespan);
``link_peak_flows`` = the most transfers submitted together (one batch, one
instant) that cross the link, a lower bound on true concurrency.
"""

from __future__ import annotations

import numpy as np

from netsim import astra_arith as arith
from netsim.network.base import DoneCallback, Network
from netsim.network.maxmin import drain_alone

#: Exact max-min solves spent on one step's sharing (:func:`step_alone_rates`) ...
STEP_SOLVES = 8
#: ... then at most this many solves, each once the flows left have shrunk by the same factor
#: (:func:`~netsim.network.maxmin.drain_alone`'s ``shrink_rounds``).
SHRINK_SOLVES = 16


class AnalyticalNetwork(Network):
    """Each collective step timed alone (links shared within it); see the module docstring."""

    model = "analytical"

    def __init__(self, env, topo, *, astra: bool | None = None):
        super().__init__(env, topo)
        self.astra = topo.facts.astra_network if astra is None else astra
        if self.astra:
            dims = topo.facts.dims
            self._k = np.array([d.npus for d in dims], dtype=np.int64)
            self._stride = np.concatenate(([1], np.cumprod(self._k)[:-1]))
            self._kind = [d.kind for d in dims]
            # the YAML's own ns and GiB/s (seconds round-trip 60 ns to 59.999...; ASTRA-sim charges 60)
            self._lat_ns = [float(d.astra_latency_ns) for d in dims]
            self._bw_gib = [float(d.astra_bw) for d in dims]

    def step_rates(self, routes, nbytes: np.ndarray, cap=None, parts: int = 1, weight=None) -> np.ndarray | None:
        """See :meth:`Network.step_rates`: :func:`step_alone_rates` on the topology's capacities
        (``None`` on ASTRA-sim topologies, whose congestion-unaware backend shares nothing)."""
        if self.astra:
            return None
        return step_alone_rates(routes[0], routes[1], nbytes, self.topo.capacity, cap, parts, weight)

    def durations(self, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray,
                  key: np.ndarray | None = None, routes=None, cap=None) -> np.ndarray:
        """Seconds each transfer takes (no contention)."""
        return self._timing(src, dst, nbytes, key, routes, cap)[0]

    def _timing(self, src, dst, nbytes, key=None, routes=None, cap=None) -> tuple[np.ndarray, np.ndarray]:
        """Durations and serialization times (the ASTRA-sim delay counts as both)."""
        if self.astra:
            d = self._astra_ns(src, dst, nbytes) * 1e-9
            return d, d
        indptr, links = routes if routes is not None else self.topo.routes(src, dst, key)
        lat = self.topo.path_latency(indptr, links)
        bw = self.topo.path_bottleneck(indptr, links)
        if cap is not None:
            bw = np.minimum(bw, cap)
        ser = nbytes / bw
        return np.where(src == dst, 0.0, lat + ser), ser

    def _astra_ns(self, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
        out = np.zeros(src.size)
        pending = src != dst
        for d, kind in enumerate(self._kind):
            a = (src // self._stride[d]) % self._k[d]
            b = (dst // self._stride[d]) % self._k[d]
            here = pending & (a != b)
            if not here.any():
                continue
            if kind == "Ring":
                diff = np.abs(a - b)
                hops = np.minimum(diff, self._k[d] - diff)
            else:
                hops = np.full(src.size, 1 if kind == "FullyConnected" else 2)
            delay = arith.message_ns_array(nbytes, hops, self._lat_ns[d], self._bw_gib[d])
            out[here] = delay[here]
            pending &= ~here
        return out

    def submit(self, src, dst, nbytes, on_done: DoneCallback, key=None, routes=None, cap=None) -> None:
        """See :meth:`Network.submit`."""
        src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
        nbytes = np.asarray(nbytes, dtype=np.float64)
        self.stats["transfers"] += int(src.size)
        routes = routes if routes is not None else self.topo.routes(src, dst, key)
        dur, ser = self._timing(src, dst, nbytes, key, routes, cap)
        self._count(routes, nbytes, ser)
        self._deliver(np.arange(src.size), self.env.now + dur, on_done)

    def alone(self, src, dst, nbytes, key=None, routes=None, cap=None, parts: int = 1, weight=None):
        """See :meth:`Network.alone`: the path latency plus the drain time of the fluid max-min
        model of the batch alone (:func:`step_alone_rates`); busy = the drain time.  On ASTRA-sim
        topologies, ASTRA-sim's congestion-unaware delay for both."""
        src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
        nbytes = np.asarray(nbytes, dtype=np.float64)
        if self.astra:
            d = self._astra_ns(src, dst, nbytes) * 1e-9
            return d, d
        routes = routes if routes is not None else self.topo.routes(src, dst, key)
        rates = self.step_rates(routes, nbytes, cap, parts, weight)
        return self._timing(src, dst, nbytes, key, routes, rates)

    def _count(self, routes, nbytes: np.ndarray, busy: np.ndarray, into: tuple | None = None,
               weight: np.ndarray | None = None) -> None:
        """Link counters: bytes; busy += serialization time; peak = transfers of one batch
        (``weight``: each route stands for that many identical transfers, whose bytes and busy
        time ``nbytes``/``busy`` already sum)."""
        indptr, links = routes
        if not links.size:
            return
        nbytes_, busy_, peak = into if into is not None else (self.link_bytes, self.link_busy_s, self.link_peak_flows)
        lengths = np.diff(indptr)
        np.add.at(nbytes_, links, np.repeat(np.asarray(nbytes, np.float64), lengths))
        np.add.at(busy_, links, np.repeat(np.asarray(busy, np.float64), lengths))
        if weight is None:
            used, counts = np.unique(links, return_counts=True)
        else:
            per_link = np.bincount(links, weights=np.repeat(np.asarray(weight, np.float64), lengths))
            used = np.flatnonzero(per_link)
            counts = np.rint(per_link[used]).astype(peak.dtype)
        peak[used] = np.maximum(peak[used], counts)


def step_alone_rates(indptr: np.ndarray, links: np.ndarray, nbytes: np.ndarray, capacity: np.ndarray,
                     cap: np.ndarray | None = None, parts: int = 1, weight: np.ndarray | None = None) -> np.ndarray:
    """Average rate (B/s) of each transfer of one step run alone: ``bytes / drain time`` in the
    fluid max-min model of the step's transfers starting together
    (:func:`~netsim.network.maxmin.drain_alone`: :data:`STEP_SOLVES` exact solves, then up to
    :data:`SHRINK_SOLVES` solves each once the flows left have shrunk by the same factor; flows
    left after that keep their last rates).  ``parts`` > 1: the transfers are that many
    equal consecutive blocks that do not share links (each gets its own copy of the links).
    Transfers with no bytes or no links get ``inf``.  ``weight``: each transfer stands for that
    many identical ones (:func:`~netsim.network.maxmin.drain_alone`).

    >>> ip, lk = np.array([0, 1, 2, 3]), np.array([0, 0, 1])
    >>> step_alone_rates(ip, lk, np.array([1.0, 3.0, 2.0]), np.array([2.0, 2.0])).tolist()
    [1.0, 1.5, 2.0]
    """
    nbytes = np.asarray(nbytes, dtype=np.float64)
    if parts > 1 and links.size:  # blocks never share: give each its own copy of the links
        block = np.repeat(np.arange(nbytes.size) // (nbytes.size // parts), np.diff(indptr))
        links, capacity = links + block * capacity.size, np.tile(capacity, parts)
    if weight is not None and parts > 1:
        raise ValueError("weighted transfers are not split into parts")
    drain = drain_alone(indptr, links, nbytes, capacity, cap, STEP_SOLVES, SHRINK_SOLVES, weight)[0]
    return np.where(drain > 0, nbytes / np.where(drain > 0, drain, 1.0), np.inf)
