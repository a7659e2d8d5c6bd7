"""Options shared by several subcommands: ``--set KEY=VALUE``, ``--quiet`` and number flags.

Every integer flag is read by :func:`int_arg` (ASCII digits, within the flag's bounds in
:mod:`netsim.limits`) and every real-valued one by :func:`float_arg` (finite, in range), so a
bad value is one line naming the flag before anything uses it.

``--set`` takes the dotted topology keys a sweep takes (:mod:`netsim.sweep.topo`):
``--set nodes=4 --set scale_out.tiers.0.oversubscription=4``.  A value is read as a YAML
scalar (``4`` is a number, ``800Gbps`` a string, ``null`` removes the key, ``true`` a
boolean).  A bad key or value is one line naming the file and the field.

>>> parse_sets(["nodes=4", "scale_out.nic_bw=800Gbps", "scale_out.tiers[0].oversubscription=2"])
{'nodes': 4, 'scale_out.nic_bw': '800Gbps', 'scale_out.tiers.0.oversubscription': 2}
"""

from __future__ import annotations

import argparse
import re
from typing import Any, Callable

from netsim.errors import InputError

#: A dotted key: names and list indices (``tiers[1]`` is read as ``tiers.1``).
_KEY = re.compile(r"[A-Za-z_][\w\-]*(\.(\w[\w\-]*))*", re.ASCII)
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


def int_arg(key: str, what: str | None = None) -> Callable[[str], int]:
    """argparse ``type`` of an integer flag: ASCII digits within :func:`netsim.limits.bounds` of ``key``.

    >>> int_arg("gpus")("8")
    8
    """
    from netsim.limits import bounds

    lo, hi = bounds(key)
    return _typed(lambda text: _inputs().int_text(text, None, lo=lo, hi=hi, what=what), "integer")


def float_arg(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False,
              what: str | None = None) -> Callable[[str], float]:
    """argparse ``type`` of a real-valued flag: a finite number (ASCII) in ``[lo, hi]`` (``(lo, hi]``
    with ``lo_open``)."""
    return _typed(lambda text: _inputs().float_text(text, None, lo=lo, hi=hi, lo_open=lo_open, what=what),
                  "number")


def _inputs():
    from netsim import inputs

    return inputs


def _typed(parse: Callable[[str], Any], name: str) -> Callable[[str], Any]:
    """``parse`` with its InputError turned into argparse's ArgumentTypeError (whose message argparse
    keeps; the CLI then prints it after the flag's name)."""
    def convert(text: str):
        try:
            return parse(text)
        except InputError as exc:
            raise argparse.ArgumentTypeError(exc.message) from None
    convert.__name__ = name
    return convert


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
    from netsim.sweep.topo import load_with_overrides

    return load_with_overrides(str(path), sets)
