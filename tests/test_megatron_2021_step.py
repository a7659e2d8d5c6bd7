"""What Megatron-LM of 2021 did around the layers each step (kernel profile ``megatron-2021``, issue 33 "W"):
FP16 gradient accumulation per microbatch, the FP16 optimizer step and scatter/gather pipeline sends
(netsim/workload/generate/kernels.py, each rule with its source there)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from netsim.chakra.schema import CommType
from netsim.workload.generate.kernels import GRAD_ACCUM_ELEMENTS, PROFILES, fp16_optimizer_bytes
from netsim.workload.generate.llm import generate_llm
from netsim.workload.generate.model import ModelSpec

GPT = ModelSpec("gpt-small", layers=4, hidden=512, ffn=2048, heads=8, vocab=51200)
LAYER = 12 * GPT.hidden ** 2  # attention 4 h^2 + a plain MLP 2 h ffn = 8 h^2 (no biases, no norms)
EMBED = GPT.vocab * GPT.hidden
#: The A100's HBM roof the generator's element-wise nodes run at (netsim.topology.builders.GPU_EFFICIENCY).
A100_HBM = 1.70e12


def _rank(kernels="megatron-2021", rank=0, **kw):
    args = dict(tp=2, pp=1, dp=1, microbatches=3, seq=256, micro_batch=1) | kw
    return generate_llm(GPT, kernels=kernels, ranks=[rank], **args)[0][rank]


def test_optimizer_bytes_are_the_sum_of_its_passes():
    """main_grad.float() (2 read, 4 written), unscale in place (4 + 4), the L2 norm (4), FusedAdam (g, p, m, v
    read; p, m, v written: 16 + 12), the FP32 weights copied to FP16 (4 + 2)."""
    assert fp16_optimizer_bytes(2) == (2 + 4) + (4 + 4) + 4 + (16 + 12) + (4 + 2) == 52
    assert fp16_optimizer_bytes(4) == 56


def test_gradients_accumulate_after_each_weights_first_backward():
    """One in-place add per weight (3 elements: two read, one written) on every microbatch but the first; the
    tied embedding / LM head weight once per microbatch; none for today's stack (accumulation fused in the GEMM)."""
    nodes = _rank()
    acc = [n for n in nodes if n.name.endswith(".grad_accum")]
    assert {n.name.split(".")[0] for n in acc} == {"mb1", "mb2"}
    per_mb = [n.tensor_size for n in acc if n.name.startswith("mb1.")]
    assert sorted(per_mb) == sorted([LAYER // 2 * GRAD_ACCUM_ELEMENTS * 2] * GPT.layers
                                    + [EMBED // 2 * GRAD_ACCUM_ELEMENTS * 2])
    assert all(n.op_kind == "elementwise" for n in acc)
    assert not [n for n in _rank("fa3-te") if "grad_accum" in n.name or n.name == "optimizer.step"]


def test_accumulation_follows_each_layers_backward():
    """A layer's accumulation runs right after that layer's backward, before the previous layer's."""
    names = [n.name for n in _rank()]
    for layer in range(GPT.layers):
        i = names.index(f"mb1.bwd.L{layer}.grad_accum")
        assert names[i - 1].startswith(f"mb1.bwd.L{layer}.") and "grad_accum" not in names[i - 1]


@pytest.mark.parametrize("pp", [1, 2])
def test_optimizer_step_covers_every_weight_of_the_rank(pp):
    """52 bytes per weight the rank holds after the TP split: its layers, and the embedding on the first stage and
    the LM head's copy on the last (one weight when both are on the rank: tied)."""
    for stage in range(pp):
        nodes = _rank(pp=pp, rank=stage * 2, microbatches=4)
        step = [n for n in nodes if n.name == "optimizer.step"]
        assert len(step) == 1 and step[0] is nodes[-1]
        params = GPT.layers // pp * LAYER + EMBED
        assert step[0].tensor_size == params // 2 * 52


def test_optimizer_step_waits_for_every_gradient_reduction():
    """With gradient buckets reduced off the chain (overlap_grad_reduce), the step depends on each of them."""
    nodes = _rank(dp=2, overlap_grad_reduce=True)
    reds = [n.id for n in nodes if n.name.startswith("dp.grad_allreduce")]
    step = nodes[-1]
    assert reds and step.name == "optimizer.step" and set(reds) <= set(step.data_deps)
    assert len(step.data_deps) == len(reds) + 1  # the chain's tail and the reductions off it


def test_pipeline_sends_are_scattered_and_gathered_over_tp():
    """Each TP rank sends 1/tp of the activation; the receiver all-gathers the pieces over its TP group (comm_size:
    one piece).  Today's stack (and tp = 1) sends the whole activation."""
    act = 1 * 256 * GPT.hidden * 2
    for rank, kind in ((0, "recv_grad"), (2, "recv_act")):
        nodes = _rank(pp=2, rank=rank)
        ids = {n.id: n for n in nodes}
        p2p = [n for n in nodes if n.name.endswith(("send_act", "send_grad", "recv_act", "recv_grad"))]
        assert p2p and all(n.comm_size == act // 2 for n in p2p)
        for r in (n for n in p2p if n.name.endswith(kind)):
            gather = ids[r.id + 1]
            assert gather.comm_type == int(CommType.ALL_GATHER) and gather.comm_size == act // 2
            assert gather.data_deps == (r.id,) and gather.pg_name is not None
    for kernels, tp in (("fa3-te", 2), ("megatron-2021", 1)):
        nodes = _rank(kernels, pp=2, tp=tp)
        assert all(n.comm_size == act for n in nodes if "send_" in n.name or "recv_" in n.name)
        assert not [n for n in nodes if n.name.endswith("_allgather")]


def test_the_step_adds_its_hbm_time_to_the_iteration():
    """On one A100 node (no DP reduction) the optimizer step is the last node of every rank: the iteration grows
    by exactly its bytes over the HBM roof; the accumulations add theirs (both memory-bound)."""
    from netsim.workload.llmrun import simulate_llm

    base = PROFILES["megatron-2021"]
    kw = dict(tp=2, pp=1, dp=1, microbatches=3, seq=256, micro_batch=1, model="analytical")
    times = {}
    for name, prof in (("none", replace(base, optimizer=False, grad_accumulation=False)),
                       ("step", replace(base, grad_accumulation=False)), ("both", base)):
        times[name] = simulate_llm("topologies/dgx-a100.yaml", GPT, kernels=prof, **kw).finish.max()
    step = (GPT.layers * LAYER + EMBED) // 2 * 52
    accum = 2 * (GPT.layers * LAYER + EMBED) // 2 * GRAD_ACCUM_ELEMENTS * 2
    assert times["step"] - times["none"] == pytest.approx(step / A100_HBM, rel=1e-6)
    assert times["both"] - times["step"] == pytest.approx(accum / A100_HBM, rel=1e-3)
