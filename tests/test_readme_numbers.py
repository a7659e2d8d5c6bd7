"""Every number README.md and the notebooks state in prose is what the code produces (issue 35).

* README.md: every prose number (:mod:`readme_numbers`) lies in a snippet of :data:`readme_claims.CLAIMS`,
  and each claim's numbers are recomputed (slow ones with ``-m slow``) or checked by the test it names;
  output shown in a fenced block must be a runnable example's, which tests/test_docs_examples.py compares.
* notebooks/*.py: conclusions are written by code from the results just computed, so a Markdown cell
  states no result: every number in one is an input that the notebook's code spells out (a parameter,
  an assertion on a default), or a citation.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

import readme_claims
import readme_numbers as rn
from conftest import REPO, need_traces

README = REPO / "README.md"
#: Notebooks whose prose this test holds to the rule: all of them.
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.py"))


def _normalized(text: str) -> tuple[str, list[int]]:
    """``text`` with whitespace runs collapsed to one space, and each character's offset in ``text``."""
    out, where = [], []
    for i, ch in enumerate(text):
        if ch.isspace():
            if out and out[-1] == " ":
                continue
            ch = " "
        out.append(ch)
        where.append(i)
    return "".join(out), where


def _spans(claim_text: str, norm: str, where: list[int]) -> list[tuple[int, int]]:
    needle, _ = _normalized(claim_text)
    found = [m.start() for m in re.finditer(re.escape(needle), norm)]
    return [(where[s], where[s + len(needle) - 1] + 1) for s in found]


def test_every_readme_number_is_claimed():
    text = README.read_text(encoding="utf-8")
    norm, where = _normalized(text)
    covered, missing = [], []
    for claim in readme_claims.CLAIMS:
        spans = _spans(claim.text, norm, where)
        if not spans:
            missing.append(claim.text)
        covered += spans
    assert not missing, f"claims whose text is not in README.md (reworded?): {missing}"
    loose = [(text.count("\n", 0, off) + 1, num) for off, num in rn.prose_numbers(text)
             if not any(a <= off < b for a, b in covered)]
    assert not loose, ("numbers in README.md that no claim in tests/readme_claims.py checks "
                       f"(line, number): {loose}")


def test_output_is_shown_only_under_runnable_examples():
    """Output lines in a fenced block are a runnable example's (its output is compared), or absent."""
    shown = [(line, body) for line, _, body, runnable in rn.fence_lines(README.read_text(encoding="utf-8"))
             if not runnable and rn.NUMBER.search(body)]
    assert not shown, f"output with numbers under a block that does not run: {shown}"


def test_every_claim_says_how_it_is_checked():
    for claim in readme_claims.CLAIMS:
        nums = rn.numbers(claim.text)
        assert nums, f"{claim.id}: no number in the claim"
        assert claim.check or claim.by_test or claim.why, f"{claim.id}: neither check, by_test nor why"
        if isinstance(claim.tol, list):
            assert len(claim.tol) == len(nums), f"{claim.id}: {len(nums)} numbers, {len(claim.tol)} tolerances"


def _params():
    out = []
    for claim in readme_claims.CLAIMS:
        if claim.check is None and not claim.by_test:
            continue
        out.append(pytest.param(claim, id=claim.id, marks=[pytest.mark.slow] if claim.slow else []))
    return out


@pytest.mark.parametrize("claim", _params())
def test_readme_number_is_what_the_code_gives(claim):
    if claim.traces:
        need_traces()
    nums = rn.numbers(claim.text)
    if claim.by_test:
        _check_named_test(claim, nums)
        return
    got = list(claim.check())
    assert len(got) == len(nums), f"{claim.id}: the check gave {len(got)} values for {len(nums)} numbers {nums}"
    tols = claim.tol if isinstance(claim.tol, list) else [claim.tol] * len(nums)
    wrong = [(n, g, t) for n, g, t in zip(nums, got, tols) if not rn.agrees(n, float(g), t)]
    assert not wrong, f"{claim.id}: README says / the code gives / tolerance: {wrong}"


def _check_named_test(claim, nums: list[str]) -> None:
    """The named test exists and either reads README.md (it compares the figures itself) or asserts
    each number the claim quotes (so the two cannot drift apart silently)."""
    path, _, name = claim.by_test.partition("::")
    source = (REPO / path).read_text(encoding="utf-8")
    funcs = {n.name: n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef)}
    assert name in funcs, f"{claim.id}: no test {claim.by_test}"
    body = ast.get_source_segment(source, funcs[name])
    if "README.md" in body:
        return
    missing = [n for n in nums if n.replace(",", "") not in body and not claim.why]
    assert not missing, f"{claim.id}: {claim.by_test} does not assert {missing}"


# ------------------------------------------------------------------------------------ notebooks
def _cells(path: Path) -> list[tuple[str, str]]:
    """``(kind, source)`` of a jupytext percent-format notebook's cells."""
    cells, kind, lines = [], "code", []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# %%"):
            cells.append((kind, "\n".join(lines)))
            kind, lines = ("markdown" if "[markdown]" in line else "code"), []
            continue
        lines.append(line[2:] if kind == "markdown" and line.startswith("# ") else line.lstrip("#")
                     if kind == "markdown" else line)
    cells.append((kind, "\n".join(lines)))
    return [(k, s) for k, s in cells[1:] if s.strip()]  # cell 0: the jupytext header


def _code_numbers(code: str) -> set[float]:
    """Numbers the code spells out: numeric literals and numbers inside its strings (not comments)."""
    found = set()
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        if tok.type == tokenize.NUMBER:
            try:
                found.add(float(ast.literal_eval(tok.string)))
            except (ValueError, SyntaxError):
                pass
        elif tok.type == tokenize.STRING:
            found |= {rn.value(m.group()) for m in re.finditer(r"\d[\d,]*(?:\.\d+)?", tok.string)
                      if m.group().replace(",", "").replace(".", "", 1).isdigit()}
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_prose_states_no_typed_result(path):
    cells = _cells(path)
    code = _code_numbers("\n".join(s for k, s in cells if k == "code"))
    typed = []
    for kind, source in cells:
        if kind != "markdown":
            continue
        prose = re.sub(r"```.*?```", "", source, flags=re.S)
        prose = re.sub(r"(?m)^(#+\s+)\d+\.", r"\1", prose)  # section numbers of headings
        typed += [n for n in rn.numbers(prose) if rn.value(n) not in code]
    assert not typed, (f"{path.name}: numbers in Markdown cells that the code neither computes nor spells out "
                       f"(write the sentence from the results in a code cell): {typed}")


def test_notebook_rule_catches_a_typed_number(tmp_path):
    """The rule above can fail: a conclusion typed in Markdown is caught, the same one from code is not."""
    typed = tmp_path / "typed.py"
    typed.write_text('# %%\nx = 3\n\n# %% [markdown]\n# The layer takes 2.1x the uniform time.\n')
    computed = tmp_path / "computed.py"
    computed.write_text('# %%\nx = 3\nsay(f"The layer takes {x:.1f}x the uniform time.")\n\n'
                        '# %% [markdown]\n# Three runs (x = 3).\n')
    with pytest.raises(AssertionError, match=r"\['2\.1'\]"):
        test_notebook_prose_states_no_typed_result(typed)
    test_notebook_prose_states_no_typed_result(computed)
