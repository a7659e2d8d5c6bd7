"""docs/collectives.md: every prose number, and how the code bears it out.

NCCL's own figures (constants at the cited file and line) are citations; netsim's figures are the
tables of ``netsim.collectives.nccl``/``p2p`` or what a plan or a run gives, recomputed here or
asserted by the tests the page names."""

from __future__ import annotations

import re

import numpy as np

from doc_claims import REPO, claims_for, topo

C = claims_for("collectives.md")
NCCL_SOURCE = "NCCL's figures at the cited file and line (netsim's code cites the same)"


def _nccl():
    from netsim.collectives import nccl

    return nccl


def _p2p():
    from netsim.collectives import p2p

    return p2p


def _wire() -> list[float]:
    w = _nccl().WIRE
    assert w["LL128"] == 128 / 120
    return [w["LL"], 128]


def _small_ll() -> list[float]:
    from netsim.perftests import BenchConfig, run_one

    nccl = _nccl()
    t = topo("dgx-h100")
    info = nccl.CommInfo.from_topology(t, np.arange(8))
    c = next(x for x in nccl.candidates("all_reduce", 32 << 10, info) if x.label == "ring/LL")
    row, _ = run_one(t, BenchConfig("all_reduce", gpus=8, algo="ring", protocol="LL"), 32 << 10)
    return [32, t.n_gpus, c.channel_cap_GBps, row.time_us] if c.channels == 1 else []


def _ll_test_cases() -> list[int]:
    src = (REPO / "tests/test_nccl_constants.py").read_text()
    sizes = re.search(r'@pytest\.mark\.parametrize\("size", \[(\d+) << 10, (\d+) << 10, (\d+) << 10\]\)\n'
                      r"def test_small_ll_ring_all_reduce_runs_in_nccls_own_model_time", src).groups()
    assert "    n = 8\n" in src
    return [8, 8, *map(int, sizes)]


def _rack_heads() -> list[int]:
    """One rack (NCCL node) of the multi-rack GB200 NVL72 file: its GPUs, its NICs, its NVLS heads."""
    f = topo("gb200-nvl72-20rack").facts
    gpus, nics = f.gpus_per_node, int(f.gpus_per_node * f.nics_per_gpu)
    heads = _nccl().nvls_heads(gpus, nics)
    return [gpus, nics, heads, heads, nics]


def _nvls_channels() -> list[int]:
    ch = _nccl().NVLS_CHANNELS
    assert ch["hopper"] == (16, 16)
    return [16, *ch["blackwell"]]


def _rack_tuning() -> list[int]:
    channels, chunk = _nccl().nvls_tuning("blackwell", 20, 72, 48.0, False)
    return [20, channels, chunk >> 10]


def _rack_pieces() -> list[int]:
    import inspect

    nccl = _nccl()
    limit = inspect.signature(nccl.nvls_tree_pieces).parameters["limit"].default
    t = topo("gb200-nvl72-20rack")
    info = nccl.CommInfo.from_topology(t, np.arange(t.n_gpus))
    return [limit, 20, 1, nccl.nvls_tree_pieces(float(1 << 30), info), 8, nccl.nvls_tree_pieces(float(8 << 30), info)]


def _old_cap_fill() -> list[float]:
    """The fill a 64-piece pipeline costs: 8 GiB on 32 x 8 H100 (16 channels, 8 heads, 64 KiB chunks: 1,024 of
    NCCL's loops), a piece of 2 + 2 x log2(32) + 2 steps: 1 - 64 / (64 + 14 - 1)."""
    nccl = _nccl()
    t = topo("h100-superpod-1su")
    info = nccl.CommInfo.from_topology(t, np.arange(t.n_gpus))
    loops = nccl.nvls_tree_pieces(float(8 << 30), info, limit=1 << 20)
    depth = 2 + 2 * 5 + 2
    assert nccl.nvls_tree_pieces(float(8 << 30), info) == 64
    return [round(100 * (1 - 64 / (64 + depth - 1))), 8, 32, loops]


def _one_node_loops() -> list[int]:
    from netsim.topology.overrides import load_topology_set

    nccl = _nccl()
    t = load_topology_set(REPO / "topologies/gb300-nvl72-2x400g.yaml", ["nodes=1", "node.gpus=64"])
    info = nccl.CommInfo.from_topology(t, np.arange(64))
    cuts = [nccl.nvls_chunk(m * 768.0 * c - 1, 24, 32, c) >> 10 for m, c in ((64, 128 << 10), (8, 64 << 10),
                                                                            (2, 32 << 10))]
    return [64, nccl.NVLS_CHUNK >> 10, *cuts, 64, 8, 2, info.ppn, info.nvls_channels, 1,
            nccl.nvls_pieces(float(1 << 30), info), 64, nccl.CHUNK_BYTES["Simple"] >> 10]


def _per_head_caps() -> list[float]:
    c = _nccl().PER_CH_NVLS_TREE
    assert c["hopper"][1] == 57.7
    return [321, 2, c["hopper"][2], 3, *c["blackwell"][1:]]  # the page's numbers the checker reads


