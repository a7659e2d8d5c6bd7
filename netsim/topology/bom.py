"""Bill of materials of a topology: what it takes to build it, counted from the topology itself.

:func:`bill_of_materials` returns one row per kind of part, with the columns of :data:`COLUMNS`:

* ``item``: ``gpu``, ``scale-up domain``, ``nvswitch chip``, ``nvlink switch tray``, ``nvlink``,
  ``nic``, ``pcie switch``, ``switch``, ``cable``, ``transceiver`` (``link`` for ASTRA-sim
  dimensions);
* ``kind``, ``model``: what it is (``infiniband``/``ethernet`` switch, ``copper DAC``,
  ``multimode fiber``, ...) and a model string a price table can be joined on (a tier's ``model``
  from the topology file, else ``<radix>-port <rate>G``);
* ``tier``: where it sits (``leaf``, ``leaf-spine``, ``nic-leaf``, ``scale-up``, ``dim1``);
* ``length_class``: for cables and transceivers, ``on-board``, ``in-rack``, ``in-row`` or
  ``between-rows`` (see the rules below); ``""`` for the rest;
* ``rate_Gbps``: line rate of one port or cable (Gb/s per direction; NaN where none applies);
* ``count``; ``ports_used``, ``ports_free`` (switches and NICs; ``<NA>`` elsewhere).

Every count is read off the built topology: switches from its nodes, cables as the physical links
(``link_width``) of its directed links in one direction, ports used per switch as the cables that
end on it, ports free as ``count x radix - ports_used``.  So an oversubscribed tier
(:mod:`netsim.topology.cabling`) shows fewer switches above it, fewer cables and free up ports.

**Length classes and media** (a rule, not a floor plan; ``docs/topology.md#bill-of-materials``):

* NVLink inside an HGX baseboard (NVSwitch domains of at most 8 GPUs, NVLink meshes) and PCIe:
  ``on-board`` traces, no cable or transceiver.  NVLink of a rack-scale domain (more than 8 GPUs,
  e.g. GB200 NVL72): ``in-rack`` copper (the NVL72's NVLink spine is copper cabling inside the
  rack, NVIDIA GB200 NVL72 product page).
* NIC to leaf on a top-of-rack fabric (``rail_optimized: false``): ``in-rack`` copper DAC (the leaf
  is the rack's ToR switch, as in Llama 3's clusters, arXiv:2407.21783 §3.3.1; NVIDIA's 400G DACs,
  e.g. MCP7Y10, reach 1 to 3 m).
* NIC to leaf on a rail-optimized fabric: ``in-row`` multimode optics (a rail leaf takes one NIC of
  every node of a scalable unit, spread over the unit's racks: DGX SuperPOD reference
  architecture, 32 DGX per SU; NVIDIA MMA4Z00-NS twin-port 2x400G multimode SR, up to 50 m).
* Switch to switch (leaf-spine, spine-core): ``between-rows`` single-mode optics (NVIDIA
  MMS4X00-NS 2x400G single-mode DR, up to 100 m or more).

An optical cable needs a transceiver at each end: transceivers = 2 x optical cables, counted per
port.  NVIDIA's 400G switches take two ports per twin-port OSFP module (MMA4Z00-NS, MMS4X00-NS),
so a price table for those should price a switch-end port at half a module.

>>> from netsim.topology.fattree import Tier, fat_tree
>>> from netsim.topology.builders import hgx_h100
>>> t = fat_tree(hgx_h100(), 4, [Tier("leaf", down=4, up=4, up_bw=50e9), Tier("spine", down=8)], nic_bw=50e9)
>>> b = bill_of_materials(t).set_index(["item", "tier"])
>>> int(b.loc[("switch", "leaf"), "count"]), int(b.loc[("cable", "leaf-spine"), "count"])
(8, 32)
"""

from __future__ import annotations

import numpy as np

from netsim.topology.model import LINK_KINDS, NODE_KINDS, Topology

#: Columns of :func:`bill_of_materials`, in order.
COLUMNS: tuple[str, ...] = ("item", "kind", "model", "tier", "length_class", "rate_Gbps", "count",
                            "ports_used", "ports_free")
#: Largest NVSwitch domain built on one baseboard: HGX boards carry 4 or 8 GPUs (NVIDIA HGX H100,
#: HGX A100 8-GPU); larger domains (GB200 NVL72) span a rack of trays.
BASEBOARD_GPUS = 8
#: NVLink switch chips per NVLink switch tray: GB200 NVL72 has 18 chips on 9 trays (NVIDIA GB200
#: NVL72 product page; topologies/gb200-nvl72.yaml).
CHIPS_PER_TRAY = 2
#: Length class and medium of a cable, by where it runs (the rules of the module docstring).
MEDIA: dict[str, tuple[str, str]] = {"on-board": ("board trace", ""), "in-rack": ("copper DAC", "DAC"),
                                     "in-row": ("multimode fiber", "SR"), "between-rows": ("single-mode fiber", "DR")}


