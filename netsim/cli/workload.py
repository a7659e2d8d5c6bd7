"""``netsim trace inspect`` (summarize a Chakra trace: one file or a ``<prefix>.<rank>.et`` set),
``netsim run`` (a workload on a topology, with the LLM generator's and MoE layers' flags) and
``netsim workload llm`` (generate a training iteration as Chakra traces)."""

from __future__ import annotations

import argparse
import json
from contextlib import contextmanager

from netsim.cli.options import add_quiet_argument, add_set_argument, int_arg
from netsim.collectives.executor import ENGINES
from netsim.errors import InputError
from netsim.workload.moe_run import ALGOS as MOE_ALGOS, MoERunConfig
from netsim.workload.simulation import simulate
from netsim.cli.app import HELP


def register_cli(sub) -> None:
    """Add ``netsim trace``, ``netsim run`` and ``netsim workload`` to the CLI."""
    _add_trace(sub)
    _add_run(sub)
    _add_workload(sub)


def _add_trace(sub) -> None:
    trace = sub.add_parser("trace", help=HELP["trace"])
    tsub = trace.add_subparsers(dest="trace_command", metavar="SUBCOMMAND")
    p = tsub.add_parser("inspect", help="summarize a trace: ranks, node types, collectives, depth")
    p.add_argument("path", help="a .et file or a prefix P with files P.<rank>.et")
    p.add_argument("--json", action="store_true", help="machine-readable summary")
    p.add_argument("--parquet", default=None, help="write the node table (one row per node per rank)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --parquet file")
    p.set_defaults(func=_cmd_inspect)
    trace.set_defaults(func=lambda args: _missing_sub(trace))


def _add_run(sub) -> None:
    run = sub.add_parser("run", help=HELP["run"])
    run.add_argument("--topology", required=True, help="netsim topology YAML or ASTRA-sim network YAML")
    src = run.add_mutually_exclusive_group(required=True)
    src.add_argument("--workload", help="trace prefix P (files P.<rank>.et) or one .et file")
    src.add_argument("--llm", metavar="MODEL", help="generate an LLM iteration instead (preset or YAML; "
                     "takes the flags of `netsim workload llm`; docs/workloads.md)")
    run.add_argument("--comm-groups", default=None, help="ASTRA-sim comm-group JSON")
    run.add_argument("--model", default="flow", choices=["flow", "analytical"], help="network model")
    run.add_argument("--routing", default=None, metavar="POLICY",
                     help="scale-out routing: ftree, ecmp, adaptive or spray (docs/topology.md); default: the topology file's (ftree on InfiniBand, ecmp on RoCE)")
    run.add_argument("--placement", default="packed", metavar="SPEC",
                     help="which GPU each rank runs on: packed (rank r on GPU r, default), random[:SEED], "
                          "strided:K, or a file of GPU ids (docs/workloads.md)")
    run.add_argument("--engine", default="auto", choices=list(ENGINES),
                     help="auto: collectives evaluated off the event queue where exact (default); "
                          "event: every collective event-driven; reference: event-driven on the numpy flow "
                          "table (no compiled kernels)")
    run.add_argument("--no-ctrl-deps", action="store_true", help="gate on data_deps only")
    run.add_argument("--streams", type=int_arg("streams"), default=1,
                     help="nodes in flight per lane (CPU, GPU compute, GPU comm); ASTRA-sim uses 1")
    run.add_argument("--json", action="store_true", help="machine-readable summary")
    run.add_argument("--out", default=None, metavar="DIR",
                     help="write the results dataset (ops, collectives, links, ranks, runs; see open_results)")
    run.add_argument("--overwrite", action="store_true", help="replace this run's files in --out")
    run.add_argument("--straggler", action="append", default=[], metavar="RANK:FACTOR",
                     help="slow RANK's compute by FACTOR (repeatable)")
    run.add_argument("--faults", default=None, metavar="FILE.yaml",
                     help="stragglers, launch jitter, degraded/failed links and switches (docs/faults.md)")
    run.add_argument("--seed", type=int_arg("seed"), default=None, help="seed of the fault draws (default: the file's, or 0)")
    run.add_argument("--compute-efficiency", default=None, metavar="F|peak|KIND=F,...",
                     help="achieved fraction of the GPU's peak FLOP/s for roofline-timed compute: F (0 < F <= 1) for "
                     "every node, peak, or per kernel kind (gemm, attn_fwd, attn_bwd, other); default: the GPU "
                     "preset's per-kind figures (nodes naming no kind at the peak); the HBM roof is unchanged")
    run.add_argument("--sm-contention", default="on", choices=["on", "off"],
                     help="on: a rank's compute slows while its communication kernels hold SMs (one per NCCL "
                     "channel; GPU presets with an SM count); off: compute never slows, as in ASTRA-sim")
    add_set_argument(run)
    add_quiet_argument(run)
    _add_generator_flags(run)
    _add_moe_flags(run)
    run.set_defaults(func=_cmd_run)


