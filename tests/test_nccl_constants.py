"""NCCL's constants, each pinned to NCCL 2.30.7 (tag v2.30.7-1) with the file and line it comes from."""

import math

import numpy as np
import pytest

from netsim import ncclfacts
from netsim.collectives import nccl
from netsim.collectives.plan import plan
from netsim.errors import InputError
from netsim.topology.spec import build_topology, load_topology, parse_spec

H100 = "topologies/dgx-h100.yaml"
SU = "topologies/h100-superpod-1su.yaml"


def _info(**kw):
    base = dict(nranks=16, nnodes=2, ppn=8, arch="hopper", bw_intra=370.8, bw_inter=48.0, nvls=False,
                channels=16, local_size=8)
    return nccl.CommInfo(**{**base, **kw})


def test_per_channel_tables_are_nccls():
    assert ncclfacts.NCCL_VERSION == "2.30.7"
    assert nccl._PER_CH_TREE["volta"] == (26.5, 18.5, 10.0)  # tuning.cc:200, not Ampere's row
    assert nccl._PER_CH_TREE["ampere"] == (24, 23.6, 17.8)  # tuning.cc:201
    assert nccl._PER_CH_TREE_LL128["hopper"] == (36.7, 36.7, 29.0)  # tuning.cc:195
    assert nccl._PER_CH_TREE_LL128["blackwell"] == (55.6, 31.67, 20.0)  # tuning.cc:196
    assert nccl.PER_CH_NVLS_TREE["hopper"][1:] == (57.7, 45.5)  # tuning.cc:209
    assert nccl.NVLS_EFFICIENCY == {"volta": 0.0, "ampere": 0.0, "hopper": .85, "blackwell": .74}  # tuning.cc:139-144


def test_channel_caps_follow_nccls_model():
    cap = nccl._channel_cap
    assert cap("ring", "Simple", "hopper", 0, 24) == math.inf  # NCCL caps ring/Simple nowhere
    assert cap("nvls", "Simple", "hopper", 0, 16) == math.inf
    assert cap("ring", "LL128", "hopper", 2, 16) == 36.7  # perChMaxRingLL128Bw, tuning.cc:329
    assert cap("tree", "Simple", "hopper", 2, 16) == 36.0  # perChMaxTreeBw, tuning.cc:331
    assert cap("tree", "LL128", "hopper", 2, 16) == 29.0  # perChMaxTreeLL128Bw, tuning.cc:335
    assert cap("tree", "Simple", "volta", 1, 16) == 18.5
    c = {x.label: x for x in nccl.candidates("all_reduce", 1 << 30, _info(nnodes=4, nranks=32))}
    assert c["ring/Simple"].channel_cap_GBps == math.inf and c["tree/LL128"].channel_cap_GBps == 29.0


def test_tree_ll128_model_uses_the_tree_ll128_table():
    info = _info(nnodes=4, nranks=32)
    tree = {x.protocol: x for x in nccl.candidates("all_reduce", 1 << 30, info) if x.algorithm == "tree"}
    bus = min(min(48.0 * 8, 370.8) * .92, 16 * 36.0)  # tuning.cc:331
    assert tree["LL128"].bus_GBps == pytest.approx(min(bus * 120 / 128, 16 * 29.0) * .85)  # :335-336


def test_ll_max_bw_row_follows_the_cpu_across_nodes():
    one = _info(nnodes=1, nranks=8)
    assert nccl._ll_max_bw(one, 0) == 141.0  # Hopper row on one node (tuning.cc:181)
    assert nccl._ll_max_bw(_info(cpu="intel"), 1) == 39.0  # Intel row 0 (tuning.cc:179, 269-271)
    assert nccl._ll_max_bw(_info(cpu="amd"), 1) == 22.5  # AMD row 1 (tuning.cc:180)
    assert nccl._ll_max_bw(_info(cpu="mixed", nnodes=4, nranks=32), 2) == 19.0
    assert nccl._ll_max_bw(_info(cpu="arm"), 1) == 39.0  # anything not AMD/mixed: row 0
    ring_ll = [x for x in nccl.candidates("all_reduce", 1 << 20, _info(cpu="amd")) if x.label == "ring/LL"][0]
    assert ring_ll.bus_GBps == 22.5


def test_net_overhead_follows_the_cpu():
    def lat(cpu):
        return [x for x in nccl.candidates("all_gather", 1 << 10, _info(cpu=cpu)) if x.label == "ring/LL"][0].latency_us
    # 2 nodes, 16 ranks: 15 steps, 1 inter-node (NET ring LL 2.7 us); the other 14 at max(NVLink .6, overhead)
    assert lat("intel") == pytest.approx(6.6 + 14 * 1.0 + 2.7)  # getNetOverhead: Intel 1.0 (tuning.cc:230)
    assert lat("amd") == pytest.approx(6.6 + 14 * 2.0 + 2.7)  # AMD 2.0 (tuning.cc:231)


