"""Communication kernels take SMs from compute (netsim.workload.compute.SmShare): a rank's GPU compute
runs at (SMs - blocks held) / SMs while its NCCL kernels run, one thread block per channel."""

import numpy as np
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.chakra import CommType, EtNode, NodeType, write_workload
from netsim.cli import main
from netsim.collectives import nccl, p2p
from netsim.collectives.plan import plan
from netsim.errors import InputError
from netsim.topology.builders import GPU_SMS
from netsim.topology.spec import load_topology
from netsim.workload.compute import SmShare
from netsim.workload.simulation import simulate

DGX = "topologies/dgx-h100.yaml"
SMS = 132  # H100 SXM5 (NVIDIA H100 Tensor Core GPU Architecture whitepaper)
OPS = 989 * 10**9  # 1 ms at the H100's dense BF16 peak (nodes naming no kernel kind run at the peak)


def _span(res, rank: int, name: str) -> tuple[float, float]:
    (row,) = [(s, e) for r, _, n, _, s, e, _ in res.ops if r == rank and n == name]
    return row


def _workload(tmp_path, per_rank: list) -> str:
    write_workload(tmp_path / "w", per_rank)
    return str(tmp_path / "w")


def _overlap_trace(tmp_path, size: int) -> str:
    """Two ranks: an all-reduce of ``size`` bytes and 1 ms of compute, both ready at t=0."""
    nodes = [EtNode(1, "ar", NodeType.COMM_COLL_NODE, comm_type=int(CommType.ALL_REDUCE), comm_size=size,
                    is_cpu_op=False),
             EtNode(2, "gemm", NodeType.COMP_NODE, num_ops=OPS, tensor_size=1, is_cpu_op=False)]
    return _workload(tmp_path, [nodes, nodes])


def test_the_preset_sm_counts():
    assert GPU_SMS == {"V100": 80, "A100": 108, "H100": 132}
    assert load_topology(DGX).facts.gpu_sms == SMS
    assert load_topology("topologies/gb200-nvl72.yaml").facts.gpu_sms is None  # no whitepaper figure


def test_compute_overlapping_an_all_reduce_loses_the_channels_sms(tmp_path):
    """Closed form: the all-reduce's kernel holds nc blocks for T_c, so 1 ms of compute ends at
    1 ms + T_c * nc / 132 (T_c < 1 ms); with --sm-contention off at 1 ms."""
    size = 64 << 20
    topo = load_topology(DGX)
    nc = plan(topo, np.array([0, 1]), "all_reduce", float(size)).channels
    path = _overlap_trace(tmp_path, size)
    on = simulate(DGX, path, model="flow")
    off = simulate(DGX, path, model="flow", sm_contention="off")
    t_c = _span(on, 0, "ar")[1]
    assert _span(off, 0, "ar")[1] == pytest.approx(t_c, rel=1e-12)  # the collective is not slowed
    assert 1e-4 < t_c < 1e-3 and nc > 1
    assert _span(off, 0, "gemm") == pytest.approx((0.0, 1e-3), rel=1e-12)
    assert _span(on, 0, "gemm")[1] == pytest.approx(1e-3 + t_c * nc / SMS, rel=1e-9)
    assert on.compute[0] == pytest.approx(1e-3 + t_c * nc / SMS, rel=1e-9)  # the time the kernel ran
    assert off.config["sm_contention"] == "off" and "sm_contention" not in on.config
    runs_on, runs_off = on.tables()["runs"].iloc[0], off.tables()["runs"].iloc[0]
    assert bool(runs_on["sm_contention"]) and not bool(runs_off["sm_contention"])
    assert runs_on["gpu_sms"] == runs_off["gpu_sms"] == SMS
    assert any(f"up to {nc} of {SMS} SMs" in n for n in on.notes)
    assert not any("held SMs" in n for n in off.notes)


