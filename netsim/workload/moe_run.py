"""MoE layers of ``netsim run --llm`` with the dispatch and combine of ``netsim bench --op moe_*``.

The LLM generator (:mod:`netsim.workload.generate.layers`) emits every MoE layer's
expert-parallel communication as two ALL_TO_ALL nodes per microbatch and pass, named
``...a2a_dispatch`` then ``...a2a_combine``, forward and backward (backward, the first carries
the output gradients to the experts, the dispatch's pattern, the second the input gradients
back, the combine's).  By default the runner plans them as uniform all-to-alls
(:class:`~netsim.workload.collectives.NcclSchedules`).  With a :class:`MoERunConfig`,
:class:`MoESchedules` plans them as :mod:`netsim.collectives.moe` does for the bench: tokens
routed seeded top-k (uniform, ``zipf:A`` or an expert map), experts placed ``contiguous``,
``round_robin`` or from a file, EPLB-style redundant experts, and the ``direct``,
``hierarchical``, ``node_limited`` or ``low_latency`` algorithms (combine reduces inside the node
before crossing the fabric, as DeepEP does).  Every other collective keeps the default plan.

One routed batch stands for every MoE layer, microbatch and pass of an EP group: the gate's
popularity (Zipf over expert ids) is what makes an expert hot, and it is the same in every layer.
Token copies are ``hidden * dtype_bytes`` bytes (DeepEP's counting,
:func:`netsim.collectives.moe.token_bytes`; FP8 adds its scales); the default dtype is the
generator's, so the dispatch moves at most the Chakra node's ``comm_size`` (one copy per token and
destination rank, not per expert).  Schedules are cached per (kind, size, group shape): EP groups
laid out alike on the topology share one, as the default plans do.

>>> cfg = MoERunConfig(algo="direct", skew="zipf:1.2")
>>> cfg.config()["skew"]
'zipf:1.2'
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import numpy as np

from netsim.errors import InputError
from netsim.inputs import number
from netsim.limits import check_int
from netsim.chakra.schema import CommType

__all__ = ["MoERunConfig", "MoESchedules", "moe_kind"]

#: SMs DeepEP's normal (high-throughput) dispatch and combine kernels run on: ``Buffer.num_sms = 20``
#: (deepseek-ai/DeepEP ``deep_ep/buffers/legacy.py`` line 31 at dd758ca).  Its low-latency kernels
#: hold none: with the receive hook the traffic runs "without costing any GPU SMs" (``docs/legacy.md``
#: line 288 there).
DEEPEP_NORMAL_SMS = 20
#: Node-name suffixes of the generator's MoE all-to-alls (netsim.workload.generate.layers).
KINDS = {"a2a_dispatch": "dispatch", "a2a_combine": "combine"}
#: ``--moe-algo`` values: the bench's (netsim.perftests.moe.ALGOS) plus DeepEP's low-latency kernels.
ALGOS = ("auto", "direct", "hierarchical", "node_limited", "low_latency")


def moe_kind(name: str) -> str | None:
    """``"dispatch"``, ``"combine"`` or None from a generated node's name.

    >>> moe_kind("mb0.bwd.L3.a2a_combine"), moe_kind("mb0.fwd.L3.attn_allreduce")
    ('combine', None)
    """
    return KINDS.get(name.rpartition(".")[2])


@dataclass(frozen=True)
class MoERunConfig:
    """How ``netsim run --llm`` runs MoE all-to-alls (flags of ``netsim bench --op moe_*``).

    algo: auto (node_limited on whole nodes, else direct), direct, hierarchical, node_limited or
    low_latency. skew: uniform or zipf:A. expert_map: .npy/.csv of (EP ranks x tokens) rows of
    top-k expert ids. placement_experts: contiguous, round_robin or a file of one EP rank per
    expert. redundant_experts: EPLB replicas per EP group. max_nodes: node-limited gate (0: none;
    DeepSeek-V3's 4 by default). chunks: node_limited pipeline depth. seed: routing seed.
    dispatch_dtype_bytes / combine_dtype_bytes: bytes per hidden element (None: the generator's).
    """

    algo: str = "auto"
    skew: str | None = None
    expert_map: str | None = None
    placement_experts: str = "contiguous"
    redundant_experts: int = 0
    max_nodes: int = 4
    chunks: int = 4
    seed: int = 0
    dispatch_dtype_bytes: float | None = None
    combine_dtype_bytes: float | None = None

    def __post_init__(self) -> None:
        if self.algo not in ALGOS:
            raise InputError(f"expected one of {', '.join(ALGOS)}, got {self.algo!r}", source="--moe-algo")
        if self.skew is not None and self.expert_map is not None:
            raise InputError("give --skew or --expert-map, not both", source="--skew")
        if self.skew is not None:
            from netsim.collectives.skew import parse_skew
            parse_skew(self.skew)
        for flag, v in (("--redundant-experts", self.redundant_experts), ("--max-nodes", self.max_nodes),
                        ("--moe-chunks", self.chunks), ("--moe-seed", self.seed)):
            check_int(v, flag, flag)
        for flag, v in (("dispatch_dtype_bytes", self.dispatch_dtype_bytes),
                        ("combine_dtype_bytes", self.combine_dtype_bytes)):
            if v is not None:
                number(v, "argument", flag, lo=0, hi=64, lo_open=True, what="bytes per element")

    def config(self) -> dict:
        """The run-config entry (hashed into the run id)."""
        return asdict(self)


class MoESchedules:
    """Schedule function of a workload run: MoE all-to-alls as :mod:`netsim.collectives.moe`
    plans them, everything else by ``base``.  The runner calls :meth:`named` (it passes the
    node's name); plain calls go to ``base``.

    Parameters
    ----------
    topo
        The topology the run uses (GPUs per node decide node-limited forwarding).
    spec
        The generated model (:class:`~netsim.workload.generate.model.ModelSpec`).
    cfg
        :class:`MoERunConfig`.
    dtype_bytes
        The generator's bytes per element (its ALL_TO_ALL ``comm_size`` is
        ``tokens * top_k * hidden * dtype_bytes``).
    base
        Schedule function for every other collective (``base(comm_type, comm_size, gpus)``).
    """

    def __init__(self, topo, spec, cfg: MoERunConfig, dtype_bytes: int, base):
        if not spec.is_moe:
            raise InputError(f"{spec.name} has no experts; MoE flags need a MoE model", source="--moe-algo")
        self.topo, self.spec, self.cfg, self.dtype, self.base = topo, spec, cfg, dtype_bytes, base
        self.g = max(1, int(topo.gpus_per_node))
        self._layouts: dict = {}
        self._cache: dict = {}
        self.built = {"dispatch": 0, "combine": 0}  # schedules planned (cache misses), for tests and notes

    def __call__(self, comm_type: int, comm_size: int, gpus: tuple):
        return self.base(comm_type, comm_size, gpus)

    def named(self, comm_type: int, comm_size: int, gpus: tuple, name: str):
        kind = moe_kind(name) if int(comm_type) == int(CommType.ALL_TO_ALL) else None
        if kind is None:
            return self.base(comm_type, comm_size, gpus)
        ranks = np.asarray(gpus, dtype=np.int64)
        key = (kind, comm_size, ranks.size, int(ranks[0]) % self.g, np.diff(ranks).tobytes())
        sched = self._cache.get(key)
        if sched is None:
            sched = self._cache[key] = self._plan(kind, comm_size, ranks)
            self.built[kind] += 1
        return sched

    def tokens(self, comm_size: int) -> int:
        """Tokens per rank of a generated all-to-all of ``comm_size`` bytes."""
        per = self.spec.top_k * self.spec.hidden * self.dtype
        if comm_size <= 0 or comm_size % per:
            raise InputError(f"an all-to-all of {comm_size} B is not tokens x top_k ({self.spec.top_k}) x hidden "
                             f"({self.spec.hidden}) x {self.dtype} B", source="--moe-algo")
        return comm_size // per

    def layout(self, n: int, tokens: int, local: int):
        """The routed batch of an EP group of ``n`` ranks (cached: one per group size and tokens)."""
        from netsim.collectives import moe
        from netsim.collectives.moe import check_memory
        from netsim.collectives.moe_inputs import load_expert_map, load_ints

        key = (n, tokens, local)
        lay = self._layouts.get(key)
        if lay is None:
            cfg, spec = self.cfg, self.spec
            check_memory(n, tokens, spec.top_k, source="--seq/--micro-batch")
            place = cfg.placement_experts
            if place not in ("contiguous", "round_robin"):
                place = load_ints(place, "--placement-experts").ravel()
            expert_rank = moe.place_experts(spec.experts, n, place)
            choices = None if cfg.expert_map is None else load_expert_map(cfg.expert_map, n * tokens, spec.top_k,
                                                                          spec.experts)
            lay = self._layouts[key] = moe.layout(
                n, tokens, spec.experts, spec.top_k, popularity=cfg.skew, seed=cfg.seed, expert_rank=expert_rank,
                local_size=local, max_nodes=cfg.max_nodes or None, choices=choices, redundant=cfg.redundant_experts)
        return lay

    def _plan(self, kind: str, comm_size: int, ranks: np.ndarray):
        from netsim.collectives import moe
        from netsim.collectives.moe_inputs import moe_local_size

        cfg, n = self.cfg, ranks.size
        low_latency = cfg.algo == "low_latency"
        g, algo = moe_local_size(self.topo, ranks, "direct" if low_latency else cfg.algo)
        local = g if n % g == 0 and algo in ("hierarchical", "node_limited") else 1
        lay = self.layout(n, self.tokens(comm_size), local)
        dt = cfg.dispatch_dtype_bytes if kind == "dispatch" else cfg.combine_dtype_bytes
        lay = lay.with_bytes(moe.token_bytes(self.spec.hidden, self.dtype if dt is None else dt,
                                             low_latency=low_latency))
        build = moe.dispatch_schedule if kind == "dispatch" else moe.combine_schedule
        sched = build(lay, "low_latency" if low_latency else algo, local_size=max(local, 1), chunks=cfg.chunks)
        if algo == "node_limited" and not low_latency:  # DeepEP's normal kernels run on Buffer.num_sms SMs
            sched = replace(sched, blocks=DEEPEP_NORMAL_SMS)
        return sched


    def note(self) -> str | None:
        """One line for the run's notes: the routed batch's hottest expert (x mean), per EP size."""
        return _hot_expert_note(self)


def _hot_expert_note(schedules: MoESchedules) -> str | None:
    parts = []
    if not schedules._layouts:
        return "MoE flags given, but the workload has no expert-parallel all-to-alls (ep = 1?)"
    for (n, tokens, _), lay in sorted(schedules._layouts.items()):
        lt = lay.logical_tokens()
        if lt.mean() > 0:
            parts.append(f"EP{n} x {tokens} tokens: hottest expert {int(np.argmax(lt))} at "
                         f"{lt.max() / lt.mean():.2f}x the mean")
    if not parts:
        return None
    c = schedules.cfg
    return (f"MoE all-to-alls as dispatch/combine ({c.algo}, routing {c.expert_map or c.skew or 'uniform'}, "
            f"experts {c.placement_experts}" + (f", +{c.redundant_experts} redundant" if c.redundant_experts else "")
            + "): " + "; ".join(parts))


def default_schedules(topo, model: str):
    """The schedule function :class:`~netsim.workload.runner.WorkloadRun` uses by default."""
    from netsim.workload.collectives import NcclSchedules, collective_schedule

    if topo.facts.astra_network:
        return lambda ct, size, members: collective_schedule(ct, size, len(members))
    return NcclSchedules(topo)


def schedules_factory(spec, cfg: MoERunConfig, dtype_bytes: int):
    """``factory(topology, model) -> MoESchedules`` for :func:`netsim.workload.simulation.simulate`."""
    from netsim.workload.generate.presets import load_model_spec

    spec = load_model_spec(spec)
    if not spec.is_moe:
        raise InputError(f"{spec.name} has no experts; MoE flags need a MoE model", source="--moe-algo")
    return lambda topo, model: MoESchedules(topo, spec, cfg, dtype_bytes, default_schedules(topo, model))
