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


def test_an_astra_run_loads_neither_the_topology_builders_nor_the_analysis_stack(traces):
    """A run on an ASTRA-sim network YAML reads it through netsim.topology.astra_yaml alone: the
    builders, costs and spec loader of netsim.topology, pandas, pyarrow and SimPy stay unloaded."""
    d = traces / "astra-sim__astra-sim"
    mb = d / "examples/workload/microbenchmarks/all_reduce/8npus_1MB/all_reduce"
    rt = d / "tests/rt_template/inputs"
    loaded = _loaded_after(["astra", f"--workload-configuration={mb}",
                            f"--system-configuration={rt / 'system_cfg.json'}",
                            f"--network-configuration={rt / 'network_cfg.yml'}",
                            f"--remote-memory-configuration={rt / 'remote_memory_cfg.json'}"])
    assert "netsim.astra.run" in loaded and "netsim.topology.astra_yaml" in loaded  # it did run
    unneeded = {"netsim.topology.builders", "netsim.topology.bom", "netsim.topology.cost", "netsim.topology.spec",
                "netsim.topology.fattree", "netsim.topology.summary", "pandas", "pyarrow", "simpy", "matplotlib"}
    assert not unneeded & loaded


def test_the_topology_package_still_exports_its_names_on_first_use():
    code = ("import sys, netsim.topology as t\nassert 'netsim.topology.fattree' not in sys.modules\n"
            "from netsim.topology import fat_tree, Topology, load_topology\n"
            "assert fat_tree.__module__ == 'netsim.topology.fattree' and t.Topology is Topology\n"
            "assert set(t.__all__) <= set(dir(t))\nprint('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.strip() == "ok", out.stderr
    with pytest.raises(AttributeError):
        import netsim.topology

        netsim.topology.no_such_name  # noqa: B018
