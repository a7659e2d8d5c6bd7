"""Benchmarks of a simulated cluster: nccl-tests' collectives (:mod:`netsim.perftests.collective`)
and MoE dispatch/combine (:mod:`netsim.perftests.moe`).  The command line is :mod:`netsim.cli.bench`."""

from netsim.perftests.collective import (ALGORITHMS, MODELS, BenchConfig, bench, build_plan, check_memory,
                                     check_plan, placed_ranks, run_one, sweep_sizes, validated)

__all__ = ["ALGORITHMS", "MODELS", "BenchConfig", "bench", "build_plan", "check_memory", "check_plan", "placed_ranks",
           "run_one", "sweep_sizes", "validated"]
