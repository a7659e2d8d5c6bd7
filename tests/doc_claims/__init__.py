"""Claims for the numbers docs/*.md states in prose, one module per page (tests/test_docs_numbers.py).

Each module holds ``CLAIMS``: :class:`~readme_numbers.Claim` objects with ``doc`` set to its page, made
with :func:`claims_for`.  :data:`SHARED` claims are phrases several pages use ("exit status 2"):
they cover every place their text occurs, in any page, and are checked once.  Helpers that read a
value from the code (a command-line default, a shipped topology) live here.
"""

from __future__ import annotations

import sys
from functools import lru_cache, partial
from pathlib import Path

from readme_numbers import Claim

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
#: CPU seconds measured on a shared 2-core machine: within a factor of 2 (as README's claims).
CPU = ("factor", 2.0)
DIGITS = "digits"


def claims_for(page: str):
    """``Claim`` with ``doc`` set to ``docs/<page>``."""
    return partial(Claim, doc=f"docs/{page}")


def cli_default(command: str, flag: str):
    """The default of ``netsim COMMAND FLAG`` as the parser has it."""
    from netsim.cli.app import build_parser

    parser = build_parser([command])
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    return next(a for a in sub._actions if flag in a.option_strings).default


@lru_cache(maxsize=None)
def topo(name: str):
    from netsim.topology import load_topology

    return load_topology(REPO / "topologies" / f"{name}.yaml")


def bad_input_status() -> list[int]:
    """The exit status of a command given a bad field (``topo --set`` of an unknown unit)."""
    from netsim.cli import main

    return [main(["topo", str(REPO / "topologies/h100-superpod-1su.yaml"), "--set", "scale_out.nic_bw=400"])]


_D = partial(Claim, doc="docs/*.md")
#: Phrases several pages use, checked once.
SHARED = [
    _D("exit status 2", bad_input_status),
    _D("exits 2", bad_input_status),
    _D("exit with status 2", bad_input_status),
]