def _gb_head_bound() -> list[float]:
    nccl = _nccl()
    t = topo("gb200-nvl72-8rack")
    info = nccl.CommInfo.from_topology(t, np.arange(144))
    intra = info.bw_intra * nccl.NVLS_EFFICIENCY["blackwell"] * 2  # the NVLS stage's all-reduce rate
    assert info.nvls_heads * nccl.PER_CH_NVLS_TREE["blackwell"][1] > 2 * intra
    return [info.nvls_heads, info.nvls_heads, nccl.PER_CH_NVLS_TREE["blackwell"][1]]


def _per_peer() -> list[int]:
    p2p = _p2p()
    big = p2p.P2PSetup.for_comm(nranks=16, nnodes=2, ring_channels=16, nvl_links=18, nvl_link_GBps=20.6, nic_GBps=48)
    small = p2p.P2PSetup.for_comm(nranks=16, nnodes=2, ring_channels=16, nvl_links=12, nvl_link_GBps=20.0,
                                  nic_GBps=24)
    return [p2p.P2P_PER_CHANNEL_NET_GBPS, big.per_peer, small.per_peer]


def _chunks() -> list[int]:
    return [_p2p().NET_CHUNK >> 10, _p2p().NVL_CHUNK >> 10]


def _a100_sends() -> list[float]:
    from netsim.perftests.collective import BenchConfig, build_plan, validated

    t = topo("dgx-a100")
    cfg = validated(BenchConfig("sendrecv", gpus=8), t)
    ch = [build_plan(t, cfg, float(n)).channels for n in (128 << 20, 256 << 20, 1 << 30)]
    rate = _p2p().P2P_PER_CHANNEL_NET_GBPS
    mine = np.flatnonzero((t.link_kind == 0) & (t.link_src == t.gpus[0]))
    links = int(t.link_width[mine].sum())
    return [8, 128, ch[0], ch[0] * rate, 256, ch[1], 1, ch[2], ch[2] * rate, t.link_bw[mine].sum() / 1e9, links]


def _ndr_anchor() -> list[float]:
    from netsim.perftests import BenchConfig, run_one

    row, _ = run_one(topo("h100-superpod-1su"), BenchConfig("sendrecv", gpus=16), 1 << 30)
    return [row.busbw_GBps]


def _message_rate() -> list[float]:
    from netsim.perftests.moe import MoEConfig, run_moe, validated

    t = topo("dgx-h100")
    s = run_moe(t, validated(MoEConfig("moe_dispatch", tokens=8, gpus=8, model="analytical"), t)).summary
    nic = topo("h100-superpod-1su").facts.nic_port_Bps * 8 / 1e9
    return [_p2p().NET_CHUNK >> 11, _p2p().NET_CHUNK >> 10, s["token_bytes"] / 1000, nic]


def _write_rule() -> list[float]:
    t = topo("dgx-h100")
    mine = np.flatnonzero((t.link_kind == 0) & (t.link_src == t.gpus[0]))
    per_link = float(t.link_bw[mine].sum() / 1e9 / t.link_width[mine].sum())
    return [per_link / 2, 2, 4, 4 * per_link / 2]


