"""Every number docs/*.md states in prose is what the code produces, or is no statement (issue 35).

The rule README.md follows (tests/test_readme_numbers.py), applied to the docs pages: every prose
number (:mod:`readme_numbers`: outside code spans and fenced blocks; on docs pages a signed ``−7.6``
counts too) lies in a snippet of the page's claims (``tests/doc_claims/<page>.py`` and its parts
``<page>_*.py``) or in a :data:`doc_claims.SHARED` phrase, or is exempt by one of the stated rules
of :func:`readme_numbers.docs_exempt` (list ordinals, citations, names, versions, dates, ``N-D``).
Each claim's numbers are recomputed (``slow`` ones with ``-m slow``: simulations of minutes, such as
every row of docs/validation.md's table), or asserted by the test it names, or said not to be
results (``why``: a quoted source figure, an input's meaning).  Output shown in a fenced block must
be a runnable example's (tests/test_docs_examples.py compares it) or sit under an ``<!-- output
checked: TEST -->`` marker whose test compares it (examples that need the third-party traces).
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

import doc_claims
import readme_numbers as rn
from conftest import REPO
from test_readme_numbers import check_claim

#: The pages under the rule, each with its claims module ``doc_claims.<page>``.
PAGES = ["architecture", "astra", "collectives", "cost", "faults", "sweeps", "topology", "validation", "workloads"]
#: Pages not yet under the rule (issue 35: to be claimed or cut).
UNFINISHED: list[str] = []


def _claims(page: str) -> list:
    """The claims of ``doc_claims.<page>`` and of its parts ``doc_claims.<page>_<part>`` (a page's claims may
    span modules, each under 500 lines)."""
    parts = sorted(p.stem for p in (REPO / "tests" / "doc_claims").glob(f"{page}_*.py"))
    return [c for name in [page, *parts] for c in importlib.import_module(f"doc_claims.{name}").CLAIMS]


def _page(page: str) -> Path:
    return REPO / "docs" / f"{page}.md"


def test_every_page_is_listed():
    assert sorted(PAGES + UNFINISHED) == sorted(p.stem for p in (REPO / "docs").glob("*.md"))


@pytest.mark.parametrize("page", PAGES)
def test_every_docs_number_is_claimed(page):
    missing, loose = rn.unclaimed(_page(page).read_text(encoding="utf-8"), _claims(page), doc_claims.SHARED,
                                  rn.docs_exempt)
    assert not missing, f"claims whose text is not in docs/{page}.md (reworded?): {missing}"
    assert not loose, (f"numbers in docs/{page}.md that no claim in tests/doc_claims/{page}.py checks "
                       f"(line, number): {loose}")


#: An HTML comment before a fenced block whose output a named test compares with what netsim prints
#: (for examples that need the third-party traces, which tests/test_docs_examples.py does not run).
CHECKED = re.compile(r"^<!-- output checked: (tests/\S+\.py)::(\w+) -->$")


def _checked_blocks(text: str) -> list[tuple[int, int, str]]:
    """``(first line, last line, test)`` of every fenced block under an ``output checked`` marker."""
    lines, out = text.splitlines(), []
    for i, line in enumerate(lines):
        m = CHECKED.match(line)
        if m and i + 1 < len(lines) and lines[i + 1].startswith("```"):
            end = next(j for j in range(i + 2, len(lines)) if lines[j].startswith("```"))
            out.append((i + 2, end + 1, f"{m[1]}::{m[2]}"))
    return out


@pytest.mark.parametrize("page", PAGES)
def test_docs_output_is_shown_only_under_runnable_examples(page):
    """Output lines in a fenced block are a runnable example's, or a block whose marker names the test
    that compares them (the test must exist and name the page)."""
    text = _page(page).read_text(encoding="utf-8")
    checked = _checked_blocks(text)
    for _, _, test in checked:
        path, _, name = test.partition("::")
        source = (REPO / path).read_text(encoding="utf-8")
        assert f"def {name}(" in source and f"docs/{page}.md" in source, f"docs/{page}.md: {test} does not check it"
    shown = [(line, body) for line, _, body, runnable in rn.fence_lines(text)
             if not runnable and rn.NUMBER.search(body) and not any(a <= line <= b for a, b, _ in checked)]
    assert not shown, f"docs/{page}.md: output with numbers under a block that does not run: {shown}"


def test_astra_page_shows_the_reference_output():
    """docs/astra.md's first example: the lines it shows are what netsim prints, in order (``...``: any lines)."""
    from conftest import need_traces

    from netsim.astra import run_astra

    text = (REPO / "docs/astra.md").read_text(encoding="utf-8")
    first, last, _ = _checked_blocks(text)[0]
    block = text.splitlines()[first:last - 1]
    root = need_traces("astra-sim__astra-sim")
    cmd = " ".join(line.rstrip("\\ ") for line in block if line.startswith(("$ netsim", "    --")))
    flags = dict(re.findall(r"--([\w-]+)=\$T/(\S+)", cmd))
    res = run_astra(root / flags["workload-configuration"], root / flags["system-configuration"],
                    root / flags["network-configuration"], root / flags["remote-memory-configuration"])
    printed, at = res.lines(), 0
    shown = [line for line in block if not line.startswith(("$ ", "    --"))]
    for line in shown:
        if line == "...":
            continue
        assert line in printed[at:], f"docs/astra.md shows {line!r}; netsim printed {printed[at:at + 5]} ..."
        at = printed.index(line, at) + 1


