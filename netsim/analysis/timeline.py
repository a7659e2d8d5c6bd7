"""Per-rank timelines as Chrome-trace JSON (open in Perfetto or ``chrome://tracing``).

Layout (Trace Event Format, ``ts``/``dur`` in µs: whole ns from the tables, divided by 1000, so
``ts + dur`` of one event never passes the ``ts`` of the next on its thread):

* one process per rank (``pid`` = rank, named ``rank <r>``); its threads are
  lanes by op kind: ``compute`` (tid 0), ``comm`` (collectives and sends, 1),
  ``recv`` (2), ``memory`` (3), ``other`` (4).  Ops that overlap on one lane
  (``--streams`` > 1, concurrent receives) spill onto extra threads
  ``compute #2``..., because trace viewers expect the events of a thread to nest;
* every op is a complete event (``ph: "X"``) named after the op, category =
  its kind, ``args`` = collective type, group, bytes and node id;
* collective instances from the ``collectives`` table are spans from the first
  rank's start to the last rank's end in a separate ``collectives`` process
  (``pid`` = last rank + 1, listed first), one thread per communicator group.

Examples
--------
>>> ops = pd.DataFrame({"rank": [0, 1], "node_id": [1, 1], "name": ["fwd", "fwd"], "kind": "compute",
...                     "start_ns": [0, 0], "end_ns": [1500, 2500]})
>>> ev = [e for e in chrome_trace(ops)["traceEvents"] if e["ph"] == "X"]
>>> [(e["pid"], e["tid"], e["ts"], e["dur"]) for e in ev]
[(0, 0, 0.0, 1.5), (1, 0, 0.0, 2.5)]
"""

from __future__ import annotations

import heapq
import json
import os
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
import pandas as pd

from netsim.errors import InputError

__all__ = ["LANES", "chrome_trace", "chrome_trace_events", "timeline_ranks", "write_chrome_trace"]

#: Thread id of each op kind on a rank's process.
LANES: dict[str, int] = {"compute": 0, "collective": 1, "send": 1, "recv": 2, "memory": 3}
_LANE_NAMES = ("compute", "comm", "recv", "memory", "other")
_SPILL = 16  # thread id stride of overflow lanes: lane + _SPILL * k


def _us(ns: int) -> float:
    """Integer ns as µs (``ts``/``dur``): every time is rounded to whole ns *before* any difference is
    taken, so an event that ends when the next starts never overlaps it after rounding."""
    return int(ns) / 1000.0


def _ns(t) -> np.ndarray:
    return np.rint(np.asarray(t, dtype=float)).astype(np.int64)


