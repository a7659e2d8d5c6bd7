"""docs/topology.md: every prose number, and how the code bears it out (defaults from the spec's
dataclasses, shipped files' facts and bills of materials, the tests' own fabrics)."""

from __future__ import annotations

import dataclasses
import re
from functools import lru_cache

import numpy as np

from doc_claims import REPO, claims_for, topo

C = claims_for("topology.md")
QUOTE = "a figure of the cited source (datasheet, paper, measurement), quoted"


def _default(cls_name: str, field: str):
    from netsim.topology import spec

    cls = getattr(spec, cls_name)
    return next(f.default for f in dataclasses.fields(cls) if f.name == field)


@lru_cache(maxsize=None)
def _t(path: str, *sets: str):
    from netsim.topology.overrides import load_topology_set

    return load_topology_set(REPO / "topologies" / path, list(sets))


def _nvlink(name: str) -> tuple[float, float, float]:
    t = topo(name)
    i = int(np.flatnonzero((t.link_src == t.gpus[0]) & (t.link_kind == 0))[0])
    got, line = t.link_bw[i] / t.link_width[i] / 1e9, t.facts.scaleup_Bps_per_gpu / t.link_width[i] / 1e9
    return got / line, got, line


def _efficiencies() -> list[float]:
    from netsim.topology.efficiency import DEFAULT_EFFICIENCY

    a, h, b = _nvlink("dgx-a100"), _nvlink("dgx-h100"), _nvlink("gb200-nvl72")
    from netsim.topology.efficiency import nvlink_efficiency

    assert nvlink_efficiency("V100") == a[0]
    nic = DEFAULT_EFFICIENCY["ib"] * 50
    return [a[0], a[1], a[2], h[0], h[1], h[2], b[0], b[1], b[2], DEFAULT_EFFICIENCY["ib"], nic]


def _roce_pcie() -> list[float]:
    from netsim.topology.efficiency import DEFAULT_EFFICIENCY
    from netsim.topology.hostio import pcie_Bps

    return [DEFAULT_EFFICIENCY["ethernet"], DEFAULT_EFFICIENCY["pcie"], pcie_Bps(5) / 1e9]


def _dims_efficiency() -> list[float]:
    from netsim.topology.spec import build_topology, parse_spec

    t = build_topology(parse_spec({"dims": [{"kind": "Ring", "npus": 4, "bw": "50GB/s", "latency": "1us"}]}, "d.yaml"),
                       "d.yaml")
    ratio = np.unique(np.round(t.link_bw / t.link_width / 50e9, 12))
    assert ratio.size == 1, ratio
    return [float(ratio[0])]


def _cpu_row() -> list[float]:
    from netsim.collectives import nccl

    assert nccl._NET_OVERHEAD_US["amd"] == 2.0 and nccl._NET_OVERHEAD_US["intel"] == 1.0
    return [0, 1, nccl._NET_OVERHEAD_US["amd"], nccl._NET_OVERHEAD_US["intel"]]