def _all_claims() -> list:
    return [c for page in PAGES for c in _claims(page)] + doc_claims.SHARED


def test_every_docs_claim_says_how_it_is_checked():
    for claim in _all_claims():
        nums = rn.claim_numbers(claim)
        assert nums, f"{claim.id}: no number in the claim"
        assert claim.check or claim.by_test or claim.why, f"{claim.id}: neither check, by_test nor why"
        if isinstance(claim.tol, list):
            assert len(claim.tol) == len(nums), f"{claim.id}: {len(nums)} numbers, {len(claim.tol)} tolerances"


@pytest.mark.parametrize("claim", [pytest.param(c, id=c.id, marks=[pytest.mark.slow] if c.slow else [])
                                   for c in _all_claims() if c.check or c.by_test])
def test_docs_number_is_what_the_code_gives(claim):
    check_claim(claim)


def test_the_rule_can_fail():
    """A number changed in a page is caught: by the coverage test when no claim quotes it any more,
    and by the claim's check when the claim is edited with the page."""
    page, claim = next((p, c) for p in PAGES for c in _claims(p) if c.check and not c.slow)
    nums = rn.claim_numbers(claim)
    changed = claim.text.replace(nums[-1], nums[-1] + "1", 1)
    text = _page(page).read_text(encoding="utf-8").replace(claim.text, changed)
    missing, loose = rn.unclaimed(text, _claims(page), doc_claims.SHARED, rn.docs_exempt)
    assert claim.text in missing and any(num == nums[-1] + "1" for _, num in loose), (missing, loose)
    assert rn.wrong_values(rn.Claim(changed, claim.check, claim.tol, doc=claim.doc))


@pytest.mark.parametrize("snippet, exempt", [
    ("NCCL 2.30.7 (`enqueue.cc`, line 411)", True), ("Table 3", True), ("issue 33", True),
    ("1. first\n", True), ("14 May 2020", True), ("2-D torus", True), ("Llama 3 405B", True),
    ("takes 4.8 % longer", False), ("2,024 GPUs", False), ("exit status 2", False)])
def test_docs_exemptions(snippet, exempt):
    found = rn.prose_numbers(snippet)
    assert found
    assert all(rn.docs_exempt(snippet, off, num) for off, num in found) == exempt, found
