"""``netsim bench``: the nccl-tests command line over :mod:`netsim.perftests` (collectives and MoE ops)."""

from __future__ import annotations

import argparse
import sys

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
    est = _estimate(topo, cfg, sizes, args.quiet)
    rows, notes = [], []
    work = _Work(sizes, est)
    with Poller(work.total, work.done, "bench", "size", wanted(args.quiet), postfix=work.status,
                bar_format="{desc}: {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}{postfix}]"):
        for s in sizes:  # per size and, within a long size, its transfers simulated and simulated time
            work.start(s)
            row, stats = run_one(topo, cfg, s, kept, watch=work.watch)
            rows.append(row)
            work.finished()
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


#: Estimated CPU seconds from which ``bench`` says, before it runs, how long it will take and what is faster.
LONG_S = 20.0


def _estimate(topo, cfg: BenchConfig, sizes: list[int], quiet: bool):
    """The run's cost (:func:`netsim.perftests.estimate.estimate`), or None if it cannot be told; a
    note on stderr before a run estimated at :data:`LONG_S` CPU seconds or more (not ``--quiet``)."""
    from netsim.perftests import estimate as cost

    try:
        est = cost.estimate(topo, cfg, sizes)
    except (InputError, ValueError, MemoryError):  # the run itself says what is wrong
        return None
    if not quiet and est.total_s >= LONG_S:
        print(_long_note(topo, cfg, sizes, est), file=sys.stderr, flush=True)
    return est


def _long_note(topo, cfg: BenchConfig, sizes: list[int], est) -> str:
    """``netsim bench: estimate: ...``: the estimate, what it counts, and the faster alternative."""
    from dataclasses import replace

    from netsim.perftests import estimate as cost

    what = (f"{est.simulated / 1e6:,.1f}M transfers simulated event by event" if cfg.model == "flow"
            else f"{sum(c.routed for c in est.counts) / 1e6:,.1f}M transfers routed")
    text = (f"netsim bench: estimate: about {cost.duration(est.total_s)} of CPU time ({est.gpus:,} GPUs, "
            f"{cfg.model} model: {what}; README.md#progress)")
    if cfg.model == "flow":
        try:
            alt = cost.estimate(topo, replace(cfg, model="analytical"), sizes).total_s
        except (InputError, ValueError, MemoryError):
            return text
        text += (f"; --model analytical takes about {cost.duration(alt)} (each step timed alone: no "
                 "events; README, netsim bench)")
    return text


class _Work:
    """The bench's progress in permille of its estimated CPU seconds (sizes weigh 1 each without an
    estimate): sizes done, plus the current size's share of its simulated transfers (read by the
    progress thread)."""

    total = 1000

    def __init__(self, sizes: list[int], est):
        self.est, self.k, self.net, self.size = est, 0, None, None
        self.per = list(est.cpu_s) if est is not None else [1.0] * len(sizes)
        self.n_sizes = len(sizes)

    def start(self, size: int) -> None:
        self.size, self.net = units.format_size(size), None

    def watch(self, net) -> None:
        self.net = net

    def finished(self) -> None:
        self.k, self.net = self.k + 1, None

    def done(self) -> int:
        """Permille of the estimated work done."""
        k, net, est = self.k, self.net, self.est
        w = sum(self.per[:k])
        if net is not None and est is not None and k < len(self.per) and est.sim_s[k] > 0:
            expect = est.counts[k].simulated
            frac = min(net.stats.get("transfers", 0) / expect, 0.99) if expect > 0 else 0.0
            w += self.per[k] - est.sim_s[k] + est.sim_s[k] * frac  # routed when the network exists
        return round(self.total * w / sum(self.per)) if self.per else 0

    def status(self) -> str:
        net = self.net
        return (f"size {self.size} ({min(self.k + 1, self.n_sizes)} of {self.n_sizes})"
                + (f", {net.env.now * 1e6:,.1f} us simulated" if net is not None else ""))
