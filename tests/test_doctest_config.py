"""The default test run executes netsim's docstring examples (issue 15)."""

import doctest
import tomllib
from pathlib import Path

import netsim.topology.builders as builders

ROOT = Path(__file__).resolve().parents[1]


def test_default_run_collects_the_doctests():
    opts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "--doctest-modules" in opts["addopts"].split()
    assert "netsim" in opts["testpaths"]


def test_a_wrong_example_would_fail():
    """The doctest machinery reports a wrong expected value (the examples can fail)."""
    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    tests = [t for t in finder.find(builders) if t.examples]
    assert tests, "builders has docstring examples"
    t = tests[0]
    t.examples[-1].want = "'certainly not this'\n"
    result = runner.run(t, out=lambda _s: None)
    assert result.failed == 1
