"""The flow table on compiled kernels: :class:`~netsim.network.flowtable.FlowTable`'s interface
and algorithm, run by :mod:`~netsim.network.flowkernel` and :mod:`~netsim.network.flowrepair`.

:func:`available` says whether numba imports; without it the flow model keeps the numpy table
(the reference) and a run's notes say so.  Compiled code is cached on disk
(:mod:`~netsim.network.kernelcache`).
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

#: Fields of the kernels' scratch space (one :class:`Work` per table, regrown with it).
Work = namedtuple("Work", "slots r more lens starts bn fcap rates inr inv uniq resid bad ws wu")


def available() -> str | None:
    """``None`` when the compiled kernels can run, else why not (one line)."""
    try:
        from netsim.network import flowrepair  # noqa: F401  (imports numba: missing is a note, not an error)
    except ImportError as exc:  # numba missing or not built for this Python
        return f"numba unavailable ({exc}); the flow model ran on its numpy reference"
    return None


class CompiledFlowTable:
    """Draining flows, their rates and completions on compiled kernels; the interface of
    :class:`~netsim.network.flowtable.FlowTable` (what :class:`~netsim.network.flow.FlowNetwork`
    uses of it)."""

    def __init__(self, capacity: np.ndarray, *, incremental: bool = True, slots: int = 256, counters=None):
        from netsim.network import flowkernel as fk
        from netsim.network import flowrepair

        self._k, self._repair = fk, flowrepair
        n_links = capacity.size
        # the network's link counters, kept here as flows come and go (FlowNetwork._load): flows on
        # each link (int32), busy since (drained seconds), busy seconds, peak flows (int32)
        self.counters = counters if counters is not None else (
            np.zeros(n_links, np.int32), np.zeros(n_links), np.zeros(n_links), np.zeros(n_links, np.int32))
        self.capacity = capacity
        self.incremental = incremental
        self.scalars = np.zeros(fk.N_META, dtype=np.int64)
        self.scalars[fk.M_INCREMENTAL] = int(incremental)
        self.clock = np.zeros(1)
        self.lf = np.zeros((n_links, 4))  # one row per link (its fields together), one per flow below
        self.lf[:, fk.CAPACITY] = capacity
        self.li = np.zeros((n_links, 6), dtype=np.int64)
        self.li[:, fk.LMAP] = -1
        self.ff = np.zeros((0, fk.N_FF))
        # apart from the rows, as the scans read them: when each flow is due (drained seconds; inf:
        # never), its rate, its bottleneck link (-1: none or its cap)
        self.due, self.rate, self.bneck = np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.int32)
        self.done = np.zeros(0, dtype=np.int64)  # slots drained in one event (:meth:`event`)
        self.fi = np.zeros((0, fk.N_FI), dtype=np.int64)
        self.free = np.zeros(0, dtype=np.int64)
        self.fresh = np.zeros(0, dtype=np.int64)
        self.bmin = np.zeros(0)
        self.bdirty = np.zeros(0, dtype=np.int8)
        self.dlist = np.zeros(0, dtype=np.int64)
        self.pl = np.zeros((0, 3), dtype=np.int64)
        self.lbp = np.zeros((0, 2), dtype=np.int64)
        self.seeds = np.zeros(0, dtype=np.int64)
        self.out_links = np.zeros(0, dtype=np.int64)
        self._grow_slots(slots)
        self._relayout(1024)

    @classmethod
    def from_table(cls, t, counters=None) -> "CompiledFlowTable":
        """The same flows, rates and link summaries as the numpy table ``t``, taken between two
        events (nothing added or ended since its last solve)."""
        from netsim.network import flowkernel as fk

        assert not t._fresh and not t._changed, "migrate a flow table only right after a solve"
        a = t.alive_slots()
        c = cls(t.capacity, incremental=t.incremental, slots=max(256, 2 * a.size))  # counters: after add
        c.clock[0] = t.clock
        if a.size:
            indptr, links = t.paths(a)
            c.add(indptr, links, t.rem[a], t.lat[a], t.cap[a], 0, t.local[a])
            k = np.arange(a.size)  # a fresh table hands out slots 0, 1, ... in order
            c.ff[k, fk.TSET], c.due[k], c.rate[k] = t.tset[a], t.due[a], t.rate[a]
            c.fi[k, fk.OWNER], c.bneck[k] = t.owner[a], t.bneck[a]
            c.scalars[fk.M_FRESH] = 0
        if counters is not None:  # the network counted these flows already
            c.counters = counters
            c._eargs = None
        c.lf[:, fk.USED], c.lf[:, fk.LVL], c.lf[:, fk.TOP] = t.used, t.lvl, t.top
        c.li[:, fk.NB] = t.nb
        for name, at in (("rate_solves", fk.M_SOLVES), ("partial_solves", fk.M_PARTIAL),
                         ("solved_flows", fk.M_SOLVED), ("repair_rounds", fk.M_ROUNDS)):
            c.scalars[at] = t.stats[name]
        return c

    # ----------------------------------------------------------- storage
    def _grow_slots(self, size: int) -> None:
        fk = self._k
        old = self.ff.shape[0]
        ff = np.zeros((size, fk.N_FF))
        ff[:old] = self.ff
        due = np.full(size, np.inf)
        due[:old] = self.due
        rate = np.zeros(size)
        rate[:old] = self.rate
        bneck = np.full(size, -1, dtype=np.int32)
        bneck[:old] = self.bneck
        self.due, self.rate, self.bneck, self.done = due, rate, bneck, np.zeros(size, dtype=np.int64)
        fi = np.zeros((size, fk.N_FI), dtype=np.int64)
        fi[:old] = self.fi
        self.ff, self.fi = ff, fi
        n_free = int(self.scalars[fk.M_FREE])
        free = np.zeros(size, dtype=np.int64)
        free[:n_free] = self.free[:n_free]
        new = np.arange(size - 1, old - 1, -1)  # popped from the end: lowest slots first
        free[n_free:n_free + new.size] = new
        self.free = free
        self.scalars[fk.M_FREE] = n_free + new.size
        fresh = np.zeros(size, dtype=np.int64)
        fresh[:self.fresh.size] = self.fresh
        self.fresh = fresh
        nb = (size >> fk.BLOCK_BITS) + 1  # blocks of 64 slots, then groups of 64 blocks
        ng = (nb >> fk.BLOCK_BITS) + 1
        old_nb = self.dlist.size
        bmin = np.full(nb + ng, np.inf)
        bmin[:old_nb] = self.bmin[:old_nb]
        per_group = np.full(ng << fk.BLOCK_BITS, np.inf)
        per_group[:nb] = bmin[:nb]
        bmin[nb:] = per_group.reshape(ng, -1).min(axis=1)
        bdirty = np.zeros(nb + ng, dtype=np.int8)
        bdirty[:old_nb] = self.bdirty[:old_nb]
        dlist = np.zeros(nb, dtype=np.int64)
        n_dirty = int(self.scalars[fk.M_DIRTY])
        dlist[:n_dirty] = self.dlist[:n_dirty]
        bdirty[nb + (dlist[:n_dirty] >> fk.BLOCK_BITS)] = 1
        self.bmin, self.bdirty, self.dlist = bmin, bdirty, dlist
        self._work()

    def _work(self) -> None:
        s, n_links, p = self.ff.shape[0], self.lf.shape[0], self.pl.shape[0]
        i64 = np.int64
        self._eargs = None  # the arrays event() passes (rebuilt after any of them is replaced)
        self.w = Work(slots=np.zeros(s, i64), r=np.zeros(s, i64), more=np.zeros(s, i64),
                      lens=np.zeros(s, i64), starts=np.zeros(s, i64), bn=np.zeros(s, i64),
                      fcap=np.zeros(s), rates=np.zeros(s), inr=np.zeros(s, np.int8),
                      inv=np.zeros(max(p, 1), i64), uniq=np.zeros(n_links, i64), resid=np.zeros(n_links),
                      bad=np.zeros(n_links, i64), ws=np.zeros((5, n_links)), wu=np.zeros((5, n_links)))

    def _relayout(self, entries: int) -> None:
        """Pool and link blocks laid out afresh, with room for ``entries`` more path entries."""
        fk = self._k
        live = int(self.fi[self.fi[:, fk.ALIVE] == 1, fk.PLEN].sum())
        # never smaller than before: entries are only appended between relayouts, so a pool cut to what
        # is alive now fills again after a few submissions when flows come and go (a run's steps)
        size = max(4 * (live + entries), self.pl.shape[0], 1024)
        # the blocks of the links with flows (at most 10 entries a live one: rebuild), then room to spare;
        # nothing for the links without flows, so a relayout costs what is alive, not the fabric's size
        n_lb = max(12 * live + 2 * entries + 1024, self.lbp.shape[0])
        pl, lbp = np.zeros((size, 3), dtype=np.int64), np.zeros((n_lb, 2), dtype=np.int64)
        fk.rebuild(self.ff, self.fi, self.li, self.pl, self.lbp, self.scalars, pl, lbp)
        self.pl, self.lbp = pl, lbp
        self._eargs = None
        # links whose flows the next repair checks: those kept, then the entries of this pool that
        # leave or arrive before it (disjoint entries: at most the pool's size); scratch written before read
        n_seeds = int(self.scalars[fk.M_SEEDS])
        if self.seeds.size < n_seeds + size:
            seeds = np.zeros(n_seeds + size, dtype=np.int64)
            seeds[:n_seeds] = self.seeds[:n_seeds]
            self.seeds = seeds
        if self.out_links.size != size:
            self.out_links = np.zeros(size, dtype=np.int64)
        if getattr(self, "w", None) is None or self.w.slots.size != self.ff.shape[0]:
            self._work()
        elif self.w.inv.size != max(size, 1):  # only the entry map follows the pool's size (the per-link
            self.w = self.w._replace(inv=np.zeros(max(size, 1), np.int64))  # scratch is the fabric's: kept)

    @property
    def owner(self) -> np.ndarray:
        return self.fi[:, self._k.OWNER]

    @property
    def local(self) -> np.ndarray:
        return self.fi[:, self._k.LOCAL]

    @property
    def lat(self) -> np.ndarray:
        return self.ff[:, self._k.LAT]

    @property
    def n_alive(self) -> int:
        return int(self.scalars[self._k.M_ALIVE])

    @property
    def stats(self) -> dict:
        fk, m = self._k, self.scalars
        return {"rate_solves": int(m[fk.M_SOLVES]), "partial_solves": int(m[fk.M_PARTIAL]),
                "solved_flows": int(m[fk.M_SOLVED]), "repair_rounds": int(m[fk.M_ROUNDS])}

    def solve_counts(self) -> tuple[int, int]:
        """``(rate_solves, partial_solves)`` so far."""
        return int(self.scalars[self._k.M_SOLVES]), int(self.scalars[self._k.M_PARTIAL])

    def add(self, indptr: np.ndarray, links: np.ndarray, size: np.ndarray, lat: np.ndarray,
            cap: np.ndarray, owner: int, local: np.ndarray) -> None:
        """Append flows (CSR paths, bytes, latency, cap) of one submission."""
        fk = self._k
        links = np.ascontiguousarray(links, dtype=np.int64)
        self.make_room(int(size.size), links)
        fk.add_flows(self.ff, self.fi, self.li, self.pl, self.lbp, self.scalars, self.clock, self.free,
                     self.fresh, self.due, self.rate, self.bneck, self.bdirty, self.dlist, self.counters[0], self.counters[1], self.counters[3],
                     np.ascontiguousarray(indptr, dtype=np.int64),
                     links, np.ascontiguousarray(size, dtype=np.float64),
                     np.ascontiguousarray(lat, dtype=np.float64), np.ascontiguousarray(cap, dtype=np.float64),
                     int(owner), np.ascontiguousarray(local, dtype=np.int64))

    def make_room(self, k: int, links: np.ndarray) -> None:
        """Room for ``k`` more flows whose paths hold ``links`` (int64): slots, pool entries and
        link-block entries, grown as :meth:`add` needs them (the compiled run grows the table
        here too, at the same moments, so its layout is the event path's)."""
        fk = self._k
        nnz = int(links.size)
        if self.scalars[fk.M_FREE] < k:
            self._grow_slots(max(2 * self.ff.shape[0], self.ff.shape[0] + k))
        if self.scalars[fk.M_POOL] + nnz > self.pl.shape[0] or \
                self.scalars[fk.M_LB] + fk.lb_space(self.li, links) > self.lbp.shape[0]:
            self._relayout(nnz)
        need = int(self.scalars[fk.M_LB] + fk.lb_space(self.li, links))
        if need > self.lbp.shape[0]:  # the fresh layout's blocks still grow past its spare room
            lbp = np.zeros((2 * need, 2), dtype=np.int64)
            lbp[:self.lbp.shape[0]] = self.lbp
            self.lbp = lbp
            self._eargs = None

    # ------------------------------------------------------------- events
    def drain(self, dt: float) -> None:
        self.clock[0] += dt

    def next_due(self) -> float:
        return float(self._k.next_due(self.due, self.scalars, self.clock, self.bmin, self.bdirty, self.dlist))

    def take_drained(self, eps_t: float) -> tuple[np.ndarray, np.ndarray]:
        """Slots of the flows due within ``eps_t`` of the clock (removed), and their path links."""
        fk = self._k
        out = self.w.slots
        nd, nl = fk.take_drained(self.ff, self.fi, self.lf, self.li, self.pl, self.lbp, self.scalars, self.clock,
                                 self.free, self.due, self.rate, self.bneck, self.bmin, self.bdirty, self.dlist, self.seeds, float(eps_t),
                                 out, self.out_links, self.counters[0], self.counters[1], self.counters[2])
        return out[:nd].copy(), self.out_links[:nl].copy()

    def resolve(self) -> None:
        self._repair.resolve(self.ff, self.fi, self.lf, self.li, self.pl, self.lbp, self.scalars, self.clock,
                        self.fresh, self.seeds, self.due, self.rate, self.bneck, self.bdirty, self.dlist, self.w)

    def event(self, eps_t: float) -> tuple[np.ndarray, float]:
        """:meth:`take_drained`, :meth:`resolve` and :meth:`next_due` in one kernel call: the slots
        of the flows drained now, ordered by owner (a view, valid until the next call), and the
        seconds until the next flow is due."""
        if self._eargs is None:
            self._eargs = ((self.ff, self.fi, self.lf, self.li, self.pl, self.lbp, self.scalars, self.clock, self.free,
                            self.fresh, self.seeds, self.due, self.rate, self.bneck, self.bmin, self.bdirty, self.dlist),
                           (self.w, self.done, self.out_links, *self.counters[:3]))
        head, tail = self._eargs
        nd, t_next = self._repair.event(*head, float(eps_t), *tail)
        return self.done[:nd], float(t_next)

    def kernel_arrays(self) -> tuple:
        """Every array of the table, in the order :func:`netsim.network.runkernel.run` takes them
        (valid until the table grows)."""
        load, busy_since, busy, peak = self.counters
        return (self.ff, self.fi, self.lf, self.li, self.pl, self.lbp, self.scalars, self.clock, self.free,
                self.fresh, self.seeds, self.due, self.rate, self.bneck, self.bmin, self.bdirty, self.dlist,
                self.w, self.done, self.out_links, load, busy_since, busy, peak)

    def compact(self) -> None:
        """Slots are recycled as flows end: nothing to compact."""
