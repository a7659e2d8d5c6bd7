"""netsim's ASTRA-sim analytical output equals ASTRA-sim's: its reference output, and the closed
forms of reference §4.10 (and the same reasoning for other algorithms, sizes and topologies)."""

import json

import pytest

from netsim.astra import parse_system, run_astra

ASTRA = "astra-sim__astra-sim"
E = 10  # endpoint-delay of the shipped configs (ns)


def mb(traces, coll="all_reduce", n=8):
    return traces / ASTRA / f"examples/workload/microbenchmarks/{coll}/{n}npus_1MB/{coll}"


def net(hops: int, nbytes: int, lat: float = 500.0, gib: float = 50.0) -> int:
    """ASTRA-sim congestion-unaware message delay (ns)."""
    return int(hops * lat + nbytes / (gib * 2**30 / 1e9))


def red(nbytes: int, mem_gbps: float = 1600.0) -> int:
    """ASTRA-sim reduction of one received message: 2 reads + 1 write at local-mem-bw."""
    return 3 * int(nbytes / (mem_gbps * 1e9) * 1e9)


# ----------------------------------------------------------- reference output
@pytest.mark.parametrize("engine", ["full", "symmetric"])
def test_rt_template_reference_stdout(traces, engine):
    """ASTRA-sim's own regression: every rank 117,780 cycles; netsim prints refs/stdout.txt verbatim."""
    rt = traces / ASTRA / "tests/rt_template"
    res = run_astra(mb(traces), rt / "inputs/system_cfg.json", rt / "inputs/network_cfg.yml",
                    rt / "inputs/remote_memory_cfg.json", engine=engine)
    assert res.finish.tolist() == [117780] * 8 and res.exposed.tolist() == [117780] * 8
    assert res.engine == engine
    assert res.lines() == (rt / "refs/stdout.txt").read_text().splitlines()
    d = 1 << 20 // 4 // 8  # 32,768 B per message
    assert 4 * (E + 7 * (net(1, 32768) + E + red(32768, 50)) + 7 * (net(1, 32768) + E)) == 117780 and d


def test_shipped_ring_config_64440(traces):
    res = run_astra(mb(traces), traces / ASTRA / "examples/system/native_collectives/Ring_4chunks.json",
                    traces / ASTRA / "examples/network/analytical/Ring_8npus.yml")
    assert res.finish.tolist() == [64440] * 8  # reference §4.10 (local-mem-bw 1600: red = 60)


