"""The ``netsim`` command line: a thin layer over the Python API.

Every subcommand returns an exit status; bad input prints one line naming the
file, the field and the expectation, and exits with status 2 (``--debug``
shows the traceback instead).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import warnings
from typing import Callable, Sequence

from netsim import __version__
from netsim.errors import DeadlockError, InputError, NetsimError


class _Parser(argparse.ArgumentParser):
    """argparse that raises InputError instead of printing usage and exiting."""

    def error(self, message: str):  # noqa: D401 - argparse API
        flag = _ARGUMENT.fullmatch(message)
        if flag:  # "argument --gpus: expected ..." -> "--gpus: expected ..."
            raise InputError(flag.group(2), source=flag.group(1))
        raise InputError(message, source=self.prog if " " in self.prog else None)


#: argparse's message about one argument: "argument FLAG: PROBLEM".
_ARGUMENT = re.compile(r"argument (-[^\s:]+): (.*)", re.DOTALL)


def _cmd_topo(args: argparse.Namespace) -> int:
    from netsim.topology.spec import load_topology
    from netsim.topology.summary import format_summary, summarize

    from netsim.cli_options import load_topology_set

    topo = load_topology_set(args.path, args.sets) if args.sets else load_topology(args.path)
    if args.bom:
        from netsim.topology.bom import print_bom
        return print_bom(topo, as_json=args.json)
    summary = summarize(topo)
    print(json.dumps(summary, indent=2) if args.json else format_summary(summary))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    from netsim.cli_options import add_set_argument

    p = _Parser(prog="netsim", description="Simulate GPU-cluster networks and collectives.")
    p.add_argument("--version", action="version", version=f"netsim {__version__}")
    p.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    topo = sub.add_parser("topo", help="summarize a topology (netsim YAML or ASTRA-sim network YAML)")
    topo.add_argument("path", help="topology file")
    topo.add_argument("--json", action="store_true", help="machine-readable output")
    topo.add_argument("--bom", action="store_true", help="print the bill of materials (switches, NICs, cables, transceivers)")
    add_set_argument(topo)
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


#: Flags whose value may start with "-" (``--straggler -1:2`` must reach the flag's own check,
#: not argparse's "expected one argument").
DASH_VALUE_FLAGS = ("--straggler", "--seed", "--injection-scale", "--gpus", "--channels")
#: Longest error line printed (a message quoting a huge value stays one readable line).
MAX_ERROR_CHARS = 2000


def _join_dash_values(argv: list[str]) -> list[str]:
    """``--flag -x`` -> ``--flag=-x`` for :data:`DASH_VALUE_FLAGS`."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] in DASH_VALUE_FLAGS and i + 1 < len(argv) and argv[i + 1][:1] == "-" \
                and argv[i + 1][1:2].isdigit():
            out.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
            continue
        out.append(argv[i])
        i += 1
    return out


def one_line(message: object) -> str:
    """An error message as one line of at most :data:`MAX_ERROR_CHARS` characters (a leading
    ``netsim COMMAND:`` is shortened to ``COMMAND:``, since the line starts with ``netsim: error:``)."""
    text = " ".join(str(message).split())
    text = re.sub(r"^netsim (?=[a-z][a-z ]*: )", "", text)
    return text if len(text) <= MAX_ERROR_CHARS else text[:MAX_ERROR_CHARS - 20] + " ... (truncated)"


def _run(argv: list[str]) -> int:
    args = build_parser().parse_args(_join_dash_values(argv))
    if not getattr(args, "func", None):
        build_parser().print_help()
        return 2
    return int(args.func(args) or 0)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status.

    Warnings raised while running are shown after a successful run and dropped when the run
    ends in an error, so the error stays the only line (``--debug`` shows everything)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    with warnings.catch_warnings(record=True) as caught:
        try:
            status = _run(argv)
        except DeadlockError as exc:  # a multi-line report, printed as it is
            if debug:
                raise
            print(f"netsim: error: {exc}", file=sys.stderr)
            return 2
        except (InputError, NetsimError) as exc:
            if debug:
                raise
            print(f"netsim: error: {one_line(exc)}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print("netsim: interrupted", file=sys.stderr)
            return 130
    for w in caught:
        warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    return status


def entry() -> None:
    """Console-script entry point."""
    sys.exit(main())
