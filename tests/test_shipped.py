"""Shipped files (topologies, studies, workloads) by bare name or repository-relative path: the
working folder first, then the installed package (README "Set-up", netsim/shipped.py)."""

import shutil
from pathlib import Path

import pytest

import netsim
import netsim.sweep
from netsim import shipped
from netsim.cli import main
from netsim.errors import InputError

from conftest import REPO

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.py"))


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """netsim as a wheel installs it: ``site-packages/netsim/_topologies`` and ``_workloads`` (copied
    by setup.py's build_py), no checkout beside the package; the working folder is empty."""
    from test_workloads_folder import build_py

    site = tmp_path / "site-packages"
    build_py(site)
    monkeypatch.setattr(shipped, "__file__", str(site / "netsim" / "shipped.py"))
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)
    return site / "netsim"


def test_every_kind_resolves_by_bare_name_from_the_package(installed):
    assert shipped.package_folder("topologies") == installed / "_topologies"
    assert shipped.resolve("dgx-h100", "topology") == installed / "_topologies" / "dgx-h100.yaml"
    assert shipped.resolve("dgx-h100.yaml", "topology") == installed / "_topologies" / "dgx-h100.yaml"
    assert shipped.resolve("fat_tree_design", "study") == installed / "_topologies" / "studies" / "fat_tree_design.yaml"
    assert shipped.resolve("stragglers", "faults") == installed / "_workloads" / "faults" / "stragglers.yaml"
    assert shipped.resolve("deepseek-ep8-t64-uniform", "expert map") == \
        installed / "_workloads" / "expert-maps" / "deepseek-ep8-t64-uniform.csv"


def test_repository_relative_paths_resolve_from_the_package(installed):
    assert netsim.find_shipped("workloads/faults/stragglers.yaml") == installed / "_workloads" / "faults" / "stragglers.yaml"
    assert netsim.find_shipped("topologies/studies/fat_tree_design.yaml") == \
        installed / "_topologies" / "studies" / "fat_tree_design.yaml"
    trace = "workloads/traces/llama3-8b-tp2pp2/llm"
    assert shipped.resolve(trace, prefix=True) == installed / "_workloads" / "traces" / "llama3-8b-tp2pp2" / "llm"
    with pytest.raises(FileNotFoundError, match="topologies/nope.yaml: not found in .* nor in the installed netsim"):
        netsim.find_shipped("topologies/nope.yaml")
    # a path that is not shipped is left for its loader to refuse ("no such file")
    assert shipped.resolve("topologies/nope.yaml", "topology") == "topologies/nope.yaml"
    assert shipped.resolve("mine/dgx-h100.yaml", "topology") == "mine/dgx-h100.yaml"


def test_the_working_folder_wins(installed):
    own = Path("topologies") / "dgx-h100.yaml"
    own.parent.mkdir()
    shutil.copy(installed / "_topologies" / "dgx-h100.yaml", own)
    assert shipped.resolve("dgx-h100", "topology") == own
    assert netsim.find_shipped("topologies/dgx-h100.yaml") == own.resolve()
    Path("dgx-h100.yaml").write_text("x")
    assert shipped.resolve("dgx-h100", "topology") == Path("dgx-h100.yaml")  # a file of that name, here
    assert shipped.resolve("dgx-a100", "topology") == installed / "_topologies" / "dgx-a100.yaml"


def test_unknown_bare_name_lists_the_nearest(installed):
    with pytest.raises(InputError) as err:
        shipped.resolve("dgx-h10", "topology")
    assert str(err.value) == ("dgx-h10: no such file, nor a shipped topology name; nearest shipped: "
                              "dgx-h100, dgx-a100, dgx1-v100-nvlink, p4d-a100-shared-nic")
    with pytest.raises(InputError, match="straglers: no such file, nor a shipped faults name; nearest shipped: "
                                         "stragglers, superpod-faults$"):
        shipped.resolve("straglers", "faults")
    assert shipped.resolve("x" * 5000, "topology") == "x" * 5000  # the OS refuses the name: the loader says so
    assert shipped.resolve({"a": 1}, "faults") == {"a": 1}


