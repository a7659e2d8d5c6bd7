"""The flow model's state: one flat table of flows, and max-min rates re-solved incrementally.

:class:`FlowTable` holds every draining flow in numpy arrays (one slot per flow; paths as
segments of one link pool), so that draining, finding completions and solving cost a few
array operations whatever the number of submissions.

Incremental max-min
-------------------
When flows end or start, :meth:`FlowTable.resolve` re-solves only the flows whose rate can
change, and this is exact (not a heuristic):

* **A flow that ends at rate x changes no rate below x.**  Progressive filling raises all
  unfrozen flows together; a link saturates at level *y* when the rates frozen through it
  plus *y* per unfrozen flow fill it.  Every link on the ended flow's path saturates, if at
  all, at a level >= x (otherwise the flow would have been frozen below x), and without the
  flow it saturates no earlier.  So, by induction over levels, every link saturating below
  x does so at the same level with the same flows, which keep their rates.
* **A flow that starts leaves every rate below its own new rate unchanged** (the same
  argument read backwards), and its new rate is at least ``min(cap, min over its links of
  capacity / flows crossing it)``: when it is frozen at level z, some link of its path is
  full with every flow on it at <= z.

So with θ the smallest of the ended flows' rates and the started flows' lower bounds,
every flow with rate < θ keeps its rate, and the others are the max-min fair allocation of
the *residual* capacities (capacity minus the kept flows' rates) among themselves:
progressive filling continued from level θ.

* **Only the touched components of that residual problem change.**  Max-min fairness
  decomposes over connected components (flows joined by shared links).  A component of the
  flows above θ that shares no link with an ended or a started flow was a component of the
  previous residual problem too, with the same residual capacities (the flows below θ are
  the same), so its rates stay.  :meth:`resolve` finds the flows above θ connected to the
  changed links (a breadth-first search over shared links, vectorized per round).

:meth:`resolve` solves what is left with :func:`~netsim.network.maxmin.max_min_rates` (the
same vectorized solver), and falls back to a full solve when most flows are in it.  θ is lowered by a relative margin of
``4 * rtol`` so that the solver's own tie tolerance never splits a level.
``tests/test_flow_incremental.py`` checks the incremental solution against full solves.
"""

from __future__ import annotations

import numpy as np

from netsim.network.maxmin import max_min_rates

#: The solver's tie tolerance (see :func:`~netsim.network.maxmin.max_min_rates`).
RTOL = 1e-9
#: Re-solve everything when at least this fraction of the flows may change.
FULL_FRACTION = 0.5
#: Search for touched components only when at least this many flows are above θ.
SEARCH_FROM = 32


