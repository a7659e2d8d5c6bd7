"""Find slow ranks and hosts: compute heat maps, robust outliers, slow GPU vs slow host, launch skew.

Definitions (reference.md §8):

* **Heat map** (MegaScale §5): compute per rank × step.  A *step* is
  taken from, in order: an ``iteration``/``step`` column; the microbatch token
  ``mb<k>`` in op names (netsim's LLM generator writes ``mb3.fwd.L0.attn``);
  otherwise the per-rank occurrence index of same-named compute ops (the
  k-th ``fwd`` on a rank is step k).  By default each op is normalised by the
  same op (name and step) on the other ranks, so a cell is 1.0 when the rank
  is as fast as its peers: pipeline stages doing different work are on one
  scale, and only slowness stands out (``relative=False``: absolute ns).
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
* **Slow hosts** tell a slow host from a slow GPU: a host is flagged only when
  its GPUs are slow *together*, i.e. when the slowdown that a majority of its
  GPUs reach (the lower median of their ``pct_over_median``) passes both rules,
  its z taken against the median and MAD of all ranks.  One slow GPU does not
  flag its host; :func:`straggler_causes` names each culprit once, as a slow
  host or a slow GPU (a GPU on a slow host only when it is slow beyond its host).
* **Launch skew** (MegaScale §6.3): per collective instance — the k-th
  collective a rank issues on a group — max − min issue time over its ranks,
  and which rank issued last.
* **Late start of the last long collective** (HTA ``hta/analyzers/straggler.py``):
  :mod:`netsim.analysis.late_start` (re-exported here).
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

from netsim.analysis.late_start import LateStart, late_start_caveat, late_start_stragglers
from netsim.analysis.overlap import as_ns, kind_mask, op_labels

__all__ = ["PCT_MAD_FLOOR", "LateStart", "late_start_caveat", "assign_steps", "compute_heatmap", "detection_scores",
           "host_of", "late_start_stragglers", "launch_skew", "robust_z", "slow_hosts", "slow_ranks",
           "straggler_causes"]

#: Floor of the MAD of ``pct_over_median`` in :func:`slow_ranks` (percentage points; module docstring).
PCT_MAD_FLOOR = 0.5

_MB = r"(?:^|[._/:-])mb(\d+)(?=$|[._/:-])"
_MB_ANY = r"(?:^|[._/:-])mb\d+(?=$|[._/:-])"


def _compute_ops(ops: pd.DataFrame) -> pd.DataFrame:
    comp = ops.loc[kind_mask(ops, ("compute",))].copy()
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


def compute_heatmap(ops: pd.DataFrame, by: str = "auto", relative: bool = True) -> pd.DataFrame:
    """MegaScale's heat map: index ``rank``, one column per step, each op normalised against its peers.

    A cell is Σ duration / Σ cross-rank median duration of the same ops (same
    name and step) over the rank's compute ops of that step: 1.0 = as fast as
    the same work on the other ranks, 1.1 = 10 % slower.  Pipeline stages (or
    any ranks doing different work) are thus on one scale and only slowness
    shows; a cell with no compute is NaN.  ``relative=False`` gives the
    absolute compute time in ns (0 where none), where a stage with more work
    looks as hot as a slow GPU.  ``frame.attrs["value"]`` says which
    (``"ratio"`` or ``"ns"``), for :func:`netsim.analysis.plots.plot_heatmap`.

    Examples
    --------
    >>> ops = pd.DataFrame({"rank": [0, 0, 1, 1, 2, 2], "kind": "compute", "name": ["f", "f"] * 3,
    ...                     "start_ns": 0, "end_ns": [10, 10, 10, 10, 20, 20]})
    >>> compute_heatmap(ops).values.tolist()
    [[1.0, 1.0], [1.0, 1.0], [2.0, 2.0]]
    >>> compute_heatmap(ops, relative=False).values.tolist()
    [[10, 10], [10, 10], [20, 20]]
    """
    comp = _compute_ops(ops)
    comp["step"] = assign_steps(comp, by)
    hm = comp.pivot_table(index="rank", columns="step", values="dur_ns", aggfunc="sum", fill_value=0)
    if relative:
        comp["median_ns"] = comp.groupby(["name", "step"], sort=False)["dur_ns"].transform("median")
        base = comp.pivot_table(index="rank", columns="step", values="median_ns", aggfunc="sum", fill_value=0)
        hm = hm / base.where(base > 0)
    hm.attrs["value"] = "ratio" if relative else "ns"
    return hm


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
        out.insert(1, "host", host_of(out["rank"], hosts))
    return _flag(out, z_threshold, pct_threshold)


def host_of(rank: pd.Series, hosts) -> np.ndarray:
    """The host of every rank in ``rank``: ``hosts`` is GPUs per host (``rank // hosts``), a mapping /
    Series rank -> host, or the ``ranks`` table (its ``host`` column); KeyError for a rank without one.

    >>> host_of(pd.Series([0, 7, 8]), 8).tolist()
    [0, 0, 1]
    """
    if isinstance(hosts, (int, np.integer)):
        return (rank // int(hosts)).to_numpy()
    if isinstance(hosts, pd.DataFrame):
        pairs = hosts[["rank", "host"]].drop_duplicates()  # the ranks table of several runs of one placement
        if pairs["rank"].duplicated().any():
            raise ValueError("the ranks table puts a rank on several hosts (runs with different placements?); "
                             "pass one run's rows")
        hosts = pairs.set_index("rank")["host"]
    mapped = rank.map(pd.Series(hosts) if not isinstance(hosts, pd.Series) else hosts)
    if mapped.isna().any():
        raise KeyError(f"no host for rank(s) {rank[mapped.isna()].tolist()[:5]}")
    return mapped.astype(np.int64).to_numpy()


def _majority_pct(pct: pd.Series) -> float:
    """The slowdown a majority of the values reach: the lower median (the ⌈n/2⌉-th largest of n values)."""
    v = np.sort(pct.to_numpy(dtype=float))
    return float(v[(v.size - 1) // 2])


def _z_against(x, reference: np.ndarray) -> np.ndarray:
    """Robust z of ``x`` against the median and MAD (floored at :data:`PCT_MAD_FLOOR`) of ``reference``."""
    med = float(np.median(reference))
    mad = max(float(np.median(np.abs(reference - med))), PCT_MAD_FLOOR)
    return 0.6745 * (np.asarray(x, dtype=float) - med) / mad


def slow_hosts(ops: pd.DataFrame, hosts, *, z_threshold: float = 3.5, pct_threshold: float = 5.0) -> pd.DataFrame:
    """Slow hosts: hosts whose GPUs are slow *together*; one slow GPU does not make its host slow.

    ``hosts`` is as in :func:`slow_ranks`.  A host's ``pct_over_median`` is the
    slowdown a majority of its GPUs reach (the lower median of their
    :func:`slow_ranks` percentages: on an 8-GPU host the 4th largest), and its
    ``robust_z`` is that value's z against all ranks (median and MAD of every
    rank's percentage, the MAD floored as in :func:`slow_ranks`), which stays
    meaningful for a handful of hosts.  The host is flagged when both pass
    their thresholds.  A one-GPU host cannot be told from its GPU.

    Returns ``host, ranks, compute_ns, expected_ns, mean_pct, pct_over_median,
    robust_z, flagged, slowest_rank, max_pct, slow_gpus`` (``max_pct``: the
    slowest GPU's percentage; ``slow_gpus``: how many of its ranks
    :func:`slow_ranks` flags).

    Examples
    --------
    >>> ops = pd.DataFrame({"rank": range(32), "kind": "compute", "name": "fwd", "start_ns": 0,
    ...                     "end_ns": [100] * 3 + [120] + [100] * 20 + [110] * 8})
    >>> slow_hosts(ops, 8).query("flagged")[["host", "pct_over_median", "slow_gpus"]].values.tolist()
    [[3.0, 10.0, 8.0]]
    """
    per_rank = slow_ranks(ops, z_threshold=z_threshold, pct_threshold=pct_threshold, hosts=hosts)
    return _hosts_of(per_rank, z_threshold, pct_threshold)


def _hosts_of(per_rank: pd.DataFrame, z_threshold: float, pct_threshold: float) -> pd.DataFrame:
    """:func:`slow_hosts` from :func:`slow_ranks` (with its ``host`` column)."""
    g = per_rank.groupby("host")
    out = g.agg(ranks=("rank", "size"), compute_ns=("compute_ns", "sum"), expected_ns=("expected_ns", "sum"),
                mean_pct=("pct_over_median", "mean"), pct_over_median=("pct_over_median", _majority_pct),
                max_pct=("pct_over_median", "max"), slow_gpus=("flagged", "sum")).reset_index()
    out["robust_z"] = _z_against(out["pct_over_median"], per_rank["pct_over_median"].to_numpy(dtype=float))
    out["flagged"] = (out["robust_z"] >= z_threshold) & (out["pct_over_median"] >= pct_threshold)
    out["slowest_rank"] = per_rank.loc[g["pct_over_median"].idxmax().to_numpy(), "rank"].to_numpy()
    return out[["host", "ranks", "compute_ns", "expected_ns", "mean_pct", "pct_over_median", "robust_z", "flagged",
                "slowest_rank", "max_pct", "slow_gpus"]]


def straggler_causes(ops: pd.DataFrame, hosts, *, z_threshold: float = 3.5, pct_threshold: float = 5.0
                     ) -> pd.DataFrame:
    """Each culprit named once: a slow host (its GPUs slow together) or a slow GPU.

    Hosts flagged by :func:`slow_hosts` come first (``cause`` ``"host"``,
    ``rank`` missing, ``gpus`` = its GPU count).  Then every rank
    :func:`slow_ranks` flags whose slowness its host does not explain
    (``cause`` ``"gpu"``): a rank on a host that is not slow, or a rank on a
    slow host whose ``pct_over_host`` (its slowdown over the host's majority,
    100 · ((1 + p/100) / (1 + host p/100) − 1)) passes both rules again.

    Returns ``cause, host, rank, gpus, pct_over_median, pct_over_host, robust_z``
    (``rank`` is a nullable integer; ``pct_over_host`` NaN on host rows),
    hosts then GPUs, each by decreasing ``pct_over_median``.

    Examples
    --------
    >>> ops = pd.DataFrame({"rank": range(32), "kind": "compute", "name": "fwd", "start_ns": 0,
    ...                     "end_ns": [100] * 3 + [120] + [100] * 20 + [110] * 8})
    >>> straggler_causes(ops, 8)[["cause", "host", "rank"]].values.tolist()
    [['host', 3, <NA>], ['gpu', 0, 3]]
    """
    per_rank = slow_ranks(ops, z_threshold=z_threshold, pct_threshold=pct_threshold, hosts=hosts)
    hs = _hosts_of(per_rank, z_threshold, pct_threshold)
    bad = hs.loc[hs["flagged"]].sort_values("pct_over_median", ascending=False, kind="stable")
    host_pct = per_rank["host"].map(hs.set_index("host")["pct_over_median"]).to_numpy(dtype=float)
    over_host = 100.0 * ((1 + per_rank["pct_over_median"] / 100) / (1 + host_pct / 100) - 1)
    ref = per_rank["pct_over_median"].to_numpy(dtype=float)
    on_bad = per_rank["host"].isin(bad["host"]).to_numpy()
    # on a slow host, the z of the excess over the host: the reference spread with its median at 0
    excess_z = _z_against(over_host, ref - np.median(ref))
    beyond = ~on_bad | ((excess_z >= z_threshold) & (over_host >= pct_threshold)).to_numpy()
    gpus = per_rank.assign(pct_over_host=over_host).loc[per_rank["flagged"].to_numpy() & beyond]
    gpus = gpus.sort_values("pct_over_median", ascending=False, kind="stable")
    cols = ["cause", "host", "rank", "gpus", "pct_over_median", "pct_over_host", "robust_z"]
    rows = pd.concat([
        pd.DataFrame({"cause": "host", "host": bad["host"].to_numpy(), "rank": pd.array([pd.NA] * len(bad), "Int64"),
                      "gpus": bad["ranks"].to_numpy(), "pct_over_median": bad["pct_over_median"].to_numpy(),
                      "pct_over_host": np.nan, "robust_z": bad["robust_z"].to_numpy()}),
        pd.DataFrame({"cause": "gpu", "host": gpus["host"].to_numpy(), "rank": pd.array(gpus["rank"], "Int64"),
                      "gpus": 1, "pct_over_median": gpus["pct_over_median"].to_numpy(),
                      "pct_over_host": gpus["pct_over_host"].to_numpy(), "robust_z": gpus["robust_z"].to_numpy()}),
    ], ignore_index=True)
    return rows[cols]


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
    coll = ops.loc[kind_mask(ops, ("collective",))]
    tcode, tlab, gcode, glab = op_labels(coll)
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
