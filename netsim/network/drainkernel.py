"""Compiled :func:`~netsim.network.maxmin.drain_staggered` (numba): the fluid drain of a few flows
that start at different instants, step for step as the numpy reference (the same solves, by
:mod:`~netsim.network.flowrepair`'s ``solve_flows``, the same tie rule and arrival order).

The collectives' fast path times thousands of small staggered components per step
(:class:`~netsim.collectives.lockstep.Stagger`); in numpy each drain costs about a millisecond of
call overhead, here a few microseconds.  ``tests/test_stagger.py`` checks it against the reference.
"""

from __future__ import annotations

import numpy as np

from netsim.network.flowrepair import solve_flows
from netsim.network.kernelcache import kernel

__all__ = ["drain_one", "drain_staggered_batch"]


@kernel
def drain_one(lens, starts, inv, nu, cap_used, nbytes, caps, start, order, max_solves, finish):
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
        solve_flows(na, lens_a, st_a, inv, nu, cap_used, caps_a, 1e-9, rates, bn, ws)
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


@kernel
def _drain_batch(comp_ptr, link_ptr, order, lens, starts, inv, cap_used, nbytes, caps, start, max_solves, finish):
    """:func:`drain_one` for each component ``c``: flows ``order[comp_ptr[c]:comp_ptr[c+1]]`` (by
    start), on local links ``link_ptr[c]..link_ptr[c+1]-1`` (``inv`` already relative to them)."""
    for c in range(comp_ptr.size - 1):
        a, b = comp_ptr[c], comp_ptr[c + 1]
        if a == b:
            continue
        lo, hi = link_ptr[c], link_ptr[c + 1]
        if not drain_one(lens, starts, inv, hi - lo, cap_used[lo:hi], nbytes, caps, start, order[a:b], max_solves,
                      finish):
            return False
    return True


def drain_staggered_batch(indptr: np.ndarray, links: np.ndarray, nbytes: np.ndarray, capacity: np.ndarray,
                          start: np.ndarray, rate_cap: np.ndarray, comp_ptr: np.ndarray,
                          max_solves: int = 1024) -> np.ndarray | None:
    """:func:`~netsim.network.maxmin.drain_staggered` of many independent batches in one numba call: flows
    ``comp_ptr[c]:comp_ptr[c+1]`` form batch ``c``, and no two batches share a link (the
    components of :class:`~netsim.collectives.lockstep.Stagger`).  ``None`` if any batch passes
    ``max_solves``."""
    nbytes = np.asarray(nbytes, dtype=np.float64)
    start = np.asarray(start, dtype=np.float64)
    finish = start.copy()
    lengths = np.diff(indptr).astype(np.int64)
    n_comp = comp_ptr.size - 1
    comp_of = np.repeat(np.arange(n_comp), np.diff(comp_ptr))
    live = (lengths > 0) & (nbytes > 0)
    order = np.lexsort((start, comp_of))  # by batch, then by start (stable)
    order = order[live[order]]
    live_ptr = np.searchsorted(comp_of[order], np.arange(n_comp + 1))
    links = np.asarray(links)
    if not links.size:
        return finish
    # local link ids by first appearance: batches are link-disjoint, so each batch's ids are contiguous
    uniq, first, inv = np.unique(links, return_index=True, return_inverse=True)
    by_first = np.argsort(first, kind="stable")
    rank = np.empty(uniq.size, dtype=np.int64)
    rank[by_first] = np.arange(uniq.size)
    inv = rank[inv.reshape(-1)]
    ent_comp = np.repeat(comp_of, lengths)
    link_ptr = np.zeros(n_comp + 1, dtype=np.int64)
    np.maximum.at(link_ptr, ent_comp + 1, inv + 1)
    link_ptr = np.maximum.accumulate(link_ptr)
    inv = inv - link_ptr[ent_comp]
    cap_used = np.asarray(capacity, dtype=np.float64)[uniq[by_first]]
    ok = _drain_batch(live_ptr.astype(np.int64), link_ptr, order.astype(np.int64), lengths,
                      np.asarray(indptr[:-1], dtype=np.int64), inv, cap_used, nbytes,
                      np.asarray(rate_cap, dtype=np.float64), start, max_solves, finish)
    return finish if ok else None