class FlowTable:
    """Draining flows as flat arrays (see the module docstring)."""

    _FIELDS = (("rem", np.float64), ("rate", np.float64), ("lat", np.float64), ("cap", np.float64),
               ("alive", bool), ("fresh", bool), ("owner", np.int64), ("local", np.int64),
               ("pstart", np.int64), ("plen", np.int64))

    def __init__(self, capacity: np.ndarray, *, incremental: bool = True):
        self.capacity = capacity
        self.incremental = incremental
        self.n = 0  # slots in use (alive or dead)
        self.n_alive = 0
        for name, dt in self._FIELDS:
            setattr(self, name, np.zeros(64, dtype=dt))
        self.pool = np.zeros(256, dtype=np.int64)
        self.pool_n = 0
        self.used = np.zeros(capacity.size)  # sum of the rates of the alive flows crossing each link
        self.theta = np.inf  # rates below this stay as they are at the next solve
        self._changed: list[np.ndarray] = []  # links of flows ended since the last solve
        self._mark = np.zeros(capacity.size, dtype=bool)  # scratch for the component search
        self.stats = {"rate_solves": 0, "partial_solves": 0, "solved_flows": 0}

    # ----------------------------------------------------------- storage
    def _reserve(self, k: int, nnz: int) -> None:
        if self.n + k > self.rem.size:
            size = max(2 * self.rem.size, self.n + k)
            for name, _ in self._FIELDS:
                old = getattr(self, name)
                new = np.zeros(size, dtype=old.dtype)
                new[:self.n] = old[:self.n]
                setattr(self, name, new)
        if self.pool_n + nnz > self.pool.size:
            pool = np.zeros(max(2 * self.pool.size, self.pool_n + nnz), dtype=np.int64)
            pool[:self.pool_n] = self.pool[:self.pool_n]
            self.pool = pool

    def add(self, indptr: np.ndarray, links: np.ndarray, size: np.ndarray, lat: np.ndarray,
            cap: np.ndarray, owner: int, local: np.ndarray) -> np.ndarray:
        """Append flows (CSR paths, bytes, latency, cap) of one submission; returns their slots."""
        k = int(size.size)
        self._reserve(k, int(links.size))
        slots = np.arange(self.n, self.n + k)
        self.rem[slots], self.rate[slots], self.lat[slots], self.cap[slots] = size, 0.0, lat, cap
        self.alive[slots], self.fresh[slots] = True, True
        self.owner[slots], self.local[slots] = owner, local
        self.pstart[slots] = self.pool_n + indptr[:-1]
        self.plen[slots] = np.diff(indptr)
        self.pool[self.pool_n:self.pool_n + links.size] = links
        self.pool_n += int(links.size)
        self.n += k
        self.n_alive += k
        return slots

    def paths(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """CSR ``(indptr, links)`` of the flows in ``slots``."""
        lens = self.plen[slots]
        indptr = np.zeros(slots.size + 1, dtype=np.int64)
        np.cumsum(lens, out=indptr[1:])
        if not indptr[-1]:
            return indptr, self.pool[:0]
        starts = np.repeat(self.pstart[slots] - indptr[:-1], lens)
        return indptr, self.pool[starts + np.arange(indptr[-1])]

    def alive_slots(self) -> np.ndarray:
        return np.flatnonzero(self.alive[:self.n])

    def compact(self) -> None:
        """Drop dead slots once they are most of the table (amortized O(1) per flow)."""
        if self.n < 1024 or 2 * self.n_alive > self.n:
            return
        keep = self.alive_slots()
        indptr, links = self.paths(keep)
        for name, _ in self._FIELDS:
            arr = getattr(self, name)
            arr[:keep.size] = arr[keep]
        self.pstart[:keep.size] = indptr[:-1]
        self.pool[:links.size] = links
        self.pool_n = int(links.size)
        self.n = int(keep.size)

    # ------------------------------------------------------------- drain
    def drain(self, dt: float) -> None:
        """Every alive flow drains ``dt`` seconds at its rate (dead slots have rate 0)."""
        n = self.n
        self.rem[:n] -= self.rate[:n] * dt

    def next_due(self) -> float:
        """Seconds until the first alive flow has drained (``inf`` if none)."""
        a = self.alive_slots()
        if not a.size:
            return np.inf
        with np.errstate(divide="ignore"):
            return float(np.min(self.rem[a] / self.rate[a]))

    def take_drained(self, eps_t: float) -> np.ndarray:
        """Slots of flows drained now, i.e. due within ``eps_t`` seconds (the clock's float
        resolution); they leave the table: their rates leave the link sums and θ."""
        a = self.alive_slots()
        if not a.size:
            return a
        rem, rate = self.rem[a], self.rate[a]
        done = a[(rem <= 0) | (rem <= rate * eps_t)]
        if done.size:
            self.remove(done)
        return done

    def remove(self, slots: np.ndarray) -> None:
        """Flows leave (drained or cancelled)."""
        rate = self.rate[slots]
        self.theta = min(self.theta, float(rate.min()))
        indptr, links = self.paths(slots)
        np.subtract.at(self.used, links, np.repeat(rate, np.diff(indptr)))
        self._changed.append(links)
        self.alive[slots] = False
        self.rate[slots] = 0.0
        self.rem[slots] = 0.0
        self.n_alive -= int(slots.size)

    # ------------------------------------------------------------- solve
    def started(self, slots: np.ndarray, load: np.ndarray) -> None:
        """New flows: lower θ to their rate lower bound (``load``: flows per link, them included)."""
        indptr, links = self.paths(slots)
        lens = np.diff(indptr)
        lb = self.cap[slots].copy()
        has = lens > 0
        if has.any():
            share = self.capacity[links] / load[links]
            lb[has] = np.minimum(lb[has], np.minimum.reduceat(share, indptr[:-1][has]))
        self.theta = min(self.theta, float(lb.min()))

    def resolve(self, load: np.ndarray) -> None:
        """Re-solve the rates that may have changed since the last solve (module docstring)."""
        a = self.alive_slots()
        theta, self.theta = self.theta, np.inf
        ended, self._changed = self._changed, []
        fresh = self.fresh[a]
        self.fresh[a] = False
        if not a.size:
            return
        if self.incremental and theta > 0:
            upper = a[fresh | (self.rate[a] >= theta * (1.0 - 4 * RTOL))]
            limit = FULL_FRACTION * a.size
            if SEARCH_FROM <= upper.size < limit or upper.size >= limit > SEARCH_FROM:
                upper = self._touched(upper, np.concatenate(ended + [self.paths(a[fresh])[1]]), limit)
            if upper.size < limit:
                if upper.size == 0 or self._partial(upper, load):
                    return
        self._full(a)

    def _touched(self, upper: np.ndarray, seeds: np.ndarray, limit: float) -> np.ndarray:
        """The flows of ``upper`` connected to the links ``seeds`` through links shared by
        flows of ``upper`` (module docstring); all of ``upper`` once they reach ``limit``."""
        indptr, links = self.paths(upper)
        owner = np.repeat(np.arange(upper.size), np.diff(indptr))
        mark = self._mark
        mark[seeds] = True
        hit = np.zeros(upper.size, dtype=bool)
        count = 0
        while True:
            hit[owner[mark[links]]] = True
            n = int(np.count_nonzero(hit))
            if n == count or n >= limit:
                break
            count = n
            mark[links[hit[owner]]] = True
        mark[seeds] = False
        mark[links] = False
        return upper if n >= limit else upper[hit]

    def _full(self, a: np.ndarray) -> None:
        indptr, links = self.paths(a)
        rates = max_min_rates(indptr, links, self.capacity, rate_cap=self.cap[a], rtol=RTOL)
        self.rate[a] = rates
        self.used = np.bincount(links, weights=np.repeat(rates, np.diff(indptr)),
                                minlength=self.capacity.size)
        self.stats["rate_solves"] += 1
        self.stats["solved_flows"] += int(a.size)

    def _partial(self, upper: np.ndarray, load: np.ndarray) -> bool:
        """Solve ``upper`` on the capacity the other flows leave; False if that is not positive
        on some link (rounding; the caller then solves everything)."""
        indptr, links = self.paths(upper)
        lens = np.diff(indptr)
        uniq, inv = np.unique(links, return_inverse=True)
        old = self.rate[upper]
        theirs = np.bincount(inv, weights=np.repeat(old, lens), minlength=uniq.size)
        resid = self.capacity[uniq] - (self.used[uniq] - theirs)
        if not (resid > 0).all():
            return False
        rates = max_min_rates(indptr, inv, resid, rate_cap=self.cap[upper], rtol=RTOL)
        self.rate[upper] = rates
        self.used[uniq] += np.bincount(inv, weights=np.repeat(rates - old, lens), minlength=uniq.size)
        self.stats["rate_solves"] += 1
        self.stats["partial_solves"] += 1
        self.stats["solved_flows"] += int(upper.size)
        return True

