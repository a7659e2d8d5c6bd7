"""docs/workloads.md: every prose number, and how the code bears it out."""

from __future__ import annotations

import re

from doc_claims import CPU, DIGITS, REPO, claims_for

C = claims_for("workloads.md")


def _16k_layout() -> list[int]:
    """The README's 16,384-rank run: TP8 PP16 DP128 (its command line)."""
    cmd = re.search(r"--tp (\d+) --pp (\d+) --dp (\d+) --microbatches 16 --seq 8192",
                    (REPO / "README.md").read_text())
    return [int(cmd[1]) * int(cmd[2]) * int(cmd[3])]


def _random_seed() -> list[int]:
    import numpy as np

    from netsim.topology.placement import place

    assert (place("random", 8, 64) == place("random:0", 8, 64)).all()
    assert not (place("random", 8, 64) == place("random:1", 8, 64)).all()
    return [0] if np.unique(place("random", 8, 64)).size == 8 else [-1]


def _skew_tol() -> list[float]:
    from netsim.workload.symmetry import SKEW_TOL_S

    return [SKEW_TOL_S]


def _differential() -> list[int]:
    """The node sizes of the differential test's fabrics, and its examples in the default and slow tiers."""
    src = (REPO / "tests/test_symmetry_differential.py").read_text()
    fabrics = src[src.index("FABRICS = ["):src.index("]\n", src.index("FABRICS = ["))]
    sizes = sorted({8} | {int(g) for g in re.findall(r'"node.gpus": (\d+)', fabrics)})
    default = slow = 0
    for m in re.finditer(r"(@pytest\.mark\.slow\n)?@settings\(max_examples=(\d+)", src):
        if m[1]:
            slow += int(m[2])
        else:
            default += int(m[2])
    return [*sizes, default, slow]


def _parallel_ranks() -> list[int]:
    from netsim.chakra.canonical import PARALLEL_RANKS

    return [PARALLEL_RANKS]


def _file_rtol() -> list[float]:
    src = (REPO / "tests/test_file_symmetry.py").read_text()
    found = set(re.findall(r"rtol=(1e-\d+)", src))
    assert found == {"1e-9"}, found
    return [1e-9]


def _efficiency_row(gpu: str, kinds: tuple[str, ...]):
    def check() -> list[float]:
        from netsim.topology.builders import GPU_EFFICIENCY, GPU_PRESETS

        eff, p = GPU_EFFICIENCY[gpu], GPU_PRESETS[gpu]
        out = []
        for kind in kinds:
            peak = p["mem_bw_Bps"] / 1e12 if kind == "elementwise" else p["peak_flops"] / 1e12
            out += [eff[kind] * peak, peak, eff[kind]]
        return out
    return check


def _efficiency_bounds() -> list[float]:
    from netsim.errors import InputError
    from netsim.workload.simulation import check_compute_efficiency

    for bad in (0, 1.01):
        try:
            check_compute_efficiency(bad)
        except InputError:
            continue
        raise AssertionError(f"{bad} accepted")
    check_compute_efficiency(1)
    return [0, 1]


def _writer() -> list[int]:
    from netsim.workload.generate.writer import BATCH, MIN_RANKS_PER_JOB

    return [BATCH, MIN_RANKS_PER_JOB]


def _progress() -> list[float]:
    from netsim import progress

    return [progress.DELAY_S, progress.STATUS_EVERY_S, progress.STATUS_AFTER_S]


def _chakra_write_cases() -> list[int]:
    src = (REPO / "benchmarks/bench_chakra_write.py").read_text()
    per_dp = int(re.search(r'"ranks": (\d+) \* dp', src)[1])
    return sorted({per_dp * int(dp) for dp in re.findall(r'", (\d+)[,)]', src)})


def _tp_splits() -> list[int]:
    from netsim.workload.generate.layers import TP_SPLITS

    return [TP_SPLITS, TP_SPLITS]


