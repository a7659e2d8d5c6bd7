"""Differential hunt for counterexamples to replica and file symmetry (docs/workloads.md).

The default run (replica symmetry where :mod:`netsim.workload.symmetry` proves it, collectives
off the event queue where exact) must equal ``--symmetry none --engine event`` (every rank, every
collective event by event) on every rank's finish and every link's bytes, on layouts chosen to
not line up: groups that do and do not divide the node, 6-, 8- and 12-GPU scale-up domains,
NVL-style racks crossed by a group, oversubscribed fabrics, every routing policy, both models,
packed, strided and random placements, generated jobs (``run --llm``) and Chakra file sets.
The default tier draws 30 examples; the ``slow`` tier 200 more.
"""

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netsim.chakra import EtNode, NodeType, write_workload
from netsim.chakra.schema import CommType
from netsim.workload.generate.llm import ModelSpec, write_llm_workload
from netsim.workload.llmrun import simulate_llm
from netsim.workload.simulation import simulate

SPEC = ModelSpec("diff", layers=2, hidden=1536, ffn=4096, heads=24, vocab=8000)
SUPERPOD = "topologies/h100-superpod-1su.yaml"
NVL = "topologies/gb300-nvl72-2x400g.yaml"

#: (topology file, --set overrides): 8-GPU nodes, 6-GPU nodes, 12-GPU NVLink racks (NVL72's
#: domain, shrunk so that small jobs cross racks), a 4:1 oversubscribed leaf tier.
FABRICS = [
    (SUPERPOD, {}),
    (SUPERPOD, {"node.gpus": 6}),
    (NVL, {"node.gpus": 12, "nodes": 12}),
    (SUPERPOD, {"scale_out.tiers.0.oversubscription": 4}),
]


def _finish_and_links(res):
    return res.finish, np.asarray(res.run.net.link_bytes, dtype=np.float64)


def _assert_same(a, b, what):
    fa, la = _finish_and_links(a)
    fb, lb = _finish_and_links(b)
    assert fa.shape == fb.shape, what
    np.testing.assert_allclose(fa, fb, rtol=1e-9, atol=1e-15, err_msg=f"{what}: rank finish\n{a.notes}")
    np.testing.assert_allclose(la, lb, rtol=1e-9, atol=1e-3, err_msg=f"{what}: link bytes\n{a.notes}")


@st.composite
def llm_jobs(draw):
    topo, sets = draw(st.sampled_from(FABRICS))
    tp = draw(st.sampled_from([1, 2, 3, 4, 6, 8]))
    pp = draw(st.sampled_from([1, 2]))
    dp = draw(st.sampled_from([2, 3, 4]))
    placement = draw(st.sampled_from(["packed", "packed", "packed", "strided:2", "random:7"]))
    return dict(topology=topo, overrides=sets or None, tp=tp, pp=pp, dp=dp, microbatches=pp, seq=512,
                placement=placement, model=draw(st.sampled_from(["flow", "analytical"])),
                routing=draw(st.sampled_from([None, "ftree", "ecmp", "adaptive", "spray"])))


def _llm(job, **kw):
    job = dict(job)
    return simulate_llm(job.pop("topology"), SPEC, **job, **kw)


def _check_llm(job):
    a = _llm(job)
    b = _llm(job, symmetry="none", engine="event")
    _assert_same(a, b, f"run --llm {job}")
    if a.run.replicas is not None:  # a replica run says it is exact, and why it may say so
        assert any("exact: every replica's plans and sends" in n for n in a.notes), a.notes


@st.composite
def file_sets(draw):
    """Every rank all-reduces in groups of ``size`` consecutive ranks, then all ranks all-reduce."""
    topo, sets = draw(st.sampled_from(FABRICS))
    size = draw(st.sampled_from([2, 3, 4, 5, 6, 8]))
    count = draw(st.sampled_from([2, 3, 4, 6]))
    nbytes = draw(st.sampled_from([1 << 16, 1 << 22, 1 << 26]))
    return dict(topology=topo, overrides=sets or None, size=size, count=count, nbytes=nbytes,
                model=draw(st.sampled_from(["flow", "analytical"])),
                routing=draw(st.sampled_from([None, "ftree", "ecmp", "adaptive", "spray"])))


