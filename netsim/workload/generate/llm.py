"""Generate one LLM training iteration as a per-rank Chakra workload.

The layout follows Megatron-LM:
``rank = tp_rank + tp * (cp_rank + cp * (dp_rank + dp * stage))`` (tensor parallelism
fastest, so a TP group sits inside a node, then context, data and pipeline
parallelism).  Every rank runs a pipeline schedule over the layers of its stage
(:mod:`netsim.workload.generate.schedules`): 1F1B (``pp - 1 - stage`` warm-up
forwards, then alternating forward/backward, then the remaining backwards) or
Megatron's interleaved 1F1B, where the layers form ``pp * vpp`` model chunks and chunk
``c`` lives on stage ``c % pp`` (the last stage's chunk ``c`` sends to stage 0's chunk
``c + 1``).  Point-to-point tags are ``2 * (microbatch * vpp + boundary // pp)`` for
activations and one more for gradients, where ``boundary`` is the chunk index on the
sending side of the forward edge: unique per (src, dst) pair.

Per layer and microbatch the forward pass is an element-wise COMP node (``.attn_elementwise``: norm,
rotary, residual add), a core-attention COMP node (``.core_attn``), an attention-projection COMP node
(``.attn``), another element-wise node (``.mlp_elementwise``: norm, activation, residual add) and an MLP
COMP node, the projections and the MLP each followed by a TP all-reduce of the activations when
``tp > 1`` (a reduce-scatter, with an all-gather before the block, under ``sequence_parallel``).  The
first stage looks up the embedding (element-wise, then summed over TP); the last runs the final norm and
the LM head.  Every COMP node names its kernel kind
(``op_kind``, :data:`netsim.vocab.OP_KINDS`), which the GPU preset's achieved efficiency is
looked up by.  A rank holds ``tokens = micro_batch * seq / cp`` tokens of each microbatch:

* projections and MLP (``op_kind`` ``gemm``): ``num_ops`` = 2 · tokens · block parameters / tp,
  ``tensor_size`` = block weight bytes / tp (roofline duration);
* element-wise kernels (``elementwise``): ``tensor_size`` = the HBM bytes they read and write
  (:meth:`~netsim.workload.generate.layers.Costs.elementwise`), one operation per element;
* core attention (QKᵀ, softmax, weighted sum of V: one fused kernel, ``attn_fwd`` /
  ``attn_bwd``): 2 · tokens · seq · hidden / tp operations, twice that in the backward;
  ``tensor_size`` = the bytes of Q, K, V and O.  This is the 4·b·s²·h term of Megatron-LM's
  FLOP count (Narayanan et al., SC'21, arXiv:2104.04473), every query against the whole
  sequence, halved by the causal mask of a decoder: the kernel skips the blocks above the
  diagonal (FlashAttention counts causal FLOPs the same way).  Multi-head latent attention
  (DeepSeek-V3, :attr:`ModelSpec.mla`): tokens · seq · heads · (q/k head dim + v head dim) / tp,
  and the projections are those of its latents (:meth:`~netsim.workload.generate.layers.Costs.linears`);
* context parallelism (``cp > 1``) follows Llama 3 (arXiv:2407.21783 §3.3.2): the
  forward attention is preceded by an ALL_GATHER of K and V over the CP group
  (``comm_size`` = one rank's shard, tokens · 2 · kv_hidden · dtype_bytes / tp), and
  the backward attention is followed by a REDUCE_SCATTER of their gradients
  (``comm_size`` = the gathered buffer, ``cp`` shards);
* a gated MLP (SwiGLU: Llama 3, Mixtral, DeepSeek-V3) has three ``hidden x ffn`` matrices,
  a plain one (GPT-3) two (:attr:`ModelSpec.mlp_params`);
* mixture-of-experts layers replace the MLP by a router, the shared experts if any (computed
  locally), an ALL_TO_ALL dispatch on the expert-parallel group, the expert compute and an
  ALL_TO_ALL combine; the first ``dense_layers`` layers keep the dense MLP (DeepSeek-V3).
  In the backward pass the same two all-to-alls run in the same order: the first carries the
  output gradients to the experts (the dispatch's pattern), the second brings the input
  gradients back (the combine's).
* activation recomputation (``recompute``, Megatron-LM's ``--recompute-granularity``; Korthikanti
  et al., arXiv:2205.05198 §4): ``"none"`` (default) keeps every activation; ``"selective"``
  re-runs the core attention's forward (node ``mb<m>.bwd.L<l>.core_attn.recompute``) right
  before its backward; ``"full"`` checkpoints every layer's input
  (``--recompute-method uniform --recompute-num-layers 1``) and re-runs the layer's whole forward
  (attention and MLP nodes named ``mb<m>.bwd.L<l>.recompute.*``, with their TP all-reduces, CP
  all-gather and MoE all-to-alls) right before the layer's backward.  ``recompute_modules`` names what
  ``"selective"`` re-runs, as Megatron-Core's option does: the core attention (its default), MLA's
  up-projections (``mla_up_proj``, nodes ``mb<m>.bwd.L<l>.mla_up_proj.recompute*``) or the routed experts'
  activation (``moe_act``, ``mb<m>.bwd.L<l>.moe_act.recompute``).

The backward pass mirrors the forward pass with twice the operations.  With ``tp > 1`` a block's
backward GEMMs split into ``.dgrad`` (the row-parallel GEMM's backward and the column-parallel GEMM's
input gradient) and ``.wgrad`` (the column GEMM's weight gradient), and the input gradient's TP
reduction runs beside the wgrad, as Megatron-LM's async all-reduce does.  Gradients are
all-reduced over the DP×CP group (Megatron reduces over ``dp * cp`` ranks), one bucket
per layer during the last microbatch's backward of its chunk, then the embedding / LM
head.  Nodes form one linear ``data_deps`` chain per rank in schedule order (sends
are eager in netsim, so neither schedule can deadlock).  The ``megatron-2021`` kernel profile adds
what Megatron-LM of 2021 did around the layers (:mod:`netsim.workload.generate.kernels`): an
element-wise ``grad_accum`` node after each layer's backward on every microbatch but the first, an
``optimizer.step`` node after the gradient reductions, and pipeline sends of ``1/tp`` of the
activation, all-gathered over TP on arrival.

Examples
--------
>>> spec = ModelSpec("tiny", layers=2, hidden=256, ffn=1024, heads=4, vocab=1000)
>>> nodes, groups = generate_llm(spec, tp=2, pp=1, dp=2, microbatches=2, seq=128)
>>> len(nodes), groups["1"], groups["3"]
(4, [0, 1], [0, 2])
>>> nodes, groups = generate_llm(spec, tp=2, pp=1, dp=2, cp=2, microbatches=2, seq=128, ranks=[0, 5])
>>> sorted(nodes), groups["5"], groups["9"]  # TP groups 1-4, CP groups 5-8, DP x CP groups 9-10
([0, 5], [0, 2], [0, 2, 4, 6])
"""

