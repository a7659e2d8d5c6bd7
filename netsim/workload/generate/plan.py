"""A checked call of the LLM generator: :func:`plan_llm` validates the arguments once and
returns an :class:`LLMPlan` (layout, costs, schedule, groups) that builds any rank's nodes.

:func:`~netsim.workload.generate.llm.generate_llm` (EtNodes), the file writer
(:mod:`~netsim.workload.generate.writer`) and ``netsim run --llm``
(:mod:`netsim.workload.llmrun`) all start here.

>>> from netsim.workload.generate.model import ModelSpec
>>> plan = plan_llm(ModelSpec("tiny", layers=2, hidden=256, ffn=1024, heads=4, vocab=1000),
...                 tp=2, pp=2, dp=2, microbatches=2, seq=128)
>>> plan.world, plan.stage(5), len(plan.nodes(5))
(8, 1, 49)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable

from netsim.errors import InputError
from netsim.chakra.model import EtNode
from netsim.inputs import bounded_int
from netsim.limits import bounds
from netsim.workload.generate.model import ModelSpec
from netsim.workload.generate.presets import load_model_spec
from netsim.workload.generate.kernels import DEFAULT as DEFAULT_KERNELS
from netsim.workload.generate.kernels import profile as kernel_profile
from netsim.workload.generate.layers import Costs
from netsim.workload.generate.ranks import Layout, layout_groups, rank_nodes
from netsim.workload.generate.schedules import stage_layers

__all__ = ["BYTES_PER_NODE", "COMM_STREAMS", "LLMPlan", "MAX_WORLD", "RECOMPUTE", "RECOMPUTE_MODULES", "SCHEDULES",
           "bucket_params", "check_memory", "check_positive", "plan_llm"]

#: Pipeline schedules of :func:`generate_llm`.
SCHEDULES = ("1f1b", "interleaved")
#: Activation recomputation of :func:`generate_llm` (Megatron-LM's ``--recompute-granularity``).
RECOMPUTE = ("none", "selective", "full")
#: What selective recomputation may re-run, Megatron-Core's ``recompute_modules`` (transformer_config.py lines
#: 361-373 at NVIDIA/Megatron-LM 0d8e071): the core attention, MLA's up-projections with their norms and rotary
#: embedding, the routed experts' activation.  Megatron-Core's default is the core attention (lines 1044-1045).
RECOMPUTE_MODULES = ("core_attn", "mla_up_proj", "moe_act")
#: Comm-lane policies a generated trace declares (netsim.workload.streams.COMM_STREAMS).
COMM_STREAMS = ("communicator", "one")


def bucket_params(dp: int) -> int:
    """Megatron-LM's default gradient bucket, in parameters, for a reduction group of ``dp`` ranks:
    ``max(40_000_000, 1_000_000 * dp)`` (``megatron/core/distributed/distributed_data_parallel.py``
    lines 133-134, NVIDIA/Megatron-LM d98e8a6: larger groups get larger buckets so that ring chunks
    stay bandwidth-bound)."""
    return max(40_000_000, 1_000_000 * dp)


def check_positive(**kw: int) -> None:
    """Raise InputError unless every argument is a positive integer within its bound (:mod:`netsim.limits`)."""
    for key, val in kw.items():
        lo, hi = bounds(key)
        bounded_int(val, "argument", key, max(lo, 1), hi, what="a positive integer")


#: Largest integer a generated node may carry: Chakra's attributes are int64.
MAX_ATTRIBUTE = 2**63 - 1
#: Peak memory per node of a generated rank that ``netsim run --llm`` simulates: measured peak RSS of
#: llama3-70b TP2 PP2 DP2 on dgx-h100.yaml with 128 microbatches (331,012 nodes), 740 to 870 bytes per
#: node on the analytical and flow models (the generator's nodes, node tables, the runner's state and
#: the ops table); rounded up.  The API's EtNode lists and the file writer's templates need less.
BYTES_PER_NODE = 1024


#: Ranks of one generated job: the largest topology netsim builds (netsim.topology.spec.MAX_GPUS).
MAX_WORLD = 131_072


def _check_tp(spec, tp: int) -> None:
    """Megatron-LM's rule: tp divides the attention heads (``megatron/training/arguments.py``:
    num_attention_heads must be divisible by tensor_model_parallel_size).  Key/value heads may be
    fewer than tp (replicated, as the generator's kv_hidden / tp shard assumes)."""
    if spec.heads % tp:
        raise InputError(f"tp={tp} must divide the model's heads ({spec.heads}), as in Megatron-LM",
                         source="argument", field="tp")


def _microbatches(microbatches: int | None, global_batch: int | None, dp: int, micro_batch: int, pp: int) -> int:
    """Microbatches per iteration from ``--microbatches`` / ``--global-batch`` (default ``2 * pp``)."""
    if microbatches is not None:
        check_positive(microbatches=microbatches)
    if global_batch is None:
        return 2 * pp if microbatches is None else microbatches
    check_positive(global_batch=global_batch)
    step = dp * micro_batch
    if global_batch % step:
        raise InputError(f"global_batch={global_batch} is not a multiple of dp * micro_batch = {step}",
                         source="argument", field="global_batch")
    derived = global_batch // step
    if microbatches is not None and microbatches != derived:
        raise InputError(f"global_batch={global_batch} gives {derived} microbatches (dp={dp}, "
                         f"micro_batch={micro_batch}), not {microbatches}", source="argument", field="microbatches")
    return derived


def _virtual_stages(schedule: str, vpp: int | None, pp: int, microbatches: int) -> int:
    """Model chunks per stage for ``schedule`` (1 for 1F1B, ``vpp`` or 2 when interleaved)."""
    if schedule not in SCHEDULES:
        raise InputError(f"expected one of {', '.join(SCHEDULES)}, got {schedule!r}", source="argument",
                         field="schedule")
    if schedule == "1f1b":
        if vpp not in (None, 1):
            raise InputError(f"vpp={vpp} needs schedule 'interleaved'", source="argument", field="vpp")
        return 1
    vpp = 2 if vpp is None else vpp
    check_positive(vpp=vpp)
    if vpp < 2:
        raise InputError(f"the interleaved schedule needs vpp >= 2, got {vpp}", source="argument", field="vpp")
    if pp < 2:
        raise InputError(f"the interleaved schedule needs pp >= 2, got {pp}", source="argument", field="pp")
    if microbatches % pp:
        raise InputError(f"the interleaved schedule needs microbatches ({microbatches}) divisible by pp={pp}",
                         source="argument", field="microbatches")
    return vpp


@dataclass(frozen=True)
class LLMPlan:
    """A checked generator call: the layout, costs, schedule and groups; :meth:`nodes` builds a rank.

    ``member`` maps each rank to its group id per kind (``tp``, ``cp``, ``dp``, ``ep``);
    it may hold only the ranks a worker builds (:meth:`for_ranks`).
    """

    lay: Layout
    cost: Costs
    chunks: tuple[range, ...]
    vpp: int
    microbatches: int
    groups: dict[str, list[int]] | None
    member: dict[int, dict[str, str]]

    @property
    def world(self) -> int:
        return self.lay.world

    def stage(self, rank: int) -> int:
        """Pipeline stage of ``rank``."""
        return rank // self.lay.stride

    def nodes(self, rank: int) -> list[EtNode]:
        """The node chain of ``rank``."""
        return rank_nodes(rank, self.lay, self.member[rank], self.cost, list(self.chunks), self.vpp,
                          self.microbatches)

    @property
    def metadata(self) -> dict[str, str]:
        """GlobalMetadata attributes of every rank's trace: the comm-lane policy when it is not
        ASTRA-sim's single lane (:mod:`netsim.workload.streams`)."""
        return {} if self.cost.comm_streams == "one" else {"comm_streams": self.cost.comm_streams}

    def nodes_estimate(self) -> int:
        """Nodes of the longest rank's chain, estimated without building it: a chain grows linearly with
        the microbatches, so the first and last stages and the one with the most layers are built for
        the fewest microbatches the schedule allows and scaled up (an upper bound for those stages)."""
        pp, few = self.lay.pp, (self.lay.pp if self.vpp > 1 else 1)
        if self.microbatches <= few:
            few = self.microbatches
        layers = [sum(len(self.chunks[c]) for c in range(s, len(self.chunks), pp)) for s in range(pp)]
        probe = replace(self, microbatches=few)
        per = max(len(probe.nodes(s * self.lay.stride)) for s in {0, pp - 1, layers.index(max(layers))})
        return -(-per * self.microbatches // few)

    def for_ranks(self, ranks: Iterable[int]) -> "LLMPlan":
        """A copy that knows only ``ranks``' groups (small to send to a worker process)."""
        return replace(self, groups=None, member={r: self.member[r] for r in ranks})


def plan_llm(spec: ModelSpec | str, *, tp: int, pp: int, dp: int, ep: int = 1, cp: int = 1,
             microbatches: int | None = None, global_batch: int | None = None, seq: int, micro_batch: int = 1,
             dtype_bytes: int = 2, schedule: str = "1f1b", vpp: int | None = None,
             recompute: str = "none", overlap_grad_reduce: bool = False, tp_comm_overlap: bool = False,
             comm_streams: str = "communicator", sequence_parallel: bool = False, kernels: str = DEFAULT_KERNELS,
             recompute_modules: Iterable[str] | None = None, pipeline_layout: Iterable[int] | None = None) -> LLMPlan:
    """Check a generator call (the arguments of :func:`generate_llm` but ``ranks``) and plan it.

    Raises
    ------
    InputError
        As :func:`generate_llm`.
    """
    spec = load_model_spec(spec)
    profile = kernel_profile(kernels)
    if recompute not in RECOMPUTE:
        raise InputError(f"expected one of {', '.join(RECOMPUTE)}, got {recompute!r}", source="argument",
                         field="recompute")
    modules = _recompute_modules(spec, recompute, recompute_modules)
    if comm_streams not in COMM_STREAMS:
        raise InputError(f"expected one of {', '.join(COMM_STREAMS)}, got {comm_streams!r}", source="argument",
                         field="comm_streams")
    for key, val in (("overlap_grad_reduce", overlap_grad_reduce), ("tp_comm_overlap", tp_comm_overlap),
                     ("sequence_parallel", sequence_parallel)):
        if not isinstance(val, bool):
            raise InputError(f"expected true or false, got {val!r}", source="argument", field=key)
    check_positive(tp=tp, pp=pp, dp=dp, ep=ep, cp=cp, seq=seq, micro_batch=micro_batch, dtype_bytes=dtype_bytes)
    microbatches = _microbatches(microbatches, global_batch, dp, micro_batch, pp)
    vpp = _virtual_stages(schedule, vpp, pp, microbatches)
    if spec.layers < pp * vpp:
        what = f"pp={pp} stages" if vpp == 1 else f"pp * vpp = {pp * vpp} model chunks"
        raise InputError(f"{spec.layers} layers cannot fill {what}", source="argument",
                         field="pp" if vpp == 1 else "vpp")
    if seq % cp:
        raise InputError(f"seq={seq} is not divisible by cp={cp}", source="argument", field="cp")
    _check_tp(spec, tp)
    if tp * pp * dp * cp > MAX_WORLD:
        raise InputError(f"tp*pp*dp*cp = {tp * pp * dp * cp:,} ranks; expected at most {MAX_WORLD:,}",
                         source="argument", field="dp")
    if dp % ep:
        raise InputError(f"ep={ep} must divide dp={dp}", source="argument", field="ep")
    if spec.is_moe and spec.experts % ep:
        raise InputError(f"{spec.experts} experts do not split evenly over ep={ep}", source="argument", field="ep")
    if not spec.is_moe:
        ep = 1
    lay = Layout(tp, cp, dp, pp)
    groups, member = layout_groups(lay, ep)
    cost = Costs(spec, tp, cp, micro_batch * seq // cp, seq, dtype_bytes, spec.experts // ep if spec.is_moe else 0,
                 recompute, overlap_grad_reduce, tp_comm_overlap, comm_streams, bucket_params(dp * cp),
                 sequence_parallel and tp > 1, profile, modules)
    largest = cost.largest(microbatches, vpp)
    if largest > MAX_ATTRIBUTE:
        raise InputError(f"{spec.name} with seq={seq}, micro_batch={micro_batch} and {microbatches} microbatches "
                         f"gives nodes of {largest:.3g} operations or bytes; Chakra's int64 attributes hold at "
                         "most 2**63-1 (use a shorter seq or micro_batch)", source="argument", field="seq")
    chunks = stage_layers(spec.layers, pp * vpp) if pipeline_layout is None else \
        _layout_chunks(pipeline_layout, spec.layers, pp * vpp)
    return LLMPlan(lay, cost, tuple(chunks), vpp, microbatches, groups, member)


def _recompute_modules(spec: ModelSpec, recompute: str, modules: Iterable[str] | None) -> tuple[str, ...]:
    """The checked ``recompute_modules``: Megatron-Core's default (the core attention) when None; given, they
    need ``recompute="selective"`` and a model that has them (Megatron-Core refuses ``mla_up_proj`` without
    MLA, transformer_config.py lines 1069-1073 at 0d8e071; ``moe_act`` needs experts)."""
    if modules is None:
        return ("core_attn",)
    if isinstance(modules, str) or not all(isinstance(m, str) for m in modules):
        raise InputError(f"expected a list of module names, got {modules!r}", source="argument",
                         field="recompute_modules")
    modules = tuple(modules)
    bad = [m for m in modules if m not in RECOMPUTE_MODULES]
    if bad:
        raise InputError(f"expected modules among {', '.join(RECOMPUTE_MODULES)}, got {bad[0]!r}", source="argument",
                         field="recompute_modules")
    if recompute != "selective":
        raise InputError(f"recompute_modules need recompute='selective', got {recompute!r}", source="argument",
                         field="recompute_modules")
    need = {"mla_up_proj": (spec.mla, "multi-head latent attention"), "moe_act": (spec.is_moe, "a MoE model")}
    for m in modules:
        if m in need and not need[m][0]:
            raise InputError(f"{m} needs {need[m][1]}; {spec.name} has none", source="argument",
                             field="recompute_modules")
    return modules


def _layout_chunks(layout: Iterable[int], layers: int, chunks: int) -> list[range]:
    """Model chunks from a pipeline layout, the decoder layers of each chunk in model order (Megatron-Core's
    ``pipeline_model_parallel_layout`` counted in decoder layers; chunk ``c`` on stage ``c % pp``)."""
    try:
        counts = [int(x) for x in layout]
    except (TypeError, ValueError):
        raise InputError(f"expected layer counts, got {layout!r}", source="argument", field="pipeline_layout") \
            from None
    if len(counts) != chunks or min(counts) < 0 or sum(counts) != layers:
        raise InputError(f"expected {chunks} non-negative layer counts (pp * vpp chunks) summing to the model's "
                         f"{layers} layers, got {counts}", source="argument", field="pipeline_layout")
    starts = [sum(counts[:i]) for i in range(chunks + 1)]
    return [range(a, b) for a, b in zip(starts[:-1], starts[1:])]


def check_memory(plan: LLMPlan, ranks: int, what: str) -> None:
    """Refuse, before building, ``ranks`` ranks' nodes of ``plan`` that would not fit in the memory
    available (:data:`BYTES_PER_NODE` each; ``what`` says who holds them, for the message)."""
    from netsim.inputs import available_memory

    per = plan.nodes_estimate()
    need, avail = ranks * per * BYTES_PER_NODE, available_memory()
    if need > avail:
        fits = max(0, avail // (BYTES_PER_NODE * ranks * max(1, -(-per // plan.microbatches))))
        raise InputError(f"{plan.microbatches:,} microbatches give about {per:,} nodes per rank; {what} ({ranks:,} "
                         f"rank(s)) need about {need / 2**30:,.1f} GiB of memory and {avail / 2**30:,.1f} GiB are "
                         f"available (use {fits:,} microbatches or fewer)", source="argument", field="microbatches")