# -------------------------------------------------------------- closed forms
@pytest.mark.parametrize("n", [4, 8, 16])
def test_microbenchmarks_closed_forms(traces, n):
    """All four shipped microbenchmarks on the shipped Ring_<n>npus networks, Ring_4chunks.json."""
    sysj = traces / ASTRA / "examples/system/native_collectives/Ring_4chunks.json"
    chunk = (1 << 20) // 4
    d = chunk // n
    expect = {"all_reduce": 4 * (E + (n - 1) * (net(1, d) + E + red(d)) + (n - 1) * (net(1, d) + E)),
              "reduce_scatter": 4 * (E + (n - 1) * (net(1, d) + E + red(d))),
              # all-gather: comm_size is the per-rank shard; each ring message carries a whole chunk
              "all_gather": 4 * (E + (n - 1) * (net(1, chunk) + E)),
              # ring all-to-all: n(n-1)/2 relayed messages of chunk/n, each after a receive
              "all_to_all": 4 * (E + n * (n - 1) // 2 * (net(1, d) + E))}
    for coll, value in expect.items():
        res = run_astra(mb(traces, coll, n), sysj, traces / ASTRA / f"examples/network/analytical/Ring_{n}npus.yml")
        assert res.finish.tolist() == [value] * n, coll
        assert res.exposed.tolist() == [value] * n


def _cfg(traces, **patch):
    j = json.loads((traces / ASTRA / "examples/system/native_collectives/Ring_4chunks.json").read_text())
    for op in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all"):
        if op in patch:
            j[f"{op}-implementation"] = patch.pop(op)
    j.update({k.replace("_", "-"): v for k, v in patch.items()})
    return parse_system(j)


@pytest.mark.parametrize("splits,size_kind", [(1, "big"), (4, "big"), (64, "inflated")])
def test_ring_all_reduce_sizes_and_inflation(traces, tmp_path, splits, size_kind):
    """Size inflation: a chunk below the NPU count is raised to the NPU count.  A remainder
    (size % splits) still costs a whole extra chunk: ceil(size / chunk) chunks of ``chunk`` bytes."""
    from netsim.chakra import EtNode, write_workload
    from netsim.chakra.schema import NodeType

    size = (3 << 20) + 5 if size_kind == "big" else 100
    write_workload(tmp_path / "w", [[EtNode(r, "ar", int(NodeType.COMM_COLL_NODE), comm_type=0, comm_size=size,
                                            is_cpu_op=False)] for r in range(8)])
    chunk = max(size // splits, 8)
    chunks = -(-max(size, splits * chunk) // chunk)
    assert chunks == {1: 1, 4: 5, 64: 64}[splits]
    d = chunk // 8
    want = chunks * (E + 7 * (net(1, d) + E + red(d)) + 7 * (net(1, d) + E))
    res = run_astra(tmp_path / "w", _cfg(traces, preferred_dataset_splits=splits),
                    traces / ASTRA / "examples/network/analytical/Ring_8npus.yml")
    assert res.finish.tolist() == [want] * 8


def test_halving_doubling_closed_form(traces):
    """Partners at distance 1, 2, 4 (hops on the ring), sizes D/2, D/4, D/8 then back; the two
    reducing steps cost the reduction of the *next* message size (ASTRA-sim's bundle)."""
    d = 262144
    want = 4 * (7 * E + red(d // 4) + red(d // 8) + 2 * net(1, d // 2) + 2 * net(2, d // 4) + 2 * net(4, d // 8))
    res = run_astra(mb(traces), _cfg(traces, **{"all-reduce": ["halvingDoubling"]}),
                    traces / ASTRA / "examples/network/analytical/Ring_8npus.yml")
    assert res.finish.tolist() == [want] * 8 == [63168] * 8


def test_direct_closed_form_on_switch(traces):
    """direct all-reduce: all 7 reduce-scatter messages at once, all-gather after every one arrived.
    HGX-H100-validated.yml: Switch (2 hops of 936.25 ns), 400 GiB/s."""
    d = 262144 // 8
    hop = net(2, d, 936.25, 400.0)
    want = 4 * (E + hop + E + red(d) + hop + E)
    res = run_astra(mb(traces), _cfg(traces, **{"all-reduce": ["direct"]}),
                    traces / ASTRA / "examples/network/analytical/HGX-H100-validated.yml")
    assert res.finish.tolist() == [want] * 8 == [15944] * 8


def test_active_chunks_halve_an_uncontended_collective(traces):
    one = run_astra(mb(traces), _cfg(traces), traces / ASTRA / "examples/network/analytical/Ring_8npus.yml")
    two = run_astra(mb(traces), _cfg(traces, active_chunks_per_dimension=2),
                    traces / ASTRA / "examples/network/analytical/Ring_8npus.yml")
    assert two.finish[0] * 2 == one.finish[0] == 64440


def test_two_dimensional_local_bw_aware_pipeline(traces, tmp_path):
    """Switch 8 x Ring 2 (hgx_h100_16gpu.yml): per chunk RS on dim 0, AR on dim 1, AG on dim 0.
    One queue per dimension: RS of chunks 0-3 run back to back on dim 0 while dim 1 does the ARs;
    the AGs queue behind the last RS (FIFO within a collective), so T = 4 RS + 4 AG."""
    sysj = _cfg(traces, **{"all-reduce": ["ring", "ring"]})
    net_file = traces / ASTRA / "inputs/network/hgx_h100_16gpu.yml"
    d0 = 262144 // 8
    t_rs = E + 7 * (net(2, d0, 936.25, 400.0) + E + red(d0))
    t_ar = E + (net(1, d0 // 2, 1000.0) + E + red(d0 // 2)) + (net(1, d0 // 2, 1000.0) + E)
    t_ag = E + 7 * (net(2, d0, 936.25, 400.0) + E)
    assert t_ar <= 3 * t_ag
    for engine in ("full", "symmetric"):
        res = run_astra(mb(traces, n=16), sysj, net_file, engine=engine)
        assert res.finish.tolist() == [4 * t_rs + 4 * t_ag] * 16 == [111408] * 16


def test_two_dimensional_baseline(traces):
    """baseline: a full ring all-reduce per dimension, chunks pipelined across the two queues."""
    sysj = _cfg(traces, **{"all-reduce": ["ring", "ring"]}, collective_optimization="baseline")
    d0 = 262144 // 8
    t0 = E + 7 * (net(2, d0, 936.25, 400.0) + E + red(d0)) + 7 * (net(2, d0, 936.25, 400.0) + E)
    d1 = 262144 // 2
    t1 = E + (net(1, d1, 1000.0) + E + red(d1)) + (net(1, d1, 1000.0) + E)
    assert t1 <= t0
    res = run_astra(mb(traces, n=16), sysj, traces / ASTRA / "inputs/network/hgx_h100_16gpu.yml")
    assert res.finish.tolist() == [4 * t0 + t1] * 16


def test_all_gather_walks_dimensions_downwards(traces):
    """2-D all-gather (1 MiB shard): dim 1 first (chunk 256 KiB, 1 message), then dim 0 with 2x data."""
    sysj = _cfg(traces, **{"all-gather": ["ring", "ring"]})
    c = 262144
    t1 = E + net(1, c, 1000.0) + E
    t0 = E + 7 * (net(2, 2 * c, 936.25, 400.0) + E)
    assert t1 <= t0
    res = run_astra(mb(traces, "all_gather", 16), sysj, traces / ASTRA / "inputs/network/hgx_h100_16gpu.yml")
    assert res.finish.tolist() == [t1 + 4 * t0] * 16


@pytest.mark.parametrize("coll", ["all_reduce", "all_gather", "reduce_scatter", "all_to_all"])
@pytest.mark.parametrize("algo", ["ring", "direct", "direct3", "halvingDoubling", "oneRing"])
def test_symmetric_engine_equals_full_engine(traces, coll, algo):
    if algo == "halvingDoubling" and coll == "all_to_all":
        pytest.skip("ASTRA-sim has no halving-doubling all-to-all")
    sysj = _cfg(traces, active_chunks_per_dimension=2, **{coll.replace("_", "-"): [algo]})
    for network in ("Ring_8npus.yml", "HGX-H100-validated.yml"):
        path = traces / ASTRA / "examples/network/analytical" / network
        full = run_astra(mb(traces, coll), sysj, path, engine="full")
        fast = run_astra(mb(traces, coll), sysj, path)
        assert fast.engine == "symmetric" and full.engine == "full"
        assert fast.finish.tolist() == full.finish.tolist() == [full.finish[0]] * 8
        assert sorted(fast.lines()) == sorted(full.lines())


def test_double_binary_tree_is_not_symmetric(traces):
    sysj = _cfg(traces, **{"all-reduce": ["doubleBinaryTree"]})
    res = run_astra(mb(traces), sysj, traces / ASTRA / "examples/network/analytical/Ring_8npus.yml")
    assert res.engine == "batched"  # trees are not rank-symmetric: every rank at once (netsim.astra.batched_algos)
    full = run_astra(mb(traces), sysj, traces / ASTRA / "examples/network/analytical/Ring_8npus.yml", engine="full")
    assert res.finish.tolist() == full.finish.tolist() and sorted(res.lines()) == sorted(full.lines())
    assert len(set(res.finish.tolist())) > 1 and res.finish.min() > 0
    with pytest.raises(Exception, match="symmetric engine does not apply: doubleBinaryTree"):
        run_astra(mb(traces), sysj, traces / ASTRA / "examples/network/analytical/Ring_8npus.yml", engine="symmetric")
