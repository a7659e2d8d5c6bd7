"""MoE dispatch/combine against DeepEP's published bandwidth (issue: moe-whatifs).

DeepEP V2's README ("Performance"; deepseek-ai/DeepEP, V3 settings: 8K tokens per rank, hidden
7168, top-8 of 256 experts, FP8 dispatch, BF16 combine; SM90 with CX7 400G NICs) reports the
bottleneck RDMA bandwidth (logical: local-rank traffic included) of its normal kernels at EP 8 x 2
and 8 x 4 (table ``deepep_v2_sm90`` of ``benchmarks/data/published.yaml``).

This prints netsim's node-limited dispatch and combine on h100-superpod-1su (H100, 400G NICs) at
the same settings, with the analytical and the flow model, in DeepEP's byte counting (rdma_GBps).
Nothing is fitted to these numbers.  Each case runs in a fresh process; CPU seconds are the
process's user+system time.

Run: python benchmarks/bench_moe.py [--quick]
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import print_table, run_case  # noqa: E402
from published import pair  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def case(op: str, gpus: int, model: str):
    return partial(_case, op, gpus, model)


def _case(op: str, gpus: int, model: str) -> dict:
    import time

    from netsim.perftests.moe import MoEConfig, run_moe, validated
    from netsim.topology import load_topology

    topo = load_topology(ROOT / "topologies" / "h100-superpod-1su.yaml")
    t0 = time.process_time()
    cfg = validated(MoEConfig(op, tokens=8192, algo="node_limited", model=model, gpus=gpus), topo)
    s = run_moe(topo, cfg).summary
    deepep = pair("deepep_v2_sm90", gpus, op)
    return {"case": f"{op} EP 8x{gpus // 8}", "model": model, "time_us": s["time_us"],
            "rdma_GBps": s["rdma_GBps"], "deepep_GBps": deepep, "ratio": s["rdma_GBps"] / deepep, "bound": s["bound"],
            "cpu_s": time.process_time() - t0}


def main() -> None:
    quick = "--quick" in sys.argv
    models = ["analytical"] if quick else ["analytical", "flow"]
    rows = [run_case(case(op, gpus, model)) for gpus in (16, 32) for op in ("moe_dispatch", "moe_combine")
            for model in models]
    print_table(rows, [("case", "case", "s"), ("model", "model", "s"), ("time_us", "time us", ".1f"),
                       ("rdma_GBps", "netsim RDMA GB/s", ".1f"), ("deepep_GBps", "DeepEP GB/s", ".0f"),
                       ("ratio", "netsim/DeepEP", ".2f"), ("bound", "bound", "s"), ("cpu_s", "CPU s", ".2f"),
                       ("wall_s", "wall s", ".2f")])


if __name__ == "__main__":
    main()
