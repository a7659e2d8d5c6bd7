"""Communicator groups: which global ranks a collective's ``pg_name`` means.

Policy (it differs from ASTRA-sim on purpose, see reference §3.6 and
``docs/workloads.md`` "Communicator groups"):

* an ASTRA-sim comm-group JSON (``{"1": [0, 1, 2, 3], ...}``) is honoured
  entirely, **including key "0"** (ASTRA-sim ignores it and treats "0" as the
  world, which breaks several public traces whose "0" is a subgroup);
* ``pg_name`` is matched to group names by decimal value, so ``"1.0"`` names
  group ``"1"``; any other name (e.g. PyTorch's hashed names such as
  ``"c2f2f8a1..."``) must match exactly;
* ``pg_name`` absent or ``""`` means the world (all ranks of the workload), and
  so does ``"0"`` when no group "0" is defined;
* any other name missing from the groups is an error naming the file and node.

Where the groups come from (:func:`load_groups`):

* PyTorch-converted traces carry a METADATA node ``## process_group:init ##``
  whose ``inputs.values`` holds the process groups as JSON
  (:func:`process_groups` reads them; ``ranks: []`` means every rank, other
  rank lists are global ranks; every rank's file must agree on each name);
* a comm-group JSON given with ``--comm-groups`` is the primary source; when
  the traces also declare groups, both must agree on every name they share
  (an error otherwise: netsim does not guess which one is wrong), and groups
  only the traces name are added.

>>> g = CommGroups({"0": [0, 1], "1": [2, 3]}, world=4)
>>> g.resolve("1.0"), g.resolve(""), g.resolve("0")
((2, 3), (0, 1, 2, 3), (0, 1))
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from netsim import inputs
from netsim.errors import InputError
from netsim.shipped import resolve
from netsim.vocab import normalize_group_name
from netsim.chakra.schema import NodeType
from netsim.chakra.model import NodeTable

__all__ = ["CommGroups", "ProcessGroup", "groups_from_traces", "load_groups", "pg_declarations", "process_groups"]

#: Name marker of PyTorch's process-group metadata node (the Chakra converter's test, too).
PG_INIT = "process_group:init"


class CommGroups:
    """Group name -> sorted tuple of global ranks, for one workload of ``world`` ranks."""

    def __init__(self, groups: Mapping[str, list[int]] | None, world: int, source: str = "comm groups"):
        self.world = world
        self.source = source
        self._keys: dict[str, str] = {}
        self._groups: dict[str, tuple[int, ...]] = {}
        for key, ranks in (groups or {}).items():
            if not isinstance(ranks, list) or not ranks or not all(type(r) is int for r in ranks):
                raise InputError("expected a non-empty list of integer ranks", source=source, field=str(key))
            bad = [r for r in ranks if not 0 <= r < world]
            if bad:
                raise InputError(f"rank {bad[0]} is outside the workload's {world} ranks",
                                 source=source, field=str(key))
            self._groups[normalize_group_name(str(key))] = tuple(sorted(set(ranks)))

    @classmethod
    def from_json(cls, path: str | Path | None, world: int) -> "CommGroups":
        """Load an ASTRA-sim comm-group JSON (``None`` or a path containing "empty": no groups)."""
        if path is None or "empty" in str(path):
            return cls(None, world)
        path = resolve(path)
        data = inputs.load_json(path)
        if not isinstance(data, dict):
            raise InputError("expected an object mapping group ids to rank lists", source=str(path))
        return cls(data, world, str(path))

    def __len__(self) -> int:
        return len(self._groups)

    def items(self) -> list[tuple[str, tuple[int, ...]]]:
        """(normalised name, members) of every defined group."""
        return list(self._groups.items())

    def identity(self, pg_name: str | None) -> str:
        """The communicator a node names, as collectives match on it: its normalised group name,
        or ``""`` for the world (``pg_name`` absent or ``""``, or ``"0"`` when no group "0" is
        defined).  Two groups with the same members are different communicators, as in NCCL.

        >>> g = CommGroups({"1": [0, 1], "2": [0, 1]}, world=2)
        >>> g.identity("1.0"), g.identity("2"), g.identity(None), g.identity("0")
        ('1', '2', '', '')
        """
        if pg_name is None or pg_name == "":
            return ""
        key = self._key(pg_name)
        return "" if key == "0" and key not in self._groups else key

    def _key(self, pg_name: str) -> str:
        """``normalize_group_name``, remembered (a workload names few groups, millions of times)."""
        key = self._keys.get(pg_name)
        if key is None:
            key = self._keys[pg_name] = normalize_group_name(pg_name)
        return key

    def resolve(self, pg_name: str | None, *, where="") -> tuple[int, ...]:
        """Members of the group a node names; raises InputError if it is unknown (``where``: the node, or
        a function that says it, called only then)."""
        if pg_name is None or pg_name == "":
            return tuple(range(self.world))
        key = self._key(pg_name)
        if key in self._groups:
            return self._groups[key]
        if key == "0":
            return tuple(range(self.world))
        raise InputError(f"pg_name {pg_name!r} names no communicator group in {self.source}; "
                         "pass --comm-groups with that id", source=(where() if callable(where) else where) or None,
                         field="pg_name")


# --------------------------------------------------------------------------- PyTorch metadata


@dataclass(frozen=True, slots=True)
class ProcessGroup:
    """One process group declared by ``## process_group:init ##`` metadata.

    ``ranks``: sorted global ranks (``ranks: []`` in the trace = every rank of the
    workload); ``source``: the first file that declared it.
    """

    name: str
    desc: str
    ranks: tuple[int, ...]
    source: str


def _short(ranks: tuple[int, ...] | list[int]) -> str:
    ranks = list(ranks)
    return str(ranks) if len(ranks) <= 12 else f"[{', '.join(map(str, ranks[:10]))}, ... ({len(ranks)} ranks)]"


def _decode(text: str) -> list[dict[str, Any]]:
    """The group entries of an ``inputs.values`` string; ValueError with the reason if malformed.

    Accepted shapes (all seen or produced by real tools): the Chakra converter's
    ``str()`` of the host-ET input list, ``['[{"pg_name": ...}]']`` (a Python list
    holding the JSON string); a plain JSON list of objects; the same nested in
    lists (``[[{...}]]``) or as a JSON list of JSON strings.  An empty string or
    an empty list declares nothing.

    >>> _decode('[\\'[{"pg_name": "0", "ranks": []}]\\']')
    [{'pg_name': '0', 'ranks': []}]
    """
    def parse(s: str) -> Any:
        try:
            return json.loads(s)
        except RecursionError:
            raise ValueError("nested too deeply") from None
        except json.JSONDecodeError as exc:
            try:  # the Python str() of a list, as the Chakra converter writes it
                return ast.literal_eval(s.strip())
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                raise ValueError(f"not valid JSON ({exc.msg} at column {exc.colno} of {s[:60]!r})") from None

    def flat(obj: Any, depth: int) -> list[dict[str, Any]]:
        if isinstance(obj, dict):
            return [obj]
        if depth > 4:
            raise ValueError("nested too deeply")
        if isinstance(obj, str):
            return flat(parse(obj), depth + 1) if obj.strip() else []
        if isinstance(obj, (list, tuple)):
            return [e for x in obj for e in flat(x, depth + 1)]
        raise ValueError(f"expected a list of objects, found {type(obj).__name__} {obj!r:.40}")

    return flat(text, 0)


def _entry(e: dict[str, Any], world: int, source: str, field: str) -> tuple[str, str, tuple[int, ...]]:
    """(pg_name, pg_desc, sorted ranks) of one entry, validated."""
    name = e.get("pg_name")
    if isinstance(name, bool) or not isinstance(name, (str, int)):
        raise InputError(f"expected a string pg_name, found {name!r:.40}", source=source, field=f"{field}.pg_name")
    ranks = e.get("ranks")
    if not isinstance(ranks, list) or not all(isinstance(r, int) and not isinstance(r, bool) for r in ranks):
        raise InputError(f"expected a list of integer (global) ranks, found {ranks!r:.60}", source=source,
                         field=f"{field}.ranks")
    bad = [r for r in ranks if not 0 <= r < world]
    if bad:
        raise InputError(f"rank {bad[0]} is outside the workload's {world} ranks (process-group ranks are "
                         "global ranks)", source=source, field=f"{field}.ranks")
    members = tuple(sorted(set(ranks))) if ranks else tuple(range(world))
    desc = e.get("pg_desc")
    return str(name), desc if isinstance(desc, str) else "", members


def _metadata_rows(t: NodeTable) -> list[int]:
    rows = np.flatnonzero(t.type == NodeType.METADATA_NODE).tolist()
    return [i for i in rows if PG_INIT in t.name[i]]


def pg_declarations(t: NodeTable) -> list[tuple[int, str, str]]:
    """(node id, node name, ``inputs.values``) of every ``## process_group:init ##`` row of ``t``
    that has inputs: all :func:`process_groups` reads of a trace."""
    return [(int(t.id[row]), t.name[row], t.inputs[row]) for row in _metadata_rows(t) if row in t.inputs]


def process_groups(tables: Mapping[int, NodeTable], world: int | None = None, *,
                   declared=None) -> dict[str, ProcessGroup]:
    """Process groups declared by ``## process_group:init ##`` METADATA nodes, by normalised name.

    Every node whose name contains ``process_group:init`` counts; its
    ``inputs.values`` is parsed (see :func:`_decode`).  ``ranks: []`` means all
    ``world`` ranks (default ``len(tables)``); other rank lists are global ranks.
    PyTorch records on each rank the groups that rank belongs to, so files list
    different subsets, but a name must list the same ranks in every file that
    declares it (an :class:`InputError` naming both files otherwise).  Files
    without such nodes contribute nothing.  ``declared``: (source, :func:`pg_declarations`)
    pairs to read instead of ``tables`` (a file set scanned without keeping its tables).
    """
    world = len(tables) if world is None else world
    if declared is None:
        seen: set[int] = set()
        declared = []
        for t in tables.values():
            if id(t) not in seen:  # byte-identical files share one table
                seen.add(id(t))
                declared.append((t.source, pg_declarations(t)))
    found: dict[str, ProcessGroup] = {}
    for source, rows in declared:
        for node_id, node_name, text in rows:
            field = f"node {node_id} {node_name!r} inputs.values"
            try:
                entries = _decode(text)
            except ValueError as exc:
                raise InputError(f"cannot read the process-group list: {exc}", source=source,
                                 field=field) from None
            for k, e in enumerate(entries):
                name, desc, members = _entry(e, world, source, f"{field}[{k}]")
                key = normalize_group_name(name)
                old = found.get(key)
                if old is None:
                    found[key] = ProcessGroup(name, desc, members, source)
                elif old.ranks != members:
                    where = "earlier in this file" if old.source == source else f"in {old.source}"
                    raise InputError(f"process group {name!r} lists ranks {_short(members)} here but "
                                     f"{_short(old.ranks)} {where}; every rank's metadata must agree",
                                     source=source, field=f"{field}[{k}]")
    return found


def groups_from_traces(tables: Mapping[int, NodeTable], world: int | None = None) -> dict[str, list[int]]:
    """Name -> global ranks of the process groups in the traces' metadata (see :func:`process_groups`).

    Examples
    --------
    >>> import os, tempfile
    >>> from netsim.chakra import EtNode, NodeType, read_et_table, write_et
    >>> p = os.path.join(tempfile.mkdtemp(), "t.0.et")
    >>> pgs = '[{"pg_name": "0", "ranks": []}, {"pg_name": "5", "ranks": [2, 0]}]'
    >>> write_et(p, [EtNode(1, "## process_group:init ##", NodeType.METADATA_NODE, inputs=str([pgs]))])
    >>> groups_from_traces({0: read_et_table(p)}, world=4)
    {'0': [0, 1, 2, 3], '5': [0, 2]}
    """
    return {g.name: list(g.ranks) for g in process_groups(tables, world).values()}


def load_groups(comm_groups: str | Path | Mapping[str, list[int]] | None, tables: Mapping[int, NodeTable],
                world: int | None = None, *, declared=None) -> CommGroups:
    """The communicator groups of a workload: a comm-group JSON and/or the traces' metadata.

    ``comm_groups`` is a JSON path (``None`` or a path containing "empty": none,
    as in ASTRA-sim) or an in-memory dict name -> ranks; ``world`` defaults to
    ``len(tables)``.  With no JSON, the ``## process_group:init ##`` groups of the
    traces are used (none: every ``pg_name`` but ""/"0" is an error).  With both,
    they must agree on every name they share (else an :class:`InputError` naming
    the JSON, the name and the trace file), and groups named only by the traces
    are added to the JSON's.  ``declared``: as in :func:`process_groups` (``tables`` then only
    counts for the message of a mismatch).
    """
    world = len(tables) if world is None else world
    traced = process_groups(tables, world, declared=declared)
    if isinstance(comm_groups, Mapping):
        given = CommGroups(dict(comm_groups), world, "the comm groups given")
    else:
        given = CommGroups.from_json(comm_groups, world)
    if not traced:
        return given
    first = next(iter(traced.values())).source
    meta_src = f"the process_group:init metadata of {first}" + (" etc." if len(tables if declared is None else declared) > 1 else "")
    if comm_groups is None or (not isinstance(comm_groups, Mapping) and "empty" in str(comm_groups)):
        return CommGroups({g.name: list(g.ranks) for g in traced.values()}, world, meta_src)
    merged = {k: list(v) for k, v in given.items()}
    for key, g in traced.items():
        if key not in merged:
            merged[key] = list(g.ranks)
        elif tuple(merged[key]) != g.ranks:
            raise InputError(f"group {key!r} has ranks {_short(merged[key])} here but {_short(g.ranks)} in the "
                             f"process_group:init metadata of {g.source} (pg_name {g.name!r}); make them agree "
                             "or drop one", source=given.source, field=key)
    return CommGroups(merged, world, f"{given.source} and {meta_src}")
