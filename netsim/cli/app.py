"""The ``netsim`` command line: a thin layer over the Python API (``netsim topo`` is here; the other
commands are in their own modules of :mod:`netsim.cli`).

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
from importlib import import_module
from typing import Sequence

from netsim.version import __version__
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
    from netsim.topology.overrides import load_topology_set
    from netsim.topology.summary import format_summary, summarize

    topo = load_topology_set(args.path, args.sets)
    if args.bom or args.prices is not None or args.include_gpus:
        from netsim.topology.cost import print_bom
        return print_bom(topo, as_json=args.json, prices=args.prices, include_gpus=args.include_gpus)
    summary = summarize(topo)
    print(json.dumps(summary, indent=2) if args.json else format_summary(summary))
    return 0


#: Command -> (the module that adds its parser, its one-line help).  ``netsim --help`` lists them
#: without importing a module, and a command imports only its own module: the command line starts
#: in a fraction of the time the whole library takes to import.
COMMANDS = {
    "topo": ("netsim.cli.app", "summarize a topology (netsim YAML or ASTRA-sim network YAML)"),
    "bench": ("netsim.cli.bench", "nccl-tests-style collective benchmark on a simulated topology"),
    "trace": ("netsim.cli.workload", "Chakra execution traces"),
    "run": ("netsim.cli.workload", "run a Chakra workload (<prefix>.<rank>.et) on a topology"),
    "workload": ("netsim.cli.workload", "generate workloads as Chakra traces"),
    "analyze": ("netsim.cli.analyze", "report stragglers, exposed communication and link load of a results dir"),
    "timeline": ("netsim.cli.analyze", "write the per-rank timeline as Chrome-trace / Perfetto JSON"),
    "sweep": ("netsim.cli.sweep", "run a grid of bench or run configurations into one results dataset"),
    "astra": ("netsim.cli.astra", "ASTRA-sim drop-in: run its inputs (--workload-configuration=... etc.), "
                                  "'export' a topology, 'compare' with the real binary"),
}
#: Command -> its one-line help (what each module's parser shows).
HELP = {name: text for name, (_, text) in COMMANDS.items()}


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser: of every subcommand (``argv`` None), or of the command ``argv`` names,
    the others listed by name and help only."""
    p = _Parser(prog="netsim", description="Simulate GPU-cluster networks and collectives.")
    p.add_argument("--version", action="version", version=f"netsim {__version__}")
    p.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    wanted = None if argv is None else _command_of(argv)
    modules = [m for m, _ in COMMANDS.values()] if argv is None else [COMMANDS[wanted][0]] if wanted else []
    for module in dict.fromkeys(modules):  # each module once, in the table's order
        register = _register_topo if module == __name__ else import_module(module).register_cli
        register(sub)
    for name, (_, text) in COMMANDS.items():
        if name not in sub.choices:
            sub.add_parser(name, help=text)
    return p


def _command_of(argv: Sequence[str]) -> str | None:
    """The command ``argv`` runs: its first word that is not a flag, if it names one."""
    word = next((a for a in argv if not a.startswith("-")), None)
    return word if word in COMMANDS else None


def _register_topo(sub) -> None:
    from netsim.cli.options import add_set_argument

    topo = sub.add_parser("topo", help=HELP["topo"])
    topo.add_argument("path", help="topology file")
    topo.add_argument("--json", action="store_true", help="machine-readable output")
    topo.add_argument("--bom", action="store_true",
                      help="print the bill of materials (switches, NICs, cables, transceivers) with cost and power")
    topo.add_argument("--prices", metavar="FILE",
                      help="price-and-power YAML merged over the shipped table by line key (implies --bom; docs/cost.md)")
    topo.add_argument("--include-gpus", action="store_true",
                      help="count GPUs and servers in the cost and power totals too (implies --bom; default: network only)")
    add_set_argument(topo)
    topo.set_defaults(func=_cmd_topo)


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
    parser = build_parser(argv)
    args = parser.parse_args(_join_dash_values(argv))
    if not getattr(args, "func", None):
        parser.print_help()
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
