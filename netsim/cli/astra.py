"""``netsim astra``: ASTRA-sim's command line as a drop-in, plus ``export`` and ``compare``.

::

    netsim astra --workload-configuration=PREFIX --system-configuration=SYS.json \\
                 --network-configuration=NET.yml [--remote-memory-configuration=MEM.json] \\
                 [--comm-group-configuration=GROUPS.json] [--out DIR] [--model analytical|congestion-aware|flow]
    netsim astra export --topology TOPO.yaml --out DIR
    netsim astra compare --astra-bin PATH ...the same flags... [--out DIR]

Flags take ``--flag=value`` or ``--flag value``.  Unknown flags are accepted with a
note on stderr (ASTRA-sim's parser accepts them silently).  Results go to stdout as
ASTRA-sim's lines; notes go to stderr.
"""

from __future__ import annotations

import argparse
import os
import sys

from netsim import inputs
from netsim.astra.session import run_from_args, write_dataset
from netsim.astra.session import note as _note
from netsim.cli.options import float_arg
from netsim.errors import DeadlockError, InputError
from netsim.results.io import check_output_dir
from netsim.cli.app import HELP

#: ASTRA-sim's analytical frontend flags (``CmdLineParser.cc``) and their defaults.
ASTRA_FLAGS = {"workload-configuration": None, "system-configuration": None, "network-configuration": None,
               "remote-memory-configuration": None, "comm-group-configuration": "empty",
               "logging-configuration": "empty", "logging-folder": "log", "num-queues-per-dim": "1",
               "compute-scale": "1", "comm-scale": "1", "injection-scale": "1", "rendezvous-protocol": "false"}
_BOOL = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # noqa: D401 - argparse API
        raise InputError(message, source=self.prog)


def register_cli(sub) -> None:
    """Add ``netsim astra`` (its own parser: every ``--flag`` is handed over untouched)."""
    p = sub.add_parser("astra", prefix_chars="+", add_help=False,
                       help=HELP["astra"])
    p.add_argument("argv", nargs="*")
    p.set_defaults(func=lambda args: main(args.argv))


#: ``netsim astra --help``'s closing lines: the two subcommands.
SUBCOMMANDS = """subcommands:
  netsim astra export --topology TOPO.yaml --out DIR [--overwrite]
      write ASTRA-sim network YAML + system JSON approximating a netsim topology
  netsim astra compare --astra-bin PATH <the flags above> [--out DIR]
      run the real ASTRA-sim binary on the same inputs and compare (see --help of each; docs/astra.md)"""