def test_default_cpu_and_topology_field():
    assert nccl.CommInfo.from_topology(load_topology(H100), np.arange(8)).cpu == "intel"  # DGX H100: Xeon
    assert nccl.CommInfo.from_topology(load_topology("topologies/dgx-a100.yaml"), np.arange(8)).cpu == "amd"
    topo = build_topology(parse_spec({"node": {"preset": "hgx-h100", "cpu": "amd"}}))
    assert nccl.CommInfo.from_topology(topo, np.arange(8)).cpu == "amd"
    with pytest.raises(InputError, match="node.cpu"):
        parse_spec({"node": {"preset": "hgx-h100", "cpu": "sparc"}})


def test_tree_correction_factor():
    tc = nccl._tree_correction
    assert tc(32, 0) == 1.0  # nBytes >> 6 == 0: log2i(0) = -1, no correction
    assert tc(64, 2) == .9  # Simple, 64 B (tuning.cc:626)
    assert tc(1 << 20, 2) == .5  # log2(2^14) = 14
    assert tc(1 << 20, 0) == .5 and tc(1 << 20, 1) == .6 and tc(1 << 18, 0) == .4  # LL index 12
    assert tc(1 << 29, 2) == 1.0  # logSize 23: outside tree all-reduce's range (< 23, tuning.cc:640)
    assert tc(1 << 29, 2, limit=24) == .9  # NVLS tree on Blackwell/x86 uses index 23 too (:644)
    info = _info(nnodes=4, nranks=32)
    for x in nccl.candidates("all_reduce", 1 << 20, info):
        if x.algorithm == "tree":
            alg_bw = x.bus_GBps * .5
            p = nccl.PROTOCOLS.index(x.protocol)
            assert x.time_us == pytest.approx(x.latency_us + (1 << 20) / (1000 * alg_bw * tc(1 << 20, p)))


def test_ring_plateau_factor_only_above_64_bytes_per_channel_and_rank():
    def lat(nbytes, arch="hopper"):
        c = [x for x in nccl.candidates("all_reduce", nbytes, _info(arch=arch)) if x.label == "ring/Simple"][0]
        return c.latency_us
    plain = 8.4 + 28 * 3.4 + 2 * 14.0  # Simple: intra max(3.4, 3 x 1.0 net overhead); 2 NET steps
    assert lat(16 * 16 * 63) == pytest.approx(plain)  # nBytes/(nCh*nRanks) < 64: unchanged (tuning.cc:647-648)
    assert lat(1 << 20) == pytest.approx(plain * 1.4)  # SM80+: x1.4 (tuning.cc:649)
    assert lat(1 << 20, "volta") == pytest.approx(plain * 1.9)  # before SM80: x1.9


def test_ring_channel_count_follows_nccls_search():
    rc = nccl.ring_channels
    assert rc("hopper", 1, 8, 370.8, 0) == 24  # 6 x 60 GB/s, dup -> 12 (search.cc:1036), x2 (connect.cc:460)
    assert rc("ampere", 1, 8, 240.0, 0) == 24  # 6 x 40, dup, x2
    assert rc("blackwell", 1, 8, 721.8, 0) == 32  # 8 x 90, dup, x2
    assert rc("hopper", 8, 8, 370.8, 50.0) == 16  # one 48 GB/s channel per NDR NIC, no dup (SM90, < 50), x2
    assert rc("hopper", 8, 4, 370.8, 50.0) == 16  # 4 -> 8, then x2 below 16 on SM90 (connect.cc:481-483)
    assert rc("ampere", 8, 8, 240.0, 25.0) == 16  # HDR: 24 GB/s channels, no dup, x2
    assert nccl.CommInfo.from_topology(load_topology(H100), np.arange(8)).channels == 24
    assert nccl.CommInfo.from_topology(load_topology(SU), np.arange(64)).channels == 16


def test_nvls_channels_and_enable():
    h = nccl.CommInfo.from_topology(load_topology(H100), np.arange(8))
    assert h.nvls_channels == 16  # NVLS_NCHANNELS_SM90 (nvls.cc:155)
    assert nccl.choose("all_reduce", 1 << 30, h).channels == 16
    gb = nccl.CommInfo.from_topology(load_topology("topologies/gb200-nvl72.yaml"), np.arange(72))
    assert gb.nvls_channels == 24  # NVLS_NCHANNELS_SM100_NVL on one NVLink domain (nvls.cc:157, 211)
    a100 = build_topology(parse_spec({"node": {"preset": "hgx-a100", "nvls": True}}))
    assert not nccl.CommInfo.from_topology(a100, np.arange(8)).nvls  # NVLS needs SM90 (search.cc:1124)
    h100 = load_topology(H100)
    assert nccl.CommInfo.from_topology(h100, np.arange(2)).nvls  # any 2+ GPUs (nvls.cc:262), not only > 4
    assert nccl.choose("all_reduce", 1 << 30, nccl.CommInfo.from_topology(h100, np.arange(4))).algorithm == "nvls"


