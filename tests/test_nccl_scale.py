"""NCCL at scale (issue 33): NVLS heads, NVLS tuning per node count, NVLS-tree pipeline, ring latency
along the chain, NICs on Grace.  Every expected number is written from NCCL 2.30.7's source
(tag v2.30.7-1), not from netsim's tables."""

import math

import numpy as np
import pytest

from netsim.collectives import nccl
from netsim.collectives.fastpath import step_routes
from netsim.collectives.plan import plan
from netsim.errors import InputError
from netsim.topology.spec import load_topology

SU = "topologies/h100-superpod-1su.yaml"
R8 = "topologies/gb200-nvl72-8rack.yaml"
R20 = "topologies/gb200-nvl72-20rack.yaml"


@pytest.fixture(scope="module")
def r8():
    return load_topology(R8)


@pytest.fixture(scope="module")
def r20():
    return load_topology(R20)


@pytest.mark.parametrize("ppn,with_nic,heads", [(72, 72, 32), (8, 8, 8), (8, 4, 4), (4, 4, 4), (36, 36, 32)])
def test_nvls_heads_are_the_nvls_graphs_channels(ppn, with_nic, heads):
    # search.cc:1127 maxChannels = min(NCCL_MAX_NVLS_ARITY = 32 (device.h:213), nGPUs); one channel per
    # NIC whose local GPU is not yet a head (search.cc:754-771)
    assert nccl.nvls_heads(ppn, with_nic) == min(32, ppn, with_nic) == heads


def test_an_nvl72_rack_crosses_racks_on_32_of_its_72_nics(r20):
    info = nccl.CommInfo.from_topology(r20, np.arange(1440))
    assert (info.ppn, info.nvls_heads, info.head_nic) == (72, 32, pytest.approx(48.0))
    p4d = load_topology("topologies/p4d-a100-shared-nic.yaml")  # 8 A100 sharing 4 NICs: 4 heads
    assert nccl.CommInfo.from_topology(p4d, np.arange(16)).nvls_heads == 4


def test_nvls_tree_bus_bandwidth_is_heads_times_the_per_channel_minimum(r20):
    """tuning.cc:307-322: busBw = nChannels(NVLS graph) x min(intraBw, interBw, perChMaxNVLSTreeBw);
    Blackwell, >= 3 nodes: perChMaxNVLSTreeBw 80 (tuning.cc:210), nvlsEfficiency .74 (:143)."""
    info = nccl.CommInfo.from_topology(r20, np.arange(1440))
    c = next(c for c in nccl.candidates("all_reduce", 1 << 30, info) if c.algorithm == "nvls_tree")
    intra = 18 * 40.1 * .74 * 31 / 32 * 2  # 18 NVLink5 at NCCL's 40.1 (topo.h:24), all-reduce x2
    assert c.bus_GBps == pytest.approx(min(intra, 32 * 48.0, 32 * 80.0))
    # the old rule (every GPU's NIC) would have let 72 NICs carry it
    assert 32 * 48.0 < 72 * 48.0


