"""Results datasets: five hive-partitioned Parquet tables, opened with one call.

Layout (a sweep is many ``run_id`` partitions in one directory; one run is one)::

    DIR/ops/run_id=<run_id>/part-0.parquet
    DIR/collectives/run_id=<run_id>/part-0.parquet
    DIR/links/run_id=<run_id>/part-0.parquet
    DIR/ranks/run_id=<run_id>/part-0.parquet
    DIR/runs/run_id=<run_id>/part-0.parquet      written last: it marks the run complete

``run_id`` is the first 16 hex digits of the SHA-256 of :func:`canonical_config`
(options at a default they had before they existed left out, see :func:`run_id_for`).
Every file carries a ``run_id`` column, dictionary-encoded strings, and the file
metadata keys ``netsim.config`` (canonical config JSON) and ``netsim.schema_version``.
Files are written to a hidden temporary name (``.part-0.parquet.<random>.tmp``)
in their own folder and renamed into place, so readers never see partial files.
Column meanings and units are listed in ``docs/faults.md`` (section "Results").

>>> import tempfile, pandas as pd
>>> d = tempfile.mkdtemp()
>>> rid = run_id_for({"a": 1})
>>> _ = write_run(d, rid, {"ranks": pd.DataFrame({"rank": [0], "finish_ns": [5.0]})}, {"a": 1})
>>> res = open_results(d)
>>> res.ranks["finish_ns"].tolist(), res.config(rid)
([5.0], {'a': 1})

``pandas.read_parquet(DIR/"ops")`` also works; with ``pyarrow.dataset`` directly pass
``partitioning=ds.HivePartitioning.discover(infer_dictionary=True)`` (or use
:meth:`Results.dataset`), because ``run_id`` is dictionary-encoded in the files.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable

from netsim.errors import InputError
from netsim.results.layout import (COLUMNS, PART, SCHEMA_VERSION, TABLES, existing_parts, is_complete,  # noqa: F401
                                   part_path, schema)
from netsim.results.reader import Results, open_results  # noqa: F401  (re-exported: the dataset's API)

#: Rows per Parquet row group when a whole table is written at once.
ROW_GROUP_ROWS = 1 << 18


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "tolist"):  # numpy scalars and arrays
        return obj.tolist()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    raise TypeError(f"config value {obj!r} is not JSON-serializable")


def canonical_config(cfg: dict) -> str:
    """The config as JSON with sorted keys and compact separators (what ``run_id`` hashes).

    >>> canonical_config({"b": 1, "a": [1, 2]})
    '{"a":[1,2],"b":1}'
    """
    return json.dumps(cfg, sort_keys=True, separators=(",", ":"), default=_json_default, allow_nan=True)


#: Options added after run ids were first written, with the value every earlier run had:
#: a top-level key at this value is left out of the hash, so those runs keep their ids.
IMPLICIT_DEFAULTS = {"placement": "packed", "engine": "auto", "ll_transport": "nvlink", "kernels": "fa3-te"}


def run_id_for(cfg: dict) -> str:
    """First 16 hex digits of the SHA-256 of :func:`canonical_config`, without the
    :data:`IMPLICIT_DEFAULTS` keys that hold their default.

    >>> len(run_id_for({})), run_id_for({"a": 1}) == run_id_for({"a": 1})
    (16, True)
    >>> run_id_for({"a": 1, "placement": "packed"}) == run_id_for({"a": 1}) != run_id_for({"a": 1, "placement": "random"})
    True
    """
    import hashlib

    hashed = {k: v for k, v in cfg.items()
              if not (k in IMPLICIT_DEFAULTS and isinstance(v, str) and v == IMPLICIT_DEFAULTS[k])}
    return hashlib.sha256(canonical_config(hashed).encode()).hexdigest()[:16]


def check_writable(out_dir: str | os.PathLike, run_id: str, overwrite: bool = False) -> None:
    """Raise :class:`InputError` if ``out_dir`` cannot take a results dataset (see
    :func:`netsim.results.io.check_output_dir`) or already holds the complete run ``run_id``.

    Every command that writes a dataset calls it before it simulates, so it also removes the
    temporary part files that earlier writers of ``run_id`` left when they died
    (:func:`remove_stale_parts`).  Parts of a run without its ``runs`` part (a run killed while
    writing) do not count: :func:`write_run` replaces them."""
    from netsim.results.io import check_output_dir

    root = Path(out_dir)
    check_output_dir(root, what="a results directory")
    remove_stale_parts(root, run_id)
    if is_complete(root, run_id) and not overwrite:
        raise InputError(f"already holds run {run_id}; pass --overwrite to replace it",
                         source=str(part_path(root, "runs", run_id)))


def remove_stale_parts(out_dir: str | os.PathLike, run_id: str = "*") -> list[Path]:
    """Remove the temporary part files (``.part-0.parquet.<random>.tmp``) of ``run_id`` (``"*"``:
    every run) that no writer holds: those of a writer that died, even by SIGKILL
    (:func:`netsim.results.io.remove_stale_temps`).  Files being written are left alone.

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp(); os.makedirs(os.path.join(d, "ops", "run_id=ab"))
    >>> open(os.path.join(d, "ops", "run_id=ab", ".part-0.parquet.x1y2.tmp"), "w").close()  # a dead writer's
    >>> [p.name for p in remove_stale_parts(d, "ab")], os.listdir(os.path.join(d, "ops", "run_id=ab"))
    (['.part-0.parquet.x1y2.tmp'], [])
    """
    import glob

    from netsim.results.io import remove_stale_temps

    rid = run_id if run_id == "*" else glob.escape(run_id)
    return [p for folder in sorted(Path(out_dir).glob(f"*/run_id={rid}")) if folder.is_dir()
            for p in remove_stale_temps(folder, PART)]


# ------------------------------------------------------------------ arrow
def as_arrow(chunk):
    """A pyarrow Table from a Table, a RecordBatch or a pandas DataFrame (index dropped)."""
    import pyarrow as pa

    if isinstance(chunk, pa.Table):
        return chunk
    if isinstance(chunk, pa.RecordBatch):
        return pa.Table.from_batches([chunk])
    return pa.Table.from_pandas(chunk, preserve_index=False)


def conform_table(tbl, table: str, run_id: str):
    """Add ``run_id``, dictionary-encode strings, cast known columns to the table's schema."""
    import numpy as np
    import pyarrow as pa

    known = schema(table)
    tbl = tbl.replace_schema_metadata(None)
    if "run_id" in tbl.column_names:
        tbl = tbl.drop_columns(["run_id"])
    cols, fields = [], []
    for f in known:
        if f.name == "run_id":
            arr = pa.DictionaryArray.from_arrays(pa.array(np.zeros(tbl.num_rows, np.int32)), pa.array([run_id]))
        elif f.name in tbl.column_names:
            arr = tbl.column(f.name)
            if pa.types.is_dictionary(f.type) and not pa.types.is_dictionary(arr.type):
                arr = arr.cast(pa.string()).dictionary_encode()
            if pa.types.is_integer(f.type) and pa.types.is_floating(arr.type):  # e.g. bytes as a mean
                import pyarrow.compute as pc

                arr = pc.round(arr)
            arr = arr.cast(f.type)
        else:
            arr = pa.nulls(tbl.num_rows, f.type)
        cols.append(arr)
        fields.append(f)
    for name in tbl.column_names:
        if name in known.names:
            continue
        arr = tbl.column(name)
        if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
            arr = arr.cast(pa.string()).dictionary_encode()
        cols.append(arr)
        fields.append(pa.field(name, arr.type))
    return pa.Table.from_arrays(cols, schema=pa.schema(fields))


