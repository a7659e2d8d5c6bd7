"""Reading results datasets: :func:`open_results` and :class:`Results`, every file checked.

A dataset is read lazily: opening it lists its complete runs, and a table's files are read
when the table is asked for.  Every part file is checked then, and a damaged or foreign one
raises :class:`~netsim.errors.ResultsError` naming the file and the problem, never a bare
pyarrow error:

* a file that is not Parquet (empty, truncated, garbage, another format): its footer does not read;
* a fixed table's file (:data:`~netsim.results.layout.COLUMNS`) without one of its columns, or
  with a column of another kind (text where numbers belong, or the reverse);
* files whose extra columns cannot be merged across runs (one run's ``x`` text, another's numbers);
* pages that do not decode (a file damaged inside: ZSTD, thrift, checksums);
* a ``runs`` part whose metadata holds no ``netsim.config`` JSON (:meth:`Results.config`);
* a folder with none of the dataset's folders (``ops/``, ``collectives/``, ``links/``,
  ``ranks/``, ``runs/``, a sweep's ``failures/``), or a path that does not exist.

>>> import os, tempfile
>>> from netsim.errors import InputError, ResultsError
>>> d = tempfile.mkdtemp(); f = os.path.join(d, "runs", "run_id=ab", "part-0.parquet")
>>> os.makedirs(os.path.dirname(f)); open(f, "wb").close()
>>> try:
...     open_results(d).runs
... except ResultsError as err:
...     print(err.message)
cannot read Parquet (ArrowInvalid: Parquet file size is 0 bytes)
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from netsim.errors import InputError, ResultsError
from netsim.results.layout import (COLUMNS, DICT, FAILURES, PART, STR, TABLES, arrow_problem, part_path, schema,
                                   to_pandas)


def _kind(arrow_type) -> str:
    """``"text"``, ``"number"``, ``"null"`` or the type itself, for comparing a column with its code."""
    import pyarrow as pa

    t = arrow_type.value_type if pa.types.is_dictionary(arrow_type) else arrow_type
    if pa.types.is_null(t):
        return "null"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "text"
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return "number"
    return str(arrow_type)


def check_part(path: str | os.PathLike, table: str | None = None):
    """The Arrow schema of part file ``path`` (metadata dropped), checked against the fixed
    ``table``'s columns when it has some; :class:`~netsim.errors.ResultsError` otherwise."""
    import pyarrow.parquet as pq

    try:
        found = pq.read_schema(path).remove_metadata()
    except Exception as exc:  # noqa: BLE001 - any failure to read a footer: a damaged or foreign file
        raise ResultsError(f"cannot read Parquet ({arrow_problem(exc)})", source=str(path)) from None
    columns = COLUMNS.get(table or "", {})
    missing = [c for c in columns if c not in found.names]
    if missing:
        raise ResultsError(f"not a netsim {table} table: missing column(s) {', '.join(missing)}", source=str(path))
    for name, code in {"run_id": DICT, **columns}.items():
        if name not in found.names:
            continue
        want = "text" if code in (STR, DICT) else "number"
        got = _kind(found.field(name).type)
        if got not in (want, "null"):
            raise ResultsError(f"expected {want} ({code}), got {found.field(name).type}", source=str(path),
                               field=name)
    return found


def read_part(path: str | os.PathLike, table: str | None = None):
    """One part file as a pandas DataFrame, checked like :func:`check_part`."""
    import pyarrow.parquet as pq

    check_part(path, table)
    try:
        return to_pandas(pq.read_table(path))
    except Exception as exc:  # noqa: BLE001 - pages that do not decode
        raise ResultsError(f"cannot read Parquet ({arrow_problem(exc)})", source=str(path)) from None


