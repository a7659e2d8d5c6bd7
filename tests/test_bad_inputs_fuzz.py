"""Bounded fuzz of the loaders (topology, faults, sweep YAML, straggler specs, bench flags, files).

The generators are ``benchmarks/fuzz.py``'s (which runs thousands); here hypothesis drives a few
hundred, each under a time limit, asserting the contract: a clean one-line InputError or
acceptance of a valid input; never a traceback, a hang or an invalid value accepted silently.
"""

import importlib.util
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

_spec = importlib.util.spec_from_file_location("netsim_fuzz", Path(__file__).resolve().parents[1] / "benchmarks/fuzz.py")
fuzz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fuzz)


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
