"""Options shared by several subcommands: ``--set KEY=VALUE``, ``--quiet`` and number flags.

Every integer flag is read by :func:`int_arg` (ASCII digits, within the flag's bounds in
:mod:`netsim.limits`) and every real-valued one by :func:`float_arg` (finite, in range), so a
bad value is one line naming the flag before anything uses it.

``--set`` takes the dotted topology keys a sweep takes, read by
:func:`netsim.topology.overrides.parse_sets`: ``--set nodes=4 --set
scale_out.tiers.0.oversubscription=4``.
"""

from __future__ import annotations

import argparse
from typing import Any, Callable

from netsim.errors import InputError



def add_set_argument(parser) -> None:
    """``--set KEY=VALUE`` (repeatable) on ``parser``."""
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                        help="override a topology parameter by its dotted path, as sweeps do "
                             "(--set nodes=4 --set scale_out.tiers.0.oversubscription=4; repeatable; "
                             "docs/sweeps.md)")


def add_quiet_argument(parser) -> None:
    """``--quiet``: no progress on stderr (:mod:`netsim.progress`) and no estimate before a long run."""
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no progress on stderr (on a terminal a bar after 2 s; elsewhere a status line every 30 s from 10 s on) and no cost estimate")


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