def _a2a_steps() -> list[int]:
    from netsim.collectives.plan import plan

    su = topo("h100-superpod-1su")
    one = [ph for ph in plan(su, np.arange(64), "alltoall", 1 << 20).schedule.phases if ph.step.n_transfers]
    many = [ph.step.n_transfers // 256 for ph in plan(su, np.arange(256), "alltoall", 1 << 20).schedule.phases
            if ph.step.n_transfers]
    return [one[0].step.n_transfers // 64, 64, *many, 256]


CLAIMS = [
    C("(LL ×2, LL128 ×128/120)", _wire),
    C("a 32 KiB all-reduce on one 8×H100 node runs on one channel at the full 141 GB/s and takes NCCL's own modelled "
      "15.41 µs", _small_ll),
    C("on 8×H100 and 8×A100 at 8, 32 and 128 KiB (both network models)", _ll_test_cases),
    C("at most `NCCL_MAX_NVLS_ARITY` = 32", lambda: [_nccl().MAX_NVLS_ARITY]),
    C("(search.cc:754-771, 1127;", why="source lines"),
    C("has 72 GPUs and 72 NICs but 32 heads: 32 NICs carry its cross-rack traffic, not 72", _rack_heads),
    C("`nvlsChannels` is 16 on Hopper and 24/32 on Blackwell", lambda: _nvls_channels()[:2]),
    C("20 GB200 racks with 400G NICs on Grace run 24 channels and 128 KiB chunks", _rack_tuning),
    C("pieces (at most 64), each going NVLS up/down, `2·log2` tree levels and NVLS up/down, store-and-forward. On 20 "
      "racks 1 GiB is 11 pieces and 8 GiB is 64 pieces", _rack_pieces),
    C("and 128 pieces instead of 64 doubled a 1 GiB run's CPU time on 256 GPUs of `llama3-24k`",
      why="measured in issue 33 item 2's session: 19.2 and 40.8 CPU-s (netsim.bench, flow model, ECMP), quoted"),
    C("up to 17 % at 8 GiB on 32 H100 nodes, where NCCL runs 1,024 loops", _old_cap_fill),
    C(" pieces, at most 64 (`nvls_pieces`). The NVLS graph has `min(32, GPUs)` heads on one node\n  "
      "(search.cc:1126-1137). The chunk is `nvlsChunkSize`, 128 KiB, and 64, 32 or 16 KiB below 64, 8 or 2 times\n  "
      "`channels · heads` of it (enqueue.cc:2258-2275, `nvls_chunk`). One GB300 rack (64 GPUs, 24 channels)\n  runs "
      "1 GiB in 22 pieces through the four NVLS stages, not 64. Reduce-scatter and all-gather keep one\n  512 KiB "
      "chunk per channel per piece", _one_node_loops),
    C("NCCL caps the NVLS tree's bus bandwidth per head at `perChMaxNVLSTreeBw` (tuning.cc:276, 321-324; Hopper 57.7 "
      "GB/s on 2 nodes, 45.5 from 3; Blackwell 96 and 80", _per_head_caps),
    C("On 2 × 8 H100 that bounds the all-reduce at 8 × 57.7 = 461.6 GB/s busbw",
      lambda: [2, 8, 8, 57.7, 8 * _nccl().PER_CH_NVLS_TREE["hopper"][1]],
      by_test="tests/test_nccl_scale.py::test_two_h100_nodes_run_nvls_tree_at_nccls_per_head_bound"),
    C("(the run reached about 508 without it; nccl-tests#309 measured 469 at 16 GiB)",
      why="508: the run before the cap (docs/validation.md's earlier table, 508.7); 469: the source's figure"),
    C("on GB200 racks (32 heads) the bound, 32 × 96, is far above the NVLS stage", _gb_head_bound),
    C("The net hop's `latencyInter` term is 0 with NCCL's IB plugin", why=NCCL_SOURCE),
    C("14 GB/s", lambda: [_p2p().P2P_PER_CHANNEL_NET_GBPS]),
    C("(4 for 400G, 2 for 200G)", lambda: _per_peer()[1:]),
    C("(chunk/2 and one chunk across nodes; chunk/8 and 32 chunks on one node)", why=NCCL_SOURCE),
    C("The chunk is `NCCL_P2P_NET_CHUNKSIZE` 128 KiB across nodes, `NCCL_P2P_NVL_CHUNKSIZE` 512 KiB", _chunks),
    C("A 64 KiB `sendrecv` is Simple.", by_test="tests/test_nccl_p2p.py::test_sendrecv_protocol_is_per_send_not_per_rank"),
    C("a channel runs 8 sends at once", why=NCCL_SOURCE + " (enqueue.cc:1051-1055, device.h:391)"),
    C("(all 63 at 64 GPUs; 128 then 127 at 256 GPUs)", _a2a_steps),
    C("(640 threads, `enqueue.cc:1135`, `device.h:93`), its warps split among the up to 8 operations of its batch "
      "and, within one, between the send (10 warps) and the receive (9)", why=NCCL_SOURCE),
    C("`min(parts, p2pnChannels / sends of its rank in the step) × 14` GB/s: 4 network sends of 8 parts on 8 "
      "channels get 28 GB/s each", by_test="tests/test_nccl_p2p.py::test_a_ranks_sends_share_its_channels"),
    C("(8×H100 `sendrecv` at 128 MiB above 350 GB/s, `alltoall` at 4 GiB 365–372 GB/s",
      by_test="tests/test_nccl_p2p.py::test_hopper_nvlink_sends_are_link_bound"),
    C("A 256 KiB `sendrecv` across two NDR nodes runs on 2 channels, 28 GB/s, and takes `8.4 + 14 + 262144 / 28000` "
      "µs; at 1 GiB 4 channels (56 GB/s) leave the NIC (48) as the bound",
      by_test="tests/test_nccl_p2p.py::test_network_sends_are_capped_by_their_channels"),
    C("so the NDR anchor stays 48.0 GB/s", _ndr_anchor),
    C("On one 8×A100 node a 128 MiB `sendrecv` takes 8 channels, 112 GB/s, and `8.4 + 3.4 + S / (8 × 14000)` µs "
      "(256 MiB: 16 channels); at 1 GiB 32 channels (448 GB/s) leave the 240 GB/s of 12 NVLinks", _a100_sends),
    C("the 8×A100 128 MiB `sendrecv` row", lambda: [8, 128]),
    C("64–128 KiB chunks, or DeepEP's 7 KB tokens, at 400 Gb/s", _message_rate),
    C("would imply half a link per channel, 10.3 GB/s on H100, but then a 2-node NDR `sendrecv` (4 channels to an "
      "NVLink peer) would run at 41 GB/s", _write_rule),
    C("against the 46–49 measured", why="nccl-tests' measurements (#290, #267), quoted"),
    C("measured 8×A100 `sendrecv` levels off from 256 MiB", lambda: [8, 256],
      why="the rows of docs/validation.md (8 GPUs; their sizes)"),
    C("A100 128 MiB `sendrecv` row is a calibration anchor", lambda: [128]),
]
