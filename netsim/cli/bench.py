"""``netsim bench``: the nccl-tests command line over :mod:`netsim.perftests` (collectives and MoE ops)."""

from __future__ import annotations

import argparse

from netsim import units
from netsim.perftests.collective import (ALGORITHMS, BenchConfig, placed_ranks, run_one, sweep_sizes,
                                     validated)
from netsim.cli.options import add_quiet_argument, add_set_argument, int_arg
from netsim.collectives.executor import ENGINES
from netsim.errors import InputError
from netsim.results import nccl_table as nt
from netsim.results.io import check_output_dir, check_output_file
from netsim.topology.policy import with_routing
from netsim.cli.app import HELP

def _size(flag: str):
    def parse(text: str) -> int:
        try:
            return units.parse_size(text)
        except InputError as exc:  # argparse replaces ValueError messages; keep ours
            raise argparse.ArgumentTypeError(exc.message) from None
    return parse


def register_cli(sub) -> None:
    """Add ``netsim bench`` to the CLI."""
    p = sub.add_parser("bench", help=HELP["bench"])
    p.add_argument("--topology", required=True, help="netsim topology YAML or ASTRA-sim network YAML")
    p.add_argument("--op", required=True, help=f"one of {', '.join(nt.OPS)}, moe_dispatch, moe_combine")
    p.add_argument("--algo", default="auto", metavar="ALGO", help=_algo_help())
    p.add_argument("-b", "--minbytes", type=_size("-b"), default=8, help="smallest size (default 8)")
    p.add_argument("-e", "--maxbytes", type=_size("-e"), default=None, help="largest size (default = -b)")
    p.add_argument("-f", "--stepfactor", type=int_arg("stepfactor", "a step factor"), default=None, help="multiply size by this (default 2)")
    p.add_argument("-i", "--stepbytes", type=_size("-i"), default=None, help="add this to size instead")
    p.add_argument("--gpus", type=int_arg("gpus"), default=None, help="use N GPUs (default all)")
    p.add_argument("--placement", default="packed", metavar="SPEC",
                   help="which GPUs: packed (first N, default), random[:SEED], strided:K, or a file of GPU ids")
    p.add_argument("--engine", default="auto", choices=ENGINES,
                   help="auto: vectorized where provably exact (default); event: event-driven; "
                        "reference: event-driven on the numpy flow table (no compiled kernels)")
    p.add_argument("--routing", default=None, metavar="POLICY",
                   help="scale-out routing: ftree (InfiniBand subnet manager, by destination), ecmp (static "
                        "hash), adaptive (least-loaded path at flow start) or spray (every flow over all "
                        "equal-cost paths); default: the topology file's (ftree on InfiniBand, ecmp on RoCE)")
    p.add_argument("--model", default="flow", metavar="MODEL",
                   help="network model: flow (congestion-aware max-min sharing, default) or analytical "
                        "(each step alone: a bound; README)")
    p.add_argument("-d", "--datatype", default="float", help="nccl-tests data type (default float)")
    p.add_argument("--channels", type=int_arg("channels"), default=None, help="NCCL channels (default: NCCL's choice)")
    p.add_argument("--proto", default=None, help="force NCCL protocol LL, LL128 or Simple (default: NCCL's choice)")
    p.add_argument("--skew", default=None, help="alltoall expert-load skew: zipf:ALPHA or uniform (alltoallv)")
    p.add_argument("--skew-matrix", default=None, help="alltoall per-pair byte matrix file (.npy or .csv)")
    p.add_argument("--seed", type=int_arg("seed"), default=0, help="seed for --skew (default 0)")
    p.add_argument("-J", "--json", dest="json_path", default=None, help="write nccl-tests-style JSON")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="write a results dataset (collectives per size + runs; netsim.open_results(DIR)); "
                        "a path ending in .parquet gets the nccl-tests rows as one Parquet table instead")
    p.add_argument("--overwrite", action="store_true", help="replace existing output files")
    add_set_argument(p)
    add_quiet_argument(p)
    from netsim.cli import moe as moe_cli
    moe_cli.add_arguments(p)
    p.set_defaults(func=_cmd_bench_or_moe)


def _algo_help() -> str:
    """``--algo``'s help: every algorithm per op."""
    per_op = "; ".join(f"{op}: {', '.join(algos)}" for op, algos in ALGORITHMS.items())
    return f"algorithm: auto (default, chooses like NCCL) or, per op, {per_op}; MoE ops: direct, hierarchical, node_limited"


def _cmd_bench_or_moe(args: argparse.Namespace) -> int:
    """MoE ops (``moe_dispatch``, ``moe_combine``) run in :mod:`netsim.perftests.moe`."""
    from netsim.perftests import moe as moe_bench
    from netsim.cli import moe as moe_cli
    if str(args.op).strip().lower() in moe_bench.OPS:
        args.op = str(args.op).strip().lower()
        return moe_cli.cmd(args)
    return _cmd_bench(args)


def _algorithms(rows) -> str:
    """The title's word on algorithms: those that ran, in the order of the sizes that ran them."""
    algos = list(dict.fromkeys(r.algorithm for r in rows))
    return f"algorithm{'s' if len(algos) > 1 else ''} {', '.join(algos)}"