def bill_of_materials(topo: Topology):
    """The parts ``topo`` is built from, one row per kind of part (a ``pandas.DataFrame``; see the
    module docstring for the columns and the counting rules).

    >>> from netsim.topology.builders import gb200_nvl72
    >>> b = bill_of_materials(gb200_nvl72()).set_index("item")
    >>> int(b.loc["nvswitch chip", "count"]), int(b.loc["nvlink switch tray", "count"]), int(b.loc["nvlink", "count"])
    (18, 9, 1296)
    """
    import pandas as pd

    rows = _gpu_rows(topo) + _scaleup_rows(topo)
    if topo.facts.scaleout == "fat_tree":
        rows += _fat_tree_rows(topo)
    elif topo.facts.dims:
        rows += _dim_rows(topo)
    df = pd.DataFrame([{c: r.get(c) for c in COLUMNS} for r in rows], columns=list(COLUMNS))
    df["rate_Gbps"] = df["rate_Gbps"].astype(float)
    df["count"] = df["count"].astype(np.int64)
    for c in ("ports_used", "ports_free"):
        df[c] = df[c].astype("Int64")
    for c in ("kind", "model", "tier", "length_class"):
        df[c] = df[c].fillna("")
    return df


def _row(item, kind, model, tier, count, *, length_class="", rate=None, used=None, free=None) -> dict:
    return {"item": item, "kind": kind, "model": model, "tier": tier, "length_class": length_class,
            "rate_Gbps": np.nan if rate is None else round(rate * 8 / 1e9, 6), "count": int(count),
            "ports_used": used, "ports_free": free}


def _gpu_rows(topo: Topology) -> list[dict]:
    return [_row("gpu", "gpu", topo.facts.gpu_model or "", "scale-up", topo.n_gpus)]