from __future__ import annotations

import operator
import os
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from netsim.errors import InputError
from netsim.chakra.model import EtNode
from netsim.workload.generate.model import ModelSpec
from netsim.workload.generate.presets import PRESETS as MODEL_PRESETS
from netsim.workload.generate.presets import load_model_spec
from netsim.workload.generate.plan import (MAX_WORLD, RECOMPUTE, SCHEDULES, LLMPlan, check_memory, check_positive,
                                           plan_llm)
from netsim.workload.generate.schedules import interleaved_order, one_f_one_b, stage_layers

__all__ = ["MODEL_PRESETS", "ModelSpec", "SCHEDULES", "generate_llm", "interleaved_order", "llm_replicas",
           "load_model_spec", "one_f_one_b", "plan_llm", "stage_layers", "write_llm_workload",
           "LLMPlan", "MAX_WORLD", "RECOMPUTE"]

def _selected_ranks(ranks: Iterable[int] | None, world: int) -> list[int] | None:
    """Sorted distinct ranks of ``ranks`` (None: every rank), checked against ``world``."""
    if ranks is None:
        return None
    try:
        sel = sorted({operator.index(x) for x in ranks})
    except TypeError:
        raise InputError("expected an iterable of integer ranks", source="argument", field="ranks") from None
    bad = [x for x in sel if not 0 <= x < world]
    if bad:
        raise InputError(f"rank {bad[0]} outside 0..{world - 1}", source="argument", field="ranks")
    return sel


