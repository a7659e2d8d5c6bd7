"""The published measurements netsim is compared with: ``benchmarks/data/published.yaml``.

Every table of published numbers (DeepEP's, nccl-tests issues', Llama 3's) is written once, there,
with its source; ``validate.py``, ``bench_moe.py`` and ``bench_fidelity.py`` read it here.

>>> rows("deepep_v2_sm90")[16], "DeepEP" in source("deepep_v2_sm90")
([90.0, 81.0], True)
>>> pair("deepep_v1_normal", 8, "moe_combine")
158.0
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from netsim.inputs import load_yaml

#: The data file.
FILE = Path(__file__).resolve().parent / "data" / "published.yaml"
#: Column of each MoE operation in the DeepEP tables' [dispatch, combine] rows.
MOE_COLUMN = {"moe_dispatch": 0, "moe_combine": 1}


@lru_cache(maxsize=1)
def tables() -> dict:
    """Every table: name -> {source, unit, rows}."""
    data = load_yaml(FILE)
    for name, t in data.items():
        if not {"source", "unit", "rows"} <= set(t):
            raise ValueError(f"{FILE}: table {name} needs source, unit and rows")
    return data


def rows(name: str) -> dict:
    """The rows of table ``name``."""
    return tables()[name]["rows"]


def source(name: str) -> str:
    """Where table ``name``'s numbers were read."""
    return tables()[name]["source"]


def pair(name: str, ep: int, op: str) -> float:
    """A DeepEP table's figure for ``op`` (``moe_dispatch`` or ``moe_combine``) at EP ``ep``."""
    return float(rows(name)[ep][MOE_COLUMN[op]])
