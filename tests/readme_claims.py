"""Every number README.md states in prose, with how the code bears it out (tests/test_readme_numbers.py).

Each :class:`~readme_numbers.Claim` quotes the README (whitespace-insensitive) and returns the values
the code produces for its numbers, in order.  Simulated results are compared to the digits the README
prints; CPU seconds measured here within a factor of 2 (a shared machine's noise, stated in the
README); bounds the README states (``under 1 CPU-s``) as bounds.  Cheap checks run in the default
tier; those that simulate for minutes are ``slow`` (``pytest -m slow tests/test_readme_numbers.py``)
and run the benchmark functions whose command the README shows beside the number.
"""

from __future__ import annotations

import re
import sys
from functools import lru_cache, partial
from pathlib import Path

import numpy as np

from readme_numbers import Claim

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
CPU = ("factor", 2.0)
DIGITS = "digits"


@lru_cache(maxsize=None)
def topo(name: str):
    from netsim.topology import load_topology

    return load_topology(REPO / "topologies" / f"{name}.yaml")


def _yaml(path: Path) -> dict:
    import yaml

    return yaml.safe_load(path.read_text())


def _shipped_tiers() -> list[int]:
    tiers = {len(_yaml(p)["scale_out"]["tiers"]) for p in (REPO / "topologies").glob("*.yaml")
             if _yaml(p).get("scale_out", {}).get("kind") == "fat_tree"}
    return [min(tiers), max(tiers)]


def _largest_shipped() -> float:
    """GPUs of the largest shipped topology (fat-tree-64k, checked against the others' node counts)."""
    def gpus(path: Path) -> int:
        doc = _yaml(path)
        node = doc.get("node") or {}
        return doc.get("nodes", 1) * (node.get("gpus") or (72 if "nvl72" in str(node.get("preset")) else 8))

    sizes = {p.stem: gpus(p) for p in (REPO / "topologies").glob("*.yaml")}
    assert max(sizes, key=sizes.get) == "fat-tree-64k", sizes
    return topo("fat-tree-64k").n_gpus


def _ring_channels(name: str, gpus: int) -> int:
    from netsim.perftests.collective import BenchConfig, build_plan, validated

    t = topo(name)
    return build_plan(t, validated(BenchConfig("all_reduce", algo="ring", gpus=gpus), t), float(1 << 30)).channels


def _below_core(name: str) -> int:
    """GPUs that reach each other without the core tier (one spine group)."""
    f = topo(name).facts
    return f.gpus_per_node * f.xgft[0].m * f.xgft[1].m


def _nvlink(name: str) -> tuple[float, float]:
    """(achievable, line rate) GB/s of one NVLink of GPU 0."""
    t = topo(name)
    i = int(np.flatnonzero((t.link_src == t.gpus[0]) & (t.link_kind == 0))[0])
    return t.link_bw[i] / t.link_width[i] / 1e9, t.facts.scaleup_Bps_per_gpu / t.link_width[i] / 1e9


def _nic_GBps() -> float:
    """The achievable rate of one 400G NDR NIC's link."""
    from netsim.topology.model import link_tier

    t = topo("h100-superpod-1su")
    assert t.facts.nic_port_Bps == 50e9  # 400 Gb/s
    return float(t.link_bw[np.asarray(link_tier(t)) == "nic"].max() / 1e9)


def _anchors() -> list[float]:
    import validate

    rec = {r["id"]: r for r in validate.RECORDS}
    out = []
    for rid in ("ar-h100-ring", "ar-a100-ring", "sr-ndr", "ar-h100-nvls"):
        r = rec[rid]
        out += ([r["setting"]["gpus"]] if rid != "sr-ndr" else []) + [validate.simulate(r), r["published"]]
    return out


def _drain_range() -> list[float]:
    import test_drain_alone as t
    from netsim.network.maxmin import drain_alone

    late = []
    for seed in (1, 2, 3, 7):
        for n in (100, 400):
            ip, lk, nb, cap = t._instance(seed, n)
            exact = drain_alone(ip, lk, nb, cap, max_rounds=10_000)[0].max()
            late.append(100 * (drain_alone(ip, lk, nb, cap, max_rounds=8, shrink_rounds=16)[0].max() / exact - 1))
    return [min(late), max(late)]


