"""Overlap as Megatron-LM runs it (issue 14 item 4): comm streams per communicator, gradient buckets
reduced during the backward, TP all-reduces pipelined with their compute (docs/workloads.md, "Overlap")."""

from __future__ import annotations

from pathlib import Path

import pytest

from netsim.chakra import read_et_table
from netsim.cli import main
from netsim.errors import InputError
from netsim.workload.generate import ModelSpec, generate_llm
from netsim.workload.generate.plan import plan_llm
from netsim.workload.generate.layers import TP_SPLITS
from netsim.workload.generate.writer import write_llm_files
from netsim.workload.llmrun import simulate_llm

DGX = str(Path(__file__).resolve().parents[1] / "topologies" / "dgx-h100.yaml")
TINY = ModelSpec("tiny", layers=4, hidden=2048, ffn=8192, heads=16, vocab=32000, gated_mlp=True)
JOB = dict(tp=2, pp=2, dp=2, microbatches=4, seq=512)  # short compute: buckets outlast a layer


def _intervals(res, rank, prefix, exact=False):
    return [(s, e) for r, _i, name, _k, s, e, _row in res.ops
            if r == rank and (name == prefix if exact else prefix in name)]


def _overlaps(a, b):
    return any(s1 < e2 and s2 < e1 for s1, e1 in a for s2, e2 in b)


@pytest.fixture(scope="module")
def runs():
    out = {}
    for label, kw in {"communicator": {}, "one": {"comm_streams": "one"}}.items():  # lanes only: SMs stay with
        out[label] = simulate_llm(DGX, TINY, symmetry="none", overlap_grad_reduce=True, sm_contention="off",  # compute
                                  **JOB, **kw)
    return out


def test_dp_buckets_run_beside_tp_allreduces_only_on_their_own_stream(runs):
    """comm_streams=communicator: a gradient bucket in flight does not hold back the TP all-reduces
    (PyTorch: one NCCL stream per process group); one comm lane (ASTRA-sim) serialises them."""
    for rank in (0, 1):  # stage 0 (later stages reduce one bucket after their backward, as Megatron)
        dp = _intervals(runs["communicator"], rank, "dp.grad_allreduce")
        tp = _intervals(runs["communicator"], rank, "allreduce")
        tp = [x for x in tp if x not in dp]
        assert dp and tp and _overlaps(dp, tp), rank
        dp1 = _intervals(runs["one"], rank, "dp.grad_allreduce")
        tp1 = [x for x in _intervals(runs["one"], rank, "allreduce") if x not in dp1]
        assert not _overlaps(dp1, tp1), rank
    assert runs["communicator"].finish.max() < runs["one"].finish.max()
    assert runs["communicator"].compute.tolist() == runs["one"].compute.tolist()  # same work, other lanes


def test_runs_table_records_every_overlap_setting(runs):
    row = runs["communicator"].tables()["runs"].iloc[0]
    assert row["overlap.overlap_grad_reduce"] and not row["overlap.tp_comm_overlap"]
    assert row["overlap.comm_streams"] == "communicator" and row["comm_streams"] == "communicator"
    assert runs["one"].tables()["runs"].iloc[0]["comm_streams"] == "one"


def test_written_traces_declare_their_streams(tmp_path):
    write_llm_files(tmp_path / "a", TINY, jobs=1, **JOB)
    write_llm_files(tmp_path / "b", TINY, jobs=1, comm_streams="one", **JOB)
    assert read_et_table(tmp_path / "a" / "llm.0.et").metadata.attrs == {"comm_streams": "communicator"}
    assert read_et_table(tmp_path / "b" / "llm.0.et").metadata.attrs == {}