def _kinds(topo: Topology) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Node kind names of every link's source and destination, and every link's kind name."""
    nk = np.array(NODE_KINDS, dtype=object)[topo.node_kind.astype(np.int64)]
    lk = np.array(LINK_KINDS, dtype=object)[topo.link_kind.astype(np.int64)]
    return nk[topo.link_src], nk[topo.link_dst], lk


def _scaleup_rows(topo: Topology) -> list[dict]:
    """The scale-up domains: boards or racks, NVSwitch chips and trays, NVLinks."""
    f = topo.facts
    if f.scaleup not in ("nvswitch", "nvlink_mesh"):
        return []
    s, d, lk = _kinds(topo)
    nvlink = lk == "nvlink"
    if f.scaleup == "nvswitch":
        links = int(topo.link_width[nvlink & (s == "gpu") & (d == "nvswitch")].sum())
    else:
        links = int(topo.link_width[nvlink & (s == "gpu") & (d == "gpu")].sum()) // 2
    g, domains = topo.gpus_per_node, f.nodes
    rack = f.scaleup == "nvswitch" and g > BASEBOARD_GPUS
    gpu = f.gpu_model or ""
    name = (f"NVL{g} rack" if rack else f"{g}-GPU baseboard") + (f" ({gpu})" if gpu else "")
    rows = [_row("scale-up domain", "rack" if rack else "baseboard", name, "scale-up", domains)]
    if f.scaleup == "nvswitch" and f.switch_chips:
        rows.append(_row("nvswitch chip", "nvswitch", f"NVSwitch ({gpu})" if gpu else "NVSwitch", "scale-up",
                         f.switch_chips * domains, used=links))
        if rack:
            rows.append(_row("nvlink switch tray", "nvswitch", f"NVLink switch tray ({gpu})" if gpu else "NVLink switch tray",
                             "scale-up", -(-f.switch_chips // CHIPS_PER_TRAY) * domains))
    length = "in-rack" if rack else "on-board"
    rate = f.nvlink_link_Bps
    if rate is None and nvlink.any():  # link_bw is the achievable rate: back to the line rate
        rate = float(topo.link_bw[nvlink][0] / topo.link_width[nvlink][0]) / f.link_efficiency.get("nvlink", 1.0)
    rows.append(_row("nvlink", "copper cable" if rack else MEDIA[length][0], f"NVLink ({gpu})" if gpu else "NVLink",
                     "scale-up", links, length_class=length, rate=rate))
    return rows


def switch_tier_of_node(topo: Topology) -> np.ndarray:
    """Index into ``facts.switch_tiers`` of every node of a fat-tree (-1: not a fabric switch).

    :func:`~netsim.topology.fattree.fat_tree` numbers the fabric's switches last, tier by tier
    from the leaves (``_wire``), so the last ``sum(count)`` nodes are the tiers in order (tiers
    named outside ``leaf``/``spine``/``core`` share the node kind ``switch``).
    """
    f = topo.facts
    counts = [t.count for t in f.switch_tiers]
    out = np.full(topo.n_nodes, -1, dtype=np.int64)
    out[topo.n_nodes - sum(counts):] = np.repeat(np.arange(len(counts)), counts)
    return out


def _fat_tree_rows(topo: Topology) -> list[dict]:
    """NICs, PCIe switches, the switches of every tier, and the cables and transceivers between them."""
    f = topo.facts
    fabric = {"roce": "ethernet"}.get(f.fabric, "infiniband")
    s, d, lk = _kinds(topo)
    nics = int(np.count_nonzero(topo.node_kind == NODE_KINDS.index("nic")))
    rows = [_row("nic", fabric, f"{_gbps(f.nic_port_Bps)}G NIC port", "nic", nics, rate=f.nic_port_Bps,
                 used=nics, free=0)]
    if f.pcie_switches:
        rows.append(_row("pcie switch", "pcie", "PCIe switch", "nic", f.pcie_switches * f.nodes))
    tier = switch_tier_of_node(topo)
    ts, td = tier[topo.link_src], tier[topo.link_dst]
    width = topo.link_width.astype(np.int64)
    for i, st in enumerate(f.switch_tiers):
        n = st.count
        used = int(width[ts == i].sum())  # one outgoing directed link per cable end on the switch
        rate = max(st.down_port_Bps, st.up_port_Bps)
        model = st.model or f"{st.radix}-port {_gbps(rate)}G"
        rows.append(_row("switch", fabric, model, st.name, n, rate=rate, used=used, free=n * st.radix - used))
    rail = "in-row" if f.rail_optimized else "in-rack"
    leaf = f.switch_tiers[0].name
    rows += _cable_rows(int(width[(s == "nic") & (td == 0)].sum()), f"nic-{leaf}", rail, f.nic_port_Bps)
    for i, (lo, hi) in enumerate(zip(f.switch_tiers, f.switch_tiers[1:])):
        cables = int(width[(ts == i) & (td == i + 1)].sum())
        rows += _cable_rows(cables, f"{lo.name}-{hi.name}", "between-rows", lo.up_port_Bps)
    return rows


def _cable_rows(cables: int, tier: str, length: str, rate: float) -> list[dict]:
    kind, reach = MEDIA[length]
    g = _gbps(rate)
    rows = [_row("cable", kind, f"{g}G {reach}", tier, cables, length_class=length, rate=rate)]
    if length in ("in-row", "between-rows"):
        optic = "multimode optic" if length == "in-row" else "single-mode optic"
        rows.append(_row("transceiver", optic, f"{g}G {reach}", tier, 2 * cables, length_class=length, rate=rate))
    return rows


def _dim_rows(topo: Topology) -> list[dict]:
    """ASTRA-sim dimensions: abstract links and switches, one row each per dimension (no media)."""
    rows, n = [], topo.n_gpus
    for i, dim in enumerate(topo.facts.dims):
        k = dim.npus
        directed = {"Ring": 2 * n, "FullyConnected": n * (k - 1), "Switch": 2 * n}[dim.kind]
        if dim.kind == "Switch":
            rows.append(_row("switch", "abstract", f"{k}-port switch", f"dim{i}", n // k, used=n, free=0))
        rows.append(_row("link", dim.kind, "abstract link", f"dim{i}", directed // 2, rate=dim.bw_Bps))
    return rows


def _gbps(bps: float) -> str:
    return f"{bps * 8 / 1e9:g}"


def print_bom(topo: Topology, as_json: bool = False) -> int:
    """Print the bill of materials of ``topo`` as a table (or JSON records); exit status 0."""
    df = bill_of_materials(topo)
    if as_json:
        import json
        records = [{k: (None if v is None or v != v or str(v) == "<NA>" else v) for k, v in r.items()}
                   for r in df.astype(object).to_dict(orient="records")]
        print(json.dumps({"name": topo.name, "bom": records}, indent=2))
    else:
        print(format_bom(df, topo.name))
    return 0


def format_bom(df, name: str = "") -> str:
    """The bill of materials as a fixed-width text table (``netsim topo --bom``)."""
    cols = [c for c in COLUMNS]
    cells = [[_cell(v) for v in row] for row in df[cols].itertuples(index=False)]
    widths = [max([len(c)] + [len(r[j]) for r in cells]) for j, c in enumerate(cols)]
    right = {"rate_Gbps", "count", "ports_used", "ports_free"}
    fmt = lambda vals: "  ".join(v.rjust(w) if c in right else v.ljust(w)
                                 for v, w, c in zip(vals, widths, cols)).rstrip()
    head = [f"bill of materials  {name}".rstrip(), fmt(cols), fmt(["-" * w for w in widths])]
    return "\n".join(head + [fmt(r) for r in cells])


def _cell(v) -> str:
    import pandas as pd

    if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)):
        return ""
    if isinstance(v, (int, np.integer)):
        return f"{int(v):,}"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)
