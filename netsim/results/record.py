"""Result tables of a finished simulation: ops, collectives, links, ranks, runs.

:class:`RunRecorder` turns a :class:`~netsim.workload.runner.WorkloadResult` (and the
:class:`~netsim.workload.runner.WorkloadRun` it came from) into the tables of
:mod:`netsim.results.dataset`.  Times are ns (float64, exact to well below 1 ns), sizes
bytes, bandwidths GB/s (1e9 B/s).  ``ops`` is produced in row chunks so that a 16k-rank
run streams into Parquet row groups; the per-rank breakdown keeps only a compact
``(rank, start, end, class)`` array of the compute and communication ops.

Definitions (HTA's temporal breakdown, reference §8.2, with the whole run ``[0, finish]``
as the window): ``compute_ns`` = union of GPU compute ops; ``comm_ns`` = union of
communication ops (collectives on the GPU comm lane, sends, receives);
``exposed_comm_ns`` = communication time with no compute on the rank;
``idle_ns`` = neither, so ``finish = compute + exposed_comm + idle``.
Collectives: ``bytes`` is nccl-tests' size S, ``algbw = S / (end - start)`` with ``start``
the first member's arrival and ``end`` the last member's finish, ``busbw = algbw *
bus_factor`` (:func:`netsim.results.nccl_table.bus_factor`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from netsim.results import dataset, nccl_table
from netsim.vocab import LINK_STATUS, MISSING, CommType, NodeType, normalize_group_name

KINDS = ("other", "compute", "collective", "send", "recv", "memory")
_TYPE_KIND = {int(NodeType.COMP_NODE): 1, int(NodeType.COMM_COLL_NODE): 2, int(NodeType.COMM_SEND_NODE): 3,
              int(NodeType.COMM_RECV_NODE): 4, int(NodeType.MEM_LOAD_NODE): 5, int(NodeType.MEM_STORE_NODE): 5}
#: Chakra CommType -> the op name used in both tables (nccl-tests spelling where it has one).
OP_NAMES = {CommType.ALL_REDUCE: "all_reduce", CommType.REDUCE: "reduce", CommType.ALL_GATHER: "all_gather",
            CommType.GATHER: "gather", CommType.SCATTER: "scatter", CommType.BROADCAST: "broadcast",
            CommType.ALL_TO_ALL: "alltoall", CommType.REDUCE_SCATTER: "reduce_scatter",
            CommType.REDUCE_SCATTER_BLOCK: "reduce_scatter", CommType.BARRIER: "barrier"}
_OPS = sorted(set(OP_NAMES.values()))
CHUNK_ROWS = 1 << 18


class _Attrs:
    """Per-row attributes of every distinct node table, concatenated (global row = base[rank] + row)."""

    def __init__(self, run):
        import pandas as pd

        tables, index, self.base = [], {}, np.zeros(run.world, dtype=np.int64)
        offset = 0
        for st in run.ranks:
            if id(st.table) not in index:
                index[id(st.table)] = offset
                tables.append(st.table)
                offset += len(st.table)
            self.base[st.rank] = index[id(st.table)]
        cat = (lambda f: np.concatenate([f(t) for t in tables])) if tables else (lambda f: np.zeros(0, np.int64))
        self.node_id = cat(lambda t: t.id.astype(np.int64))
        typ = cat(lambda t: t.type.astype(np.int64))
        lut = np.zeros(max(int(NodeType.COMM_COLL_NODE), int(typ.max(initial=0))) + 1, dtype=np.int8)
        for k, v in _TYPE_KIND.items():
            lut[k] = v
        self.kind = lut[typ]
        ctype = cat(lambda t: t.comm_type)
        gpu = cat(lambda t: t.is_cpu_op) != 1
        comm_lane = (self.kind == 2) & (ctype != MISSING) & gpu
        self.cls = np.where((self.kind == 1) & gpu, 1, np.where(comm_lane | (self.kind == 3) | (self.kind == 4), 2, 0))
        op_lut = np.full(max(int(max(CommType)), 0) + 1, -1, dtype=np.int32)
        for ct, name in OP_NAMES.items():
            op_lut[int(ct)] = _OPS.index(name)
        self.op = np.where((self.kind == 2) & (ctype >= 0) & (ctype < op_lut.size),
                           op_lut[np.clip(ctype, 0, op_lut.size - 1)], -1).astype(np.int32)
        size, tensor = cat(lambda t: t.comm_size), cat(lambda t: t.tensor_size)
        self.nbytes = np.where(np.isin(self.kind, (2, 3, 4)) & (size != MISSING), size,
                               np.where((self.kind == 5) & (tensor != MISSING), tensor, 0)).astype(np.int64)
        codes, self.names = pd.factorize(pd.Series([n for t in tables for n in t.name], dtype=object))
        self.name = codes.astype(np.int32)
        labels: dict[str, int] = {}
        group = [np.array([labels.setdefault(_group_label(run, n), len(labels)) for n in t.pg_names] + [-1],
                          dtype=np.int32)[t.pg] for t in tables]
        self.group = np.concatenate(group) if group else np.zeros(0, np.int32)
        world = labels.setdefault("world", len(labels))
        self.group = np.where(self.kind == 2, np.where(self.group < 0, world, self.group), -1).astype(np.int32)
        self.groups = list(labels)


def _group_label(run, pg_name: str | None) -> str:
    """``world`` when the group is every rank, else the normalised ``pg_name``."""
    try:
        members = run.groups.resolve(pg_name)
    except Exception:  # a name only non-collective nodes carry
        return str(pg_name)
    return "world" if len(members) == run.groups.world else normalize_group_name(str(pg_name))


def _dict(codes: np.ndarray, values):
    """A dictionary array holding only the values ``codes`` uses (-1 = null)."""
    import pyarrow as pa

    used, inverse = np.unique(codes, return_inverse=True)
    valid = used >= 0
    dictionary = pa.array([values[i] for i in used[valid].tolist()], pa.string())
    idx = np.where(used[inverse] >= 0, inverse - (~valid).sum(), 0).astype(np.int32)
    return pa.DictionaryArray.from_arrays(pa.array(idx, mask=used[inverse] < 0), dictionary)


def _union(rank: np.ndarray, start: np.ndarray, end: np.ndarray, n: int) -> np.ndarray:
    """Per rank, the length of the union of intervals ``[start, end)``."""
    import pandas as pd

    order = np.lexsort((start, rank))
    r, s, e = rank[order], start[order], end[order]
    reach = pd.Series(e).groupby(r).cummax().to_numpy()
    prev = np.empty_like(reach)
    prev[1:] = reach[:-1]
    first = np.ones(r.size, dtype=bool)
    first[1:] = r[1:] != r[:-1]
    prev[first] = -np.inf
    return np.bincount(r, weights=np.maximum(e - np.maximum(s, prev), 0.0), minlength=n)


class RunRecorder:
    """Tables of one finished workload run; see the module docstring."""

    def __init__(self, result, chunk_rows: int = CHUNK_ROWS):
        if result.run is None:
            raise ValueError("the result does not hold its WorkloadRun (run it with WorkloadRun.run())")
        self.result, self.run, self.chunk = result, result.run, chunk_rows
        self.n = self.run.world  # every rank of the workload (representatives only are in ops)
        self._attrs: _Attrs | None = None
        self._intervals: tuple | None = None
        self.config = result.config or {"command": "run"}
        self.run_id = dataset.run_id_for(self.config)

    @property
    def attrs(self) -> _Attrs:
        if self._attrs is None:
            self._attrs = _Attrs(self.run)
        return self._attrs

    # ---------------------------------------------------------------- ops
    def iter_ops(self):
        """The ``ops`` table as Arrow record batches of at most ``chunk_rows`` rows."""
        import pyarrow as pa

        a, ops, keep = self.attrs, self.result.ops, []
        self._counts = np.zeros(self.n, dtype=np.int64)
        for lo in range(0, max(len(ops), 1), self.chunk):
            cols = list(zip(*ops[lo:lo + self.chunk])) or [()] * 7
            rank = np.array(cols[0], dtype=np.int64)
            g = a.base[rank] + np.array(cols[6], dtype=np.int64)
            start, end = np.array(cols[4], dtype=np.float64), np.array(cols[5], dtype=np.float64)
            cls = a.cls[g]
            self._counts += np.bincount(rank, minlength=self.n)
            sel = cls > 0
            keep.append((rank[sel].astype(np.int32), start[sel], end[sel], cls[sel]))
            yield pa.RecordBatch.from_pydict({
                "rank": pa.array(rank.astype(np.int32)), "node_id": pa.array(a.node_id[g]),
                "name": _dict(a.name[g], a.names), "kind": _dict(a.kind[g].astype(np.int32), KINDS),
                "comm_type": _dict(a.op[g], _OPS), "group": _dict(a.group[g], a.groups),
                "bytes": pa.array(a.nbytes[g]), "start_ns": pa.array(start * 1e9), "end_ns": pa.array(end * 1e9)})
        self._intervals = tuple(np.concatenate(c) for c in zip(*keep))

    # -------------------------------------------------------- collectives
    def collectives(self):
        """One row per collective instance (first arrival to last finish)."""
        import pandas as pd

        rows = []
        for (_comm, seq), inst in self.run.colls.items.items():
            run, n = inst["run"], len(inst["members"])
            sched = run.sched
            op = OP_NAMES.get(inst["type"], sched.op)
            t0, t1 = float(run.start.min()), float(run.t_done.max())
            algbw = sched.nbytes / 1e9 / (t1 - t0) if t1 > t0 and op != "barrier" else float("nan")
            busbw = algbw * nccl_table.bus_factor(op, n) if op in nccl_table.OPS else float("nan")
            label = "world" if n == self.n else _group_label(self.run, inst.get("group"))
            rows.append((seq, op, sched.algorithm, label, n, int(round(sched.nbytes)), t0 * 1e9,
                         float(run.start.max()) * 1e9, t1 * 1e9, algbw, busbw))
        rows.sort(key=lambda r: (r[6], r[3], r[0]))
        return pd.DataFrame.from_records(rows, columns=list(dataset.COLUMNS["collectives"]))

    # --------------------------------------------------------------- links
    def links(self, makespan_s: float | None = None):
        """One row per directed link: traffic and occupancy counters of the network."""
        return link_frame(self.run.topo, self.run.net, self.makespan if makespan_s is None else makespan_s,
                          self.result.link_status)

    @property
    def makespan(self) -> float:
        return float(self.result.finish.max()) if self.result.finish.size else 0.0

    # --------------------------------------------------------------- ranks
    def ranks(self):
        """Per-rank time breakdown (see the module docstring)."""
        import pandas as pd

        if self._intervals is None:
            for _ in self.iter_ops():
                pass
        rank, start, end, cls = self._intervals
        rank = rank.astype(np.int64)
        comp = _union(rank[cls == 1], start[cls == 1], end[cls == 1], self.n)
        comm = _union(rank[cls == 2], start[cls == 2], end[cls == 2], self.n)
        busy = _union(rank, start, end, self.n)
        finish = self.result.finish
        ids = np.array([st.rank for st in self.run.ranks])
        cols = {"compute": comp[ids], "comm": comm[ids], "busy": busy[ids], "ops": self._counts[ids]}
        rep = self.run.replicas
        if rep is not None:  # the other replicas are translations of the representatives
            cols, ids = {k: rep.expand(v) for k, v in cols.items()}, np.arange(self.n)
            delta = getattr(self.run, "tail_delta", None)
            if delta is not None:  # a last collective that ended apart from the representative's
                cols["comm"], cols["busy"] = cols["comm"] + delta, cols["busy"] + delta
        gpn = max(1, self.run.topo.gpus_per_node)
        gpu = self.run.rank_gpus[ids]
        return pd.DataFrame({
            "rank": ids.astype(np.int32), "gpu": gpu.astype(np.int32), "host": (gpu // gpn).astype(np.int32),
            "finish_ns": finish * 1e9,
            "compute_ns": cols["compute"] * 1e9, "comm_ns": cols["comm"] * 1e9,
            "exposed_comm_ns": (cols["busy"] - cols["compute"]) * 1e9,
            "idle_ns": np.maximum(finish - cols["busy"], 0.0) * 1e9, "ops": cols["ops"],
            "compute_scale": self.run.compute_scale[ids], "launch_delay_ns": self.run.launch_delay[ids] * 1e9})

    # ---------------------------------------------------------------- runs
    def runs(self):
        """The one-row ``runs`` table (flattened config, versions, wall time, totals)."""
        r = self.result
        used = self.run.roofline.used() if hasattr(self.run, "roofline") else {}  # kernel kind -> fraction of peak
        return dataset.runs_row(self.config, wall_time_s=float(r.wall_time_s), makespan_ns=self.makespan * 1e9,
                                n_ranks=self.n, n_ops=len(r.ops), notes="\n".join(r.notes),
                                unknown_dep_refs=int(r.unknown_deps),
                                comm_streams=getattr(self.run, "comm_streams", "one"),  # comm-lane policy run
                                **_sm_columns(self.run),
                                **{f"compute_efficiency_used.{k}": v for k, v in used.items()},
                                **dataset.topology_columns(getattr(self.run, "topo", None)))

    def frames(self) -> dict:
        """All five tables as pandas DataFrames (``run_id`` added)."""
        import pyarrow as pa

        ops = pa.Table.from_batches(list(self.iter_ops()))
        tables = {"ops": ops, "collectives": self.collectives(), "links": self.links(), "ranks": self.ranks(),
                  "runs": self.runs()}
        from netsim.results.layout import to_pandas

        return {k: to_pandas(dataset.conform_table(dataset.as_arrow(v), k, self.run_id)) for k, v in tables.items()}

    def write(self, out_dir, *, overwrite: bool = False) -> str:
        """Write the dataset (ops streamed in row groups, runs last); returns the run id."""
        dataset.check_writable(out_dir, self.run_id, overwrite)
        lazy = {"collectives": self.collectives, "links": self.links, "ranks": self.ranks}  # ranks after ops
        tables = {"ops": self.iter_ops(), **{k: _later(f) for k, f in lazy.items()}, "runs": self.runs()}
        dataset.write_run(out_dir, self.run_id, tables, self.config, overwrite=overwrite)
        return self.run_id


def _sm_columns(run) -> dict:
    """Whether comm kernels took SMs from compute in ``run``, and the GPU's SM count (0: unknown)."""
    share = getattr(run, "sms", None)
    sms = getattr(getattr(getattr(run, "topo", None), "facts", None), "gpu_sms", None)
    return {"sm_contention": bool(share is not None and share.sms), "gpu_sms": int(sms or 0)}


