"""Where each rank's time goes: compute, exposed communication, idle (HTA definitions).

Definitions mirror Holistic Trace Analysis (``hta/analyzers/breakdown_analysis.py``
and ``communication_analysis.py``; reference.md §8.2), with netsim ops standing
in for GPU kernels:

* COMPUTATION kernels are ops of kind ``compute``; COMM kernels are
  ``collective``, ``send`` and ``recv`` (NCCL's send/recv kernels are ``nccl*``
  kernels too); ``memory`` ops are neither, like HTA's MEMORY class.
* ``kernel_ns`` = last op end − first op start of the rank.
* ``idle_ns`` = ``kernel_ns`` − |∪ all ops|.
* ``compute_ns`` = |∪ compute ops|.
* ``non_compute_ns`` = ``kernel_ns`` − ``compute_ns`` − ``idle_ns``: time
  when something but no compute runs.  Communication overlapped with compute
  counts as compute, so this is the *exposed* communication (plus exposed
  memory ops, if any).
* ``overlap_pct`` = 100 · |∪ comm ∩ ∪ compute| / |∪ comm| ("time computing
  while communicating ÷ time communicating"); NaN for a rank with no comm.

All interval unions are computed for every rank at once with numpy (one sort
of all ops), so 16k ranks × thousands of ops take seconds.  Frames holding
several ``run_id`` values are analysed per (run_id, rank).

Examples
--------
>>> import pandas as pd
>>> ops = pd.DataFrame({"rank": [0, 0, 0], "kind": ["compute", "collective", "compute"],
...                     "start_ns": [0, 50, 200], "end_ns": [100, 150, 300]})
>>> b = temporal_breakdown(ops)
>>> b[["compute_ns", "non_compute_ns", "idle_ns", "overlap_pct"]].iloc[0].tolist()
[200.0, 50.0, 50.0, 50.0]
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["COMM_KINDS", "COMPUTE_KINDS", "comm_comp_overlap", "exposed_comm_by_collective", "as_ns", "change_phrase",
           "kind_mask", "merged_intervals", "op_labels", "overlap_summary", "temporal_breakdown", "union_length"]

COMPUTE_KINDS: tuple[str, ...] = ("compute",)
COMM_KINDS: tuple[str, ...] = ("collective", "send", "recv")


def change_phrase(speedup: float, tolerance: float = 0.005) -> str:
    """Words for a speedup (old time / new time) that follow the number: within ``tolerance``
    (0.5 %) of 1 "no measurable change", above "a gain of k %", below "a loss of k %".

    Examples
    --------
    >>> change_phrase(1.25), change_phrase(0.99), change_phrase(1.002)
    ('1.25x: a gain of 25.0 %', '0.99x: a loss of 1.0 %', '1.00x: no measurable change')
    """
    s = float(speedup)
    if abs(s - 1.0) <= tolerance:
        return f"{s:.2f}x: no measurable change"
    return f"{s:.2f}x: a {'gain' if s > 1 else 'loss'} of {abs(s - 1.0) * 100:.1f} %"


# ------------------------------------------------------------------ interval core
def merged_intervals(keys: np.ndarray, start: np.ndarray, end: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merge the intervals of every key: returns ``(key, seg_start, seg_end)`` sorted by key, start.

    Parameters
    ----------
    keys
        Non-negative integer group code per interval (e.g. the rank).
    start, end
        Integer interval bounds (``end >= start``).

    Examples
    --------
    >>> k, s, e = merged_intervals(np.array([0, 0, 1]), np.array([0, 5, 0]), np.array([10, 20, 3]))
    >>> k.tolist(), s.tolist(), e.tolist()
    ([0, 1], [0, 0], [20, 3])
    """
    st = _Sorted(np.asarray(keys), np.asarray(start), np.asarray(end))
    return st.segments(np.ones(st.n, dtype=bool))


def union_length(keys: np.ndarray, start: np.ndarray, end: np.ndarray, n_keys: int | None = None) -> np.ndarray:
    """|∪ intervals| per key (index = key code), as int64.

    Examples
    --------
    >>> union_length(np.array([0, 0, 1]), np.array([0, 5, 0]), np.array([10, 20, 3])).tolist()
    [20, 3]
    """
    keys = np.asarray(keys)
    if n_keys is None:
        n_keys = int(keys.max()) + 1 if keys.size else 0
    k, s, e = merged_intervals(keys, start, end)
    return _sum_by(k, e - s, n_keys)


