"""``pip install .`` gives what the README's set-up promises: the wheel carries ``topologies/`` and
``workloads/`` (as ``netsim/_topologies`` and ``netsim/_workloads``), and the installed package runs
the README's commands and every notebook from an empty folder, by bare name or repository-relative
path (netsim/shipped.py).

The first test (default run, ~20 s) builds the sdist and the wheel from it, as ``python -m build``
does, and compares the wheel with ``git ls-files topologies workloads``.  The others (``slow``,
~4 min) install the checkout non-editable into a fresh venv and run from an empty folder.  That
venv borrows the dependencies of the interpreter running the tests (a ``.pth`` line naming its
site-packages, after the venv's own) instead of downloading them: pip still resolves netsim's
requirements against them, offline, in seconds, on a CI machine where ``pip install '.[test]'``
put them in the system interpreter as on a developer's venv; the checkout is never on ``sys.path``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from conftest import REPO

#: What a build reads: the project files and the folders that go into the wheel.
BUILD_INPUTS = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "netsim", "topologies", "workloads")
SHIPPED = ("topologies", "workloads")
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.py"))
BUILD_TIMEOUT_S = 600


def _tracked(*paths: str) -> list[str]:
    """Files under ``paths`` that git tracks (or would: new and not ignored), as in the checkout."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs a git checkout: git ls-files lists what the wheel must carry")
    out = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard",
                          "--", *paths], capture_output=True, check=True).stdout.decode()
    return sorted({f for f in out.split("\0") if f and (REPO / f).is_file()})


def _source_copy(dest: Path) -> Path:
    """The build inputs copied to ``dest``: a build there leaves no ``build/`` or egg-info in the
    checkout and picks up no stale build output."""
    for rel in _tracked(*BUILD_INPUTS):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, dest / rel)
    return dest


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=kw.pop("timeout", BUILD_TIMEOUT_S), **kw)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))}: exit {proc.returncode}\n{proc.stdout[-2000:]}\n" \
                                 f"{proc.stderr[-3000:]}"
    return proc


def _build_wheel(src: Path, out: Path) -> Path:
    """The sdist (MANIFEST.in says what it carries), then pip's isolated wheel build from it; from the
    source folder itself where setuptools is not importable here to write the sdist."""
    out.mkdir(parents=True)
    target = src
    try:
        import setuptools  # noqa: F401
    except ImportError:
        pass
    else:
        code = "import sys; from setuptools import build_meta as b; print(b.build_sdist(sys.argv[1]))"
        name = _run([sys.executable, "-W", "ignore", "-c", code, str(out)], cwd=src).stdout.split()[-1]
        target = out / name
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(target)])
    return next(out.glob("netsim-*.whl"))


def test_wheel_carries_the_shipped_files(tmp_path):
    wheel = _build_wheel(_source_copy(tmp_path / "src"), tmp_path / "dist")
    names = set(zipfile.ZipFile(wheel).namelist())
    for root in SHIPPED:
        want = {f"netsim/_{root}/{f[len(root) + 1:]}" for f in _tracked(root) if not f.endswith(".py")}
        assert {n for n in names if n.startswith(f"netsim/_{root}/")} == want, root
    assert {"netsim/_topologies/dgx-h100.yaml", "netsim/_topologies/studies/fat_tree_design.yaml",
            "netsim/_workloads/faults/stragglers.yaml", "netsim/shipped.py"} <= names
    assert not any(n.endswith("regenerate.py") for n in names)  # scripts stay in the repository


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    """A fresh venv with the checkout ``pip install``-ed into it (non-editable), and the environment
    and empty folder its commands run in."""
    base = tmp_path_factory.mktemp("installed")
    venv = base / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    python = venv / ("Scripts" if os.name == "nt" else "bin") / "python"
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    ours = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    Path(purelib, "_netsim_test_dependencies.pth").write_text("".join(f"{p}\n" for p in sorted(ours)))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
    env.update(PATH=os.pathsep.join([str(python.parent), env.get("PATH", "")]), VIRTUAL_ENV=str(venv),
               MPLBACKEND="Agg", PIP_DISABLE_PIP_VERSION_CHECK="1")
    src = _source_copy(base / "src")
    _run([str(python), "-m", "pip", "install", "-q", "."], cwd=src, env=env)  # the README's `pip install .`
    shutil.rmtree(src)
    empty = base / "empty"
    empty.mkdir()
    return {"venv": venv, "python": python, "env": env, "cwd": empty}


def _sh(installed: dict, command: str, timeout: float = 600) -> str:
    return _run(["bash", "-c", command], cwd=installed["cwd"], env=installed["env"], timeout=timeout).stdout


@pytest.mark.slow
def test_installed_package_is_the_wheel(installed):
    out = _sh(installed, "netsim --version && python -c 'import netsim; print(netsim.__file__); "
                         "print(netsim.find_shipped(\"workloads/faults/stragglers.yaml\"))'").splitlines()
    venv = installed["venv"].resolve()
    assert out[0].startswith("netsim ") and all(Path(line).resolve().is_relative_to(venv) for line in out[1:]), out
    assert out[2].endswith("netsim/_workloads/faults/stragglers.yaml")


@pytest.mark.slow
def test_readme_commands_run_from_an_empty_folder(installed):
    from test_docs_examples import EXAMPLES

    readme = [ex for ex in EXAMPLES if ex.doc.name == "README.md" and ex.doc.parent == REPO]
    setup_cmd = next(line for line in (REPO / "README.md").read_text().splitlines()
                     if line.startswith("pip install . && netsim bench"))
    out = _sh(installed, setup_cmd.split("&&", 1)[1])  # the README's first command, less the install
    assert "Avg bus bandwidth" in out
    out = _sh(installed, "netsim bench --topology dgx-h100 --op all_reduce -b 8 -e 1G -f 4")
    assert "Avg bus bandwidth" in out
    faults = next(ex for ex in readme if any("--faults" in c for c in ex.commands()))
    for command in faults.commands():
        _sh(installed, command)
    assert (installed["cwd"] / "trace.json").is_file() and (installed["cwd"] / "results").is_dir()


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_installed(installed, path, tmp_path, monkeypatch):
    jupytext = pytest.importorskip("jupytext", reason="notebook tests need jupytext (pip install '.[test]')")
    nbclient = pytest.importorskip("nbclient", reason="notebook tests need nbclient (pip install '.[test]')")
    from nbformat.v4 import new_code_cell

    spec = tmp_path / "jupyter" / "kernels" / "netsim-installed"  # a kernel on the venv's interpreter
    spec.mkdir(parents=True)
    spec.joinpath("kernel.json").write_text(
        f'{{"argv": ["{installed["python"]}", "-m", "ipykernel_launcher", "-f", "{{connection_file}}"], '
        f'"display_name": "netsim installed", "language": "python"}}')
    monkeypatch.delenv("PYTHONPATH", raising=False)  # the kernel imports the installed netsim only
    for key in ("PATH", "VIRTUAL_ENV", "MPLBACKEND"):
        monkeypatch.setenv(key, installed["env"][key])
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("NETSIM_NOTEBOOK_SIZE", "small")  # studies that have a full size run their small one
    nb = jupytext.read(path)
    nb.cells.append(new_code_cell("import netsim; print(netsim.__file__)"))
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="netsim-installed",
                                     resources={"metadata": {"path": str(installed["cwd"])}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors, errors[0].get("evalue")
    where = "".join(o.get("text", "") for o in nb.cells[-1].outputs).strip()
    assert Path(where).resolve().is_relative_to(installed["venv"].resolve()), where
