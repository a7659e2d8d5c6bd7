"""Tests of the LLM training-workload generator (netsim.workload.generate.llm)."""

from pathlib import Path

import numpy as np
import pytest

from netsim.errors import InputError
from netsim.chakra import read_et
from netsim.chakra.schema import CommType, NodeType
from netsim.workload.cli import simulate
from netsim.workload.generate import MODEL_PRESETS, ModelSpec, generate_llm, load_model_spec, write_llm_workload
from netsim.workload.generate.llm import stage_layers, one_f_one_b

TOPO = Path(__file__).resolve().parents[1] / "topologies" / "dgx-h100.yaml"
SMALL = ModelSpec("small", layers=4, hidden=1024, ffn=4096, heads=16, vocab=32000)
SMALL_MOE = ModelSpec("small-moe", layers=4, hidden=1024, ffn=4096, heads=16, vocab=32000,
                      experts=4, top_k=2, expert_ffn=2048)


def _run(tmp_path, spec, **kw):
    prefix = write_llm_workload(tmp_path, spec, microbatches=kw.pop("microbatches", 4), seq=kw.pop("seq", 512), **kw)
    res = simulate(str(TOPO), str(prefix), comm_groups=str(tmp_path / "comm_groups.json"))
    world = kw["tp"] * kw["pp"] * kw["dp"]
    assert len(res.finish) == world
    assert np.all(res.finish > 0)
    assert np.all(res.compute > 0)
    return res


def test_group_layout_tp2_pp2_dp2():
    _, groups = generate_llm(SMALL, tp=2, pp=2, dp=2, microbatches=2, seq=128)
    tp = [sorted(g) for k, g in groups.items() if int(k) <= 4]
    dp = [sorted(g) for k, g in groups.items() if int(k) > 4]
    assert list(groups) == [str(i) for i in range(1, 9)]
    assert tp == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert dp == [[0, 2], [1, 3], [4, 6], [5, 7]]


def test_ep_groups_inside_dp():
    _, groups = generate_llm(SMALL_MOE, tp=1, pp=1, dp=4, ep=2, microbatches=1, seq=64)
    assert list(groups.values()) == [[0, 1, 2, 3], [0, 1], [2, 3]]


def test_presets_and_yaml(tmp_path):
    assert set(MODEL_PRESETS) == {"gpt3-175b", "llama3-8b", "llama3-70b", "llama3-405b", "mixtral-8x7b",
                                  "mixtral-8x22b", "deepseek-v3"}
    assert load_model_spec("deepseek-v3").experts == 256
    p = tmp_path / "m.yaml"
    p.write_text("name: m\nlayers: 2\nhidden: 64\nffn: 256\nheads: 2\nvocab: 100\n")
    assert load_model_spec(p) == ModelSpec("m", 2, 64, 256, 2, 100)
    p.write_text("layers: 2\nhidden: 64\n")
    with pytest.raises(InputError):
        load_model_spec(p)
    with pytest.raises(InputError):
        load_model_spec("no-such-model")


def test_1f1b_order():
    for pp in (1, 2, 4):
        for stage in range(pp):
            order = one_f_one_b(stage, pp, 5)
            assert sorted(order) == sorted([("F", m) for m in range(5)] + [("B", m) for m in range(5)])
            assert order[: pp - 1 - stage] == [("F", m) for m in range(pp - 1 - stage)]


def test_nodes_well_formed():
    per_rank, groups = generate_llm(SMALL, tp=2, pp=2, dp=2, microbatches=4, seq=512)
    for r, nodes in enumerate(per_rank):
        assert [n.id for n in nodes] == list(range(1, len(nodes) + 1))
        for n in nodes:
            assert all(d < n.id for d in n.data_deps)
            if n.type == NodeType.COMM_COLL_NODE:
                assert r in groups[n.pg_name]
            if n.type in (NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE):
                assert r in (n.comm_src, n.comm_dst) and n.comm_src != n.comm_dst
        comps = [n for n in nodes if n.type == NodeType.COMP_NODE]
        assert all(n.num_ops > 0 and n.tensor_size > 0 and n.duration_micros == 0 for n in comps)
    # sends and receives pair up in order
    sends = {}
    for nodes in per_rank:
        for n in nodes:
            if n.type == NodeType.COMM_SEND_NODE:
                sends.setdefault((n.comm_src, n.comm_dst), []).append(n.comm_tag)
    recvs = {}
    for nodes in per_rank:
        for n in nodes:
            if n.type == NodeType.COMM_RECV_NODE:
                recvs.setdefault((n.comm_src, n.comm_dst), []).append(n.comm_tag)
    assert sends == recvs and sends


