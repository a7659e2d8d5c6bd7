"""Max-min fair bandwidth allocation (progressive filling) over a CSR incidence.

A flow ``f`` crosses the directed links ``links[indptr[f]:indptr[f+1]]``.
Every link's capacity is shared max-min fairly among the flows crossing it:
all unfrozen flows grow at the same rate until a link saturates (or a flow
reaches its own ``rate_cap``); the flows through that bottleneck are frozen
and the rest keep growing.  The loop below runs once per *bottleneck level*
(distinct rate value); everything inside a level is vectorized with numpy.

Ties: at a level ``x`` every unfrozen flow on a link whose fair share is
``<= x * (1 + rtol)``, and every flow whose cap is, is frozen at exactly
``x``, so near-equal shares do not spawn extra levels and the links involved
never end up over capacity.

Cost per solve: ``O(nnz)`` (plus a sort when only few of ``capacity``'s links
are used) to compress the used links and build the link -> flows transpose;
then, per level, ``O(frontier)`` to find the smallest fair share (a subset of
the used links that provably holds it, rebuilt in ``O(used links)`` when
exhausted) plus the entries of the flows frozen at that level, so each
incidence entry is handled a bounded number of times in total.  Identical
input gives bit-identical output.

Examples
--------
>>> import numpy as np
>>> indptr = np.array([0, 2, 3, 4])          # flow 0: A,B; flow 1: B; flow 2: A
>>> links = np.array([0, 1, 1, 0])
>>> max_min_rates(indptr, links, np.array([10.0, 4.0])).tolist()
[2.0, 2.0, 8.0]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["drain_alone", "link_loads", "max_min_rates"]

#: How many capped flows :func:`_min_active_cap` inspects per numpy call.
_CAP_CHUNK = 256
#: Links kept in the frontier of smallest fair shares; all links if there are few.
_FRONTIER = 1024


@dataclass
class _State:
    """Mutable progressive-filling state over the *used* links only."""

    inv: np.ndarray  # per incidence entry: index of its link among used links (int32)
    t_indptr: np.ndarray  # transpose CSR: used link -> flows crossing it
    t_flows: np.ndarray
    n: np.ndarray  # unfrozen flows per used link
    rem: np.ndarray  # capacity not yet taken by frozen flows
    share: np.ndarray  # rem / n, or inf where n == 0
    active: np.ndarray  # per flow: not frozen yet
    slot: np.ndarray  # per flow scratch for de-duplication
    cap_order: np.ndarray  # flows with a finite cap, by increasing cap
    cap_sorted: np.ndarray  # their caps, sorted
    cap_ptr: int = 0  # caps before this position belong to frozen flows
    frontier: np.ndarray | None = None  # links that may hold the smallest share
    bound: float = 0.0  # every link outside the frontier has share >= bound


def _gather(indptr: np.ndarray, data: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Concatenate the CSR segments ``data[indptr[r]:indptr[r+1]]`` for ``r`` in ``rows``."""
    starts = indptr[rows]
    lens = indptr[rows + 1] - starts
    ends = np.cumsum(lens)
    if ends.size == 0 or ends[-1] == 0:
        return data[:0]
    return data[np.repeat(starts - (ends - lens), lens) + np.arange(ends[-1])]


