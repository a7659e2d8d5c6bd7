"""When the vectorized pass is exact on a flow network with shared links.

On the flow network a transfer's rate depends on which other flows cross its links
while it drains.  :mod:`~netsim.collectives.fastpath` computes each step's durations
as if all of the step's transfers started together and nothing else ran
(:meth:`FlowNetwork.alone <netsim.network.flow.FlowNetwork.alone>`).  Max-min fair sharing decomposes over *components*
(transfers of one step connected through shared links): flows of different
components never meet, so each component's durations are exact if, in the actual
run,

1. all transfers of the component start at one instant (checked on the transfers that
   cross contended links: components through other links join one rank pair's transfers
   of one step, which start together anyway), and
2. no transfer of another step still occupies one of its *contended* links
   (links that carry two different rank pairs somewhere in the schedule) when it
   starts.

Links carrying one rank pair only need no check: transfers of one pair in different
steps never overlap (the later one starts after both ends finished the earlier
step).  :class:`Lockstep` checks 1 and 2 on the max-plus recurrence itself, step by
step; a transfer occupies its links from its start until it has drained.  Both
conditions are statements about the event-driven execution, so a run that passes
them is the event-driven result; the first step that fails sends the collective
back to the event-driven executor.

Times compared are floats computed along different sums, so "at one instant" and
"not before" allow :data:`RTOL` of relative slack: an overlap of δ seconds changes
no finish time by more than δ, far below the 1e-9 to which the engines are tested
equal.
"""

from __future__ import annotations

import numpy as np

__all__ = ["contended_links", "components", "StepShare", "Lockstep", "RTOL"]

#: Relative slack of the time comparisons (see the module docstring).
RTOL = 1e-12


def contended_links(n_links: int, n: int, steps) -> np.ndarray | None:
    """Mask of links that carry transfers of two different rank pairs in ``steps``
    (``(step, (indptr, links))`` items, ranks local to an ``n``-rank schedule), or ``None``
    when there is no such link.

    >>> from netsim.collectives.schedule import Step
    >>> st = Step(np.array([0, 1]), np.array([1, 2]), np.ones(2))
    >>> contended_links(3, 3, [(st, (np.array([0, 1, 2]), np.array([0, 1])))]) is None
    True
    >>> contended_links(3, 3, [(st, (np.array([0, 1, 2]), np.array([0, 0])))]).tolist()
    [True, False, False]
    """
    lo = np.full(n_links, np.iinfo(np.int64).max)
    hi = np.full(n_links, -1, dtype=np.int64)
    for step, (indptr, links) in steps:
        if not links.size:
            continue
        es, ed = step.endpoints()
        pair = np.minimum(es, ed).astype(np.int64) * n + np.maximum(es, ed)
        per_link = np.repeat(pair, np.diff(indptr))
        np.minimum.at(lo, links, per_link)
        np.maximum.at(hi, links, per_link)
    mask = (hi >= 0) & (lo != hi)
    return mask if mask.any() else None


def components(ent: np.ndarray, links: np.ndarray, m: int) -> np.ndarray:
    """Component label of each of ``m`` transfers, given incidence entries (``ent[i]`` uses
    link ``links[i]``): transfers connected through shared links get the smallest index
    among them.  Shiloach-Vishkin style: hook every tree onto the smallest root its links
    touch, compress paths, repeat (O(log m) rounds).

    >>> components(np.array([0, 1, 2]), np.array([5, 6, 5]), 3).tolist()
    [0, 1, 0]
    """
    lab = np.arange(m, dtype=np.int64)
    if not ent.size:
        return lab
    by_link = np.argsort(links, kind="stable")
    lk = links[by_link]
    l_first = np.flatnonzero(np.r_[True, lk[1:] != lk[:-1]])
    l_len = np.diff(np.r_[l_first, lk.size])
    while True:
        roots = lab[ent]
        per_entry = np.empty(ent.size, dtype=np.int64)
        per_entry[by_link] = np.repeat(np.minimum.reduceat(roots[by_link], l_first), l_len)
        new = lab.copy()
        np.minimum.at(new, roots, per_entry)  # hook whole trees onto the smallest root they touch
        while True:  # then compress every path to its root
            nxt = new[new]
            if np.array_equal(nxt, new):
                break
            new = nxt
        if np.array_equal(new, lab):
            return lab
        lab = new


def _distinct(values: np.ndarray, size: int) -> np.ndarray:
    """Sorted distinct values of an int array in ``[0, size)`` (a mask; no hashing)."""
    seen = np.zeros(size, dtype=bool)
    seen[values] = True
    return np.flatnonzero(seen)


class StepShare:
    """What :class:`Lockstep` checks for one step pattern (transfers in ``order``).

    ``order``: the pattern's transfer order (indices into the step's transfers); ``drain``:
    seconds each transfer occupies its links, in pattern order.
    """

    def __init__(self, routes: tuple[np.ndarray, np.ndarray], mask: np.ndarray, order: np.ndarray,
                 drain: np.ndarray):
        self.drain = drain
        indptr, links = routes
        pos = np.empty(order.size, dtype=np.int64)
        pos[order] = np.arange(order.size)  # step transfer -> position in the pattern
        hit = mask[links]
        ent = np.repeat(pos, np.diff(indptr))[hit]
        self.ent_t, self.ent_l = ent, links[hit]
        self.links = _distinct(self.ent_l, mask.size)
        self.touch = _distinct(ent, order.size)  # transfers on contended links
        self._groups = None

    def groups(self) -> tuple[np.ndarray, np.ndarray]:
        """Transfers on contended links grouped by component: ``(order, bounds)`` for
        ``reduceat`` (computed on first use: most steps pass the plain all-equal test)."""
        if self._groups is None:
            local = np.searchsorted(self.touch, self.ent_t)
            lab = components(local, self.ent_l, self.touch.size)
            by = np.argsort(lab, kind="stable")
            k = lab[by]
            self._groups = (self.touch[by], np.flatnonzero(np.r_[True, k[1:] != k[:-1]]))
        return self._groups


class Lockstep:
    """Running check of conditions 1 and 2 (module docstring) along the recurrence."""

    def __init__(self, n_links: int):
        self.busy = np.full(n_links, -np.inf)  # latest delivery of a transfer on each contended link
        self.ok = True

    def step(self, share: StepShare, start: np.ndarray) -> bool:
        """Check one step (``start`` per transfer, pattern order); returns ``ok``."""
        if not self.ok:
            return False
        slack = RTOL * max(float(np.abs(start).max()), 1e-300)
        if share.ent_t.size and (start[share.ent_t] < self.busy[share.ent_l] - slack).any():
            self.ok = False
        elif share.touch.size:
            s = start[share.touch]
            if float(s.max() - s.min()) > slack:  # not all together: then each component must be
                order, bounds = share.groups()
                s = start[order]
                spread = np.maximum.reduceat(s, bounds) - np.minimum.reduceat(s, bounds)
                self.ok = not (spread > slack).any()
        if self.ok and share.ent_t.size:
            t = share.ent_t
            np.maximum.at(self.busy, share.ent_l, start[t] + share.drain[t])
        return self.ok

    def shift(self, share: StepShare, dt: float) -> None:
        """Steps skipped by the periodic extrapolation: this pattern's links moved by ``dt``."""
        self.busy[share.links] += dt
