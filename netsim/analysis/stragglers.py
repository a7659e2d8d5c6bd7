"""Find slow ranks and hosts: compute heat maps, robust outliers, launch skew, HTA late starts.

Definitions (reference.md §8):

* **Heat map** (MegaScale §5): compute time per rank × step.  A *step* is
  taken from, in order: an ``iteration``/``step`` column; the microbatch token
  ``mb<k>`` in op names (netsim's LLM generator writes ``mb3.fwd.L0.attn``);
  otherwise the per-rank occurrence index of same-named compute ops (the
  k-th ``fwd`` on a rank is step k).
* **Slow ranks** (MegaScale "% slower than the median"): every compute op is
  compared with the cross-rank median duration of ops of the same name, so
  ranks doing different work (pipeline stages) are each compared with their
  peers.  ``pct_over_median`` = 100 · (Σ duration / Σ median − 1).  A rank is
  flagged when its robust z-score 0.6745 · (x − median) / MAD of that
  percentage reaches ``z_threshold`` *and* the percentage reaches
  ``pct_threshold``.  The MAD is floored at :data:`PCT_MAD_FLOOR` (0.5
  percentage points): simulated peers are often identical to the last bit, so
  the raw MAD is 0 or float noise (1e-6 %) and a 20 % straggler would get a z
  of millions; with the floor a rank k % over the median gets at most
  z = 0.6745 · k / 0.5 (a real GPU's run-to-run jitter is about 1 %, so a MAD
  below 0.5 points carries no information).  The percentage rule decides
  the close cases.
* **Launch skew** (MegaScale §6.3): per collective instance — the k-th
  collective a rank issues on a group — max − min issue time over its ranks,
  and which rank issued last.
* **Late start of the last long collective** (HTA ``hta/analyzers/straggler.py``):
  see :func:`late_start_stragglers`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

import numpy as np
import pandas as pd

from netsim.analysis.overlap import _kind_mask, _op_labels, as_ns

__all__ = ["PCT_MAD_FLOOR", "LateStart", "late_start_caveat", "assign_steps", "compute_heatmap", "detection_scores", "late_start_stragglers",
           "launch_skew", "robust_z", "slow_hosts", "slow_ranks"]

#: Floor of the MAD of ``pct_over_median`` in :func:`slow_ranks` (percentage points; module docstring).
PCT_MAD_FLOOR = 0.5

_MB = r"(?:^|[._/:-])mb(\d+)(?=$|[._/:-])"
_MB_ANY = r"(?:^|[._/:-])mb\d+(?=$|[._/:-])"


def _compute_ops(ops: pd.DataFrame) -> pd.DataFrame:
    comp = ops.loc[_kind_mask(ops, ("compute",))].copy()
    comp["dur_ns"] = as_ns(comp["end_ns"].to_numpy()) - as_ns(comp["start_ns"].to_numpy())
    return comp


def assign_steps(ops: pd.DataFrame, by: str = "auto") -> pd.Series:
    """The step of every op row: ``by`` is ``"auto"``, a column name, ``"microbatch"`` or ``"occurrence"``.

    ``"microbatch"`` reads ``mb<k>`` from the op name (-1 when absent);
    ``"occurrence"`` numbers same-named ops per rank in start order.  ``"auto"``
    uses an ``iteration`` or ``step`` column, else microbatches when every
    name carries one, else occurrences.

    Examples
    --------
    >>> ops = pd.DataFrame({"rank": [0, 0, 0], "name": ["fwd", "bwd", "fwd"], "start_ns": [0, 5, 9]})
    >>> assign_steps(ops).tolist()
    [0, 0, 1]
    >>> assign_steps(ops.assign(name=["mb0.fwd", "mb0.bwd", "mb1.fwd"])).tolist()
    [0, 0, 1]
    """
    if by == "auto":
        by = next((c for c in ("iteration", "step") if c in ops.columns), None) or "microbatch"
        if by == "microbatch" and (ops.empty or not ops["name"].astype(str).str.contains(_MB_ANY).all()):
            by = "occurrence"
    if by == "microbatch":
        mb = ops["name"].astype(str).str.extract(_MB, expand=False)
        return mb.fillna(-1).astype(np.int64).rename("step")
    if by == "occurrence":
        order = ops.sort_values(["rank", "start_ns"], kind="stable")
        return order.groupby(["rank", "name"], sort=False).cumcount().reindex(ops.index).rename("step")
    if by not in ops.columns:
        raise KeyError(f"no column {by!r} to take steps from")
    return ops[by].rename("step")


def compute_heatmap(ops: pd.DataFrame, by: str = "auto", relative: bool = False) -> pd.DataFrame:
    """Compute time (ns) per rank × step: index ``rank``, one column per step (MegaScale's heat map).

    With ``relative=True`` each cell is Σ duration / Σ cross-rank median of the
    same-named ops instead (1.0 = as fast as its peers), which puts ranks doing
    different work (pipeline stages) on one scale.

    Examples
    --------
    >>> ops = pd.DataFrame({"rank": [0, 0, 1, 1], "kind": "compute", "name": ["f", "f", "f", "f"],
    ...                     "start_ns": [0, 10, 0, 20], "end_ns": [10, 20, 20, 40]})
    >>> compute_heatmap(ops).values.tolist()
    [[10, 10], [20, 20]]
    """
    comp = _compute_ops(ops)
    comp["step"] = assign_steps(comp, by)
    hm = comp.pivot_table(index="rank", columns="step", values="dur_ns", aggfunc="sum", fill_value=0)
    if not relative:
        return hm
    comp["median_ns"] = comp.groupby("name", sort=False)["dur_ns"].transform("median")
    base = comp.pivot_table(index="rank", columns="step", values="median_ns", aggfunc="sum", fill_value=0)
    return hm / base.where(base > 0)


def robust_z(values: np.ndarray | pd.Series, mad_floor: float = 0.0) -> np.ndarray:
    """0.6745 · (x − median) / max(MAD, ``mad_floor``) (Iglewicz-Hoaglin).

    ``mad_floor`` is the resolution of ``values`` (same unit): below it the
    spread is noise, and dividing by it would turn a modest outlier into a
    z of millions.  With MAD = 0 and no floor: ±inf above / below the median, 0 at it.

    Examples
    --------
    >>> robust_z(np.array([1.0, 1.0, 1.0, 2.0])).tolist()
    [0.0, 0.0, 0.0, inf]
    >>> robust_z(np.array([0.0, 0.0, 0.0, 20.0]), mad_floor=0.5).round(2).tolist()
    [0.0, 0.0, 0.0, 26.98]
    """
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return x
    med = np.median(x)
    mad = max(float(np.median(np.abs(x - med))), float(mad_floor))
    if mad == 0:
        return np.where(x > med, np.inf, np.where(x < med, -np.inf, 0.0))
    return 0.6745 * (x - med) / mad


def _flag(frame: pd.DataFrame, z_threshold: float, pct_threshold: float) -> pd.DataFrame:
    frame["pct_over_median"] = 100.0 * (frame["compute_ns"] - frame["expected_ns"]) / frame["expected_ns"]
    frame["robust_z"] = robust_z(frame["pct_over_median"], mad_floor=PCT_MAD_FLOOR)
    frame["flagged"] = (frame["robust_z"] >= z_threshold) & (frame["pct_over_median"] >= pct_threshold)
    return frame


def slow_ranks(ops: pd.DataFrame, *, z_threshold: float = 3.5, pct_threshold: float = 5.0,
               hosts=None) -> pd.DataFrame:
    """Per-rank compute slowdown against same-named peers, flagged by robust z-score and % over median.

    Parameters
    ----------
    ops
        The ``ops`` table of one run.
    z_threshold, pct_threshold
        A rank is flagged when ``robust_z >= z_threshold`` and
        ``pct_over_median >= pct_threshold`` (both rules, see the module docstring).
    hosts
        Adds a ``host`` column: GPUs per host (``rank // hosts``), a mapping /
        Series rank -> host, or the ``ranks`` table (its ``host`` column).

    Returns
    -------
    DataFrame
        ``rank, [host,] compute_ns, expected_ns, pct_over_median, robust_z, flagged``.

    Examples
    --------
    >>> ops = pd.DataFrame({"rank": range(8), "kind": "compute", "name": "fwd", "start_ns": 0,
    ...                     "end_ns": [100] * 7 + [120]})
    >>> slow_ranks(ops).query("flagged")[["rank", "pct_over_median"]].values.tolist()
    [[7.0, 20.0]]
    """
    comp = _compute_ops(ops)
    comp["median_ns"] = comp.groupby("name", sort=False)["dur_ns"].transform("median")
    out = comp.groupby("rank").agg(compute_ns=("dur_ns", "sum"), expected_ns=("median_ns", "sum")).reset_index()
    out["compute_ns"] = out["compute_ns"].astype(float)
    if hosts is not None:
        out.insert(1, "host", _host_of(out["rank"], hosts))
    return _flag(out, z_threshold, pct_threshold)


def _host_of(rank: pd.Series, hosts) -> np.ndarray:
    if isinstance(hosts, (int, np.integer)):
        return (rank // int(hosts)).to_numpy()
    if isinstance(hosts, pd.DataFrame):
        hosts = hosts.set_index("rank")["host"]
    mapped = rank.map(pd.Series(hosts) if not isinstance(hosts, pd.Series) else hosts)
    if mapped.isna().any():
        raise KeyError(f"no host for rank(s) {rank[mapped.isna()].tolist()[:5]}")
    return mapped.astype(np.int64).to_numpy()


def slow_hosts(ops: pd.DataFrame, hosts, *, z_threshold: float = 3.5, pct_threshold: float = 5.0) -> pd.DataFrame:
    """Slow hosts: a host is as slow as its slowest GPU (synchronous training waits for it).

    ``hosts`` is as in :func:`slow_ranks`.  Per host, ``pct_over_median`` and
    ``robust_z`` are the largest of its ranks' (``mean_pct`` is the mean), and
    the host is flagged when any of its ranks is: the z-scores stay relative to
    all ranks, which is meaningful even for a handful of hosts.

    Returns ``host, ranks, compute_ns, expected_ns, mean_pct, pct_over_median,
    robust_z, flagged, slowest_rank``.
    """
    per_rank = slow_ranks(ops, z_threshold=z_threshold, pct_threshold=pct_threshold, hosts=hosts)
    g = per_rank.groupby("host")
    out = g.agg(ranks=("rank", "size"), compute_ns=("compute_ns", "sum"), expected_ns=("expected_ns", "sum"),
                mean_pct=("pct_over_median", "mean"), pct_over_median=("pct_over_median", "max"),
                robust_z=("robust_z", "max"), flagged=("flagged", "any")).reset_index()
    out["slowest_rank"] = per_rank.loc[g["pct_over_median"].idxmax().to_numpy(), "rank"].to_numpy()
    return out


def detection_scores(flagged: Iterable, injected: Iterable) -> dict:
    """Precision, recall and F1 of flagged ids against injected ones.

    ``flagged`` may also be a boolean Series indexed by id.  With nothing
    flagged precision is 1.0 (no false claims); with nothing injected recall is 1.0.

    Examples
    --------
    >>> detection_scores([3, 5], [3, 7])
    {'precision': 0.5, 'recall': 0.5, 'f1': 0.5, 'true_positives': [3], 'false_positives': [5], 'false_negatives': [7]}
    """
    if isinstance(flagged, pd.Series) and flagged.dtype == bool:
        flagged = flagged.index[flagged.to_numpy()]
    f, i = {int(x) for x in flagged}, {int(x) for x in injected}
    tp, fp, fn = sorted(f & i), sorted(f - i), sorted(i - f)
    precision = len(tp) / len(f) if f else 1.0
    recall = len(tp) / len(i) if i else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "true_positives": tp, "false_positives": fp,
            "false_negatives": fn}


def _collective_instances(ops: pd.DataFrame) -> pd.DataFrame:
    """Collective rows with ``comm_type``, ``group`` labels and ``seq`` (per rank and group, in issue order)."""
    coll = ops.loc[_kind_mask(ops, ("collective",))]
    tcode, tlab, gcode, glab = _op_labels(coll)
    coll = coll.assign(comm_type=tlab[tcode], group=glab[gcode])
    tie = ["node_id"] if "node_id" in coll.columns else []
    coll = coll.sort_values(["rank", "start_ns"] + tie, kind="stable").reset_index(drop=True)
    coll["seq"] = coll.groupby(["rank", "group"], sort=False).cumcount()
    return coll


def launch_skew(ops: pd.DataFrame) -> pd.DataFrame:
    """Launch skew of every collective instance (group, seq).

    Returns
    -------
    DataFrame
        ``group, seq, comm_type, name, ranks, first_issue_ns, last_issue_ns,
        skew_ns, first_rank, last_rank, end_ns``, in order of first issue.

    Examples
    --------
    >>> ops = pd.DataFrame({"rank": [0, 1], "kind": "collective", "name": "ar", "comm_type": "ALL_REDUCE",
    ...                     "group": "g", "start_ns": [100, 250], "end_ns": [400, 400]})
    >>> launch_skew(ops)[["skew_ns", "last_rank"]].values.tolist()
    [[150, 1]]
    """
    coll = _collective_instances(ops)
    cols = ["group", "seq", "comm_type", "name", "ranks", "first_issue_ns", "last_issue_ns", "skew_ns",
            "first_rank", "last_rank", "end_ns"]
    if coll.empty:
        return pd.DataFrame(columns=cols)
    g = coll.groupby(["group", "seq"], sort=False)
    out = g.agg(comm_type=("comm_type", "first"), name=("name", "first"), ranks=("rank", "size"),
                first_issue_ns=("start_ns", "min"), last_issue_ns=("start_ns", "max"), end_ns=("end_ns", "max"))
    out["first_rank"] = coll.loc[g["start_ns"].idxmin().to_numpy(), "rank"].to_numpy()
    out["last_rank"] = coll.loc[g["start_ns"].idxmax().to_numpy(), "rank"].to_numpy()
    out["skew_ns"] = out["last_issue_ns"] - out["first_issue_ns"]
    out = out.reset_index().sort_values(["first_issue_ns", "group", "seq"], kind="stable")
    return out[cols].reset_index(drop=True)


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
        what += f" on host(s) {', '.join(str(int(h)) for h in hosts.loc[hosts['flagged'], 'host'])}"
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
    comm = _kind_mask(ops, tuple(kinds))
    tcode, tlab, _, _ = _op_labels(ops.loc[comm])
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
