"""The batched engine equals the event engine (``engine="full"``, the reference) to the ns, line for line."""

import random

import numpy as np
import pytest

from netsim.astra import run_astra
from netsim.astra.system import parse_system
from netsim.chakra import EtNode, write_workload
from netsim.chakra.schema import CommType, NodeType

COMP, COLL, RECV = int(NodeType.COMP_NODE), int(NodeType.COMM_COLL_NODE), int(NodeType.COMM_RECV_NODE)
AR, AG, RS = CommType.ALL_REDUCE, CommType.ALL_GATHER, CommType.REDUCE_SCATTER


def system(chunks=1, splits=4, **kw):
    return parse_system({"scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": chunks,
                         "preferred-dataset-splits": splits, "all-reduce-implementation": ["ring"],
                         "all-gather-implementation": ["ring"], "reduce-scatter-implementation": ["ring"],
                         "collective-optimization": "localBWAware", "local-mem-bw": 50, **kw})


def uneven(n: int, ops, rng: random.Random, sizes=None) -> list[list[EtNode]]:
    """Per rank: a compute node of rank-dependent length, then each collective followed by
    compute (GPU or CPU) of rank-dependent length; one chain per rank."""
    sizes = sizes or [rng.choice([4096, 65536, 1 << 20, 100_003]) for _ in ops]
    lengths = [[rng.randrange(0, 40) for _ in range(len(ops) + 1)] for _ in range(n)]
    per = []
    for r in range(n):
        nodes = [EtNode(0, "c", COMP, duration_micros=lengths[r][0])]
        for k, (op, size) in enumerate(zip(ops, sizes)):
            nodes.append(EtNode(2 * k + 1, f"coll{k}", COLL, data_deps=(2 * k,), comm_type=int(op), comm_size=size,
                                is_cpu_op=False))
            nodes.append(EtNode(2 * k + 2, f"comp{k}", COMP, data_deps=(2 * k + 1,), duration_micros=lengths[r][k + 1],
                                is_cpu_op=k % 3 == 2))
        per.append(nodes)
    return per


def both(tmp_path, per_rank, kind, model, sysc, n=None):
    n = n or len(per_rank)
    write_workload(tmp_path / "w", per_rank)
    (tmp_path / "n.yml").write_text(f"topology: [{kind}]\nnpus_count: [{n}]\nbandwidth: [50]\nlatency: [500]\n")
    ref = run_astra(tmp_path / "w", sysc, tmp_path / "n.yml", model=model, engine="full")
    new = run_astra(tmp_path / "w", sysc, tmp_path / "n.yml", model=model)
    return ref, new


def assert_same(ref, new):
    assert (ref.engine, new.engine) == ("full", "batched")
    for key in ("finish", "exposed", "gpu", "wall", "overlap"):
        assert np.array_equal(getattr(ref, key), getattr(new, key)), key
    assert ref.times.keys() == new.times.keys()
    assert all(np.array_equal(ref.times[k], new.times[k]) for k in ref.times)
    assert ref.rows == new.rows and ref.stats["messages"] == new.stats["messages"]
    assert sorted(ref.lines()) == sorted(new.lines())  # same-instant finishes: rank order vs event order
    assert ref.notes == new.notes


@pytest.mark.parametrize("kind", ["Ring", "Switch", "FullyConnected"])
@pytest.mark.parametrize("model", ["analytical", "congestion-aware"])
@pytest.mark.parametrize("seed", range(3))
def test_batched_equals_event_engine(tmp_path, kind, model, seed):
    rng = random.Random(seed * 7 + len(kind))
    n = rng.choice([2, 3, 5, 8, 12])
    ops = [rng.choice([AR, AG, RS]) for _ in range(rng.randrange(1, 4))]
    splits = rng.choice([1, 3, 4])
    chunks = 1 if model == "congestion-aware" else rng.choice([1, 2, 3])
    ref, new = both(tmp_path, uneven(n, ops, rng), kind, model, system(chunks, splits))
    assert_same(ref, new)


def test_batched_bench_shape_at_64(tmp_path):
    """The benchmark's workload (bench_astra_scale.py) at 64 NPUs, both models, 1 MiB all-reduce."""
    rng = random.Random(1)
    per = uneven(64, [AR], rng, sizes=[1 << 20])
    for model in ("analytical", "congestion-aware"):
        ref, new = both(tmp_path, per, "Switch", model, system())
        assert_same(ref, new)
        assert len(set(new.finish.tolist())) > 1  # ranks differ


def test_same_traces_congestion_aware_is_batched(tmp_path):
    """Congestion-aware has no symmetric engine; identical traces go batched (and equal the event engine)."""
    per = [[EtNode(0, "ar", COLL, comm_type=int(AR), comm_size=1 << 20, is_cpu_op=False)]] * 16
    ref, new = both(tmp_path, per, "Switch", "congestion-aware", system())
    assert_same(ref, new)
    finished = [line for line in new.lines() if " finished, " in line]
    assert finished == [f"sys[{r}] finished, 253300 cycles, exposed communication 253300 cycles." for r in range(16)]


@pytest.mark.parametrize("why, per_rank, sysc", [
    ("not a chain", [[EtNode(0, "a", COMP, duration_micros=1), EtNode(1, "b", COMP, duration_micros=2)]] * 4,
     system()),
    ("other than COMP", [[EtNode(0, "r", RECV, comm_src=1, comm_size=8, is_cpu_op=False)]] * 4, system()),
    ("direct, batched on a 1-D network in the analytical model only",
     [[EtNode(0, "ar", COLL, comm_type=int(AR), comm_size=4096, is_cpu_op=False)]] * 4,
     system(**{"all-reduce-implementation": ["direct"]})),
    ("several active chunks", [[EtNode(0, "ar", COLL, comm_type=int(AR), comm_size=4096, is_cpu_op=False)]] * 4,
     system(chunks=2)),
])
def test_batched_refuses_where_not_proven(tmp_path, why, per_rank, sysc):
    write_workload(tmp_path / "w", per_rank)
    (tmp_path / "n.yml").write_text("topology: [Ring]\nnpus_count: [4]\nbandwidth: [50]\nlatency: [500]\n")
    with pytest.raises(Exception, match=f"batched engine does not apply: .*{why}"):
        run_astra(tmp_path / "w", sysc, tmp_path / "n.yml", model="congestion-aware", engine="batched")


def test_different_collective_sequences_fall_back(tmp_path):
    per = [[EtNode(0, "ar", COLL, comm_type=int(AR), comm_size=4096 * (1 + r % 2), is_cpu_op=False)]
           for r in range(4)]
    write_workload(tmp_path / "w", per)
    (tmp_path / "n.yml").write_text("topology: [Ring]\nnpus_count: [4]\nbandwidth: [50]\nlatency: [500]\n")
    with pytest.raises(Exception, match="issue different collectives"):
        run_astra(tmp_path / "w", system(), tmp_path / "n.yml", engine="batched")
