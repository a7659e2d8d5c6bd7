"""Bill of materials from the topology (netsim/topology/bom.py, issue 34 item 2): closed forms."""

import json

import numpy as np
import pandas as pd
import pytest
import yaml

import netsim
from netsim.cli import main
from netsim.topology.bom import COLUMNS, bill_of_materials
from netsim.topology.builders import gb200_nvl72, hgx_a100, hgx_h100
from netsim.topology.fattree import Tier, fat_tree
from netsim.topology.multidim import Dim, multi_dim
from netsim.topology.spec import build_topology, load_topology, parse_spec

from conftest import TOPOLOGIES

#: Every shipped topology file (the studies' fabric files too; the study sweeps are not topologies).
SHIPPED = sorted(TOPOLOGIES.glob("*.yaml")) + [TOPOLOGIES / "studies" / f"fat_tree_{n}tier.yaml" for n in (2, 3)]
NDR = 50e9


def _get(bom, item, tier, col="count"):
    rows = bom[(bom["item"] == item) & (bom["tier"] == tier)]
    assert len(rows) == 1, (item, tier, bom)
    return rows.iloc[0][col]


def _fabric(path, **overrides):
    data = yaml.safe_load(path.read_text())
    for key, value in overrides.items():
        if key == "leaf_over":
            data["scale_out"]["tiers"][0].pop("up_bw", None)
            data["scale_out"]["tiers"][0]["oversubscription"] = value
        else:
            data[key] = value
    return build_topology(parse_spec(data, str(path)), str(path))


def _fat_tree_closed_form(bom, switches, cables, radix):
    """Switch and cable counts per tier; ports used = cables ending there; optics = 2 x fiber."""
    tiers = list(switches)
    for t, n in switches.items():
        assert _get(bom, "switch", t) == n
    links = [f"nic-{tiers[0]}"] + [f"{a}-{b}" for a, b in zip(tiers, tiers[1:])]
    for link, n in zip(links, cables):
        assert _get(bom, "cable", link) == n
        if "fiber" in _get(bom, "cable", link, "kind"):
            assert _get(bom, "transceiver", link) == 2 * n
        else:  # copper in the rack (top-of-rack NIC links)
            assert not ((bom["item"] == "transceiver") & (bom["tier"] == link)).any()
    ends = [cables[0] + cables[1] if len(cables) > 1 else cables[0]]
    ends += [cables[i] + (cables[i + 1] if i + 1 < len(cables) else 0) for i in range(1, len(cables))]
    for t, used in zip(tiers, ends):
        assert _get(bom, "switch", t, "ports_used") == used
        assert _get(bom, "switch", t, "ports_free") == switches[t] * radix - used


# DGX SuperPOD RA, "Larger DGX SuperPOD component counts" (32 DGX per SU, 8 x 400G per node,
# 64-port QM9700): SUs -> leaf, spine, core switches; node-leaf, leaf-spine, spine-core cables.
SUPERPOD_RA = {1: (8, 4, 0, 256), 4: (32, 16, 0, 1024), 16: (128, 128, 64, 4096), 64: (512, 512, 256, 16384)}


@pytest.mark.parametrize("path,sus", [("h100-superpod-1su.yaml", 1), ("h100-superpod-1024.yaml", 4),
                                      ("studies/fat_tree_3tier.yaml", 16), ("h100-fat-tree-16k.yaml", 64)])
def test_superpod_counts_match_the_reference_architecture(path, sus):
    t = _fabric(TOPOLOGIES / path, nodes=32 * sus)
    leaf, spine, core, cables = SUPERPOD_RA[sus]
    switches = {"leaf": leaf, "spine": spine, **({"core": core} if core else {})}
    bom = bill_of_materials(t)
    _fat_tree_closed_form(bom, switches, [cables] * len(switches), 64)
    assert _get(bom, "nic", "nic") == 256 * sus and _get(bom, "gpu", "scale-up") == 256 * sus
    assert _get(bom, "nvswitch chip", "scale-up") == 4 * 32 * sus  # 4 NVSwitch per HGX H100 baseboard


