"""ASTRA-sim edge cases seen side by side (issue 19 item 5): what netsim accepts, refuses and says."""

import json

import pytest

from netsim.astra import run_astra
from netsim.astra.system import parse_system
from netsim.chakra import EtNode, write_workload
from netsim.chakra.schema import CommType, NodeType
from netsim.cli import main
from netsim.errors import DeadlockError, InputError

COMP, COLL, RECV = int(NodeType.COMP_NODE), int(NodeType.COMM_COLL_NODE), int(NodeType.COMM_RECV_NODE)
SYS = {"scheduling-policy": "LIFO", "endpoint-delay": 10, "preferred-dataset-splits": 1,
       "collective-optimization": "localBWAware", "local-mem-bw": 50, "all-reduce-implementation": ["ring"],
       "all-gather-implementation": ["ring"]}


def files(tmp_path, per_rank, system=None, n=None):
    """The four ASTRA-sim flags for ``per_rank`` traces on an n-NPU Ring."""
    n = n or len(per_rank)
    write_workload(tmp_path / "w", per_rank)
    (tmp_path / "net.yml").write_text(f"topology: [Ring]\nnpus_count: [{n}]\nbandwidth: [50]\nlatency: [500]\n")
    (tmp_path / "sys.json").write_text(json.dumps(system or SYS))
    (tmp_path / "mem.json").write_text(json.dumps({"memory-type": "NO_MEMORY_EXPANSION"}))
    return [f"--workload-configuration={tmp_path / 'w'}", f"--system-configuration={tmp_path / 'sys.json'}",
            f"--network-configuration={tmp_path / 'net.yml'}", f"--remote-memory-configuration={tmp_path / 'mem.json'}"]


def coll(i, op, size, deps=()):
    return EtNode(i, f"{op.name}{i}", COLL, data_deps=tuple(deps), comm_type=int(op), comm_size=size, is_cpu_op=False)


def test_double_binary_tree_on_six_npus_runs_until_an_all_reduce_does(tmp_path, capsys):
    """ASTRA-sim builds its trees at start-up without a size check (BinaryTree.cc keeps the
    largest power of two <= n): a configuration whose all-reduce never runs works."""
    system = parse_system({**SYS, "all-reduce-implementation": ["doubleBinaryTree"]})
    files(tmp_path, [[coll(0, CommType.ALL_GATHER, 6 * 1024)]] * 6)
    res = run_astra(tmp_path / "w", system, tmp_path / "net.yml")
    plain = run_astra(tmp_path / "w", parse_system(SYS), tmp_path / "net.yml")
    assert res.finish.tolist() == plain.finish.tolist() and res.finish.min() > 0
    args = files(tmp_path, [[coll(0, CommType.ALL_REDUCE, 6 * 1024)]] * 6,
                 {**SYS, "all-reduce-implementation": ["doubleBinaryTree"]})
    with pytest.raises(InputError, match="all-reduce-implementation: an all-reduce runs doubleBinaryTree on a "
                                         "dimension of 6 NPUs; it needs a power of two"):
        run_astra(tmp_path / "w", system, tmp_path / "net.yml")
    assert main(["astra", *args]) == 2  # the same refusal on the command line: one line, exit 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "sys.json: all-reduce-implementation" in err


def test_deadlock_prints_the_finished_ranks_and_counts_the_rest(tmp_path, capsys):
    """8 ranks finish (a compute node each), 10 wait on a receive nobody sends."""
    per_rank = [[EtNode(0, "c", COMP, duration_micros=1 + r)] for r in range(8)]
    per_rank += [[EtNode(0, "r", RECV, comm_src=0, comm_size=8, is_cpu_op=False)]] * 10
    args = files(tmp_path, per_rank)
    with pytest.raises(DeadlockError, match="10 rank\\(s\\) never finish") as info:
        run_astra(tmp_path / "w", tmp_path / "sys.json", tmp_path / "net.yml", tmp_path / "mem.json")
    assert "and 2 more rank(s)" in str(info.value)
    assert main(["astra", *args]) == 2
    out = capsys.readouterr()
    finished = [line for line in out.out.splitlines() if " finished, " in line]
    assert finished == [f"sys[{r}] finished, {1000 * (1 + r)} cycles, exposed communication 0 cycles."
                        for r in range(8)]
    assert out.out.splitlines()[-1] == "Exiting"
    assert "sys[8]" not in out.out and "... and 2 more rank(s)" in out.err and "Traceback" not in out.err


@pytest.mark.parametrize("delay, scale, note", [(10, 0.05, True), (10, 1.0, False), (0, 2.0, True)])
def test_zero_endpoint_delay_is_noted(tmp_path, capsys, delay, scale, note):
    """ASTRA-sim's event queue asserts that every event list is later than t = 0
    (EventQueue::proceed), so a bundle at t = 0 aborts it; netsim computes on and says so."""
    args = files(tmp_path, [[coll(0, CommType.ALL_REDUCE, 4096)]] * 4, {**SYS, "endpoint-delay": delay})
    assert main(["astra", *args, f"--injection-scale={scale}", "--engine=full"]) == 0
    out = capsys.readouterr()
    assert "sys[3] finished" in out.out
    assert ("ASTRA-sim aborts on them" in out.err) == note
    if delay:
        assert ("after --injection-scale 0.05" in out.err) == note


def test_two_npu_ring_congestion_aware_is_refused_as_astra_sim_aborts(tmp_path, capsys):
    """ASTRA-sim's congestion-aware Ring links each NPU to the next in both directions, so on 2 NPUs
    it connects the pair twice and ``Device::connect`` asserts (exit 134, seen side by side with the
    518bd513 build on fuzz configs): netsim refuses it, every engine, in one line; the analytical model
    (which ASTRA-sim runs) and 3 NPUs still run."""
    flags = files(tmp_path, [[coll(0, CommType.ALL_REDUCE, 4096)]] * 2)
    for engine in ("auto", "full", "compiled"):
        assert main(["astra", *flags, "--model", "congestion-aware", "--engine", engine]) == 2
        err = capsys.readouterr().err
        assert "a Ring of 2 NPUs in the congestion-aware model: ASTRA-sim aborts" in err
        assert "net.yml" in err and len(err.strip().splitlines()) == 1
    assert main(["astra", *flags]) == 0
    assert capsys.readouterr().out.count("finished") == 2
    flags = files(tmp_path, [[coll(0, CommType.ALL_REDUCE, 4096)]] * 3)
    assert main(["astra", *flags, "--model", "congestion-aware"]) == 0
    assert capsys.readouterr().out.count("finished") == 3
