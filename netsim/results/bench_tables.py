"""Per-size ``links`` and ``ranks`` tables of ``netsim bench --out DIR`` (every op).

Each size of a sweep is one simulation; its rows carry ``seq`` (the size's index, as in the
``collectives`` table) and ``size_bytes``.  ``links``: the links that carried traffic, with
the columns of :func:`netsim.results.record.link_frame` plus ``tier`` (nvlink, pcie, nic or
the switch tiers, :func:`netsim.topology.model.link_tier`) and ``alone_ns`` (bytes / capacity: how
long the link needs for its bytes alone; the largest is the run's bound).  ``ranks``: per rank,
``finish_ns`` and the bytes the schedule has it send and receive (relays included).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class SizeRun:
    """What one size of a bench sweep leaves behind for the tables."""

    size_bytes: float
    time_s: float
    link_bytes: np.ndarray
    link_busy_s: np.ndarray
    link_peak: np.ndarray
    finish_s: np.ndarray
    sent: np.ndarray
    received: np.ndarray


def capture(size_bytes: float, time_s: float, net, result) -> SizeRun:
    """Keep the counters of one finished size (``net``: its network; ``result``: the executor's)."""
    st = net.link_stats()
    sched = result.schedule
    return SizeRun(float(size_bytes), float(time_s), st["bytes"].copy(), st["busy_s"].copy(),
                   st["peak_flows"].copy(), result.finish - result.start.min(), sched.bytes_sent(),
                   sched.bytes_received())


def links_frame(topo, runs: list[SizeRun]):
    """Links with traffic, one block per size (see the module docstring)."""
    import pandas as pd

    from netsim.topology.model import LINK_KINDS, NODE_KINDS, link_tier, node_names

    names = np.array(node_names(topo), dtype=object)
    kinds = np.array(NODE_KINDS, dtype=object)[topo.node_kind.astype(np.int64)]
    lkind = np.array(LINK_KINDS, dtype=object)[topo.link_kind.astype(np.int64)]
    tier = link_tier(topo)
    frames = []
    for seq, r in enumerate(runs):
        used = np.flatnonzero(r.link_bytes > 0)
        cap = topo.link_bw[used]
        alone = np.where(cap > 0, r.link_bytes[used] / cap, 0.0)
        span = r.time_s if r.time_s > 0 else np.inf
        frames.append(pd.DataFrame({
            "seq": np.full(used.size, seq, dtype=np.int64), "size_bytes": np.full(used.size, r.size_bytes),
            "link_id": used.astype(np.int64), "kind": lkind[used], "src": names[topo.link_src[used]],
            "dst": names[topo.link_dst[used]], "src_kind": kinds[topo.link_src[used]],
            "dst_kind": kinds[topo.link_dst[used]], "status": "ok", "capacity_GBps": cap / 1e9,
            "bytes": r.link_bytes[used], "busy_ns": np.minimum(r.link_busy_s[used], r.time_s) * 1e9,
            "utilization": alone / span, "peak_flows": r.link_peak[used].astype(np.int32),
            "tier": tier[used], "alone_ns": alone * 1e9}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def ranks_frame(topo, ranks: np.ndarray, runs: list[SizeRun]):
    """One row per (size, rank): finish time and bytes sent and received."""
    import pandas as pd

    gpn = max(1, topo.gpus_per_node)
    frames = [pd.DataFrame({
        "seq": np.full(ranks.size, seq, dtype=np.int64), "size_bytes": np.full(ranks.size, r.size_bytes),
        "rank": np.arange(ranks.size, dtype=np.int32), "gpu": ranks.astype(np.int32),
        "host": (ranks // gpn).astype(np.int32), "finish_ns": r.finish_s * 1e9,
        "send_bytes": r.sent, "recv_bytes": r.received}) for seq, r in enumerate(runs)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()




# ------------------------------------------------------------------ bench --out x.parquet
def write_bench_file(path, frame, config: dict) -> str:
    """``netsim bench --out x.parquet``: ``frame`` (:func:`netsim.results.nccl_table.rows_to_frame`)
    as one Parquet file, atomically, with the dataset's file metadata (``netsim.config``,
    ``netsim.schema_version``) so :func:`netsim.open_results` reads it.  Returns its run id."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from netsim.results import dataset
    from netsim.results.io import atomic_file

    from pathlib import Path

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    run_id = dataset.run_id_for(config)
    tbl = dataset.conform_table(pa.Table.from_pandas(frame, preserve_index=False), "collectives", run_id)
    tbl = tbl.replace_schema_metadata({"netsim.config": dataset.canonical_config(config),
                                       "netsim.schema_version": str(dataset.SCHEMA_VERSION),
                                       "netsim.kind": "bench"})
    with atomic_file(path, "wb") as fh:
        pq.write_table(tbl, fh, compression="zstd")
    return run_id


def read_bench_file(path):
    """See :func:`netsim.results.bench_file.read_bench_file` (kept here beside the writer)."""
    from netsim.results.bench_file import read_bench_file as read

    return read(path)