def _superpod_4su() -> list[int]:
    f = _t("h100-superpod-1024.yaml").facts
    leaf, spine = f.switch_tiers
    return [f.nodes // 32, leaf.count, leaf.uplinks, spine.radix, spine.count, f.xgft[1].p]


def _pcie() -> list[float]:
    from netsim.topology.hostio import PCIE_ENCODING, PCIE_GTPS, pcie_Bps

    assert PCIE_ENCODING[6] == 242 / 256
    return [PCIE_GTPS[3] / 1e9, PCIE_GTPS[6] / 1e9, 242, 256, pcie_Bps(4) / 1e9, pcie_Bps(5) / 1e9, pcie_Bps(6) / 1e9]


def _rails() -> list[int]:
    import test_topology_nics as tn

    two = tn.topo(nics_per_gpu=2, tiers=[{"name": "leaf", "down": 2, "up": 2}, {"name": "spine", "down": 32}]).facts
    shared = tn.topo(gpus_per_nic=2, nic_bw="400Gbps").facts
    rails = lambda f: f.gpus_per_node * f.nics_per_gpu // f.gpus_per_nic  # noqa: E731
    return [two.gpus_per_node, two.nics_per_gpu, rails(two), 8, 4, 8 // 2 if rails(shared) == 4 else rails(shared)]


@lru_cache(maxsize=None)
def _nic_marginals() -> dict:
    import test_topology_nics as tn
    from netsim.perftests import bench

    tiers = [{"name": "leaf", "down": 2, "up": 2}, {"name": "spine", "down": 32}]
    one, shared = tn.topo(), tn.topo(gpus_per_nic=2)
    two = tn.topo(nics_per_gpu=2, tiers=tiers)
    cap = tn.topo(nics_per_gpu=2, nic_bw="200Gbps", pcie_bw="20GB/s", tiers=tiers)
    a2a = {k: bench(t, "alltoall", [tn.S])[0].time_us for k, t in (("one", one), ("shared", shared), ("two", two))}
    return {"one": tn.marginal_Bps(one) / 1e9, "shared": tn.marginal_Bps(shared) / 1e9,
            "two": tn.marginal_Bps(two) / 1e9, "cap": tn.marginal_Bps(cap) / 1e9, "a2a": a2a}


def _measured_nics() -> list[float]:
    m = _nic_marginals()
    return [2, 16, 1, m["one"], 8, 12.5, 0.96, m["shared"], 2, m["two"], 2, 20, m["cap"], 1e-6, 256,
            m["a2a"]["shared"] / m["a2a"]["one"], 2, m["a2a"]["one"] / m["a2a"]["two"], 0.5]


def _qps_table() -> dict:
    """(job, seed) -> the four times the page prints (None where it prints none)."""
    rows = {}
    cell = r"([\d.,]+|—)"
    for line in (REPO / "docs/topology.md").read_text().splitlines():
        m = re.match(rf"\| (all-to-all|ring all-reduce) (\d+) MiB \| random:(\d) \| {cell} \| {cell} \| {cell} \| {cell} \|$",
                     line)
        if m:
            rows[(m[1], int(m[3]))] = [None if x == "—" else float(x.replace(",", "")) for x in m.groups()[3:]]
    return rows


def _qps_row(op: str, size: int, seed: int):
    def check() -> list[float]:
        import bench_routing

        name = "alltoall" if op == "all-to-all" else "all_reduce"
        shown = _qps_table()[(op, seed)]
        return [size, *[bench_routing._r2(name, size << 20, q, seed)["time_us"]
                        for q, t in zip((1, 2, 4, 8), shown) if t is not None]]
    return check


def _qps_claims() -> list:
    out = []
    for (op, seed), _ in _qps_table().items():
        size = 16 if op == "all-to-all" else 64
        line = next(x for x in (REPO / "docs/topology.md").read_text().splitlines()
                    if x.startswith(f"| {op} {size} MiB | random:{seed} |"))
        out.append(C(line, _qps_row(op, size, seed), slow=True))
    assert len(out) == 6
    return out


def _qps_text() -> list[float]:
    rows = _qps_table()
    gains = [100 * (1 - t / r[0]) for r in rows.values() for t in r[1:] if t is not None]
    lose_4_2 = 100 * (rows[("all-to-all", 1)][2] / rows[("all-to-all", 1)][1] - 1)
    lose_8_4 = 100 * (rows[("ring all-reduce", 0)][3] / rows[("ring all-reduce", 0)][2] - 1)
    return [min(gains), max(gains), 16, 4, 2, lose_4_2, 8, 4, lose_8_4]


def _r2_setup() -> list[float]:
    import bench_routing

    t = bench_routing._roce_tree(1)
    f = t.facts
    return [64, len(f.xgft), f.nodes, f.gpus_per_node, f.oversubscription["leaf"]]


def _ftree_1024() -> list[float]:
    import sys

    sys.path.insert(0, str(REPO / "tests"))
    import readme_claims

    return [readme_claims._ftree_1024()[2]]


def _nic_table() -> list[float]:
    f = {k: topo(k).facts for k in ("deepseek-v3-mpft", "alibaba-hpn-pod", "gb300-nvl72-2x400g", "p4d-a100-shared-nic")}
    return [_default("ScaleOutSpec", "planes") or 1, f["deepseek-v3-mpft"].planes, f["alibaba-hpn-pod"].planes]


def _p4d() -> list[float]:
    t = topo("p4d-a100-shared-nic")
    f = t.facts
    assert f.nic_port_Bps * 8 == 100e9
    return [_default("ScaleOutSpec", "gpus_per_nic"), f.gpus_per_node, f.gpus_per_node // f.gpus_per_nic,
            f.gpus_per_nic]


def _gb300() -> list[float]:
    f = topo("gb300-nvl72-2x400g").facts
    return [_default("ScaleOutSpec", "nics_per_gpu"), f.nics_per_gpu, f.nics_per_gpu]


CLAIMS = [
    C("`50GB/s` (1e9 bytes)", lambda: [__import__("netsim.units", fromlist=["x"]).parse_bandwidth("50GB/s") / 50]),
    C("| `nodes` | int | 1 |", lambda: [_default("TopologySpec", "nodes")]),
    C("V100/A100 0.80 (20.0 of 25 GB/s), H100 0.824 (20.6 of 25), B200/GB200 0.802 (40.1 of 50) — packet headers and "
      "flow control; InfiniBand 0.96 (≈48 GB/s per NDR 400G NIC", _efficiencies),
    C("nccl-tests reports 46–49); RoCE 0.955 (ib_write_bw 380–385 Gb/s on 400G); PCIe 1.0 (the 63 GB/s Gen5 figure",
      lambda: [46, 49, _roce_pcie()[0], 380, 385, _roce_pcie()[2]],
      why="46–49 and 380–385: measurements quoted (nccl-tests, ib_write_bw)"),
    C("default to 1.0 everywhere", _dims_efficiency),
    C("(default 150 ns, an estimate)", lambda: [__import__("netsim.topology.builders", fromlist=["x"])
                                               .NVLINK_HOP_LATENCY_S * 1e9]),
    C("Intel/other row 0, AMD or mixed row 1) and its ring network overhead (AMD 2 µs, else 1 µs)", _cpu_row),
    C("| `planes` | int | 1 |", lambda: [_nic_table()[0]]),
    C("(DeepSeek's 8, HPN's 2)", lambda: _nic_table()[1:]),
    C("| `nic_bw` | bandwidth | 50 GB/s |", lambda: [_default("ScaleOutSpec", "nic_bw") / 1e9]),
    C("| `nics_per_gpu` | int | 1 | NIC ports each GPU owns (GB300 + ConnectX-8 as 2 × 400G: 2)", _gb300),
    C("| `gpus_per_nic` | int | 1 | GPUs sharing one NIC (AWS p4d: 8 A100, 4 × 100G EFA: 2)", _p4d),
    C("| `nic_latency` | time | 400 ns |", lambda: [_default("ScaleOutSpec", "nic_latency") * 1e9]),
    C("| 63 GB/s, 100 ns |", lambda: [_default("ScaleOutSpec", "pcie_bw") / 1e9,
                                      _default("ScaleOutSpec", "pcie_latency") * 1e9]),
    C("when `nics_per_gpu` or `gpus_per_nic` is above 1", why="the layout's default (one NIC per GPU)"),
    C("lines 812–840", why="source lines"),
    C("| `qps_per_connection` | int 1–128 | 1 |", lambda: [1, 128, _default("ScaleOutSpec", "qps_per_connection")],
      why="1–128: NCCL_IB_QPS_PER_CONNECTION's range, which the spec enforces"),
    C("| `up` | int | 0 | ports facing the tier above (0 at the top)", lambda: [_default("TierSpec", "up") or 0, 0]),
    C("| `oversubscription` | number ≥ 1 |", why="the ratio's lower bound (full bisection)"),
    C("| `latency` | time | 200 ns |", lambda: [_default("TierSpec", "latency") * 1e9]),
    C("DGX SuperPOD's 4 SUs (32 leaves × 32 uplinks, 64-port spines) come out as 16 spines with 2 links", _superpod_4su),
    C("a spine pod of a 3-tier tree", lambda: [len(_t("studies/fat_tree_3tier.yaml").facts.xgft)]),
    C("8/16/32 GT/s per lane for Gen3/4/5 with 128b/130b encoding, 64 GT/s for Gen6 in FLIT mode (242 of 256 bytes); "
      "x16 per direction: Gen4 31.5, Gen5 63.0, Gen6 121.0 GB/s", _pcie),
    C("(a node with 8 GPUs × 2 NICs has 16 rails; 8 GPUs sharing 4 NICs have 4)", _rails),
    C("14 GB/s", lambda: [__import__("netsim.collectives.p2p", fromlist=["x"]).P2P_PER_CHANNEL_NET_GBPS]),
    C("So a 256 MiB pipeline send", lambda: [256]),
    C("(`netsPerGpu` = 1)", why="NCCL's value for a shared NIC (the row's definition)"),
    C("Direct all-to-all loads a GPU's 2 ports equally: on 2 × HGX A100 with 2 × 100G NICs per GPU a network peer gets "
      "2 channels, so a 256 MiB all-to-all's", by_test="tests/test_nccl_p2p.py::test_network_sends_split_over_their_channels_and_nics"),
    C("cross-node sends become 2 transfers", by_test="tests/test_nccl_p2p.py::test_network_sends_split_over_their_channels_and_nics"),
    C("runs 2.0× as fast as with one 100G NIC per GPU", by_test="tests/test_topology_nics.py::test_two_nics_per_gpu_double_it"),
    C("Measured (`tests/test_topology_nics.py`, 2 × HGX A100, 100G NICs, ring all-reduce, 16 channels, marginal time "
      "T(2S) − T(S), so latencies cancel): 1 NIC per GPU 96.0 GB/s per node = 8 × 12.5 × 0.96; shared NICs 48.0 "
      "(half); 2 NICs per GPU 192.0 (double); 2 × 200G behind a 20 GB/s GPU link 160.0 (PCIe cap); all exact to 1e-6. "
      "Direct all-to-all (256 MiB) with shared NICs takes 2.00× as long, and with 2 NICs per GPU half as long (2.0×, "
      "within 0.5 %)", _measured_nics),
    C("(the 2 x 400G Ethernet form of ConnectX-8)", lambda: [topo("gb300-nvl72-2x400g").facts.nics_per_gpu]),
    C("at tiers 2 and up", why="tier indices (above the leaves)"),
    C("default 1, `src/transport/net_ib.cc`", lambda: [_default("ScaleOutSpec", "qps_per_connection")]),
    C("64 GPUs at random on a 2-tier RoCE tree of 16 × 8-GPU nodes, 4:1 leaves", _r2_setup),
    C("| job | placement | 1 QP | 2 QPs | 4 QPs | 8 QPs |", lambda: [1, 2, 4, 8],
      why="the settings of the columns (the rows' slow claims run them)"),
    *_qps_claims(),
    C("Every count above one beats one queue pair (by 1.6–16 %), which is why Meta spreads a GPU pair over 16 flows "
      "(Llama 3 paper §3.3.1). The curve is not monotone: a connection ends with its slowest queue pair, so a new draw "
      "of the hash can land one of eight on a busier link than four did (4 QPs lose to 2 by 0.4 % on random:1; 8 to 4 "
      "by 2.2 % on random:0)", _qps_text, why="16 flows: the Llama 3 paper's figure"),
    C("On the 4:1 tree of `tests/test_routing_network.py` (64 GPUs at random on 16 nodes), a 16 MiB all-to-all takes "
      "1,073.7 µs under `ftree` against 729.6 µs under `ecmp` (placement random:0), and 1,035.5 against 843.0 µs",
      by_test="tests/test_ftree.py::test_ftree_loses_to_hashing_on_a_random_placement"),
    C("`ftree` 1,517.14 µs", _ftree_1024, slow=True),
    C("checks it at 512 GPUs", lambda: [int(re.search(r'bench\(topo, "alltoall", \[16 << 20\], gpus=(\d+)\)',
                                                     (REPO / "tests/test_ftree.py").read_text())[1])]),
]
