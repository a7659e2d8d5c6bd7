"""docs/architecture.md names every package of netsim/ and the network contract's methods."""

from __future__ import annotations

import re
from pathlib import Path

import netsim.network.base as base

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_and_contract_method_is_in_the_architecture_page():
    text = (ROOT / "docs" / "architecture.md").read_text()
    packages = sorted(p.name for p in (ROOT / "netsim").iterdir() if (p / "__init__.py").exists())
    assert packages and all(f"`{name}/`" in text for name in packages), packages
    for method in ("submit", "alone", "step_rates", "live_sharing", "count_alone", "tally", "add_tally"):
        assert hasattr(base.Network, method) and re.search(rf"`{method}\b", text), method
