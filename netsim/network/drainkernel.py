"""Compiled :func:`~netsim.network.maxmin.drain_staggered` (numba): the fluid drain of a few flows
that start at different instants, step for step as the numpy reference (the same solves, by
:mod:`~netsim.network.flowrepair`'s ``_solve``, the same tie rule and arrival order).

The collectives' fast path times thousands of small staggered components per step
(:class:`~netsim.collectives.lockstep.Stagger`); in numpy each drain costs about a millisecond of
call overhead, here a few microseconds.  ``tests/test_stagger.py`` checks it against the reference.
"""

from __future__ import annotations

import numpy as np

from netsim.network.flowrepair import _solve
from netsim.network.kernelcache import kernel
from netsim.network.maxmin import compress_links

__all__ = ["drain_staggered_compiled"]


@kernel
def _drain(lens, starts, inv, nu, cap_used, nbytes, caps, start, order, max_solves, finish):
    """Fill ``finish`` for the flows ``order`` (by start); False past ``max_solves`` solves."""
    nlive = order.size
    rem = nbytes.copy()
    act = np.empty(nlive, dtype=np.int64)
    lens_a = np.empty(nlive, dtype=np.int64)
    st_a = np.empty(nlive, dtype=np.int64)
    caps_a = np.empty(nlive)
    rates = np.empty(nlive)
    bn = np.empty(nlive, dtype=np.int64)
    ws = np.empty((5, max(nu, 1)))
    na = 0
    i = 0
    solves = 0
    t = start[order[0]]
    while na > 0 or i < nlive:
        while i < nlive and start[order[i]] <= t:
            act[na] = order[i]
            na += 1
            i += 1
        if na == 0:
            t = start[order[i]]
            continue
        for q in range(na):
            f = act[q]
            lens_a[q] = lens[f]
            st_a[q] = starts[f]
            caps_a[q] = caps[f]
        _solve(na, lens_a, st_a, inv, nu, cap_used, caps_a, 1e-9, rates, bn, ws)
        solves += 1
        if solves > max_solves:
            return False
        dt = np.inf
        for q in range(na):
            left = rem[act[q]] / rates[q]
            if left < dt:
                dt = left
        gap = start[order[i]] - t if i < nlive else np.inf
        if dt <= gap:
            keep = 0
            for q in range(na):
                f = act[q]
                if rem[f] / rates[q] <= dt * (1 + 1e-9):
                    finish[f] = t + dt
                else:
                    rem[f] -= rates[q] * dt
                    act[keep] = f
                    rates[keep] = rates[q]
                    keep += 1
            na = keep
            t += dt
        else:
            for q in range(na):
                rem[act[q]] -= rates[q] * gap
            t = start[order[i]]
    return True


def drain_staggered_compiled(indptr: np.ndarray, links: np.ndarray, nbytes: np.ndarray, capacity: np.ndarray,
                             start: np.ndarray, rate_cap: np.ndarray | None = None,
                             max_solves: int = 1024) -> np.ndarray | None:
    """:func:`~netsim.network.maxmin.drain_staggered` on numba (same arguments and result; the
    input is assumed valid, as the collectives' fast path builds it)."""
    nbytes = np.asarray(nbytes, dtype=np.float64)
    start = np.asarray(start, dtype=np.float64)
    finish = start.copy()
    lengths = np.diff(indptr).astype(np.int64)
    live = np.flatnonzero((lengths > 0) & (nbytes > 0))
    if not live.size:
        return finish
    inv, used = compress_links(np.asarray(links), capacity.size)
    caps = np.full(nbytes.size, np.inf) if rate_cap is None else np.asarray(rate_cap, dtype=np.float64)
    order = live[np.argsort(start[live], kind="stable")]
    ok = _drain(lengths, np.asarray(indptr[:-1], dtype=np.int64), inv.astype(np.int64), used.size,
                np.asarray(capacity, dtype=np.float64)[used], nbytes, caps, start, order, max_solves, finish)
    return finish if ok else None