def _chunks(data) -> Iterable:
    import pyarrow as pa

    if data is None:
        return []
    if isinstance(data, (pa.Table, pa.RecordBatch)) or hasattr(data, "to_numpy"):
        return [data]
    return data


class PartWriter:
    """Stream one table of one run into its partition file in row groups, atomically.

    The file appears under its final name only on :meth:`close`; :meth:`abort` (or an
    exception inside ``with``) removes the temporary file.
    """

    def __init__(self, out_dir, table: str, run_id: str, config_json: str, row_group_rows: int = ROW_GROUP_ROWS):
        from netsim.results.io import TempFile

        self.table, self.run_id, self.rows = table, run_id, 0
        self.target = part_path(out_dir, table, run_id)
        self.target.parent.mkdir(parents=True, exist_ok=True)
        self._temp = TempFile(self.target)  # locked while this writer lives (io.remove_stale_temps)
        self.tmp = self._temp.path
        self._meta = {"netsim.config": config_json, "netsim.schema_version": str(SCHEMA_VERSION)}
        self._writer = None
        self._schema = None
        self._group = row_group_rows

    def write(self, chunk) -> None:
        """Append a DataFrame, Arrow table or record batch (cast to the first chunk's schema)."""
        import pyarrow.parquet as pq

        tbl = conform_table(as_arrow(chunk), self.table, self.run_id)
        if self._writer is None:
            self._schema = tbl.schema.with_metadata(self._meta)
            self._writer = pq.ParquetWriter(self.tmp, self._schema, compression="zstd")
        elif tbl.schema.remove_metadata() != self._schema.remove_metadata():
            tbl = tbl.select(self._schema.names).cast(self._schema.remove_metadata())
        self._writer.write_table(tbl.replace_schema_metadata(self._meta), row_group_size=self._group)
        self.rows += tbl.num_rows

    def close(self) -> Path:
        """Finish the file and rename it into place (on an error: :meth:`abort`, and raise)."""
        from netsim.results.io import publish

        try:
            if self._writer is None:  # no chunk at all: an empty table with the known columns
                self.write(schema(self.table).empty_table())
            self._writer.close()
            target = publish(self.tmp, self.target)
        except BaseException:
            self.abort()
            raise
        self._temp.release()
        return target

    def abort(self) -> None:
        """Drop the temporary file."""
        try:
            if self._writer is not None:
                self._writer.close()
        except Exception:  # noqa: BLE001 - the file goes anyway (e.g. the disk is full)
            pass
        finally:
            self._writer = None
            self._temp.discard()

    def __enter__(self) -> "PartWriter":
        return self

    def __exit__(self, exc_type, *_exc) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def write_run(out_dir, run_id: str, tables: dict, config: dict, *, overwrite: bool = False) -> Path:
    """Write one run's tables (DataFrames, Arrow tables or iterables of chunks) under ``out_dir``.

    ``runs`` is written last (a one-row table from ``config`` when not given), so a run is
    complete exactly when its ``runs`` part exists.  Refuses a complete ``run_id`` unless
    ``overwrite``; then the old ``runs`` part goes first and stale parts of tables not in
    ``tables`` are removed.  Leftovers of an incomplete run (no ``runs`` part: it was killed
    while writing) are replaced the same way without ``overwrite``.  Returns ``out_dir`` as a Path.
    """
    root = Path(out_dir)
    check_writable(root, run_id, overwrite)
    bad = [t for t in tables if not t.isidentifier() or t.startswith("_")]
    if bad:
        raise ValueError(f"bad table name {bad[0]!r}")
    cfg_json = canonical_config(config)
    names = [t for t in tables if t != "runs"]
    if overwrite or not is_complete(root, run_id):
        for p in existing_parts(root, run_id):
            if p.parent.parent.name == "runs" or p.parent.parent.name not in names:
                p.unlink()
    for name in names + ["runs"]:
        data = tables.get(name) if name != "runs" or "runs" in tables else [runs_row(config)]
        with PartWriter(root, name, run_id, cfg_json) as w:
            for chunk in _chunks(data):
                w.write(chunk)
    return root


