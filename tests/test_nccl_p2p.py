"""NCCL's p2p engine (netsim.collectives.p2p): channels per peer, parts, protocol, peers in flight
and the per-channel network cap, each against NCCL 2.30.7's rules written out by hand here."""

from dataclasses import replace

import numpy as np
import pytest

from netsim.perftests import BenchConfig, run_one
from netsim.collectives import moe, nccl, p2p
from netsim.collectives.plan import plan
from netsim.topology.spec import load_topology

SU = "topologies/h100-superpod-1su.yaml"
H100 = "topologies/dgx-h100.yaml"


@pytest.fixture(scope="module")
def su():
    return load_topology(SU)


def test_setup_follows_paths_cc_and_enqueue_cc():
    # one 8xH100 node: NVLink peers get 2 x 18 links = 36 channels -> 64 (pow2), capped at
    # p2pnChannels = pow2(24 ring channels) = 32; nChannelsMin halves while x 8 ranks > 32 -> 4
    one = p2p.P2PSetup.for_comm(nranks=8, nnodes=1, ring_channels=24, nvl_links=18, nvl_link_GBps=20.6, nic_GBps=0)
    assert (one.channels, one.per_peer, one.min_parts, one.chunk) == (32, 32, 4, 512 << 10)
    # 2 nodes x 8: a network peer needs ceil(48 / 14) = 4 channels; 4 x ceil(16 / 8) = 8 <= 16 keeps 4
    two = p2p.P2PSetup.for_comm(nranks=16, nnodes=2, ring_channels=16, nvl_links=18, nvl_link_GBps=20.6, nic_GBps=48)
    assert (two.channels, two.per_peer, two.min_parts, two.chunk) == (16, 4, 1, 128 << 10)
    # 64 ranks: 4 x 8 = 32 > 16 -> 2 per peer; 256 ranks: down to 1
    assert p2p.P2PSetup.for_comm(nranks=64, nnodes=8, ring_channels=16, nvl_links=18, nvl_link_GBps=20.6,
                                 nic_GBps=48).per_peer == 2
    big = p2p.P2PSetup.for_comm(nranks=256, nnodes=32, ring_channels=16, nvl_links=18, nvl_link_GBps=20.6, nic_GBps=48)
    assert (big.per_peer, big.min_parts) == (1, 1)
    # a 200G NIC (A100 HDR) needs ceil(24 / 14) = 2 channels
    assert p2p.P2PSetup.for_comm(nranks=16, nnodes=2, ring_channels=16, nvl_links=12, nvl_link_GBps=20.0,
                                 nic_GBps=24).per_peer == 2


def test_parts_protocol_and_window():
    two = p2p.P2PSetup(16, 2, channels=16, per_peer=4, min_parts=1, chunk=128 << 10)
    # min part 64 KiB, max part 128 KiB across nodes: 1 MiB doubles 1 -> 2 -> 4 (the per-peer cap)
    assert [two.parts(b) for b in (1, 64 << 10, 128 << 10, 256 << 10, 1 << 20, 1 << 30)] == [1, 1, 1, 2, 4, 4]
    assert two.protocol(16 << 10) == "LL" and two.protocol((16 << 10) + 1) == "Simple"
    one = p2p.P2PSetup(8, 1, channels=32, per_peer=32, min_parts=4, chunk=512 << 10)
    # one node: min part 64 KiB, max part 16 MiB; 24 KiB takes 1 channel, 100 KiB 2 (LL up to 32 KiB)
    assert one.parts(24 << 10) == 1 and one.parts(100 << 10) == 2 and one.parts(1 << 30) == 32
    assert one.protocol(24 << 10) == "Simple" and one.protocol(16 << 10) == "LL"
    big = p2p.P2PSetup(256, 32, channels=16, per_peer=1, min_parts=1, chunk=128 << 10)
    assert big.window(1) == 128 and two.window(4) == 15  # 16 / parts x 8 peers, at most n - 1
    assert big.net_cap_GBps(1 << 20) == 14.0 and two.net_cap_GBps(256 << 10) == 28.0