@pytest.mark.parametrize("ratio", [1, 2, 4, 8])
def test_three_tier_superpod_oversubscribed_leaves(ratio):
    """16 SUs (4,096 GPUs) of 64-port switches, leaves r:1: 32/r uplinks per leaf, spines and cores
    and the cables above the leaves fall to 1/r, the leaves' free ports are their uncabled up ports."""
    t = _fabric(TOPOLOGIES / "studies/fat_tree_3tier.yaml", nodes=512, leaf_over=ratio)
    bom = bill_of_materials(t)
    h = 4096
    _fat_tree_closed_form(bom, {"leaf": 128, "spine": 128 // ratio, "core": 64 // ratio}, [h, h // ratio, h // ratio], 64)
    assert _get(bom, "switch", "leaf", "ports_free") == 128 * (32 - 32 // ratio)


@pytest.mark.parametrize("k", [8, 16, 32])
@pytest.mark.parametrize("ratio", [1, 2, 4])
def test_two_tier_k_ary_closed_form(k, ratio):
    """k leaves of k/2 hosts, k/(2r) uplinks each, spines of k ports: k/(2r) spines; rail-optimized."""
    t = fat_tree(hgx_h100(), k * k // 16, [Tier("leaf", down=k // 2, up=k // 2, up_bw=NDR, oversubscription=ratio),
                                           Tier("spine", down=k)], nic_bw=NDR)
    bom = bill_of_materials(t)
    hosts = k * k // 2
    _fat_tree_closed_form(bom, {"leaf": k, "spine": k // (2 * ratio)}, [hosts, hosts // ratio], k)


def test_tiers_named_outside_the_node_kinds_are_told_apart():
    # "tor", "agg", "top" are all node kind "switch": the tiers are found by their order, not their kind
    t = fat_tree(hgx_h100(), 16, [Tier("tor", down=4, up=4, up_bw=NDR), Tier("agg", down=4, up=4, up_bw=NDR),
                                  Tier("top", down=8)], nic_bw=NDR, rail_optimized=False)
    _fat_tree_closed_form(bill_of_materials(t), {"tor": 32, "agg": 32, "top": 16}, [128, 128, 128], 8)


def test_media_follow_the_rules():
    rail = bill_of_materials(load_topology(TOPOLOGIES / "h100-superpod-1su.yaml")).set_index(["item", "tier"])
    assert rail.loc[("cable", "nic-leaf"), ["kind", "length_class"]].tolist() == ["multimode fiber", "in-row"]
    assert rail.loc[("cable", "leaf-spine"), ["kind", "length_class"]].tolist() == ["single-mode fiber", "between-rows"]
    tor = bill_of_materials(_fabric(TOPOLOGIES / "llama3-24k.yaml", nodes=192))  # top-of-rack: copper in the rack
    dac = tor[(tor["item"] == "cable") & (tor["tier"] == "nic-leaf")].iloc[0]
    assert (dac["kind"], dac["length_class"]) == ("copper DAC", "in-rack")
    assert not ((tor["item"] == "transceiver") & (tor["tier"] == "nic-leaf")).any()  # no optics on a DAC
    for bom in (rail.reset_index(), tor):  # a transceiver at both ends of every optical cable
        fiber = bom[(bom["item"] == "cable") & bom["kind"].str.contains("fiber")]
        optics = bom[bom["item"] == "transceiver"]
        assert optics["count"].sum() == 2 * fiber["count"].sum()


def test_nvswitch_domains():
    nvl = bill_of_materials(gb200_nvl72()).set_index("item")
    assert nvl.loc["nvswitch chip", "count"] == 18 and nvl.loc["nvlink switch tray", "count"] == 9
    assert nvl.loc["nvlink", "count"] == 72 * 18 and nvl.loc["nvlink", "length_class"] == "in-rack"
    assert nvl.loc["nvswitch chip", "ports_used"] == 72 * 18
    for build, chips, links in ((hgx_h100, 4, 8 * 18), (hgx_a100, 6, 8 * 12)):
        b = bill_of_materials(build()).set_index("item")
        assert b.loc["nvswitch chip", "count"] == chips and b.loc["nvlink", "count"] == links
        assert b.loc["nvlink", "length_class"] == "on-board" and "nvlink switch tray" not in b.index
    racks = bill_of_materials(load_topology(TOPOLOGIES / "gb300-nvl72-2x400g.yaml")).set_index(["item", "tier"])
    assert racks.loc[("nvlink switch tray", "scale-up"), "count"] == 18
    assert racks.loc[("nic", "nic"), "count"] == 288 and racks.loc[("pcie switch", "nic"), "count"] == 144


def test_astra_dimensions():
    t = multi_dim([Dim("Switch", 8, 50e9, 500e-9), Dim("Ring", 4, 25e9, 1e-6)])
    b = bill_of_materials(t).set_index(["item", "tier"])
    assert b.loc[("switch", "dim0"), "count"] == 4 and b.loc[("link", "dim0"), "count"] == 32
    assert b.loc[("link", "dim1"), "count"] == 32


def test_the_dataframe_joins_a_price_table():
    bom = netsim.bill_of_materials(load_topology(TOPOLOGIES / "h100-superpod-1024.yaml"))
    assert tuple(bom.columns) == COLUMNS and bom["count"].dtype == np.int64
    assert str(bom["ports_free"].dtype) == "Int64"
    prices = pd.DataFrame({"item": ["switch", "transceiver", "cable"], "model": ["QM9700", "400G DR", "400G DR"],
                           "price": [30000.0, 1000.0, 100.0]})
    priced = bom.merge(prices, on=["item", "model"], how="left")
    assert (priced["count"] * priced["price"]).sum() == 48 * 30000 + 2048 * 1000 + 1024 * 100


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_netsim_topo_bom_on_every_shipped_topology(path, capsys):
    assert main(["topo", str(path), "--bom"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("bill of materials") and "gpu" in out
    assert main(["topo", str(path), "--bom", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["bom"]
    assert rows[0]["item"] == "gpu" and all(r["count"] >= 0 for r in rows)
