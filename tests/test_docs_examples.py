"""Every README/docs example marked runnable runs as written (issue 18).

The marker is an HTML comment on the line right before a fenced block (invisible when rendered):

* ``<!-- runnable -->`` before a ````console`` / ````bash`` block: every ``$ command`` line (with its
  ``\\`` continuation lines) runs in order, in one fresh folder holding copies of ``topologies/``
  and ``workloads/``; each must exit 0 (lines without ``$`` are output, not checked).
* ``<!-- runnable -->`` before a ````python`` block: the block runs as a script in that folder.
* ``<!-- runnable slow -->``: the same, marked ``slow`` (left out of the default test run).
* ``<!-- runnable exit=2 -->``: the commands must exit with that status (error examples).
* ``<!-- runnable after=N -->``: runs in the folder of the N-th runnable block of the same file
  (1-based) after that block, for examples that continue another one.

Lines of a console block that are not commands are the output of the command above them: each must
appear in what it printed (stdout, then stderr), in order, with trailing blanks ignored; a line
``...`` stands for any lines.  So a number shown as output is the number the command prints.

A plain ``netsim ...`` command runs in this process (``netsim.cli.main``, in the example's folder:
no interpreter start-up per command); anything else (pipes, other programs) runs under ``bash``
with ``netsim`` as ``python -m netsim`` of this interpreter, so the examples test this checkout.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "workloads" / "README.md"]
MARKER = re.compile(r"^<!--\s*runnable(?P<opts>(\s+[\w=]+)*)\s*-->\s*$")
FENCE = re.compile(r"^```(\w*)\s*$")
#: Folders copied into every example's working folder.
SHIPPED = ("topologies", "workloads")
TIMEOUT_S = 300


@dataclass
class Example:
    doc: Path
    line: int
    lang: str
    body: str
    slow: bool = False
    status: int = 0
    after: int | None = None
    ordinal: int = 0

    @property
    def id(self) -> str:
        return f"{self.doc.relative_to(REPO)}:{self.line}"

    def commands(self) -> list[str]:
        """``$ ...`` lines joined with their continuation lines."""
        return [cmd for cmd, _ in self.steps()]

    def steps(self) -> list[tuple[str, list[str]]]:
        """``(command, the output lines shown under it)`` in order."""
        out, current = [], None
        for raw in self.body.splitlines():
            if current is not None:
                current += "\n" + raw
            elif raw.startswith("$ "):
                current = raw[2:]
            elif out:
                out[-1][1].append(raw)
            if current is not None and not current.rstrip().endswith("\\"):
                out.append((current, []))
                current = None
        return out


def collect(doc: Path) -> list[Example]:
    """The runnable examples of one Markdown file."""
    if not doc.is_file():
        return []
    lines = doc.read_text(encoding="utf-8").splitlines()
    found, i = [], 0
    while i < len(lines) - 1:
        m = MARKER.match(lines[i])
        fence = FENCE.match(lines[i + 1]) if m else None
        if m and fence:
            end = next(j for j in range(i + 2, len(lines)) if lines[j].startswith("```"))
            opts = dict(o.partition("=")[::2] for o in m["opts"].split())
            found.append(Example(doc, i + 2, fence[1] or "console", "\n".join(lines[i + 2:end]),
                                 slow="slow" in opts, status=int(opts.get("exit") or 0),
                                 after=int(opts["after"]) if opts.get("after") else None,
                                 ordinal=len(found) + 1))
            i = end
        i += 1
    return found


EXAMPLES = [ex for doc in DOCS for ex in collect(doc)]


def _workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    for name in SHIPPED:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, work / name)
    return work


def _in_process(cmd: str) -> list[str] | None:
    """argv of a plain ``netsim`` command (no shell syntax beyond quoting and comments), else None."""
    try:
        argv = shlex.split(cmd.replace("\\\n", " "), comments=True)
    except ValueError:
        return None
    if not argv or argv[0] != "netsim" or any(ch in cmd for ch in "|><;&$`"):
        return None
    return argv[1:]


def _run(ex: Example, work: Path) -> None:
    if ex.lang == "python":
        proc = subprocess.run([sys.executable, "-c", ex.body], cwd=work, capture_output=True, text=True,
                              timeout=TIMEOUT_S)
        assert proc.returncode == ex.status, f"{ex.id}: exit {proc.returncode}\n{proc.stderr[-3000:]}"
        return
    steps = ex.steps()
    assert steps, f"{ex.id}: a runnable console block without '$ ' commands"
    for cmd, shown in steps:
        argv = _in_process(cmd)
        if argv is not None:
            from netsim.cli import main

            cwd, out, err = os.getcwd(), io.StringIO(), io.StringIO()
            os.chdir(work)
            try:
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                    status = main(argv)
            finally:
                os.chdir(cwd)
            assert status == ex.status, f"{ex.id}: `{cmd}` exited {status}\n{err.getvalue()[-3000:]}"
            printed = out.getvalue() + err.getvalue()
        else:
            shell = re.sub(r"^netsim\b", f"'{sys.executable}' -m netsim", cmd.strip())
            proc = subprocess.run(["bash", "-c", shell], cwd=work, capture_output=True, text=True,
                                  timeout=TIMEOUT_S)
            assert proc.returncode == ex.status, f"{ex.id}: `{cmd}` exited {proc.returncode}\n{proc.stderr[-3000:]}"
            printed = proc.stdout + proc.stderr
        missing = unshown(shown, printed)
        assert not missing, f"{ex.id}: `{cmd}` did not print {missing!r}; it printed:\n{printed[-3000:]}"


def unshown(shown: list[str], printed: str) -> list[str]:
    """The lines of ``shown`` (``...``: any lines) that ``printed`` lacks, matching in order."""
    lines = [line.rstrip() for line in printed.splitlines()]
    at, missing = 0, []
    for want in (w.rstrip() for w in shown):
        if want in ("...", ""):
            continue
        try:
            at = lines.index(want, at) + 1
        except ValueError:
            missing.append(want)
    return missing


@pytest.mark.parametrize("ex", [pytest.param(e, id=e.id, marks=[pytest.mark.slow] if e.slow else [])
                                for e in EXAMPLES])
def test_example_runs_as_written(ex, tmp_path):
    work = _workdir(tmp_path)
    if ex.after is not None:
        before = [e for e in EXAMPLES if e.doc == ex.doc and e.ordinal == ex.after]
        assert before, f"{ex.id}: after={ex.after} names no runnable block of {ex.doc.name}"
        _run(before[0], work)
    _run(ex, work)


def test_shown_output_must_be_printed():
    """The output check can fail: a line the command does not print, or prints out of order, is caught."""
    printed = "topology      x\nGPUs          8\nlinks         9\n"
    assert unshown(["topology      x", "...", "links         9"], printed) == []
    assert unshown(["GPUs          16"], printed) == ["GPUs          16"]
    assert unshown(["links         9", "GPUs          8"], printed) == ["GPUs          8"]


def test_markers_are_found():
    """The README marks its quick examples (a marker typo would silently test nothing)."""
    readme = [e for e in EXAMPLES if e.doc.name == "README.md" and e.doc.parent == REPO]
    assert len([e for e in readme if not e.slow]) >= 3
    markers = sum(bool(MARKER.match(line)) for p in DOCS if p.is_file()
                  for line in p.read_text(encoding="utf-8").splitlines())
    assert markers == len(EXAMPLES), "a runnable marker not followed by a fenced block"