def test_a_checkout_reads_its_own_folders(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert shipped.package_folder("workloads") == REPO / "workloads"
    assert shipped.resolve("gb200-nvl72", "topology") == REPO / "topologies" / "gb200-nvl72.yaml"
    monkeypatch.setattr(shipped, "__file__", str(tmp_path / "site-packages" / "netsim" / "shipped.py"))
    assert shipped.package_folder("workloads") is None  # no _workloads and no checkout: a broken install
    with pytest.raises(InputError, match="nearest shipped: [(]none"):
        shipped.resolve("dgx-h100", "topology")


def test_cli_takes_bare_names_from_an_empty_folder(installed, capsys):
    assert main(["bench", "--topology", "dgx-h100", "--op", "all_reduce", "-b", "1M", "--model", "analytical"]) == 0
    assert "all_reduce_perf" in capsys.readouterr().out
    assert main(["topo", "h100-superpod-1su"]) == 0
    assert "h100-superpod-1su" in capsys.readouterr().out
    assert main(["run", "--topology", "dgx-h100", "--workload", "workloads/traces/llama3-8b-tp2pp2/llm",
                 "--comm-groups", "workloads/traces/llama3-8b-tp2pp2/comm_groups.json", "--faults", "stragglers",
                 "--model", "analytical"]) == 0
    capsys.readouterr()
    assert main(["sweep", "fat_tree_design", "--out", "study", "--dry-run"]) == 0
    assert "144 configurations" in capsys.readouterr().out
    assert main(["bench", "--topology", "dgx-h100", "--op", "moe_dispatch", "--tokens", "64", "--topk", "8",
                 "--experts", "256", "--expert-map", "deepseek-ep8-t64-uniform", "--model", "analytical"]) == 0


def test_cli_unknown_bare_name_is_one_line(installed, capsys):
    assert main(["bench", "--topology", "dgx-h10", "--op", "all_reduce", "-b", "1M"]) == 2
    err = capsys.readouterr().err
    assert err == ("netsim: error: dgx-h10: no such file, nor a shipped topology name; nearest shipped: "
                   "dgx-h100, dgx-a100, dgx1-v100-nvlink, p4d-a100-shared-nic\n")
    assert main(["run", "--topology", "dgx-h100", "--llm", "llama3-8b", "--tp", "8", "--pp", "1", "--dp", "1",
                 "--faults", "stragler", "--model", "analytical"]) == 2
    assert capsys.readouterr().err.startswith("netsim: error: stragler: no such file, nor a shipped faults name; "
                                              "nearest shipped: stragglers")


def test_sweep_files_name_shipped_topologies(installed, tmp_path, capsys):
    spec = tmp_path / "mine.yaml"
    spec.write_text("kind: bench\nbase: {op: all_reduce, size: 1M, model: analytical}\n"
                    "grid: {topology: [dgx-h100, topologies/dgx-a100.yaml]}\n")
    sweep = netsim.sweep.load_sweep(spec)
    assert sorted(Path(p["topology"]).name for p in sweep.paths) == ["dgx-a100.yaml", "dgx-h100.yaml"]
    trace = "workloads/traces/llama3-8b-tp2pp2"
    spec.write_text(f"kind: run\nbase: {{topology: dgx-h100, workload: {trace}/llm, "
                    f"comm_groups: {trace}/comm_groups.json, faults: superpod-faults}}\n")
    paths = netsim.sweep.load_sweep(spec).paths[0]
    assert Path(paths["faults"]) == installed / "_workloads" / "faults" / "superpod-faults.yaml"
    assert Path(paths["comm_groups"]) == installed / "_workloads" / "traces" / "llama3-8b-tp2pp2" / "comm_groups.json"
    assert Path(paths["workload"]) == installed / "_workloads" / "traces" / "llama3-8b-tp2pp2" / "llm"
    spec.write_text("kind: bench\nbase: {op: all_reduce, size: 1M, topology: dgx-h10}\n")
    with pytest.raises(InputError, match="base.topology: no such file .*nor a shipped topology name; "
                                         "nearest shipped: dgx-h100"):
        netsim.sweep.load_sweep(spec)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebooks_use_the_installed_package(path):
    """A notebook finds its inputs with netsim.find_shipped and leaves sys.path alone, so it runs the
    netsim that is installed, from any folder (tests/test_install.py runs them after pip install)."""
    src = path.read_text()
    assert "sys.path" not in src and "find_shipped(" in src
    for line in src.splitlines():
        if "topologies/" in line or "workloads/" in line:
            assert line.lstrip().startswith("#") or "find_shipped(" in line, line
