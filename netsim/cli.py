"""The ``netsim`` command line: a thin layer over the Python API.

Every subcommand returns an exit status; bad input prints one line naming the
file, the field and the expectation, and exits with status 2 (``--debug``
shows the traceback instead).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Callable, Sequence

from netsim import __version__
from netsim.errors import DeadlockError, InputError, NetsimError


class _Parser(argparse.ArgumentParser):
    """argparse that raises InputError instead of printing usage and exiting."""

    def error(self, message: str):  # noqa: D401 - argparse API
        raise InputError(message, source=self.prog if " " in self.prog else None)


def _cmd_topo(args: argparse.Namespace) -> int:
    from netsim.topology.spec import load_topology
    from netsim.topology.summary import format_summary, summarize

    summary = summarize(load_topology(args.path))
    print(json.dumps(summary, indent=2) if args.json else format_summary(summary))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    p = _Parser(prog="netsim", description="Simulate GPU-cluster networks and collectives.")
    p.add_argument("--version", action="version", version=f"netsim {__version__}")
    p.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    topo = sub.add_parser("topo", help="summarize a topology (netsim YAML or ASTRA-sim network YAML)")
    topo.add_argument("path", help="topology file")
    topo.add_argument("--json", action="store_true", help="machine-readable output")
    topo.set_defaults(func=_cmd_topo)
    for register in _extra_commands():
        register(sub)
    return p


def _extra_commands() -> list[Callable]:
    """Subcommands contributed by other modules (each adds its own parser)."""
    registers = []
    for module, name in (("netsim.bench", "register_cli"), ("netsim.workload.cli", "register_cli"),
                         ("netsim.analysis.cli", "register_cli"), ("netsim.sweep.cli", "register_cli"),
                         ("netsim.astra.cli", "register_cli")):
        try:
            mod = __import__(module, fromlist=[name])
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            continue
        registers.append(getattr(mod, name))
    return registers


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    try:
        args = build_parser().parse_args(argv)
        if not getattr(args, "func", None):
            build_parser().print_help()
            return 2
        return int(args.func(args) or 0)
    except DeadlockError as exc:
        if debug:
            raise
        print(f"netsim: error: {exc}", file=sys.stderr)
        return 2
    except (InputError, NetsimError) as exc:
        if debug:
            raise
        print(f"netsim: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("netsim: interrupted", file=sys.stderr)
        return 130


def entry() -> None:
    """Console-script entry point."""
    sys.exit(main())
