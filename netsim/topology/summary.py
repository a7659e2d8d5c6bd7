"""What ``netsim topo`` reports about a topology, as a plain dict."""

from __future__ import annotations

from collections import Counter

import numpy as np

from netsim.topology.model import LINK_KINDS, NODE_KINDS, Topology


def summarize(topo: Topology) -> dict:
    """Counts, bandwidths, oversubscription, bisection and diameter of ``topo``.

    Bandwidths are one direction in 1e9 B/s (``_GBps``).

    >>> from netsim.topology.builders import hgx_h100
    >>> s = summarize(hgx_h100())
    >>> s["gpus"], s["switches"], s["scaleup_GBps_per_gpu"], s["bisection_GBps"]
    (8, 1, 450.0, 1800.0)
    """
    kinds = Counter(NODE_KINDS[k] for k in topo.node_kind.tolist())
    link_kinds = np.bincount(topo.link_kind, minlength=len(LINK_KINDS))
    f = topo.facts
    pcie_switches = f.pcie_switches * f.nodes if f.scaleout == "fat_tree" else 0
    switches = sum(v for k, v in kinds.items() if k not in ("gpu", "nic")) - pcie_switches
    out = {
        "name": topo.name,
        "gpus": topo.n_gpus,
        "nodes": f.nodes,
        "gpus_per_node": topo.gpus_per_node,
        "switches": int(switches),
        "links": topo.n_links,
        "nodes_by_kind": {k: int(v) for k, v in sorted(kinds.items())},
        "links_by_kind": {LINK_KINDS[i]: int(c) for i, c in enumerate(link_kinds) if c},
        "scaleup": f.scaleup,
        "scaleup_GBps_per_gpu": round(f.scaleup_Bps_per_gpu / 1e9, 3),
        "scaleout_GBps_per_gpu": round(f.scaleout_Bps_per_gpu / 1e9, 3),
        "nvls": f.nvls,
        "bisection_GBps": round(f.bisection_Bps / 1e9, 3),
        "diameter_hops": f.diameter_hops,
    }
    if f.scaleout == "fat_tree":
        out["switches_by_tier"] = dict(f.switches)
        out["oversubscription"] = dict(f.oversubscription)
        out["oversubscription_asked"] = {t.name: t.oversubscription_asked for t in f.switch_tiers
                                         if t.oversubscription_asked is not None
                                         and abs(t.oversubscription_asked - f.oversubscription[t.name]) > 1e-4}
        out["uplinks_per_switch"] = {t.name: t.uplinks for t in f.switch_tiers if t.uplinks}
        fabric = topo.link_kind == LINK_KINDS.index("ib")
        out["fabric_cables"] = int(topo.link_width[fabric].sum()) // 2  # each cable is two directed links
        out["rail_optimized"] = f.rail_optimized
        out["routing"] = topo.routing
        out["fabric"] = f.fabric
        out["qps_per_connection"] = f.qps_per_connection
        out["nics"] = int(kinds.get("nic", 0))
        out["nics_per_gpu"], out["gpus_per_nic"] = f.nics_per_gpu, f.gpus_per_nic
        out["nic_port_GBps"] = round(f.nic_port_Bps / 1e9, 3)
        out["pcie_switches"] = int(pcie_switches)
        out["pcie_GBps_per_gpu"] = round(f.pcie_Bps_per_gpu / 1e9, 3)
        out["intra_node"] = f.intra_node
        out.update(_planes(f))
    if f.dims:
        out["dims"] = [{"kind": d.kind, "npus": d.npus, "bw_GBps": round(d.bw_Bps / 1e9, 4),
                        "latency_ns": round(d.latency_s * 1e9, 3)} for d in f.dims]
    if f.gpu_model is not None:
        out["gpu_model"] = f.gpu_model
        out["peak_TFLOPS"] = round(float(f.peak_flops) / 1e12, 3)
        out["compute_efficiency"] = dict(f.compute_efficiency)
        out["gpu_sms"] = f.gpu_sms
    return out


