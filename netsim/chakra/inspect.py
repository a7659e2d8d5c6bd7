"""Summaries and tables of Chakra workloads (one ``.et`` file or ``<prefix>.<rank>.et`` sets).

Examples
--------
>>> import os, tempfile
>>> from netsim.chakra import EtNode, NodeType, write_workload
>>> prefix = os.path.join(tempfile.mkdtemp(), "wl")
>>> _ = write_workload(prefix, [[EtNode(r, "ar", NodeType.COMM_COLL_NODE, comm_type=0, comm_size=64)]
...                             for r in range(2)])
>>> summarize_trace(prefix)["collectives"]
{('ALL_REDUCE', 64, None): 2}
"""

from __future__ import annotations

import hashlib
import os
import re
from collections import Counter, deque
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from netsim.errors import InputError
from netsim.shipped import resolve
from netsim.chakra import MISSING, NodeTable, read_et_table
from netsim.chakra.schema import CommType, NodeType
from netsim.vocab import OP_KINDS

__all__ = ["discover_ranks", "node_table", "summarize_trace"]


def discover_ranks(path_or_prefix: str | os.PathLike) -> dict[int, Path]:
    """Map rank → file for a single ``.et`` file or a ``<prefix>.<rank>.et`` set.

    A single file counts as the rank in its name (``x.3.et`` → 3), else rank 0.
    For a prefix, ranks must be exactly 0..N-1.

    Examples
    --------
    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> for r in (0, 1):
    ...     _ = open(os.path.join(d, f"w.{r}.et"), "wb").write(b"")
    >>> sorted(discover_ranks(os.path.join(d, "w")))
    [0, 1]
    """
    p = Path(resolve(path_or_prefix, prefix=True))
    if p.is_file():
        m = re.search(r"\.([0-9]+)\.et$", p.name)
        return {int(m.group(1)) if m else 0: p}
    pattern = re.compile(re.escape(p.name) + r"\.([0-9]+)\.et$")
    found: dict[int, Path] = {}
    if p.parent.is_dir():
        for f in p.parent.iterdir():
            m = pattern.fullmatch(f.name)
            if m and f.is_file():
                found[int(m.group(1))] = f
    if not found:
        raise InputError(f"no trace found: expected a .et file or files named {p.name}.<rank>.et "
                         f"in {p.parent}", source=str(path_or_prefix))
    missing = sorted(set(range(max(found) + 1)) - set(found))
    if missing:
        raise InputError(f"ranks have gaps: found {len(found)} files up to rank {max(found)} but ranks "
                         f"{missing[:10]}{'...' if len(missing) > 10 else ''} are missing",
                         source=str(path_or_prefix))
    return dict(sorted(found.items()))


def _tables(path_or_prefix: str | os.PathLike) -> tuple[dict[int, NodeTable], int]:
    """Read every rank, parsing byte-identical files once; return (rank → table, distinct files).

    A negative size, operation count or duration is refused (:func:`netsim.chakra.check.check_sizes`):
    no summary can show "-1 B"; anything else a well-formed file holds is shown as it is."""
    from netsim.chakra.check import check_sizes

    by_hash: dict[bytes, NodeTable] = {}
    out: dict[int, NodeTable] = {}
    for rank, f in discover_ranks(path_or_prefix).items():
        try:
            digest = hashlib.blake2b(f.read_bytes(), digest_size=16).digest()
        except OSError as exc:
            raise InputError(f"cannot read trace file: {exc.strerror or exc}", source=str(f)) from exc
        if digest not in by_hash:
            by_hash[digest] = read_et_table(f)
            check_sizes(by_hash[digest])
        out[rank] = by_hash[digest]
    return out, len(by_hash)


def _dep_edges(t: NodeTable, kind: str) -> tuple[np.ndarray, np.ndarray, int]:
    """(parent row, child row) of every dependency that resolves, plus the unresolved count."""
    deps, ptr = (t.data_deps, t.data_ptr) if kind == "data" else (t.ctrl_deps, t.ctrl_ptr)
    order = np.argsort(t.id, kind="stable")
    sorted_ids = t.id[order]
    pos = np.minimum(np.searchsorted(sorted_ids, deps), max(len(t) - 1, 0))
    known = sorted_ids[pos] == deps if len(t) else np.zeros(deps.size, bool)
    child = np.repeat(np.arange(len(t)), np.diff(ptr))
    return order[pos[known]], child[known], int((~known).sum())