def test_nvls_efficiency_is_a_rate_cap_not_extra_bytes():
    topo = load_topology(H100)
    p = plan(topo, np.arange(8), "all_reduce", 1 << 30, "nvls")
    steps = [ph.step for ph in p.schedule.phases if ph.step.n_transfers]
    assert all(st.wire == 1.0 for st in steps)  # the links carry (and count) the real bytes
    assert all(st.rate_cap == pytest.approx(.85 * 18 * 20.6e9) for st in steps)


def test_auto_never_picks_nvls_tree_for_ranks_that_are_not_whole_nodes():
    su = load_topology(SU)
    # 7 GPUs on each of 8 nodes (with 2 of 8, NVLS-tree's 2 heads cap it at 2 x perChMaxNVLSTreeBw,
    # tuning.cc:320-322, below the ring: NCCL would not pick it)
    ranks = np.array([g * 8 + k for g in range(8) for k in range(7)])
    info = nccl.CommInfo.from_topology(su, ranks)
    assert info.nvls and nccl.choose("all_reduce", 1 << 30, info).algorithm == "nvls_tree"  # NCCL's pick
    p = plan(su, ranks, "all_reduce", 1 << 30)  # but the schedule needs whole nodes: the next best runs
    assert p.algorithm in ("ring", "tree")


@pytest.mark.parametrize("path,ll_max_bw", [("topologies/dgx-h100.yaml", 141.0), ("topologies/dgx-a100.yaml", 87.7)])
@pytest.mark.parametrize("size", [8 << 10, 32 << 10, 128 << 10])
def test_small_ll_ring_all_reduce_runs_in_nccls_own_model_time(path, ll_max_bw, size):
    """NCCL's ring/LL time on one node, written out from tuning.cc (not from netsim's tables):
    baseLat 6.6 + 2(n-1) x hwLat NVLink 0.6 us (tuning.cc:149-162, 403-412) + nBytes / (1000 x
    algBw), algBw = llMaxBw x n / (2(n-1)) (tuning.cc:181 or 180, 327, 376-382).  enqueue.cc keeps
    fewer channels at these sizes; the ones that run share llMaxBw, so the run takes that time."""
    from netsim.perftests import BenchConfig, run_one
    n = 8
    expected = 6.6 + 2 * (n - 1) * 0.6 + size / (1000 * ll_max_bw * n / (2 * (n - 1)))
    topo = load_topology(path)
    for model in ("flow", "analytical"):
        row, stats = run_one(topo, BenchConfig("all_reduce", gpus=n, algo="ring", protocol="LL", model=model), size)
        assert row.time_us == pytest.approx(expected, rel=1e-6)
        assert stats["nccl_predicted_us"] == pytest.approx(expected, rel=1e-9)


def test_ll_channels_share_ll_max_bw_whatever_runs():
    assert nccl._channel_cap("ring", "LL", "hopper", 0, 1) == 141.0  # one channel: all of llMaxBw
    assert nccl._channel_cap("ring", "LL", "hopper", 0, 4) == pytest.approx(141.0 / 4)
    info = _info(nnodes=1, nranks=8)
    c = [x for x in nccl.candidates("all_reduce", 32 << 10, info) if x.label == "ring/LL"][0]
    assert c.channels == 1 and c.channel_cap_GBps == 141.0  # 32 KiB < 2 x 512 x 8 x 8: enqueue.cc keeps 1
    assert nccl.channel_cap(c, info, 24) == pytest.approx(141.0 / 24)  # --channels 24: they share it


def test_scale_out_bandwidth_is_the_narrowest_link_of_the_path():
    # NCCL times a path at its narrowest link (paths.cc): a 400G NIC behind a PCIe Gen4 x16 link
    # (31.5 GB/s) is a 31.5 GB/s path; behind Gen5 x16 (63 GB/s) the NIC's 50 GB/s decides
    from conftest import TOPOLOGIES
    from netsim.topology.overrides import load_with_overrides
    path = str(TOPOLOGIES / "h100-superpod-1su.yaml")
    ranks = np.arange(16)
    gen5 = nccl.CommInfo.from_topology(load_topology(path), ranks)
    gen4 = nccl.CommInfo.from_topology(load_with_overrides(path, {"scale_out.pcie_bw": "gen4x16"}), ranks)
    eff = load_topology(path).facts.link_efficiency.get("ib", 1.0)
    assert gen5.bw_inter == pytest.approx(50.0 * eff)
    assert gen4.bw_inter == pytest.approx(31.5077 * eff, rel=1e-4)
