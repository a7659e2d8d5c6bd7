"""Kernel profiles (``--kernels``) and the GEMM-shape model of the roofline (issue 33, item 4)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from types import SimpleNamespace as NS

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.chakra.model import MISSING
from netsim.topology.builders import GPU_EFFICIENCY, GPU_PRESETS, GPU_SMS
from netsim.vocab import OP_KINDS
from netsim.workload.compute import GEMM_TILES, Roofline, gemm_utilization
from netsim.workload.generate.llm import generate_llm
from netsim.workload.generate.model import ModelSpec

GPT = ModelSpec("gpt-small", layers=2, hidden=1024, ffn=4096, heads=16, vocab=51200)
A100 = NS(peak_flops=GPU_PRESETS["A100"]["peak_flops"], mem_bw_Bps=GPU_PRESETS["A100"]["mem_bw_Bps"],
          compute_efficiency=GPU_EFFICIENCY["A100"], gpu_sms=GPU_SMS["A100"])


def _nodes(kernels, tp=2, **kw):
    return generate_llm(GPT, tp=tp, pp=1, dp=1, microbatches=1, seq=512, micro_batch=2, kernels=kernels, **kw)[0][0]


def _time(nodes, facts=A100) -> float:
    """Sum of the roofline times of the compute nodes."""
    comp = [n for n in nodes if n.num_ops]
    t = NS(duration_micros=np.zeros(len(comp)), num_ops=np.array([n.num_ops for n in comp]),
           tensor_size=np.array([n.tensor_size for n in comp]),
           op_kind=np.array([OP_KINDS.index(n.op_kind) for n in comp], np.int8),
           gemm_m=np.array([MISSING if n.gemm_m is None else n.gemm_m for n in comp], np.int64),
           gemm_n=np.array([MISSING if n.gemm_n is None else n.gemm_n for n in comp], np.int64))
    r = Roofline(facts)
    return sum(r.time(t, i) for i in range(len(comp)))


# ------------------------------------------------------------------ GEMM shape model
def test_aligned_gemm_runs_at_the_sourced_peak():
    """Tiles that fill every wave: the GEMM runs at the preset's best-shape efficiency (271.2 of 312 TFLOP/s)."""
    sms = GPU_SMS["A100"]
    m, n, k = 256 * sms, 128 * 8, 4096
    assert gemm_utilization(m, n, sms) == 1.0
    t = NS(duration_micros=np.zeros(1), num_ops=np.array([2 * m * n * k]), tensor_size=np.array([n * k * 2]),
           op_kind=np.array([0], np.int8), gemm_m=np.array([m]), gemm_n=np.array([n]))
    assert Roofline(A100).time(t, 0) == pytest.approx(2 * m * n * k / 271.2e12, rel=1e-12)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 20000), st.integers(1, 20000), st.integers(1, 200))
def test_utilization_is_outputs_over_padded_tiles(m, n, sms):
    """0 < utilization <= 1, and equal to m*n over the whole waves of whole tiles of the better tile."""
    u = gemm_utilization(m, n, sms)
    padded = min(math.ceil(math.ceil(m / r) * math.ceil(n / c) / sms) * sms * r * c for r, c in GEMM_TILES)
    assert 0 < u <= 1 and u == pytest.approx(m * n / padded, rel=1e-12)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 64), st.integers(1, 108))
def test_utilization_grows_as_the_last_wave_fills(rows, tiles_n):
    """With whole tiles, adding tiles to a partial last wave raises the utilization; a full wave reaches 1."""
    sms = 108
    us = [gemm_utilization(256 * rows, 128 * j, sms) for j in range(1, tiles_n + 1)]
    for j in range(1, tiles_n):
        if math.ceil(rows * j / sms) == math.ceil(rows * (j + 1) / sms):  # same number of waves
            assert us[j] > us[j - 1]
    assert gemm_utilization(256 * sms, 128, sms) == 1.0


