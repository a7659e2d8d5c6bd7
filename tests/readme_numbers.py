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

import re
from dataclasses import dataclass, field
from typing import Callable, Sequence

#: A prose number: not glued to a name before it, not followed by a letter other than the ``x`` of
#: a ratio (``2.3x``, but ``8x7b`` is a name).
NUMBER = re.compile(r"(?<![\w.§/:#=<>^−\[-])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(e-?\d+)?(?![A-Za-wyz_\d^])(?!x\w)")
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


def prose_numbers(text: str) -> list[tuple[int, str]]:
    """``(offset, number)`` of every prose number outside fenced blocks (see :func:`fence_lines`)."""
    kept, fenced = [], False
    for line in text.splitlines(keepends=True):
        fence = bool(_FENCE.match(line.rstrip("\n")))
        kept.append(re.sub(r"[^\n]", " ", line) if fence or fenced else line)
        fenced ^= fence
    return [(m.start(), m.group()) for m in NUMBER.finditer(masked("".join(kept)))]


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
    #: written; ``("factor", f)``: within a factor f either way (times measured on a shared machine);
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
    if kind == "factor":
        return want / amount <= got <= want * amount
    if kind == "at_least":
        return got >= want
    if kind == "at_most":
        return got <= want
    raise ValueError(f"unknown tolerance {tol!r}")
