"""The flow model's state: one flat table of flows, and max-min rates repaired locally.

:class:`FlowTable` holds every draining flow in numpy arrays (one slot per flow; paths as
segments of one link pool), so that finding completions and solving cost a few array
operations whatever the number of submissions.  Draining costs nothing: each flow keeps its
bytes as of its last rate change and the instant it is due at that rate, and only flows whose
rate changes are brought up to date.

Local repair of max-min rates
-----------------------------
When flows end or start, :meth:`FlowTable.resolve` re-solves a set R of flows on the capacity
the others leave, checks a certificate, grows R where the certificate fails, and repeats; the
result is exact, not a heuristic, by the classic characterisation of max-min fairness
(Bertsekas and Gallager, *Data Networks*, 2nd ed., section 6.5.2): a feasible allocation is
the max-min fair one if and only if every flow has a *bottleneck*, a link that is saturated
and that no flow crossing it gets more than, or the flow's own cap.  The allocation is unique.

* Every solve records each flow's bottleneck (``bneck``: the link it froze at in progressive
  filling, or -1 at its cap; :func:`~netsim.network.maxmin.solve_compressed`).
* R starts as the started flows and the flows whose bottleneck an ended or started flow
  crossed.  R is solved max-min on the residual capacities (capacity minus the rates of the
  flows outside R), so the allocation stays feasible, and each flow of R gets a bottleneck
  that is saturated and that no other flow *of R* exceeds.
* The certificate, on the links D of R's and the ended flows' paths (outside D no flow and
  no rate changed, so every bottleneck there still holds):
  a flow outside R whose bottleneck is in D must still have it (saturated, nobody on it
  faster), and a flow of R must not be exceeded on its bottleneck by a flow outside R.
  Failures join R: the first kind themselves, the second the faster flows outside R.
* When the certificate holds, every flow has a bottleneck: the allocation is max-min fair.
  R grows each round, and past :data:`FULL_FRACTION` of the flows (or :data:`MAX_REPAIRS`
  rounds) everything is solved afresh.

An all-to-all's completions change the rates of a handful of its thousands of flows (median
0.03 % of 45,000 flows per event at 448 GPUs), so R stays small.  Finding the flows on D
uses a link -> flow index, rebuilt once scanning the flows added since the last rebuild costs more.
Ties: the solver freezes shares within ``RTOL`` together, and the certificate allows ``RTOL``
(saturation) and ``4 * RTOL`` (no faster flow).  ``tests/test_flow_incremental.py`` checks
the repaired rates against full solves.
"""

from __future__ import annotations

import numpy as np

from netsim.network.maxmin import compress_links, solve_compressed

#: The solver's tie tolerance (see :func:`~netsim.network.maxmin.max_min_rates`).
RTOL = 1e-9
#: Re-solve everything once the repair set R holds this fraction of the flows.
FULL_FRACTION = 0.5
#: Re-solve everything after this many repair rounds.
MAX_REPAIRS = 12
#: Rebuild the link -> flow index once the path entries of flows added since the last rebuild,
#: scanned by queries, reach this many per alive flow (a rebuild sorts every alive entry once;
#: a scan costs a few array operations per entry).
REINDEX_SCANS = 32


def _unique_links(links: np.ndarray, mark: np.ndarray) -> np.ndarray:
    """Sorted unique ``links`` (``mark``: an all-False scratch array over every link, left so)."""
    if links.size * 8 < mark.size:
        return np.unique(links)
    mark[links] = True
    out = np.flatnonzero(mark)
    mark[out] = False
    return out


