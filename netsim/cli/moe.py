"""The MoE flags of ``netsim bench`` and the command that runs them (``--op moe_dispatch|moe_combine``).

The simulation and its outputs are :mod:`netsim.perftests.moe`'s; this module reads the flags,
refuses the bench flags an MoE layer does not use, and prints or writes the results.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from netsim.cli.options import float_arg, int_arg
from netsim.errors import InputError
from netsim.perftests.moe import (DEFAULT_MAX_NODES, LL_TRANSPORTS, MODES, MoEConfig, config_record, format_table,
                              run_config, run_moe, validated, write_dataset)


def _write_json(path: str, doc: dict, overwrite: bool) -> None:
    from netsim.results.io import atomic_file

    target = Path(path)
    if target.exists() and not overwrite:
        raise InputError("exists; pass --overwrite to replace it", source=str(path))
    with atomic_file(target, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2, default=float)
        fh.write("\n")


# --------------------------------------------------------------------- CLI
def add_arguments(p: argparse.ArgumentParser) -> None:
    """The MoE flags of ``netsim bench`` (used with ``--op moe_dispatch|moe_combine``)."""
    g = p.add_argument_group("MoE layer (--op moe_dispatch|moe_combine)")
    g.add_argument("--tokens", type=int_arg("tokens"), default=4096, help="tokens per rank (default 4096, DeepEP's benchmark)")
    g.add_argument("--hidden", type=int_arg("hidden"), default=7168, help="hidden size (default 7168, DeepSeek-V3)")
    g.add_argument("--topk", type=int_arg("topk"), default=8, help="experts per token (default 8)")
    g.add_argument("--experts", type=int_arg("experts"), default=256, help="routed experts (default 256)")
    g.add_argument("--dtype-bytes", type=float_arg(0, 64, lo_open=True), default=None,
                   help="bytes per hidden element (default: 1 = FP8 with DeepEP's scales for dispatch, 2 = BF16 "
                        "for combine)")
    g.add_argument("--expert-map", default=None, metavar="FILE",
                   help="tokens x topk expert ids (.npy or .csv; rows = GPUs x --tokens) instead of sampled routing")
    g.add_argument("--placement-experts", default="contiguous", metavar="SPEC",
                   help="contiguous (default), round_robin, or a file of one rank per expert")
    g.add_argument("--redundant-experts", type=int_arg("redundant_experts"), default=0, help="EPLB-style replicas of the hottest experts")
    g.add_argument("--max-nodes", type=int_arg("max_nodes"), default=DEFAULT_MAX_NODES,
                   help="node-limited gate: nodes a token may reach (default 4, DeepSeek-V3; 0 = no limit)")
    g.add_argument("--mode", default="normal", choices=MODES,
                   help="normal (default) or low_latency (with --algo direct: one copy per expert, no forwarding)")
    g.add_argument("--chunks", type=int_arg("chunks"), default=4, help="node_limited pipeline depth (default 4)")
    g.add_argument("--ll-transport", default="nvlink", choices=LL_TRANSPORTS,
                   help="low_latency to GPUs of the same node: nvlink (default; DeepEP's "
                        "allow_nvlink_for_low_latency_mode=True) or rdma (through the NIC and the fabric, "
                        "'pure RDMA' as DeepEP V1 first shipped)")


def config_from_args(args: argparse.Namespace) -> MoEConfig:
    """A :class:`MoEConfig` from parsed ``netsim bench`` flags."""
    return MoEConfig(args.op, args.tokens, args.hidden, args.topk, args.experts, args.dtype_bytes, args.algo,
                     args.mode, args.skew, args.expert_map, args.placement_experts, args.redundant_experts,
                     args.max_nodes, args.chunks, args.gpus, args.model, args.seed, args.placement,
                     args.engine, args.routing, args.ll_transport)


#: ``netsim bench`` flags of the NCCL collectives, with their defaults: an MoE layer has no message-size
#: sweep (its size is --tokens x --hidden), no data type and no NCCL protocol or channel count (DeepEP's
#: kernels and NCCL's all-to-all pick theirs), so a value other than the default is refused, not ignored.
NCCL_ONLY_FLAGS = (("minbytes", "-b", 8), ("maxbytes", "-e", None), ("stepfactor", "-f", None),
                   ("stepbytes", "-i", None), ("datatype", "-d", "float"), ("proto", "--proto", None),
                   ("channels", "--channels", None))


def check_unused_flags(args: argparse.Namespace) -> None:
    """Refuse a bench flag MoE ops do not use (:data:`NCCL_ONLY_FLAGS`) given a non-default value."""
    for dest, flag, default in NCCL_ONLY_FLAGS:
        value = getattr(args, dest, default)
        if value != default:
            raise InputError(f"applies to the NCCL collectives, not to {args.op} (its bytes are --tokens x "
                             f"--hidden; its kernels choose their own channels and protocol); got {value!r}",
                             source=flag)


def cmd(args: argparse.Namespace) -> int:
    """``netsim bench --op moe_dispatch|moe_combine``."""
    import time

    from netsim.topology.overrides import load_topology_set, parse_sets
    from netsim.results import dataset

    if args.skew_matrix:
        raise InputError("--skew-matrix applies to alltoall; MoE ops take --skew or --expert-map",
                         source="--skew-matrix")
    check_unused_flags(args)
    to_dataset = bool(args.out) and not str(args.out).endswith(".parquet")
    sets = parse_sets(args.sets)
    topo = load_topology_set(args.topology, args.sets)
    cfg = validated(config_from_args(args), topo)
    if to_dataset:
        dataset.check_writable(args.out, dataset.run_id_for(config_record(cfg, args.topology, sets)), args.overwrite)
    elif args.out and Path(args.out).exists() and not args.overwrite:
        raise InputError("exists; pass --overwrite to replace it", source=str(args.out))
    t0 = time.perf_counter()
    res = run_moe(topo, cfg)
    wall = time.perf_counter() - t0
    print(format_table([res], topo.name), end="")
    if args.json_path:
        _write_json(args.json_path, {"config": run_config(res, args.topology, sets), "results": [res.summary]},
                    args.overwrite)
    if to_dataset:
        write_dataset(args.out, res, args.topology, wall, overwrite=args.overwrite, sets=sets, topo=topo)
    elif args.out:
        import pandas as pd

        from netsim.results.io import write_parquet_atomic
        write_parquet_atomic(args.out, pd.DataFrame([res.summary]))
    return 0
