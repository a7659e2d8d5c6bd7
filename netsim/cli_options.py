"""Options shared by several subcommands: ``--set KEY=VALUE`` and ``--quiet``.

``--set`` takes the dotted topology keys a sweep takes (:mod:`netsim.sweep.topo`):
``--set nodes=4 --set scale_out.tiers.0.oversubscription=4``.  A value is read as a YAML
scalar (``4`` is a number, ``800Gbps`` a string, ``null`` removes the key, ``true`` a
boolean).  A bad key or value is one line naming the file and the field.

>>> parse_sets(["nodes=4", "scale_out.nic_bw=800Gbps", "scale_out.tiers[0].oversubscription=2"])
{'nodes': 4, 'scale_out.nic_bw': '800Gbps', 'scale_out.tiers.0.oversubscription': 2}
"""

from __future__ import annotations

import re
from typing import Any

from netsim.errors import InputError

#: A dotted key: names and list indices (``tiers[1]`` is read as ``tiers.1``).
_KEY = re.compile(r"[A-Za-z_][\w\-]*(\.(\w[\w\-]*))*")
#: Longest ``--set`` value (a scalar; whole structures belong in the topology file).
MAX_VALUE_CHARS = 1000


def add_set_argument(parser) -> None:
    """``--set KEY=VALUE`` (repeatable) on ``parser``."""
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                        help="override a topology parameter by its dotted path, as sweeps do "
                             "(--set nodes=4 --set scale_out.tiers.0.oversubscription=4; repeatable; "
                             "docs/sweeps.md)")


def add_quiet_argument(parser) -> None:
    """``--quiet``: no progress bar (it is also off when stderr is not a terminal)."""
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no progress bar on stderr (shown after 2 s, only on a terminal)")


def parse_sets(items: list[str] | None) -> dict[str, Any]:
    """``["KEY=VALUE", ...]`` -> {dotted key: value}; InputError (``--set``) on a malformed item."""
    from netsim.inputs import load_yaml_text

    out: dict[str, Any] = {}
    for item in items or ():
        key, eq, text = str(item).partition("=")
        key = re.sub(r"\[(\d+)\]", r".\1", key.strip())
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
    from netsim.sweep.topo import load_with_overrides

    return load_with_overrides(str(path), sets)