def test_tp_comm_overlap_pipelines_each_block_in_te_splits():
    base, _ = generate_llm(TINY, tp=2, pp=1, dp=1, microbatches=1, seq=2048, ranks=[0])
    ov, _ = generate_llm(TINY, tp=2, pp=1, dp=1, microbatches=1, seq=2048, ranks=[0], tp_comm_overlap=True)
    base, ov = base[0], ov[0]
    assert sum(n.num_ops or 0 for n in ov) == sum(n.num_ops or 0 for n in base)  # same work, cut in pieces
    assert sum(n.comm_size or 0 for n in ov) == sum(n.comm_size or 0 for n in base)  # same bytes
    pieces = [n for n in ov if n.name.startswith("mb0.fwd.L0.mlp_allreduce.split")]
    comps = [n for n in ov if n.name.startswith("mb0.fwd.L0.mlp.split")]
    assert len(pieces) == len(comps) == TP_SPLITS
    assert [p.data_deps for p in pieces] == [(c.id,) for c in comps]  # piece k right after compute k
    nxt = next(n for n in ov if n.id == comps[-1].id + 2)  # the node after the last piece
    assert set(nxt.data_deps) == {c.id for c in comps[-1:]} | {p.id for p in pieces}


def test_tp_comm_overlap_runs_compute_pieces_under_the_allreduce_pieces():
    """The next compute piece runs while the previous all-reduce piece is on the wire; the pieces
    are timed as NCCL all-reduces of a quarter of the bytes (docs/workloads.md says what that costs)."""
    kw = dict(tp=8, pp=1, dp=1, microbatches=1, seq=4096, symmetry="none")
    plain = simulate_llm(DGX, TINY, sm_contention="off", **kw)
    ov = simulate_llm(DGX, TINY, tp_comm_overlap=True, sm_contention="off", **kw)
    assert ov.compute.sum() == pytest.approx(plain.compute.sum(), rel=1e-9)
    sms = simulate_llm(DGX, TINY, tp_comm_overlap=True, **kw)  # the all-reduce pieces' kernels take SMs
    assert (sms.compute > ov.compute).all() and sms.finish.max() >= ov.finish.max()  # here comm-bound
    comp = _intervals(ov, 0, "mb0.fwd.L1.mlp.split")
    comm = _intervals(ov, 0, "mb0.fwd.L1.mlp_allreduce.split")
    assert len(comp) == len(comm) == TP_SPLITS and _overlaps(comp[1:2], comm[:1])
    assert not _overlaps(_intervals(plain, 0, "mb0.fwd.L1.mlp", True),
                         _intervals(plain, 0, "mb0.fwd.L1.mlp_allreduce", True))
    assert ov.tables()["runs"].iloc[0]["overlap.tp_comm_overlap"]


def test_no_overlap_grad_reduce_is_one_reduction_on_the_chain_after_the_backward():
    on, _ = generate_llm(TINY, tp=1, pp=1, dp=2, microbatches=2, seq=512, ranks=[0], overlap_grad_reduce=True)
    off, _ = generate_llm(TINY, tp=1, pp=1, dp=2, microbatches=2, seq=512, ranks=[0])  # Megatron's default
    on, off = on[0], off[0]
    red = [n for n in off if n.name.startswith("dp.grad_allreduce")]
    assert len(red) == 1 and red[0] is off[-1] and red[0].data_deps == (off[-2].id,)
    assert red[0].comm_size == sum(n.comm_size for n in on if n.name.startswith("dp.grad_allreduce"))
    assert len([n for n in on if n.name.startswith("dp.grad_allreduce")]) > 1


def test_bad_overlap_settings_are_one_line_errors(tmp_path, capsys):
    with pytest.raises(InputError, match="comm_streams"):
        plan_llm(TINY, comm_streams="two", **JOB)
    with pytest.raises(InputError, match="true or false"):
        plan_llm(TINY, overlap_grad_reduce="yes", **JOB)
    assert main(["workload", "llm", "--llm", "llama3-8b", "--tp", "1", "--pp", "1", "--dp", "1",
                 "--comm-streams", "two", "--out", str(tmp_path)]) == 2
    assert "Traceback" not in capsys.readouterr().err
