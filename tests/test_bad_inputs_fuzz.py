"""Bounded fuzz of the loaders (topology, faults, sweep YAML, straggler specs, bench flags, files) and
of the surfaces (MoE flags, placement / routing / ``--set``, damaged datasets through
``netsim.open_results``, ``sweep --dry-run``).

The generators are ``benchmarks/fuzz.py``'s and ``benchmarks/fuzz_surfaces.py``'s (which run
thousands); here hypothesis drives a few hundred, each under a time and memory limit, asserting
the contract: a clean one-line error or acceptance of a valid input; never a traceback, a hang,
runaway memory or an invalid value accepted silently.  Issue 36's reproducers
(``fuzz_surfaces.REPRODUCERS``) are among the inputs; the generators are checked to produce them.
"""

import importlib.util
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

_spec = importlib.util.spec_from_file_location("netsim_fuzz", Path(__file__).resolve().parents[1] / "benchmarks/fuzz.py")
fuzz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fuzz)
surfaces = fuzz.fuzz_surfaces
DGX = surfaces.DGX


@pytest.mark.parametrize("gen", fuzz.GENERATORS, ids=lambda g: g.__name__)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1))
def test_loader_contract(gen, seed):
    name, thunk, invalid = gen(random.Random(seed))
    assert fuzz.classify(thunk, invalid, 30) in ("clean", "accepted valid")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1))
def test_file_contract(tmp_path, seed):
    name, thunk, invalid = fuzz.file_case(random.Random(seed), tmp_path)
    assert fuzz.classify(thunk, invalid, 30) in ("clean", "accepted valid")


@pytest.mark.parametrize("gen", surfaces.SURFACES, ids=lambda g: g.__name__)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1))
def test_surface_contract(tmp_path, gen, seed):
    name, thunk, invalid = gen(random.Random(seed), tmp_path, reproducers=True)
    assert fuzz.classify(thunk, invalid, 30, memory_mib=1024) in ("clean", "accepted valid"), thunk.input


@pytest.mark.parametrize("gen", [g for g in surfaces.SURFACES if g is not surfaces.dataset_case],
                         ids=lambda g: g.__name__)
def test_generators_produce_the_reproducers_in_only_when_asked(tmp_path, gen):
    """Generated, not run: every reproducer of its surface comes up in 1,500 draws, none without reproducers."""
    mine = {surfaces.moe_case: "moe", surfaces.placement_case: ("placement", "--placement", "run --llm"),
            surfaces.sweep_dry_run_case: "sweep"}[gen]
    expected = {n for n in surfaces.REPRODUCERS if n.startswith(mine)}
    assert expected
    for reproducers in (True, False):
        rng, seen = random.Random(0), set()
        for _ in range(1500):
            seen.update(surfaces.reproducers_in(gen(rng, tmp_path, reproducers=reproducers)[1].input))
        assert seen == (expected if reproducers else set()), (reproducers, expected - seen, seen)


def test_the_cli_thunk_tells_outcomes_apart(tmp_path, monkeypatch):
    """A one-line exit 2 is clean, exit 0 accepted, a traceback a crash, a MemoryError or a large
    peak memory, an alarm a hang: the classification itself can fail a case."""
    base = ["bench", "--topology", DGX, "--op", "all_reduce", "-b", "1K", "--model", "analytical", "-q"]
    assert fuzz.classify(surfaces.cli(base + ["--gpus", "1"]), True, 30) == "clean"
    assert fuzz.classify(surfaces.cli(base), False, 30) == "accepted valid"
    assert fuzz.classify(surfaces.cli(base), True, 30) == "silent invalid"
    import importlib

    bench = importlib.import_module("netsim.cli.bench")

    def boom(*_a, **_k):
        raise ValueError("a bug")
    monkeypatch.setattr(bench, "run_one", boom)
    assert fuzz.classify(surfaces.cli(base), False, 30) == "crash"

    def no_memory():
        raise MemoryError()
    assert fuzz.classify(no_memory, True, 30) == "memory"
    big = lambda: np.ones(300 << 20, dtype=np.uint8).sum()  # noqa: E731 - 300 MiB touched
    assert fuzz.classify(big, False, 30, memory_mib=100) == "memory"
    assert fuzz.classify(big, False, 30, memory_mib=1024) == "accepted valid"

    def forever():
        while True:
            pass
    assert fuzz.classify(forever, False, 1) == "hang"


@pytest.mark.slow
def test_a_thousand_cases_of_every_class(tmp_path):
    """``benchmarks/fuzz.py`` itself (its own process: it caps its memory), the open reproducers left out."""
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[1] / "benchmarks/fuzz.py"
    run = subprocess.run([sys.executable, str(script), "--cases", "1000", "--seed", "3", "--no-open", "--show"],
                         capture_output=True, text=True, timeout=1800, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines()[-2].split()[1] == "1000"  # the total row
