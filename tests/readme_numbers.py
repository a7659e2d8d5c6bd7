"""Numbers quoted in prose, and the claims that account for them (used by tests/test_readme_numbers.py).

A *prose number* is a number a reader takes as a statement: digits in README text outside code
(inline code spans and command lines are inputs: flags, files, values a user types), not part of
a name (``H100``, ``400G``, ``GPT-3``, ``8x7b``, ``Gen5``, ``§3.3.2``).  Ratios (``2.3x``),
percentages (``13 %``), scientific notation (``1e-9``) and grouped thousands (``16,384``) count.

A :class:`Claim` is an exact snippet of the document holding one or more prose numbers, and how
to check them: ``check()`` returns the values the code produces, one per number in the snippet,
in order, compared within the claim's tolerance (:func:`agrees`); or ``by_test`` names the test
that computes them (which must read the document, so the link cannot rot silently); or ``why``
says why a number is not a result (a name, a citation, the meaning of an input).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

REPO = Path(__file__).resolve().parents[1]

#: A prose number: not glued to a name before it, not followed by a letter other than the ``x`` of
#: a ratio (``2.3x``, but ``8x7b`` is a name).
NUMBER = re.compile(r"(?<![\w.§/:#=<>^−\[-])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(e-?\d+)?(?![A-Za-wyz_\d^])(?!x\w)")
#: On docs pages a signed number counts too (``−7.6 %``, ``+22.4 %``: the minus sign, U+2212).
DOC_NUMBER = re.compile(r"(?<!\w−)" + NUMBER.pattern.replace("−", ""))  # not k−1 in a formula
_CODE_SPAN = re.compile(r"`(?:[^`\n]|\n(?![ \t]*\n))*`")  # may wrap lines, not paragraphs
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_LINK_TARGET = re.compile(r"\]\([^)\s]*\)")
_FENCE = re.compile(r"^```(\w*)\s*$")


def value(text: str) -> float:
    """``"16,384"`` -> 16384.0, ``"1e-9"`` -> 1e-9."""
    return float(text.replace(",", ""))


def decimals(text: str) -> int:
    """Digits after the point as written (``"175.6"`` -> 1); scientific notation: exact."""
    return len(text.split(".")[1]) if "." in text and "e" not in text else 0


def _blank(match: re.Match) -> str:
    return re.sub(r"[^\n]", " ", match.group())


def masked(text: str) -> str:
    """``text`` with code spans, HTML comments and link targets blanked (offsets kept)."""
    for pattern in (_COMMENT, _CODE_SPAN, _LINK_TARGET):
        text = pattern.sub(_blank, text)
    return text


def numbers(snippet: str) -> list[str]:
    """The prose numbers of a snippet, as written."""
    return [m.group() for m in NUMBER.finditer(masked(snippet))]


def prose_numbers(text: str, pattern: re.Pattern = NUMBER) -> list[tuple[int, str]]:
    """``(offset, number)`` of every prose number outside fenced blocks (see :func:`fence_lines`)."""
    kept, fenced = [], False
    for line in text.splitlines(keepends=True):
        fence = bool(_FENCE.match(line.rstrip("\n")))
        kept.append(re.sub(r"[^\n]", " ", line) if fence or fenced else line)
        fenced ^= fence
    return [(m.start(), m.group()) for m in pattern.finditer(masked("".join(kept)))]


def fence_lines(text: str) -> list[tuple[int, str, str, bool]]:
    """``(line number, fence language, line, runnable)`` of every line inside a fenced block that is
    not a command (``$ ...`` and its ``\\`` continuations, or any line of a block without ``$``
    lines, which is all commands)."""
    lines = text.splitlines()
    out, i = [], 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        runnable = i > 0 and lines[i - 1].strip().startswith("<!-- runnable")
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        body = lines[i + 1:end]
        if m[1] in ("console", "") and any(b.startswith("$ ") for b in body):
            cont = False
            for k, line in enumerate(body):
                if line.startswith("$ ") or cont:
                    cont = line.rstrip().endswith("\\")
                    continue
                out.append((i + 2 + k, m[1], line, runnable))
        i = end + 1
    return out


@dataclass
class Claim:
    """Numbers in one snippet of a document and how each is checked (module docstring)."""

    text: str
    check: Callable[[], Sequence[float]] | None = None
    #: ``"digits"``: equal when rounded to the digits written; ``("rel", r)``: within r of the value
    #: written; ``("abs", a)``: within a of it; ``("factor", f)``: within a factor f either way (times measured on a shared machine);
    #: ``("at_least", x)``/``("at_most", x)`` for a bound the text states.  One per number, or one for all.
    tol: object = "digits"
    slow: bool = False
    by_test: str = ""
    why: str = ""
    traces: bool = False
    doc: str = "README.md"
    extra: dict = field(default_factory=dict)

    @property
    def id(self) -> str:
        words = re.sub(r"[^\w.,%]+", " ", masked(self.text)).split()
        return f"{self.doc}: {' '.join(words[:9])}"


def agrees(written: str, got: float, tol) -> bool:
    """Whether the value the code produced, ``got``, bears out the number ``written``."""
    want = value(written)
    if tol == "digits":
        d = decimals(written)
        return round(got, d) == round(want, d) if "e" not in written else got == want
    kind, amount = tol
    if kind == "rel":
        return abs(got - want) <= amount * abs(want)
    if kind == "abs":
        return abs(got - want) <= amount
    if kind == "factor":
        return want / amount <= got <= want * amount
    if kind == "at_least":
        return got >= want
    if kind == "at_most":
        return got <= want
    raise ValueError(f"unknown tolerance {tol!r}")


# ------------------------------------------------------------------ coverage, shared by README and docs
def normalized(text: str) -> tuple[str, list[int]]:
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


def spans(claim_text: str, norm: str, where: list[int]) -> list[tuple[int, int]]:
    """Every place ``claim_text`` occurs in the normalized document, as offsets in the original."""
    needle, _ = normalized(claim_text)
    found = [m.start() for m in re.finditer(re.escape(needle), norm)]
    return [(where[s], where[s + len(needle) - 1] + 1) for s in found]


def unclaimed(text: str, claims, shared=(), exempt=None) -> tuple[list[str], list[tuple[int, str]]]:
    """``(claims whose text is not in the document, (line, number) of prose numbers no claim covers)``.

    ``shared`` claims cover every place their text occurs but may be absent; ``exempt(text, offset,
    number)`` says whether a number needs no claim (:func:`docs_exempt`)."""
    norm, where = normalized(text)
    covered, missing = [], []
    for claim in claims:
        found = spans(claim.text, norm, where)
        if not found:
            missing.append(claim.text)
        covered += found
    for claim in shared:
        covered += spans(claim.text, norm, where)
    pattern = DOC_NUMBER if exempt else NUMBER
    loose = [(text.count("\n", 0, off) + 1, num) for off, num in prose_numbers(text, pattern)
             if not any(a <= off < b for a, b in covered) and not (exempt and exempt(text, off, num))]
    return missing, loose


# -------------------------------------------------------------------------- docs/*.md: stated exemptions
#: A number right after one of these words is a reference, not a statement: a source line, a table,
#: figure, section, equation, issue or pull request, a version of a named program.
_CITE = re.compile(r"(?:\b(?:[Ll]ines?|Table|Tables|Fig\.|Figure|Figures|Section|Sections|Eq\.|[Ii]ssues?|PR|"
                   r"PRs|v|NCCL|CUDA|g\+\+|Python)|PR #|#|§) ?$")
#: A number right after one of these is part of a product's or model's name (``Llama 3``, ``NVLink 4``).
_NAMED = re.compile(r"\b(?:Llama|GPT|NVLink|ConnectX|Quantum|Hopper|PCIe|Gen|Spectrum|FlashAttention|DGX|HGX) ?$")
_MONTHS = ("January February March April May June July August September October November December "
           "Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec").split()


def docs_exempt(text: str, offset: int, number: str) -> bool:
    """Whether a prose number of a docs page is not a statement, by one of these rules:

    * an **ordinal** of an enumerated list (``1.`` or ``1)`` opening a line) or a heading's section number;
    * a **citation**: right after (on its line or the one before) ``line``/``lines``, ``Table``, ``Fig.``, ``Eq.``,
      ``issue``, ``PR``/``#``, ``§``, or a program's name before its version (``NCCL 2.19``, ``g++ 12``);
    * a **name**: a number right after a product's or model's name (``Llama 3``, ``NVLink 4``);
    * a **version**: dotted past its second part (``2.30.7``: the ``2.30`` of it);
    * a **date**: a year (four ungrouped digits from 1990 to 2039, the docs group counts: ``1,024``; ``SC'21``) or a
      day before a month;
    * a **dimension name**: ``1-D``, ``2-D``, ``3-D`` (a kind of network, not a count).
    """
    start = text.rfind("\n", 0, offset) + 1
    line, after = text[start:offset], text[offset + len(number):]
    before = " ".join(text[max(0, offset - 80):offset].split()) + (" " if text[offset - 1:offset].isspace() else "")
    if not line.strip() and re.match(r"[.)]\s", after):
        return True
    if re.match(r"#+\s+$", line) and after.startswith("."):
        return True
    if _CITE.search(before) or _NAMED.search(before) or before.endswith("'"):  # SC'21
        return True
    if re.match(r"\.\d", after):
        return True
    if re.fullmatch(r"19[89]\d|20[0-3]\d", number):
        return True
    if re.match(r" (\w+)", after) and re.match(r" (\w+)", after)[1] in _MONTHS:  # "14 May 2020"
        return True
    return bool(re.match(r"-D\b", after))


# ------------------------------------------------------------------------------ checking one claim
def named_test_quotes(claim: Claim, nums: list[str]) -> list[str]:
    """The numbers of ``claim`` that the test it names neither reads from the document (the test body
    names ``claim.doc``) nor asserts; raises AssertionError when the test does not exist."""
    path, _, name = claim.by_test.partition("::")
    source = (REPO / path).read_text(encoding="utf-8")
    funcs = {n.name: n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef)}
    assert name in funcs, f"{claim.id}: no test {claim.by_test}"
    body = ast.get_source_segment(source, funcs[name])
    if claim.doc in body or Path(claim.doc).name in body:
        return []
    return [n for n in nums if n.replace(",", "") not in body and not claim.why]


def claim_numbers(claim: Claim) -> list[str]:
    """The numbers a claim accounts for: its snippet's prose numbers, less (on a docs page) those
    :func:`docs_exempt` exempts (a model's name or a citation inside the snippet)."""
    if claim.doc == "README.md":
        return numbers(claim.text)
    text = masked(claim.text)
    return [m.group() for m in DOC_NUMBER.finditer(text) if not docs_exempt(text, m.start(), m.group())]


def wrong_values(claim: Claim) -> list[tuple]:
    """``(written, got, tolerance)`` of every number of ``claim`` its check does not bear out."""
    nums = claim_numbers(claim)
    got = list(claim.check())
    assert len(got) == len(nums), f"{claim.id}: the check gave {len(got)} values for {len(nums)} numbers {nums}"
    tols = claim.tol if isinstance(claim.tol, list) else [claim.tol] * len(nums)
    return [(n, g, t) for n, g, t in zip(nums, got, tols) if not agrees(n, float(g), t)]
