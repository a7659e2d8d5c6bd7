"""What ``netsim astra`` and ``netsim astra compare`` share: run the parsed flags, write the dataset.

Below :mod:`netsim.cli.astra` and :mod:`netsim.astra.compare` (both import it; neither imports
the other at module level): :func:`run_from_args` runs what the flags describe,
:func:`write_dataset` writes the ``ranks``/``ops``/``runs`` tables (:func:`ranks_table`,
:func:`ops_table`, :func:`dataset_config`), :func:`note` prints a note on stderr.
"""

from __future__ import annotations

import sys
from pathlib import Path


def note(text: str) -> None:
    """Print ``netsim astra: note: TEXT`` on stderr."""
    print(f"netsim astra: note: {text}", file=sys.stderr)


def run_from_args(args, opts):
    """Run what the parsed flags describe (notes to stderr; progress unless ``--quiet``, :mod:`netsim.progress`)."""
    from netsim.astra.run import run_astra
    from netsim.progress import wanted

    res = run_astra(args.workload_configuration, args.system_configuration, args.network_configuration,
                    args.remote_memory_configuration, args.comm_group_configuration, model=args.model or "analytical",
                    engine=args.engine, progress=wanted(getattr(args, "quiet", False)),
                    stream_matching=getattr(args, "stream_matching", "astra"), **opts)
    for text in res.notes:
        note(text)
    return res


def dataset_config(res, opts: dict, args) -> dict:
    """The run's configuration as stored in the ``runs`` table (absolute paths)."""
    def path(p):
        return None if p is None or p == "empty" else str(Path(p).resolve())

    return {"tool": "netsim astra", "workload": path(args.workload_configuration),
            "system": path(args.system_configuration), "network": path(args.network_configuration),
            "remote_memory": path(args.remote_memory_configuration), "comm_groups": path(args.comm_group_configuration),
            "model": args.model or "analytical", **opts,
            **({"stream_matching": args.stream_matching} if getattr(args, "stream_matching", "astra") != "astra" else {})}


def write_dataset(out: str, res, opts: dict, args, *, overwrite: bool = False, extra: dict | None = None) -> Path:
    """``ranks``, ``ops`` and ``runs`` tables of one run (plus ``extra`` tables) via netsim.results.dataset."""
    import pandas as pd

    from netsim.results.dataset import run_id_for, runs_row, write_run

    config = dataset_config(res, opts, args)
    rid = run_id_for(config)
    tables = {"ranks": ranks_table(res), "ops": ops_table(res), **(extra or {})}
    tables["runs"] = runs_row(config, wall_time_s=res.stats.get("wall_s", float("nan")), engine=res.engine)
    write_run(out, rid, {k: v if not isinstance(v, list) else pd.DataFrame(v) for k, v in tables.items()},
              config, overwrite=overwrite)
    return Path(out)


def ranks_table(res):
    """One row per rank: finish, GPU compute, comm busy time, exposed comm, idle (ns)."""
    import numpy as np
    import pandas as pd

    from netsim.astra.workload import union_length  # numpy/protobuf: loaded when a run writes tables

    n = res.npus
    idle = []
    for r in range(n):
        rows = res.rows.get(r, res.rows.get(0, []))
        busy = float(union_length([(row[6], row[7]) for row in rows]))
        idle.append(float(res.finish[r]) - busy)
    comm = res.times.get("Comm", np.zeros(n))
    return pd.DataFrame({"rank": np.arange(n, dtype=np.int32), "finish_ns": res.finish.astype(float),
                         "compute_ns": res.gpu.astype(float), "comm_ns": np.asarray(comm, dtype=float),
                         "exposed_comm_ns": res.exposed.astype(float), "idle_ns": idle,
                         "ops": [len(res.rows.get(r, res.rows.get(0, []))) for r in range(n)]})


def ops_table(res):
    """One row per executed node (rank 0's rows stand for every rank of a symmetric run)."""
    import pandas as pd

    recs = []
    for r in range(res.npus):
        ids = res.ids.get(r)
        for row, nid, name, kind, op, nbytes, s, e in res.rows.get(r, res.rows.get(0, [])):
            recs.append((r, nid if ids is None else int(ids[row]), name, kind, op, nbytes, float(s), float(e)))
    return pd.DataFrame(recs, columns=["rank", "node_id", "name", "kind", "comm_type", "bytes", "start_ns", "end_ns"])