def test_setup_from_a_topology(su):
    s = p2p.P2PSetup.from_info(nccl.CommInfo.from_topology(su, np.arange(64)))
    assert (s.channels, s.per_peer, s.min_parts, s.chunk) == (16, 2, 1, 128 << 10)
    s = p2p.P2PSetup.from_info(nccl.CommInfo.from_topology(load_topology(H100), np.arange(8)))
    assert (s.channels, s.per_peer, s.min_parts) == (32, 32, 4)


def test_network_sends_are_capped_by_their_channels(su):
    """sendrecv over 2 nodes, 256 KiB: the cross-node sends take 2 channels (enqueue.cc:921-926)
    at 14 GB/s each (paths.cc:918), below the 48 GB/s NIC; the time is NCCL's Simple launch
    8.4 us + NET hop 14 us (tuning.cc:149-174) + 256 KiB / 28 GB/s."""
    size = 256 << 10
    row, _ = run_one(su, BenchConfig("sendrecv", gpus=16), size)
    assert row.time_us == pytest.approx(8.4 + 14.0 + size / 28e3, rel=1e-3)
    assert row.algorithm == "p2p/Simple"
    # 1 GiB: 4 channels = 56 GB/s, so the NIC (48) binds: the calibration anchor stays
    row, _ = run_one(su, BenchConfig("sendrecv", gpus=16), 1 << 30)
    assert 47.5 < row.busbw_GBps < 48.5


def test_sendrecv_protocol_is_per_send_not_per_rank(su):
    # 64 KiB to one peer is Simple (> 1 channel x 16 KiB); it used to be judged by 64 KiB / n
    assert plan(su, np.arange(16), "sendrecv", 64 << 10).protocol == "Simple"
    assert plan(su, np.arange(16), "sendrecv", 16 << 10).protocol == "LL"