def _run_lengths(keys: np.ndarray, n_keys: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values of a non-empty int array in ``[0, n_keys)`` and their multiplicities."""
    if 4 * keys.size >= n_keys:  # dense: bincount is O(n_keys) but a single pass
        cnt = np.bincount(keys, minlength=n_keys)
        idx = np.flatnonzero(cnt)
        return idx, cnt[idx]
    keys = np.sort(keys)
    first = np.empty(keys.size + 1, dtype=bool)
    first[0] = first[-1] = True
    np.not_equal(keys[1:], keys[:-1], out=first[1:-1])
    bounds = np.flatnonzero(first)
    return keys[bounds[:-1]], bounds[1:] - bounds[:-1]


def _compress_links(links: np.ndarray, n_total: int) -> tuple[np.ndarray, np.ndarray]:
    """Map link ids to ``0..L-1`` over the used links; return that map and the used ids."""
    if links.size == 0:
        return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int64)
    if n_total <= 8 * links.size + 4096:  # dense map: O(nnz + n_total), no sort
        used = np.zeros(n_total, dtype=bool)
        used[links] = True
        remap = np.cumsum(used, dtype=np.int32) - 1
        return remap[links], np.flatnonzero(used)
    uniq, inv = np.unique(links, return_inverse=True)
    return inv.reshape(-1).astype(np.int32), uniq


def _transpose(inv: np.ndarray, lengths: np.ndarray, n_used: int) -> tuple[np.ndarray, np.ndarray]:
    """Link -> flows CSR (flows ascending within each link) from the flow -> link incidence."""
    key = inv.astype(np.uint16) if n_used <= 1 << 16 else inv
    order = np.argsort(key, kind="stable")  # radix sort for 16-bit keys
    flow_of_entry = np.repeat(np.arange(lengths.size, dtype=np.int32), lengths)
    t_indptr = np.zeros(n_used + 1, dtype=np.int64)
    np.cumsum(np.bincount(inv, minlength=n_used), out=t_indptr[1:])
    return t_indptr, flow_of_entry[order]


def _setup(indptr, links, capacity, rate_cap, rates) -> _State:
    """Compress links, build the transpose and the initial shares; mark trivial flows."""
    lengths = np.diff(indptr)
    inv, used = _compress_links(links, capacity.size)
    rem = capacity[used]
    if not np.all(rem > 0):
        raise ValueError("capacity of every used link must be > 0")
    t_indptr, t_flows = _transpose(inv, lengths, used.size)
    n = np.diff(t_indptr)
    finite = np.isfinite(rate_cap)
    free = (lengths == 0) & ~finite  # empty path, no cap: unconstrained
    rates[free] = np.inf
    capped = np.flatnonzero(finite)
    cap_order = capped[np.argsort(rate_cap[capped], kind="stable")]
    slot = np.empty(lengths.size, dtype=np.int64)
    return _State(inv, t_indptr, t_flows, n, rem, rem / n, ~free, slot, cap_order, rate_cap[cap_order])


def _min_active_cap(st: _State) -> float:
    """Smallest cap among unfrozen capped flows; skips frozen ones in chunks."""
    order, p = st.cap_order, st.cap_ptr
    if p >= order.size:
        return np.inf
    while p < order.size:
        chunk = st.active[order[p : p + _CAP_CHUNK]]
        if chunk.any():
            p += int(chunk.argmax())
            break
        p += chunk.size
    st.cap_ptr = p
    return float(st.cap_sorted[p]) if p < order.size else np.inf


def _min_share(st: _State, rtol: float) -> float:
    """Smallest fair share; rebuilds the frontier when it may no longer hold it.

    Shares only grow during progressive filling, so links outside the frontier
    keep ``share >= bound``; a margin of ``rtol`` absorbs rounding.
    """
    if st.frontier is not None and st.frontier.size:
        low = float(st.share[st.frontier].min())
        if st.bound == np.inf or low * (1.0 + rtol) ** 2 < st.bound:
            return low
    live = np.flatnonzero(st.n > 0)
    shares = st.share[live]
    if live.size <= 4 * _FRONTIER:
        st.frontier, st.bound = live, np.inf
    else:
        kth = np.partition(shares, _FRONTIER)[_FRONTIER]
        inside = shares <= kth
        st.frontier, st.bound = live[inside], float(shares[~inside].min(initial=np.inf))
    return float(shares.min()) if shares.size else np.inf


def _frozen_flows(st: _State, thr: float) -> np.ndarray:
    """Unfrozen flows on links with share <= ``thr`` or with cap <= ``thr``, each once."""
    sat = st.frontier[st.share[st.frontier] <= thr]
    cand = _gather(st.t_indptr, st.t_flows, sat)
    hi = max(int(np.searchsorted(st.cap_sorted, thr, side="right")), st.cap_ptr)
    if hi > st.cap_ptr:
        cand = np.concatenate((cand, st.cap_order[st.cap_ptr : hi]))
        st.cap_ptr = hi
    cand = cand[st.active[cand]]
    pos = np.arange(cand.size)
    st.slot[cand] = pos  # whichever duplicate wins, one copy of each flow survives
    return cand[st.slot[cand] == pos]


def _freeze_level(st: _State, indptr: np.ndarray, rates: np.ndarray, level: float, rtol: float) -> int:
    """Freeze every flow bottlenecked at ``level`` (within ``rtol``); return how many."""
    frozen = _frozen_flows(st, level * (1.0 + rtol))
    rates[frozen] = level
    st.active[frozen] = False
    touched = _gather(indptr, st.inv, frozen)
    if touched.size:
        idx, cnt = _run_lengths(touched, st.n.size)
        n = st.n[idx] - cnt
        rem = np.maximum(st.rem[idx] - level * cnt, 0.0)
        st.n[idx], st.rem[idx] = n, rem
        st.share[idx] = np.where(n > 0, rem / np.maximum(n, 1), np.inf)
    return int(frozen.size)


def _validate(indptr, links, capacity, rate_cap, rtol):
    """Coerce dtypes and check the CSR structure; raise ``ValueError`` on bad input."""
    indptr = np.asarray(indptr, dtype=np.int64).reshape(-1)
    links = np.asarray(links).reshape(-1)
    if links.size and not np.issubdtype(links.dtype, np.integer):
        raise ValueError(f"links must be integers, got dtype {links.dtype}")
    capacity = np.asarray(capacity, dtype=np.float64).reshape(-1)
    if not rtol >= 0:
        raise ValueError(f"rtol must be >= 0, got {rtol!r}")
    if indptr.size == 0 or indptr[0] != 0 or indptr[-1] != links.size:
        raise ValueError("indptr must start at 0 and end at len(links)")
    if np.any(np.diff(indptr) < 0):
        raise ValueError("indptr must be non-decreasing")
    if links.size and (links.min() < 0 or links.max() >= capacity.size):
        raise ValueError(f"link ids must lie in [0, {capacity.size})")
    n_flows = indptr.size - 1
    if rate_cap is None:
        rate_cap = np.full(n_flows, np.inf)
    rate_cap = np.asarray(rate_cap, dtype=np.float64).reshape(-1)
    if rate_cap.size != n_flows:
        raise ValueError(f"rate_cap has {rate_cap.size} entries for {n_flows} flows")
    if np.any(np.isnan(rate_cap)) or np.any(rate_cap < 0):
        raise ValueError("rate_cap must be >= 0 (np.inf for no cap)")
    return indptr, links, capacity, rate_cap


def max_min_rates(
    indptr: np.ndarray,
    links: np.ndarray,
    capacity: np.ndarray,
    *,
    rate_cap: np.ndarray | None = None,
    rtol: float = 1e-9,
) -> np.ndarray:
    """Max-min fair rate of every flow, by progressive filling.

    Parameters
    ----------
    indptr : ndarray of int64, shape (F + 1,)
        CSR row pointer: flow ``f`` uses ``links[indptr[f]:indptr[f+1]]``.
    links : ndarray of int
        Link ids (each at most once per flow), indices into ``capacity``.
    capacity : ndarray of float64
        Capacity of every link in B/s (> 0 on the links used).  May cover the
        whole topology; only referenced links cost anything.
    rate_cap : ndarray of float64, shape (F,), optional
        Per-flow upper bound (NIC or QP limit); ``np.inf`` means none.
    rtol : float
        Relative tolerance: links whose fair share is within ``rtol`` of the
        current level, and caps within it, are frozen at that same level.

    Returns
    -------
    ndarray of float64, shape (F,)
        The rates.  A flow with an empty path and no cap gets ``np.inf``.

    Examples
    --------
    >>> import numpy as np
    >>> max_min_rates(np.array([0, 1, 2]), np.array([0, 0]), np.array([8.0])).tolist()
    [4.0, 4.0]
    >>> max_min_rates(np.array([0, 1, 2]), np.array([0, 0]), np.array([8.0]),
    ...               rate_cap=np.array([1.0, np.inf])).tolist()
    [1.0, 7.0]
    """
    indptr, links, capacity, rate_cap = _validate(indptr, links, capacity, rate_cap, rtol)
    rates = np.zeros(indptr.size - 1)
    st = _setup(indptr, links, capacity, rate_cap, rates)
    remaining = int(st.active.sum())
    while remaining:
        level = min(_min_active_cap(st), _min_share(st, rtol))
        if not np.isfinite(level):  # unreachable for valid input; keep the loop finite
            rates[st.active] = np.inf
            break
        frozen = _freeze_level(st, indptr, rates, level, rtol)
        if frozen == 0:  # defensive: progressive filling always freezes a flow
            raise RuntimeError(f"max-min solver made no progress at level {level!r}")
        remaining -= frozen
    return rates


def link_loads(indptr: np.ndarray, links: np.ndarray, rates: np.ndarray, n_links: int) -> np.ndarray:
    """Sum of the rates of the flows crossing each link.

    Parameters
    ----------
    indptr, links : ndarray
        The flow -> link CSR incidence, as for :func:`max_min_rates`.
    rates : ndarray of float64, shape (F,)
        Rate of every flow.
    n_links : int
        Length of the result (number of links in the topology).

    Returns
    -------
    ndarray of float64, shape (n_links,)

    Examples
    --------
    >>> import numpy as np
    >>> link_loads(np.array([0, 2, 3]), np.array([0, 1, 1]), np.array([2.0, 3.0]), 3).tolist()
    [2.0, 5.0, 0.0]
    """
    indptr = np.asarray(indptr, dtype=np.int64)
    per_entry = np.repeat(np.asarray(rates, dtype=np.float64), np.diff(indptr))
    return np.bincount(np.asarray(links, dtype=np.int64), weights=per_entry, minlength=n_links)


def drain_alone(indptr: np.ndarray, links: np.ndarray, nbytes: np.ndarray, capacity: np.ndarray,
                rate_cap: np.ndarray | None = None, max_rounds: int = 8) -> tuple[np.ndarray, bool, int]:
    """Seconds each flow needs to drain when all start together and nothing else runs.

    Max-min rates are solved, the flows that drain first leave, and the rest are re-solved:
    the fluid model of one batch alone (flows due within 1e-9 relative of the first leave
    together).  Returns ``(drain, complete, solves)``; after ``max_rounds`` solves the flows
    left keep their last rates (``complete`` is then False): a feasible allocation still, so
    no link ever carries more than its capacity.  Flows with no bytes or no links drain at 0.

    >>> ip, lk = np.array([0, 1, 2]), np.array([0, 0])
    >>> drain_alone(ip, lk, np.array([1.0, 3.0]), np.array([2.0]))[0].tolist()
    [1.0, 2.0]
    """
    nbytes = np.asarray(nbytes, dtype=np.float64)
    drain = np.zeros(nbytes.size)
    rem = nbytes.copy()
    active = np.flatnonzero((np.diff(indptr) > 0) & (nbytes > 0))
    t, solves = 0.0, 0
    while active.size:
        lengths = np.diff(indptr)[active]
        starts = np.concatenate(([0], np.cumsum(lengths)))
        lk = links if active.size == nbytes.size else _gather(indptr, links, active)
        rates = max_min_rates(starts, lk, capacity, rate_cap=None if rate_cap is None else rate_cap[active])
        solves += 1
        left = rem[active] / rates
        dt = float(left.min())
        done = left <= dt * (1 + 1e-9)
        if solves >= max_rounds and not done.all():
            drain[active] = t + left
            return drain, False, solves
        t += dt
        drain[active[done]] = t
        rem[active] -= rates * dt
        active = active[~done]
    return drain, True, solves