def _longest_chain(n: int, parent: np.ndarray, child: np.ndarray) -> int | None:
    """Nodes on the longest dependency chain (None if the dependencies have a cycle)."""
    if n == 0:
        return 0
    depth = [1] * n
    if (parent < child).all():  # rows already in topological order (the usual case)
        for p, c in zip(parent.tolist(), child.tolist()):
            if depth[p] >= depth[c]:
                depth[c] = depth[p] + 1
        return max(depth)
    order = np.argsort(parent, kind="stable")
    kids, kid_ptr = child[order].tolist(), np.searchsorted(parent[order], np.arange(n + 1)).tolist()
    indeg = np.bincount(child, minlength=n).tolist()
    queue, seen = deque(i for i in range(n) if indeg[i] == 0), 0
    while queue:
        u = queue.popleft()
        seen += 1
        for v in kids[kid_ptr[u]:kid_ptr[u + 1]]:
            depth[v] = max(depth[v], depth[u] + 1)
            indeg[v] -= 1
            if indeg[v] == 0:
                queue.append(v)
    return max(depth) if seen == n else None


def _comm_name(value: int) -> str:
    try:
        return CommType(value).name
    except ValueError:
        return f"UNKNOWN_{value}"


def _type_name(value: int) -> str:
    try:
        return NodeType(value).name
    except ValueError:
        return f"UNKNOWN_{value}"


def summarize_trace(path_or_prefix: str | os.PathLike) -> dict[str, Any]:
    """Summarize a trace file or a per-rank trace set.

    Returns
    -------
    dict
        ``ranks`` (list), ``distinct_files``, ``metadata_version`` (str, or a
        sorted list if ranks differ), ``nodes`` (total), ``node_types``
        (type name → count over all ranks), ``collectives`` ((comm_type name,
        comm_size, pg_name) → count over all ranks; COMM_COLL nodes without
        ``comm_type`` are counted in ``host_comm_nodes``), ``dependency_depth``
        (longest data_deps chain in nodes, max over ranks; ctrl deps ignored;
        None if a cycle exists), ``unknown_dep_ids`` (distinct dep ids not in
        their file, summed over ranks) and ``unknown_dep_refs``
        ({"data": n, "ctrl": n} references to such ids), ``process_groups``
        (PyTorch ``## process_group:init ##`` metadata: ``count`` and ``groups``,
        a list of {pg_name, pg_desc, size} with ``ranks: []`` counted as every
        rank of the set; ``error`` instead when that metadata is unusable).

    Examples
    --------
    >>> import os, tempfile
    >>> from netsim.chakra import EtNode, NodeType, write_et
    >>> p = os.path.join(tempfile.mkdtemp(), "t.0.et")
    >>> write_et(p, [EtNode(1, "a", NodeType.COMP_NODE), EtNode(2, "b", NodeType.COMP_NODE, data_deps=(1, 9))])
    >>> s = summarize_trace(p)
    >>> s["node_types"], s["dependency_depth"], s["unknown_dep_ids"]
    ({'COMP_NODE': 2}, 2, 1)
    """
    tables, distinct = _tables(path_or_prefix)
    types: Counter[str] = Counter()
    colls: Counter[tuple[str, int | None, str | None]] = Counter()
    per_table: dict[int, tuple[int | None, int, dict[str, int]]] = {}
    host_comm = 0
    for t in tables.values():
        types.update({_type_name(k): int(v) for k, v in zip(*np.unique(t.type, return_counts=True))})
        host_comm += _count_collectives(t, colls)
        if id(t) not in per_table:
            per_table[id(t)] = _dep_stats(t)
    stats = [per_table[id(t)] for t in tables.values()]
    versions = sorted({t.metadata.version for t in tables.values()})
    depths = [s[0] for s in stats]
    return {
        "source": str(path_or_prefix),
        "ranks": list(tables),
        "distinct_files": distinct,
        "metadata_version": versions[0] if len(versions) == 1 else versions,
        "nodes": sum(len(t) for t in tables.values()),
        "node_types": dict(sorted(types.items())),
        "collectives": dict(sorted(colls.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0, kv[0][2] or ""))),
        "host_comm_nodes": host_comm,
        "dependency_depth": None if None in depths else max(depths, default=0),
        "unknown_dep_ids": sum(s[1] for s in stats),
        "unknown_dep_refs": {k: sum(s[2][k] for s in stats) for k in ("data", "ctrl")},
        "process_groups": _process_groups(tables),
    }


def _process_groups(tables: dict[int, NodeTable]) -> dict[str, Any]:
    """The ``process_groups`` entry of :func:`summarize_trace`."""
    from netsim.chakra.groups import process_groups

    try:
        found = process_groups(tables)
    except InputError as exc:
        return {"count": 0, "groups": [], "error": str(exc)}
    return {"count": len(found),
            "groups": [{"pg_name": g.name, "pg_desc": g.desc, "size": len(g.ranks)} for g in found.values()]}


