"""Compute as it runs: roofline compute at the GPU preset's achieved fraction of peak per kernel kind
(netsim.workload.compute), and --compute-efficiency over it."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.chakra import EtNode, NodeType, write_et
from netsim.cli import main
from netsim.errors import InputError
from netsim.topology.builders import GPU_EFFICIENCY
from netsim.vocab import OP_KINDS
from netsim.workload.simulation import check_compute_efficiency
from netsim.workload.generate.model import ModelSpec
from netsim.workload.llmrun import simulate_llm
from netsim.workload.simulation import simulate

DGX = "topologies/dgx-h100.yaml"
A100 = "topologies/dgx-a100.yaml"
#: Big GEMMs (hidden 2048, 4096 tokens): every compute node is compute-bound on an H100.
TINY = ModelSpec("tiny", layers=2, hidden=2048, ffn=8192, heads=16, vocab=1000)
GEN = dict(tp=8, pp=1, dp=1, microbatches=1, seq=4096)
H100 = GPU_EFFICIENCY["H100"]


def _durations(res) -> dict[str, float]:
    """Compute time of rank 0 per node name."""
    return {name: end - start for rank, _, name, typ, start, end, _ in res.ops
            if rank == 0 and typ == int(NodeType.COMP_NODE)}


def test_preset_times_each_kernel_kind_at_its_fraction_of_peak():
    peak = simulate_llm(DGX, TINY, model="analytical", compute_efficiency="peak", **GEN)
    pre = simulate_llm(DGX, TINY, model="analytical", **GEN)
    a, b = _durations(peak), _durations(pre)
    kinds = {"mb0.fwd.L0.core_attn": "attn_fwd", "mb0.bwd.L0.core_attn": "attn_bwd", "mb0.fwd.L0.attn": "gemm",
             "mb0.fwd.L1.mlp": "gemm", "mb0.bwd.L1.mlp.dgrad": "gemm", "mb0.bwd.L1.mlp.wgrad": "gemm",
             "mb0.fwd.lm_head": "gemm", "mb0.fwd.L0.attn_elementwise": "elementwise",
             "mb0.bwd.L1.mlp_elementwise": "elementwise"}
    for name, kind in kinds.items():
        assert b[name] == pytest.approx(a[name] / H100[kind], rel=1e-12), name
    assert 0.56 < H100["attn_bwd"] < H100["attn_fwd"] < H100["gemm"] < 0.81 < H100["elementwise"] < 0.9
    assert "compute_efficiency" not in pre.config and pre.config != peak.config
    assert any("gemm 0.803, attn_fwd 0.653, attn_bwd 0.565, elementwise 0.887 x the roofline (GPU preset H100" in n
               for n in pre.notes)
    runs = pre.tables()["runs"].iloc[0]  # the fractions used, per kind, in the runs table
    assert runs["compute_efficiency_used.gemm"] == H100["gemm"]
    assert runs["compute_efficiency_used.attn_bwd"] == H100["attn_bwd"]
    assert peak.tables()["runs"].iloc[0]["compute_efficiency_used.gemm"] == 1.0


def test_one_fraction_for_every_node_and_per_kind_overrides():
    base = simulate_llm(DGX, TINY, model="analytical", compute_efficiency="peak", **GEN)
    half = simulate_llm(DGX, TINY, model="analytical", compute_efficiency=0.5, **GEN)
    assert half.compute.mean() == pytest.approx(2 * base.compute.mean(), rel=1e-9)
    assert half.config["compute_efficiency"] == 0.5  # recorded in the run's config (runs table)
    assert any("0.5 x the roofline" in n for n in half.notes)
    gemm = simulate_llm(DGX, TINY, model="analytical", compute_efficiency="gemm=0.5", **GEN)
    a, b = _durations(base), _durations(gemm)
    assert b["mb0.fwd.L0.attn"] == pytest.approx(2 * a["mb0.fwd.L0.attn"], rel=1e-12)
    assert b["mb0.fwd.L0.core_attn"] == pytest.approx(a["mb0.fwd.L0.core_attn"] / H100["attn_fwd"], rel=1e-12)
    assert gemm.config["compute_efficiency"] == {"gemm": 0.5}


def test_a_kind_without_a_published_figure_runs_at_peak():
    """The A100 preset has a GEMM figure but none for FlashAttention: core attention at the peak."""
    peak = _durations(simulate_llm(A100, TINY, model="analytical", compute_efficiency="peak", **GEN))
    pre = _durations(simulate_llm(A100, TINY, model="analytical", **GEN))
    assert pre["mb0.fwd.L0.core_attn"] == pytest.approx(peak["mb0.fwd.L0.core_attn"], rel=1e-12)
    assert pre["mb0.fwd.L0.attn"] == pytest.approx(peak["mb0.fwd.L0.attn"] / (271.2 / 312), rel=1e-12)


def test_nodes_naming_no_kind_run_at_peak_unless_told(tmp_path):
    """ASTRA-sim traces name no kernel kind: the preset leaves them at the peak (ASTRA-sim's roofline)."""
    path = tmp_path / "w.0.et"
    write_et(path, [EtNode(1, "c", NodeType.COMP_NODE, num_ops=989 * 10**9, tensor_size=1)])
    assert simulate(DGX, path, model="analytical").finish[0] == pytest.approx(1e-3, rel=1e-12)
    assert simulate(DGX, path, model="analytical", compute_efficiency="other=0.5").finish[0] == \
        pytest.approx(2e-3, rel=1e-12)
    assert simulate(DGX, path, model="analytical", compute_efficiency=0.25).finish[0] == \
        pytest.approx(4e-3, rel=1e-12)


@pytest.mark.parametrize("bad", [0, -0.1, 1.5, "x", "nan", "gemm=2", "gemm=", "foo=0.5", {}, "gemm=0.5,mlp=0.4"])
def test_bad_values_are_input_errors(bad):
    with pytest.raises(InputError, match="--compute-efficiency"):
        check_compute_efficiency(bad)


def test_cli_flag(capsys):
    argv = ["run", "--topology", DGX, "--llm", "llama3-8b", "--tp", "8", "--pp", "1", "--dp", "1",
            "--microbatches", "1", "--seq", "512", "--model", "analytical", "--json", "-q"]
    assert main(argv + ["--compute-efficiency", "0.4"]) == 0
    assert "0.4 x the roofline" in capsys.readouterr().out
    assert main(argv + ["--compute-efficiency", "attn_fwd=0.5"]) == 0
    assert "compute efficiency attn_fwd 0.5" in capsys.readouterr().out
    assert main(argv + ["--compute-efficiency", "gemm=1.5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--compute-efficiency" in err[0]


def test_model_yaml_sets_it_and_the_flag_overrides_it(tmp_path, capsys):
    path = tmp_path / "tiny.yaml"
    path.write_text("layers: 2\nhidden: 2048\nffn: 8192\nheads: 16\nvocab: 1000\ncompute_efficiency: {gemm: 0.5}\n")
    base = _durations(simulate_llm(DGX, TINY, model="analytical", compute_efficiency="peak", **GEN))
    own = simulate_llm(DGX, str(path), model="analytical", **GEN)
    assert _durations(own)["mb0.fwd.L1.mlp"] == pytest.approx(2 * base["mb0.fwd.L1.mlp"], rel=1e-12)
    assert _durations(own)["mb0.fwd.L0.core_attn"] == pytest.approx(base["mb0.fwd.L0.core_attn"] / H100["attn_fwd"],
                                                                    rel=1e-12)
    assert own.config["compute_efficiency"] == {"gemm": 0.5}
    flag = simulate_llm(DGX, str(path), model="analytical", compute_efficiency="peak", **GEN)
    assert _durations(flag)["mb0.fwd.L1.mlp"] == pytest.approx(base["mb0.fwd.L1.mlp"], rel=1e-12)
    path.write_text("layers: 2\nhidden: 2048\nffn: 8192\nheads: 16\nvocab: 1000\ncompute_efficiency: {mlp: 0.5}\n")
    argv = ["run", "--topology", DGX, "--llm", str(path), "--tp", "8", "--pp", "1", "--dp", "1", "--microbatches", "1",
            "--seq", "512", "--model", "analytical", "-q"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "tiny.yaml" in err[0] and "compute_efficiency" in err[0] and "mlp" in err[0]


def test_op_kind_round_trips_through_chakra_files(tmp_path, capsys):
    from netsim.chakra import read_et, read_et_table
    from netsim.chakra.inspect import node_table

    path = tmp_path / "k.0.et"
    write_et(path, [EtNode(1, "a", NodeType.COMP_NODE, num_ops=5, op_kind="attn_fwd"),
                    EtNode(2, "b", NodeType.COMP_NODE, num_ops=5, data_deps=(1,))])
    t = read_et_table(path)
    assert t.op_kind.tolist() == [1, -1] and t.node(0).op_kind == "attn_fwd" and t.node(1).op_kind is None
    assert [n.op_kind for n in read_et(path).nodes] == ["attn_fwd", None]
    assert node_table(path)["op_kind"].tolist() == ["attn_fwd", None]
    bad = tmp_path / "bad.0.et"
    write_et(bad, [EtNode(1, "a", NodeType.COMP_NODE, num_ops=5, other={"op_kind": "conv"})])
    assert main(["run", "--topology", DGX, "--workload", str(bad), "--model", "analytical", "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.0.et" in err[0] and "op_kind" in err[0] and "gemm" in err[0]


def test_netsim_topo_shows_the_preset(capsys):
    assert main(["topo", DGX]) == 0
    assert "989 TFLOP/s peak (dense tensor); achieved fraction per kernel kind: gemm 0.803, attn_fwd 0.653, " \
        "attn_bwd 0.565" in capsys.readouterr().out


def test_a_sweep_key(tmp_path):
    from netsim.sweep.spec import parse_sweep

    base = {"topology": DGX, "llm.model": "gpt3-175b", "llm.tp": 8, "llm.pp": 1, "llm.dp": 1}
    s = parse_sweep({"kind": "run", "base": base, "grid": {"compute_efficiency": ["peak", 0.5, "gemm=0.7"]}})
    assert [c["compute_efficiency"] for c in s.configs] == ["peak", 0.5, "gemm=0.7"] and len(set(s.run_ids)) == 3
    with pytest.raises(InputError) as err:
        parse_sweep({"kind": "run", "base": base, "grid": {"compute_efficiency": [0.5, "x"]}}, "s.yaml")
    assert err.value.source == "s.yaml" and "compute_efficiency" in err.value.field


@settings(max_examples=60, deadline=None)
@given(nodes=st.lists(st.tuples(st.sampled_from([None, *OP_KINDS]), st.integers(1, 10**13), st.integers(0, 10**10),
                                st.integers(0, 50)), min_size=1, max_size=8),
       eff=st.dictionaries(st.sampled_from([*OP_KINDS, "other"]), st.floats(0.05, 1.0), max_size=4))
def test_each_node_takes_its_kinds_roofline(nodes, eff, tmp_path_factory):
    """Written from the rule, not from netsim.workload.compute: a node with a duration takes it; else
    ops / (e(kind) x min(peak, HBM x ops / bytes)), e from the override, else the H100 preset, else 1."""
    from netsim.topology.spec import load_topology
    from netsim.workload.simulation import _with_compute_efficiency

    path = tmp_path_factory.mktemp("r") / "w.0.et"
    write_et(path, [EtNode(k + 1, f"n{k}", NodeType.COMP_NODE, data_deps=(k,) if k else (), num_ops=ops,
                           tensor_size=size, duration_micros=dur, op_kind=kind)
                    for k, (kind, ops, size, dur) in enumerate(nodes)])
    topo, _ = _with_compute_efficiency(load_topology(DGX), eff)
    res = simulate(topo, path, model="analytical")
    expect = 0.0
    for kind, ops, size, dur in nodes:
        if dur:
            expect += dur * 1e-6
        else:
            e = {**H100, **eff}.get(kind or "other", 1.0)
            expect += ops / (e * (min(989e12, 3.35e12 * ops / size) if size else 989e12))
    assert res.finish[0] == pytest.approx(expect, rel=1e-9)


def test_runs_tables_record_the_link_efficiencies(tmp_path):
    """Every efficiency a run used is in its runs table: compute per kernel kind, and the achieved /
    line rate of every link kind (workload runs, bench and MoE bench datasets)."""
    from netsim import open_results

    res = simulate_llm(DGX, TINY, model="analytical", **GEN)
    runs = res.tables()["runs"].iloc[0]
    assert runs["link_efficiency.nvlink"] == pytest.approx(20.6 / 25)  # NCCL topo.h H100 NVLink rate
    for argv in (["bench", "--topology", "topologies/h100-superpod-1su.yaml", "--op", "all_reduce", "-b", "1M",
                  "-e", "1M", "--gpus", "16", "--model", "analytical"],
                 ["bench", "--topology", "topologies/h100-superpod-1su.yaml", "--op", "moe_dispatch", "--gpus", "16",
                  "--tokens", "128", "--model", "analytical"]):
        out = tmp_path / argv[4]
        assert main(argv + ["--out", str(out)]) == 0
        runs = open_results(out).runs.iloc[0]
        assert runs["link_efficiency.ib"] == pytest.approx(0.96) and runs["link_efficiency.nvlink"] < 1