def _later(fn):
    """An iterable that calls ``fn`` only when iterated (so a table can depend on an earlier one)."""
    yield fn()


def link_frame(topo, net, makespan_s: float, status: np.ndarray | None = None):
    """The ``links`` table of a network after a run (``status``: 0 ok, 1 degraded, 2 failed per link)."""
    import pandas as pd

    from netsim.topology.model import LINK_KINDS, NODE_KINDS, node_names

    names = np.array(node_names(topo), dtype=object)
    kinds = np.array(NODE_KINDS, dtype=object)[topo.node_kind.astype(np.int64)]
    status = np.zeros(topo.n_links, dtype=np.int64) if status is None else np.asarray(status, dtype=np.int64)
    stats = net.link_stats()
    cap = np.where(status == 2, 0.0, topo.link_bw)
    span = makespan_s if makespan_s > 0 else np.inf
    with np.errstate(divide="ignore", invalid="ignore"):
        util = np.where(cap > 0, stats["bytes"] / (cap * span), 0.0)
    return pd.DataFrame({
        "link_id": np.arange(topo.n_links, dtype=np.int64),
        "kind": np.array(LINK_KINDS, dtype=object)[topo.link_kind.astype(np.int64)],
        "src": names[topo.link_src], "dst": names[topo.link_dst], "src_kind": kinds[topo.link_src],
        "dst_kind": kinds[topo.link_dst], "status": np.array(LINK_STATUS, dtype=object)[status],
        "capacity_GBps": cap / 1e9, "bytes": stats["bytes"], "busy_ns": np.minimum(stats["busy_s"], makespan_s) * 1e9,
        "utilization": util, "peak_flows": stats["peak_flows"].astype(np.int32)})


def write_bench_run(out_dir, config: dict, op: str, rows, nranks: int, wall_time_s: float, *,
                    overwrite: bool = False, extra: dict | None = None, topo=None) -> str:
    """``netsim bench --out DIR``: one ``collectives`` row per size (nccl-tests definitions), the
    ``extra`` tables (``links`` and ``ranks`` per size, :mod:`netsim.results.bench_tables`) and ``runs``."""
    import pandas as pd

    run_id = dataset.run_id_for(config)
    records = [(i, op, r.algorithm, "world", nranks, int(r.size_bytes), 0.0, 0.0, r.time_us * 1e3,
                r.algbw_GBps, r.busbw_GBps) for i, r in enumerate(rows)]
    frame = pd.DataFrame.from_records(records, columns=list(dataset.COLUMNS["collectives"]))
    runs = dataset.runs_row(config, wall_time_s=wall_time_s, n_ranks=nranks, **dataset.topology_columns(topo))
    dataset.write_run(Path(out_dir), run_id, {"collectives": frame, **(extra or {}), "runs": runs}, config,
                      overwrite=overwrite)
    return run_id
