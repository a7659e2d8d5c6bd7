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


def test_every_readme_number_is_claimed():
    missing, loose = rn.unclaimed(README.read_text(encoding="utf-8"), readme_claims.CLAIMS)
    assert not missing, f"claims whose text is not in README.md (reworded?): {missing}"
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
    check_claim(claim)


def check_claim(claim) -> None:
    """The claim's numbers are what its check computes, or the test it names asserts or reads them."""
    if claim.traces:
        need_traces()
    if claim.by_test:
        missing = rn.named_test_quotes(claim, rn.claim_numbers(claim))
        assert not missing, f"{claim.id}: {claim.by_test} does not assert {missing}"
        return
    wrong = rn.wrong_values(claim)
    assert not wrong, f"{claim.id}: {claim.doc} says / the code gives / tolerance: {wrong}"


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