def _planes(f) -> dict:
    """Planes (or rails) of a fat-tree fabric, each plane's switches, and whether crossing planes takes NVLink."""
    from netsim.topology.planes import needs_relay

    out = {"planes": f.planes, "rail_only": f.rail_only}
    if f.planes > 1:
        out["switches_per_plane"] = {t.name: t.count // f.planes for t in f.switch_tiers}
        out["nic_ports_per_plane"] = f.nodes * f.gpus_per_node * f.nics_per_gpu // f.gpus_per_nic // f.planes
        out["cross_plane_relay"] = needs_relay(f.nics_per_gpu, f.gpus_per_nic, f.planes)
    return out


def _plane_line(s: dict) -> str:
    """``planes`` or ``rails`` line of ``netsim topo`` (only when the fabric has more than one)."""
    word = "rails" if s["rail_only"] else "planes"
    per = ", ".join(f"{k} {v:,}" for k, v in s["switches_per_plane"].items())
    what = "rail-only, no spine between rails" if s["rail_only"] else "fat-trees side by side"
    cross = (f"crossing them: NVLink to the source node's GPU in the destination's {word[:-1]} first (PXN relay)"
             if s["cross_plane_relay"] else "every GPU has a NIC port in each")
    return (f"{word:<14}{s['planes']} {what} (NIC port j in {word[:-1]} j mod {s['planes']}); each "
            f"{s['nic_ports_per_plane']:,} NIC ports, {per}; {cross}")


def format_summary(s: dict) -> str:
    """Human-readable lines for :func:`summarize` output."""
    lines = [f"topology      {s['name']}",
             f"GPUs          {s['gpus']:,} ({s['nodes']:,} x {s['gpus_per_node']} per scale-up domain"
             + (f", {s['gpu_model']}" if "gpu_model" in s else "") + ")",
             f"switches      {s['switches']:,}" + (
                 "  (" + ", ".join(f"{k} {v:,}" for k, v in s["switches_by_tier"].items()) + ")"
                 if "switches_by_tier" in s else ""),
             "nodes         " + ", ".join(f"{k} {v:,}" for k, v in s["nodes_by_kind"].items()),
             f"links         {s['links']:,} directed  (" + ", ".join(
                 f"{k} {v:,}" for k, v in s["links_by_kind"].items()) + ")"
             + (f"; {s['fabric_cables']:,} fabric cables" if "fabric_cables" in s else ""),
             f"scale-up      {s['scaleup_GBps_per_gpu']:g} GB/s per GPU per direction ({s['scaleup']}"
             + (", NVLS" if s["nvls"] else "") + ")",
             f"scale-out     {s['scaleout_GBps_per_gpu']:g} GB/s per GPU per direction"]
    if "oversubscription" in s:
        asked = s.get("oversubscription_asked", {})
        ratios = ", ".join(f"{k} {v:g}:1" + (f" ({asked[k]:g}:1 asked; {s['uplinks_per_switch'][k]} uplinks per switch)"
                                             if k in asked else "")
                           for k, v in s["oversubscription"].items()) or "none"
        lines.append(f"oversubscr.   {ratios}" + ("  (rail-optimized)" if s.get("rail_optimized") else ""))
    if "nics" in s:
        share = (f"{s['nics_per_gpu']} per GPU" if s["nics_per_gpu"] > 1 else
                 f"1 per {s['gpus_per_nic']} GPUs" if s["gpus_per_nic"] > 1 else "1 per GPU")
        lines.append(f"NICs          {s['nics']:,} ({share}, {s['nic_port_GBps']:g} GB/s per port); PCIe "
                     f"{s['pcie_GBps_per_gpu']:g} GB/s per GPU" + (f", {s['pcie_switches']:,} PCIe switches"
                                                                    if s["pcie_switches"] else ""))
    if s.get("planes", 1) > 1:
        lines.append(_plane_line(s))
    if "routing" in s:
        fabric = {"infiniband": "InfiniBand", "roce": "RoCE"}.get(s.get("fabric"), "scale-out")
        lines.append(f"routing       {s['routing']} ({fabric} fabric"
                     + (f", {s['qps_per_connection']} queue pairs per connection" if s.get("qps_per_connection", 1) > 1
                        else "") + ")"
                     + ("; same-node traffic through the NICs" if s.get("intra_node") == "nic" else ""))
    if "dims" in s:
        lines.append("dims          " + " x ".join(
            f"{d['kind']}({d['npus']}, {d['bw_GBps']:g} GB/s, {d['latency_ns']:g} ns)" for d in s["dims"]))
    if "peak_TFLOPS" in s:
        eff = ", ".join(f"{k} {v:.3g}" for k, v in s["compute_efficiency"].items()) or "none published"
        lines.append(f"compute       {s['peak_TFLOPS']:g} TFLOP/s peak (dense tensor); achieved fraction per kernel kind: "
                     f"{eff}; " + (f"{s['gpu_sms']} SMs" if s.get("gpu_sms") else "SM count unknown"))
    lines += [f"bisection     {s['bisection_GBps']:,.1f} GB/s (one direction, worst balanced cut)",
              f"diameter      {s['diameter_hops']} hops"]
    return "\n".join(lines)