def generate_llm(spec: ModelSpec | str, *, tp: int, pp: int, dp: int, ep: int = 1, cp: int = 1,
                 microbatches: int | None = None, global_batch: int | None = None, seq: int, micro_batch: int = 1,
                 dtype_bytes: int = 2, schedule: str = "1f1b", vpp: int | None = None,
                 ranks: Iterable[int] | None = None, recompute: str = "none", overlap_grad_reduce: bool = False,
                 tp_comm_overlap: bool = False, comm_streams: str = "communicator",
                 sequence_parallel: bool = False, kernels: str = "fa3-te",
                 recompute_modules: Iterable[str] | None = None, pipeline_layout: Iterable[int] | None = None) -> tuple[list[list[EtNode]] | dict[int, list[EtNode]], dict[str, list[int]]]:
    """Build one training iteration for every rank (or for ``ranks``).

    Parameters
    ----------
    spec
        The model, or a preset name / YAML path (see :func:`load_model_spec`).
    tp, pp, dp, ep, cp
        Tensor, pipeline, data, expert and context parallel degrees; ``ep`` must
        divide ``dp`` (expert groups are blocks of ``ep`` consecutive data-parallel
        ranks) and only matters for MoE models; ``cp`` must divide ``seq``.
    microbatches, global_batch
        Microbatches per iteration, or the global batch in sequences
        (``microbatches = global_batch / (dp * micro_batch)``; both may be given if
        they agree).  Neither: ``2 * pp``.
    seq, micro_batch
        Sequence length and sequences per microbatch.
    dtype_bytes
        Bytes per activation / weight / gradient element.
    schedule, vpp
        ``"1f1b"`` or ``"interleaved"`` (Megatron's interleaved 1F1B with ``vpp``
        model chunks per stage, default 2; needs ``pp >= 2`` and ``microbatches``
        divisible by ``pp``).
    ranks
        Build only these ranks (for jobs where only some ranks are simulated).
    recompute
        Activation recomputation: ``"none"`` (default), ``"selective"`` or ``"full"``
        (Megatron-LM's granularities; see the module docstring).
    recompute_modules
        What ``"selective"`` re-runs, Megatron-Core's ``recompute_modules`` (:data:`~.plan.RECOMPUTE_MODULES`):
        ``"core_attn"`` (the default, as in Megatron-Core), ``"mla_up_proj"`` (MLA's up-projections, their
        norms and rotary embedding, before the core attention's backward), ``"moe_act"`` (the routed experts'
        activation, before the experts' backward).
    pipeline_layout
        Decoder layers of each of the ``pp * vpp`` model chunks, in model order (Megatron-Core's
        ``pipeline_model_parallel_layout`` counted in decoder layers; the embedding stays in the first chunk,
        the LM head in the last).  None (default): :func:`stage_layers`.
    overlap_grad_reduce, tp_comm_overlap, comm_streams
        Megatron's overlap switches and the comm-lane policy the traces declare (docs/workloads.md,
        "Overlap"): gradient buckets reduced during the backward (default) or after it; TP
        all-reduces pipelined with their compute (off by default); ``"communicator"`` (default: one
        comm stream per communicator and send peer, as PyTorch) or ``"one"`` (ASTRA-sim's lane).
    sequence_parallel
        Megatron's ``--sequence-parallel`` (off by default, as in Megatron-Core's
        ``ModelParallelConfig``): norms and residual adds run on ``1/tp`` of the tokens, and each TP
        all-reduce becomes a reduce-scatter after the block and an all-gather before the next.
    kernels
        The kernel profile (:mod:`netsim.workload.generate.kernels`): ``"fa3-te"`` (default: fused
        FlashAttention and element-wise kernels, one node per block's GEMMs) or ``"megatron-2021"``
        (Megatron-LM's kernels of 2021: unfused attention, LayerNorm, bias-GeLU and bias-dropout-add,
        one node per GEMM timed by its shape).

    Returns
    -------
    per_rank_nodes : list of list of EtNode, or dict
        Index = rank; node ids start at 1 on every rank.  With ``ranks``: a dict
        rank -> nodes over the requested ranks.
    groups : dict
        Communicator group id (``"1"``, ``"2"``, ...) -> ranks, for the whole job: TP
        groups, then CP groups, then DP×CP groups (gradient reduction), then EP groups
        (dimensions of size 1 get none).

    Raises
    ------
    InputError
        On non-positive arguments, too few layers for ``pp * vpp`` chunks, ``ep`` not
        dividing ``dp``, experts not divisible by ``ep``, ``cp`` not dividing ``seq``,
        inconsistent ``global_batch`` / ``microbatches``, a bad schedule or ranks
        outside the job.
    """
    plan = plan_llm(spec, tp=tp, pp=pp, dp=dp, ep=ep, cp=cp, microbatches=microbatches, global_batch=global_batch,
                    seq=seq, micro_batch=micro_batch, dtype_bytes=dtype_bytes, schedule=schedule, vpp=vpp,
                    recompute=recompute, overlap_grad_reduce=overlap_grad_reduce, tp_comm_overlap=tp_comm_overlap,
                    comm_streams=comm_streams, sequence_parallel=sequence_parallel, kernels=kernels,
                    recompute_modules=recompute_modules, pipeline_layout=pipeline_layout)
    selected = _selected_ranks(ranks, plan.world)
    build = range(plan.world) if selected is None else selected
    check_memory(plan, len(build), "their EtNode lists")
    nodes = {r: plan.nodes(r) for r in build}
    return (list(nodes.values()) if selected is None else nodes), plan.groups


