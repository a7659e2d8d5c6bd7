"""``netsim bench --op moe_dispatch|moe_combine``: one MoE layer's expert-parallel all-to-all.

A MoE what-if as users ask it: ``--tokens T`` per rank (DeepEP's ``num_tokens``), ``--hidden H``,
``--topk K`` of ``--experts E``, routed uniformly, with ``--skew zipf:A`` or from
``--expert-map FILE``; experts placed ``--placement-experts contiguous|round_robin|FILE``, with
``--redundant-experts N`` EPLB-style replicas; ``--algo direct|hierarchical|node_limited``
(``auto``: node_limited on whole nodes, else direct) or ``--algo direct --mode low_latency``.
Schedules and byte counting: :mod:`netsim.collectives.moe`.

Defaults follow DeepSeek-V3 training (arXiv:2412.19437 §3.3.2: FP8 dispatch, BF16 combine;
§2.1.2: 8 of 256 routed experts, each token on at most M = 4 nodes; hidden 7168, Table 1 / its
config) and DeepEP's benchmark setting (deepseek-ai/DeepEP README: 4096 tokens per batch,
7168 hidden, top-4 groups, top-8 experts, FP8 dispatching and BF16 combining).

>>> from netsim.topology.spec import load_topology  # doctest: +SKIP
>>> res = run_moe(load_topology("topologies/h100-superpod-1su.yaml"),
...               MoEConfig("moe_dispatch", gpus=64, tokens=512))  # doctest: +SKIP
>>> res.summary["time_us"]  # doctest: +SKIP
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import simpy

from netsim.collectives import moe
from netsim.collectives.moe_inputs import load_expert_map, load_ints, moe_local_size  # noqa: F401 (re-exported)
from netsim.collectives.executor import ENGINES, run_collective
from netsim.errors import InputError
from netsim.limits import check_int
from netsim.topology.model import Topology, link_tier  # noqa: F401 (link_tier re-exported)

OPS = ("moe_dispatch", "moe_combine")
ALGOS = ("auto", "direct", "hierarchical", "node_limited")
MODES = ("normal", "low_latency")
#: How the low-latency kernels reach GPUs of their own node (DeepEP's ``Buffer(...,
#: allow_nvlink_for_low_latency_mode=)``): ``nvlink``, DeepEP's default since its PR #173
#: (2025-06-05; ``deep_ep/buffers/legacy.py:39``, ``NVSHMEM_DISABLE_P2P=0`` at :108), or ``rdma``:
#: through the NIC and the fabric, as V1 first shipped them ("pure RDMA": ``deep_ep/buffer.py:73``
#: at ebfe47e sets ``NVSHMEM_DISABLE_P2P=1``).
LL_TRANSPORTS = ("nvlink", "rdma")
#: Bytes per hidden element: FP8 dispatch, BF16 combine (DeepSeek-V3 §3.3.2; DeepEP README).
DTYPE_BYTES = {"moe_dispatch": 1, "moe_combine": 2}
#: DeepSeek-V3's node limit: each token is sent to at most M = 4 nodes (arXiv:2412.19437 §2.1.2).
DEFAULT_MAX_NODES = 4


@dataclass(frozen=True)
class MoEConfig:
    """One MoE bench run.

    op: moe_dispatch or moe_combine. tokens: tokens per rank. hidden: hidden size. topk: experts
    per token. experts: routed experts. dtype_bytes: bytes per hidden element (None: 1 for
    dispatch, FP8 with DeepEP's scales; 2 for combine). algo: direct, hierarchical,
    node_limited or auto. mode: normal or low_latency (direct, one copy per expert). skew:
    uniform or zipf:A. expert_map: file of tokens x topk expert ids. placement_experts:
    contiguous, round_robin or a file of one rank per expert. redundant_experts: EPLB replicas.
    max_nodes: node-limited gate (0: none). chunks: node_limited pipeline depth. gpus, model,
    seed, placement, engine, routing: as for every bench op. ll_transport: how low_latency reaches
    GPUs of its own node (:data:`LL_TRANSPORTS`).
    """

    op: str
    tokens: int = 4096
    hidden: int = 7168
    topk: int = 8
    experts: int = 256
    dtype_bytes: float | None = None
    algo: str = "auto"
    mode: str = "normal"
    skew: str | None = None
    expert_map: str | None = None
    placement_experts: str = "contiguous"
    redundant_experts: int = 0
    max_nodes: int = DEFAULT_MAX_NODES
    chunks: int = 4
    gpus: int | None = None
    model: str = "flow"
    seed: int = 0
    placement: str = "packed"
    engine: str = "auto"
    routing: str | None = None
    ll_transport: str = "nvlink"


@dataclass(frozen=True, eq=False)
class MoEResult:
    """What one run gives: the summary row, per-rank / per-expert / per-link tables."""

    config: MoEConfig
    summary: dict
    ranks: object  # pandas DataFrame
    experts: object
    links: object


def validated(cfg: MoEConfig, topo: Topology) -> MoEConfig:
    """``cfg`` checked against ``topo`` (one-line :class:`InputError` naming the flag)."""
    from netsim.network.models import MODELS
    from netsim.topology.placement import place

    if cfg.op not in OPS:
        raise InputError(f"expected one of {', '.join(OPS)}, got {cfg.op!r}", source="--op")
    if cfg.model not in MODELS:
        raise InputError(f"expected one of {', '.join(MODELS)}, got {cfg.model!r}", source="--model")
    if cfg.engine not in ENGINES:
        raise InputError(f"expected one of {', '.join(ENGINES)}, got {cfg.engine!r}", source="--engine")
    if cfg.algo not in ALGOS:
        raise InputError(f"expected one of {', '.join(ALGOS)} for {cfg.op}, got {cfg.algo!r}", source="--algo")
    if cfg.mode not in MODES:
        raise InputError(f"expected one of {', '.join(MODES)}, got {cfg.mode!r}", source="--mode")
    if cfg.mode == "low_latency" and cfg.algo not in ("auto", "direct"):
        raise InputError(f"low_latency mode sends directly (no NVLink forwarding); use --algo direct, "
                         f"not {cfg.algo}", source="--mode")
    if cfg.ll_transport not in LL_TRANSPORTS:
        raise InputError(f"expected one of {', '.join(LL_TRANSPORTS)}, got {cfg.ll_transport!r}",
                         source="--ll-transport")
    if cfg.ll_transport != "nvlink":
        if cfg.mode != "low_latency":
            raise InputError("applies to --mode low_latency (the normal kernels forward over NVLink)",
                             source="--ll-transport")
        _ll_topology(topo, cfg)
    for flag, v in (("--tokens", cfg.tokens), ("--hidden", cfg.hidden), ("--topk", cfg.topk),
                    ("--experts", cfg.experts), ("--redundant-experts", cfg.redundant_experts),
                    ("--max-nodes", cfg.max_nodes), ("--chunks", cfg.chunks), ("--seed", cfg.seed),
                    ("--gpus", 2 if cfg.gpus is None else cfg.gpus)):
        check_int(v, flag, flag)
    n = cfg.gpus if cfg.gpus is not None else topo.n_gpus
    if cfg.gpus is None and cfg.placement not in (None, "packed"):
        n = place(cfg.placement, None, topo.n_gpus).size
    if n < 2 or n > topo.n_gpus:
        raise InputError(f"expected 2 <= GPUs <= {topo.n_gpus} (the topology's GPU count), got {n}", source="--gpus")
    place(cfg.placement, n, topo.n_gpus)
    moe.check_memory(n, cfg.tokens, cfg.topk, source="--tokens")
    if cfg.topk > cfg.experts:
        raise InputError(f"expected --topk <= --experts ({cfg.experts}), got {cfg.topk}", source="--topk")
    if cfg.experts % n:
        raise InputError(f"expected a number of experts divisible by the {n} ranks (expert parallelism "
                         f"places E/n experts on every rank), got {cfg.experts}", source="--experts")
    if cfg.dtype_bytes is not None and not (isinstance(cfg.dtype_bytes, (int, float)) and
                                            math.isfinite(cfg.dtype_bytes) and cfg.dtype_bytes > 0):
        raise InputError(f"expected a positive number of bytes per element, got {cfg.dtype_bytes!r}",
                         source="--dtype-bytes")
    if cfg.skew and cfg.expert_map:
        raise InputError("give --skew or --expert-map, not both", source="--skew")
    if cfg.skew:
        from netsim.collectives.skew import parse_skew
        parse_skew(cfg.skew)
    if cfg.routing is not None:
        from netsim.topology.policy import with_routing
        with_routing(topo, cfg.routing)
    return replace(cfg, gpus=n)


def _ll_topology(topo: Topology, cfg: MoEConfig) -> Topology:
    """``topo`` as ``cfg``'s kernels see it: with ``--ll-transport rdma``, GPUs of one node reach
    each other through their NICs and the fabric."""
    if cfg.mode != "low_latency" or cfg.ll_transport == "nvlink":
        return topo
    from netsim.topology.policy import with_intra_node
    return with_intra_node(topo, "nic", source="--ll-transport")


def build_layout(topo: Topology, cfg: MoEConfig) -> moe.MoELayout:
    """Route ``cfg``'s batch and place its experts (token size: the op's)."""
    from netsim.topology.placement import place

    n = cfg.gpus
    g = moe_local_size(topo, place(cfg.placement, n, topo.n_gpus), "direct")[0]
    if isinstance(cfg.placement_experts, str) and cfg.placement_experts in ("contiguous", "round_robin"):
        spec = cfg.placement_experts
    else:
        spec = load_ints(cfg.placement_experts, "--placement-experts").ravel()
        if spec.size and (spec.min() < 0 or spec.max() >= n):
            raise InputError(f"expected ranks in [0, {n}), got {int(spec.min())}..{int(spec.max())}",
                             source=str(cfg.placement_experts))
    expert_rank = moe.place_experts(cfg.experts, n, spec)
    choices = load_expert_map(cfg.expert_map, n * cfg.tokens, cfg.topk, cfg.experts) if cfg.expert_map else None
    lay = moe.layout(n, cfg.tokens, cfg.experts, cfg.topk, popularity=cfg.skew, seed=cfg.seed,
                     expert_rank=expert_rank, local_size=g if n % g == 0 else 1,
                     max_nodes=cfg.max_nodes or None, choices=choices, redundant=cfg.redundant_experts)
    return lay.with_bytes(token_size(cfg))


def token_size(cfg: MoEConfig) -> float:
    """Bytes of one token copy for ``cfg`` (DeepEP's counting)."""
    dt = cfg.dtype_bytes if cfg.dtype_bytes is not None else DTYPE_BYTES[cfg.op]
    return moe.token_bytes(cfg.hidden, dt, low_latency=cfg.mode == "low_latency")


def run_moe(topo: Topology, cfg: MoEConfig, lay: moe.MoELayout | None = None) -> MoEResult:
    """Simulate one dispatch or combine; ``lay`` reuses a routed batch (its token size is reset)."""
    import pandas as pd

    from netsim.network.models import network_class
    from netsim.results.record import link_frame
    from netsim.topology.placement import place
    from netsim.topology.policy import with_routing

    cfg = validated(cfg, topo)
    if cfg.routing is not None:
        topo = with_routing(topo, cfg.routing)
    topo = _ll_topology(topo, cfg)
    ranks = place(cfg.placement, cfg.gpus, topo.n_gpus)
    g, algo = moe_local_size(topo, ranks, cfg.algo)
    lay = build_layout(topo, cfg) if lay is None else lay.with_bytes(token_size(cfg))
    sched_algo = "low_latency" if cfg.mode == "low_latency" else algo
    sched = nccl_timed(topo, ranks, lay, cfg.op, sched_algo, g, cfg.chunks)
    net = network_class(cfg.model, cfg.engine)(simpy.Environment(), topo)
    res = run_collective(net, sched, ranks, engine=cfg.engine)
    t = max(res.time, 1e-12)
    links = link_frame(topo, net, t)
    links["tier"] = link_tier(topo)
    drain = np.where(topo.link_bw > 0, links["bytes"].to_numpy() / topo.link_bw, 0.0)
    hot = int(np.argmax(drain))
    db = moe.deepep_bytes(lay, g, low_latency=cfg.mode == "low_latency")
    r = lay.routing
    tb = r.bytes_per_token
    e_tok = lay.expert_tokens()
    rank_tok = np.bincount(r.expert_rank, weights=e_tok, minlength=cfg.gpus)
    ranks_df = pd.DataFrame({
        "rank": np.arange(cfg.gpus, dtype=np.int32), "gpu": ranks.astype(np.int32),
        "host": (ranks // max(1, topo.gpus_per_node)).astype(np.int32), "finish_ns": (res.finish - res.start.min()) * 1e9,
        "send_bytes": sched.bytes_sent(), "recv_bytes": sched.bytes_received(),
        "rdma_bytes": db["rdma"], "nvl_bytes": db["nvl"], "tokens_in": db["nvl"] / tb if tb else 0.0,
        "expert_tokens": rank_tok})
    n_log = lay.n_logical
    phys = np.arange(r.n_experts)
    experts_df = pd.DataFrame({
        "expert": phys.astype(np.int32), "logical_expert": lay.logical.astype(np.int32),
        "replica": (phys >= n_log).astype(np.int32), "rank": r.expert_rank.astype(np.int32),
        "host": (ranks[r.expert_rank] // max(1, topo.gpus_per_node)).astype(np.int32),
        "tokens": e_tok.astype(np.int64), "bytes": e_tok * tb})
    lt = lay.logical_tokens()
    hot_recv = int(np.argmax(ranks_df["recv_bytes"].to_numpy()))
    summary = {
        "op": cfg.op, "algorithm": sched_algo if cfg.ll_transport == "nvlink" else f"{sched_algo}/rdma",
        "gpus": cfg.gpus, "model": cfg.model,
        "tokens": cfg.tokens, "hidden": cfg.hidden, "topk": cfg.topk, "experts": cfg.experts,
        "token_bytes": tb, "time_us": res.time * 1e6,
        "rdma_bytes": float(db["rdma"].mean()), "nvl_bytes": float(db["nvl"].mean()),
        "rdma_GBps": float(db["rdma"].mean()) / t / 1e9, "nvl_GBps": float(db["nvl"].mean()) / t / 1e9,
        "hot_expert": int(np.argmax(lt)), "hot_expert_tokens": float(lt.max()),
        "hot_expert_x_mean": float(lt.max() / lt.mean()) if lt.mean() > 0 else float("nan"),
        "hot_rank": hot_recv, "hot_rank_recv_bytes": float(ranks_df["recv_bytes"].iloc[hot_recv]),
        "hot_link": str(links["src"].iloc[hot]) + "->" + str(links["dst"].iloc[hot]),
        "hot_link_bytes": float(links["bytes"].iloc[hot]), "hot_link_util": float(drain[hot] / t),
        "bound": str(links["tier"].iloc[hot]), "bound_time_us": float(drain[hot] * 1e6),
        "max_nodes_per_token": int(_nodes_per_token(lay, g).max()) if r.choices.size else 0,
    }
    return MoEResult(cfg, summary, ranks_df, experts_df, links)


def nccl_timed(topo: Topology, ranks: np.ndarray, lay: moe.MoELayout, op: str, algo: str, g: int, chunks: int):
    """The schedule of ``op`` with the timing of what runs it: ``direct`` and ``hierarchical`` are
    NCCL all-to-alls (NCCL's peers per step, protocol, latency and per-channel network caps,
    :func:`netsim.collectives.plan.shape_p2p`); ``node_limited`` and ``low_latency`` are DeepEP's
    kernels (their own pipeline; every token copy put at once), timed by the network alone."""
    from netsim.collectives import nccl, p2p
    from netsim.collectives.plan import shape_p2p
    from netsim.collectives.skew import pair_bytes

    build = moe.dispatch_schedule if op == "moe_dispatch" else moe.combine_schedule
    if algo not in ("direct", "hierarchical"):
        return build(lay, algo, local_size=g, chunks=chunks)
    info = nccl.CommInfo.from_topology(topo, ranks)
    pair = pair_bytes(lay.routing)
    off = pair[~np.eye(pair.shape[0], dtype=bool)]
    peer = float(off[off > 0].mean()) if (off > 0).any() else 0.0
    setup = p2p.P2PSetup.from_info(info)
    sched = build(lay, algo, local_size=g, chunks=chunks, window=setup.window(setup.parts(peer)))
    return shape_p2p(sched, topo, ranks, info, algo, peer)[0]


def _nodes_per_token(lay: moe.MoELayout, g: int) -> np.ndarray:
    d = np.sort(lay.routing.expert_rank[lay.routing.choices] // g, axis=1)
    return 1 + (np.diff(d, axis=1) != 0).sum(axis=1)


# ------------------------------------------------------------------ output
_COLS = (("op", 12, "{}"), ("algo", 12, "{}"), ("time_us", 9, "{:.1f}"), ("rdma_MB", 8, "{:.2f}"),
         ("rdma_GBps", 9, "{:.2f}"), ("nvl_MB", 8, "{:.2f}"), ("nvl_GBps", 8, "{:.2f}"),
         ("hot_exp", 7, "{:.2f}x"), ("hot_link", 8, "{:.0%}"), ("bound", 9, "{}"))


def format_table(results: list[MoEResult], topo_name: str) -> str:
    """The MoE table: time, DeepEP's bytes and algbw, the hottest expert and link, the bound."""
    c = results[0].config
    s0 = results[0].summary
    routing = "expert map" if c.expert_map else (c.skew or "uniform")
    lines = [f"# netsim bench: {topo_name}, {c.gpus} GPUs, model {c.model}, MoE layer (simulated)",
             f"# tokens/rank {c.tokens}, hidden {c.hidden}, top-{c.topk} of {c.experts} experts "
             f"({c.experts // c.gpus}/rank, placement {c.placement_experts}"
             + (f", +{c.redundant_experts} redundant" if c.redundant_experts else "") + f"), routing {routing}"
             + (f", seed {c.seed}" if not c.expert_map else "")
             + (f", gate <= {c.max_nodes} nodes/token" if c.max_nodes and not c.expert_map else "")
             + f" (max {s0['max_nodes_per_token']})",
             "# bytes per rank as DeepEP counts them (rdma: tokens x destination nodes; nvl: tokens x destination "
             "ranks); GBps = bytes / time; hot_exp: hottest expert's tokens / mean; hot_link: its busy share",
             "#", "#" + "  ".join(f"{name:>{w}}" for name, w, _ in _COLS)]
    for r in results:
        s = r.summary
        vals = (s["op"], s["algorithm"], s["time_us"], s["rdma_bytes"] / 1e6, s["rdma_GBps"], s["nvl_bytes"] / 1e6,
                s["nvl_GBps"], s["hot_expert_x_mean"], s["hot_link_util"], s["bound"])
        lines.append(" " + "  ".join(f"{fmt.format(v):>{w}}" for (_, w, fmt), v in zip(_COLS, vals)))
    for r in results:
        s = r.summary
        lines.append(f"# {s['op']}: {s['token_bytes']:.0f} B/token; hottest expert {s['hot_expert']} "
                     f"({s['hot_expert_tokens']:.0f} tokens); hottest receiver rank {s['hot_rank']} "
                     f"({s['hot_rank_recv_bytes'] / 1e6:.1f} MB); bound by {s['bound']} link {s['hot_link']} "
                     f"({s['hot_link_bytes'] / 1e6:.1f} MB, alone {s['bound_time_us']:.1f} us)")
    return "\n".join(lines) + "\n"


def config_record(cfg: MoEConfig, topology: str, sets: dict | None = None) -> dict:
    """The run config of ``cfg`` on ``topology`` as a results dataset records it (``run_id`` hashes it)."""
    return {"command": "bench", "topology": str(topology), **asdict(cfg), **({"set": sets} if sets else {})}


def run_config(r: MoEResult, topology: str, sets: dict | None = None) -> dict:
    """The run's config as the dataset records it (``run_id`` hashes it); ``sets``: the ``--set``
    items applied to the topology (part of the run's identity, as for the other bench ops)."""
    return config_record(r.config, topology, sets)


def write_dataset(out_dir, r: MoEResult, topology: str, wall_time_s: float, *, overwrite: bool = False,
                  sets: dict | None = None, topo=None) -> str:
    """``--out DIR``: collectives (one row), links, ranks, experts and runs tables (``topo``: its
    link efficiencies go in the runs table)."""
    import pandas as pd

    from netsim.results import dataset

    cfg = run_config(r, topology, sets)
    run_id = dataset.run_id_for(cfg)
    s = r.summary
    coll = pd.DataFrame([{"seq": 0, "op": s["op"], "algorithm": s["algorithm"], "group": "world",
                          "group_size": s["gpus"], "bytes": s["rdma_bytes"], "start_ns": 0.0, "last_start_ns": 0.0,
                          "end_ns": s["time_us"] * 1e3, "algbw_GBps": s["rdma_GBps"], "busbw_GBps": float("nan"),
                          "nvl_bytes": s["nvl_bytes"], "nvl_GBps": s["nvl_GBps"], "bound": s["bound"]}])
    extra = {k: v for k, v in s.items() if k not in ("op", "algorithm", "gpus", "model", "tokens", "hidden",
                                                      "topk", "experts")}
    runs = dataset.runs_row(cfg, wall_time_s=wall_time_s, n_ranks=s["gpus"], **extra, **dataset.topology_columns(topo))
    tables = {"collectives": coll, "links": r.links.assign(seq=0), "ranks": r.ranks.assign(seq=0),
              "experts": r.experts.assign(seq=0), "runs": runs}
    dataset.write_run(Path(out_dir), run_id, tables, cfg, overwrite=overwrite)
    return run_id
