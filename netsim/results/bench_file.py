"""Reading a single-file bench output (``netsim bench --out x.parquet``).

The write side, :func:`netsim.results.bench_tables.write_bench_file`, builds on
:mod:`netsim.results.dataset`; this module does not, so the dataset reader
(:class:`netsim.results.reader.Results`) can open such a file without an import cycle.
"""

from __future__ import annotations

import numpy as np

#: Old single-file column names -> the dataset's (files written before the rename).
_OLD_NAMES = {"size_bytes": "bytes", "nranks": "group_size"}


def read_bench_file(path):
    """``(run_id, config, collectives DataFrame)`` of a single-file bench output.

    Files written before the column renames (``size_bytes``, ``nranks``, ``time_us``; ``placement``,
    now the boolean ``in_place``) come back in the dataset's names; a file without a ``run_id`` gets ``"file"``.  Raises
    :class:`~netsim.errors.ResultsError` for a file that is not a bench output."""
    import json

    import pandas as pd
    import pyarrow.parquet as pq

    from netsim.errors import ResultsError
    from netsim.results.layout import arrow_problem, to_pandas

    try:
        meta = pq.read_metadata(path).metadata or {}
        df = to_pandas(pq.read_table(path))
    except Exception as exc:  # noqa: BLE001 - a damaged or foreign file: one line naming it
        raise ResultsError(f"cannot read Parquet ({arrow_problem(exc)})", source=str(path)) from None
    if "time_us" in df.columns and "end_ns" not in df.columns:  # the old vocabulary
        df = df.rename(columns=_OLD_NAMES)
        df["start_ns"], df["end_ns"] = 0.0, df.pop("time_us").astype(float) * 1e3
        df.insert(0, "seq", pd.factorize(df["bytes"])[0].astype(np.int64))
    if "placement" in df.columns and "in_place" not in df.columns:  # before in_place: "out_of_place"/"in_place"
        df.insert(df.columns.get_loc("placement"), "in_place", df.pop("placement").astype(str) == "in_place")
    need = {"op", "bytes", "end_ns", "busbw_GBps"}
    if not need <= set(df.columns):
        raise ResultsError(f"not a netsim results directory nor a `netsim bench --out x.parquet` file "
                         f"(columns {sorted(need - set(df.columns))} missing)", source=str(path))
    try:
        config = json.loads(meta[b"netsim.config"]) if b"netsim.config" in meta else {}
    except ValueError as exc:
        raise ResultsError(f"netsim.config in the file metadata is not JSON ({exc})", source=str(path)) from None
    run_id = str(df["run_id"].iloc[0]) if "run_id" in df.columns and len(df) else "file"
    if "run_id" not in df.columns:
        df.insert(0, "run_id", pd.Series([run_id] * len(df), dtype=str))
    return run_id, config, df
