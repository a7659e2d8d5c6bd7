"""Pipeline-parallel building blocks of the LLM generator: layer split and schedule orders.

:func:`one_f_one_b` is the non-interleaved 1F1B order of PipeDream-Flush / Megatron-LM
(Narayanan et al., SC'21, §2.2.1); :func:`interleaved_order` is Megatron-LM's interleaved
1F1B order (same paper, §2.2.2; ``forward_backward_pipelining_with_interleaving`` in
``megatron/core/pipeline_parallel/schedules.py``), where every stage holds ``vpp`` model
chunks (virtual stages) and chunk ``c`` of ``pp * vpp`` lives on stage ``c % pp``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["interleaved_order", "one_f_one_b", "stage_layers"]


def stage_layers(layers: int, pp: int) -> list[range]:
    """Layers of each pipeline stage.  Uneven counts follow Llama 3 (arXiv:2407.21783 §3.3.2):
    every stage gets ``ceil(layers/pp)`` and the surplus is taken from the first and last
    stages (which also hold the embedding and the LM head), alternately.

    >>> [len(r) for r in stage_layers(126, 16)]
    [7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 7]
    """
    counts = [-(-layers // pp)] * pp
    surplus, i = sum(counts) - layers, 0
    while surplus:
        stage = i // 2 if i % 2 == 0 else pp - 1 - i // 2
        if counts[stage] > 1:
            counts[stage] -= 1
            surplus -= 1
        i = (i + 1) % (2 * pp)
    starts = np.concatenate(([0], np.cumsum(counts)))
    return [range(int(a), int(b)) for a, b in zip(starts[:-1], starts[1:])]


def one_f_one_b(stage: int, pp: int, microbatches: int) -> list[tuple[str, int]]:
    """The 1F1B order of one stage: a list of ``("F" | "B", microbatch)``.

    Examples
    --------
    >>> one_f_one_b(0, 2, 3)
    [('F', 0), ('F', 1), ('B', 0), ('F', 2), ('B', 1), ('B', 2)]
    """
    warm = min(pp - 1 - stage, microbatches)
    order = [("F", m) for m in range(warm)]
    for i in range(microbatches - warm):
        order += [("F", warm + i), ("B", i)]
    order += [("B", m) for m in range(microbatches - warm, microbatches)]
    return order


def interleaved_order(stage: int, pp: int, microbatches: int, vpp: int) -> list[tuple[str, int, int]]:
    """Megatron-LM's interleaved 1F1B order of one stage: ``("F" | "B", microbatch, chunk)``.

    ``chunk`` is the global model-chunk (virtual stage) index ``v * pp + stage`` of the
    stage's ``v``-th chunk.  The ``k``-th forward of the stage runs local chunk
    ``(k mod pp*vpp) // pp`` on microbatch ``(k // (pp*vpp)) * pp + k mod pp``; the
    ``k``-th backward visits the local chunks in reverse.  The stage runs
    ``min((pp - stage - 1) * 2 + (vpp - 1) * pp, microbatches * vpp)`` warm-up forwards,
    then alternates one forward and one backward, then drains the remaining backwards
    (Megatron-Core's rule; releases up to v0.7 ran every forward first when
    ``microbatches == pp``).  Needs ``microbatches % pp == 0``, as Megatron does.

    Parameters
    ----------
    stage, pp
        Pipeline stage (``0 <= stage < pp``) and pipeline-parallel degree.
    microbatches
        Microbatches per iteration (a multiple of ``pp``).
    vpp
        Model chunks per stage (virtual pipeline degree).

    Returns
    -------
    list of tuple
        ``microbatches * vpp`` forwards and as many backwards, in execution order.

    Raises
    ------
    ValueError
        If ``microbatches`` is not a multiple of ``pp`` or an argument is out of range.

    Examples
    --------
    >>> interleaved_order(1, 2, 2, 2)  # stage 1 holds chunks 1 and 3
    [('F', 0, 1), ('F', 1, 1), ('F', 0, 3), ('B', 0, 3), ('F', 1, 3), ('B', 1, 3), ('B', 0, 1), ('B', 1, 1)]
    """
    if pp < 1 or vpp < 1 or microbatches < 1 or not 0 <= stage < pp:
        raise ValueError(f"need 0 <= stage < pp and positive sizes, got stage={stage}, pp={pp}, "
                         f"microbatches={microbatches}, vpp={vpp}")
    if microbatches % pp:
        raise ValueError(f"microbatches={microbatches} is not a multiple of pp={pp}")
    group = pp * vpp
    total = microbatches * vpp

    def unit(k: int, forward: bool) -> tuple[str, int, int]:
        local = (k % group) // pp
        if not forward:
            local = vpp - 1 - local
        return ("F" if forward else "B", (k // group) * pp + k % pp, local * pp + stage)

    warm = min((pp - stage - 1) * 2 + (vpp - 1) * pp, total)
    order = [unit(k, True) for k in range(warm)]
    for k in range(total - warm):
        order += [unit(warm + k, True), unit(k, False)]
    order += [unit(k, False) for k in range(total - warm, total)]
    return order
