"""Where a results dataset keeps its files, and what the fixed tables hold.

Shared by the writer (:mod:`netsim.results.dataset`) and the reader
(:mod:`netsim.results.reader`)::

    DIR/<table>/run_id=<run_id>/part-0.parquet      table = ops, collectives, links, ranks, runs

>>> part_path("res", "ops", "0123456789abcdef").as_posix()
'res/ops/run_id=0123456789abcdef/part-0.parquet'
>>> str(schema("runs").field("schema_version").type)
'int32'
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

SCHEMA_VERSION = 1
TABLES = ("ops", "collectives", "links", "ranks", "runs")
PART = "part-0.parquet"
#: A sweep's table of failed configurations (:mod:`netsim.sweep.worker`).
FAILURES = "failures"
#: Longest pyarrow message quoted in an error (:func:`arrow_problem`).
MAX_PROBLEM = 300

#: Type codes of :data:`COLUMNS`: a plain string, a dictionary-encoded string.
STR, DICT = "string", "dict"
#: Column name -> type code of the fixed tables (``run_id`` comes first in every file).
COLUMNS: dict[str, dict[str, str]] = {
    "ops": {"rank": "int32", "node_id": "int64", "name": DICT, "kind": DICT, "comm_type": DICT,
            "group": DICT, "bytes": "int64", "start_ns": "float64", "end_ns": "float64"},
    "collectives": {"seq": "int64", "op": DICT, "algorithm": DICT, "group": DICT, "group_size": "int32",
                    "bytes": "int64", "start_ns": "float64", "last_start_ns": "float64",
                    "end_ns": "float64", "algbw_GBps": "float64", "busbw_GBps": "float64"},
    "links": {"link_id": "int64", "kind": DICT, "src": DICT, "dst": DICT, "src_kind": DICT,
              "dst_kind": DICT, "status": DICT, "capacity_GBps": "float64", "bytes": "float64",
              "busy_ns": "float64", "utilization": "float64", "peak_flows": "int32"},
    "ranks": {"rank": "int32", "gpu": "int32", "host": "int32", "finish_ns": "float64", "compute_ns": "float64",
              "comm_ns": "float64", "exposed_comm_ns": "float64", "idle_ns": "float64", "ops": "int64",
              "compute_scale": "float64", "launch_delay_ns": "float64"},
    "runs": {"netsim_version": DICT, "schema_version": "int32", "wall_time_s": "float64"},
}


def part_path(out_dir: str | os.PathLike, table: str, run_id: str) -> Path:
    """``out_dir/<table>/run_id=<run_id>/part-0.parquet``."""
    return Path(out_dir) / table / f"run_id={run_id}" / PART


def is_complete(out_dir: str | os.PathLike, run_id: str) -> bool:
    """Whether the run's ``runs`` part (always written last) exists."""
    return part_path(out_dir, "runs", run_id).is_file()


def existing_parts(out_dir: str | os.PathLike, run_id: str) -> list[Path]:
    """Partition files of ``run_id`` already present in ``out_dir`` (any table)."""
    root = Path(out_dir)
    if not root.is_dir():
        return []
    return sorted(p for p in root.glob(f"*/run_id={run_id}/{PART}") if p.is_file())


@lru_cache(maxsize=None)
def schema(table: str):
    """The Arrow schema of a fixed table (``run_id`` first); ``runs`` lists only its fixed columns."""
    import pyarrow as pa

    types = {"int32": pa.int32(), "int64": pa.int64(), "float64": pa.float64(), STR: pa.string(),
             DICT: pa.dictionary(pa.int32(), pa.string())}
    cols = COLUMNS.get(table, {})
    return pa.schema([("run_id", types[DICT])] + [(c, types[t]) for c, t in cols.items()])


def arrow_problem(exc: BaseException) -> str:
    """A reading error as one short line: its type and message, whitespace collapsed.

    >>> arrow_problem(OSError("Couldn't deserialize thrift\\nDeserializing page header failed.\\n"))
    "OSError: Couldn't deserialize thrift Deserializing page header failed."
    """
    text = " ".join(str(exc).split()) or repr(exc)
    text = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)  # no control bytes on a terminal
    text = f"{type(exc).__name__}: {text}"
    return text if len(text) <= MAX_PROBLEM else text[:MAX_PROBLEM - 3] + "..."


def to_pandas(table):
    """An Arrow table as a DataFrame whose text columns are strings, not categoricals.

    The files keep text dictionary-encoded (small on disk); in pandas a categorical refuses
    string arithmetic (``"rank " + df["host"]``, ``df["src"] + "->" + df["dst"]``), so those
    columns come back as pandas' string type (pandas 3's ``str``; ``object`` under pandas 2).

    >>> import pyarrow as pa
    >>> t = pa.table({"host": pa.array(["a", "b"]).dictionary_encode()})
    >>> ("node " + to_pandas(t)["host"]).tolist()
    ['node a', 'node b']
    """
    import pyarrow as pa

    fields = [pa.field(f.name, f.type.value_type, f.nullable, f.metadata)
              if pa.types.is_dictionary(f.type) else f for f in table.schema]
    return table.cast(pa.schema(fields, table.schema.metadata)).to_pandas()