def test_a_posted_receive_holds_its_channels_until_the_message_lands(tmp_path):
    """Rank 1 posts a receive at t=0 and computes 1 ms; rank 0 computes 0.5 ms, then sends.  The receive
    kernel holds the send's parts (NCCL p2p channels) from t=0 to the landing at T; rank 0's send holds
    them from 0.5 ms to T: rank 1's compute ends at 1 ms + T * parts / 132."""
    size = 64 << 20
    send = [EtNode(1, "pre", NodeType.COMP_NODE, num_ops=OPS // 2, tensor_size=1, is_cpu_op=False),
            EtNode(2, "send", NodeType.COMM_SEND_NODE, comm_src=0, comm_dst=1, comm_size=size, comm_tag=7,
                   data_deps=(1,), is_cpu_op=False)]
    recv = [EtNode(1, "recv", NodeType.COMM_RECV_NODE, comm_src=0, comm_dst=1, comm_size=size, comm_tag=7,
                   is_cpu_op=False),
            EtNode(2, "gemm", NodeType.COMP_NODE, num_ops=OPS, tensor_size=1, is_cpu_op=False)]
    path = _workload(tmp_path, [send, recv])
    topo = load_topology(DGX)
    parts = p2p.P2PSetup.from_info(nccl.CommInfo.from_topology(topo, np.array([0, 1]))).parts(float(size))
    res = simulate(DGX, path, model="flow")
    land = _span(res, 1, "recv")[1]
    assert parts > 1 and 5e-4 < land < 1e-3
    assert _span(res, 1, "gemm")[1] == pytest.approx(1e-3 + land * parts / SMS, rel=1e-9)
    assert _span(res, 0, "pre") == pytest.approx((0.0, 5e-4), rel=1e-12)  # nothing ran beside it
    off = simulate(DGX, path, model="flow", sm_contention="off")
    assert _span(off, 1, "gemm")[1] == pytest.approx(1e-3, rel=1e-12)


def test_networks_without_a_gpu_sm_count_never_slow_compute(tmp_path):
    topo = load_topology("topologies/gb200-nvl72.yaml")
    res = simulate(topo, _overlap_trace(tmp_path, 64 << 20), model="flow")
    gemm = 989 * 10**9 / topo.facts.peak_flops
    assert _span(res, 0, "gemm")[1] == pytest.approx(gemm, rel=1e-12)
    assert not bool(res.tables()["runs"].iloc[0]["sm_contention"])


def test_overlapped_llm_training_is_slowed_and_says_so():
    from netsim.workload.llmrun import simulate_llm

    gen = dict(tp=4, pp=2, dp=1, microbatches=4, seq=2048, overlap_grad_reduce=True, tp_comm_overlap=True)
    on = simulate_llm(DGX, "llama3-8b", model="analytical", **gen)
    off = simulate_llm(DGX, "llama3-8b", model="analytical", sm_contention="off", **gen)
    assert on.finish.max() > off.finish.max()
    assert (on.compute > off.compute).all()
    assert any("communication kernels held SMs" in n for n in on.notes)


def test_the_default_generated_job_slows_only_the_weight_gradients():
    """Without overlap flags the only communication beside compute is Megatron's backward TP all-reduce,
    which runs while the column-parallel GEMM's weight gradient does: only those ``.wgrad`` nodes slow."""
    from netsim.workload.llmrun import simulate_llm

    gen = dict(tp=4, pp=2, dp=1, microbatches=4, seq=2048)
    on = simulate_llm(DGX, "llama3-8b", model="flow", **gen)
    off = simulate_llm(DGX, "llama3-8b", model="flow", sm_contention="off", **gen)

    def durations(res):
        return {(rank, name): end - start for rank, _, name, typ, start, end, _ in res.ops
                if typ == int(NodeType.COMP_NODE)}

    a, b = durations(on), durations(off)
    slowed = {key for key in a if a[key] > b[key] * (1 + 1e-12)}
    assert slowed and all(name.endswith(".wgrad") for _, name in slowed)
    assert all(a[key] == pytest.approx(b[key], rel=1e-12) for key in a if key not in slowed)
    assert (on.compute > off.compute).all() and any("held SMs" in n for n in on.notes)


def test_bad_values(tmp_path, capsys):
    with pytest.raises(InputError, match="--sm-contention"):
        simulate(DGX, _overlap_trace(tmp_path, 1 << 20), model="flow", sm_contention="maybe")
    argv = ["run", "--topology", DGX, "--llm", "llama3-8b", "--tp", "8", "--pp", "1", "--dp", "1",
            "--microbatches", "1", "--seq", "512", "--model", "analytical", "-q"]
    assert main(argv + ["--sm-contention", "off"]) == 0
    capsys.readouterr()
    assert main(argv + ["--sm-contention", "maybe"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--sm-contention" in err[0]
    from netsim.sweep.spec import parse_sweep
    base = {"topology": DGX, "llm.model": "gpt3-175b", "llm.tp": 8, "llm.pp": 1, "llm.dp": 1}
    s = parse_sweep({"kind": "run", "base": base, "grid": {"sm_contention": ["on", "off"]}})
    assert len(set(s.run_ids)) == 2
    with pytest.raises(InputError) as err:
        parse_sweep({"kind": "run", "base": base, "grid": {"sm_contention": ["on", "yes"]}}, "s.yaml")
    assert err.value.source == "s.yaml" and "sm_contention" in err.value.field


def test_the_plans_kernel_blocks_are_ncclss_channels():
    topo = load_topology(DGX)
    p = plan(topo, np.arange(8), "all_reduce", float(1 << 30))
    assert p.schedule.blocks == p.channels > 0
    a2a = plan(topo, np.arange(8), "alltoall", float(64 << 20))
    setup = p2p.P2PSetup.from_info(nccl.CommInfo.from_topology(topo, np.arange(8)))
    assert a2a.schedule.blocks == min(setup.channels, a2a.channels * 7)


@settings(max_examples=80, deadline=None)
@given(work=st.floats(1e-3, 5.0), sms=st.integers(8, 200),
       kernels=st.lists(st.tuples(st.floats(0.0, 6.0), st.floats(0.0, 3.0), st.integers(1, 4)), max_size=6))
def test_fluid_rate_against_step_integration(work, sms, kernels):
    """Written from the rule: between consecutive kernel starts and ends the job runs at
    max(sms - held, 0) / sms; it ends when the integral reaches ``work``."""
    kernels = [(s, s + d, min(b, sms // len(kernels))) for s, d, b in kernels]
    env = simpy.Environment()

    def call_at(t, fn):
        env.timeout(max(t - env.now, 0.0)).callbacks.append(lambda _e: fn())

    share, out = SmShare(type("N", (), {"env": env, "call_at": staticmethod(call_at)})(), sms), []
    share.compute(0, work, lambda: out.append(env.now))
    for s, e, b in kernels:
        def start(b=b, e=e):
            release = share.hold(0, b)
            call_at(e, release)
        call_at(s, start)
    env.run()
    cuts = sorted({0.0, *[t for s, e, _ in kernels for t in (s, e)]})
    left, t = work, 0.0
    for a, b in zip(cuts, cuts[1:] + [float("inf")]):
        rate = max(sms - sum(k for s, e, k in kernels if s <= a < e), 0) / sms
        if rate > 0 and left <= (b - a) * rate:
            t = a + left / rate
            break
        left -= (b - a) * rate
    assert out == [pytest.approx(t, rel=1e-9, abs=1e-12)]
    # a loss within 1e-12 + 1e-9 x the job is rounding, not recorded (SmShare._fire)
    assert share.stretch.get(0, 0.0) == pytest.approx(t - work, rel=1e-6, abs=2e-12 + 1e-9 * work)
