"""netsim run --llm with MoE models: the generator's all-to-alls run as the bench's dispatch/combine."""

import doctest
import json

import numpy as np
import pytest

from netsim.cli import main
from netsim.collectives import moe
from netsim.collectives.alltoall import schedule_pair_bytes
from netsim.topology.spec import load_topology
from netsim.workload import moe_run
from netsim.chakra.schema import CommType
from netsim.workload.generate.model import ModelSpec
from netsim.workload.llmrun import simulate_llm
from netsim.workload.moe_run import MoERunConfig, MoESchedules, default_schedules

from conftest import TOPOLOGIES

DGX = str(TOPOLOGIES / "dgx-h100.yaml")
SUPERPOD = str(TOPOLOGIES / "h100-superpod-1su.yaml")
#: A two-layer MoE small enough to simulate in well under a second (shapes are arbitrary).
TINY = ModelSpec("tiny-moe", layers=2, hidden=2048, ffn=4096, heads=8, vocab=1000, experts=16, top_k=2,
                 expert_ffn=2048, gated_mlp=True)
A2A = int(CommType.ALL_TO_ALL)
GEN = dict(tp=1, pp=1, dp=8, ep=8, microbatches=1, seq=1024)


def test_doctests():
    assert doctest.testmod(moe_run).failed == 0


def test_zipf_skewed_iteration_is_slower_than_uniform():
    uniform = simulate_llm(DGX, TINY, moe=MoERunConfig(algo="direct"), **GEN)
    skewed = simulate_llm(DGX, TINY, moe=MoERunConfig(algo="direct", skew="zipf:1.2"), **GEN)
    assert skewed.finish.max() > 1.1 * uniform.finish.max()
    assert "hottest expert 0" in skewed.notes[-1]
    # EPLB replicas of the hot experts win part of it back
    replicated = simulate_llm(DGX, TINY, moe=MoERunConfig(algo="direct", skew="zipf:1.2", redundant_experts=8),
                              **GEN)
    assert uniform.finish.max() < replicated.finish.max() < skewed.finish.max()


def test_default_engine_equals_event_driven_with_moe_schedules():
    cfg = MoERunConfig(algo="direct", skew="zipf:1.2")
    auto = simulate_llm(DGX, TINY, moe=cfg, **GEN)
    event = simulate_llm(DGX, TINY, moe=cfg, engine="event", **GEN)
    np.testing.assert_allclose(auto.finish, event.finish, rtol=1e-9)


def test_without_moe_flags_nothing_changes():
    a = simulate_llm(DGX, TINY, **GEN)
    b = simulate_llm(DGX, TINY, moe=None, **GEN)
    assert np.array_equal(a.finish, b.finish) and "moe" not in a.config


def test_schedules_are_the_bench_dispatch_and_combine():
    """Dispatch and combine of a node-limited EP16 group on two nodes: exactly
    :mod:`netsim.collectives.moe`'s schedules for the same routed batch."""
    topo = load_topology(SUPERPOD)
    cfg = MoERunConfig(algo="auto", skew="zipf:1.2")
    s = MoESchedules(topo, TINY, cfg, 2, default_schedules(topo, "flow"))
    size = 64 * TINY.top_k * TINY.hidden * 2  # 64 tokens per rank
    gpus = tuple(range(16))
    d = s.named(A2A, size, gpus, "mb0.fwd.L1.a2a_dispatch")
    c = s.named(A2A, size, gpus, "mb0.bwd.L1.a2a_combine")
    assert (d.op, d.algorithm, c.op, c.algorithm) == ("moe_dispatch", "node_limited", "moe_combine", "node_limited")
    assert s.named(A2A, size, gpus, "mb1.bwd.L0.a2a_dispatch") is d  # cached per group shape
    lay = moe.layout(16, 64, TINY.experts, TINY.top_k, popularity="zipf:1.2", local_size=8, max_nodes=4)
    lay = lay.with_bytes(moe.token_bytes(TINY.hidden, 2))
    want = moe.dispatch_schedule(lay, "node_limited", local_size=8)
    np.testing.assert_allclose(schedule_pair_bytes(d), schedule_pair_bytes(want))
    np.testing.assert_allclose(schedule_pair_bytes(c), schedule_pair_bytes(moe.combine_schedule(lay, "node_limited",
                                                                                                local_size=8)))
    assert s.named(int(CommType.ALL_REDUCE), 4096, gpus, "mb0.fwd.L0.attn_allreduce").op == "all_reduce"  # others: NCCL's plan
    assert d.blocks == c.blocks == 20  # DeepEP's normal kernels: Buffer.num_sms SMs (compute.SmShare)
    ll = MoESchedules(topo, TINY, MoERunConfig(algo="low_latency"), 2, default_schedules(topo, "flow"))
    assert ll.named(A2A, size, gpus, "mb0.fwd.L1.a2a_dispatch").blocks is None  # the hook holds no SMs