def test_alltoall_runs_nccls_peers_per_step(su):
    p = plan(su, np.arange(256), "alltoall", 1 << 20)
    assert [ph.step.n_transfers // 256 for ph in p.schedule.phases if ph.step.n_transfers] == [128, 127]
    assert len([ph for ph in plan(su, np.arange(64), "alltoall", 1 << 20).schedule.phases if ph.step.n_transfers]) == 1


def test_low_latency_moe_puts_every_copy_at_once():
    lay = moe.layout(128, 4, 256, 8, seed=0, local_size=8, bytes_per_token=100.0)
    s = moe.dispatch_schedule(lay, "low_latency", local_size=8)
    assert len([ph for ph in s.phases if ph.step.n_transfers]) == 1  # DeepEP: no rounds
    d = moe.dispatch_schedule(lay, "direct", local_size=8, window=16)
    assert len([ph for ph in d.phases if ph.step.n_transfers]) == 8  # NCCL-style windows when asked


A100 = "topologies/dgx-a100.yaml"


def test_ampere_nvlink_sends_are_capped_by_their_channels():
    """One 8xA100 node, sendrecv: NCCL connects SM80 NVLink peers in P2P read mode (paths.cc:416-417),
    where a channel's receive warps pull the data; a send of 128 MiB takes 8 channels, 256 MiB 16
    (enqueue.cc:914-926), 14 GB/s each (p2p.P2P_PER_CHANNEL_GBPS), below the 240 GB/s of 12 NVLinks;
    the time is NCCL's Simple launch 8.4 us + NVLink hop 3.4 us (tuning.cc:149-162) + S / channels x 14.
    1 GiB takes 32 channels (448 GB/s), so the links bind again."""
    t = load_topology(A100)
    assert p2p.P2PSetup.from_info(nccl.CommInfo.from_topology(t, np.arange(8))).read
    for size, channels in ((128 << 20, 8), (256 << 20, 16)):
        row, _ = run_one(t, BenchConfig("sendrecv", gpus=8), size)
        assert row.time_us == pytest.approx(8.4 + 3.4 + size / (channels * 14e3), rel=1e-9)
    row, _ = run_one(t, BenchConfig("sendrecv", gpus=8), 1 << 30)
    assert 238 < row.busbw_GBps < 240


def test_hopper_nvlink_sends_are_link_bound():
    """P2P write (Hopper): no channel cap on NVLink sends.  sendrecv 128 MiB on 8xH100 streams at the
    NVLinks' 370.8 GB/s; alltoall 4 GiB stays at the 370 GB/s calibration anchor."""
    h = load_topology(H100)
    assert not p2p.P2PSetup.from_info(nccl.CommInfo.from_topology(h, np.arange(8))).read
    row, _ = run_one(h, BenchConfig("sendrecv", gpus=8), 128 << 20)
    assert row.busbw_GBps > 350
    row, _ = run_one(h, BenchConfig("alltoall", gpus=8), 4 << 30)
    assert 365 < row.busbw_GBps < 372


def test_a_ranks_sends_share_its_channels():
    """Sends in one step share the rank's p2pnChannels blocks: 4 network sends of 8 parts each on 8
    channels get 2 channels' worth (28 GB/s) each; a lone one keeps its parts (2 x 14 GB/s); an
    NVLink send is not capped in write mode, and is (2 parts x 14 GB/s) in read mode."""
    from netsim.collectives.schedule import Phase, Schedule, Step
    s = p2p.P2PSetup(16, 2, channels=8, per_peer=8, min_parts=2, chunk=512 << 10)
    src = np.array([0, 0, 0, 0, 1, 2])
    dst = np.array([8, 9, 10, 11, 12, 3])
    nbytes = np.array([1 << 30] * 4 + [512 << 10] * 2, dtype=np.float64)  # 512 KiB: 2 parts of 256 KiB
    sched = Schedule("alltoall", "direct", 16, 0.0, (Phase(Step(src, dst, nbytes, wire=1.0)),))
    capped = p2p.channel_caps(sched, np.arange(16), 8, s).phases[0].step
    assert (np.asarray(capped.rate_cap) / 1e9).tolist() == [28.0] * 5 + [float("inf")]
    assert (s.parts(1 << 30), s.parts(512 << 10)) == (8, 2)
    read = p2p.channel_caps(sched, np.arange(16), 8, replace(s, read=True)).phases[0].step
    assert (np.asarray(read.rate_cap) / 1e9).tolist() == [28.0] * 6


def test_base_channels_follow_nccls_p2p_schedule():
    """init.cc:889-953 and channel.h:21-33: one node, the round is the peer offset and its base
    channel reverseBits(offset, log2 32); across nodes, the 8 local peers of a group share one
    work batch (base 0) and the other node's group is round 8, base 1 -> reverseBits = 8 of 16."""
    one = p2p.P2PSetup(8, 1, channels=32, per_peer=32, min_parts=4, chunk=512 << 10)
    node, local = np.zeros(8, dtype=np.int64), np.arange(8)
    assert p2p.base_channels(np.zeros(7, dtype=np.int64), np.arange(1, 8), node, local, one).tolist() == \
        [16, 8, 24, 4, 20, 12, 28]
    two = p2p.P2PSetup(16, 2, channels=16, per_peer=4, min_parts=1, chunk=128 << 10)
    node, local = np.repeat([0, 1], 8), np.tile(np.arange(8), 2)
    src, dst = np.zeros(15, dtype=np.int64), np.arange(1, 16)
    assert p2p.base_channels(src, dst, node, local, two).tolist() == [0] * 7 + [8] * 8


def test_network_sends_split_over_their_channels_and_nics():
    """2 x 8 A100 with 2 x 100G NICs per GPU: a network peer gets ceil(24 / 14) = 2 channels
    (paths.cc:950), so a 256 MiB alltoall's cross-node sends become 2 transfers each, keyed by
    consecutive channels: each GPU's two ports carry equal bytes."""
    from netsim.topology.hostio import NicLayout
    from netsim.topology.spec import build_topology, parse_spec
    so = {"nic_bw": "100Gbps", "pcie_bw": "gen4x16", "rail_optimized": True, "nics_per_gpu": 2,
          "tiers": [{"name": "leaf", "down": 2, "up": 2}, {"name": "spine", "down": 32}]}
    t = build_topology(parse_spec({"node": {"preset": "hgx-a100"}, "nodes": 2, "scale_out": so}, "t.yaml"), "t.yaml")
    st = [ph.step for ph in plan(t, np.arange(16), "alltoall", 256 << 20).schedule.phases if ph.step.n_transfers][0]
    net = st.src // 8 != st.dst // 8
    assert net.sum() == 16 * 8 * 2 and (~net).sum() == 16 * 7  # 2 parts per network send, NVLink unsplit
    port = NicLayout(8, nics_per_gpu=2, gpus_per_switch=1).local_nic(st.src[net] % 8, st.key[net]) % 2
    per_port = np.bincount(st.src[net] * 2 + port, weights=st.nbytes[net], minlength=32).reshape(16, 2)
    assert np.allclose(per_port[:, 0], per_port[:, 1])


@pytest.mark.parametrize("model", ["flow", "analytical"])
def test_two_nics_per_gpu_double_direct_alltoall(model):
    """Both models: with sends keyed by their channels, 2 x 100G per GPU run a 2-node alltoall
    2x as fast as one (peer offsets as keys gave 1.6x)."""
    from netsim.perftests import bench
    from netsim.topology.spec import build_topology, parse_spec

    def topo(k):
        so = {"nic_bw": "100Gbps", "pcie_bw": "gen4x16", "rail_optimized": True, "nics_per_gpu": k,
              "tiers": [{"name": "leaf", "down": 2, "up": 2}, {"name": "spine", "down": 16 * k}]}
        return build_topology(parse_spec({"node": {"preset": "hgx-a100"}, "nodes": 2, "scale_out": so}, "t.yaml"),
                              "t.yaml")
    one, two = (bench(topo(k), "alltoall", [256 << 20], model=model)[0].time_us for k in (1, 2))
    assert one / two == pytest.approx(2.0, rel=5e-3)


def test_nccl_2_19_cap_would_give_224_on_8_a100(monkeypatch):
    """NCCL 2.18/2.19 capped one send at 16 channels on one node (``nChannelsMax * nRanks <=
    4 * p2pnChannels``, enqueue.cc v2.19.3-1:627, v2.18.5-1:636; gone in 2.20).  With that cap the
    8xA100 sendrecv rows from 512 MiB would be 16 x 14 = 224 GB/s, not the links' 240 (docs/validation.md P)."""
    t = load_topology(A100)
    setup = p2p.P2PSetup.from_info(nccl.CommInfo.from_topology(t, np.arange(8)))
    assert (setup.channels, setup.per_peer, setup.parts(512 << 20)) == (32, 32, 32)
    capped = replace(setup, per_peer=16)  # 32 x 8 > 4 x 32 halves nChannelsMax once
    assert capped.parts(512 << 20) == capped.parts(1 << 30) == 16
    orig = p2p.P2PSetup.from_info
    monkeypatch.setattr(p2p.P2PSetup, "from_info", classmethod(lambda cls, info: replace(orig(info), per_peer=16)))
    for size in (512 << 20, 1 << 30):
        row, _ = run_one(t, BenchConfig("sendrecv", gpus=8), size)
        assert 222 < row.busbw_GBps < 224.1


def test_gh200_slingshot_ring_gets_two_channels_per_network_peer():
    """nccl#1272's shape (4 GH200 per node, one 200G NIC per GPU): NCCL 2.30.7 gives a network peer
    max(1 NIC, ceil(24 / 14)) = 2 channels and keeps them while 2 x ceil(n / 8) <= 8 p2p channels, on
    4 and on 8 nodes (paths.cc:943-1001), as 2.19.4 did (NCHANNELS_PER_NET_PEER 2); the NIC binds."""
    from netsim.topology.overrides import load_topology_set
    for nodes in (4, 8):
        t = load_topology_set(SU, [f"nodes={nodes}", "node.gpus=4", "scale_out.nic_bw=200Gbps"])
        s = p2p.P2PSetup.from_info(nccl.CommInfo.from_topology(t, np.arange(4 * nodes)))
        assert (s.channels, s.per_peer, s.parts(512 << 20)) == (8, 2, 2)
        row, _ = run_one(t, BenchConfig("sendrecv", gpus=4 * nodes), 512 << 20)
        assert 23.9 < row.busbw_GBps < 24.0  # 200G at the NIC efficiency netsim gives NDR (48 of 50)

