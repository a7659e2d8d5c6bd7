"""TopologyFacts: typed, frozen, built once by the builders (issue 15)."""

import ast
import dataclasses
import math
import typing
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest

import netsim
from netsim.topology import builders
from netsim.topology.facts import DimFacts, TopologyFacts, XgftLevel
from netsim.topology.fattree import Tier, fat_tree
from netsim.topology.multidim import Dim, multi_dim
from netsim.topology.spec import apply_efficiency, load_topology
from netsim.workload.simulation import _with_compute_efficiency

from conftest import TOPOLOGIES, TRACES

PACKAGE = Path(netsim.__file__).resolve().parent
ASTRA_NETWORKS = TRACES / "astra-sim__astra-sim/examples/network/analytical"
HINTS = typing.get_type_hints(TopologyFacts)


def _conforms(value, hint) -> bool:
    """Whether ``value`` has the declared type ``hint`` (the subset of typing the facts use)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is float:
        return type(value) is float
    if hint is int:
        return type(value) is int
    if hint is bool or hint is str:
        return type(value) is hint
    if origin in (typing.Union, type(int | None)):
        return any(_conforms(value, a) for a in args)
    if hint is type(None):
        return value is None
    if origin is tuple:
        return isinstance(value, tuple) and all(_conforms(v, args[0]) for v in value)
    if origin is Mapping:
        return isinstance(value, Mapping) and all(
            _conforms(k, args[0]) and _conforms(v, args[1]) for k, v in value.items())
    if dataclasses.is_dataclass(hint):
        return type(value) is hint and all(
            _conforms(getattr(value, f.name), typing.get_type_hints(hint)[f.name]) for f in dataclasses.fields(hint))
    raise AssertionError(f"no check for {hint!r}")


def _every_topology():
    yield from ((name, build()) for name, build in builders.SCALEUP_PRESETS.items())
    yield "fat-tree", fat_tree(builders.hgx_h100(), 4, [Tier("leaf", down=4, up=4), Tier("spine", down=8)],
                               nic_bw=50e9)
    yield "multi-dim", multi_dim([Dim("Ring", 4, 50e9, 500e-9), Dim("Switch", 2, 25e9, 1e-6)])
    for path in sorted(TOPOLOGIES.glob("*.yaml")):
        if "64k" not in path.name and "16k" not in path.name and "24k" not in path.name:
            yield path.name, load_topology(path)


@pytest.mark.parametrize("name,topo", list(_every_topology()), ids=lambda v: v if isinstance(v, str) else "")
def test_every_fact_has_its_declared_type(name, topo):
    f = topo.facts
    assert type(f) is TopologyFacts
    wrong = {fl.name: getattr(f, fl.name) for fl in dataclasses.fields(f)
             if not _conforms(getattr(f, fl.name), HINTS[fl.name])}
    assert not wrong, f"{name}: facts of the wrong type: {wrong}"
    assert topo.gpus_per_node * f.nodes == topo.n_gpus


def test_the_type_check_can_fail():
    assert not _conforms(np.int64(3), HINTS["diameter_hops"])
    assert not _conforms({"leaf": 2}, HINTS["oversubscription"])  # int where float is declared
    assert not _conforms([XgftLevel(1, 1, 1)], HINTS["xgft"])
    assert _conforms(None, HINTS["gpu_model"]) and not _conforms(3, HINTS["gpu_model"])


def test_facts_are_frozen_and_read_only():
    t = fat_tree(builders.hgx_h100(), 4, [Tier("leaf", down=4, up=4), Tier("spine", down=8)], nic_bw=50e9)
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.facts.nvls = False
    with pytest.raises(TypeError):
        t.facts.switches["leaf"] = 1
    with pytest.raises(TypeError):
        apply_efficiency(t, {"ib": 0.9}).facts.link_efficiency["ib"] = 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.facts = TopologyFacts()
    assert not hasattr(t, "meta")  # the untyped mapping is gone


def test_unknown_kinds_are_refused():
    with pytest.raises(ValueError, match="scaleup"):
        TopologyFacts(scaleup="torus")
    with pytest.raises(ValueError, match="scaleout"):
        TopologyFacts(scaleout="dragonfly")


def test_fat_tree_keeps_the_node_facts_and_adds_its_own():
    node = builders.hgx_h100()
    t = fat_tree(node, 4, [Tier("leaf", down=4, up=2), Tier("spine", down=8)], nic_bw=50e9)
    f = t.facts
    assert (f.gpu_model, f.nvls, f.scaleup, f.peak_flops) == ("H100", True, "nvswitch", 989e12)
    assert (f.nodes, f.scaleout, f.tiers, f.scaleout_Bps_per_gpu) == (4, "fat_tree", 2, 50e9)
    assert dict(f.oversubscription) == {"leaf": 2.0}
    assert f.xgft[0] == XgftLevel(4, 1, 1) and len(f.xgft) == 2
    assert node.facts.scaleout is None and node.facts.nodes == 1  # the node's own facts are untouched


def test_astra_network_yaml_sets_the_flag_and_keeps_its_own_units(traces):
    t = load_topology(ASTRA_NETWORKS / "Ring_8npus.yml")
    assert t.facts.astra_network
    d = t.facts.dims[0]
    assert isinstance(d, DimFacts) and (d.kind, d.npus) == ("Ring", 8)
    text = (ASTRA_NETWORKS / "Ring_8npus.yml").read_text()
    assert f"{d.astra_latency_ns:g}" in text and f"{d.astra_bw:g}" in text  # as written, not round-tripped
    assert d.bw_Bps == pytest.approx(d.astra_bw * 2**30)


def test_netsim_yaml_is_not_an_astra_network():
    t = load_topology(TOPOLOGIES / "dgx-h100.yaml")
    assert not t.facts.astra_network and t.facts.dims == ()
    assert multi_dim([Dim("Ring", 4, 50e9, 500e-9)], astra_network=True).facts.astra_network


def test_derived_topologies_get_new_facts():
    t = builders.hgx_h100()
    e = apply_efficiency(t, {"nvlink": 0.8})
    assert dict(e.facts.link_efficiency) == {"nvlink": 0.8} and t.facts.link_efficiency == {}
    assert e.facts.scaleup_Bps_per_gpu == t.facts.scaleup_Bps_per_gpu  # line rate, not achieved
    assert np.allclose(e.link_bw, 0.8 * t.link_bw)
    slow, note = _with_compute_efficiency(t, 0.5)
    assert slow.facts.peak_flops == t.facts.peak_flops == 989e12 and t.facts.compute_efficiency["gemm"] < 1
    assert set(slow.facts.compute_efficiency.values()) == {0.5} and "other" in slow.facts.compute_efficiency
    assert "0.5" in note


def test_small_topology_stats_are_facts():
    t = builders.nvlink_box4()
    assert t.facts.bisection_Bps == pytest.approx(4 * 50e9) and t.facts.diameter_hops == 1
    assert math.isnan(TopologyFacts().bisection_Bps)


# ------------------------------------------------------------------ no meta, no late writes
def _sources():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, ast.parse(path.read_text(), filename=str(path))


def test_no_module_reads_or_writes_an_untyped_meta():
    hits = [f"{p.relative_to(PACKAGE)}:{n.lineno}" for p, tree in _sources() for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and n.attr == "meta"]
    hits += [f"{p.relative_to(PACKAGE)}:{n.lineno}" for p, tree in _sources() for n in ast.walk(tree)
             if isinstance(n, ast.keyword) and n.arg == "meta"]
    assert not hits, f"topo.meta is gone; read topo.facts (netsim/topology/facts.py): {hits}"


def test_no_module_sets_a_fact_after_construction():
    """Facts change only through dataclasses.replace (a new object), never by assignment."""
    bad = []
    for p, tree in _sources():
        for n in ast.walk(tree):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(
                n, (ast.AugAssign, ast.AnnAssign)) else []
            for t in targets:
                base = t.value if isinstance(t, (ast.Attribute, ast.Subscript)) else None
                while isinstance(base, (ast.Attribute, ast.Subscript)):
                    if isinstance(base, ast.Attribute) and base.attr == "facts":
                        bad.append(f"{p.relative_to(PACKAGE)}:{n.lineno}")
                        break
                    base = base.value
            if isinstance(n, ast.Call) and getattr(n.func, "attr", None) == "__setattr__" and any(
                    isinstance(a, ast.Constant) and a.value == "facts" for a in n.args):
                bad.append(f"{p.relative_to(PACKAGE)}:{n.lineno}")
    assert not bad, bad


def test_the_docs_example_runs(monkeypatch):
    import doctest

    root = PACKAGE.parent
    monkeypatch.chdir(root)
    text = (root / "docs" / "topology.md").read_text()
    test = doctest.DocTestParser().get_doctest(text, {"load_topology": load_topology}, "topology.md", None, 0)
    assert test.examples
    assert doctest.DocTestRunner().run(test, out=lambda _s: None).failed == 0