def _oversubscription_tested() -> list[int]:
    text = (REPO / "tests" / "test_engine_exact.py").read_text()
    over = [int(x) for x in re.search(r"over=st\.sampled_from\(\[([\d, ]+)\]\)", text)[1].split(",")]
    return [min(over), max(over)]


def _rtol(test: str) -> float:
    text = (REPO / "tests" / test).read_text()
    found = set(re.findall(r"(?:RTOL = |rtol=)(1e-\d+)", text))
    assert len(found) == 1, found
    return float(found.pop())


def _moe_bytes() -> list[float]:
    from netsim.collectives.moe import FP8_SCALE_BLOCK
    from netsim.perftests.moe import DTYPE_BYTES, MoEConfig, run_moe, validated

    t = topo("dgx-h100")
    s = run_moe(t, validated(MoEConfig("moe_dispatch", tokens=8, gpus=8, model="analytical"), t)).summary
    return [DTYPE_BYTES["moe_dispatch"], FP8_SCALE_BLOCK, s["token_bytes"], s["hidden"], DTYPE_BYTES["moe_combine"]]


def _moe_gate() -> list[int]:
    from netsim.perftests.moe import DEFAULT_MAX_NODES, MoEConfig, run_moe, validated

    t = topo("h100-superpod-1su")
    s = run_moe(t, validated(MoEConfig("moe_dispatch", tokens=64, gpus=64, model="analytical", max_nodes=0), t)).summary
    return [DEFAULT_MAX_NODES, 0 if s["max_nodes_per_token"] > DEFAULT_MAX_NODES else -1]  # 0: no limit


