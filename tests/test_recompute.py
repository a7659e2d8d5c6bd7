"""Activation recomputation in the LLM generator (Megatron-LM's --recompute-granularity)."""

import pytest

from netsim.cli import main
from netsim.errors import InputError
from netsim.chakra.model import NodeType
from netsim.workload.generate.llm import generate_llm
from netsim.workload.generate.model import ModelSpec
from netsim.workload.llmrun import simulate_llm

SPEC = ModelSpec("tiny", layers=2, hidden=256, ffn=1024, heads=4, vocab=1000)
GEN = dict(tp=2, pp=1, dp=1, microbatches=1, seq=128)


def _comp(nodes):
    return {n.name: n.num_ops for n in nodes if n.type == NodeType.COMP_NODE}


def _rank0(recompute):
    nodes, _ = generate_llm(SPEC, recompute=recompute, **GEN)
    return nodes[0]


def test_none_is_the_default():
    assert [(n.name, n.num_ops) for n in _rank0("none")] == \
        [(n.name, n.num_ops) for n in generate_llm(SPEC, **GEN)[0][0]]


def test_selective_recomputes_the_core_attention():
    base, sel = _comp(_rank0("none")), _comp(_rank0("selective"))
    score = 2 * 128 * 128 * 256 // 2  # causal core attention: 2 tokens seq hidden / tp
    extra = {n: v for n, v in sel.items() if n not in base}
    assert {n: sel[n] for n in base} == base
    assert extra == {f"mb0.bwd.L{layer}.core_attn.recompute": score for layer in range(2)}
    names = [n.name for n in _rank0("selective")]  # the forward re-run right before the core attention's backward
    assert all(names[names.index(n) + 1] == n[:-len(".recompute")] for n in extra)
    kinds = {n.name: n.op_kind for n in _rank0("selective")}
    assert all(kinds[n] == "attn_fwd" for n in extra) and kinds["mb0.bwd.L0.core_attn"] == "attn_bwd"


def test_full_reruns_each_layers_forward_with_its_comms():
    base, full = _rank0("none"), _rank0("full")
    names = [n.name for n in full]
    for layer in (0, 1):
        re_attn = f"mb0.bwd.L{layer}.recompute.attn"
        assert names.index(re_attn) < names.index(f"mb0.bwd.L{layer}.mlp.dgrad")  # before the layer's backward
        assert f"mb0.bwd.L{layer}.recompute.attn_allreduce" in names  # the TP all-reduce is re-run
        for part in ("attn", "mlp", "attn_elementwise", "mlp_elementwise", "core_attn"):  # norms etc. re-run too
            assert _comp(full)[f"mb0.bwd.L{layer}.recompute.{part}"] == _comp(base)[f"mb0.fwd.L{layer}.{part}"]
    fwd = sum(v for k, v in _comp(base).items() if ".fwd.L" in k)
    assert sum(_comp(full).values()) == sum(_comp(base).values()) + fwd  # one more forward of the layers


def test_bad_value():
    with pytest.raises(InputError, match="recompute"):
        generate_llm(SPEC, recompute="partial", **GEN)


def test_run_llm_records_it_and_gets_slower():
    kw = dict(model="analytical", tp=4, pp=1, dp=2, microbatches=1, seq=512)
    base = simulate_llm("topologies/dgx-h100.yaml", SPEC, **kw)
    full = simulate_llm("topologies/dgx-h100.yaml", SPEC, recompute="full", **kw)
    assert full.config["llm"]["recompute"] == "full"
    assert full.finish.max() > base.finish.max() and full.compute.mean() > base.compute.mean()


def test_cli(tmp_path, capsys):
    assert main(["workload", "llm", "--llm", "llama3-8b", "--tp", "8", "--pp", "1", "--dp", "1", "--seq", "256",
                 "--microbatches", "1", "--recompute", "selective", "--out", str(tmp_path / "w")]) == 0
    assert main(["run", "--topology", "topologies/dgx-h100.yaml", "--llm", "llama3-8b", "--tp", "8", "--pp", "1",
                 "--dp", "1", "--seq", "256", "--microbatches", "1", "--recompute", "full", "--model", "analytical",
                 "--json", "-q"]) == 0
