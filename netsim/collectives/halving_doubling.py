"""Rabenseifner's halving-doubling: recursive-halving reduce-scatter, recursive-doubling
all-gather, and the all-reduce made of the two.

Among ``p`` ranks (a power of two) the reduce-scatter takes ``log2 p`` steps; in
step *j* rank *r* exchanges with ``r XOR 2^j`` (partner distance 1, 2, 4, ...,
like ASTRA-sim's halvingDoubling) the half of its remaining shards that the
partner keeps: ``S/2, S/4, ..., S/p``.  Rank *r* ends with shard *r*.  The
all-gather runs the same exchanges backwards with doubling sizes (distance
p/2, ..., 2, 1).  Distance 1 first puts the largest exchanges between
neighbouring ranks (inside a node when ranks are numbered node by node).

Non-powers of two (``n = p + e``, ``p`` the largest power of two <= n): the
``e`` extra ranks ``p + i`` fold onto partner ``i`` first and unfold at the end.

* all-reduce: ``p+i`` sends its whole buffer to ``i`` (reduced), the ``p`` ranks
  all-reduce, ``i`` sends the result back.
* reduce-scatter: ``p+i`` sends its whole input to ``i``; rank ``i < e`` then owns
  two shards (``i`` and ``p+i``); at the end ``i`` sends shard ``p+i`` (S/n) on.
* all-gather: ``p+i`` sends its shard to ``i``; at the end ``i`` sends ``p+i``
  everything it lacks, ``(n-1)/n·S``.

``nbytes`` is nccl-tests' S: all-reduce per-rank buffer; all-gather total
output; reduce-scatter total input.  Closed forms (power of two ``n``, per-hop
latency α, bandwidth B, no contention)::

    all-reduce      t = 2·log2(n)·α + 2(n-1)/n·S/B
    reduce-scatter  t =   log2(n)·α +  (n-1)/n·S/B      (all-gather the same)

and for other ``n`` the all-reduce adds the fold and the unfold, ``2(α + S/B)``,
to the formula for ``p``.

>>> s = hd_all_reduce(8, 8.0)
>>> s.n_steps, s.bytes_sent().tolist()[0]
(6, 14.0)
"""

from __future__ import annotations

import numpy as np

from netsim.collectives.compose import COPY, REDUCE, Flow, check_int, traced
from netsim.collectives.schedule import Phase, Schedule, Step


def _rounds(p: int, descending: bool) -> list[int]:
    masks = [1 << j for j in range(p.bit_length() - 1)]
    return masks[::-1] if descending else masks


def _groups(n: int, p: int) -> list[np.ndarray]:
    """Shards each of the ``p`` core ranks is responsible for: ``i`` and, if ``i < n-p``, ``p+i``."""
    return [np.array([i, p + i]) if p + i < n else np.array([i]) for i in range(p)]


def _exchange(p: int, m: int, weight: np.ndarray, gather: bool) -> tuple[np.ndarray, np.ndarray]:
    """Partners and units sent by every core rank in the round with mask ``m``.

    Reduce-scatter: *r* sends the groups whose low bits (below 2m) equal the partner's;
    all-gather: the groups whose low bits equal its own (what it holds).
    """
    r = np.arange(p, dtype=np.int64)
    low = np.arange(p) & (2 * m - 1)
    tot = np.bincount(low, weights=weight, minlength=2 * m)
    sel = (r if gather else r ^ m) & (2 * m - 1)
    return r ^ m, tot[sel]


def _hd(op: str, n: int, nbytes: float) -> Schedule:
    n = check_int(n, "n")
    S = float(nbytes)
    if n < 2:
        return Schedule(op, "halving_doubling", n, S, ())
    p = 1 << (n.bit_length() - 1)
    e = n - p
    ar = op == "all_reduce"
    # the unit grid: all-reduce works on p equal pieces, RS/AG on the n shards
    units = p if ar else n
    unit_b = S / units
    groups = [np.array([i]) for i in range(p)] if ar else _groups(n, p)
    weight = np.array([g.size for g in groups], dtype=float)
    extra = np.arange(p, n, dtype=np.int64)
    part = extra - p
    steps: list[tuple[Step, object]] = []  # (step, flow callable)
    everything = np.arange(units)

    def fold():
        if not e:
            return
        if op == "all_gather":  # extras hand over their own shard
            st = Step(extra, part, np.full(e, unit_b))
            steps.append((st, lambda rep: (np.arange(e), extra.copy(), np.zeros(e, np.int64))))
        else:  # the whole buffer, reduced into the partner
            st = Step(extra, part, np.full(e, S), reduce=True)
            steps.append((st, lambda rep: (np.repeat(np.arange(e), units), np.tile(everything, e),
                                           np.full(e * units, REDUCE))))

    def unfold():
        if not e:
            return
        if op == "reduce_scatter":
            st = Step(part, extra, np.full(e, unit_b))
            steps.append((st, lambda rep: (np.arange(e), extra.copy(), np.zeros(e, np.int64))))
        elif op == "all_reduce":
            st = Step(part, extra, np.full(e, S))
            steps.append((st, lambda rep: (np.repeat(np.arange(e), units), np.tile(everything, e),
                                           np.zeros(e * units, np.int64))))
        else:  # all-gather: everything but the receiver's own shard
            st = Step(part, extra, np.full(e, S - unit_b))
            def fl(rep):
                keep = everything[None, :] != extra[:, None]
                tid = np.nonzero(keep)[0]
                return tid, np.tile(everything, e)[keep.ravel()], np.zeros(tid.size, np.int64)
            steps.append((st, fl))

    def rounds(gather: bool):
        for m in _rounds(p, descending=gather):
            dst, amount = _exchange(p, m, weight, gather)
            src = np.arange(p, dtype=np.int64)
            st = Step(src, dst, amount * unit_b, reduce=not gather)

            def fl(rep, m=m, gather=gather):
                r = np.arange(p)
                want = (r if gather else r ^ m) & (2 * m - 1)
                hit = (np.arange(p)[None, :] & (2 * m - 1)) == want[:, None]  # rank x group
                tid, grp = np.nonzero(hit)
                sizes = weight.astype(np.int64)[grp]
                units_ = np.concatenate([groups[g] for g in grp]) if grp.size else np.zeros(0, np.int64)
                kind = COPY if gather else REDUCE
                return np.repeat(tid, sizes), units_, np.full(units_.size, kind)
            steps.append((st, fl))

    fold()
    if op in ("all_reduce", "reduce_scatter"):
        rounds(gather=False)
    if op in ("all_reduce", "all_gather"):
        rounds(gather=True)
    unfold()
    sched = Schedule(op, "halving_doubling", n, S, tuple(Phase(st) for st, _ in steps))
    return traced(sched, lambda: Flow(units, tuple(fl for _, fl in steps)))


def hd_all_reduce(n: int, nbytes: float) -> Schedule:
    """Halving-doubling all-reduce of an ``nbytes`` buffer per rank (Rabenseifner)."""
    return _hd("all_reduce", n, nbytes)


def hd_reduce_scatter(n: int, nbytes: float) -> Schedule:
    """Recursive-halving reduce-scatter; ``nbytes`` is the total input (rank r gets shard r)."""
    return _hd("reduce_scatter", n, nbytes)


def hd_all_gather(n: int, nbytes: float) -> Schedule:
    """Recursive-doubling all-gather; ``nbytes`` is the total output (rank r brings shard r)."""
    return _hd("all_gather", n, nbytes)