def _add_generator_flags(run) -> None:
    gen = run.add_argument_group("generator (with --llm)")
    for flag in ("tp", "pp", "dp", "ep", "cp", "microbatches", "seq", "micro-batch", "vpp", "global-batch"):
        gen.add_argument(f"--{flag}", type=int_arg(flag), default=None, help=f"as in `netsim workload llm --{flag}`")
    gen.add_argument("--schedule", default=None, help="as in `netsim workload llm --schedule`")
    gen.add_argument("--recompute", default=None, choices=["none", "selective", "full"],
                     help="as in `netsim workload llm --recompute`")
    _add_layout_flags(gen, "as in `netsim workload llm --recompute-modules`",
                      "as in `netsim workload llm --pipeline-layout`")
    add_overlap_arguments(gen, None)
    gen.add_argument("--symmetry", default="auto", choices=["auto", "approximate", "none"],
                     help="auto: simulate one data-parallel replica standing for all where that is proven exact "
                     "for this run (every replica planned alike, every copy finishing with its representative), "
                     "else every rank; approximate: one replica even where copies finish apart (the notes "
                     "give the spread, not a bound); none: every rank (docs/workloads.md)")


def _names(text: str) -> tuple[str, ...]:
    return tuple(x for x in text.split(",") if x)


def _counts(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated layer counts, got {text!r}") from None


def _add_layout_flags(group, modules_help: str, layout_help: str) -> None:
    group.add_argument("--recompute-modules", type=_names, default=None, metavar="NAME[,NAME]", help=modules_help)
    group.add_argument("--pipeline-layout", type=_counts, default=None, metavar="N,N,...", help=layout_help)


def _add_workload(sub) -> None:
    wl = sub.add_parser("workload", help=HELP["workload"])
    wsub = wl.add_subparsers(dest="workload_command", metavar="SUBCOMMAND")
    llm = wsub.add_parser("llm", help="one training iteration of a TP/CP/PP/DP(/EP) LLM, 1F1B or interleaved")
    which = llm.add_mutually_exclusive_group(required=True)
    which.add_argument("--llm", dest="llm_model", metavar="MODEL",
                       help="the LLM: a preset of workloads/models (llama3-8b, llama3-70b, llama3-405b, "
                            "mixtral-8x7b, mixtral-8x22b, deepseek-v3, gpt3-175b) or a YAML file")
    which.add_argument("--model", dest="llm_model", metavar="MODEL",
                       help="deprecated spelling of --llm (elsewhere --model names the network model)")
    for flag in ("tp", "pp", "dp"):
        llm.add_argument(f"--{flag}", type=int_arg(flag), required=True, help=f"{flag.upper()} degree")
    llm.add_argument("--ep", type=int_arg("ep"), default=1, help="expert-parallel degree (divides dp)")
    llm.add_argument("--cp", type=int_arg("cp"), default=1,
                     help="context-parallel degree (divides seq; K/V all-gather per layer, as in Llama 3)")
    llm.add_argument("--microbatches", type=int_arg("microbatches"), default=None,
                     help="microbatches per iteration (default: from --global-batch, else 2*pp)")
    llm.add_argument("--global-batch", type=int_arg("global_batch"), default=None, metavar="B",
                     help="sequences per iteration: microbatches = B / (dp * micro-batch)")
    llm.add_argument("--seq", type=int_arg("seq"), default=4096, help="sequence length")
    llm.add_argument("--micro-batch", type=int_arg("micro_batch"), default=1, help="sequences per microbatch")
    llm.add_argument("--schedule", default="1f1b", choices=["1f1b", "interleaved"],
                     help="pipeline schedule: 1F1B or Megatron's interleaved 1F1B")
    llm.add_argument("--recompute", default="none", choices=["none", "selective", "full"],
                     help="activation recomputation, Megatron's granularities: selective re-runs the core "
                     "attention in the backward, full re-runs every layer's forward (default none)")
    llm.add_argument("--vpp", type=int_arg("vpp"), default=None,
                     help="model chunks per stage for --schedule interleaved (default 2)")
    _add_layout_flags(llm, "what --recompute selective re-runs, Megatron-Core's recompute_modules: core_attn "
                      "(default), mla_up_proj (MLA's up-projections), moe_act (the routed experts' activation)",
                      "decoder layers of each of the pp*vpp model chunks in model order, e.g. 4,4,3 (Megatron's "
                      "pipeline_model_parallel_layout in decoder layers; default: an even split)")
    add_overlap_arguments(llm, True)
    llm.add_argument("--out", required=True, help="output folder: llm.<rank>.et and comm_groups.json")
    llm.add_argument("--overwrite", action="store_true", help="replace an existing workload in --out")
    llm.add_argument("--ranks", default=None, metavar="SPEC",
                     help="write only these ranks' traces, e.g. 0-63,128 (comm_groups.json covers the whole job)")
    llm.add_argument("--jobs", type=int_arg("jobs"), default=None, metavar="N",
                     help="processes writing the traces (default: the available cores)")
    add_quiet_argument(llm)
    llm.set_defaults(func=_cmd_llm)
    wl.set_defaults(func=lambda args: _missing_sub(wl))


def _cmd_run(args: argparse.Namespace) -> int:
    import numpy as np

    from netsim.results.io import check_output_dir

    if args.out:  # the path now; whether it already holds this run once the run id is known
        check_output_dir(args.out, flag="--out", what="a results directory")

    from netsim.topology.overrides import parse_sets
    from netsim.progress import wanted

    common = dict(stragglers=args.straggler, faults=args.faults, seed=args.seed, placement=args.placement,
                  engine=args.engine, out=args.out, overwrite=args.overwrite, overrides=parse_sets(args.sets),
                  progress=wanted(args.quiet), compute_efficiency=args.compute_efficiency,
                  sm_contention=args.sm_contention)
    common["routing"] = args.routing
    moe = moe_config(args)
    if args.llm is not None:
        from netsim.workload.llmrun import simulate_llm

        with generator_flags():
            res = simulate_llm(args.topology, args.llm, model=args.model, symmetry=args.symmetry,
                               ctrl_deps=not args.no_ctrl_deps, streams=args.streams, moe=moe, **common,
                               **_generator_kwargs(args))
        args.workload = f"llm:{args.llm}"
    else:
        res = simulate(args.topology, args.workload, args.comm_groups, args.model, not args.no_ctrl_deps,
                       args.streams, symmetry=args.symmetry, **common)
    fin, exp = res.finish * 1e6, res.exposed_comm * 1e6
    summary = {"ranks": int(fin.size), "iteration_us": float(fin.max()),
               "finish_us": {"min": float(fin.min()), "median": float(np.median(fin)), "max": float(fin.max())},
               "exposed_comm_us_mean": float(exp.mean()), "compute_us_mean": float(res.compute.mean() * 1e6),
               "ops": len(res.ops), "unknown_dep_refs": res.unknown_deps, "model": args.model,
               "placement": res.config.get("placement", args.placement), "engine": args.engine, "notes": res.notes}
    if args.out:
        from netsim.results.dataset import run_id_for
        summary.update(out=str(args.out), run_id=run_id_for(res.config))
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    f = summary["finish_us"]
    placed = f", placement {summary['placement']}" if summary["placement"] != "packed" else ""
    print(f"workload      {args.workload}  ({summary['ranks']} ranks, {summary['ops']:,} ops, model {args.model}"
          f"{placed})")
    print(f"iteration     {summary['iteration_us']:,.3f} us")
    print(f"rank finish   min {f['min']:,.3f}  median {f['median']:,.3f}  max {f['max']:,.3f} us")
    print(f"compute       {summary['compute_us_mean']:,.3f} us per rank (GPU)")
    print(f"exposed comm  {summary['exposed_comm_us_mean']:,.3f} us per rank (finish - GPU compute)")
    for note in res.notes[:5]:
        print(f"note          {note}")
    if args.out:
        print(f"results       {args.out}  (run_id {summary['run_id']}; netsim.open_results({str(args.out)!r}))")
    if res.unknown_deps:
        print(f"note          {res.unknown_deps} dependency reference(s) to ids not in the trace were ignored")
    return 0


def add_overlap_arguments(p, default) -> None:
    """Megatron's overlap switches (docs/workloads.md, "Overlap") and ``--sequence-parallel``; ``default``
    None leaves them to the generator (``netsim run --llm``), True sets its defaults (``netsim workload llm``)."""
    p.add_argument("--sequence-parallel", action="store_true", default=None if default is None else False,
                   help="Megatron --sequence-parallel: norms and residual adds on 1/tp of the tokens, each TP "
                   "all-reduce a reduce-scatter plus an all-gather (default off, as in Megatron)")
    p.add_argument("--overlap-grad-reduce", action="store_true", default=None if default is None else False,
                   help="reduce gradients in Megatron's buckets during the last microbatch's backward, on their "
                   "own stream (Megatron --overlap-grad-reduce; default, as in Megatron: one reduction per model "
                   "chunk after the whole backward). Exact on the flow model, but buckets that share links with "
                   "other traffic are simulated event by event: much slower at scale")
    p.add_argument("--tp-comm-overlap", action="store_true", default=None if default is None else False,
                   help="pipeline every TP block's all-reduce with its compute in 4 pieces (Megatron "
                   "--tp-comm-overlap, Transformer Engine userbuffers)")
    p.add_argument("--kernels", default=None if default is None else "fa3-te", metavar="PROFILE",
                   help="kernel profile of the software stack: fa3-te (default: FlashAttention and Transformer "
                   "Engine's fused kernels) or megatron-2021 (Megatron-LM 2021: unfused attention and element-wise "
                   "kernels, each GEMM timed by its shape); docs/workloads.md")
    p.add_argument("--comm-streams", default=None if default is None else "communicator",
                   choices=["communicator", "one"],
                   help="communicator (default): one comm stream per communicator and per send peer, as "
                   "PyTorch runs them; one: ASTRA-sim's single comm lane (every collective exposed)")


def _generator_kwargs(args: argparse.Namespace) -> dict:
    """The generator's keyword arguments given on the command line (``--llm``)."""
    import inspect

    from netsim.workload.generate.llm import generate_llm

    params = inspect.signature(generate_llm).parameters
    kw = {}
    for key in ("tp", "pp", "dp", "ep", "cp", "microbatches", "seq", "micro_batch", "vpp", "global_batch",
                "schedule", "recompute", "overlap_grad_reduce", "tp_comm_overlap", "comm_streams",
                "sequence_parallel", "kernels", "recompute_modules", "pipeline_layout"):
        value = getattr(args, key, None)
        if value is None:
            continue
        if key not in params:
            raise InputError(f"this generator has no --{key.replace('_', '-')}", source="--llm")
        kw[key] = value
    for key in ("tp", "pp", "dp"):
        if key not in kw:
            raise InputError(f"--llm needs --{key}", source="--llm")
    kw.setdefault("seq", 4096)  # as `netsim workload llm`; microbatches default in the generator
    return kw


def _missing_sub(parser) -> int:
    raise InputError("expected a subcommand (see --help)", source=parser.prog)


def _cmd_llm(args: argparse.Namespace) -> int:
    from netsim.results.io import check_output_dir, kind_of

    out = check_output_dir(args.out, flag="--out", what="a folder for the workload")
    if kind_of(out / "comm_groups.json") is not None and not args.overwrite:
        raise InputError("already holds a workload; pass --overwrite to replace it", source=str(out))
    with generator_flags():
        rep = _write_llm(out, args)
    world = args.tp * args.cp * args.pp * args.dp
    which = f"{rep.ranks} of {world} ranks" if rep.ranks != world else f"{world} ranks"
    print(f"wrote {which}: {rep.prefix}.<rank>.et and {out / 'comm_groups.json'}  ({rep.nodes:,} nodes, "
          f"{rep.files:,} distinct files, {rep.bytes / 1e6:,.1f} MB, {rep.wall_s:.1f} s on {rep.jobs} process"
          f"{'es' if rep.jobs > 1 else ''})")
    print(f"run:  netsim run --topology TOPOLOGY --workload {rep.prefix} --comm-groups {out / 'comm_groups.json'}")
    return 0


def _write_llm(out, args: argparse.Namespace):
    """``netsim workload llm``'s files (:func:`~netsim.workload.generate.writer.write_llm_files`)."""
    from netsim.progress import wanted
    from netsim.workload.generate.writer import write_llm_files

    return write_llm_files(out, args.llm_model, ranks=args.ranks, jobs=args.jobs, progress=wanted(args.quiet),
                           tp=args.tp, pp=args.pp, dp=args.dp, ep=args.ep, cp=args.cp,
                           microbatches=args.microbatches, global_batch=args.global_batch, seq=args.seq,
                           micro_batch=args.micro_batch, schedule=args.schedule, vpp=args.vpp,
                           recompute=args.recompute, overlap_grad_reduce=args.overlap_grad_reduce,
                           tp_comm_overlap=args.tp_comm_overlap, comm_streams=args.comm_streams,
                           sequence_parallel=args.sequence_parallel, kernels=args.kernels,
                           recompute_modules=args.recompute_modules, pipeline_layout=args.pipeline_layout)


#: Generator arguments that ``netsim run --llm`` and ``netsim workload llm`` take as flags.
GENERATOR_FLAGS = ("tp", "pp", "dp", "ep", "cp", "microbatches", "seq", "micro_batch", "vpp", "global_batch",
                   "schedule", "recompute", "ranks", "overlap_grad_reduce", "tp_comm_overlap", "comm_streams",
                   "sequence_parallel", "kernels", "recompute_modules", "pipeline_layout")


@contextmanager
def generator_flags():
    """The generator names its arguments (``argument: seq``); on the command line they are flags (``--seq``)."""
    try:
        yield
    except InputError as exc:
        if exc.source == "argument" and exc.field in GENERATOR_FLAGS:
            raise InputError(exc.message, source="--" + exc.field.replace("_", "-")) from None
        raise


def _cmd_inspect(args: argparse.Namespace) -> int:
    from netsim.chakra.inspect import node_table, summarize_trace

    from netsim.results.io import check_output_file, write_parquet_atomic

    if args.parquet:
        check_output_file(args.parquet, overwrite=args.overwrite, flag="--parquet")
    summary = summarize_trace(args.path)
    if args.parquet:
        write_parquet_atomic(args.parquet, node_table(args.path))
    if args.json:
        coll = [{"comm_type": k[0], "comm_size": k[1], "pg_name": k[2], "count": v}
                for k, v in summary["collectives"].items()]
        print(json.dumps({**summary, "collectives": coll}, indent=2, default=str))
    else:
        print(format_summary(summary))
    return 0


def format_summary(s: dict) -> str:
    """Readable lines for :func:`netsim.chakra.inspect.summarize_trace`."""
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
    pgs = s.get("process_groups") or {}
    if pgs.get("error"):
        lines.append(f"proc. groups  unusable: {pgs['error']}")
    elif pgs.get("count"):
        shown = [f"{g['pg_name']}{' ' + g['pg_desc'] if g['pg_desc'] else ''} ({g['size']} ranks)"
                 for g in pgs["groups"][:8]]
        lines.append(f"proc. groups  {pgs['count']}: " + ", ".join(shown) + (", ..." if pgs["count"] > 8 else ""))
    lines.append("collectives   " + ("none" if not s["collectives"] else ""))
    for (ctype, size, pg), count in s["collectives"].items():
        size_txt = f"{size:,} B" if size is not None else "?"
        lines.append(f"  {ctype:<16} {size_txt:>16}  group {pg if pg not in (None, '') else 'world'}  x{count}")
    return "\n".join(lines)


#: ``netsim run`` flags of this module -> MoERunConfig field.
MOE_FLAGS = {"moe_algo": "algo", "skew": "skew", "expert_map": "expert_map", "placement_experts": "placement_experts",
         "redundant_experts": "redundant_experts", "max_nodes": "max_nodes", "moe_chunks": "chunks",
         "moe_seed": "seed"}


def _add_moe_flags(run) -> None:
    """The MoE flags of ``netsim run --llm`` (all default to None: not given)."""
    g = run.add_argument_group("MoE layers (with --llm and a MoE model; as `netsim bench --op moe_dispatch`)")
    g.add_argument("--moe-algo", default=None, choices=MOE_ALGOS,
                   help="plan expert-parallel all-to-alls as MoE dispatch/combine: auto (node_limited on whole "
                        "nodes, else direct), direct, hierarchical, node_limited or low_latency")
    g.add_argument("--skew", default=None, metavar="uniform|zipf:A", help="expert popularity (default uniform)")
    g.add_argument("--expert-map", default=None, metavar="FILE",
                   help="(EP ranks x tokens per rank) rows of top-k expert ids, .npy or .csv")
    g.add_argument("--placement-experts", default=None, metavar="SPEC",
                   help="contiguous (default), round_robin, or a file of one EP rank per expert")
    g.add_argument("--redundant-experts", type=int_arg("redundant_experts"), default=None, help="EPLB-style replicas per EP group")
    g.add_argument("--max-nodes", type=int_arg("max_nodes"), default=None,
                   help="node-limited gate: nodes a token may reach (default 4, DeepSeek-V3; 0 = no limit)")
    g.add_argument("--moe-chunks", type=int_arg("moe_chunks"), default=None, help="node_limited pipeline depth (default 4)")
    g.add_argument("--moe-seed", type=int_arg("moe_seed"), default=None, help="routing seed (default 0)")


def moe_config(args) -> MoERunConfig | None:
    """A :class:`MoERunConfig` when any MoE flag was given, else None (uniform all-to-alls as before)."""
    given = {field: getattr(args, flag) for flag, field in MOE_FLAGS.items() if getattr(args, flag, None) is not None}
    if not given:
        return None
    if getattr(args, "llm", None) is None:
        raise InputError("MoE flags apply to generated workloads: give --llm MODEL", source="--moe-algo")
    return MoERunConfig(**given)
