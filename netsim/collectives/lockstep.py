"""When the vectorized pass is exact on a flow network with shared links.

On the flow network a transfer's rate depends on which other flows cross its links
while it drains.  :mod:`~netsim.collectives.fastpath` computes each step's durations
as if all of the step's transfers started together and nothing else ran
(``_lockstep_drain``).  Max-min fair sharing decomposes over *components*
(transfers of one step connected through shared links): flows of different
components never meet, so each component's durations are exact if, in the actual
run,

1. all transfers of the component start at one instant, and
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

from netsim.collectives.schedule import Step

__all__ = ["contended_links", "components", "StepShare", "Lockstep", "RTOL"]

#: Relative slack of the time comparisons (see the module docstring).
RTOL = 1e-12


def contended_links(n_links: int, n: int, steps) -> np.ndarray | None:
    """Mask of links that carry transfers of two different rank pairs in ``steps``
    (``(step, (indptr, links))`` items, ranks local to an ``n``-rank schedule), or ``None``
    when there is no such link.

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


def components(indptr: np.ndarray, links: np.ndarray, n_links: int) -> np.ndarray:
    """Component label of every transfer (transfers connected through shared links share
    the smallest index among them); label propagation with pointer jumping.

    >>> components(np.array([0, 1, 2, 3]), np.array([5, 6, 5]), 8).tolist()
    [0, 1, 0]
    """
    m = indptr.size - 1
    lab = np.arange(m, dtype=np.int64)
    if not links.size:
        return lab
    ent = np.repeat(lab, np.diff(indptr))
    big = np.iinfo(np.int64).max
    while True:
        per_link = np.full(n_links, big)
        np.minimum.at(per_link, links, lab[ent])
        new = lab.copy()
        np.minimum.at(new, ent, per_link[links])
        new = new[new]  # pointer jumping: follow labels to their own labels
        if np.array_equal(new, lab):
            return lab
        lab = new


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
        ent = np.repeat(np.arange(order.size), np.diff(indptr))
        hit = mask[links]
        self.ent_t, self.ent_l = pos[ent[hit]], links[hit]
        self.links = np.unique(self.ent_l)
        lab = pos[components(indptr, links, mask.size)]  # labels in pattern positions
        lab_at = np.empty(order.size, dtype=np.int64)
        lab_at[pos] = lab
        sizes = np.bincount(lab_at, minlength=order.size)
        multi = np.flatnonzero(sizes[lab_at] > 1)
        by = multi[np.argsort(lab_at[multi], kind="stable")]
        self.comp_order = by
        first = np.r_[True, lab_at[by][1:] != lab_at[by][:-1]] if by.size else np.zeros(0, bool)
        self.comp_bounds = np.flatnonzero(first)


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
        elif share.comp_order.size:
            s = start[share.comp_order]
            spread = np.maximum.reduceat(s, share.comp_bounds) - np.minimum.reduceat(s, share.comp_bounds)
            self.ok = not (spread > slack).any()
        if self.ok and share.ent_t.size:
            t = share.ent_t
            np.maximum.at(self.busy, share.ent_l, start[t] + share.drain[t])
        return self.ok

    def shift(self, share: StepShare, dt: float) -> None:
        """Steps skipped by the periodic extrapolation: this pattern's links moved by ``dt``."""
        self.busy[share.links] += dt
