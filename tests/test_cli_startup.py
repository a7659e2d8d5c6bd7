"""The command line starts fast: ``netsim --help`` lists every command without importing the
library's heavy dependencies, and a command loads only its own module (issue 38, item 3)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from netsim.cli import app

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("numpy", "pandas", "pyarrow", "matplotlib", "simpy", "google.protobuf", "numba", "yaml", "dask")


def _loaded_after(argv: list[str]) -> set[str]:
    code = ("import sys\nfrom netsim.cli import main\ntry:\n    main(%r)\nexcept SystemExit:\n    pass\n"
            "print(' '.join(sorted(sys.modules)))\n" % (argv,))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    return set(out.stdout.splitlines()[-1].split())


def test_help_imports_nothing_heavy():
    loaded = _loaded_after(["--help"])
    assert "netsim.cli.app" in loaded
    assert not [m for m in loaded if m.split(".")[0] in {h.split(".")[0] for h in HEAVY} or
                m.startswith("netsim.cli.") and m != "netsim.cli.app"]


def test_a_command_loads_only_its_module():
    loaded = _loaded_after(["sweep", "--help"])
    assert "netsim.cli.sweep" in loaded
    assert not {"netsim.cli.bench", "netsim.cli.workload", "netsim.cli.astra", "netsim.cli.analyze"} & loaded


def test_the_table_lists_exactly_the_commands_the_modules_add():
    full = app.build_parser()
    sub = next(a for a in full._actions if a.dest == "command")  # argparse's subparsers action
    assert list(sub.choices) == list(app.COMMANDS)
    for name, action in zip(sub.choices, sub._choices_actions):
        assert action.help == app.HELP[name]
        assert sub.choices[name].get_default("func") is not None, name  # a real parser, not a listing


@pytest.mark.parametrize("name", list(app.COMMANDS))
def test_each_command_gets_its_real_parser(name):
    parser = app.build_parser([name])
    sub = next(a for a in parser._actions if a.dest == "command")
    assert sub.choices[name].get_default("func") is not None
    assert set(sub.choices) == set(app.COMMANDS)
