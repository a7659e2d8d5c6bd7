"""Topology parameters by dotted path (a sweep's keys, ``--set KEY=VALUE``) applied to the topology YAML.

``scale_out.nic_bw: 800Gbps`` sets a key; ``scale_out.tiers.1.oversubscription: 2`` indexes a
list (``tiers[1]`` is accepted too); ``null`` removes a key.  A tier's ``up_bw`` (its uplink port
rate) and ``oversubscription`` are independent: setting one keeps the other.  The result goes
through the same validation and builder as a topology file, so errors name the file and field.

``--set`` items are read by :func:`parse_sets`: a value is a YAML scalar (``4`` is a number,
``800Gbps`` a string, ``null`` removes the key, ``true`` a boolean); a bad key or value is one
line naming the file and the field.

>>> parse_sets(["nodes=4", "scale_out.nic_bw=800Gbps", "scale_out.tiers[0].oversubscription=2"])
{'nodes': 4, 'scale_out.nic_bw': '800Gbps', 'scale_out.tiers.0.oversubscription': 2}
>>> d = {"scale_out": {"tiers": [{"down": 32, "up": 32, "up_bw": "400Gbps"}]}}
>>> apply_overrides(d, {"scale_out.tiers.0.oversubscription": 2}, "t.yaml")["scale_out"]["tiers"][0]
{'down': 32, 'up': 32, 'up_bw': '400Gbps', 'oversubscription': 2}
"""

from __future__ import annotations

import copy
import json
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from netsim import inputs
from netsim.errors import InputError
from netsim.shipped import resolve
from netsim.topology.model import Topology

#: A dotted key: names and list indices (``tiers[1]`` is read as ``tiers.1``).
_KEY = re.compile(r"[A-Za-z_][\w\-]*(\.(\w[\w\-]*))*", re.ASCII)
#: Longest ``--set`` value (a scalar; whole structures belong in the topology file).
MAX_VALUE_CHARS = 1000


def apply_overrides(data: Any, overrides: dict[str, Any], source: str) -> dict:
    """A deep copy of the topology mapping ``data`` with ``overrides`` (dotted path -> value) applied."""
    if not isinstance(data, dict):
        raise InputError("expected a topology mapping", source=source)
    out = copy.deepcopy(data)
    for path, value in overrides.items():
        parts = path.split(".")
        if parts[0] == "topology" and len(parts) > 1:
            parts = parts[1:]
        node: Any = out
        for depth, part in enumerate(parts):
            last = depth == len(parts) - 1
            where = ".".join(parts[:depth + 1])
            if isinstance(node, list):
                if not (part.isascii() and part.isdigit()) or int(part) >= len(node):
                    raise InputError(f"expected a list index below {len(node)}, got {part!r}", source=source,
                                     field=where)
                if last:
                    node[int(part)] = value
                else:
                    node = node[int(part)]
            elif isinstance(node, dict):
                if last:
                    if value is None:
                        node.pop(part, None)
                    else:
                        node[part] = value
                elif part not in node or node[part] is None:
                    raise InputError("not in the topology file, so it cannot be overridden below here",
                                     source=source, field=where)
                else:
                    node = node[part]
            else:
                raise InputError(f"cannot index into {type(node).__name__} {node!r}", source=source,
                                 field=".".join(parts[:depth]))
    return out


def read_yaml(path: str) -> Any:
    """Parse a topology YAML file (InputError naming the file on failure)."""
    return inputs.load_yaml(path)


def build_from_mapping(data: dict, source: str) -> Topology:
    """Build a topology from a parsed netsim or ASTRA-sim network YAML mapping."""
    from netsim.topology.astra_yaml import is_astra_network, parse_astra_network
    from netsim.topology.multidim import multi_dim
    from netsim.topology.spec import build_topology, parse_spec

    if is_astra_network(data):
        return multi_dim(parse_astra_network(data, source), name=Path(source).stem, astra_network=True)
    return build_topology(parse_spec(data, source), source)


def load_with_overrides(path: str, overrides: dict[str, Any] | None = None) -> Topology:
    """The topology of file ``path`` (or shipped name: :func:`netsim.shipped.resolve`) with
    ``overrides`` applied (cached per process)."""
    path = str(resolve(path, "topology"))
    key = json.dumps(overrides or {}, sort_keys=True, default=str)
    try:
        mtime = os.stat(path).st_mtime_ns
    except OSError:
        raise InputError("no such file", source=path) from None
    return _cached(path, mtime, key)


@lru_cache(maxsize=8)
def _cached(path: str, _mtime: int, overrides_json: str) -> Topology:
    overrides = json.loads(overrides_json)
    if not overrides:
        from netsim.topology.spec import load_topology

        return load_topology(path)
    data = apply_overrides(read_yaml(path), overrides, path)
    return build_from_mapping(data, path)


def parse_sets(items: list[str] | None) -> dict[str, Any]:
    """``["KEY=VALUE", ...]`` -> {dotted key: value}; InputError (``--set``) on a malformed item."""
    from netsim.inputs import load_yaml_text

    out: dict[str, Any] = {}
    for item in items or ():
        key, eq, text = str(item).partition("=")
        key = re.sub(r"\[([0-9]+)\]", r".\1", key.strip())
        if not eq or not _KEY.fullmatch(key):
            raise InputError(f"expected KEY=VALUE with a dotted topology key (nodes=4, "
                             f"scale_out.tiers.0.oversubscription=2), got {str(item)[:80]!r}", source="--set")
        if len(text) > MAX_VALUE_CHARS:
            raise InputError(f"expected a value of at most {MAX_VALUE_CHARS} characters", source="--set", field=key)
        value = load_yaml_text(text, f"--set {key}") if text.strip() else ""
        if isinstance(value, (dict, list)):
            raise InputError(f"expected a scalar value (a number, a string, true/false or null), got {text!r}",
                             source="--set", field=key)
        out[key] = value
    return out


def load_topology_set(path, items: list[str] | None = None):
    """The topology of ``path`` with the ``--set`` items applied (the plain file when there are none)."""
    sets = parse_sets(items)
    if not sets:
        from netsim.topology.spec import load_topology

        return load_topology(path)
    return load_with_overrides(str(path), sets)