def _astra_parser(prog: str, required: bool = True) -> _Parser:
    p = _Parser(prog=prog, allow_abbrev=False, description="ASTRA-sim inputs, ASTRA-sim results.",
                epilog=SUBCOMMANDS if prog == "netsim astra" else None,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    for flag, default in ASTRA_FLAGS.items():
        kw = {"default": default, "metavar": "VALUE"}
        if default is None and flag != "remote-memory-configuration":
            kw["required"] = required
        if flag == "rendezvous-protocol":
            kw.update(nargs="?", const="true")
        p.add_argument(f"--{flag}", **kw)
    p.add_argument("--model", default=None, choices=["analytical", "congestion-aware", "flow"],
                   help="network model (default analytical: ASTRA-sim's congestion-unaware backend)")
    p.add_argument("--engine", default="auto", choices=["auto", "full", "symmetric", "batched", "compiled"],
                   help="full: every rank event by event; symmetric: one rank of a rank-symmetric run; batched: "
                        "all ranks as arrays (chains of compute and ring collectives on the world or comm groups); "
                        "compiled: the congestion-aware event engine compiled (chains of world collectives); auto: "
                        "the fastest exact")
    p.add_argument("--stream-matching", default="astra", choices=["astra", "per-group"],
                   help="astra: ASTRA-sim's one stream counter per rank (it stalls where ranks differ); per-group: "
                        "match streams per communicator (netsim.astra.streams)")
    p.add_argument("--out", default=None, help="also write the results dataset (Parquet) to this folder")
    p.add_argument("--overwrite", action="store_true", help="replace this run in --out")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress on stderr (on a terminal a bar after 2 s; elsewhere a status line every 30 s from 10 s on)")
    return p


def main(argv: list[str]) -> int:
    """Entry of ``netsim astra ...``; returns the exit status."""
    argv = [a for a in argv if a != "--debug"]
    if argv and argv[0] == "export":
        return _export(argv[1:])
    if argv and argv[0] == "compare":
        return _compare(argv[1:])
    args, opts = parse_astra_args(_astra_parser("netsim astra"), argv)
    if args.out:
        check_output_dir(args.out, flag="--out", what="a results directory")
    try:
        res = run_from_args(args, opts)
    except DeadlockError as exc:  # stdout as ASTRA-sim's: the lines of the ranks that finished
        for text in getattr(exc, "notes", ()):
            _note(text)
        sys.stdout.write("\n".join(getattr(exc, "lines", ())) + "\n")
        sys.stdout.flush()
        raise
    sys.stdout.write("\n".join(res.lines()) + "\n")
    if args.out:
        path = write_dataset(args.out, res, opts, args, overwrite=args.overwrite)
        _note(f"wrote the results dataset to {path}")
    return 0


def parse_astra_args(parser: _Parser, argv: list[str]):
    """Parse, note unknown flags (accepted like ASTRA-sim does), validate values."""
    args, unknown = parser.parse_known_args(argv)
    for extra in unknown:
        _note(f"ignoring unknown option {extra!r} (ASTRA-sim accepts unknown options silently)")
    try:
        opts = {"num_queues_per_dim": int(args.num_queues_per_dim),
                "injection_scale": float(args.injection_scale)}
        for flag in ("compute_scale", "comm_scale"):
            if float(getattr(args, flag)) != 1.0:
                _note(f"--{flag.replace('_', '-')} is unused by ASTRA-sim's analytical frontend; ignored")
    except ValueError as exc:
        raise InputError(f"expected a number ({exc})", source="netsim astra") from None
    # Physical ranges: the scale stretches the endpoint delay (>= 0, finite); queues are per dimension
    # (ASTRA-sim's examples use 1-4; every queue is simulated).
    inputs.number(opts["injection_scale"], "--injection-scale", None, lo=0, hi=1e6)
    inputs.bounded_int(opts["num_queues_per_dim"], "--num-queues-per-dim", None, 1, 1024)
    value = str(args.rendezvous_protocol).lower()
    if value not in _BOOL:
        raise InputError(f"expected true or false, got {args.rendezvous_protocol!r}", source="--rendezvous-protocol")
    opts["rendezvous"] = _BOOL[value]
    if args.logging_configuration != "empty" or args.logging_folder != "log":
        _note("--logging-configuration/--logging-folder: netsim prints the info-level lines and writes no log.log")
    return args, opts


def _export(argv: list[str]) -> int:
    from netsim.astra.export import export_topology

    p = _Parser(prog="netsim astra export", allow_abbrev=False,
                description="write ASTRA-sim network YAML + system JSON approximating a netsim topology")
    p.add_argument("--topology", required=True, help="netsim topology YAML (or ASTRA-sim network YAML)")
    p.add_argument("--out", required=True, help="output folder (network.yml, system.json, remote_memory.json)")
    p.add_argument("--overwrite", action="store_true", help="replace existing files in --out")
    args = p.parse_args(argv)
    check_output_dir(args.out, flag="--out", what="a folder for the export")
    written, lost = export_topology(args.topology, args.out, overwrite=args.overwrite)
    for f in written:
        print(f"wrote {f}")
    for line in lost:
        print(f"approximation: {line}")
    return 0


def _compare(argv: list[str]) -> int:
    from netsim.astra.compare import compare

    p = _astra_parser("netsim astra compare")
    p.add_argument("--astra-bin", default=os.environ.get("ASTRA_SIM_BIN"),
                   help="ASTRA-sim binary (default: $ASTRA_SIM_BIN)")
    p.add_argument("--timeout", type=float_arg(0, 1e6, lo_open=True), default=3600.0, help="seconds to wait for the binary")
    args, opts = parse_astra_args(p, argv)
    if args.out:
        check_output_dir(args.out, flag="--out", what="a results directory")
    summary = compare(args, opts, _astra_argv(argv))
    print(summary)
    return 0


def _astra_argv(argv: list[str]) -> list[str]:
    """The ASTRA-sim flags among ``argv``, as ``--flag=value`` (netsim's own flags dropped)."""
    out, i = [], 0
    while i < len(argv):
        a = argv[i]
        name = a[2:].split("=", 1)[0] if a.startswith("--") else None
        if name in ASTRA_FLAGS:
            if "=" in a:
                out.append(a)
            elif name == "rendezvous-protocol" and (i + 1 >= len(argv) or argv[i + 1].startswith("--")):
                out.append(f"--{name}=true")
            else:
                out.append(f"--{name}={argv[i + 1]}" if i + 1 < len(argv) else a)
                i += 1
        i += 1
    return out