class FlowTable:
    """Draining flows as flat arrays (see the module docstring)."""

    _FIELDS = (("rem", np.float64), ("tset", np.float64), ("due", np.float64), ("rate", np.float64),
               ("lat", np.float64), ("cap", np.float64),
               ("alive", bool), ("owner", np.int64), ("local", np.int64),
               ("pstart", np.int64), ("plen", np.int64), ("bneck", np.int64))

    def __init__(self, capacity: np.ndarray, *, incremental: bool = True):
        self.capacity = capacity
        self.incremental = incremental
        self.n = 0  # slots in use (alive or dead)
        self.clock = 0.0  # seconds drained so far; ``rem`` is each flow's bytes at its ``tset``
        self.n_alive = 0
        for name, dt in self._FIELDS:
            setattr(self, name, np.zeros(64, dtype=dt))
        self.pool = np.zeros(256, dtype=np.int64)
        self.pool_n = 0
        self.used = np.zeros(capacity.size)  # sum of the rates of the alive flows crossing each link
        self._changed: list[np.ndarray] = []  # links of flows ended since the last solve
        self._fresh: list[np.ndarray] = []  # slots of flows added since the last solve
        self._mark = np.zeros(capacity.size + 1, dtype=bool)  # scratch: links of a query (+1: none)
        self._ix_ptr = None  # link -> flow index of slots < _ix_n (CSR over links); None: stale
        self._ix_slot = np.zeros(0, dtype=np.int64)
        self._ix_n = 0
        self._scanned = 0  # path entries of recent flows scanned since the last rebuild
        # per link, for the certificate: flows bottlenecked there, a lower bound of their rates,
        # an upper bound of every rate on the link (exact where last scanned)
        self.nb = np.zeros(capacity.size, dtype=np.int64)
        self.lvl = np.zeros(capacity.size)
        self.top = np.zeros(capacity.size)
        self.stats = {"rate_solves": 0, "partial_solves": 0, "solved_flows": 0, "repair_rounds": 0}

    def solve_counts(self) -> tuple[int, int]:
        """``(rate_solves, partial_solves)`` so far."""
        return self.stats["rate_solves"], self.stats["partial_solves"]

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
        self.tset[slots], self.due[slots] = self.clock, np.inf
        self.alive[slots] = True
        self._fresh.append(slots)
        self.owner[slots], self.local[slots] = owner, local
        self.bneck[slots] = -1
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
        """Drop dead slots once they are most of the table (amortized O(1) per flow); only
        between solves (slots of new flows are kept until then)."""
        if self.n < 1024 or 2 * self.n_alive > self.n or self._fresh:
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
        self._ix_ptr = None  # slots moved

    # ------------------------------------------------------------- drain
    def drain(self, dt: float) -> None:
        """Every alive flow drains ``dt`` seconds at its rate: the clock moves (a flow's bytes
        are brought up to date only when its rate changes, :meth:`_set_rates`)."""
        self.clock += dt

    def _set_rates(self, slots: np.ndarray, rates: np.ndarray) -> None:
        """New rates from now on: bytes left are brought up to the clock, due times follow."""
        now = self.clock
        rem = np.maximum(self.rem[slots] - self.rate[slots] * (now - self.tset[slots]), 0.0)
        self.rem[slots], self.tset[slots], self.rate[slots] = rem, now, rates
        with np.errstate(divide="ignore", invalid="ignore"):  # rate 0: never due
            self.due[slots] = np.where(rates > 0, now + rem / rates, np.inf)

    def next_due(self) -> float:
        """Seconds until the first alive flow has drained (``inf`` if none; dead slots and
        unsolved flows are never due)."""
        if not self.n_alive:
            return np.inf
        return float(self.due[:self.n].min()) - self.clock

    def take_drained(self, eps_t: float) -> tuple[np.ndarray, np.ndarray]:
        """Slots of flows drained now, i.e. due within ``eps_t`` seconds (the clock's float
        resolution), and their path entries; they leave the table and their rates leave the
        link sums."""
        done = np.flatnonzero(self.due[:self.n] <= self.clock + eps_t)
        return done, (self.remove(done) if done.size else self.pool[:0])

    def remove(self, slots: np.ndarray) -> np.ndarray:
        """Flows leave (drained or cancelled); returns their path entries."""
        rate = self.rate[slots]
        indptr, links = self.paths(slots)
        np.subtract.at(self.used, links, np.repeat(rate, np.diff(indptr)))
        self._nb_add(self.bneck[slots], -1)
        self.bneck[slots] = -1
        self._changed.append(links)
        self.alive[slots] = False
        self.rate[slots] = 0.0
        self.due[slots] = np.inf
        self.n_alive -= int(slots.size)
        return links

    def emptied(self, links: np.ndarray) -> None:
        """No flow crosses ``links`` any more: no rounding residue, no rate."""
        self.used[links] = 0.0
        self.top[links] = 0.0

    def _nb_add(self, bneck: np.ndarray, sign: int) -> None:
        on = bneck[bneck >= 0]
        if on.size:
            np.add.at(self.nb, on, sign)

    # ------------------------------------------------------------- solve
    def resolve(self) -> None:
        """Re-solve the rates the flows ended and started since the last solve can change
        (module docstring)."""
        ended, self._changed = self._changed, []
        fresh = np.concatenate(self._fresh) if self._fresh else np.zeros(0, dtype=np.int64)
        self._fresh = []
        fresh = fresh[self.alive[fresh]]
        if not self.n_alive:
            return
        limit = FULL_FRACTION * self.n_alive
        if not self.incremental or fresh.size >= limit:
            self._full(self.alive_slots())
            return
        seeds = np.concatenate(ended + [self.paths(fresh)[1]])
        r = np.union1d(fresh, self._bottlenecked_on(seeds))
        if not r.size:  # no flow's bottleneck changed: the certificate holds as it is
            return
        if not self._repair(r, limit):
            self._full(self.alive_slots())

    def _bottlenecked_on(self, links: np.ndarray) -> np.ndarray:
        """Alive flows whose bottleneck is one of ``links``: through the link -> flow index when
        the flows it would list (everyone crossing them, plus flows added since it was built)
        are fewer than the slots, else by one pass over the slots."""
        links = links[self.nb[links] > 0]
        if not links.size:
            return links
        if self._ix_ptr is not None:
            recent = self.pool_n - (self.pstart[self._ix_n] if self._ix_n < self.n else self.pool_n)
            links = _unique_links(links, self._mark)
            listed = int((self._ix_ptr[links + 1] - self._ix_ptr[links]).sum()) + recent
            if listed < self.n:
                slots, on = self._on(links)
                return slots[self.bneck[slots] == on]
        mark = self._mark
        mark[links] = True
        hit = np.flatnonzero(mark[self.bneck[:self.n]])  # bneck -1 (a cap, or dead) reads mark[-1]
        mark[links] = False
        return hit

    def _repair(self, r: np.ndarray, limit: float) -> bool:
        """Grow ``r`` until its residual solve passes the certificate (module docstring); False
        when ``r`` reaches ``limit`` flows or :data:`MAX_REPAIRS` rounds (solve everything)."""
        in_r = np.zeros(self.n, dtype=bool)
        for _ in range(MAX_REPAIRS):
            if r.size >= limit:
                return False
            in_r[r] = True
            self.stats["repair_rounds"] += 1
            indptr, links = self.paths(r)
            lens = np.diff(indptr)
            inv, uniq = compress_links(links, self.capacity.size)
            old = self.rate[r]
            others = self.used[uniq] - np.bincount(inv, weights=np.repeat(old, lens), minlength=uniq.size)
            resid = np.maximum(self.capacity[uniq] - others, 0.0)
            inv = inv.reshape(-1)
            bn = np.empty(r.size, dtype=np.int64)
            rates = solve_compressed(lens, inv, resid, self.cap[r], RTOL, bn)
            self._set_rates(r, rates)
            self._nb_add(self.bneck[r], -1)
            self.bneck[r] = np.where(bn >= 0, uniq[np.maximum(bn, 0)], -1)
            self._nb_add(self.bneck[r], +1)
            self.used[uniq] = others + np.bincount(inv, weights=np.repeat(rates, lens), minlength=uniq.size)
            self.stats["rate_solves"] += 1
            self.stats["partial_solves"] += 1
            self.stats["solved_flows"] += int(r.size)
            more = self._uncertified(uniq, inv, lens, rates, bn, in_r)
            if not more.size:
                return True
            r = np.union1d(r, more)
        return False

    def _uncertified(self, d, inv, lens, rates, bn, in_r) -> np.ndarray:
        """Flows outside R to add to R after its residual solve (R's links ``d``, its entries
        ``inv`` into them, ``rates`` and compressed bottlenecks ``bn``): the certificate.

        From the per-link summaries first: a link where flows outside R are bottlenecked
        passes if it is saturated and R's fastest flow on it is no faster than the slowest of
        them (``lvl``, a lower bound); a link where flows of R are bottlenecked passes if they
        are at least ``top`` (an upper bound of every rate on it).  Links that fail are then
        checked flow by flow (:meth:`_exact`), which also makes their summaries exact."""
        fastest = np.zeros(d.size)
        np.maximum.at(fastest, inv, np.repeat(rates, lens))
        mine = bn >= 0
        n_r = np.bincount(bn[mine], minlength=d.size)
        slowest = np.full(d.size, np.inf)
        np.minimum.at(slowest, bn[mine], rates[mine])
        outside = self.nb[d] - n_r  # flows outside R bottlenecked on each link
        full = self.used[d] >= self.capacity[d] * (1.0 - RTOL)
        lvl = self.lvl[d]
        bad = (outside > 0) & (~full | (fastest > lvl * (1.0 + 4 * RTOL)))
        bad |= (n_r > 0) & (slowest < self.top[d] * (1.0 - 4 * RTOL))
        self.top[d] = np.maximum(self.top[d], fastest)
        has = n_r > 0
        self.lvl[d[has]] = np.where(outside[has] > 0, np.minimum(lvl[has], slowest[has]), slowest[has])
        if not bad.any():
            return np.zeros(0, dtype=np.int64)
        return self._exact(d[bad], in_r)

    def _exact(self, d: np.ndarray, in_r: np.ndarray) -> np.ndarray:
        """The certificate flow by flow on links ``d``: flows outside R to add to R."""
        slots, on = self._on(d)
        if not slots.size:
            return slots
        pos = np.searchsorted(d, on)
        rate, outside = self.rate[slots], ~in_r[slots]
        fastest = np.zeros(d.size)
        np.maximum.at(fastest, pos, rate)
        self.top[d] = fastest
        at_bneck = self.bneck[slots] == on
        lvl = np.full(d.size, np.inf)
        np.minimum.at(lvl, pos[at_bneck], rate[at_bneck])
        self.lvl[d] = lvl
        exceeded = at_bneck & (rate < fastest[pos] * (1.0 - 4 * RTOL))
        full = self.used[d] >= self.capacity[d] * (1.0 - RTOL)
        # a flow outside R whose bottleneck is in d: still saturated, nobody on it faster?
        join = outside & at_bneck & (exceeded | ~full[pos])
        # a flow of R exceeded on its bottleneck: the faster flows outside R on that link join
        beaten = exceeded & ~outside
        if beaten.any():
            low = np.full(d.size, np.inf)
            np.minimum.at(low, pos[beaten], rate[beaten])
            join |= outside & (rate > low[pos] * (1.0 + 4 * RTOL))
        return np.unique(slots[join])

    # -------------------------------------------------- link -> flow index
    def _on(self, links: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every alive flow crossing one of the sorted, unique ``links``: ``(slot, link)`` pairs."""
        if self._ix_ptr is None or self._scanned >= REINDEX_SCANS * max(self.n_alive, 1024):
            self._reindex()
        ptr = self._ix_ptr
        lo, cnt = ptr[links], ptr[links + 1] - ptr[links]
        total = int(cnt.sum())
        ends = np.cumsum(cnt)
        slots = self._ix_slot[np.repeat(lo - (ends - cnt), cnt) + np.arange(total)]
        on = np.repeat(links, cnt)
        if self.n > self._ix_n:  # flows added since the index was built
            recent = np.arange(self._ix_n, self.n)
            ip, lk = self.paths(recent)
            self._scanned += int(lk.size)
            self._mark[links] = True
            hit = np.flatnonzero(self._mark[lk])
            self._mark[links] = False
            slots = np.concatenate([slots, recent[np.searchsorted(ip, hit, side="right") - 1]])
            on = np.concatenate([on, lk[hit]])
        keep = self.alive[slots]
        return slots[keep], on[keep]

    def _reindex(self) -> None:
        a = self.alive_slots()
        indptr, links = self.paths(a)
        order = np.argsort(links)  # grouped by link; order within a link is irrelevant
        self._ix_slot = np.repeat(a, np.diff(indptr))[order]
        self._ix_ptr = np.zeros(self.capacity.size + 1, dtype=np.int64)
        np.cumsum(np.bincount(links, minlength=self.capacity.size), out=self._ix_ptr[1:])
        self._ix_n = self.n
        self._scanned = 0

    def _full(self, a: np.ndarray) -> None:
        indptr, links = self.paths(a)
        inv, used = compress_links(links, self.capacity.size)
        bn = np.empty(a.size, dtype=np.int64)
        rates = solve_compressed(np.diff(indptr), inv, self.capacity[used].astype(np.float64), self.cap[a], RTOL, bn)
        self._set_rates(a, rates)
        self.bneck[a] = np.where(bn >= 0, used[np.maximum(bn, 0)], -1)
        per_entry = np.repeat(rates, np.diff(indptr))
        self.used = np.bincount(links, weights=per_entry, minlength=self.capacity.size)
        self.stats["rate_solves"] += 1
        self.stats["solved_flows"] += int(a.size)
        if self.incremental:  # the link -> flow index stays valid: flows added since are scanned
            self.top[:] = 0.0
            np.maximum.at(self.top, links, per_entry)
            self.nb[:] = 0
            self._nb_add(self.bneck[a], +1)
            on = self.bneck[a] >= 0
            self.lvl[:] = np.inf
            np.minimum.at(self.lvl, self.bneck[a][on], rates[on])