def _count_collectives(t: NodeTable, colls: Counter[tuple[str, int | None, str | None]]) -> int:
    """Add t's COMM_COLL nodes to ``colls``; return how many have no comm_type (host-side ops)."""
    coll = np.flatnonzero(t.type == NodeType.COMM_COLL_NODE)
    colls.update((_comm_name(int(t.comm_type[i])), None if t.comm_size[i] == MISSING else int(t.comm_size[i]),
                  t.pg_names[t.pg[i]] if t.pg[i] >= 0 else None)
                 for i in coll.tolist() if t.comm_type[i] != MISSING)
    return int((t.comm_type[coll] == MISSING).sum())


def _dep_stats(t: NodeTable) -> tuple[int | None, int, dict[str, int]]:
    """(longest data chain, distinct unknown dep ids, unknown refs by kind) of one table."""
    parent, child, unknown_data = _dep_edges(t, "data")
    _, _, unknown_ctrl = _dep_edges(t, "ctrl")
    all_deps = np.concatenate([t.data_deps, t.ctrl_deps])
    unknown_ids = np.setdiff1d(all_deps, t.id).size
    return _longest_chain(len(t), parent, child), unknown_ids, {"data": unknown_data, "ctrl": unknown_ctrl}


def _nullable_int(col: np.ndarray) -> pd.api.extensions.ExtensionArray:
    return pd.arrays.IntegerArray(np.where(col == MISSING, 0, col), col == MISSING)


def _objects(values: list[Any]) -> np.ndarray:
    """A 1-D object array holding ``values`` as-is (tuples are not unpacked)."""
    return np.fromiter(values, dtype=object, count=len(values))


def node_table(path_or_prefix: str | os.PathLike) -> pd.DataFrame:
    """One row per node of every rank, with a ``rank`` column.

    Integer attributes are nullable ``Int64`` (``<NA>`` = absent), ``is_cpu_op``
    is nullable ``boolean``, ``pg_name``/``involved_dim``/``op_kind`` are objects (None
    when absent), ``type_name`` names the NodeType, and ``data_deps``/``ctrl_deps``
    hold tuples of ids.

    Examples
    --------
    >>> import os, tempfile
    >>> from netsim.chakra import EtNode, NodeType, write_et
    >>> p = os.path.join(tempfile.mkdtemp(), "t.2.et")
    >>> write_et(p, [EtNode(5, "c", NodeType.COMP_NODE, duration_micros=4, num_ops=10)])
    >>> df = node_table(p)
    >>> row = df.iloc[0]
    >>> int(row["rank"]), int(row["id"]), row["type_name"], int(row["num_ops"]), pd.isna(row["comm_size"])
    (2, 5, 'COMP_NODE', 10, True)
    """
    tables, _ = _tables(path_or_prefix)
    frames = []
    for rank, t in tables.items():
        cols: dict[str, Any] = {"rank": np.full(len(t), rank, np.int64), "id": t.id, "name": t.name,
                                "type": t.type, "type_name": [_type_name(v) for v in t.type.tolist()],
                                "duration_micros": t.duration_micros}
        for c in ("comm_type", "comm_size", "comm_src", "comm_dst", "comm_tag", "comm_priority"):
            cols[c] = _nullable_int(getattr(t, c))
        cols["pg_name"] = pd.Series([t.pg_names[i] if i >= 0 else None for i in t.pg.tolist()], dtype=object)
        cols["is_cpu_op"] = pd.arrays.BooleanArray(t.is_cpu_op == 1, t.is_cpu_op < 0)
        cols["num_ops"], cols["tensor_size"] = _nullable_int(t.num_ops), _nullable_int(t.tensor_size)
        cols["involved_dim"] = _objects([t.involved_dims[i] if i >= 0 else None for i in t.involved_dim.tolist()])
        cols["op_kind"] = pd.Series([OP_KINDS[i] if i >= 0 else None for i in t.op_kind.tolist()], dtype=object)
        cols["data_deps"], cols["ctrl_deps"] = _objects(t.dep_tuples("data")), _objects(t.dep_tuples("ctrl"))
        frames.append(pd.DataFrame(cols))
    return pd.concat(frames, ignore_index=True)


def read_workload(path_or_prefix: str | os.PathLike) -> dict[int, NodeTable]:
    """Every rank's node table (byte-identical files parsed once and shared)."""
    return _tables(path_or_prefix)[0]
