"""HTA's straggler method: the ranks that start the last long collective late, and when to doubt it.

:func:`late_start_stragglers` mirrors Holistic Trace Analysis
(``hta/analyzers/straggler.py``, reference.md §8.2); :func:`late_start_caveat` says
when its suspects are not the ranks whose compute is slow
(:func:`netsim.analysis.stragglers.slow_ranks`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from netsim.analysis.overlap import as_ns, kind_mask, op_labels

__all__ = ["LateStart", "late_start_caveat", "late_start_stragglers"]


@dataclass
class LateStart:
    """Result of :func:`late_start_stragglers`.

    Attributes
    ----------
    kernel
        The collective type chosen (HTA's (stream, kernel) of largest cross-rank duration std).
    metric
        Per rank and iteration: ``start_ns, dur_ns, normalized_start, is_candidate``.
    counts
        Per rank: how many iterations it was among the top-k late starters.
    stragglers
        The suspects: the ``n_stragglers`` ranks with the highest counts.
    notes
        Caveats for reading the suspects (see :func:`late_start_caveat`).
    """

    kernel: str | None
    metric: pd.DataFrame
    counts: pd.Series
    stragglers: list[int]
    notes: list[str] = field(default_factory=list)


def late_start_caveat(late: LateStart, slow: pd.DataFrame, hosts: pd.DataFrame | None = None) -> str | None:
    """A caveat when the HTA late-start suspects disagree with the compute verdict, else None.

    ``slow`` is :func:`slow_ranks` (its ``flagged`` ranks, and ``host`` when
    present), ``hosts`` optionally :func:`slow_hosts`.  The two methods answer
    different questions: :func:`slow_ranks` compares each rank's compute with
    same-named peers (the rank that is slow), HTA's method the start of the
    last long collective across all ranks (the rank that arrives last, which
    with pipeline stages or a slow upstream peer is often a rank that *waits*).
    Also appended to ``late.notes``.

    Examples
    --------
    >>> slow = pd.DataFrame({"rank": [0, 1, 2], "flagged": [False, False, True]})
    >>> late_start_caveat(LateStart("ALL_REDUCE", pd.DataFrame(), pd.Series(dtype=int), [2]), slow) is None
    True
    >>> late_start_caveat(LateStart("ALL_REDUCE", pd.DataFrame(), pd.Series(dtype=int), [0]), slow)[:40]
    'late-start suspects 0 are not the comput'
    """
    flagged = [int(r) for r in slow.loc[slow["flagged"], "rank"]] if len(slow) else []
    suspects = list(late.stragglers)
    if not suspects or set(suspects) <= set(flagged):
        return None
    what = f"slow rank(s) {', '.join(map(str, flagged))}" if flagged else "no rank flagged"
    if hosts is not None and "flagged" in hosts.columns and hosts["flagged"].any():
        what += f"; slow host(s) {', '.join(str(int(h)) for h in hosts.loc[hosts['flagged'], 'host'])}"
    if not flagged and "pct_over_median" in slow.columns and len(slow):
        top = slow.loc[slow["pct_over_median"].idxmax()]
        what += f"; slowest rank {int(top['rank'])} at {float(top['pct_over_median']):+.1f}%"
    note = (f"late-start suspects {', '.join(map(str, suspects))} are not the compute-slow ranks ({what}): "
            "HTA's method names the ranks that *start* the last long collective last across all ranks, "
            "which with pipeline stages or a slow peer upstream are often ranks that waited, not slow ones; "
            "where compute is slow is what the slow-rank/host verdict measures (each op against same-named peers)")
    late.notes.append(note)
    return note


def late_start_stragglers(ops: pd.DataFrame, n_stragglers: int = 2, min_normalized_duration: float = 0.01,
                          kinds: tuple[str, ...] = ("collective",)) -> LateStart:
    """HTA's straggler method: the latest starters of the last long communication kernel.

    Mirrors ``find_stragglers_with_late_start_comm_kernels`` of
    ``hta/analyzers/straggler.py``:

    1. ``mean_iter`` = (last end − first start over all ops) / iterations;
       comm ops shorter than ``min_normalized_duration · mean_iter`` are dropped.
    2. Per (rank, iteration, kernel) the last remaining op is kept.
    3. The kernel whose duration / ``mean_iter`` has the largest cross-rank
       standard deviation (averaged over iterations) is chosen.
    4. Its ``normalized_start`` = (start − first start) / ``mean_iter``; per
       iteration, ranks at or above the k-th largest value are candidates;
       candidates are counted per rank and the top ``n_stragglers`` returned
       (ties in the count, which HTA leaves to sort order, go to the rank
       with the later mean start).

    One netsim addition: a candidate must also start later than the
    iteration's median, so a run where every rank starts together reports no
    suspects (HTA would return k arbitrary ranks).

    netsim mapping: HTA's kernel name is the collective type (``send``/``recv``
    for p2p), and HTA's stream is netsim's single per-rank comm lane.  The
    iteration is the ``iteration`` column if present, else 0; HTA also skips
    iteration 0 as warm-up, which a simulated iteration does not need.
    HTA looks at every NCCL kernel; ``kinds`` defaults to collectives only,
    because the method assumes blocking kernels that end together, which
    point-to-point ops do not (a netsim receive spans the wait for its
    sender, e.g. a pipeline bubble).  Pass ``kinds=netsim.analysis.overlap.COMM_KINDS`` for HTA's set.
    Like HTA, the method compares start times across *all* ranks: with
    pipeline parallelism the stages reach their last collective at different
    times by design, so prefer :func:`launch_skew` (per group instance) there.
    """
    k = max(int(n_stragglers), 1)
    empty = LateStart(None, pd.DataFrame(columns=["rank", "iteration", "start_ns", "dur_ns", "normalized_start",
                                                   "is_candidate"]), pd.Series(dtype=np.int64), [])
    if ops.empty:
        return empty
    iters = ops["iteration"] if "iteration" in ops.columns else pd.Series(0, index=ops.index)
    t_min = int(round(ops["start_ns"].min()))
    mean_iter = (int(round(ops["end_ns"].max())) - t_min) / max(iters.nunique(), 1)
    comm = kind_mask(ops, tuple(kinds))
    tcode, tlab, _, _ = op_labels(ops.loc[comm])
    cand = pd.DataFrame({"rank": ops.loc[comm, "rank"].to_numpy(), "iteration": iters[comm].to_numpy(),
                         "kernel": tlab[tcode], "start_ns": as_ns(ops.loc[comm, "start_ns"].to_numpy()),
                         "dur_ns": as_ns(ops.loc[comm, "end_ns"].to_numpy()) - as_ns(ops.loc[comm, "start_ns"])})
    cand = cand[cand["dur_ns"] >= mean_iter * min_normalized_duration]
    if cand.empty or mean_iter <= 0:
        return empty
    last = cand.sort_values("start_ns", kind="stable").groupby(["rank", "iteration", "kernel"]).tail(1)
    spread = (last["dur_ns"] / mean_iter).groupby([last["iteration"], last["kernel"]]).std(ddof=1)
    spread = spread.fillna(0.0).groupby(level="kernel").mean()
    kernel = str(spread.idxmax())
    metric = last[last["kernel"] == kernel].drop(columns="kernel").sort_values(["iteration", "rank"])
    metric["normalized_start"] = (metric["start_ns"] - t_min) / mean_iter
    by_iter = metric.groupby("iteration")["normalized_start"]
    kth = by_iter.transform(lambda v: np.sort(v.to_numpy())[::-1][min(k, len(v)) - 1])
    # netsim addition: a rank starting no later than the iteration's median is not "late"
    metric["is_candidate"] = (metric["normalized_start"] >= kth) & (metric["normalized_start"] >
                                                                     by_iter.transform("median"))
    g = metric.groupby("rank")
    counts = g["is_candidate"].sum().astype(np.int64)
    # HTA ranks by count alone; ties (common with one iteration) are broken by the mean lateness
    rankable = pd.DataFrame({"count": counts, "late": g["normalized_start"].mean()})
    order = rankable[rankable["count"] > 0].sort_values(["count", "late"], ascending=False, kind="stable")
    return LateStart(kernel, metric.reset_index(drop=True), counts, [int(r) for r in order.index[:k]])