def _files(tmp_path, job):
    world = job["size"] * job["count"]
    per = [[EtNode(1, "ar", int(NodeType.COMM_COLL_NODE), comm_type=int(CommType.ALL_REDUCE),
                   comm_size=job["nbytes"], pg_name=f"g{r // job['size']}", is_cpu_op=False),
            EtNode(2, "c", int(NodeType.COMP_NODE), duration_micros=3, data_deps=(1,)),
            EtNode(3, "dp", int(NodeType.COMM_COLL_NODE), comm_type=int(CommType.ALL_REDUCE),
                   comm_size=job["nbytes"] // 2, pg_name=f"d{r % job['size']}", is_cpu_op=False, data_deps=(2,))]
           for r in range(world)]
    groups = {f"g{g}": list(range(g * job["size"], (g + 1) * job["size"])) for g in range(job["count"])}
    groups.update({f"d{i}": list(range(i, world, job["size"])) for i in range(job["size"])})
    write_workload(tmp_path / "w", per)
    (tmp_path / "g.json").write_text(json.dumps(groups))
    return str(tmp_path / "w"), str(tmp_path / "g.json")


def _check_files(tmp_path, job):
    prefix, groups = _files(tmp_path, job)
    kw = dict(overrides=job["overrides"], routing=job["routing"])
    a = simulate(job["topology"], prefix, groups, job["model"], **kw)
    b = simulate(job["topology"], prefix, groups, job["model"], symmetry="none", engine="event", **kw)
    _assert_same(a, b, f"file set {job}")


@settings(max_examples=20, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(llm_jobs())
def test_llm_default_equals_every_rank_event_driven(job):
    _check_llm(job)


@settings(max_examples=10, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(file_sets())
def test_file_set_default_equals_every_rank_event_driven(tmp_path_factory, job):
    _check_files(tmp_path_factory.mktemp("files"), job)


@pytest.mark.slow
@settings(max_examples=140, deadline=None, suppress_health_check=list(HealthCheck))
@given(llm_jobs())
def test_llm_default_equals_every_rank_event_driven_many(job):
    _check_llm(job)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(file_sets())
def test_file_set_default_equals_every_rank_event_driven_many(tmp_path_factory, job):
    _check_files(tmp_path_factory.mktemp("files"), job)


# ------------------------------------------------------------------ the three cases
def test_groups_of_three_across_nodes_file_set(tmp_path):
    # 24 ranks all-reduce 256 MiB in groups of 3 consecutive ranks: groups 6-8 and 15-17 cross a node
    # boundary. The replica run was 1,241.56 us against the full run's 7,527.02 us (-83 %).
    per = [[EtNode(1, "ar", int(NodeType.COMM_COLL_NODE), comm_type=int(CommType.ALL_REDUCE), comm_size=256 << 20,
                   pg_name=str(r // 3), is_cpu_op=False)] for r in range(24)]
    write_workload(tmp_path / "w", per)
    (tmp_path / "g.json").write_text(json.dumps({str(g): [3 * g, 3 * g + 1, 3 * g + 2] for g in range(8)}))
    a = simulate(SUPERPOD, str(tmp_path / "w"), str(tmp_path / "g.json"), "flow")
    b = simulate(SUPERPOD, str(tmp_path / "w"), str(tmp_path / "g.json"), "flow", symmetry="none")
    np.testing.assert_allclose(a.finish, b.finish, rtol=1e-6)
    assert b.finish.max() > 5e-3  # the crossing groups run over InfiniBand
    note = next(n for n in a.notes if n.startswith("replica symmetry not exact for this run"))
    assert "GPUs [6, 7, 8]" in note, note


@pytest.mark.parametrize("topology,sets,tp,dp", [(NVL, None, 16, 8), (SUPERPOD, {"node.gpus": 6}, 4, 3)])
def test_tp_groups_straddling_domains(topology, sets, tp, dp):
    # TP16 on two NVL72 racks (a group straddles them): the replica run was 61.18 ms against 171.39 ms;
    # TP4 on 6-GPU nodes: 200.83 ms against 323.72 ms
    kw = dict(tp=tp, pp=1, dp=dp, microbatches=2, seq=2048, model="analytical", overrides=sets)
    a = simulate_llm(topology, "llama3-8b", **kw)
    b = simulate_llm(topology, "llama3-8b", symmetry="none", **kw)
    np.testing.assert_allclose(a.finish, b.finish, rtol=1e-6)
    assert a.run.replicas is None
    assert any(n.startswith("replica symmetry not exact for this run: the collective of group") for n in a.notes)


def test_a_fallback_that_does_not_fit_says_why_every_rank_is_needed(monkeypatch):
    """When the replica proof fails and every rank's tables would not fit, the one-line error says
    that the fallback is why all ranks are simulated (not just that they do not fit)."""
    import netsim.workload.generate.plan as gen_plan
    from netsim.errors import InputError

    real = gen_plan.check_memory

    def tight(plan, n, what, *a, **k):
        if n == plan.world:  # the fallback's every rank: pretend it does not fit
            raise InputError(f"{what} ({n} rank(s)) need more memory than is available", source="argument",
                             field="microbatches")
        return real(plan, n, what, *a, **k)
    monkeypatch.setattr(gen_plan, "check_memory", tight)
    with pytest.raises(InputError) as err:
        simulate_llm(SUPERPOD, "llama3-8b", tp=4, pp=1, dp=3, microbatches=2, seq=2048, model="analytical",
                     overrides={"node.gpus": 6})
    assert err.value.field == "microbatches"
    assert err.value.message.startswith("replica symmetry is not exact for this run (the collective of group")
    assert "so every rank is simulated: the simulated ranks (12 rank(s)) need more memory" in err.value.message