def test_simulate_dense(tmp_path):
    res = _run(tmp_path, SMALL, tp=2, pp=2, dp=2)
    files = sorted(tmp_path.glob("llm.*.et"))
    assert len(files) == 8
    last = read_et(tmp_path / "llm.0.et").nodes[-1]
    assert last.comm_type == CommType.ALL_REDUCE and last.pg_name in ("5", "6", "7", "8")
    assert np.all(res.exposed_comm > 0)


def test_simulate_moe(tmp_path):
    per_rank, _ = generate_llm(SMALL_MOE, tp=2, pp=2, dp=2, ep=2, microbatches=2, seq=256)
    assert any(n.comm_type == CommType.ALL_TO_ALL for n in per_rank[0])
    _run(tmp_path, SMALL_MOE, tp=2, pp=2, dp=2, ep=2, microbatches=2, seq=256)


@pytest.mark.parametrize("tp,pp,dp", [(2, 1, 4), (1, 2, 4), (1, 4, 1), (8, 1, 1)])
def test_simulate_edge_layouts(tmp_path, tp, pp, dp):
    _run(tmp_path, SMALL, tp=tp, pp=pp, dp=dp, microbatches=3, seq=256)


def test_pp1_tp1_dp1_is_pure_compute():
    per_rank, groups = generate_llm(SMALL, tp=1, pp=1, dp=1, microbatches=2, seq=64)
    assert groups == {} and len(per_rank) == 1
    assert all(n.type == NodeType.COMP_NODE for n in per_rank[0])


def test_uneven_pipeline_split_follows_llama3():
    assert [len(r) for r in stage_layers(126, 16)] == [7] + [8] * 14 + [7]
    assert [len(r) for r in stage_layers(4, 3)] == [1, 2, 1]
    per_rank, _ = generate_llm(SMALL, tp=1, pp=3, dp=1, microbatches=2, seq=64)
    fwd = [sum(".fwd." in n.name and n.name.endswith(".attn") for n in nodes) for nodes in per_rank]
    assert fwd == [2, 4, 2]  # 2 microbatches x layers of the stage


def test_bad_arguments():
    with pytest.raises(InputError):
        generate_llm(SMALL, tp=1, pp=5, dp=1, microbatches=2, seq=64)
    with pytest.raises(InputError):
        generate_llm(SMALL_MOE, tp=1, pp=1, dp=4, ep=3, microbatches=2, seq=64)
    with pytest.raises(InputError):
        generate_llm(SMALL, tp=0, pp=1, dp=1, microbatches=2, seq=64)
    with pytest.raises(InputError):
        ModelSpec("bad", layers=2, hidden=64, ffn=64, heads=2, vocab=10, experts=4, top_k=0, expert_ffn=8)


def test_dp_gradient_buckets_overlap_backward():
    per_rank, groups = generate_llm(SMALL, tp=1, pp=1, dp=2, microbatches=2, seq=64)
    nodes = per_rank[0]
    dp = [n for n in nodes if n.name.startswith("dp.grad_allreduce.L")]
    assert len(dp) == SMALL.layers  # one bucket per layer, in the last microbatch's backward
    dp_ids = {n.id for n in dp}
    later = [n for n in nodes if n.id > min(dp_ids) and n.id not in dp_ids]
    assert later and not any(set(n.data_deps) & dp_ids for n in later)  # nothing waits for them
    assert all(n.data_deps for n in dp)  # each starts when its layer's backward is done