def _8k_run() -> dict:
    import time

    from netsim.workload.llmrun import simulate_llm

    t0 = time.process_time()
    res = simulate_llm(str(REPO / "topologies/h100-fat-tree-16k.yaml"), "llama3-405b", tp=8, pp=16, dp=64,
                       microbatches=32, seq=8192)
    return {"gpus": int(res.finish.size), "step_s": float(res.finish.max()), "cpu_s": time.process_time() - t0}


def _8k() -> list[float]:
    from _harness import run_case

    r = run_case(_8k_run)
    return [r["gpus"], 32, r["cpu_s"], r["step_s"]]


def _quarter_allreduce() -> list[float]:
    """The tiny model of tests/test_generate_overlap.py at TP8 on one DGX H100: one block's all-reduce
    (4,096 tokens of hidden 2,048 in BF16) and a quarter of it."""
    import netsim
    from test_generate_overlap import TINY

    src = (REPO / "tests/test_generate_overlap.py").read_text()
    assert 'kw = dict(tp=8, pp=1, dp=1, microbatches=1, seq=4096, symmetry="none")' in src
    size = 4096 * TINY.hidden * 2
    whole, quarter = netsim.bench(netsim.load_topology(REPO / "topologies/dgx-h100.yaml"), "all_reduce",
                                  [size, size // 4], gpus=8)
    return [quarter.time_us, whole.time_us]


def _sm_closed_form() -> list[float]:
    from netsim.topology.builders import GPU_SMS

    src = (REPO / "tests/test_sm_contention.py").read_text()
    assert "1 ms + T_c * nc / 132" in src and "def test_compute_overlapping_an_all_reduce_loses_the_channels_sms" in src
    assert GPU_SMS["H100"] == 132
    return [1, 1]


def _sms() -> list[int]:
    from netsim.topology.builders import GPU_SMS

    return [GPU_SMS["V100"], GPU_SMS["A100"], GPU_SMS["H100"]]


def _deepep_sms() -> list[int]:
    from netsim.workload.moe_run import DEEPEP_NORMAL_SMS

    return [DEEPEP_NORMAL_SMS]


def _nccl_block() -> list[int]:
    """NCCL's block: netsim's thread cap (LL128's 640 = ``NCCL_MAX_NTHREADS``) times the register cap."""
    from netsim.collectives.nccl import _MAX_THREADS

    threads = max(_MAX_THREADS.values())
    return [threads, 96, threads * 96]


def _elementwise() -> list[float]:
    """Bytes of each element-wise kernel in activations x (or hidden states F), from the generator's costs."""
    from netsim.workload.generate.layers import Costs
    from netsim.workload.generate.model import ModelSpec

    def costs(gated):
        spec = ModelSpec("t", layers=1, hidden=64, ffn=256, heads=4, vocab=100, gated_mlp=gated)
        return Costs(spec, tp=1, cp=1, tokens=8, seq=8, dtype_bytes=2, local_experts=1)

    c, g = costs(True), costs(False)
    x, f = c.act, 8 * 256 * 2
    qk = 8 * (64 + c.spec.kv_hidden) * 2
    norm = [c.elementwise("final", True) / x, c.elementwise("final", False) / x]
    resid = [(c.elementwise("attn", d) - c.elementwise("final", d) - 2 * qk) / x for d in (True, False)]
    swiglu = [(c.elementwise("mlp", d) - c.elementwise("final", d) - 3 * x) / f for d in (True, False)]
    gelu = [(g.elementwise("mlp", d) - g.elementwise("final", d) - 3 * x) / f for d in (True, False)]
    emb = [c.elementwise("embedding", True) / x, c.elementwise("embedding", False) / x]
    assert swiglu == [3, 5] and gelu == [2, 3], (swiglu, gelu)  # the table's 3F, 5F, 2F, 3F
    return [norm[0], norm[1], resid[0], resid[1], emb[0], emb[1]]


def _vpp() -> list[int]:
    """The interleaved schedule's default chunks per stage (the least it takes is 2)."""
    from netsim.errors import InputError
    from netsim.workload.generate.plan import _virtual_stages

    try:
        _virtual_stages("interleaved", 1, 2, 2)
        raise AssertionError("vpp 1 accepted")
    except InputError:
        pass
    assert _virtual_stages("interleaved", 2, 2, 2) == 2  # V >= 2
    return [_virtual_stages("interleaved", None, 2, 2)]


def _preset(name: str):
    from netsim.workload.generate.presets import load_model_spec

    return load_model_spec(name)


def _dtype_dispatch() -> list[int]:
    from netsim.perftests.moe import DTYPE_BYTES

    return [DTYPE_BYTES["moe_dispatch"]]


def _tiles() -> list[float]:
    from netsim.workload.compute import GEMM_TILES

    assert GEMM_TILES == ((256, 128), (128, 256))
    return [256, 128, 128, 256]


def _wave_example() -> list[float]:
    """2048 x 2304 outputs (an 18B QKV at TP8, one sequence): 144 tiles of 256x128, two waves of A100's 108 SMs."""
    from netsim.topology.builders import GPU_SMS
    from netsim.workload.compute import gemm_utilization

    sms = GPU_SMS["A100"]
    return [2048 // 256 * 2304 // 128, sms, 100 * gemm_utilization(2048, 2304, sms)]



def _optimizer_bytes() -> list[int]:
    """The step's bytes per FP16 weight (tests/test_megatron_2021_step.py checks them pass by pass)."""
    from netsim.workload.generate.kernels import fp16_optimizer_bytes

    return [fp16_optimizer_bytes(2)]


CLAIMS = [
    C("then (with EP > 1\nand more than one rank per expert) the expert-data-parallel groups", lambda: [1],
      by_test="tests/test_generate_llm.py::test_expert_gradients_reduce_over_expert_data_parallel_group"),
    C("Under EP > 1 the routed experts' gradients have their own buckets", lambda: [1],
      by_test="tests/test_generate_llm.py::test_expert_gradients_reduce_over_expert_data_parallel_group"),
    C("Two mechanisms keep that affordable at 16,384 ranks", _16k_layout),
    C("seed 0 by default", _random_seed),
    C("(to 1e-12 s)", _skew_tol),
    C("6-, 8- and 12-GPU domains, oversubscribed leaves, every routing policy, both models, packed, strided and "
      "random placements, generated jobs and file sets) and checks the default against `--symmetry none --engine "
      "event` on every rank's finish and every link's bytes (30 examples in the default test run, 200 in the "
      "`slow` tier)", _differential),
    C("From 1,024 ranks on a process pool", _parallel_ranks),
    C("writes the 16,384 files", lambda: [_16k_layout()[0]]),
    C("(finish times to 1e-9)", _file_rtol),
    C("| H100 | 794.5 / 989 = 0.803 | 646 / 989 = 0.653 | 559 / 989 = 0.565 | 2.97 / 3.35 = 0.887 |",
      _efficiency_row("H100", ("gemm", "attn_fwd", "attn_bwd", "elementwise"))),
    C("| A100 | 271.2 / 312 = 0.869 | roofline (no figure) | roofline (no figure) | 1.70 / 2.039 = 0.834 |",
      _efficiency_row("A100", ("gemm", "elementwise"))),
    C("| B200 | 1745.0 / 2250 = 0.776 |", _efficiency_row("B200", ("gemm",))),
    C("| GB200 | 1822.0 / 2500 = 0.729 |", _efficiency_row("GB200", ("gemm",))),
    C("head dimension 128", lambda: [_preset("llama3-405b").hidden // _preset("llama3-405b").heads],
      why="FlashAttention-3's benchmark setting (the source's), as Llama 3's head dimension"),
    C("- `F` (0 < F ≤ 1)", _efficiency_bounds),
    C("16,384 ranks, TP8 PP16 DP128", _16k_layout),
    C("hold `Buffer.num_sms` = 20 SMs", _deepep_sms),
    C("An NCCL block is up to 640 threads (`NCCL_MAX_NTHREADS`, `src/include/device.h:93`) of at most 96 "
      "registers each (`-maxrregcount=96`, `makefiles/common.mk:103`). That is up to 61,440", _nccl_block),
    C("of an SM's 65,536 registers (CUDA C++ Programming Guide", why="a hardware constant, with its source"),
    C("V100 80, A100 108, H100 SXM5 132", _sms),
    C("1 ms of compute beside an all-reduce of duration T on `nc` channels ends at 1 ms + T·nc/132", _sm_closed_form),
    C("batch of up to 512 ranks of one stage", lambda: _writer()[:1]),
    C("fewer than 64 ranks per process", lambda: _writer()[1:]),
    C("a bar with the ETA on a terminal after 2 s, else (logs, CI, notebooks) one status line every 30 s from 10 s on",
      _progress),
    C("for 128, 1,024 and 16,384 ranks", _chakra_write_cases),
    C("(chunks > 0)", why="the source's condition (Megatron-LM's code), quoted"),
    C("(no buckets off pp rank 0)", why="a rank's index in the source's terms (the first pipeline stage)"),
    C("sends to stage 0's chunk", why="a stage's index (the first stage)"),
    C("cut into 4 pieces", lambda: _tp_splits()[:1]),
    C("with `num_splits` 4", lambda: _tp_splits()[:1], why="Transformer Engine's value, which netsim's TP_SPLITS is"),
    C("the README's 16,384-rank Llama-3-405B run", _16k_layout),
    C("at 8,192 GPUs (TP8 PP16 DP64, flow model, no `--sequence-parallel`, 32 microbatches) shows the difference: "
      "before the fix it did not finish in minutes of CPU time; it now takes 44 CPU-s for a 12.33 s step",
      _8k, tol=[DIGITS, DIGITS, CPU, DIGITS], slow=True),
    C("a quarter-size all-reduce takes 52 us against 123 us for the whole one", _quarter_allreduce),
    C("`V ≥ 2` (default 2)", _vpp),
    C("The Llama 3 and Mixtral presets have 8 KV heads",
      lambda: [_preset("llama3-405b").kv_heads] if _preset("mixtral-8x7b").kv_heads == _preset(
          "llama3-405b").kv_heads else [-1]),
    C("(DeepSeek-V3: 3)", lambda: [_preset("deepseek-v3").dense_layers]),
    C("| RMSNorm (two per layer, one final) | read x, write y: 2x | read dy and x, write dx: 3x |\n"
      "  | residual add (two per layer) | read two, write one: 3x | sum of two gradients: 3x |\n"
      "  | rotary embeddings on Q and K | read and write Q and K | the same |\n"
      "  | SwiGLU on the `ffn`-wide hidden state F | read gate and up, write: 3F | read dy, gate, up; write two: 5F |\n"
      "  | GELU (`gated_mlp: false`) | 2F | 3F |\n"
      "  | embedding lookup (first stage) | read rows, write x: 2x | scatter-add: 3x |", _elementwise),
    C("e.g. 1 for DeepSeek-V3's FP8 dispatch", _dtype_dispatch),
    C('`"3e8efa..."` becomes group 3', lambda: [int(re.match(r"\d+", "3e8efa")[0])],
      why="what C++'s std::stoi reads from that name (its leading digits)"),
    C("cuBLAS's most efficient kernels compute 256 × 128 or\n128 × 256 output tiles", _tiles),
    C("a GEMM of 144 tiles on\nthe A100's 108 SMs (two waves) at 67 % of it", _wave_example),
    C("A bad name is one line and exit\nstatus 2", lambda: bad_kernels_status()),
    C("52 bytes per FP16 weight (`fp16_optimizer_bytes`)", _optimizer_bytes),
]



def bad_kernels_status() -> list[int]:
    from netsim.cli import main

    return [main(["run", "--topology", str(REPO / "topologies/dgx-a100.yaml"), "--llm", "llama3-8b", "--tp", "8",
                  "--pp", "1", "--dp", "1", "--kernels", "fa2"])]
