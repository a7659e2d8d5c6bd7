"""LLM generator extensions: context parallelism, interleaved 1F1B, global batch, rank subsets, replicas."""

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from netsim.cli import main
from netsim.errors import InputError
from netsim.chakra.schema import CommType, NodeType
from netsim.workload.simulation import simulate
from netsim.workload.generate.llm import (MODEL_PRESETS, ModelSpec, generate_llm, interleaved_order, llm_replicas,
                                          load_model_spec, write_llm_workload)

from llm_closed_form import Shape, compute_per_rank

TOPO = str(Path(__file__).resolve().parents[1] / "topologies" / "h100-superpod-1su.yaml")
TINY = ModelSpec("tiny", layers=4, hidden=512, ffn=2048, heads=8, vocab=1000, kv_heads=2)
TINY_MOE = ModelSpec("tiny-moe", layers=4, hidden=512, ffn=2048, heads=8, vocab=1000, experts=4, top_k=2,
                     expert_ffn=1024)


def _coords(r, tp, cp, dp):
    return r % tp, (r // tp) % cp, (r // (tp * cp)) % dp, r // (tp * cp * dp)


def _p2p(per_rank):
    """Counter of (src, dst, tag, size) over sends and over receives."""
    items = per_rank.items() if isinstance(per_rank, dict) else enumerate(per_rank)
    sends, recvs = Counter(), Counter()
    for _, nodes in items:
        for n in nodes:
            key = (n.comm_src, n.comm_dst, n.comm_tag, n.comm_size)
            if n.type == NodeType.COMM_SEND_NODE:
                sends[key] += 1
            elif n.type == NodeType.COMM_RECV_NODE:
                recvs[key] += 1
    return sends, recvs


def _run(tmp_path, spec, **kw):
    """Simulate; every rank's GPU compute is the closed-form roofline sum (FLOPs from the shape,
    GQA and CP included; H100 datasheet figures; SM contention off), whatever the schedule, and bounds its
    finish."""
    prefix = write_llm_workload(tmp_path, spec, **kw)
    res = simulate(TOPO, str(prefix), comm_groups=str(tmp_path / "comm_groups.json"), model="analytical",
                   sm_contention="off")  # the backward's TP all-reduces beside the weight gradients would slow them
    shape = Shape(spec.hidden, spec.ffn, spec.heads, spec.vocab, kv_heads=spec.kv_heads, experts=spec.experts,
                  top_k=spec.top_k, expert_ffn=spec.expert_ffn)
    m = kw.get("microbatches") or kw["global_batch"] // (kw["dp"] * kw.get("micro_batch", 1))
    expect = compute_per_rank(shape, spec.layers, tp=kw["tp"], pp=kw["pp"], dp=kw["dp"], cp=kw.get("cp", 1),
                              ep=kw.get("ep", 1), microbatches=m, seq=kw["seq"], micro_batch=kw.get("micro_batch", 1))
    assert not spec.gated_mlp and res.finish.size == len(expect) == kw["tp"] * kw["pp"] * kw["dp"] * kw.get("cp", 1)
    np.testing.assert_allclose(res.compute, expect, rtol=1e-12)
    assert np.all(res.finish >= res.compute * (1 - 1e-12))
    return res


# ----------------------------------------------------------------------------- GQA


def test_kv_heads_default_presets_and_yaml(tmp_path):
    spec = ModelSpec("m", 2, 64, 256, 4, 100)
    assert spec.kv_heads == 4 and spec.attn_params == 4 * 64 * 64
    assert TINY.kv_hidden == 128 and TINY.attn_params == 2 * 512 * 512 + 2 * 512 * 128
    assert {k: v.kv_heads for k, v in MODEL_PRESETS.items()} == {
        "gpt3-175b": 96, "llama3-8b": 8, "llama3-70b": 8, "llama3-405b": 8, "mixtral-8x7b": 8, "mixtral-8x22b": 8,
        "deepseek-v3": 128}
    p = tmp_path / "m.yaml"
    p.write_text("name: m\nlayers: 2\nhidden: 64\nffn: 256\nheads: 4\nvocab: 100\n")
    assert load_model_spec(p) == spec
    p.write_text("name: g\nlayers: 2\nhidden: 64\nffn: 256\nheads: 4\nvocab: 100\nkv_heads: 2\n")
    assert load_model_spec(p).kv_hidden == 32
    for bad in (3, 0, -1, 2.0):
        with pytest.raises(InputError, match="kv_heads"):
            ModelSpec("b", 2, 64, 256, 4, 100, kv_heads=bad)


# ----------------------------------------------------------------------------- context parallelism


def test_cp_layout_groups_and_peers():
    tp, cp, pp, dp = 2, 2, 2, 2
    per_rank, groups = generate_llm(TINY, tp=tp, cp=cp, pp=pp, dp=dp, microbatches=2, seq=256)
    assert len(per_rank) == 16
    sets = [tuple(g) for g in groups.values()]
    tp_g = [g for g in sets if len(g) == 2 and g[1] - g[0] == 1]
    cp_g = [g for g in sets if len(g) == 2 and g[1] - g[0] == tp]
    dp_g = [g for g in sets if len(g) == dp * cp]
    assert len(tp_g) == 8 and len(cp_g) == 8 and len(dp_g) == 4 and len(sets) == 20
    for g in tp_g + cp_g + dp_g:
        c = [_coords(r, tp, cp, dp) for r in g]
        assert len({x[3] for x in c}) == 1  # one stage
    assert all(len({_coords(r, tp, cp, dp)[1] for r in g}) == 2 for g in cp_g)
    assert (0, 2, 4, 6) in dp_g  # DP x CP: gradients reduce over dp * cp ranks
    for r, nodes in enumerate(per_rank):
        t, c, d, s = _coords(r, tp, cp, dp)
        for n in nodes:
            if n.type == NodeType.COMM_SEND_NODE:
                assert _coords(n.comm_dst, tp, cp, dp)[:3] == (t, c, d) and abs(n.comm_dst - r) == tp * cp * dp
            if n.type == NodeType.COMM_COLL_NODE and n.name.startswith("dp.grad"):
                assert len(groups[n.pg_name]) == dp * cp
    sends, recvs = _p2p(per_rank)
    assert sends == recvs and sends


def test_cp_kv_exchange_sizes_and_compute():
    tp, cp, seq, mbs = 2, 4, 1024, 2
    per_rank, groups = generate_llm(TINY, tp=tp, cp=cp, pp=1, dp=1, microbatches=3, seq=seq, micro_batch=mbs)
    base, _ = generate_llm(TINY, tp=tp, pp=1, dp=1, microbatches=3, seq=seq, micro_batch=mbs)
    nodes = per_rank[0]
    tokens = mbs * seq // cp
    kv = tokens * 2 * TINY.kv_hidden * 2 // tp
    ag = [n for n in nodes if n.name.endswith("cp_allgather_kv")]
    rs = [n for n in nodes if n.name.endswith("cp_reducescatter_kv")]
    assert len(ag) == len(rs) == 3 * TINY.layers  # per layer and microbatch
    assert {(n.comm_type, n.comm_size) for n in ag} == {(CommType.ALL_GATHER, kv)}
    assert {(n.comm_type, n.comm_size) for n in rs} == {(CommType.REDUCE_SCATTER, kv * cp)}
    assert groups[ag[0].pg_name] == [0, 2, 4, 6]
    # K/V gathered right before the forward attention, gradients scattered right after the backward one
    by_id = {n.id: n for n in nodes}
    assert all(by_id[n.id + 1].name.endswith(".core_attn") and ".fwd." in n.name for n in ag)
    assert all(by_id[n.data_deps[0]].name.endswith(".core_attn") and ".bwd." in n.name for n in rs)
    tp_ar = {n.comm_size for n in nodes if n.name.endswith("allreduce") and not n.name.startswith("dp.")}
    assert tp_ar == {tokens * TINY.hidden * 2}  # activations of the local tokens
    attn = next(n for n in nodes if n.name == "mb0.fwd.L0.attn")
    core = next(n for n in nodes if n.name == "mb0.fwd.L0.core_attn")
    assert attn.num_ops == 2 * tokens * TINY.attn_params // tp and attn.op_kind == "gemm"
    assert core.num_ops == 2 * tokens * seq * TINY.hidden // tp and core.op_kind == "attn_fwd"  # causal: half
    assert core.tensor_size == (2 * tokens * TINY.hidden + 2 * cp * tokens * TINY.kv_hidden) * 2 // tp
    mlp = {n.name: n.num_ops for n in nodes if n.name.endswith(".mlp")}
    mlp_base = {n.name: n.num_ops for n in base[0] if n.name.endswith(".mlp")}
    assert all(mlp_base[k] == cp * v for k, v in mlp.items())
    assert not any("cp_" in n.name for n in base[0])


def test_cp_must_divide_seq():
    with pytest.raises(InputError, match="cp=3"):
        generate_llm(TINY, tp=1, cp=3, pp=1, dp=1, microbatches=1, seq=1024)


def test_cp_with_moe_groups():
    per_rank, groups = generate_llm(TINY_MOE, tp=1, cp=2, pp=1, dp=4, ep=2, microbatches=1, seq=64)
    a2a = {n.pg_name for n in per_rank[0] if n.comm_type == CommType.ALL_TO_ALL}
    assert [groups[g] for g in a2a] == [[0, 2]]  # dp ranks 0 and 1 at cp rank 0
    assert [0, 1, 2, 3, 4, 5, 6, 7] in groups.values()  # gradients over DP x CP


# ----------------------------------------------------------------------------- interleaved 1F1B


@pytest.mark.parametrize("pp,vpp", [(2, 2), (2, 3), (3, 2), (4, 2), (4, 4)])
@pytest.mark.parametrize("mult", [1, 2, 3])
def test_interleaved_order_complete_and_deadlock_free(pp, vpp, mult):
    mb, last = mult * pp, pp * vpp - 1
    orders = [interleaved_order(s, pp, mb, vpp) for s in range(pp)]
    for s, order in enumerate(orders):
        want = {(p, m, c) for p in "FB" for m in range(mb) for c in range(s, pp * vpp, pp)}
        assert len(order) == len(want) and set(order) == want  # each exactly once, own chunks only
        pos = {u: i for i, u in enumerate(order)}
        assert all(pos[("F", m, c)] < pos[("B", m, c)] for _, m, c in want)
        warm = min((pp - s - 1) * 2 + (vpp - 1) * pp, mb * vpp)
        assert all(p == "F" for p, _, _ in order[:warm])
        assert warm == mb * vpp or order[warm][0] == "F" and order[warm + 1][0] == "B"
    # eager sends, blocking receives: every stage must be able to run its order to the end
    done, pos = set(), [0] * pp
    moved = True
    while moved:
        moved = False
        for s in range(pp):
            while pos[s] < len(orders[s]):
                p, m, c = orders[s][pos[s]]
                need = (("F", m, c - 1) if c else None) if p == "F" else (("B", m, c + 1) if c < last else None)
                if need is not None and need not in done:
                    break
                done.add(orders[s][pos[s]])
                pos[s] += 1
                moved = True
    assert pos == [len(o) for o in orders]


def test_interleaved_order_matches_megatron_example():
    # pp=2, vpp=2, 4 microbatches, stage 0: warm-up (2-0-1)*2 + (2-1)*2 = 4 forwards
    order = interleaved_order(0, 2, 4, 2)
    assert order[:5] == [("F", 0, 0), ("F", 1, 0), ("F", 0, 2), ("F", 1, 2), ("F", 2, 0)]
    assert order[5] == ("B", 0, 2)
    with pytest.raises(ValueError):
        interleaved_order(0, 2, 3, 2)


def test_interleaved_workload_structure():
    pp, vpp, mb = 2, 2, 4
    per_rank, groups = generate_llm(TINY, tp=1, pp=pp, dp=1, microbatches=mb, seq=128, schedule="interleaved",
                                    vpp=vpp)
    sends, recvs = _p2p(per_rank)
    assert sends == recvs and set(sends.values()) == {1}  # tags unique per (src, dst) pair
    pairs = Counter((s, d) for s, d, _, _ in sends)
    # chunk boundaries 0->1, 1->2 (wrap), 2->3: 3 forward + 3 backward transfers per microbatch
    assert sum(pairs.values()) == 2 * 3 * mb and pairs[(1, 0)] == pairs[(0, 1)] == 3 * mb
    for s, nodes in enumerate(per_rank):  # chunk c (one layer each) lives on stage c % pp
        layers = {int(n.name.split(".L")[1].split(".")[0]) for n in nodes if ".fwd.L" in n.name}
        assert layers == {c for c in range(pp * vpp) if c % pp == s}
        assert sum(n.name.endswith(".attn") and ".fwd." in n.name for n in nodes) == mb * vpp
    assert any(n.name == "mb0.fwd.lm_head" for n in per_rank[1])
    assert any(n.name == "mb0.c1.send_act" and n.comm_dst == 0 for n in per_rank[1])  # wrap-around


def test_schedule_errors():
    kw = dict(tp=1, dp=1, seq=64)
    with pytest.raises(InputError, match="divisible by pp"):
        generate_llm(TINY, pp=2, microbatches=3, schedule="interleaved", **kw)
    with pytest.raises(InputError, match="vpp"):
        generate_llm(TINY, pp=2, microbatches=2, vpp=2, **kw)  # vpp without interleaving
    with pytest.raises(InputError, match="vpp >= 2"):
        generate_llm(TINY, pp=2, microbatches=2, schedule="interleaved", vpp=1, **kw)
    with pytest.raises(InputError, match="pp >= 2"):
        generate_llm(TINY, pp=1, microbatches=2, schedule="interleaved", **kw)
    with pytest.raises(InputError, match="model chunks"):
        generate_llm(TINY, pp=2, microbatches=2, schedule="interleaved", vpp=3, **kw)  # 4 layers < 6 chunks
    with pytest.raises(InputError, match="1f1b"):
        generate_llm(TINY, pp=2, microbatches=2, schedule="gpipe", **kw)


# ----------------------------------------------------------------------------- global batch


def test_global_batch():
    kw = dict(tp=1, pp=2, dp=2, seq=64, micro_batch=2)
    nodes, _ = generate_llm(TINY, global_batch=24, **kw)  # 24 / (2 * 2) = 6 microbatches
    assert sum(n.name.endswith(".fwd.L0.attn") for n in nodes[0]) == 6
    nodes, _ = generate_llm(TINY, global_batch=24, microbatches=6, **kw)
    nodes, _ = generate_llm(TINY, **kw)  # neither: 2 * pp
    assert sum(n.name.endswith(".fwd.L0.attn") for n in nodes[0]) == 4
    with pytest.raises(InputError, match="not a multiple"):
        generate_llm(TINY, global_batch=10, **kw)
    with pytest.raises(InputError, match="gives 6 microbatches"):
        generate_llm(TINY, global_batch=24, microbatches=4, **kw)
    with pytest.raises(InputError):
        generate_llm(TINY, global_batch=0, **kw)


# ----------------------------------------------------------------------------- rank subsets and replicas


def test_ranks_subset_matches_full():
    kw = dict(tp=2, cp=2, pp=2, dp=2, microbatches=2, seq=128)
    full, groups = generate_llm(TINY, **kw)
    part, groups2 = generate_llm(TINY, ranks=np.array([9, 3, 3]), **kw)
    assert groups2 == groups and list(part) == [3, 9]
    assert part[3] == full[3] and part[9] == full[9]
    with pytest.raises(InputError, match="rank 16"):
        generate_llm(TINY, ranks=[16], **kw)
    with pytest.raises(InputError, match="ranks"):
        generate_llm(TINY, ranks=["a"], **kw)
    with pytest.raises(InputError, match="ranks"):
        write_llm_workload("/nonexistent", TINY, ranks=[0], **kw)


@pytest.mark.parametrize("spec,tp,cp,pp,dp,ep", [(TINY, 2, 2, 2, 4, 1), (TINY_MOE, 2, 1, 2, 4, 2),
                                                 (TINY_MOE, 1, 2, 1, 8, 4), (TINY, 1, 1, 1, 1, 1)])
def test_llm_replicas_map_groups_and_peers(spec, tp, cp, pp, dp, ep):
    world = tp * cp * pp * dp
    rep = llm_replicas(tp=tp, pp=pp, dp=dp, ep=ep, cp=cp)
    assert rep.perms.shape == (dp // ep, world) and rep.perms.dtype == np.int64
    assert np.array_equal(rep.perms[0], np.arange(world))
    assert all(np.array_equal(np.sort(p), np.arange(world)) for p in rep.perms)
    assert rep.reps.tolist() == [r for r in range(world) if _coords(r, tp, cp, dp)[2] < ep]
    per_rank, groups = generate_llm(spec, tp=tp, cp=cp, pp=pp, dp=dp, ep=ep, microbatches=2, seq=64)
    rep.check_groups(groups)
    kind = {}
    for nodes in per_rank:
        for n in nodes:
            if n.type == NodeType.COMM_COLL_NODE:
                kind[n.pg_name] = "dp" if n.name.startswith("dp.") else "local"
    as_sets = {frozenset(g) for g in groups.values()}
    for gid, ranks in groups.items():
        for p in rep.perms:
            img = frozenset(p[ranks].tolist())
            assert img in as_sets
            if kind.get(gid) == "dp":
                assert img == frozenset(ranks)
    sends = {(n.comm_src, n.comm_dst, n.comm_tag) for nodes in per_rank for n in nodes
             if n.type == NodeType.COMM_SEND_NODE}
    for p in rep.perms:
        assert {(int(p[s]), int(p[d]), t) for s, d, t in sends} == sends
        for r in rep.reps.tolist():  # the image rank's trace equals the representative's, peers mapped
            a, b = per_rank[r], per_rank[int(p[r])]
            assert [(n.name, n.comm_size) for n in a] == [(n.name, n.comm_size) for n in b]
            assert [int(p[n.comm_dst]) for n in a if n.type == NodeType.COMM_SEND_NODE] == \
                   [n.comm_dst for n in b if n.type == NodeType.COMM_SEND_NODE]


def test_llm_replicas_errors():
    with pytest.raises(InputError, match="ep=3"):
        llm_replicas(tp=1, pp=1, dp=4, ep=3)
    with pytest.raises(InputError, match="cp"):
        llm_replicas(tp=1, pp=1, dp=4, cp=0)


# ----------------------------------------------------------------------------- end to end


def test_simulate_tp2_cp2_pp2_dp2(tmp_path):
    res = _run(tmp_path, TINY, tp=2, cp=2, pp=2, dp=2, microbatches=4, seq=512)
    assert np.all(res.exposed_comm > 0)


def test_simulate_interleaved(tmp_path):
    _run(tmp_path / "a", TINY, tp=2, pp=2, dp=2, microbatches=4, seq=256, schedule="interleaved", vpp=2)
    big = ModelSpec("eight", layers=8, hidden=512, ffn=2048, heads=8, vocab=1000)
    _run(tmp_path / "b", big, tp=1, cp=2, pp=4, dp=1, microbatches=4, seq=256, schedule="interleaved", vpp=2)


def test_simulate_moe_cp_global_batch(tmp_path):
    _run(tmp_path, TINY_MOE, tp=2, cp=2, pp=2, dp=2, ep=2, global_batch=4, seq=256)


def test_replica_run_equals_full_run():
    from netsim.workload.llmrun import simulate_llm

    # one replica (tp * cp = 8 ranks) fills a node: every replica sees the fabric alike
    kw = dict(tp=4, cp=2, pp=2, dp=4, microbatches=4, seq=256, schedule="interleaved")
    sym = simulate_llm(TOPO, TINY, model="analytical", **kw)
    full = simulate_llm(TOPO, TINY, model="analytical", symmetry="none", **kw)
    np.testing.assert_allclose(sym.finish, full.finish, rtol=1e-9)


# ----------------------------------------------------------------------------- CLI


def test_cli_new_flags(tmp_path, capsys):
    out = tmp_path / "wl"
    assert main(["workload", "llm", "--model", "llama3-70b", "--tp", "2", "--cp", "2", "--pp", "2", "--dp", "1",
                 "--seq", "256", "--global-batch", "4", "--schedule", "interleaved", "--vpp", "2",
                 "--out", str(out)]) == 0
    assert "wrote 8 ranks" in capsys.readouterr().out
    assert len(list(out.glob("llm.*.et"))) == 8


@pytest.mark.parametrize("extra,needle", [
    (["--cp", "3"], "cp=3"),
    (["--global-batch", "3", "--micro-batch", "2"], "global_batch=3"),
    (["--global-batch", "4", "--microbatches", "2"], "gives 4 microbatches"),
    (["--vpp", "2"], "vpp=2"),
    (["--schedule", "interleaved", "--microbatches", "3"], "divisible by pp"),
])
def test_cli_errors_are_one_line(tmp_path, capsys, extra, needle):
    args = ["workload", "llm", "--model", "llama3-70b", "--tp", "1", "--pp", "2", "--dp", "1", "--seq", "256",
            "--out", str(tmp_path / "x")] + extra
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err