def test_gpu_without_sm_count_keeps_the_preset_efficiency():
    facts = NS(**{**vars(A100), "gpu_sms": None})
    nodes = _nodes("megatron-2021")
    plain = [n for n in nodes if n.gemm_m is not None and n.op_kind == "gemm"]
    assert plain and _time(plain, facts) < _time(plain, A100)


# ------------------------------------------------------------------ profiles
def test_default_profile_is_the_fa3_te_behaviour():
    """The default writes what netsim wrote before profiles: no shaped GEMMs, one fused attention kernel."""
    a, b = _nodes("fa3-te"), generate_llm(GPT, tp=2, pp=1, dp=1, microbatches=1, seq=512, micro_batch=2)[0][0]
    assert a == b and all(n.gemm_m is None for n in a)


def test_megatron_2021_keeps_the_gemm_operations_and_splits_the_gemms():
    """Every block GEMM is its own node with its shape; forward and backward GEMM operations are the same
    as the default's, and each shaped node's operations are 2 m n k with an integral k."""
    new, old = _nodes("megatron-2021"), _nodes("fa3-te")
    shaped = [n for n in new if n.gemm_m is not None and "core_attn" not in n.name]
    blocks = (".attn", ".mlp", ".attn.dgrad", ".attn.wgrad", ".mlp.dgrad", ".mlp.wgrad")
    assert sum(n.num_ops for n in shaped) == sum(n.num_ops for n in old if n.name.endswith(blocks))
    assert len(shaped) == GPT.layers * (4 + 8)  # 4 GEMMs forward, 8 backward (dgrad and wgrad) per layer
    for n in shaped:  # k: hidden, hidden / tp, ffn / tp, 3 hidden / tp (QKV's dgrad) or the tokens (wgrad)
        k = n.num_ops / (2 * n.gemm_m * n.gemm_n)
        assert k in (GPT.hidden, GPT.hidden // 2, GPT.ffn // 2, 3 * GPT.hidden // 2, 2 * 512)


def test_unfused_attention_costs_what_its_kernels_move():
    """Megatron-LM 2021 (transformer.py at de7dc40): both bmm over the full s x s scores (no causal skip: twice
    the fused kernel's causal operations), and the softmax and dropout read and write the scores in HBM."""
    new, old = _nodes("megatron-2021"), _nodes("fa3-te")
    fwd = [n for n in new if ".fwd." in n.name and ".core_attn" in n.name]
    fused = [n for n in old if ".fwd." in n.name and n.name.endswith(".core_attn")]
    assert sum(n.num_ops for n in fwd if n.op_kind == "gemm") == 2 * sum(n.num_ops for n in fused)
    scores = 2 * 512 * 512 * (GPT.heads // 2) * 2  # micro-batch x seq x seq x local heads, 2 bytes each
    soft = [n for n in fwd if n.name.endswith(".softmax")]
    drop = [n for n in fwd if n.name.endswith(".dropout")]
    assert [n.tensor_size for n in soft] == [2 * scores] * GPT.layers
    assert [n.tensor_size for n in drop] == [2 * scores + scores // 2] * GPT.layers  # one-byte mask
    # the roofline times the score kernels at the HBM roof: bytes / (BabelStream's fraction x 2.039 TB/s)
    assert _time(soft[:1]) == pytest.approx(2 * scores / (1.70e12), rel=1e-9)


def test_megatron_2021_is_slower_by_its_extra_traffic_and_its_tiles():
    """On A100 the 2021 kernels take longer than today's; the difference is at least the HBM time of the
    score kernels the unfused attention adds (softmax, dropout and their backward)."""
    new, old = _nodes("megatron-2021"), _nodes("fa3-te")
    extra = [n for n in new if n.name.endswith((".softmax", ".dropout", ".softmax.bwd", ".dropout.bwd"))]
    assert _time(new) - _time(old) >= _time(extra)


def test_selective_recompute_reruns_the_unfused_forward():
    nodes = _nodes("megatron-2021", recompute="selective")
    assert sum(n.name.endswith("core_attn.recompute.softmax") for n in nodes) == GPT.layers


# ------------------------------------------------------------------ command line and runs
def _netsim(*args):
    return subprocess.run([sys.executable, "-m", "netsim", *args], capture_output=True, text=True)


def test_bad_kernels_name_exits_2_with_one_line(tmp_path):
    for cmd in (["run", "--topology", "topologies/dgx-a100.yaml", "--llm", "llama3-8b", "--tp", "8", "--pp", "1",
                 "--dp", "1", "--kernels", "fa2"],
                ["workload", "llm", "--llm", "llama3-8b", "--tp", "8", "--pp", "1", "--dp", "1", "--kernels", "fa2",
                 "--out", str(tmp_path / "w")]):
        p = _netsim(*cmd)
        assert p.returncode == 2 and "Traceback" not in p.stderr
        assert p.stderr.strip().splitlines() == [
            "netsim: error: --kernels: expected one of fa3-te, megatron-2021, got 'fa2'"]


def test_runs_records_the_profile(tmp_path):
    import netsim

    for kernels in ("fa3-te", "megatron-2021"):
        out = tmp_path / kernels
        p = _netsim("run", "--topology", "topologies/dgx-a100.yaml", "--llm", "llama3-8b", "--tp", "8", "--pp", "1",
                    "--dp", "1", "--microbatches", "1", "--seq", "512", "--kernels", kernels, "--out", str(out),
                    "--model", "analytical", "--json", "-q")
        assert p.returncode == 0, p.stderr
        runs = netsim.open_results(str(out)).runs
        assert runs["kernels"].tolist() == [kernels]
        assert json.loads(p.stdout)["iteration_us"] > 0


def test_megatron_2021_backward_tp_allreduce_is_synchronous():
    """Megatron-LM 2021 (mpu/mappings.py, _CopyToModelParallelRegion.backward): the input gradient's all-reduce
    waits for the layer's whole backward and the next kernel waits for it; today's runs it beside the wgrad."""
    for kernels, on_chain in (("megatron-2021", True), ("fa3-te", False)):
        nodes = _nodes(kernels)
        ids = {n.id: n for n in nodes}
        ars = [n for n in nodes if ".bwd." in n.name and n.name.endswith("_allreduce")]
        assert ars
        for ar in ars:  # on the chain: the node after it depends on it alone (no side branch)
            nxt = ids.get(ar.id + 1)
            assert (nxt is not None and nxt.data_deps == (ar.id,)) == on_chain, (kernels, ar.name)


def test_written_traces_carry_the_shapes_and_run_alike(tmp_path):
    """`netsim workload llm --kernels megatron-2021` writes gemm_m / gemm_n; running the files gives the in-memory
    run's iteration time to the nanosecond."""
    from netsim.workload.generate.llm import write_llm_workload
    from netsim.workload.llmrun import simulate_llm
    from netsim.workload.simulation import simulate
    from netsim.chakra import read_et_table

    kw = dict(tp=2, pp=2, dp=1, microbatches=2, seq=256, micro_batch=1, kernels="megatron-2021")
    prefix = write_llm_workload(tmp_path / "w", GPT, jobs=1, **kw)
    t = read_et_table(f"{prefix}.0.et")
    shaped = np.flatnonzero(t.gemm_m != MISSING)
    assert shaped.size and (t.gemm_n[shaped] != MISSING).all()
    topo = "topologies/dgx-a100.yaml"
    files = simulate(topo, str(prefix), str(tmp_path / "w" / "comm_groups.json"), "analytical")
    memory = simulate_llm(topo, GPT, model="analytical", **kw)
    assert files.finish.max() == pytest.approx(memory.finish.max(), abs=1e-9)
