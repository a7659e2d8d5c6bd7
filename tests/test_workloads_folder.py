"""workloads/: every shipped file loads or runs; the presets are these files; setup.py copies them into the
package (the built wheel and an installed run: tests/test_install.py)."""

import doctest
import importlib.util
import json
import sys

import numpy as np
import pytest

from netsim.cli import main
from netsim.workload.faults import fault_spec
from netsim.workload.generate import MODEL_PRESETS, generate_llm, load_model_spec
from netsim.workload.generate import presets
from netsim.workload.generate.model import read_model_yaml

from conftest import REPO, TOPOLOGIES

WORKLOADS = REPO / "workloads"
DGX = str(TOPOLOGIES / "dgx-h100.yaml")
SUPERPOD = str(TOPOLOGIES / "h100-superpod-1su.yaml")

#: Published parameter counts (the sources in each YAML): Llama 3 Table 1 names 8B/70B/405B;
#: Mixtral 8x7B 47B (arXiv:2401.04088 §1: 47B total, 13B active) and 8x22B 141B (mistral.ai,
#: 2024-04-17); DeepSeek-V3 671B (arXiv:2412.19437 abstract); GPT-3 175B (arXiv:2005.14165 Table 2.1).
PUBLISHED = {"llama3-8b": 8.03e9, "llama3-70b": 70.6e9, "llama3-405b": 405e9, "mixtral-8x7b": 46.7e9,
             "mixtral-8x22b": 141e9, "deepseek-v3": 671e9, "gpt3-175b": 175e9}
#: Models whose input embedding and LM head share weights (GPT-3 reuses GPT-2's tied embedding).
TIED = {"gpt3-175b"}


def test_doctests():
    assert doctest.testmod(presets).failed == 0


def test_presets_are_the_shipped_yamls():
    files = sorted(p.stem for p in (WORKLOADS / "models").glob("*.yaml"))
    assert sorted(MODEL_PRESETS) == files == sorted(PUBLISHED)
    assert presets.workloads_dir() == WORKLOADS  # a checkout reads workloads/ in place
    for name in files:
        spec = read_model_yaml(WORKLOADS / "models" / f"{name}.yaml")
        assert spec == load_model_spec(name) and spec.name == name
        assert "arXiv" in spec.source or "config.json" in spec.source, name


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_preset_parameter_counts_match_publications(name):
    spec = load_model_spec(name)
    assert spec.params(tied_embeddings=name in TIED) == pytest.approx(PUBLISHED[name], rel=0.01)


def test_llama3_405b_mlp_is_swiglu():
    """Llama 3 uses SwiGLU (arXiv:2407.21783 Table 3): three hidden x ffn matrices, so the MLP
    node counts 2 * tokens * 3 * hidden * ffn / tp operations."""
    spec = load_model_spec("llama3-405b")
    assert spec.gated_mlp and spec.mlp_params == 3 * 16384 * 53248
    nodes, _ = generate_llm(spec, tp=8, pp=63, dp=1, microbatches=1, seq=128, ranks=[0])
    mlp = next(n for n in nodes[0] if n.name.endswith("fwd.L0.mlp"))
    assert mlp.num_ops == 2 * 128 * 3 * 16384 * 53248 // 8
    assert not load_model_spec("gpt3-175b").gated_mlp  # GPT-3: GELU, two matrices


def test_deepseek_dense_layers_and_shared_expert():
    nodes, _ = generate_llm("deepseek-v3", tp=1, pp=61, dp=2, ep=2, microbatches=1, seq=64, ranks=[0, 2 * 3])
    first, fourth = [n.name for n in nodes[0]], [n.name for n in nodes[6]]
    assert any(x.endswith("fwd.L0.mlp") for x in first) and not any("a2a" in x for x in first)
    assert any(x.endswith("fwd.L3.shared_experts") for x in fourth)
    assert any(x.endswith("fwd.L3.a2a_dispatch") for x in fourth)


