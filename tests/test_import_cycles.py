"""No import cycles among netsim's modules, counting imports inside functions too.

The graph: one node per module of ``netsim/`` (a package is its ``__init__``); an edge for
every ``import`` / ``from ... import`` anywhere in the file (module level, inside functions
and classes), except under ``if TYPE_CHECKING:``.  ``from pkg import name`` points at
``pkg.name`` when that is a module, else at ``pkg``.  Importing ``a.b`` also runs ``a``'s
``__init__`` first; that implicit child -> package edge is not counted (a package's
``__init__`` re-exports its API from below and stands above its modules by design), but an
explicit import of the package (``from netsim import __version__``) is.  A cycle is a
strongly connected component of more than one module.

Run ``python tests/test_import_cycles.py`` to print every cycle with its edges.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "netsim"

#: Cycles known and not yet broken.  Each entry must stay exactly a cycle of the graph: when
#: one is broken, delete it here (the test says so), and no new cycle may appear.
ALLOWED: list[frozenset[str]] = []


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under ``root``."""
    out = {}
    for p in root.rglob("*.py"):
        parts = p.relative_to(root.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def _type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _imports(tree: ast.AST):
    """Every Import / ImportFrom node of ``tree``, skipping ``if TYPE_CHECKING:`` bodies."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        children = list(ast.iter_child_nodes(node))
        if _type_checking(node):
            children = list(node.orelse)
        stack.extend(children)


def import_graph(mods: dict[str, Path] | None = None) -> dict[str, set[str]]:
    """Module -> the netsim modules it imports (anywhere in the file)."""
    mods = modules() if mods is None else mods
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            for t in targets:
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t != name:
                    graph[name].add(t)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[frozenset[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(frozenset(comp))
    return out


def _describe(comp: frozenset[str], graph: dict[str, set[str]]) -> str:
    return "; ".join(f"{m} -> {', '.join(sorted(graph[m] & comp))}" for m in sorted(comp))


def test_the_graph_sees_function_level_imports(tmp_path):
    pkg = tmp_path / "netsim"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from netsim.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from .c import g\n")
    (pkg / "sub" / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import netsim.a\n"
                                     "def g():\n    import netsim.a\n")
    graph = import_graph(modules(pkg))
    assert graph["netsim.a"] == {"netsim.sub.b"} and graph["netsim.sub.b"] == {"netsim.sub.c"}
    assert cycles(graph) == [frozenset({"netsim.a", "netsim.sub.b", "netsim.sub.c"})]


def test_no_new_import_cycles():
    graph = import_graph()
    found = cycles(graph)
    new = [c for c in found if c not in ALLOWED]
    assert not new, "import cycle(s): " + " | ".join(_describe(c, graph) for c in new)
    gone = [sorted(c) for c in ALLOWED if c not in found]
    assert not gone, f"no longer a cycle, remove from ALLOWED in {Path(__file__).name}: {gone}"


#: What ``netsim.results`` may import: the results layer records what the simulation produced
#: through shared vocabulary (:mod:`netsim.vocab`), the topology and plain helpers, never the
#: simulation internals (workload, collectives, network, astra, bench).
RESULTS_MAY_IMPORT = ("netsim.results", "netsim.errors", "netsim.version", "netsim.vocab", "netsim.units",
                      "netsim.inputs", "netsim.topology")


def test_results_depend_only_on_vocabulary_and_topology():
    graph = import_graph()
    bad = sorted((m, t) for m, targets in graph.items() if m.startswith("netsim.results")
                 for t in targets if not t.startswith(RESULTS_MAY_IMPORT))
    assert not bad, f"netsim.results imports simulation internals: {bad}"


if __name__ == "__main__":
    g = import_graph()
    for comp in cycles(g):
        print(("allowed: " if comp in ALLOWED else "NEW: ") + _describe(comp, g))
    sys.exit(0)