def test_node_limited_on_two_nodes_skew_slower():
    gen = dict(GEN, dp=16, ep=16, seq=128)
    uni = simulate_llm(SUPERPOD, TINY, moe=MoERunConfig(), model="analytical", **gen)
    zipf = simulate_llm(SUPERPOD, TINY, moe=MoERunConfig(skew="zipf:1.2"), model="analytical", **gen)
    assert zipf.finish.max() > uni.finish.max()
    assert zipf.config["moe"]["skew"] == "zipf:1.2"


def test_cli_flags(tmp_path, capsys):
    model = tmp_path / "tiny-moe.yaml"
    model.write_text("layers: 2\nhidden: 2048\nffn: 4096\nheads: 8\nvocab: 1000\nexperts: 16\ntop_k: 2\n"
                     "expert_ffn: 2048\ngated_mlp: true\n")
    base = ["run", "--topology", DGX, "--llm", str(model), "--tp", "1", "--pp", "1", "--dp", "8", "--ep", "8",
            "--microbatches", "1", "--seq", "1024", "--json"]
    times = {}
    for skew in ("uniform", "zipf:1.2"):
        assert main([*base, "--moe-algo", "direct", "--skew", skew]) == 0
        out = json.loads(capsys.readouterr().out)
        times[skew] = out["iteration_us"]
        assert any(n.startswith("MoE all-to-alls") for n in out["notes"])
    assert times["zipf:1.2"] > times["uniform"]
    assert main(["run", "--topology", DGX, "--llm", "llama3-8b", "--tp", "8", "--pp", "1", "--dp", "1",
                 "--moe-algo", "direct"]) == 2
    assert "has no experts" in capsys.readouterr().err
    assert main(["run", "--topology", DGX, "--workload", "x", "--skew", "zipf:1.2"]) == 2
    assert main([*base, "--moe-algo", "direct", "--skew", "zipf:-1"]) == 2


@pytest.mark.parametrize("bad", [dict(algo="ring"), dict(skew="zipf:1", expert_map="m.npy"), dict(max_nodes=-1)])
def test_bad_config(bad):
    from netsim.errors import InputError
    with pytest.raises(InputError):
        MoERunConfig(**bad)


def test_readme_moe_figures():
    # the four iteration times README.md states for the Mixtral EP8 run on one DGX H100
    import re

    from conftest import REPO

    text = (REPO / "README.md").read_text()
    said = re.search(r"gives ([\d.]+) ms against ([\d.]+) ms uniform \(([\d.]+) ms with the default uniform "
                     r"all-to-all.*?and ([\d.]+) ms with `--redundant-experts 8`", text, re.S)
    assert said, "README's MoE run figures moved: update this test's pattern"
    gen = dict(tp=1, pp=1, dp=8, ep=8, microbatches=1, seq=1024)
    run = lambda moe: simulate_llm(DGX, "mixtral-8x7b", moe=moe, **gen).finish.max() * 1e3  # noqa: E731
    got = [run(MoERunConfig(algo="direct", skew="zipf:1.2")), run(MoERunConfig(algo="direct")), run(None),
           run(MoERunConfig(algo="direct", skew="zipf:1.2", redundant_experts=8))]
    assert [f"{g:.1f}" for g in got] == list(said.groups())