def write_llm_workload(out_dir: str | os.PathLike, spec: ModelSpec | str, *, jobs: int | None = None,
                       progress: bool = False, **kw: Any) -> Path:
    """Write ``out_dir/llm.<rank>.et`` and ``out_dir/comm_groups.json``.

    Parameters
    ----------
    out_dir
        Output folder (created if needed).
    spec
        The model (see :func:`generate_llm`).
    jobs, progress
        Processes (default: the available cores) and a progress bar on stderr
        (:func:`netsim.workload.generate.writer.write_llm_files`, which also writes a subset
        of the ranks).
    **kw
        Keyword arguments of :func:`generate_llm` (every rank is written: no ``ranks``).

    Returns
    -------
    Path
        The workload prefix ``out_dir/llm`` (``comm_groups.json`` sits beside it).
    """
    from netsim.workload.generate.writer import write_llm_files

    if kw.get("ranks") is not None:
        raise InputError("a written workload holds every rank; use generate_llm or write_llm_files for a subset",
                         source="argument", field="ranks")
    kw.pop("ranks", None)
    return write_llm_files(out_dir, spec, jobs=jobs, progress=progress, **kw).prefix


def llm_replicas(tp: int, pp: int, dp: int, ep: int = 1, cp: int = 1, world_check: bool = True):
    """The data-parallel replica symmetry of the generator's layout.

    The DP dimension splits into ``dp / ep`` blocks of ``ep`` consecutive DP ranks
    (MoE expert groups live inside one block; dense models use ``ep = 1``).  The
    representatives are the ranks of block 0 (``dp_rank < ep``); replica ``k`` maps
    ``dp_rank d`` to ``d + k * ep`` (mod ``dp``) and keeps every other coordinate, so TP,
    CP, EP groups and pipeline peers map onto those of another replica and every DP×CP
    group onto itself.

    Parameters
    ----------
    tp, pp, dp, ep, cp
        Parallel degrees, as in :func:`generate_llm`.
    world_check
        Check the degrees first (positive integers, ``ep`` divides ``dp``) and raise a
        one-line InputError; ``False`` leaves the checks to the caller.

    Returns
    -------
    netsim.workload.replicas.Replicas
        ``reps`` (sorted int64 ranks) and ``perms`` (``dp / ep`` rows of ``world`` ranks).

    Examples
    --------
    >>> r = llm_replicas(tp=2, pp=1, dp=2)
    >>> r.reps.tolist(), r.perms.tolist()
    ([0, 1], [[0, 1, 2, 3], [2, 3, 0, 1]])
    """
    from netsim.workload.replicas import Replicas

    if world_check:
        check_positive(tp=tp, pp=pp, dp=dp, ep=ep, cp=cp)
        if dp % ep:
            raise InputError(f"ep={ep} must divide dp={dp}", source="argument", field="ep")
    inner = tp * cp
    r = np.arange(inner * dp * pp, dtype=np.int64)
    d = (r // inner) % dp
    k = np.arange(dp // ep, dtype=np.int64)[:, None]
    perms = r[None, :] + inner * ((d[None, :] + k * ep) % dp - d[None, :])
    return Replicas(np.flatnonzero(d < ep).astype(np.int64), perms)