class Results:
    """A results directory (or a ``bench --out x.parquet`` file): tables as pandas DataFrames
    (complete runs only) or Arrow datasets.  Damaged files raise
    :class:`~netsim.errors.ResultsError` when their table is read (see the module docstring)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._frames: dict = {}
        self._file = None  # (run_id, config) of a single-file bench output
        if self.path.is_file():
            from netsim.results.bench_file import read_bench_file

            rid, cfg, coll = read_bench_file(self.path)
            self._file = (rid, cfg)
            self._frames["collectives"] = coll
        elif not self.path.is_dir():
            raise ResultsError("no such results directory" if not self.path.exists() else
                               "not a results directory nor a `netsim bench --out x.parquet` file",
                               source=str(self.path))
        elif not any((self.path / name).is_dir() for name in TABLES + (FAILURES,)):
            raise ResultsError(f"not a netsim results dataset: none of the folders {', '.join(TABLES)} "
                               "(a folder written by --out or netsim sweep)", source=str(self.path))

    @property
    def run_ids(self) -> list[str]:
        """Ids of the complete runs, sorted."""
        if self._file is not None:
            return [self._file[0]]
        runs = self.path / "runs"
        if not runs.is_dir():
            return []
        return sorted(p.parent.name[len("run_id="):] for p in runs.glob(f"run_id=*/{PART}") if p.is_file())

    def files(self, name: str) -> list[Path]:
        """Partition files of table ``name`` for the complete runs."""
        if self._file is not None:
            return [self.path] if name == "collectives" else []
        return [p for p in (part_path(self.path, name, r) for r in self.run_ids) if p.is_file()]

    def dataset(self, name: str):
        """A ``pyarrow.dataset`` over table ``name`` (complete runs, hive-partitioned by run_id).

        Every file's footer and columns are checked here; pages are read later, by pyarrow
        (:meth:`table` reads them and names a file whose pages do not decode)."""
        import pyarrow as pa
        import pyarrow.dataset as ds

        files = self.files(name)
        if not files:
            return ds.dataset(schema(name).empty_table())
        if self._file is not None:
            return ds.dataset(pa.Table.from_pandas(self.table(name), preserve_index=False))
        unified = _unify(files, [check_part(f, name) for f in files])
        part = ds.partitioning(pa.schema([("run_id", pa.string())]), flavor="hive")
        try:
            return ds.dataset([str(f) for f in files], format="parquet", schema=unified, partitioning=part,
                              partition_base_dir=str(self.path / name))
        except Exception as exc:  # noqa: BLE001 - checked above; anything left is the folder's
            raise ResultsError(f"cannot open table {name} ({arrow_problem(exc)})", source=str(self.path / name)) \
                from None

    def table(self, name: str):
        """Table ``name`` as a pandas DataFrame (cached); empty with the known columns when absent."""
        if name not in self._frames:
            data = self.dataset(name)
            try:
                tbl = data.to_table()
            except Exception as exc:  # noqa: BLE001 - pages that do not decode: name the file
                for f in self.files(name):
                    read_part(f, name)
                raise ResultsError(f"cannot read table {name} ({arrow_problem(exc)})",
                                   source=str(self.path / name)) from None
            self._frames[name] = to_pandas(tbl)
        return self._frames[name]

    ops = property(lambda self: self.table("ops"), doc="One row per executed node per rank.")
    collectives = property(lambda self: self.table("collectives"), doc="One row per collective instance.")
    links = property(lambda self: self.table("links"), doc="One row per directed link.")
    ranks = property(lambda self: self.table("ranks"), doc="One row per rank: time breakdown.")
    runs = property(lambda self: self.table("runs"), doc="One row per run: flattened config and versions.")

    def config(self, run_id: str) -> dict:
        """The canonical config a run was written with."""
        import pyarrow.parquet as pq

        if self._file is not None and run_id == self._file[0]:
            return self._file[1]
        path = part_path(self.path, "runs", run_id)
        if not path.is_file():
            raise InputError(f"no complete run {run_id!r} (runs: {', '.join(self.run_ids) or 'none'})",
                             source=str(self.path))
        try:
            meta = pq.read_metadata(path).metadata or {}
        except Exception as exc:  # noqa: BLE001 - a damaged footer
            raise ResultsError(f"cannot read Parquet ({arrow_problem(exc)})", source=str(path)) from None
        if b"netsim.config" not in meta:
            raise ResultsError("no netsim.config in the file metadata (not written by netsim)", source=str(path))
        try:
            return json.loads(meta[b"netsim.config"])
        except ValueError as exc:
            raise ResultsError(f"netsim.config in the file metadata is not JSON ({exc})", source=str(path)) from None

    def __repr__(self) -> str:
        return f"Results({str(self.path)!r}, runs={len(self.run_ids)})"


def _unify(files: list[Path], schemas: list):
    """One schema for ``files``; :class:`~netsim.errors.ResultsError` naming the first file whose
    columns cannot be merged with the files before it."""
    import pyarrow as pa

    try:
        return pa.unify_schemas(schemas, promote_options="permissive")
    except Exception:  # noqa: BLE001 - find the file that does not fit
        pass
    merged = schemas[0]
    for f, s in zip(files[1:], schemas[1:]):
        try:
            merged = pa.unify_schemas([merged, s], promote_options="permissive")
        except Exception as exc:  # noqa: BLE001
            raise ResultsError(f"columns do not match the table's other files ({arrow_problem(exc)})",
                               source=str(f)) from None
    return merged


def open_results(path: str | os.PathLike) -> Results:
    """Open a results directory written by ``--out`` (or a sweep), or the single Parquet file of
    ``netsim bench --out x.parquet`` (its rows are the ``collectives`` table, one per size
    out-of-place and one in-place, told apart by ``in_place``; the other tables are empty); see :class:`Results`.

    Raises :class:`~netsim.errors.ResultsError` (naming the file and the problem) for a path
    that is no dataset, and, when a table is read, for a damaged or foreign file in it."""
    return Results(path)