def flatten_config(cfg: dict, prefix: str = "") -> dict:
    """Nested dicts joined with ``.``; lists and tuples as canonical JSON strings.

    >>> flatten_config({"a": {"b": 1}, "c": [1, 2], "d": None})
    {'a.b': 1, 'c': '[1,2]', 'd': None}
    """
    out: dict = {}
    for key, value in cfg.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten_config(value, name + "."))
        elif isinstance(value, (list, tuple, dict)):
            out[name] = canonical_config(value)  # type: ignore[arg-type]
        elif hasattr(value, "item"):
            out[name] = value.item()
        else:
            out[name] = os.fspath(value) if isinstance(value, os.PathLike) else value
    return out


def _ns_names(extra: dict):
    """Datasets hold ns: an ``extra`` metric ``<name>_us`` (a summary printed in µs) becomes ``<name>_ns``.

    >>> dict(_ns_names({"time_us": 1.5, "bound": "nic"}))
    {'time_ns': 1500.0, 'bound': 'nic'}
    """
    for k, v in extra.items():
        if k.endswith("_us") and isinstance(v, (int, float)) and not isinstance(v, bool):
            yield k[:-3] + "_ns", float(v) * 1e3
        else:
            yield k, v


def efficiency_columns(topo) -> dict:
    """``runs`` columns of the achieved / line rate per link kind a run used
    (``link_efficiency.<kind>``; empty for a topology at line rates or ``None``), and on a fat-tree
    the fabric kind and routing (``fabric``, ``routing``)."""
    eff = getattr(getattr(topo, "facts", None), "link_efficiency", None) or {}
    out = {f"link_efficiency.{k}": float(v) for k, v in sorted(eff.items())}
    fabric = getattr(getattr(topo, "facts", None), "fabric", None)
    if fabric is not None:  # the scale-out fabric's kind and the routing the run used on it
        out.update(fabric=fabric, routing=topo.routing)
    return out


def topology_columns(topo) -> dict:
    """``runs`` columns of the topology a run used: :func:`efficiency_columns`, and its network's
    cost and power under the shipped prices (``cost_usd``, ``power_w``, per GPU, ``cost_unpriced``:
    :func:`netsim.topology.cost.cost_columns`), so a dataset's runs compare by cost."""
    from netsim.topology.cost import cost_columns

    return {**efficiency_columns(topo), **cost_columns(topo)}


def runs_row(config: dict, **extra):
    """The one-row ``runs`` table: flattened config, netsim version, schema version, ``extra``
    (metrics named ``*_us`` are stored as ``*_ns``: every table of a dataset is in ns)."""
    import pandas as pd

    from netsim.version import __version__

    row = {"netsim_version": __version__, "schema_version": SCHEMA_VERSION, "wall_time_s": float("nan"),
           **dict(_ns_names(extra))}
    for k, v in flatten_config(config).items():
        row.setdefault(k, v)
    return pd.DataFrame([row])


def remove_run(out_dir, run_id: str) -> None:
    """Delete every partition of ``run_id`` (the ``runs`` part first)."""
    import shutil

    for p in sorted(existing_parts(out_dir, run_id), key=lambda p: p.parent.parent.name != "runs"):
        shutil.rmtree(p.parent, ignore_errors=True)
