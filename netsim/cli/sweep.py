"""``netsim sweep SWEEP.yaml --out DIR``: run a design study (see ``docs/sweeps.md``)."""

from __future__ import annotations

import argparse
import sys

from netsim.errors import InputError
from netsim.cli.options import float_arg, int_arg
from netsim.cli.app import HELP


def register_cli(sub) -> None:
    """Add ``netsim sweep`` to the CLI."""
    p = sub.add_parser("sweep", help=HELP["sweep"])
    p.add_argument("sweep", help="sweep YAML file (kind, base, grid, zip, seeds)")
    p.add_argument("--out", required=True, help="results directory (re-running skips finished run_ids)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--scheduler", default=None, help="address of a running Dask scheduler (tcp://HOST:PORT)")
    where.add_argument("--workers", type=int_arg("workers"), default=None, help="start a local Dask cluster of N worker processes")
    where.add_argument("--jobs", type=int_arg("jobs"), default=None,
                       help="local worker processes without Dask (the default executor; default: CPU count)")
    p.add_argument("--retries", type=int_arg("retries"), default=2,
                   help="resubmit a configuration whose worker died or that crashed, up to K times (default 2)")
    p.add_argument("--dry-run", action="store_true",
                   help="check every configuration as the sweep would, then list them and their run_ids; "
                        "simulate nothing")
    p.add_argument("--tolerance", type=float_arg(0, what="a percentage"), default=5.0, metavar="PCT",
                   help="the design answer printed at the end: the cheapest (and least-power) configuration "
                        "within PCT %% of the best time, per workload (default 5; docs/sweeps.md)")
    p.add_argument("--prices", default=None, metavar="FILE",
                   help="price-and-power file for that answer, merged over the shipped table (docs/cost.md); "
                        "the runs rows keep the shipped prices")
    p.add_argument("--no-progress", action="store_true", help="no progress on stderr (on a terminal a bar; elsewhere a status line every 30 s from 10 s on)")
    p.set_defaults(func=_cmd_sweep)


def _cmd_sweep(args: argparse.Namespace) -> int:
    from netsim.results.dataset import is_complete
    from netsim.sweep.runner import check_configs, check_executor_flags, run_sweep
    from netsim.sweep.spec import load_sweep
    from netsim.sweep.study import design_answer, study_points

    from netsim.results.io import check_output_dir

    if not args.dry_run:
        check_output_dir(args.out, flag="--out", what="a results directory")
    check_executor_flags(args.scheduler, args.workers, args.jobs)
    sweep = load_sweep(args.sweep)
    prices = None
    if args.prices is not None:  # a bad price file stops the command before anything runs
        from netsim.topology.prices import load_prices

        prices = load_prices(args.prices)
    if args.dry_run:
        check_configs(sweep)  # what the workers would reject, before they simulate
        for i, rid in enumerate(sweep.run_ids):
            state = "done" if is_complete(args.out, rid) else "todo"
            print(f"{rid}  {state}  {sweep.label(i) or '(base)'}")
        print(f"{len(sweep)} configurations ({sweep.kind})")
        return 0
    if args.retries < 0:
        raise InputError(f"expected retries >= 0, got {args.retries}", source="--retries")
    report = run_sweep(sweep, args.out, scheduler=args.scheduler, workers=args.workers, jobs=args.jobs,
                       retries=args.retries, progress=not args.no_progress)
    print(f"sweep {sweep.name}: {report.line()}")
    for f in report.failed:
        print(f"failed  {f['run_id']}  {f['label']}: {f['error']}", file=sys.stderr)
    answer = design_answer(study_points(sweep, args.out, prices), args.tolerance / 100)
    if answer:
        print(answer)
    return 0 if report.ok else 1