@pytest.mark.parametrize("name", ["llama3-8b-tp2pp2", "mixtral-8x7b-pp2dp2ep2"])
def test_trace_sets_run(name, capsys):
    folder = WORKLOADS / "traces" / name
    groups = json.loads((folder / "comm_groups.json").read_text())
    ranks = sorted(int(p.name.split(".")[1]) for p in folder.glob("llm.*.et"))
    assert ranks == list(range(len(ranks))) and max(max(g) for g in groups.values()) < len(ranks)
    assert main(["run", "--topology", DGX, "--workload", str(folder / "llm"),
                 "--comm-groups", str(folder / "comm_groups.json"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ranks"] == len(ranks) and out["iteration_us"] > 0


def test_trace_sets_stay_small():
    size = sum(p.stat().st_size for p in (WORKLOADS / "traces").rglob("*") if p.is_file())
    assert size < 500_000  # 455 KB since element-wise kernels


@pytest.mark.parametrize("name", ["llama3-8b-tp2pp2", "mixtral-8x7b-pp2dp2ep2"])
def test_trace_sets_are_what_the_generator_writes_now(name, tmp_path):
    # a generator change that the shipped sets do not follow makes them stale: python workloads/regenerate.py
    spec = importlib.util.spec_from_file_location("regenerate", WORKLOADS / "regenerate.py")
    regen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(regen)
    assert main(["workload", "llm", *regen.TRACES[name].split(), "--out", str(tmp_path)]) == 0
    shipped = WORKLOADS / "traces" / name
    for path in sorted(shipped.iterdir()):
        assert path.read_bytes() == (tmp_path / path.name).read_bytes(), f"{path} is stale"


def test_fault_files_parse_and_run(capsys):
    for path in sorted((WORKLOADS / "faults").glob("*.yaml")):
        fault_spec(str(path))  # parses: one-line InputError otherwise
    folder = WORKLOADS / "traces" / "mixtral-8x7b-pp2dp2ep2"
    common = ["--workload", str(folder / "llm"), "--comm-groups", str(folder / "comm_groups.json"), "--json"]
    assert main(["run", "--topology", SUPERPOD, *common, "--placement", "strided:8", "--model", "analytical",
                 "--faults", str(WORKLOADS / "faults" / "superpod-faults.yaml")]) == 0
    faulty = json.loads(capsys.readouterr().out)
    assert main(["run", "--topology", SUPERPOD, *common, "--placement", "strided:8", "--model", "analytical"]) == 0
    clean = json.loads(capsys.readouterr().out)
    assert faulty["iteration_us"] > clean["iteration_us"]
    assert main(["run", "--topology", DGX, *common, "--faults", str(WORKLOADS / "faults" / "stragglers.yaml")]) == 0


@pytest.mark.parametrize("path,args", [
    ("mixtral-ep8-t512-zipf1.2.npy", ["--tokens", "512", "--hidden", "4096", "--topk", "2", "--experts", "8"]),
    ("deepseek-ep8-t64-uniform.csv", ["--tokens", "64", "--topk", "8", "--experts", "256"]),
])
def test_expert_maps_accepted_by_bench(path, args, capsys):
    for op in ("moe_dispatch", "moe_combine"):
        assert main(["bench", "--topology", DGX, "--op", op, *args,
                     "--expert-map", str(WORKLOADS / "expert-maps" / path)]) == 0
        assert "routing expert map" in capsys.readouterr().out


def test_zipf_expert_map_is_skewed():
    m = np.load(WORKLOADS / "expert-maps" / "mixtral-ep8-t512-zipf1.2.npy")
    load = np.bincount(m.ravel(), minlength=8)
    assert m.shape == (8 * 512, 2) and load.argmax() == 0 and load[0] > 2 * load.mean()


def _setup_module():
    spec = importlib.util.spec_from_file_location("netsim_setup", REPO / "setup.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # not __main__: defines the command without calling setup()
    return mod


def build_py(build_lib) -> None:
    """Run setup.py's ``build_py`` into ``build_lib`` (what a wheel's ``netsim/`` holds)."""
    from setuptools.dist import Distribution

    mod = _setup_module()
    cmd = mod.build_py_with_shipped(Distribution({"name": "x", "packages": []}))
    cmd.build_lib = str(build_lib)
    cmd.ensure_finalized()
    cmd.build_lib = str(build_lib)
    cmd.run()


def test_build_py_copies_topologies_and_workloads(tmp_path):
    build_py(tmp_path)
    for name in ("topologies", "workloads"):
        shipped = tmp_path / "netsim" / f"_{name}"
        want = {p.relative_to(REPO / name) for p in (REPO / name).rglob("*") if p.is_file()
                and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts}
        assert {p.relative_to(shipped) for p in shipped.rglob("*") if p.is_file()} == want
    assert presets.Presets(tmp_path / "netsim" / "_workloads" / "models")["llama3-405b"] == load_model_spec("llama3-405b")
