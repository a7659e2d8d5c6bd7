"""benchmarks/data/published.yaml: every published table once, with its source, and no copy of one
in code (benchmarks, tests, netsim, notebooks)."""

from __future__ import annotations

import ast
import sys
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import published  # noqa: E402


def _numbers(value) -> list[float]:
    if isinstance(value, dict):
        return [x for v in value.values() for x in _numbers(v)]
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _numbers(v)]
    return [float(value)]


def test_every_table_has_a_source_a_unit_and_positive_rows():
    tables = published.tables()
    assert {"deepep_v1_normal", "deepep_v1_low_latency", "deepep_v1_low_latency_rdma", "deepep_v2_sm90",
            "deepep_v2_sm100", "li_plus_a100_sendrecv"} <= set(tables)
    for name, t in tables.items():
        assert "github.com" in t["source"] or "/" in t["source"] or "arXiv" in t["source"], name
        assert t["unit"] and t["rows"] and all(x > 0 for x in _numbers(t["rows"])), name
        if name.startswith("deepep_"):
            assert all(len(pair) == 2 for pair in t["rows"].values()), f"{name}: [dispatch, combine] rows"


def test_validation_and_benchmarks_read_the_tables():
    import bench_fidelity
    import bench_moe  # noqa: F401  (reads deepep_v2_sm90 per case)
    import validate

    by_id = {r["id"]: r for r in validate.RECORDS}
    for ep, (dispatch, combine) in published.rows("deepep_v1_normal").items():
        assert by_id[f"deepep-v1-dispatch-ep{ep}"]["published"] == dispatch
        assert by_id[f"deepep-v1-combine-ep{ep}"]["published"] == combine
        assert by_id[f"deepep-v1-combine-ep{ep}"]["source"] == published.source("deepep_v1_normal")
    for ep, (dispatch, _) in published.rows("deepep_v2_sm90").items():
        assert by_id[f"deepep-v2-dispatch-ep{ep}"]["published"] == dispatch
    for mib, busbw in published.rows("li_plus_a100_sendrecv").items():
        assert by_id[f"sr-a100-{mib}M"]["published"] == busbw
    assert len(bench_fidelity.cases(full=True)) == 2 * (len(published.rows("deepep_v1_normal")) + 4) + \
        len(published.rows("li_plus_a100_sendrecv")) + 1




def _literal_numbers(node: ast.AST) -> set[float]:
    """Float literals and integer literals from 100 up (small integers are everywhere) in ``node``."""
    return {float(n.value) for n in ast.walk(node) if isinstance(n, ast.Constant) and not isinstance(n.value, bool)
            and (isinstance(n.value, float) or isinstance(n.value, int) and n.value >= 100)}


@lru_cache(maxsize=None)
def _containers(root: Path = ROOT) -> tuple[tuple[str, frozenset], ...]:
    """(place, numbers) of every dict, list, tuple and set literal of the code below ``root``."""
    out = []
    for path in (p for d in ("benchmarks", "tests", "netsim", "notebooks") for p in (root / d).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Dict, ast.List, ast.Tuple, ast.Set)):
                numbers = _literal_numbers(node)
                if len(numbers) >= 2:
                    out.append((f"{path.relative_to(root)}:{node.lineno}", frozenset(numbers)))
    return tuple(out)


def copies(figures: set[float], root: Path = ROOT) -> list[str]:
    """Literals below ``root`` that hold two or more of ``figures``."""
    return [f"{place} {sorted(nums & figures)}" for place, nums in _containers(root) if len(nums & figures) >= 2]


@pytest.mark.parametrize("name", sorted(published.tables()))
def test_no_table_is_copied_into_code(name):
    """No dict, list or tuple literal in the code holds two or more of a table's figures."""
    assert not copies(set(_numbers(published.rows(name))))