def _size_notes(args: argparse.Namespace, sizes: list[int], maxb: int) -> list[str]:
    """A note when the sweep stops short of ``-e`` (nccl-tests stops at the last size within it)."""
    if not sizes or sizes[-1] >= maxb:
        return []
    step = f"-i {units.format_size(args.stepbytes)}" if args.stepbytes is not None else f"-f {args.stepfactor or 2}"
    return [f"-e {units.format_size(maxb)} is not reached with {step} from -b {units.format_size(args.minbytes)}: "
            f"the last size is {units.format_size(sizes[-1])} (as in nccl-tests, sizes stop at the last one within -e)"]


def _check_outputs(args: argparse.Namespace) -> bool:
    """Check ``-J`` and ``--out`` before anything runs; returns whether ``--out`` is a dataset."""
    to_dataset = bool(args.out) and not str(args.out).endswith(".parquet")  # FILE.parquet: the one-table format
    if args.json_path:
        check_output_file(args.json_path, overwrite=args.overwrite, flag="-J")
    if to_dataset:
        check_output_dir(args.out, flag="--out", what="a results directory")
    elif args.out:
        check_output_file(args.out, overwrite=args.overwrite, flag="--out")
    return to_dataset


def _cmd_bench(args: argparse.Namespace) -> int:
    to_dataset = _check_outputs(args)
    from netsim.progress import Poller, wanted
    from netsim.topology.overrides import load_topology_set, parse_sets

    sets = parse_sets(args.sets)
    topo = load_topology_set(args.topology, args.sets)
    cfg = validated(BenchConfig(nt.canonical_op(args.op), args.algo, args.gpus, args.model,
                                 args.datatype, args.channels, args.proto, args.skew, args.skew_matrix,
                                 args.seed, args.placement, args.engine, args.routing), topo)
    topo = with_routing(topo, cfg.routing) if cfg.routing is not None else topo
    maxb = args.maxbytes if args.maxbytes is not None else args.minbytes
    sizes = sweep_sizes(args.minbytes, maxb, args.stepfactor, args.stepbytes)
    if to_dataset:
        import dataclasses
        import time

        from netsim.results import dataset, record
        run_config = {"command": "bench", "topology": str(args.topology), **dataclasses.asdict(cfg), "sizes": sizes}
        if cfg.routing is None:  # the topology file's routing: keep the run ids of runs before --routing
            del run_config["routing"]
        if sets:  # --set KEY=VALUE: part of the run's identity
            run_config["set"] = sets
        dataset.check_writable(args.out, dataset.run_id_for(run_config), args.overwrite)
        t0 = time.perf_counter()
    kept: list | None = [] if to_dataset else None  # per-size links and ranks for --out DIR
    rows, now, notes = [], {}, []  # now: the size being simulated and its network (read by the progress thread)

    def status() -> str:
        net = now.get("net")
        return f"size {now.get('size', '')}" + (f", {net.env.now * 1e6:,.1f} us simulated" if net else "")
    with Poller(len(sizes), lambda: len(rows), "bench", "size", wanted(args.quiet), postfix=status):
        for s in sizes:  # per size and, within a long size, its simulated time (after 2 s, on a TTY)
            now.update(size=units.format_size(s), net=None)
            row, stats = run_one(topo, cfg, s, kept, watch=lambda net: now.update(net=net))
            rows.append(row)
            notes += [n for n in stats["notes"] if n not in notes]
    routing = topo.routing
    title = (f"netsim bench: {topo.name}, {cfg.gpus} GPUs, model {cfg.model}, "
             + (f"routing {routing}, " if routing != "ecmp" else "") + f"{_algorithms(rows)} "
             "(simulated; nccl-tests table format, the algorithm of each size in the last column)")
    # the header names the sizes asked for, as nccl-tests prints them (-e 1G -f 4 from 8 ends at 512M)
    print(nt.format_table(cfg.op, rows, nranks=cfg.gpus, min_bytes=args.minbytes, max_bytes=maxb,
                          step_factor=args.stepfactor if args.stepbytes is None else None,
                          step_bytes=args.stepbytes, title=title, algo_column=True), end="")
    for note in _size_notes(args, sizes, maxb) + notes:
        print(f"# note: {note}")
    config = {"topology": str(args.topology), "gpus": cfg.gpus, "model": cfg.model, "op": cfg.op,
              "algo": cfg.algo, "channels": cfg.channels, "placement": cfg.placement, "engine": cfg.engine,
              "routing": routing, **({"set": sets} if sets else {})}
    if args.json_path:
        nt.write_nccl_json(args.json_path, cfg.op, rows, config=config)
    if to_dataset:
        from netsim.results import bench_tables
        extra = {"links": bench_tables.links_frame(topo, kept),
                 "ranks": bench_tables.ranks_frame(topo, placed_ranks(topo, cfg), kept)}
        record.write_bench_run(args.out, run_config, cfg.op, rows, cfg.gpus, time.perf_counter() - t0,
                               overwrite=args.overwrite, extra=extra, topo=topo)
    elif args.out:
        from netsim.results.bench_tables import write_bench_file  # the dataset's column names, ns
        write_bench_file(args.out, nt.rows_to_frame(cfg.op, rows, cfg.gpus), config)
    return 0
