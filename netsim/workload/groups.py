"""Communicator groups: which global ranks a collective's ``pg_name`` means.

Policy (it differs from ASTRA-sim on purpose, see reference §3.6):

* an ASTRA-sim comm-group JSON (``{"1": [0, 1, 2, 3], ...}``) is honoured
  entirely, **including key "0"** (ASTRA-sim ignores it and treats "0" as the
  world, which breaks several public traces whose "0" is a subgroup);
* ``pg_name`` is matched to JSON keys by numeric value, so ``"1.0"`` names
  group ``"1"``; non-numeric names must match a key exactly;
* ``pg_name`` absent or ``""`` means the world (all ranks of the workload), and
  so does ``"0"`` when the JSON has no key "0" (or there is no JSON);
* any other name missing from the JSON is an error naming the file and rank.

>>> g = CommGroups({"0": [0, 1], "1": [2, 3]}, world=4)
>>> g.resolve("1.0"), g.resolve(""), g.resolve("0")
((2, 3), (0, 1, 2, 3), (0, 1))
"""

from __future__ import annotations

import json
from pathlib import Path

from netsim.errors import InputError


def _norm(name: str) -> str:
    """Canonical key: numeric names by value ("1.0" -> "1"), others unchanged."""
    try:
        value = float(name)
    except ValueError:
        return name
    return str(int(value)) if value.is_integer() else name


class CommGroups:
    """Group name -> sorted tuple of global ranks, for one workload of ``world`` ranks."""

    def __init__(self, groups: dict[str, list[int]] | None, world: int, source: str = "comm groups"):
        self.world = world
        self.source = source
        self._groups: dict[str, tuple[int, ...]] = {}
        for key, ranks in (groups or {}).items():
            if not isinstance(ranks, list) or not ranks or not all(isinstance(r, int) for r in ranks):
                raise InputError("expected a non-empty list of integer ranks", source=source, field=str(key))
            bad = [r for r in ranks if not 0 <= r < world]
            if bad:
                raise InputError(f"rank {bad[0]} is outside the workload's {world} ranks",
                                 source=source, field=str(key))
            self._groups[_norm(str(key))] = tuple(sorted(set(ranks)))

    @classmethod
    def from_json(cls, path: str | Path | None, world: int) -> "CommGroups":
        """Load an ASTRA-sim comm-group JSON (``None`` or a path containing "empty": no groups)."""
        if path is None or "empty" in str(path):
            return cls(None, world)
        try:
            data = json.loads(Path(path).read_text())
        except FileNotFoundError:
            raise InputError("no such file", source=str(path)) from None
        except json.JSONDecodeError as exc:
            raise InputError(f"not valid JSON ({exc.msg} at line {exc.lineno})", source=str(path)) from None
        if not isinstance(data, dict):
            raise InputError("expected an object mapping group ids to rank lists", source=str(path))
        return cls(data, world, str(path))

    def resolve(self, pg_name: str | None, *, where: str = "") -> tuple[int, ...]:
        """Members of the group a node names; raises InputError if it is unknown."""
        if pg_name is None or pg_name == "":
            return tuple(range(self.world))
        key = _norm(pg_name)
        if key in self._groups:
            return self._groups[key]
        if key == "0":
            return tuple(range(self.world))
        raise InputError(f"pg_name {pg_name!r} names no communicator group in {self.source}; "
                         "pass --comm-groups with that id", source=where or None, field="pg_name")
