"""Workload generation and execution (issue: chakra-workloads).

W1  Llama-3-405B-like, TP8 PP16 DP1 (128 ranks), 16 microbatches, seq 8192, on
    h100-fat-tree-16k: generate + run, analytical and flow
W2  Mixtral-8x7B-like, 8 DGX H100 nodes (64 ranks): TP8 DP8 EP8, 8 microbatches, on
    h100-superpod-1su: generate + run, analytical and flow
W3  Llama-3-405B-like, TP8 PP16 DP128 = 16,384 ranks, 16 microbatches, seq 8192, on
    h100-fat-tree-16k: generate + run in one process (``netsim run --llm``: the
    representatives of the 128 data-parallel replicas are generated and simulated,
    every replica's traffic is on the fabric, where that is proven exact; else every rank);
    flow with ``--symmetry approximate`` (one replica even where copies finish apart) and
    analytical; also DP8 (1,024 ranks).  ``--full`` adds the flow model's exact default at
    DP128, which simulates every rank on this fabric (about an hour, 15 GB).

The ``symmetry`` column says what ran: ``exact R/N`` (R of N ranks simulated, proven),
``approx R/N`` or ``every rank`` (with the reason a replica run was not proven, when it was tried).

Run: python benchmarks/bench_workloads.py [--quick] [--full]
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import print_table, run_case  # noqa: E402

ROOT = Path(__file__).resolve().parents[1] / "topologies"


def _case(label: str, topo: str, model: str, gen: dict) -> dict:
    import tempfile
    import time

    from netsim.workload.simulation import simulate
    from netsim.workload.generate import write_llm_workload
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        prefix = write_llm_workload(tmp, gen.pop("spec"), **gen)
        t_gen = time.perf_counter() - t0
        res = simulate(str(ROOT / topo), str(prefix), comm_groups=str(Path(tmp) / "comm_groups.json"),
                       model=model)
    return {"case": label, "model": model, "ranks": int(res.finish.size), "ops": len(res.ops),
            "gen_s": t_gen, "iteration_ms": float(res.finish.max()) * 1e3,
            "exposed_ms": float(res.exposed_comm.mean()) * 1e3}


def _llm_case(label: str, topo: str, model: str, gen: dict, symmetry: str = "auto") -> dict:
    from netsim.workload.llmrun import simulate_llm
    res = simulate_llm(str(ROOT / topo), gen.pop("spec"), model=model, symmetry=symmetry, **gen)
    run = res.run
    n = int(res.finish.size)
    if run.replicas is not None:
        what = f"{'exact' if symmetry == 'auto' else 'approx'} {len(run.ranks)}/{n}"
    else:
        why = next((x for x in res.notes if x.startswith("replica symmetry not exact")), None)
        what = "every rank" + (" (not proven)" if why else "")
    return {"case": label, "model": model, "ranks": n, "symmetry": what, "ops": len(res.ops) * (
        run.replicas.count if run.replicas is not None else 1), "gen_s": float("nan"),
        "iteration_ms": float(res.finish.max()) * 1e3, "exposed_ms": float(res.exposed_comm.mean()) * 1e3}


def main(quick: bool = False, full: bool = False) -> None:
    llama = dict(spec="llama3-405b", tp=8, pp=16, dp=1, microbatches=16, seq=8192)
    mixtral = dict(spec="mixtral-8x7b", tp=8, pp=1, dp=8, ep=8, microbatches=8, seq=4096)
    cases = [partial(_case, "W2 Mixtral EP8 8 nodes", "h100-superpod-1su.yaml", m, dict(mixtral))
             for m in ("analytical", "flow")]
    cases.append(partial(_case, "W1 Llama-405B TP8 PP16", "h100-fat-tree-16k.yaml", "analytical", dict(llama)))
    if not quick:
        cases.append(partial(_case, "W1 Llama-405B TP8 PP16", "h100-fat-tree-16k.yaml", "flow", dict(llama)))
    big = dict(spec="llama3-405b", tp=8, pp=16, microbatches=16, seq=8192)
    runs = [(8, "flow", "auto"), (128, "flow", "approximate"), (128, "analytical", "auto")]
    runs += [(128, "flow", "auto")] if full else []
    for dp, m, sym in runs:
        if quick and dp == 128:
            continue
        cases.append(partial(_llm_case, f"W3 Llama-405B TP8 PP16 DP{dp}", "h100-fat-tree-16k.yaml", m,
                             dict(big, dp=dp), sym))
    rows = [run_case(c) for c in cases]
    for r in rows:
        r.setdefault("symmetry", "")
    print_table(rows, [("case", "case", "s"), ("model", "model", "s"), ("ranks", "ranks", "d"),
                       ("symmetry", "symmetry", "s"), ("ops", "ops", "d"),
                       ("gen_s", "generate s", ".2f"), ("wall_s", "total wall s", ".2f"), ("cpu_s", "CPU s", ".2f"),
                       ("iteration_ms", "iteration ms", ".1f"), ("exposed_ms", "exposed comm ms", ".1f"),
                       ("peak_rss_MB", "peak RSS MB", ".0f")])


if __name__ == "__main__":
    main("--quick" in sys.argv, "--full" in sys.argv)