def timeline_ranks(ops: pd.DataFrame, max_ranks: int = 32, flagged: Iterable[int] | None = None) -> pd.DataFrame:
    """The ranks worth showing in a timeline of at most ``max_ranks`` rows: ``rank, reason, finish_ns``.

    Every rank (reason ``all``) when there are at most ``max_ranks``; otherwise the
    ``flagged`` ranks (default: :func:`~netsim.analysis.stragglers.slow_ranks` flagged ones,
    at most half the rows), then the latest-finishing ranks (``latest``) and the
    earliest-finishing (``earliest``) in equal shares, in rank order.  A straggler
    on ranks 40-47 of 64 is thus in the picture, with its fastest peers for contrast.

    Examples
    --------
    >>> ops = pd.DataFrame({"rank": range(6), "kind": "compute", "name": "f", "start_ns": 0,
    ...                     "end_ns": [10, 10, 10, 10, 30, 10]})
    >>> timeline_ranks(ops, max_ranks=3, flagged=[])[["rank", "reason"]].values.tolist()
    [[0, 'earliest'], [4, 'latest'], [5, 'latest']]
    """
    finish = ops.groupby("rank")["end_ns"].max().sort_index()
    if len(finish) <= max_ranks:
        return pd.DataFrame({"rank": finish.index.to_numpy(), "reason": "all", "finish_ns": finish.to_numpy()})
    if flagged is None:
        from netsim.analysis.stragglers import slow_ranks

        sr = slow_ranks(ops)
        flagged = sr.loc[sr["flagged"]].sort_values("pct_over_median", ascending=False)["rank"].tolist()
    chosen: dict[int, str] = {}
    for r in flagged:
        if int(r) in finish.index and len(chosen) < max(max_ranks // 2, 1):
            chosen[int(r)] = "flagged"
    order = finish.sort_values(kind="stable")  # earliest first; ties by rank
    late, early = order.index[::-1].tolist(), order.index.tolist()
    free = max_ranks - len(chosen)
    n_late = (free + 1) // 2
    for r in late:
        if n_late <= 0:
            break
        if r not in chosen:
            chosen[r], n_late = "latest", n_late - 1
    for r in early:
        if len(chosen) >= max_ranks:
            break
        chosen.setdefault(r, "earliest")
    ranks = sorted(chosen)
    return pd.DataFrame({"rank": ranks, "reason": [chosen[r] for r in ranks], "finish_ns": finish[ranks].to_numpy()})


def _sublanes(keys: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per event, the lowest slot of its key free at its start (events in any order)."""
    order = np.lexsort((start, keys))
    slot = np.zeros(len(keys), dtype=np.int64)
    cur, busy, free = None, [], []
    for i in order.tolist():
        if keys[i] != cur:
            cur, busy, free = keys[i], [], []
        while busy and busy[0][0] <= start[i]:
            heapq.heappush(free, heapq.heappop(busy)[1])
        s = heapq.heappop(free) if free else len(busy)
        heapq.heappush(busy, (end[i], s))
        slot[i] = s
    return slot


def _select(ops: pd.DataFrame, ranks: Iterable[int] | None) -> pd.DataFrame:
    if ranks is None:
        return ops
    return ops[ops["rank"].isin(list(ranks))]


def _op_events(ops: pd.DataFrame) -> Iterator[dict]:
    rank = ops["rank"].to_numpy(np.int64)
    start, end = _ns(ops["start_ns"]), _ns(ops["end_ns"])
    end = np.maximum(end, start)
    kind = ops["kind"].astype(str).to_numpy()
    lane = np.array([LANES.get(k, 4) for k in kind], dtype=np.int64)
    tid = lane + _SPILL * _sublanes(rank * _SPILL + lane, start, end) if len(ops) else lane
    cols = {c: ops[c].to_numpy() for c in ("name", "comm_type", "group", "bytes", "node_id") if c in ops.columns}
    threads: set[tuple[int, int]] = set()
    for r in np.unique(rank).tolist():
        yield {"name": "process_name", "ph": "M", "pid": r, "tid": 0, "args": {"name": f"rank {r}"}}
        yield {"name": "process_sort_index", "ph": "M", "pid": r, "tid": 0, "args": {"sort_index": r}}
    for i in range(len(ops)):
        r, t = int(rank[i]), int(tid[i])
        if (r, t) not in threads:
            threads.add((r, t))
            label = _LANE_NAMES[t % _SPILL] + (f" #{t // _SPILL + 1}" if t >= _SPILL else "")
            yield {"name": "thread_name", "ph": "M", "pid": r, "tid": t, "args": {"name": label}}
        args = {}
        for c in ("comm_type", "group", "bytes", "node_id"):
            v = cols[c][i] if c in cols else None
            if v is not None and not pd.isna(v) and not (c == "bytes" and v == 0):
                args[c] = v.item() if hasattr(v, "item") else str(v)
        name = cols["name"][i] if "name" in cols else kind[i]
        yield {"name": str(name), "cat": kind[i], "ph": "X", "ts": _us(start[i]),
               "dur": _us(end[i] - start[i]), "pid": r, "tid": t, "args": args}


def _collective_events(coll: pd.DataFrame, pid: int) -> Iterator[dict]:
    yield {"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": "collectives"}}
    yield {"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0, "args": {"sort_index": -1}}
    group = coll["group"].astype(object).where(coll["group"].notna(), "world").astype(str).to_numpy() \
        if "group" in coll.columns else np.full(len(coll), "world")
    gcode, guniq = pd.factorize(group)
    start, end = _ns(coll["start_ns"]), _ns(coll["end_ns"])
    end = np.maximum(end, start)
    tid = gcode.astype(np.int64) + len(guniq) * _sublanes(gcode.astype(np.int64), start, end)
    named: set[int] = set()
    cols = {c: coll[c].to_numpy() for c in ("op", "algorithm", "seq", "group_size", "bytes", "busbw_GBps",
                                           "last_start_ns") if c in coll.columns}
    for i in range(len(coll)):
        t = int(tid[i])
        if t not in named:
            named.add(t)
            extra = f" #{t // len(guniq) + 1}" if t >= len(guniq) else ""
            yield {"name": "thread_name", "ph": "M", "pid": pid, "tid": t,
                   "args": {"name": f"group {guniq[t % len(guniq)]}{extra}"}}
        args = {c: (v[i].item() if hasattr(v[i], "item") else str(v[i])) for c, v in cols.items()
                if not pd.isna(v[i])}
        op = str(cols["op"][i]) if "op" in cols else "collective"
        yield {"name": op, "cat": "collective", "ph": "X", "ts": _us(start[i]), "dur": _us(end[i] - start[i]),
               "pid": pid, "tid": t, "args": args}


def chrome_trace_events(ops: pd.DataFrame, collectives: pd.DataFrame | None = None,
                        ranks: Iterable[int] | None = None) -> Iterator[dict]:
    """Trace events (metadata first per track) for ``ops`` and, if given, ``collectives``.

    ``ranks`` restricts the rank processes (collective spans are kept whole).
    """
    sel = _select(ops, ranks)
    yield from _op_events(sel)
    if collectives is not None and len(collectives):
        pid = int(ops["rank"].max()) + 1 if len(ops) else 0
        yield from _collective_events(collectives, pid)


def chrome_trace(ops: pd.DataFrame, collectives: pd.DataFrame | None = None,
                 ranks: Iterable[int] | None = None, metadata: dict | None = None) -> dict:
    """The whole trace as a dict: ``{"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}``."""
    return {"traceEvents": list(chrome_trace_events(ops, collectives, ranks)), "displayTimeUnit": "ns",
            "otherData": dict(metadata or {})}


def write_chrome_trace(path: str | os.PathLike, ops: pd.DataFrame, collectives: pd.DataFrame | None = None, *,
                       ranks: Iterable[int] | None = None, metadata: dict | None = None,
                       overwrite: bool = False) -> int:
    """Stream the trace to ``path`` atomically (temporary file in the same folder, then rename).

    Returns the number of events written.  Raises :class:`InputError` if
    ``path`` exists and ``overwrite`` is false, or is a directory.
    """
    from netsim.results.io import atomic_file, kind_of

    target = Path(path)
    if kind_of(target) == "a folder":
        raise InputError("is a directory; expected a file name for the trace", source=str(target))
    if kind_of(target) is not None and not overwrite:
        raise InputError("exists; pass --overwrite to replace it", source=str(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with atomic_file(target, "w") as fh:
        fh.write('{"displayTimeUnit": "ns", "otherData": ')
        fh.write(json.dumps(dict(metadata or {}), default=str))
        fh.write(', "traceEvents": [\n')
        for ev in chrome_trace_events(ops, collectives, ranks):
            fh.write((",\n" if n else "") + json.dumps(ev, separators=(",", ":"), default=str))
            n += 1
        fh.write("\n]}\n")
    return n