def test_nvls_tree_crosses_nodes_only_through_the_heads(r8):
    ranks = np.arange(144)  # 2 racks
    S = 1 << 30
    p = plan(r8, ranks, "all_reduce", S)
    assert p.algorithm == "nvls_tree"
    sent = np.zeros(144)
    for ph in p.schedule.phases:
        st = ph.step
        cross = (st.src // 72) != (st.dst // 72)
        np.add.at(sent, st.src[cross], st.nbytes[cross] * ph.repeat / nccl.WIRE["Simple"])
    local = np.nonzero(sent)[0] % 72
    assert set(local.tolist()) == set(range(32))  # heads 0..31 of both racks, no other GPU
    # each head all-reduces S/32 over 2 nodes on its double binary tree: it sends S/32 in all
    assert sent[sent > 0] == pytest.approx(np.full(64, S / 32), rel=1e-6)


@pytest.mark.parametrize("arch,nnodes,ppn,nic,near,want", [
    ("hopper", 32, 8, 50.0, True, (16, 64 << 10)),       # NVLS_NCHANNELS_SM90 (nvls.cc:155); >= 4 nodes: 64K (:227-229)
    ("hopper", 2, 8, 50.0, True, (16, 128 << 10)),       # < 4 nodes: the chunk, NCCL_NVLS_CHUNKSIZE 128K (:160)
    ("blackwell", 1, 72, 0.0, False, (24, 128 << 10)),   # NVLS_NCHANNELS_SM100_NVL (:157)
    ("blackwell", 2, 72, 50.0, False, (32, 64 << 10)),   # nvls.cc:174-182: 2 nodes, ppn >= 16: 64K
    ("blackwell", 2, 4, 50.0, False, (32, 256 << 10)),   # :177-179: ppn <= 4: 256K
    ("blackwell", 20, 72, 50.0, False, (24, 128 << 10)),  # :191-195: NIC >= 48, NIC on Grace (P2C)
    ("blackwell", 20, 8, 50.0, True, (24, 64 << 10)),    # :194-195: NIC within PXB
    ("blackwell", 20, 72, 100.0, False, (32, 64 << 10)),  # :183-190: NIC >= 96, ppn >= 32
    ("blackwell", 20, 8, 100.0, True, (24, 256 << 10)),  # :184-187
])
def test_nvls_tuning_follows_ncclNvlsTreeSm100Tuning(arch, nnodes, ppn, nic, near, want):
    assert nccl.nvls_tuning(arch, nnodes, ppn, nic, near) == want


def test_the_gb200_racks_nic_on_grace_reaches_nccls_c2c_rule(r20):
    assert r20.facts.nic_attach == "c2c"
    info = nccl.CommInfo.from_topology(r20, np.arange(1440))
    assert (info.nvls_channels, info.nvls_tree_chunk) == (24, 128 << 10)
    su = load_topology(SU)
    assert su.facts.nic_attach == "pcie"


@pytest.mark.parametrize("nbytes,pieces", [(1 << 30, 11), (4 << 30, 43), (512 << 20, 6)])
def test_nvls_tree_pipelines_one_loop_per_piece(r20, nbytes, pieces):
    """all_reduce.h NVLS_TREE: a channel's loop is nHeads chunks; enqueue.cc:2277-2285 sets the chunk
    (128K here: 1 GiB >= 4 x 768 x 128K; 512 MiB too); pieces = ceil(S / (24 channels x 32 heads x chunk))."""
    info = nccl.CommInfo.from_topology(r20, np.arange(1440))
    assert nccl.nvls_tree_pieces(nbytes, info) == pieces == math.ceil(nbytes / (24 * 32 * (128 << 10)))
    p = plan(r20, np.arange(1440), "all_reduce", nbytes)
    piece_steps = 2 + 2 * math.ceil(math.log2(20)) + 2  # NVLS RS up/down, tree up and down, NVLS AG up/down
    assert p.schedule.n_steps == pieces + piece_steps - 1  # pieces in flight together (compose.pipeline)


def test_small_nvls_tree_chunks_shrink_as_enqueue_does():
    assert nccl.nvls_tree_chunk(64 << 20, 24, 32, 128 << 10) == 64 << 10  # < 4 x 768 x 128K
    assert nccl.nvls_tree_chunk(16 << 20, 24, 32, 128 << 10) == 32 << 10  # < 1 x 768 x 64K
    assert nccl.nvls_tree_chunk(8 << 30, 16, 8, 256 << 10) == 256 << 10


@pytest.mark.parametrize("nbytes,chunk", [(16 << 30, 128 << 10), (1 << 30, 64 << 10), (256 << 20, 32 << 10),
                                          (32 << 20, 16 << 10)])
def test_one_node_nvls_chunks_shrink_as_enqueue_does(nbytes, chunk):
    """enqueue.cc:2258-2275 (NVLS): 24 channels x 32 heads = 768 ops on one 64-GPU NVL72 domain; 64 KiB
    below 64 x 768 x 128K = 6 GiB, 32 KiB below 8 x 768 x 64K = 384 MiB, 16 KiB below 2 x 768 x 32K = 48 MiB."""
    assert nccl.nvls_chunk(nbytes, 24, 32, nccl.NVLS_CHUNK) == chunk


def test_one_node_nvls_all_reduce_pipelines_one_loop_per_piece():
    """all_reduce.h:410-414 (NVLS, oneNode): a channel's loop is nHeads chunks; one rack of 64 GB300 at
    1 GiB runs 64 KiB chunks, 24 x 32 x 64K = 48 MiB a loop, 22 loops; the schedule pipelines 22 pieces
    through its 4 NVLS stages (ld up/down, st up/down), not netsim's default of 64."""
    from netsim.topology.overrides import load_topology_set
    topo = load_topology_set("topologies/gb300-nvl72-2x400g.yaml", ["nodes=1", "node.gpus=64"])
    ranks = np.arange(64)
    info = nccl.CommInfo.from_topology(topo, ranks)
    assert (info.nvls_channels, info.ppn) == (24, 64)
    S = 1 << 30
    assert nccl.nvls_pieces(S, info) == math.ceil(S / (24 * 32 * (64 << 10))) == 22
    p = plan(topo, ranks, "all_reduce", S)
    assert p.algorithm == "nvls"
    assert p.schedule.n_steps == 22 + 4 - 1
    # 16 GiB: 128 KiB chunks, 171 loops, beyond the runtime cap of 64 pieces
    assert nccl.nvls_pieces(16 << 30, info) == nccl.NVLS_TREE_MAX_PIECES
    # reduce-scatter and all-gather keep their own pieces (the rule is the all-reduce kernel's)
    assert plan(topo, ranks, "all_gather", S).schedule.n_steps != 22 + 2 - 1


def test_nvls_tree_heads_checked():
    from netsim.collectives.hierarchical import nvls_tree_all_reduce
    with pytest.raises(InputError, match="heads"):
        nvls_tree_all_reduce(16, 1.0, local_size=8, heads=9)


@pytest.mark.parametrize("nodes", [2, 8, 32])
def test_ring_latency_sums_every_hop_of_the_chain(nodes):
    """tuning.cc:403-412: a ring's latency is base + (nsteps - nInterSteps) x max(intra hw latency,
    3 x netOverhead) + nInterSteps x inter latency, summed along the chain (not its slowest hop);
    interLat adds graph latencyInter, 0 with the IB plugin (net_ib/init.cc:558, tuning.cc:391-394).
    H100 (Intel host: netOverhead 1, tuning.cc:228-233), Simple, all-gather of 8 x nodes ranks."""
    su = load_topology(SU)
    ranks = np.arange(8 * nodes)
    n = ranks.size
    info = nccl.CommInfo.from_topology(su, ranks)
    c = next(c for c in nccl.candidates("all_gather", 1 << 30, info) if c.label == "ring/Simple")
    want = 8.4 + (n - 1 - (nodes - 1)) * max(3.4, 3 * 1.0) + (nodes - 1) * 14.0
    assert c.latency_us == pytest.approx(want)
    # the run pays all of it: launch delay + per-step overheads + the links' own latency
    p = plan(su, ranks, "all_gather", 1 << 30, protocol="Simple")
    paid = 0.0
    for ph in p.schedule.phases:
        st = ph.step
        if st.n_transfers == 0:
            paid += st.delay_s * ph.repeat
            continue
        indptr, links = step_routes(su, ranks, st)
        phys = float(su.path_latency(indptr, links).max())
        paid += (st.overhead_s + phys) * ph.repeat
    assert paid * 1e6 == pytest.approx(want, rel=1e-6)


def test_tree_latencies_use_nccls_integer_log2(r20):
    """tuning.cc:416-418 and 427-428 count log2i(nNodes) = floor(log2) tree levels (utils.h:56-57):
    20 racks are 4 levels, not 4.32.  NVLS tree: 0 base + NVLink 25 + 2 x 4 x net 20.9 (tuning.cc:149-174)."""
    info = nccl.CommInfo.from_topology(r20, np.arange(1440))
    c = next(c for c in nccl.candidates("all_reduce", 1 << 30, info) if c.algorithm == "nvls_tree")
    assert c.latency_us == pytest.approx(25 + 2 * 4 * 20.9)
    t = next(c for c in nccl.candidates("all_reduce", 1 << 30, info) if c.label == "tree/Simple")
    assert t.latency_us == pytest.approx(8.4 + 2 * (71 * 4.0 + 4 * 14.0))


def test_nvls_tree_head_rate_is_nccls_per_head_cap():
    """tuning.cc:276, 321-324: busBw = nHeads x min(.., perChMaxNVLSTreeBw); Hopper 57.7 on 2 nodes,
    45.5 from 3 (tuning.cc:209); bus -> algorithm bandwidth by nRanks / nsteps (tuning.cc:377-382)."""
    two = nccl.CommInfo(16, 2, 8, "hopper", 370.8, 48.0, True, 16, 8)
    eight = nccl.CommInfo(64, 8, 8, "hopper", 370.8, 48.0, True, 16, 8)
    assert nccl.nvls_tree_head_rate(two) == pytest.approx(57.7 * 16 / 30)
    assert nccl.nvls_tree_head_rate(eight) == pytest.approx(45.5 * 64 / 126)
    assert nccl.nvls_tree_head_rate(nccl.CommInfo(8, 1, 8, "hopper", 370.8, 0.0, True, 16, 8)) == math.inf


def test_nvls_tree_head_rate_caps_only_the_heads_own_share():
    from netsim.collectives.hierarchical import nvls_tree_all_reduce
    from netsim.collectives.schedule import DOWN, UP
    s = nvls_tree_all_reduce(32, 1 << 20, local_size=8, chunks=1, channels=4, heads=4, head_rate=1e9)
    capped = []
    for ph in s.phases:
        st = ph.step
        cap = np.broadcast_to(np.asarray(st.rate_cap, dtype=float), st.nbytes.shape)
        if np.isfinite(cap).any():
            capped.append((int(np.isfinite(cap).sum()), set(st.hop[np.isfinite(cap)].tolist())))
            assert (st.dst[np.isfinite(cap)] % 8 < 4).all() or (st.src[np.isfinite(cap)] % 8 < 4).all()
    # the reduce-scatter's pulls into the 4 heads of 4 nodes, the all-gather's stores from them
    assert capped == [(16, {DOWN}), (16, {UP})]
    plain = nvls_tree_all_reduce(32, 1 << 20, local_size=8, chunks=1, channels=4, heads=4)
    assert all(np.isinf(np.asarray(p.step.rate_cap)).all() for p in plain.phases)


def test_two_h100_nodes_run_nvls_tree_at_nccls_per_head_bound():
    """2 x 8 H100 (8 heads): NCCL's bound 8 x 57.7 = 461.6 GB/s busbw binds the simulated run
    (without it the run reached ~508, above NCCL's own estimate)."""
    from netsim.perftests import BenchConfig, run_one
    from netsim.topology.overrides import load_topology_set
    topo = load_topology_set(SU, ["nodes=2"])
    row, _ = run_one(topo, BenchConfig("all_reduce", gpus=16, model="flow"), 16 << 30)
    assert row.algorithm == "nvls_tree/Simple"
    assert 0.85 * 8 * 57.7 < row.busbw_GBps <= 8 * 57.7


def test_nvls_tree_head_cap_holds_in_the_steady_phase_only():
    """The per-head cap is a sustained rate: the pipelined schedule keeps it where every stage is in
    flight (the repeated middle phase) and not on the loops that fill or drain the pipeline."""
    from netsim.collectives.plan import _build
    from netsim.topology.overrides import load_topology_set
    topo = load_topology_set(SU, ["nodes=2"])
    info = nccl.CommInfo.from_topology(topo, np.arange(16))
    rate = nccl.nvls_tree_head_rate(info) * 1e9
    s, _, _ = _build("all_reduce", "nvls_tree", 16, 256 << 20, 8, 16, "Simple", 8, 16, rate)
    capped = [bool((np.asarray(ph.step.rate_cap) == rate).any()) for ph in s.phases]
    steady = [ph.repeat > 1 for ph in s.phases]
    assert capped == steady and sum(steady) == 1
