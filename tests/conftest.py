"""Shared fixtures: where the third-party traces live."""

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO.parent / "shared" / "traces"
TOPOLOGIES = REPO / "topologies"


@pytest.fixture
def traces() -> Path:
    """``../shared/traces``; tests that need it skip when it is absent."""
    if not TRACES.is_dir():
        pytest.skip(f"third-party traces not found at {TRACES}")
    return TRACES
