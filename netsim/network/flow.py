"""Congestion-aware flow-level network: links shared max-min fairly.

Every transfer is a flow on its routed path.  Between events the set of
flows is fixed, and so are their rates: the max-min fair allocation of every
link's capacity among the flows crossing it (progressive filling,
:func:`~netsim.network.maxmin.max_min_rates`).  Rates are recomputed only
when flows start or end.  A flow drains at its rate from the moment it is
submitted; its last byte lands one path latency after it has drained.

Batching: all submissions made at one simulated instant are solved once
(the update runs after every other event of that instant), and all flows
that drain at the same instant finish as one batch.  Rate solutions are
cached by the pattern of active paths, so repeated steps of a collective
reuse them.

``link_load`` counts the flows draining through every link right now, and an optional
``watch(links, now)`` hook sees the links of every submitted flow (the workload runner
uses both to prove that a collective runs alone on its links).

Link counters: ``link_bytes`` as in :class:`~netsim.network.base.Network`;
``link_busy_s`` = time during which at least one flow was draining through the
link (accumulated between rate solves); ``link_peak_flows`` = the most flows
that drained through the link at once (counted at every rate solve).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from netsim.network.base import DoneCallback, Network, call_late
from netsim.network.maxmin import max_min_rates
from netsim.topology.model import csr_gather

#: A flow with at most this fraction of its bytes left is finished (float drift).
_RTOL = 1e-9


@dataclass
class _Batch:
    indptr: np.ndarray
    links: np.ndarray
    size: np.ndarray
    remaining: np.ndarray
    latency: np.ndarray
    rate: np.ndarray
    alive: np.ndarray
    on_done: DoneCallback
    cap: np.ndarray | None = None  # per-flow rate cap (B/s), None = uncapped


class FlowNetwork(Network):
    """Max-min fair flow model; see the module docstring."""

    model = "flow"

    def __init__(self, env, topo, *, cache_size: int = 256):
        super().__init__(env, topo)
        self._batches: list[_Batch] = []
        self._t = 0.0
        self._gen = 0
        self._update_scheduled = False
        self._cache: dict[int, tuple] = {}  # path pattern -> (rates, links in use, flows per link)
        self._active = np.zeros(0, dtype=np.int64)  # links with a draining flow since the last solve
        self._cache_size = cache_size
        self.stats["events"] = 0
        self.link_load = np.zeros(topo.n_links, dtype=np.int32)  # flows draining through each link
        self.watch = None  # watch(links, now): told of every path submitted (see LinkGuard)

    # ----------------------------------------------------------------- API
    def submit(self, src, dst, nbytes, on_done: DoneCallback, key=None, routes=None, cap=None) -> None:
        """See :meth:`Network.submit`."""
        src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
        size = np.asarray(nbytes, dtype=np.float64).copy()
        self.stats["transfers"] += int(src.size)
        indptr, links = routes if routes is not None else self.topo.routes(src, dst, key)
        latency = self.topo.path_latency(indptr, links)
        local = (self._account(indptr, links, size) == 0) | (size <= 0)
        if local.any():  # nothing to move through the network
            self._deliver(np.flatnonzero(local), self.env.now + np.where(size > 0, 0.0, latency)[local], on_done)
        if local.all():
            return
        self._advance()
        moving = links if not local.any() else csr_gather(indptr, links, np.flatnonzero(~local))[1]
        np.add.at(self.link_load, moving, 1)
        if self.watch is not None:
            self.watch(moving, self.env.now)
        if cap is not None:
            cap = np.broadcast_to(np.asarray(cap, dtype=np.float64), size.shape).copy()
        self._batches.append(_Batch(indptr, links, size, size.copy(), latency, np.zeros(src.size),
                                    ~local, on_done, cap))
        self._schedule_update()

    def _count(self, routes, nbytes: np.ndarray, busy: np.ndarray) -> None:
        """Counters for traffic evaluated outside :meth:`submit` (the collectives fast path):
        one step's transfers, all draining together: bytes add up; a link is busy for its
        longest transfer; its peak is the transfers crossing it."""
        indptr, links = routes
        if not links.size:
            return
        lengths = np.diff(indptr)
        np.add.at(self.link_bytes, links, np.repeat(np.asarray(nbytes, np.float64), lengths))
        longest = np.zeros(self.link_busy_s.size)
        np.maximum.at(longest, links, np.repeat(np.asarray(busy, np.float64), lengths))
        self.link_busy_s += longest
        used, counts = np.unique(links, return_counts=True)
        self.link_peak_flows[used] = np.maximum(self.link_peak_flows[used], counts)

    def active_flows(self) -> int:
        """Flows currently draining."""
        return int(sum(int(b.alive.sum()) for b in self._batches))

    # ------------------------------------------------------------ internals
    def _schedule_update(self) -> None:
        if self._update_scheduled:
            return
        self._update_scheduled = True
        call_late(self.env, self._update)

    def _advance(self) -> None:
        """Drain flows up to now (flows are frozen while ``_t`` is ahead of now after a shift)."""
        dt = self.env.now - self._t
        if dt > 0:
            for b in self._batches:
                b.remaining -= b.rate * dt
            if self._active.size:
                self.link_busy_s[self._active] += dt
            self._t = self.env.now

    def shift(self, dt: float) -> None:
        """See :meth:`Network.shift`: active flows also pause for ``dt``."""
        self._advance()
        self._t = max(self._t, self.env.now) + dt
        super().shift(dt)

    def _update(self) -> None:
        self._update_scheduled = False
        self.stats["events"] += 1
        self._advance()
        self._finish_drained()
        self._solve()
        self._arm_timer()

    def _finish_drained(self) -> None:
        now, kept = max(self.env.now, self._t), []
        for b in self._batches:
            done = b.alive & (b.remaining <= b.size * _RTOL + 1e-6)
            if done.any():
                b.alive &= ~done
                idx = np.flatnonzero(done)
                np.subtract.at(self.link_load, csr_gather(b.indptr, b.links, idx)[1], 1)
                self._deliver(idx, now + b.latency[idx], b.on_done)
            if b.alive.any():
                kept.append(b)
        self._batches = kept

    def _solve(self) -> None:
        if not self._batches:
            self._active = self._active[:0]
            return
        parts = [csr_gather(b.indptr, b.links, np.flatnonzero(b.alive)) for b in self._batches]
        lengths = np.concatenate([np.diff(ip) for ip, _ in parts])
        links = np.concatenate([lk for _, lk in parts])
        caps = None
        if any(b.cap is not None for b in self._batches):
            caps = np.concatenate([(b.cap if b.cap is not None else np.full(b.size.size, np.inf))[b.alive]
                                   for b in self._batches])
        key = hash((lengths.tobytes(), links.tobytes(), None if caps is None else caps.tobytes()))
        hit = self._cache.get(key)
        if hit is None:
            indptr = np.zeros(lengths.size + 1, dtype=np.int64)
            np.cumsum(lengths, out=indptr[1:])
            rates = max_min_rates(indptr, links, self.topo.link_bw, rate_cap=caps)
            self.stats["rate_solves"] += 1
            if len(self._cache) >= self._cache_size:
                self._cache.pop(next(iter(self._cache)))
            hit = self._cache[key] = (rates, *np.unique(links, return_counts=True))
            used, counts = hit[1], hit[2]  # a cached pattern has been counted already
            self.link_peak_flows[used] = np.maximum(self.link_peak_flows[used], counts)
        else:
            self.stats["cache_hits"] += 1
        rates, self._active = hit[0], hit[1]
        start = 0
        for b in self._batches:
            idx = np.flatnonzero(b.alive)
            b.rate[:] = 0.0
            b.rate[idx] = rates[start:start + idx.size]
            start += idx.size

    def _arm_timer(self) -> None:
        if not self._batches:
            return
        t_next = min(float(np.min(b.remaining[b.alive] / b.rate[b.alive])) for b in self._batches)
        self._gen += 1
        gen = self._gen
        self.call_at(max(self._t, self.env.now) + max(t_next, 0.0), lambda: self._timer(gen))

    def _timer(self, gen: int) -> None:
        if gen == self._gen:  # otherwise a newer solve re-armed the timer
            self._schedule_update()
