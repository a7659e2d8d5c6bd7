"""``netsim astra export``: ASTRA-sim network YAML + system JSON approximating a netsim topology.

ASTRA-sim's analytical networks are products of Ring / FullyConnected / Switch
dimensions with one bandwidth and one latency each.  A netsim topology becomes:

* an ASTRA-sim network YAML or a netsim ``dims`` topology: the same dimensions (exact);
* a scale-up domain: dimension 0, a ``Switch`` (NVSwitch) or ``FullyConnected``
  (NVLink mesh) of ``gpus_per_node`` NPUs, bandwidth = the GPU's scale-up bandwidth
  per direction (after link efficiency), latency = half the GPU-to-GPU path latency
  (ASTRA-sim's Switch counts two hops);
* a scale-out fabric: dimension 1, a ``Switch`` of ``nodes`` NPUs (one per node: the
  same-rail peers), bandwidth = the NIC bandwidth, latency = half the rail path latency.

Bandwidths are written in GiB/s, which is how ASTRA-sim reads the YAML ``bandwidth``.
What this loses is listed in ``approximation.txt`` (and printed).

>>> from netsim.topology.builders import hgx_h100
>>> dims, lost = astra_dims(hgx_h100())
>>> [(d["topology"], d["npus_count"]) for d in dims]
[('Switch', 8)]
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from netsim import units
from netsim.errors import InputError
from netsim.results.io import atomic_file, check_output_dir, check_output_file, kind_of


def _latency_ns(topo, a: int, b: int) -> float:
    indptr, links = topo.routes(np.array([a]), np.array([b]))
    return float(topo.path_latency(indptr, links)[0]) * 1e9


def _gib(bps: float) -> float:
    return round(units.Bps_to_astra_bw(bps), 4)


def astra_dims(topo) -> tuple[list[dict], list[str]]:
    """ASTRA-sim dimensions for ``topo`` and the list of what the approximation loses."""
    facts, lost = topo.facts, []
    if facts.dims:
        return [{"topology": d.kind, "npus_count": int(d.npus), "bandwidth": _gib(d.bw_Bps),
                 "latency": round(units.s_to_ns(d.latency_s), 4)} for d in facts.dims], lost
    eff = facts.link_efficiency
    g = topo.gpus_per_node
    nodes = topo.n_gpus // g
    dims = []
    if g > 1:
        kind = "Switch" if facts.scaleup == "nvswitch" else "FullyConnected"
        bw = facts.scaleup_Bps_per_gpu * eff.get("nvlink", 1.0)
        if kind == "FullyConnected":
            bw /= g - 1
            lost.append("the NVLink mesh is not fully connected: ASTRA-sim gets one FullyConnected dimension "
                        "with the GPU's NVLink bandwidth split evenly over its peers")
        lat = _latency_ns(topo, 0, 1)
        dims.append({"topology": kind, "npus_count": g, "bandwidth": _gib(bw),
                     "latency": round(lat / 2 if kind == "Switch" else lat, 4)})
        if facts.nvls:
            lost.append("NVLink SHARP (in-switch reduction) is not modelled by ASTRA-sim's analytical backend")
        if kind == "Switch" and (facts.nvlink_links_per_gpu or 1) > 1:
            lost.append(f"{facts.nvlink_links_per_gpu} NVLink links per GPU (over several switch chips) become "
                        "one link of their summed bandwidth")
    if nodes > 1:
        bw = facts.scaleout_Bps_per_gpu * eff.get("ib", 1.0)
        lat = _latency_ns(topo, 0, g)
        dims.append({"topology": "Switch", "npus_count": nodes, "bandwidth": _gib(bw), "latency": round(lat / 2, 4)})
        tiers = facts.tiers or 1
        if tiers > 1:
            lost.append(f"the {tiers}-tier fat-tree becomes one switch per rail: distance-dependent latency and "
                        "shared upper-tier links are gone")
        over = {k: v for k, v in facts.oversubscription.items() if v != 1}
        if over:
            lost.append("oversubscription " + ", ".join(f"{k} {v:g}:1" for k, v in over.items()) +
                        " (ASTRA-sim's Switch has no internal limit)")
        lost.append("rails: ASTRA-sim's dimension 1 joins NPUs with the same local index; traffic between "
                    "different local indexes on different nodes is charged to dimension 0 only "
                    "(congestion-unaware model)" + ("" if facts.rail_optimized else
                                                    "; the fabric is not rail-optimized"))
        lost.append("the PCIe hop and NIC are folded into the scale-out latency; PXN routing is not modelled")
    if not dims:
        raise InputError("a single-GPU topology has no network to export")
    if eff:
        lost.append("link efficiencies are folded into the exported bandwidths (ASTRA-sim uses them as given)")
    return dims, lost


def system_json(topo, ndims: int) -> dict:
    """A system JSON for the exported network: ring everywhere, 4 chunks, localBWAware."""
    facts = topo.facts
    out = {"scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
           "preferred-dataset-splits": 4, "collective-optimization": "localBWAware"}
    for op in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all"):
        out[f"{op}-implementation"] = ["ring"] * ndims
    out["local-mem-bw"] = round(units.Bps_to_GBps(facts.mem_bw_Bps if facts.mem_bw_Bps is not None else 1.6e12), 3)
    out["peak-perf"] = round((facts.peak_flops or 0.0) / 1e12, 3)
    out["roofline-enabled"] = 0
    return out


def export_topology(topology, out, *, overwrite: bool = False) -> tuple[list[Path], list[str]]:
    """Write ``network.yml``, ``system.json``, ``remote_memory.json`` and ``approximation.txt``."""
    from netsim.topology.spec import load_topology

    topo = topology if hasattr(topology, "facts") else load_topology(topology)
    dims, lost = astra_dims(topo)
    root = check_output_dir(out, what="a folder for the export")
    files = [root / n for n in ("network.yml", "system.json", "remote_memory.json", "approximation.txt")]
    if not overwrite and any(kind_of(f) is not None for f in files):
        raise InputError("already holds an export; pass --overwrite to replace it", source=str(root))
    for f in files:
        if kind_of(f) not in (None, "a regular file"):
            check_output_file(f, overwrite=True)  # refuses links, FIFOs, devices, folders
    root.mkdir(parents=True, exist_ok=True)
    keys = ("topology", "npus_count", "bandwidth", "latency")
    comments = {"bandwidth": "  # GB/s per link per direction (ASTRA-sim reads GiB/s)", "latency": "  # ns per hop"}
    text = f"# ASTRA-sim analytical network exported by netsim from {topo.name} ({topo.n_gpus} NPUs)\n"
    text += "".join(f"{k}: [ {', '.join(str(d[k]) for d in dims)} ]{comments.get(k, '')}\n" for k in keys)
    texts = [text, json.dumps(system_json(topo, len(dims)), indent=2) + "\n",
             json.dumps({"memory-type": "NO_MEMORY_EXPANSION"}, indent=2) + "\n",
             "".join(f"- {line}\n" for line in lost or ["nothing: the dimensions are exact"])]
    for f, body in zip(files, texts):
        with atomic_file(f, "w") as fh:
            fh.write(body)
    return files, lost