def _sum_by(keys: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Integer sums per key (float64 accumulation is exact below 2**53 ns, about 104 days)."""
    return np.rint(np.bincount(keys, weights=values, minlength=n)).astype(np.int64)


class _Sorted:
    """All intervals sorted once by (key, start) in one int64 axis: key·span + (t − t0).

    Keys occupy disjoint, increasing ranges of that axis, so a global running
    maximum of the ends restarts at every key: one pass merges every key's
    intervals, and any subset (a boolean mask) stays sorted.
    """

    def __init__(self, keys: np.ndarray, start: np.ndarray, end: np.ndarray):
        keys = keys.astype(np.int64, copy=False)
        start = as_ns(start)
        end = np.maximum(as_ns(end), start)
        self.n = keys.size
        self.t0 = int(start.min()) if self.n else 0
        self.span = (int(end.max()) - self.t0 + 1) if self.n else 1
        if self.n and (int(keys.max()) + 1) * self.span >= 2 ** 62:
            raise OverflowError("time span × number of ranks does not fit the int64 interval axis")
        off = keys * self.span - self.t0
        s, e = start + off, end + off
        self.order = np.argsort(s, kind="stable")
        self.keys, self.s, self.e = keys[self.order], s[self.order], e[self.order]

    def segments(self, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Merged segments of the masked (sorted-order) intervals: (key, start, end), axis coords undone."""
        k, s, e = self.keys[mask], self.s[mask], self.e[mask]
        if s.size == 0:
            z = np.zeros(0, dtype=np.int64)
            return z, z, z
        run = np.maximum.accumulate(e)
        new = np.empty(s.size, dtype=bool)
        new[0] = True
        np.greater(s[1:], run[:-1], out=new[1:])
        first = np.flatnonzero(new)
        last = np.append(first[1:] - 1, s.size - 1)
        off = k[first] * self.span - self.t0
        return k[first], s[first] - off, run[last] - off

    def union(self, mask: np.ndarray, n: int) -> np.ndarray:
        k, s, e = self.segments(mask)
        return _sum_by(k, e - s, n)

    def covered(self, mask: np.ndarray, keys: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """Per query interval, the length covered by ∪ of the masked intervals of the same key."""
        k, s, e = self.segments(mask)
        if k.size == 0:
            return np.zeros(np.shape(start), dtype=np.int64)
        ax_s, ax_e = s + k * self.span - self.t0, e + k * self.span - self.t0
        cum = np.concatenate([[0], np.cumsum(ax_e - ax_s)])

        def upto(x):  # covered length of the axis before point x
            i = np.searchsorted(ax_s, x, side="right") - 1
            j = np.maximum(i, 0)
            return np.where(i >= 0, cum[j] + np.clip(x - ax_s[j], 0, ax_e[j] - ax_s[j]), 0)

        base = keys.astype(np.int64) * self.span - self.t0
        return upto(as_ns(end) + base) - upto(as_ns(start) + base)


# --------------------------------------------------------------------- helpers
def as_ns(values) -> np.ndarray:
    """Times as int64 ns (float columns are rounded to the nearest ns)."""
    arr = np.asarray(values)
    if arr.dtype.kind == "f":
        return np.rint(arr).astype(np.int64)
    return arr.astype(np.int64, copy=False)


def _rank_codes(ops: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame]:
    """Integer code per op row for its (run_id, rank), and the frame of those keys (index = code)."""
    rank = ops["rank"].to_numpy(dtype=np.int64)
    runs = ops["run_id"] if "run_id" in ops.columns else None
    if runs is not None and runs.nunique(dropna=False) > 1:
        rcode, runiq = pd.factorize(runs, sort=True)
        width = int(rank.max()) + 1
        code = rcode.astype(np.int64) * width + rank
    else:
        runiq, code = None, rank
    if code.size and code.min() >= 0 and code.max() < 4 * code.size + 1024:
        present = np.bincount(code) > 0  # O(n) compaction when codes are dense enough
        uniq, inv = np.flatnonzero(present), (np.cumsum(present) - 1)[code]
    else:
        uniq, inv = np.unique(code, return_inverse=True)
    keys = pd.DataFrame({"rank": uniq if runiq is None else uniq % width})
    if runiq is not None:
        keys.insert(0, "run_id", np.asarray(runiq)[uniq // width])
    elif runs is not None and len(runs):
        keys.insert(0, "run_id", runs.iloc[0])
    return inv.reshape(-1), keys


def kind_mask(ops: pd.DataFrame, kinds: tuple[str, ...]) -> np.ndarray:
    """Rows whose ``kind`` is one of ``kinds`` (via factorize: fast on categorical and Arrow strings)."""
    codes, uniques = pd.factorize(ops["kind"])
    wanted = [i for i, u in enumerate(uniques) if str(u) in kinds]
    return np.isin(codes, wanted)


def _pct(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, 100.0 * num / np.where(den > 0, den, 1), np.nan)


# -------------------------------------------------------------------- analyses
def temporal_breakdown(ops: pd.DataFrame) -> pd.DataFrame:
    """Per-rank HTA temporal breakdown and comm/compute overlap.

    Parameters
    ----------
    ops
        The ``ops`` table: ``rank``, ``kind``, ``start_ns``, ``end_ns`` (and
        optionally ``run_id``).

    Returns
    -------
    DataFrame
        One row per rank (``run_id`` too if present): ``kernel_ns``,
        ``compute_ns``, ``non_compute_ns``, ``idle_ns``, ``comm_ns`` (|∪ comm|),
        ``overlap_ns``, ``exposed_comm_ns`` (|∪ comm| − overlap),
        ``overlap_pct``, ``compute_pct``, ``non_compute_pct``, ``idle_pct``
        (percent of ``kernel_ns``).  Times are ns (float64).
    """
    if ops.empty:
        cols = ["rank", "kernel_ns", "compute_ns", "non_compute_ns", "idle_ns", "comm_ns", "overlap_ns",
                "exposed_comm_ns", "overlap_pct", "compute_pct", "non_compute_pct", "idle_pct"]
        return pd.DataFrame(columns=cols)
    code, out = _rank_codes(ops)
    n = len(out)
    st = _Sorted(code, ops["start_ns"].to_numpy(), ops["end_ns"].to_numpy())
    comp = kind_mask(ops, COMPUTE_KINDS)[st.order]
    comm = kind_mask(ops, COMM_KINDS)[st.order]
    everything = np.ones(st.n, dtype=bool)
    u_all = st.union(everything, n)
    u_comp = st.union(comp, n)
    u_comm = st.union(comm, n)
    u_either = st.union(comp | comm, n)
    first = np.flatnonzero(np.r_[True, st.keys[1:] != st.keys[:-1]])
    last = np.append(first[1:] - 1, st.n - 1)
    kernel = np.maximum.accumulate(st.e)[last] - st.s[first]
    overlap = u_comm + u_comp - u_either
    out["kernel_ns"] = kernel.astype(float)
    out["compute_ns"] = u_comp.astype(float)
    out["idle_ns"] = (kernel - u_all).astype(float)
    out["non_compute_ns"] = (u_all - u_comp).astype(float)
    out["comm_ns"] = u_comm.astype(float)
    out["overlap_ns"] = overlap.astype(float)
    out["exposed_comm_ns"] = (u_comm - overlap).astype(float)
    out["overlap_pct"] = _pct(overlap, u_comm)
    for col in ("compute", "non_compute", "idle"):
        out[f"{col}_pct"] = _pct(out[f"{col}_ns"].to_numpy(), kernel)
    return out


def comm_comp_overlap(ops: pd.DataFrame) -> pd.DataFrame:
    """HTA's communication/computation overlap per rank: ``rank, comm_ns, overlap_ns, overlap_pct``.

    Examples
    --------
    >>> ops = pd.DataFrame({"rank": [0, 0], "kind": ["compute", "collective"],
    ...                     "start_ns": [0, 75], "end_ns": [100, 175]})
    >>> comm_comp_overlap(ops).overlap_pct.tolist()
    [25.0]
    """
    cols = [c for c in ("run_id", "rank") if c in ops.columns]
    return temporal_breakdown(ops)[cols + ["comm_ns", "overlap_ns", "overlap_pct"]]


def op_labels(ops: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Codes and label tables of (collective type, group) per op.

    Send/recv ops without a ``comm_type`` are labelled ``send``/``recv``; ops
    without a group are in ``world`` (collectives) or ``p2p``.
    """
    kcode, kuniq = pd.factorize(ops["kind"])
    kinds = [str(u) for u in kuniq]
    out = []
    for col, fallback in (("comm_type", kinds),
                          ("group", ["world" if k == "collective" else "p2p" for k in kinds])):
        if col in ops.columns:
            code, uniq = pd.factorize(ops[col])
            labels = [str(u) for u in uniq]
        else:
            code, labels = np.full(len(ops), -1), []
        code = np.where(code >= 0, code, len(labels) + kcode)
        out += [code, np.array(labels + fallback, dtype=object)]
    return out[0], out[1], out[2], out[3]


def exposed_comm_by_collective(ops: pd.DataFrame) -> pd.DataFrame:
    """Exposed (not overlapped by compute) communication per collective type and group.

    Per rank and (type, group), the union of those comm ops minus the union
    of the rank's compute ops, summed over ranks: concurrent ops of one type
    and group (gradient buckets) count once, ops of different types or groups
    running at the same time are each charged, so the sum over rows can
    exceed the per-rank ``exposed_comm_ns`` of :func:`temporal_breakdown`.

    Returns
    -------
    DataFrame
        ``comm_type, group, ops, ranks, comm_ns, exposed_ns, exposed_pct,
        exposed_ns_per_rank`` (``comm_ns``: the summed per-rank unions),
        sorted by ``exposed_ns`` descending (plus ``run_id`` first when
        several runs are present).
    """
    comm_rows = kind_mask(ops, COMM_KINDS)
    cols = ["comm_type", "group", "ops", "ranks", "comm_ns", "exposed_ns", "exposed_pct", "exposed_ns_per_rank"]
    if not comm_rows.any():
        return pd.DataFrame(columns=cols)
    code, keys = _rank_codes(ops)
    st = _Sorted(code, ops["start_ns"].to_numpy(), ops["end_ns"].to_numpy())
    comp = kind_mask(ops, COMPUTE_KINDS)[st.order]
    sub = ops.loc[comm_rows]
    tcode, tlab, gcode, glab = op_labels(sub)
    lcode, pairs = pd.factorize(pd.MultiIndex.from_arrays([tcode, gcode]))
    n_lab = len(pairs)
    k, s, e = merged_intervals(code[comm_rows] * n_lab + lcode, sub["start_ns"].to_numpy(),
                               sub["end_ns"].to_numpy())
    covered = st.covered(comp, k // n_lab, s, e)
    seg = pd.DataFrame({"lab": k % n_lab, "code": k // n_lab, "dur": e - s, "exposed": (e - s) - covered})
    raw = pd.DataFrame({"lab": lcode, "code": code[comm_rows]})
    by = ["lab"]
    multi = "run_id" in keys.columns and keys["run_id"].nunique() > 1
    if multi:
        run = pd.factorize(keys["run_id"])[0]
        seg["run"], raw["run"] = run[seg["code"].to_numpy()], run[raw["code"].to_numpy()]
        by = ["run", "lab"]
    res = seg.groupby(by, sort=True).agg(ranks=("code", "nunique"), comm_ns=("dur", "sum"),
                                         exposed_ns=("exposed", "sum"))
    res.insert(0, "ops", raw.groupby(by, sort=True).size())
    res = res.reset_index()
    lab = res.pop("lab").to_numpy()
    res.insert(0, "comm_type", tlab[pairs.get_level_values(0).to_numpy()[lab]])
    res.insert(1, "group", glab[pairs.get_level_values(1).to_numpy()[lab]])
    if multi:
        res.insert(0, "run_id", pd.unique(keys["run_id"])[res.pop("run").to_numpy()])
    res["comm_ns"] = res["comm_ns"].astype(float)
    res["exposed_ns"] = res["exposed_ns"].astype(float)
    res["exposed_pct"] = _pct(res["exposed_ns"].to_numpy(), res["comm_ns"].to_numpy())
    res["exposed_ns_per_rank"] = res["exposed_ns"] / res["ranks"]
    return res.sort_values("exposed_ns", ascending=False, kind="stable").reset_index(drop=True)


def overlap_summary(ops: pd.DataFrame, breakdown: pd.DataFrame | None = None) -> dict:
    """Run-level means of :func:`temporal_breakdown`, plus MegaScale's exposed communication.

    ``step_ns`` is last op end − first op start over all ranks;
    ``megascale_exposed_ns`` = ``step_ns`` − max over ranks of ``compute_ns``
    (MegaScale §6.3: exposed comm = step − max(compute)).  ``overlap_pct`` is
    the mean over ranks that communicate.
    """
    b = temporal_breakdown(ops) if breakdown is None else breakdown
    if b.empty:
        return {"ranks": 0, "step_ns": 0.0, "overlap_pct": float("nan"), "exposed_comm_ns": 0.0,
                "non_compute_ns": 0.0, "compute_ns": 0.0, "idle_ns": 0.0, "megascale_exposed_ns": 0.0}
    step = float(ops["end_ns"].max() - ops["start_ns"].min())
    ov = b["overlap_pct"].dropna()
    return {"ranks": int(len(b)), "step_ns": step,
            "overlap_pct": float(ov.mean()) if len(ov) else float("nan"),
            "exposed_comm_ns": float(b["exposed_comm_ns"].mean()),
            "non_compute_ns": float(b["non_compute_ns"].mean()),
            "compute_ns": float(b["compute_ns"].mean()), "idle_ns": float(b["idle_ns"].mean()),
            "megascale_exposed_ns": step - float(b["compute_ns"].max())}