def _deepep() -> list[float]:
    import bench_moe

    out = [8192]
    rows = {g: bench_moe._case("moe_dispatch", g, "analytical") for g in (16, 32)}
    gpn = topo("h100-superpod-1su").gpus_per_node
    for g in (16, 32):
        out += [rows[g]["rdma_GBps"], gpn, g // gpn]
    from published import pair

    return out + [pair("deepep_v2_sm90", 16, "moe_dispatch"), pair("deepep_v2_sm90", 32, "moe_dispatch")]


def _kernel() -> list[float]:
    from functools import partial

    import bench_kernel
    from _harness import run_case

    fast = run_case(partial(bench_kernel._alltoall, "h100-superpod-1024.yaml", 512, "compiled"))
    ref = run_case(partial(bench_kernel._alltoall, "h100-superpod-1024.yaml", 512, "numpy"))
    assert abs(fast["time_us"] / ref["time_us"] - 1) < 1e-9
    return [64, 512, fast["events"], fast["cpu_s"], ref["cpu_s"]]


def _e6() -> list[float]:
    import bench_contention
    from _harness import run_case

    r = run_case(bench_contention.e6_case(448))
    return [64, 448, topo("h100-superpod-1024").n_gpus, r["events"], r["critical"], r["critical"]]


def _ftree_1024() -> list[float]:
    import bench_contention
    from _harness import run_case

    ftree = run_case(bench_contention.e2_case(1024, True, "ftree"))
    spray = run_case(bench_contention.e2_case(1024, True, "spray"))
    assert abs(ftree["time_us"] / spray["time_us"] - 1) < 1e-9, (ftree["time_us"], spray["time_us"])  # "equal to"
    return [64, 1024, ftree["time_us"], ftree["cpu_s"]]


def _ring_16k_nccl() -> list[float]:
    import bench_routing
    from _harness import run_case

    r = run_case(partial(bench_routing._r4, 16384, "auto"))
    assert "staggered" in r["setting"], r
    return [1, 16384, r["cpu_s"]]


def _ring_16k() -> list[float]:
    import bench_network
    from _harness import run_case

    r = run_case(bench_network.p1)
    return [1, _ring_channels("h100-fat-tree-16k", 16384), r["ranks"], r["cpu_s"]]


def _astra_switch() -> list[float]:
    import bench_network
    from _harness import run_case

    p2, p4 = run_case(bench_network.p2), run_case(bench_network.p4)
    return [1, p2["ranks"], p4["ranks"], max(p2["cpu_s"], p4["cpu_s"])]


def _astra_4096() -> list[float]:
    import tempfile

    import bench_astra
    from _harness import run_case

    with tempfile.TemporaryDirectory() as d:
        r = run_case(bench_astra.Case(bench_astra.make_inputs(Path(d), 4096), "auto"))
    assert r["finish_ns"] == bench_astra.expected_ns(4096)
    return [1, r["ranks"], r["cpu_s"]]


def _llama_16k() -> dict:
    import time

    from netsim.workload.llmrun import simulate_llm

    t0 = time.process_time()
    res = simulate_llm(str(REPO / "topologies/h100-fat-tree-16k.yaml"), "llama3-405b", tp=8, pp=16, dp=128,
                       microbatches=16, seq=8192)
    return {"simulated": len(res.run.ranks), "ranks": int(res.finish.size), "cpu_s": time.process_time() - t0}


def _llama_run() -> list[float]:
    from _harness import run_case

    r = run_case(_llama_16k)
    return [r["simulated"], r["ranks"], r["cpu_s"]]


def _superpods() -> list[float]:
    su, big = topo("h100-superpod-1su").n_gpus, topo("h100-superpod-1024").n_gpus
    return [1, su, big // su, big]


def _llama3_24k() -> list[float]:
    f = topo("llama3-24k").facts
    spine = next(t for t in f.switch_tiers if t.name == "spine")
    assert f.oversubscription["leaf"] == 1.0 and spine.up_port_Bps == 400e9 / 8
    return [f.xgft[0].m, f.xgft[0].m * f.xgft[1].m, 1, spine.uplinks, spine.down_ports, f.oversubscription["spine"]]


def _megascale() -> list[float]:
    f = topo("megascale-12k").facts
    assert set(f.oversubscription.values()) == {1.0} and f.rail_optimized
    return [f.nics_per_gpu * f.gpus_per_node, len(f.xgft), 1]


def _ci_pandas() -> list[int]:
    """The pandas majors .ci/run tests on: the pinned venv's, and the one the main run must have."""
    ci = (REPO / ".ci/run").read_text()
    return [int(re.search(r"'pandas>=(\d)\.\d+,<\d'", ci)[1]), int(re.search(r"split\('\.'\)\[0\]\) < (\d)", ci)[1])]


def _refused_digit() -> list[int]:
    from netsim.cli import main

    assert main(["bench", "--topology", str(REPO / "topologies/dgx-h100.yaml"), "--op", "all_reduce",
                 "--gpus", "٣"]) == 2
    return [int("٣")]  # what Python would have read


def _units() -> list[float]:
    from netsim import units

    return [units.parse_size("1K"), units.parse_bandwidth("50GB/s") / 50]


def _reported_gbps() -> list[float]:
    from netsim.results.nccl_table import make_row

    row = make_row("sendrecv", 10**9, 2, 1.0)  # 1e9 bytes in 1 s
    assert row.algbw_GBps == 1.0
    return [1e9]


def _frame_ns() -> list[float]:
    from netsim.results.nccl_table import make_row, rows_to_frame

    row = make_row("sendrecv", 1024, 2, 3e-6)
    return [rows_to_frame("sendrecv", [row], 2)["end_ns"].iloc[0] / row.time_us]


def _error_status() -> list[int]:
    from netsim.cli import main

    return [main(["topo", str(REPO / "topologies/h100-superpod-1su.yaml"), "--set", "scale_out.nic_bw=400"])]


CLAIMS = [
    Claim("NVSwitch domains (HGX 8-GPU", lambda: [topo("dgx-h100").n_gpus]),
    Claim("fat-tree InfiniBand fabrics (2 and 3 tiers", _shipped_tiers),
    Claim("up to 65,536 GPUs", lambda: [_largest_shipped()]),
    Claim("needs only Python ≥ 3.11", lambda: [float(re.search(r'requires-python = ">=([\d.]+)"',
                                                                (REPO / "pyproject.toml").read_text())[1])]),
    Claim("tests once more on pandas 2.)", lambda: _ci_pandas()[:1]),
    Claim("(The 16,384-GPU row uses the analytical model",
          lambda: [int(re.search(r"--gpus (\d+) --model analytical", (REPO / "README.md").read_text())[1])]),
    Claim("NCCL's 16 rings share each GPU's NVLink, and at 16,384 GPUs",
          lambda: [_ring_channels("h100-fat-tree-16k", 16384), topo("h100-fat-tree-16k").n_gpus]),
    Claim("the 1 GiB all-reduce over all 16,384 GPUs on the flow model takes 10 CPU-s", _ring_16k_nccl,
          tol=[DIGITS, DIGITS, CPU], slow=True),
    Claim("At 8,192 GPUs, where no ring crosses the core tier", lambda: [_below_core("h100-fat-tree-16k")]),
    Claim("(`-b 8 -e 1G -f 4` ends at 512 MiB)",
          lambda: [__import__("netsim.perftests.collective", fromlist=["x"]).sweep_sizes(8, 1 << 30, 4)[-1] / 2**20]),
    Claim("the two agree to 1e-9 (`tests/test_analytical_bound.py`; both models plan every NCCL channel as its own "
          "flow", lambda: [_rtol("test_analytical_bound.py")]),
    Claim("A step whose drain has more than 8 levels (an uneven all-to-all) is finished in up to 16 coarser rounds",
          lambda: [__import__("netsim.network.analytical", fromlist=["x"]).STEP_SOLVES,
                   __import__("netsim.network.analytical", fromlist=["x"]).SHRINK_SOLVES]),
    Claim("and 4–12 % slower than the fluid drain on random batches (`tests/test_drain_alone.py`)", _drain_range,
          tol=[("at_least", None), ("at_most", None)]),
    Claim("chooses like NCCL 2.30**", lambda: [float(".".join(
        __import__("netsim.ncclfacts", fromlist=["x"]).NCCL_VERSION.split(".")[:2]))]),
    Claim("NCCL's `topo.h`: 20.6 of 25 GB/s per H100 link, 20.0 A100, 40.1 of 50 B200; NDR ≈ 48 GB/s per 400G NIC",
          lambda: [*_nvlink("dgx-h100"), _nvlink("dgx-a100")[0], *_nvlink("gb200-nvl72"), _nic_GBps()]),
    Claim("8×H100 ring all-reduce 370 GB/s (≈370), 8×A100 240 (≈240), one NDR NIC 48.0 GB/s (47), 8×H100 "
          "NVLS 471 (≈480)", _anchors),
    Claim("H100 GEMMs at 794.5 of 989 TFLOP/s", lambda: [
        __import__("netsim.topology.builders", fromlist=["x"]).GPU_EFFICIENCY["H100"]["gemm"] * 989,
        __import__("netsim.topology.builders", fromlist=["x"]).GPU_PRESETS["H100"]["peak_flops"] / 1e12]),
    Claim("FlashAttention-3's 646 forward and 559 backward", lambda: [
        __import__("netsim.topology.builders", fromlist=["x"]).GPU_EFFICIENCY["H100"][k] * 989
        for k in ("attn_fwd", "attn_bwd")]),
    Claim("Checked against 98 published measurements (90 never used for calibration)",
          by_test="tests/test_validate.py::test_readme_counts_the_records"),
    Claim("checks on random placements, 1:1 to 8:1 oversubscription", _oversubscription_tested),
    Claim("equals it to 1e-9 on every rank's finish time", lambda: [_rtol("test_engine_exact.py")]),
    Claim("Once a run passes 1,000 flow events", lambda: [__import__("netsim.network.flow", fromlist=["x"]).COMPILE_AFTER]),
    Claim("tested equal to it to 1e-9 on random transfers", lambda: [_rtol("test_compiled_flow.py")]),
    Claim("A 64 MiB all-to-all hashed by ECMP on 512 GPUs (25,225 flow events) takes 4 CPU s instead of 35",
          _kernel, tol=[DIGITS, DIGITS, DIGITS, CPU, CPU], slow=True),
    Claim("a 64 MiB all-to-all on 448 GPUs of the 1,024-GPU superpod has 10,654 of them. An exact engine could "
          "batch only events whose flows share no link; the longest chain of events that do is 532 long here, so "
          "it would still need 532 rounds", _e6, slow=True),
    Claim("the 64 MiB all-to-all on all 1,024 GPUs takes 1,517 µs, equal to packet spraying, in 20 CPU-s (E2)",
          _ftree_1024, tol=[DIGITS, DIGITS, DIGITS, CPU], slow=True),
    Claim("a 1 GiB single-ring all-reduce (one ring, `netsim.collectives.ring.ring_all_reduce`, not NCCL's 16 "
          "channels) over all 16,384 GPUs of `h100-fat-tree-16k.yaml`, flow model: 3 CPU-s (P1)",
          _ring_16k, tol=[DIGITS, DIGITS, DIGITS, CPU], slow=True),
    Claim("A 1 MiB ring all-reduce on a 1,024-NPU ASTRA-sim Switch network with ASTRA-sim semantics, and on 4,096 "
          "NPUs: under 1 CPU-s each", _astra_switch, tol=[DIGITS, DIGITS, DIGITS, ("at_most", None)], slow=True),
    Claim("(default 4, DeepSeek-V3 §2.1.2; 0 = no limit)", _moe_gate),
    Claim("**FP8** (1 byte per hidden element plus DeepEP's one FP32 scale per 128 elements: 7,392 bytes per "
          "token at hidden 7168; `tests/test_internode.py` `fp8_factor`), combine in **BF16** (2 bytes)", _moe_bytes),
    Claim("At 8,192 tokens (`python benchmarks/bench_moe.py`) the analytical model gives 87 GB/s RDMA at EP 8×2 "
          "and 60 GB/s at EP 8×4, against DeepEP's published 90 and 61 GB/s", _deepep),
    Claim("gives 133.8 ms against 124.8 ms uniform (126.0 ms with the default uniform all-to-all, which sends one "
          "copy per expert rather than per destination GPU) and 130.2 ms",
          by_test="tests/test_moe_run.py::test_readme_moe_figures"),
    Claim("GPU preset when the duration is 0", why="an input's meaning: a compute node whose duration_micros is 0"),
    Claim("with a deadlock report (exit 2)", by_test="tests/test_deadlocks.py::test_skipped_collective_exits_2"),
    Claim('honoured, **including key "0"** (ASTRA-sim treats "0" as the world and ignores that key; several '
          'public traces use "0" for a subgroup); `pg_name` matches keys by numeric value (`"1.0"` is group 1); '
          '`pg_name` absent or `""` is the world, as is `"0"` when the JSON has no key "0"',
          why="communicator group names (keys of ASTRA-sim's comm-group JSON)"),
    Claim("That run is exact: it simulates 128 of the 16,384 ranks, one data-parallel replica, and takes 29 CPU-s",
          _llama_run, tol=[DIGITS, DIGITS, CPU], slow=True),
    Claim("runs the 16,384 files `netsim workload llm` writes for the layout above", lambda: [
        int(np.prod([__import__("bench_file_symmetry").BIG[k] for k in ("tp", "pp", "dp")]))]),
    Claim("(Llama 3 8B/70B/405B", why="a model's name"),
    Claim("(Llama 3 all-gather context parallelism)", why="a model's name"),
    Claim("reproduces ASTRA-sim to the nanosecond (117,780 ns on its `rt_template` case)",
          by_test="tests/test_astra_exact.py::test_rt_template_reference_stdout", traces=True),
    Claim("A 1 MiB ring all-reduce on 4,096 NPUs takes 1 CPU-s", _astra_4096, tol=[DIGITS, DIGITS, CPU], slow=True),
    Claim("with exit status 2 where ASTRA-sim exits 0",
          by_test="tests/test_astra_streams.py::test_command_line_exit_status_and_output",
          why="0: ASTRA-sim's own exit status when it hangs (docs/astra.md)"),
    Claim("DGX-1, 8×V100", lambda: [topo("dgx1-v100-nvlink").n_gpus]),
    Claim("one 8-GPU NVSwitch node (300 / 450 GB/s per GPU per direction)", lambda: [
        topo("dgx-h100").n_gpus, topo("dgx-a100").facts.scaleup_Bps_per_gpu / 1e9,
        topo("dgx-h100").facts.scaleup_Bps_per_gpu / 1e9]),
    Claim("72-GPU NVLink5 domain", lambda: [topo("gb200-nvl72").n_gpus]),
    Claim("DGX H100 SuperPOD, 1 SU (256 GPUs) and 4 SUs (1,024)", _superpods),
    Claim("2,048 DGX H100, rail-optimized 3-tier NDR", lambda: [
        topo("h100-fat-tree-16k").facts.nodes, len(topo("h100-fat-tree-16k").facts.xgft)]),
    Claim("Meta Llama 3 style", why="a model's name"),
    Claim("16 GPUs per ToR, 3,072-GPU pods, 1:7 above pods (built as 28 × 400G uplinks per 192 down, 6.86:1)",
          _llama3_24k),
    Claim("MegaScale style: 8×200G rail NICs per A100 server, 3-tier 1:1", _megascale),
    Claim("65,536 GPUs, the largest 3-tier radix-64", lambda: [
        topo("fat-tree-64k").n_gpus, len(topo("fat-tree-64k").facts.xgft)]),
    Claim("are binary (1024-based), as are `KiB`/`MiB`/`GiB`; `KB`/`MB`/`GB` are decimal. Bandwidths: "
          "`400Gbps` / `400Gb/s` are bits, `50GB/s` is 1e9 bytes/s", _units),
    Claim("Reported GB/s are always 1e9 bytes/s", _reported_gbps),
    Claim("`end_ns` = 1000 × `time_us`", _frame_ns),
    Claim("work under pandas 2 and 3.", _ci_pandas),
    Claim("once a command has run for 2 s", lambda: [__import__("netsim.progress", fromlist=["x"]).DELAY_S]),
    Claim("CPU seconds within a factor of 2", lambda: [CPU[1]]),
    Claim("and must exit 0", why="the exit status a runnable example must end with (tests/test_docs_examples.py)"),
    Claim("the field and what was expected, and exit status 2:", _error_status),
    Claim("is refused, not read as 3", _refused_digit),
    # ------------------------------------------------------------------ Progress
    Claim("has run for 2 s. Elsewhere (a log, CI, a notebook): the same text as one line, the first after 10 s "
          "and then one every 30 s", lambda: [_progress().DELAY_S, _progress().STATUS_AFTER_S,
                                               _progress().STATUS_EVERY_S]),
    Claim("bench:  42% [01:03<01:27, size 1GiB (1 of 1), 3,051.2 us simulated]",
          why="an illustration of the status line's format (tests/test_cli_surfaces.py checks the real one)"),
    Claim("differ 200x in cost", by_test="tests/test_progress.py::test_docs_state_the_sweep_eta_constants",
          why="the ratio the sweep ETA is built for (docs/sweeps.md, checked there)"),
    Claim("(estimated at 20 CPU-s or more) it prints, within 5 s of starting",
          lambda: [_estimate_note_s(), 5.0]),
    Claim("netsim bench: estimate: about 3 min of CPU time (16,384 GPUs, flow model: 19.4M transfers simulated "
          "event by event; README.md#progress); --model analytical takes about 18 s",
          by_test="tests/test_estimate.py::test_16k_flow_bench_prints_estimate_and_alternative_within_5s",
          why="the line the 16k bench prints; the test checks its form and timing, the model's figures are "
              "the table's"),
    Claim("per size: 0.01 s, plus 1.2 µs per *routed* transfer (the transfers of the schedule's distinct steps: "
          "a repeated step is routed once), plus 4 µs per transfer the flow model *simulates* (each phase's "
          "transfers times the repetitions simulated before the executor fast-forwards it: 5, or 24 for rings; "
          "every repetition with `--engine event`/`reference`, and on hashed routing across nodes at 4 µs each). "
          "The analytical model costs 1 µs per routed transfer and 6 ns per transfer of every repetition. The "
          "counts come from the bare schedule of the algorithm NCCL picks (for at most 8 of the sizes; the others "
          "take the nearest one's); above 1,024 GPUs",
          lambda: [_estimate().SIZE_S, _estimate().ROUTE_S * 1e6, _estimate().SIM_S * 1e6, _estimate().FF_STEPS,
                   _estimate().RING_STEPS, _estimate().HASHED_SIM_S * 1e6, _estimate().ANALYTICAL_S * 1e6,
                   _estimate().STEP_S * 1e9, _estimate().MAX_PROBES, _estimate().EXACT_RANKS]),
    Claim("(within 10 % of counting whole at 4,096 GPUs)",
          by_test="tests/test_estimate.py::test_extrapolated_counts_match_exact_ones"),
    Claim("measured on a shared 2-core machine", why="the machine the constants were measured on"),
    Claim("checks the estimate within 3× of the measured CPU time on a 512-GPU and a 2,048-GPU all-reduce, "
          "and the 16k-GPU line above within 5 s of process start",
          lambda: [_estimate().FACTOR, *_estimate_test_cases(), 5.0]),
    Claim("(one run each on a 2-core machine", why="the machine the table was measured on"),
    *[Claim(row, by_test="tests/test_estimate.py::test_readme_estimates_are_the_model_s",
            why="the estimate column is recomputed by the test; the measured columns are records of one quiet run "
                "each at b15612f, as the text says")
      for row in (
        "| h100-fat-tree-16k | all_reduce 1G | 512 | flow | 1.8 | 2.7 | 0.67 |",
        "| h100-fat-tree-16k | all_gather 1G | 1,024 | flow | 1.6 | 1.5 | 1.1 |",
        "| h100-fat-tree-16k | alltoall 64M | 1,024 | flow | 5.5 | 8.7 | 0.64 |",
        "| h100-superpod-1024 | all_reduce 1G | 1,024 | flow | 4.0 | 4.4 | 0.92 |",
        "| h100-fat-tree-16k | all_reduce 1G | 4,096 | flow | 19.9 | 17.0 | 1.2 |",
        "| h100-fat-tree-16k | all_reduce 1G | 16,384 | flow | 98.5 | 77.3 | 1.3 |",
        "| h100-fat-tree-16k | all_reduce 1G | 2,048 | analytical | 1.5 | 2.3 | 0.66 |",
        "| h100-fat-tree-16k | all_reduce 1G | 16,384 | analytical | 17.6 | 13.6 | 1.3 |",
        "| megascale-12k (ECMP) | all_reduce 1G | 1,024 | flow | 9.5 | 3.4 | 2.8 |",
        "| llama3-24k (ECMP) | all_reduce 1G | 256 | flow | 2.5 | 10.2 | 0.25 |")],
    Claim("a run can take 4× the estimate\n(the `llama3-24k` row). Rings whose hops cross tiers of "
          "different latency (all 16,384 GPUs",
          why="the table's llama3-24k row (10.2 CPU-s against 2.5 estimated); the 16k ring transient (issue 30) "
              "is tests/test_stagger.py's case at full size"),
]


def _progress():
    from netsim import progress

    return progress


def _estimate_note_s() -> float:
    """The CPU seconds from which ``bench`` prints its estimate before running."""
    from netsim.cli import bench

    return bench.LONG_S


def _estimate():
    from netsim.perftests import estimate

    return estimate


def _estimate_test_cases() -> list[int]:
    """The GPU counts of the cases ``tests/test_estimate.py`` measures the estimate on."""
    import ast

    src = (REPO / "tests" / "test_estimate.py").read_text()
    mark = next(d for n in ast.walk(ast.parse(src)) if isinstance(n, ast.FunctionDef)
                and n.name == "test_estimate_within_factor_of_cpu_time" for d in n.decorator_list)
    return [gpus for _, gpus in ast.literal_eval(mark.args[1])]
