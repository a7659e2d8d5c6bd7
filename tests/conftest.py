"""Shared fixtures: where the third-party traces live, and a summary of what the run left out.

The third-party tier (Chakra traces and ASTRA-sim inputs copied from public repositories) lives in
``../shared/traces`` next to the checkout, or wherever ``NETSIM_TRACES`` points.  Every test that
needs it skips with :data:`TRACES_SKIP` when it is absent, and the end of the run says, once, how
many tests that was and how to run them (:func:`pytest_terminal_summary`); it also says which tiers
the marker expression left out (``slow``, ``scale``) and how to run those.
"""

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TRACES = Path(os.environ.get("NETSIM_TRACES") or REPO.parent / "shared" / "traces").resolve()
TOPOLOGIES = REPO / "topologies"
#: The one skip reason of the third-party tier (the summary counts skips by it).
TRACES_SKIP = (f"third-party traces not found at {TRACES} (Chakra traces and ASTRA-sim inputs from public "
               "repositories; set NETSIM_TRACES=DIR or put them at ../shared/traces: README, 'Running the tests')")
#: What each tier left out of the default run covers, and how to run it.
TIERS = {"slow": "heavy README examples and figures, long differential and exactness runs",
         "scale": "10k+ GPU topologies and workloads"}


def need_traces(*parts: str) -> Path:
    """``TRACES / parts``, or skip the calling test with :data:`TRACES_SKIP` when it is absent."""
    path = TRACES.joinpath(*parts)
    if not TRACES.is_dir():
        pytest.skip(TRACES_SKIP)
    if not path.exists():
        pytest.skip(f"{TRACES_SKIP}: {path.relative_to(TRACES)} missing")
    return path


def trace_params(paths_of, ids=None) -> list:
    """Parameters for a test over files of the third-party tier: ``paths_of(TRACES)`` when the
    folder exists, else one parameter that skips with :data:`TRACES_SKIP` (not an empty set,
    which pytest reports without the reason)."""
    if TRACES.is_dir():
        return [pytest.param(p, id=ids(p) if ids else None) for p in paths_of(TRACES)]
    return [pytest.param(None, id="no-traces", marks=pytest.mark.skip(reason=TRACES_SKIP))]


@pytest.fixture
def traces() -> Path:
    """``../shared/traces`` (or ``NETSIM_TRACES``); tests that need it skip when it is absent."""
    return need_traces()


_LEFT_BY_TIER: dict[str, int] = {}


def pytest_deselected(items):
    """Count the deselected tests of each tier (``-k`` deselects others, which are not counted)."""
    for item in items:
        for tier in TIERS:
            if item.get_closest_marker(tier) is not None:
                _LEFT_BY_TIER[tier] = _LEFT_BY_TIER.get(tier, 0) + 1
                break


def pytest_report_header(config):
    found = "found" if TRACES.is_dir() else "NOT FOUND: the tests that read them will skip"
    return [f"third-party traces: {TRACES} ({found})"]


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """One line per reason the run left tests out: absent traces, and deselected tiers."""
    lines = []
    skipped = terminalreporter.stats.get("skipped", [])
    n_traces = sum(1 for rep in skipped if TRACES_SKIP in str(rep.longrepr))
    if n_traces:
        lines.append(f"{n_traces} skipped: {TRACES_SKIP}")
    others = len(skipped) - n_traces
    if others:
        lines.append(f"{others} skipped for other reasons (optional packages, platform): `pytest -rs` lists them")
    left = {t: n for t, n in _LEFT_BY_TIER.items() if n}
    if left:
        tiers = "; ".join(f"{n} {t} ({TIERS[t]})" for t, n in left.items())
        lines.append(f"not run, by tier: {tiers}; run them with `pytest -m '{' or '.join(left)}'`, "
                     "every tier with `pytest -m ''` (README, 'Running the tests')")
    if lines:
        terminalreporter.write_sep("-", "tests left out")
        for line in lines:
            terminalreporter.write_line(line)
