"""docs/topology.md from "Multi-plane and rail-only fabrics" on: the designs, their times, oversubscription
as built and the bill of materials (claims for :mod:`doc_claims.topology`'s page)."""

from __future__ import annotations

import re
from functools import lru_cache

from doc_claims import REPO, topo
from doc_claims.topology import QUOTE, C, _t

def _mpft() -> list[float]:
    f = topo("deepseek-v3-mpft").facts
    return [f.gpus_per_node, f.gpus_per_node * f.nics_per_gpu, f.planes, len(f.xgft), f.switch_tiers[0].radix,
            topo("deepseek-v3-mpft").n_gpus, sum(f.switches.values())]


def _hpn() -> list[float]:
    t = topo("alibaba-hpn-pod")
    f = t.facts
    tor, agg = f.switch_tiers[0], f.switch_tiers[1]
    segment = tor.down_ports * f.gpus_per_node  # a ToR takes one port of each node of its segment
    return [f.nics_per_gpu, segment, tor.down_ports, tor.uplinks, t.n_gpus // segment, t.n_gpus,
            f.switches[agg.name] // f.planes, agg.down_ports]


def _rail_only() -> list[float]:
    t = topo("rail-only-512")
    f = t.facts
    return [f.planes, f.switch_tiers[0].radix, t.n_gpus]


def _study(name: str):
    t = _t(f"studies/{name}.yaml")
    return t, t.facts


def _studies() -> list[float]:
    two, f2 = _study("fat_tree_2tier_4k")
    three, f3 = _study("fat_tree_3tier_4k")
    mp, fm = _study("multi_plane_4k")
    ro, fr = _study("rail_only_4k")
    assert two.n_gpus == three.n_gpus == mp.n_gpus == ro.n_gpus
    sw = lambda f: sum(f.switches.values())  # noqa: E731
    return [len(f2.xgft), len(f3.xgft), two.n_gpus, f2.nodes, f2.switch_tiers[0].radix, len(f2.xgft), sw(f2),
            f3.switch_tiers[0].radix, len(f3.xgft), sw(f3), fm.planes, fm.switch_tiers[0].radix, len(fm.xgft), sw(fm),
            fr.switch_tiers[0].radix, len(fr.xgft), sw(fr), len(f3.xgft), f2.switch_tiers[0].radix, len(f2.xgft)]


def _tiers_save() -> list[float]:
    s = _studies()
    return [s[2], s[7], s[8], s[12], s[9], s[13], s[4], s[5], s[6], s[16]]


@lru_cache(maxsize=None)
def _fabric_times() -> dict:
    import test_fabric_times as ft

    MiB = ft.MiB
    full, ro = ft.fabric({"tiers": ft.FT}), ft.fabric({"kind": "rail_only", "tiers": ft.RAIL})
    weak = {"preset": "hgx-h100", "links_per_gpu": 1}
    ft_weak = ft.fabric({"tiers": ft.FT, "pxn": False}, node=weak)
    ro_weak = ft.fabric({"kind": "rail_only", "tiers": ft.RAIL}, node=weak)
    mpft = ft.fabric({"planes": 8, "tiers": [{"name": "leaf", "down": 4, "up": 4}, {"name": "spine", "down": 4}]})
    out = {"direct": ft.t_us(full, "alltoall", 64 * MiB, "analytical"),
           "weak": ft.t_us(ro_weak, "alltoall", 64 * MiB, "analytical"),
           "weak_ft": ft.t_us(ft_weak, "alltoall", 64 * MiB, "analytical"),
           "staged": ft.t_us(ro, "alltoall", 64 * MiB, algo="hierarchical"),
           "direct_flow": ft.t_us(full, "alltoall", 64 * MiB),
           "ecmp": ft.t_us(mpft, "alltoall", 64 * MiB, "analytical", routing="ecmp"),
           "ftree": ft.t_us(full, "alltoall", 64 * MiB, "analytical", routing="ecmp")}
    out["nvlink_GBps"] = 18 * 25 * 0.824
    out["nic_us"] = 120 / 128 * 64 * MiB / ft.NIC * 1e6
    return out


def _fabric_text() -> list[float]:
    f = _fabric_times()
    work = 0.875 * 64 * (1 << 20) / (f["nvlink_GBps"] * 1e9) * 1e6
    return [64, f["direct"], 7, 0.875, 64, f["nvlink_GBps"], work, f["nic_us"], 25, f["weak"], f["weak_ft"]]


def _oversub_row(asked: int):
    def check() -> list[float]:
        import netsim

        t = _t("studies/fat_tree_3tier.yaml", "nodes=512", f"scale_out.tiers.0.oversubscription={asked}")
        f = t.facts
        bom = netsim.bill_of_materials(t)
        cnt = lambda item, tier: int(bom.loc[(bom["item"] == item) & (bom["tier"] == tier), "count"].sum())  # noqa
        free = int(bom.loc[(bom["item"] == "switch") & (bom["tier"] == "leaf"), "ports_free"].sum())
        optics = int(bom.loc[(bom["item"] == "transceiver") & bom["tier"].isin(["leaf-spine", "spine-core"]),
                             "count"].sum())
        built = f.oversubscription["leaf"]
        return [asked, built, f.switches["leaf"], f.switches["spine"], f.switches["core"], cnt("cable", "leaf-spine"),
                cnt("cable", "spine-core"), optics, free, f.bisection_Bps / 1e9]
    return check


def _bound() -> list[float]:
    """h100-superpod-1024 at 4:1 leaves: its uplinks, spines and cables, and the bound the uplinks set."""
    from netsim.topology.efficiency import DEFAULT_EFFICIENCY

    t = _t("h100-superpod-1024.yaml", "scale_out.tiers.0.oversubscription=4")
    f = t.facts
    leaf = f.switch_tiers[0]
    nic = f.nic_port_Bps * DEFAULT_EFFICIENCY["ib"] / 1e9  # an NDR port's achievable rate
    gpus_per_leaf = leaf.down_ports
    su = 256
    leaving = (su * 3 // 4) / su
    bound_ms = leaving * (64 << 20) * gpus_per_leaf / (leaf.uplinks * 48e9) * 1e3
    return [leaf.uplinks, leaf.up_port_Bps * 8 / 1e9, f.switch_tiers[1].count,
            f.xgft[1].p, bound_ms, 3, 64, leaf.uplinks, round(nic), gpus_per_leaf]


def _oversubscribed_alltoall() -> list[float]:
    import netsim

    t = _t("h100-superpod-1024.yaml", "scale_out.tiers.0.oversubscription=4")
    return [4, 64, t.n_gpus, netsim.bench(t, "alltoall", [64 << 20], gpus=1024, model="analytical")[0].time_us]


def _two_optics() -> list[int]:
    import netsim

    bom = netsim.bill_of_materials(_t("h100-superpod-1su.yaml"))
    per = {}
    for tier in ("nic-leaf", "leaf-spine"):
        rows = bom.loc[bom["tier"] == tier].set_index("item")["count"]
        per[tier] = rows["transceiver"] / rows["cable"]
    assert len(set(per.values())) == 1, per
    return [per["nic-leaf"]]


def _not_dividing() -> list[float]:
    t = _t("studies/fat_tree_3tier.yaml", "nodes=512", "scale_out.tiers.0.oversubscription=7")
    leaf = t.facts.switch_tiers[0]
    return [leaf.down_ports, leaf.oversubscription_asked]


def _design_7() -> list[float]:
    import doc_claims.sweeps as sw

    two, three = sw._fabric("fat_tree_2tier.yaml", 7).switch_tiers[0], sw._fabric("fat_tree_3tier.yaml", 7).switch_tiers[0]
    return [7, three.down_ports / three.uplinks, 3, three.uplinks, three.down_ports, two.down_ports / two.uplinks, 2,
            two.uplinks, two.down_ports]


def _su_at_3() -> list[float]:
    import netsim

    t = _t("h100-superpod-1su.yaml", "scale_out.tiers.0.oversubscription=3")
    f = t.facts
    bom = netsim.bill_of_materials(t)
    spine_ports = int(bom.loc[(bom["item"] == "switch") & (bom["tier"] == "spine"), "ports_used"].sum())
    return [3, f.switch_tiers[0].uplinks, f.switch_tiers[1].count, spine_ports // f.switch_tiers[1].count]


def _llama3() -> list[float]:
    f = topo("llama3-24k").facts
    spine = next(x for x in f.switch_tiers if x.name == "spine")
    return [1, spine.uplinks, f.oversubscription["spine"]]


def _chips() -> list[float]:
    from netsim.topology.bom import BASEBOARD_GPUS, CHIPS_PER_TRAY

    chips = {p: topo(p).facts.switch_chips for p in ("dgx-h100", "dgx-a100", "gb200-nvl72")}
    trays = -(-chips["gb200-nvl72"] // CHIPS_PER_TRAY)
    gb300 = topo("gb300-nvl72-2x400g").facts
    return [BASEBOARD_GPUS, chips["dgx-h100"], chips["dgx-a100"], chips["gb200-nvl72"], CHIPS_PER_TRAY, trays,
            gb300.nics_per_gpu, gb300.nics_per_gpu]


def _nvl72_links() -> list[float]:
    import netsim

    from netsim.topology.bom import CHIPS_PER_TRAY

    t = topo("gb200-nvl72")
    bom = netsim.cost_table(t).set_index("item")["count"]
    return [t.n_gpus, bom["nvlink"] // t.n_gpus, bom["nvswitch chip"], bom["nvswitch chip"] // CHIPS_PER_TRAY]


def _megascale_ports() -> list[float]:
    f = topo("megascale-12k").facts
    return [2, f.switch_tiers[0].radix]


CLAIMS = [
    C("8 GPUs and 8 × 400G IB NICs per node, each GPU–NIC pair in its own plane; 8 planes, each a 2-tier fat-tree of "
      "64-port 400G switches; 16,384 GPUs, 768 switches", _mpft),
    C("each GPU's NIC has 2 × 200G ports to ToRs of two planes (`nics_per_gpu: 2`, `planes: 2`); 1,024-GPU "
      "rail-optimized segments of 51.2T ToRs (128 × 200G down, 60 × 400G up), 15 segments under a tier-2 aggregation "
      "layer split into the same planes; 15,360 GPUs", lambda: _hpn()[:6]),
    C("(60 aggregation switches of 120 down ports per plane) are derived, tier 3 is not modelled",
      lambda: [*_hpn()[6:], 3], why="tier 3: HPN's third tier, named"),
    C("8 rails, each one 64-port switch; no spine; 512 GPUs", _rail_only),
    C("| 2-tier vs 3-tier, multi-plane, rail-only at 4,096 GPUs | `studies/fat_tree_2tier_4k.yaml`, "
      "`fat_tree_3tier_4k.yaml`, `multi_plane_4k.yaml`, `rail_only_4k.yaml` | 512 HGX H100 nodes on 128-port 2-tier "
      "(96 fabric switches), 64-port 3-tier (320), 8 planes of 64-port 2-tier (192), rail-only with 128-port 2-tier "
      "rails (96) | SuperPOD RA (3-tier), Spectrum-4 class 128 × 400G (2-tier) |", _studies),
    C("at 4,096 GPUs, 64-port switches need 3 tiers for one fabric but 2 per plane (320 against 192 switches); 128-port "
      "switches need 2 either way (96 and 96)", _tiers_save),
    C("(HPN: P = 2 ports per NIC)", lambda: [topo("alibaba-hpn-pod").facts.planes]),
    C("16 HGX H100 nodes, 400G NICs", lambda: [16]),
    C("fat-tree (to 1e-9: the paper's point", lambda: [1e-9]),
    C("A direct all-to-all (64 MiB) also takes the same time, 1,333 µs, NIC-bound: rail-only forwards 7/8 of a GPU's "
      "network bytes over NVLink, 0.875 × 64 MiB on a 371 GB/s link (158 µs of work under 1,311 µs of NIC time). It is "
      "slower where the forwarding fills the scale-up links: with one 25 GB/s NVLink per GPU, 2,873 µs on rail-only "
      "against 1,333 µs", _fabric_text),
    C("The rail-only paper's 8.2–11.2 % all-to-all overhead", why=QUOTE),
    C("1,505 µs on rail-only, 13 % above the direct all-to-all", lambda: [
        _fabric_times()["staged"], 100 * (_fabric_times()["staged"] / _fabric_times()["direct_flow"] - 1)]),
    C("On 8 planes of 4-leaf trees", lambda: [8, 4]),
    C("and is 39 % slower under `ecmp` (3/4 of a plane's bytes", lambda: [
        100 * (_fabric_times()["ecmp"] / _fabric_times()["ftree"] - 1), 4 - 1]),
    C("The 3-tier design fabric at 4,096 GPUs (`topologies/studies/fat_tree_3tier.yaml`, `nodes: 512`, 64-port "
      "switches)", lambda: [3, 4096, 64]),
    *[C(line, _oversub_row(int(line.split("|")[1])))
      for line in (REPO / "docs/topology.md").read_text().splitlines()
      if re.match(r"\| [1247] \| [\d.]+:1 \| 128 \|", line)],
    C("r = 1 … 32 on a SuperPOD SU", lambda: [1, 32]),
    C("cable at 1/r of the rate", why="a formula"),
    C("and 1:1 trees build the same arrays", why="the full-bisection ratio"),
    C("at 4:1 leaves (`--set scale_out.tiers.0.oversubscription=4`), 64 MiB all-to-all on 1,024 GPUs, `ftree`: "
      "4,484.0 µs on the analytical model", _oversubscribed_alltoall, slow=True),
    C("(8 uplinks of 400 Gb/s per leaf over 4 spines, 2 cables per leaf–spine pair). The uplinks alone bound it at "
      "4.19 ms: 3/4 of each GPU's 64 MiB leaves its SU through 8 × 48 GB/s per 32 GPUs", _bound),
    C("multimode fiber, 2 optics", _two_optics),
    C("single-mode fiber, 2 optics", _two_optics),
    C("for 32 down ports at 7:1", _not_dividing),
    C("The design study's 7:1 is built as 6.4:1 on the 3-tier leaves (5 of 32 up ports) and 7.11:1 on the 2-tier ones "
      "(18 of 128)", _design_7),
    C("A SuperPOD SU's leaves at 3:1 cable 11 uplinks and so reach 11 spines of 8 cables each", _su_at_3),
    C("cables its 1:7 explicitly (28 × 400G uplinks per cluster switch, 6.86:1)", _llama3),
    C("a rack for NVSwitch domains of more than 8 GPUs), their NVSwitch chips (the preset's: 4 per HGX H100 baseboard, 6 per HGX "
      "A100, 18 per GB200 NVL72; a `node` without a `preset` has no chip count, so the shipped `dgx-*.yaml` and "
      "`gb200-nvl72.yaml` name theirs) and NVLink switch trays (2 chips per tray: 9 on NVL72), and their NVLinks; NIC "
      "ports (a 2-port ConnectX-8 is 2", _chips),
    C("(NVSwitch domain of ≤ 8 GPUs, NVLink mesh)", lambda: [__import__("netsim.topology.bom", fromlist=["x"])
                                                            .BASEBOARD_GPUS]),
    C("HGX H100: 4 NVSwitch chips on the 8-GPU baseboard", lambda: [topo("dgx-h100").facts.switch_chips,
                                                                   topo("dgx-h100").n_gpus]),
    C("GB200 NVL72: 72 GPUs × 18 NVLink5 over copper cabling to 18 NVLink switch chips on 9 trays", _nvl72_links),
    C("reach 1–3 m", why=QUOTE),
    C("takes one NIC of each of an SU's 32 DGX", lambda: [_t("h100-superpod-1su.yaml").facts.nodes]),
    C("NVIDIA MMA4Z00-NS, 2 × 400G multimode SR, 50 m", why=QUOTE),
    C("NVIDIA MMS4X00-NS, 2 × 400G single-mode DR, 100 m", why=QUOTE),
    C("k-ary 2-tier and 3-tier trees", why="kinds of tree"),
    C("(MegaScale's leaves split 400G ports into 2 × 200G; the BOM counts the 96 logical ports", _megascale_ports),
    C("dimension 0 varies fastest", why="a dimension's index"),
]
