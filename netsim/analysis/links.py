"""Link load: hottest links, utilization per tier, oversubscription pressure.

The ``links`` table has one row per directed link: ``link_id, kind, src,
dst, src_kind, dst_kind, capacity_GBps, bytes, busy_ns, utilization,
peak_flows`` (GB/s = 1e9 B/s, so ``bytes / capacity_GBps`` is ns at line rate).

Each link gets a **tier**, as ``--faults`` ``match: {tier: ...}`` defines it
(:data:`netsim.workload.faults.TIER_ORDER`): the kind of its higher endpoint in
the order gpu < nic < nvswitch < leaf < spine < core < switch, so GPU–NVSwitch
NVLinks are ``nvswitch``, GPU–NIC PCIe links ``nic``, NIC–leaf links ``leaf``,
leaf–spine ``spine`` and spine–core ``core`` (a ``tier`` column wins when
present), and a **direction**: ``up`` towards the higher endpoint, ``down``,
or ``flat`` (e.g. GPU–GPU NVLink mesh links, tier ``gpu``).

Examples
--------
>>> links = pd.DataFrame({"link_id": [0, 1, 2], "kind": ["nvlink", "ib", "ib"],
...     "src": ["gpu0", "nic0", "leaf0"], "dst": ["nvswitch0", "leaf0", "spine0"],
...     "src_kind": ["gpu", "nic", "leaf"], "dst_kind": ["nvswitch", "leaf", "spine"],
...     "capacity_GBps": [450.0, 50.0, 50.0], "bytes": [9e9, 1e9, 2e9], "busy_ns": [2e7, 2e7, 4e7],
...     "utilization": [0.5, 0.5, 1.0], "peak_flows": [1, 1, 2]})
>>> link_tiers(links)[["tier", "direction"]].values.tolist()
[['nvswitch', 'up'], ['leaf', 'up'], ['spine', 'up']]
>>> hottest_links(links, k=1)["link_id"].tolist()
[2]
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from netsim.workload.faults import TIER_ORDER  # one definition of tiers, shared with --faults

__all__ = ["SWITCH_TIERS", "TIER_ORDER", "hottest_links", "link_tiers", "oversubscription_pressure",
           "utilization_by_tier"]

_LEVEL = {k: i for i, k in enumerate(TIER_ORDER)}
#: Scale-out switch tiers, from the NICs up (``switch``: a single-layer fabric).
SWITCH_TIERS: tuple[str, ...] = ("leaf", "switch", "spine", "core")


def link_tiers(links: pd.DataFrame) -> pd.DataFrame:
    """``links`` with ``tier`` and ``direction`` columns added (see the module docstring)."""
    out = links.copy()
    src = _kinds(out, "src")
    dst = _kinds(out, "dst")
    ls = np.array([_LEVEL.get(k, -1) for k in src])
    ld = np.array([_LEVEL.get(k, -1) for k in dst])
    out["direction"] = np.where(ld > ls, "up", np.where(ld < ls, "down", "flat"))
    if "tier" in out.columns:
        out["tier"] = out["tier"].astype(str)
    else:
        out["tier"] = np.where(ld >= ls, dst, src)
    return out


def _kinds(links: pd.DataFrame, end: str) -> np.ndarray:
    """Node kinds of one end: the ``<end>_kind`` column, else the node name without its ordinal."""
    col = f"{end}_kind"
    if col in links.columns:
        return links[col].astype(str).to_numpy()
    if end in links.columns:
        return links[end].astype(str).str.replace(r"\d+$", "", regex=True).to_numpy()
    return np.full(len(links), "")


def _tier_sort(frame: pd.DataFrame) -> pd.DataFrame:
    pos = {t: i for i, t in enumerate(TIER_ORDER)}
    key = frame["tier"].map(lambda t: pos.get(t, len(pos)))
    extra = ["direction"] if "direction" in frame.columns else []
    return (frame.assign(_k=key).sort_values(["_k", "tier"] + extra, kind="stable")
            .drop(columns="_k").reset_index(drop=True))


def hottest_links(links: pd.DataFrame, k: int = 10, by: str = "utilization") -> pd.DataFrame:
    """The ``k`` links with the largest ``by`` (ties: lower ``link_id`` first), with tier and direction."""
    t = link_tiers(links)
    tie = ["link_id"] if "link_id" in t.columns else []
    t = t.sort_values([by] + tie, ascending=[False] + [True] * len(tie), kind="stable")
    front = [c for c in ("link_id", "tier", "direction", "kind", "src", "dst", "capacity_GBps", "bytes",
                         "busy_ns", "utilization", "peak_flows") if c in t.columns]
    return t[front].head(k).reset_index(drop=True)


def utilization_by_tier(links: pd.DataFrame, by: tuple[str, ...] | str = ("tier", "kind")) -> pd.DataFrame:
    """Load per tier and link kind (``nvswitch``/nvlink, ``leaf``/ib, ...; or any ``by`` columns).

    Returns
    -------
    DataFrame
        ``<by>, links, active_links, capacity_GBps, bytes, mean_utilization,
        p50_utilization, p95_utilization, max_utilization, max_peak_flows,
        active_mean_utilization, active_p50_utilization``, tiers ordered from the GPU
        outwards.  The ``mean``/``p50``/``p95`` statistics are over every link of the group;
        ``active_*`` only over links that carried bytes (idle links, often most of a fabric
        in a small job, pull the plain statistics towards 0).
    """
    by = [by] if isinstance(by, str) else list(by)
    t = link_tiers(links)
    g = t.groupby(by, sort=False)
    out = g.agg(links=("utilization", "size"), capacity_GBps=("capacity_GBps", "sum"), bytes=("bytes", "sum"),
                mean_utilization=("utilization", "mean"),
                p50_utilization=("utilization", "median"),
                p95_utilization=("utilization", lambda u: float(np.quantile(u, 0.95)) if len(u) else np.nan),
                max_utilization=("utilization", "max"), max_peak_flows=("peak_flows", "max"))
    out.insert(1, "active_links", g["bytes"].apply(lambda b: int((b > 0).sum())))
    act = t[t["bytes"] > 0].groupby(by, sort=False)["utilization"]
    out["active_mean_utilization"] = act.mean().reindex(out.index)
    out["active_p50_utilization"] = act.median().reindex(out.index)
    out = out.reset_index()
    return _tier_sort(out) if "tier" in by else out


def oversubscription_pressure(links: pd.DataFrame) -> pd.DataFrame:
    """How hard each scale-out tier's uplinks are driven relative to the tier that feeds them.

    For the ``up`` links of every scale-out switch tier (``leaf``/``switch``,
    ``spine``, ``core``, in that order; all links when no direction is known):

    * ``taper`` = uplink capacity of this tier / uplink capacity of the tier
      below (1.0 non-blocking, 0.5 a 2:1 oversubscription);
    * ``traffic_ratio`` = bytes carried up through this tier / bytes up
      through the tier below (how much traffic must leave the lower domain);
    * ``pressure`` = ``traffic_ratio / taper``: bytes per unit of capacity
      here relative to below.  Above 1 the tier is loaded harder than its
      feeders, i.e. the oversubscription (or the traffic pattern) makes it the
      bottleneck; the first tier is the baseline (1.0).

    Also ``line_rate_ns`` (mean per link of ``bytes / capacity_GBps``: the ns
    needed at line rate), ``max_utilization`` and ``max_peak_flows``.
    """
    t = link_tiers(links)
    t = t[t["tier"].isin(SWITCH_TIERS)]
    if (t["direction"] != "flat").any():
        t = t[t["direction"] == "up"]
    cols = ["tier", "links", "capacity_GBps", "bytes", "line_rate_ns", "max_utilization", "max_peak_flows",
            "taper", "traffic_ratio", "pressure"]
    if t.empty:
        return pd.DataFrame(columns=cols)
    t = t.assign(line_rate_ns=t["bytes"] / t["capacity_GBps"].where(t["capacity_GBps"] > 0))
    out = t.groupby("tier", sort=False).agg(links=("bytes", "size"), capacity_GBps=("capacity_GBps", "sum"),
                                            bytes=("bytes", "sum"), line_rate_ns=("line_rate_ns", "mean"),
                                            max_utilization=("utilization", "max"),
                                            max_peak_flows=("peak_flows", "max")).reset_index()
    out = _tier_sort(out)
    with np.errstate(divide="ignore", invalid="ignore"):
        out["taper"] = out["capacity_GBps"] / out["capacity_GBps"].shift(1)
        out["traffic_ratio"] = out["bytes"] / out["bytes"].shift(1)
        out["pressure"] = out["traffic_ratio"] / out["taper"]
    out.loc[0, ["taper", "traffic_ratio", "pressure"]] = 1.0
    return out[cols]
