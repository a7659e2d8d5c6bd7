"""The import layers of ``docs/architecture.md`` hold in the code.

The order is written once, in the architecture page's layer table (first column: the modules and
packages of a layer, lowest layer first); this test reads it from there.  A module may import its
own layer and the layers below it, never one above: every ``import`` and ``from ... import``
counts, at module level or inside a function, relative ones resolved.  ``from netsim import X``
where ``X`` is not a module is an import of the package's public API (the ``netsim`` row).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"


def layer_table(text: str) -> list[list[str]]:
    """The layers, lowest first: the backticked names in the first column of each row of the table
    under the "## Layers" heading (``topology/`` a package, ``units`` a module, ``netsim`` the
    package's own ``__init__``)."""
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return [[name.rstrip("/") for name in re.findall(r"`([^`]+)`", row.split("|")[1])] for row in rows]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(module: str, source: str, is_package: bool, modules: set[str]) -> set[str]:
    """The netsim modules ``module`` imports (function-level ones included)."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "netsim"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base if is_package else base[:-1]
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "netsim":
                continue
            for alias in node.names:  # ``from netsim.perftests import moe``: the submodule when it is one
                sub = f"{target}.{alias.name}"
                out.add(sub if sub in modules else target)
    return out


def layer_of(module: str, layers: list[list[str]]) -> int | None:
    """Index of ``module``'s layer: ``netsim.X...`` belongs to the row naming ``X``; ``netsim`` (the
    package's ``__init__``) to the row naming ``netsim``."""
    key = "netsim" if module == "netsim" else module.split(".")[1]
    for i, names in enumerate(layers):
        if key in names:
            return i
    return None


def violations(sources: dict[str, tuple[str, bool]], layers: list[list[str]]) -> list[str]:
    """Every import from a lower layer into a higher one, and every module no layer names.
    ``sources``: module name -> (source text, is a package's ``__init__``)."""
    modules = set(sources)
    bad = []
    for module, (source, is_package) in sorted(sources.items()):
        mine = layer_of(module, layers)
        if mine is None:
            bad.append(f"{module}: in no layer of docs/architecture.md")
            continue
        for target in sorted(imports(module, source, is_package, modules)):
            theirs = layer_of(target, layers)
            if theirs is not None and theirs > mine:
                bad.append(f"{module} (layer {mine}: {', '.join(layers[mine])}) imports {target} "
                           f"(layer {theirs}: {', '.join(layers[theirs])})")
    return bad


def netsim_sources() -> dict[str, tuple[str, bool]]:
    return {module_name(p): (p.read_text(), p.name == "__init__.py") for p in sorted((ROOT / "netsim").rglob("*.py"))}


@pytest.fixture(scope="module")
def layers():
    return layer_table(PAGE.read_text())


def test_the_page_orders_every_top_level_module_and_package(layers):
    names = [n for row in layers for n in row]
    assert len(names) == len(set(names)), "a name in two layers"
    top = {p.stem for p in (ROOT / "netsim").iterdir() if p.suffix == ".py" and p.stem != "__init__"} | \
          {p.name for p in (ROOT / "netsim").iterdir() if (p / "__init__.py").exists()}
    assert top | {"netsim"} == set(names)
    assert layers[-1] == ["cli", "__main__"], "the command line is the top layer"


def test_no_module_imports_a_layer_above_its_own(layers):
    assert violations(netsim_sources(), layers) == []


def test_an_upward_import_is_caught_at_any_depth(layers):
    """The check fails when a lower layer imports a higher one: at module level, in a function,
    relatively, or through the package's API."""
    sources = netsim_sources()
    for bad in ("from netsim.cli.options import int_arg",
                "def f():\n    from netsim.workload import runner\n",
                "def f():\n    from ..results import io\n",
                "from netsim import simulate\n",
                "import netsim.perftests.moe\n"):
        src = dict(sources)
        src["netsim.topology.model"] = (sources["netsim.topology.model"][0] + "\n" + bad, False)
        found = violations(src, layers)
        assert len(found) == 1 and found[0].startswith("netsim.topology.model "), (bad, found)
    # a module no layer names
    src = dict(sources, **{"netsim.newthing": ("", False)})
    assert violations(src, layers) == ["netsim.newthing: in no layer of docs/architecture.md"]
    # the same import downward is fine
    src = dict(sources)
    src["netsim.cli.options"] = (sources["netsim.cli.options"][0] + "\nfrom netsim.topology import spec\n", False)
    assert violations(src, layers) == []


def test_the_library_runs_without_the_command_line():
    """Nothing below ``cli/`` loads it: importing the whole library leaves ``netsim.cli`` unloaded."""
    import subprocess
    import sys

    library = [m for m in netsim_sources() if m == "netsim" or m.split(".")[1] not in ("cli", "__main__")]
    code = (f"import sys, importlib\nfor m in {library!r}:\n    importlib.import_module(m)\n"
            "print(sorted(n for n in sys.modules if n.startswith('netsim.cli')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


#: The largest a file and a function of netsim/ may grow (DEVELOPERS.md: files under ~500 lines;
#: issue 37: no function over 100 lines).
MAX_FILE_LINES, MAX_FUNCTION_LINES = 500, 100


def test_files_and_functions_stay_small():
    big = []
    for path in sorted((ROOT / "netsim").rglob("*.py")):
        text = path.read_text()
        name = path.relative_to(ROOT)
        if text.count("\n") > MAX_FILE_LINES:
            big.append(f"{name}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    big.append(f"{name}:{node.lineno} {node.name}: {length} lines")
    assert big == []


def test_the_picture_shows_the_table_top_down(layers):
    """The diagram at the top of the page lists the table's layers, highest first."""
    text = PAGE.read_text()
    picture = text.split("```", 2)[1]
    # each row: the layer's names (a package with its "/", "netsim (__init__)"), two spaces, what it does
    heads = [re.split(r"\s{2,}", line.strip())[0].split() for line in picture.strip("\n").splitlines()]
    shown = [[w.rstrip("/") for w in head if w != "(__init__)"] for head in heads]
    assert shown == [list(row) for row in reversed(layers)]
