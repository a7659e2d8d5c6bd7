"""ASTRA-sim network YAML (``topology``, ``npus_count``, ``bandwidth``, ``latency`` lists): detect
and parse it into multi-dimensional :class:`~netsim.topology.multidim.Dim` lists, with ASTRA-sim's
units (bandwidth "GB/s" read as GiB/s, latency ns per hop); see docs/topology.md.
"""

from __future__ import annotations

from typing import Any

from netsim import units
from netsim.errors import InputError
from netsim.topology.model import MAX_GPUS
from netsim.topology.multidim import DIM_KINDS, Dim, check_dims_size


ASTRA_KEYS = ("topology", "npus_count", "bandwidth", "latency")


def is_astra_network(data: Any) -> bool:
    """True when a parsed YAML mapping looks like an ASTRA-sim network config."""
    return isinstance(data, dict) and "topology" in data and "npus_count" in data


def parse_astra_network(data: dict, source: str) -> list[Dim]:
    """ASTRA-sim network YAML -> dimensions (bandwidth GiB/s per link, latency ns per hop)."""
    lists = {}
    for key in ASTRA_KEYS:
        value = data.get(key)
        if not isinstance(value, list) or not value:
            raise InputError("expected a non-empty list (one entry per dimension)", source=source, field=key)
        lists[key] = value
    n = len(lists["topology"])
    for key in ASTRA_KEYS[1:]:
        if len(lists[key]) != n:
            raise InputError(f"expected {n} entries (one per dimension, like 'topology'), got "
                             f"{len(lists[key])}", source=source, field=key)
    dims = []
    for i in range(n):
        kind, npus = lists["topology"][i], lists["npus_count"][i]
        bw, lat = lists["bandwidth"][i], lists["latency"][i]
        if kind not in DIM_KINDS:
            raise InputError(f"expected one of {', '.join(DIM_KINDS)}, got {kind!r}", source=source,
                             field=f"topology[{i}]")
        if isinstance(npus, bool) or not isinstance(npus, int) or not 2 <= npus <= MAX_GPUS:
            raise InputError(f"expected an integer in 2..{MAX_GPUS}, got {npus!r}", source=source,
                             field=f"npus_count[{i}]")
        if isinstance(bw, bool) or not isinstance(bw, (int, float)) or not 1e-9 <= bw <= 1e6:  # 1e-9 GiB/s ~ 1 B/s
            raise InputError(f"expected a positive number up to 1e6 (GB/s, read as GiB/s like ASTRA-sim), "
                             f"got {bw!r}",
                             source=source, field=f"bandwidth[{i}]")
        if isinstance(lat, bool) or not isinstance(lat, (int, float)) or not 0 <= lat <= 1e15:
            raise InputError(f"expected a number of ns in 0..1e15, got {lat!r}", source=source,
                             field=f"latency[{i}]")
        dims.append(Dim(kind, npus, units.astra_bw_to_Bps(bw), units.ns_to_s(lat), astra_bw=float(bw),
                        astra_latency_ns=float(lat)))
    check_dims_size(dims, source)
    return dims
