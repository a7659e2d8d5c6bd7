"""``netsim trace inspect``: summarize a Chakra trace (one file or a ``<prefix>.<rank>.et`` set)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from netsim.errors import InputError


def register_cli(sub) -> None:
    """Add ``netsim trace`` to the CLI."""
    trace = sub.add_parser("trace", help="Chakra execution traces")
    tsub = trace.add_subparsers(dest="trace_command", metavar="SUBCOMMAND")
    p = tsub.add_parser("inspect", help="summarize a trace: ranks, node types, collectives, depth")
    p.add_argument("path", help="a .et file or a prefix P with files P.<rank>.et")
    p.add_argument("--json", action="store_true", help="machine-readable summary")
    p.add_argument("--parquet", default=None, help="write the node table (one row per node per rank)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --parquet file")
    p.set_defaults(func=_cmd_inspect)
    trace.set_defaults(func=lambda args: _missing_sub(trace))


def _missing_sub(parser) -> int:
    raise InputError("expected a subcommand: inspect", source="netsim trace")


def _cmd_inspect(args: argparse.Namespace) -> int:
    from netsim.workload.inspect import node_table, summarize_trace

    summary = summarize_trace(args.path)
    if args.parquet:
        from netsim.bench import _write_parquet

        if Path(args.parquet).exists() and not args.overwrite:
            raise InputError("exists; pass --overwrite to replace it", source=args.parquet)
        _write_parquet(args.parquet, node_table(args.path))
    if args.json:
        coll = [{"comm_type": k[0], "comm_size": k[1], "pg_name": k[2], "count": v}
                for k, v in summary["collectives"].items()]
        print(json.dumps({**summary, "collectives": coll}, indent=2, default=str))
    else:
        print(format_summary(summary))
    return 0


def format_summary(s: dict) -> str:
    """Readable lines for :func:`netsim.workload.inspect.summarize_trace`."""
    ranks = s["ranks"]
    span = f"{ranks[0]}..{ranks[-1]}" if len(ranks) > 1 else str(ranks[0])
    lines = [f"trace         {s['source']}",
             f"ranks         {len(ranks)} ({span}); {s['distinct_files']} distinct file(s)",
             f"version       {s['metadata_version']!r}",
             f"nodes         {s['nodes']:,}  (" + ", ".join(f"{k} {v:,}" for k, v in s["node_types"].items()) + ")",
             f"dep. depth    {s['dependency_depth'] if s['dependency_depth'] is not None else 'cycle in data_deps'}",
             f"unknown deps  {s['unknown_dep_ids']} id(s); references " +
             ", ".join(f"{k} {v:,}" for k, v in s["unknown_dep_refs"].items())]
    if s.get("host_comm_nodes"):
        lines.append(f"host comm     {s['host_comm_nodes']} COMM_COLL node(s) with is_cpu_op and no comm_type")
    lines.append("collectives   " + ("none" if not s["collectives"] else ""))
    for (ctype, size, pg), count in s["collectives"].items():
        size_txt = f"{size:,} B" if size is not None else "?"
        lines.append(f"  {ctype:<16} {size_txt:>16}  group {pg if pg not in (None, '') else 'world'}  x{count}")
    return "\n".join(lines)
