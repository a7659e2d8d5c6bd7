"""Cost and power of a topology: its bill of materials with a price table joined on (issue 34).

:func:`cost_table` returns :func:`~netsim.topology.bom.bill_of_materials` with the columns of
:data:`COST_COLUMNS` added: the price line each row took (:mod:`netsim.topology.prices`), the units
it is priced in (parts, or ports for a per-port switch line: count x radix, used or free), the
unit and line price (USD) and power (W), whether the line is counted in the totals, and a note.
:func:`fabric_cost` sums it: ``total_usd``, ``total_w``, ``usd_per_gpu``, ``w_per_gpu``.

**What is counted.**  By default the network alone (``scope: network`` lines): NIC ports, the
scale-out switches, cables and transceivers, and the scale-up network's own parts (a rack's NVLink
switch trays; NVSwitch chips and NVLinks on an HGX baseboard belong to the server and are priced
0 here).  GPUs and their servers (``scope: compute``) only with ``include_gpus=True``: a design
study compares fabrics for the same GPUs.  A row no line matches gets a note and is left out of
the totals (``unpriced``), never priced 0 silently.

>>> from netsim.topology.fattree import Tier, fat_tree
>>> from netsim.topology.builders import hgx_h100
>>> t = fat_tree(hgx_h100(), 4, [Tier("leaf", down=4, up=4, up_bw=50e9), Tier("spine", down=8)], nic_bw=50e9)
>>> c = fabric_cost(t)
>>> c["n_gpus"], c["unpriced"]
(32, [])
>>> c["usd_per_gpu"] == c["total_usd"] / 32
True
"""

from __future__ import annotations

import numpy as np

from netsim.topology.bom import COLUMNS, bill_of_materials, format_bom
from netsim.topology.model import Topology
from netsim.topology.prices import PriceTable, load_prices

#: Columns :func:`cost_table` adds to the bill of materials, in order.
COST_COLUMNS: tuple[str, ...] = ("price_key", "scope", "per", "units", "unit_usd", "unit_w", "usd", "w",
                                 "counted", "estimate", "source", "note")
#: Items priced as part of the server (``compute`` lines): without ``include_gpus`` a row of one
#: that no line prices is not counted either way, so it gets no note.
COMPUTE_ITEMS = ("gpu", "scale-up domain")
#: What the default totals count, in words (printed with them).
NETWORK_ONLY = "network only: NICs, switches, cables, transceivers, NVLink switches; GPUs and servers left out"


def cost_table(topo: Topology, prices=None, include_gpus: bool = False):
    """The bill of materials of ``topo`` with price and power per row (a ``pandas.DataFrame``;
    columns :data:`~netsim.topology.bom.COLUMNS` then :data:`COST_COLUMNS`).

    ``prices``: None (the shipped table), a YAML file, a mapping or a
    :class:`~netsim.topology.prices.PriceTable`, merged over the shipped table by line key.
    ``include_gpus``: count ``compute`` lines (GPUs, servers) in the totals too."""
    return price_bom(bill_of_materials(topo), load_prices(prices), include_gpus)


def price_bom(bom, table: PriceTable, include_gpus: bool = False):
    """``bom`` (a :func:`~netsim.topology.bom.bill_of_materials` frame) priced by ``table``."""
    import pandas as pd

    files = " + ".join(table.files)
    cost = pd.DataFrame([_priced(r, table, include_gpus, files) for r in bom.to_dict(orient="records")],
                        columns=list(COST_COLUMNS))
    out = pd.concat([bom.reset_index(drop=True), cost], axis=1)
    out["units"] = out["units"].astype("Int64")
    for c in ("unit_usd", "unit_w", "usd", "w"):
        out[c] = out[c].astype(float)
    for c in ("counted", "estimate"):
        out[c] = out[c].astype(bool)
    return out


def _priced(row: dict, table: PriceTable, include_gpus: bool, files: str) -> dict:
    """The cost columns of one bill-of-materials row."""
    import pandas as pd

    line = table.line_for(row)
    empty = {"price_key": "", "scope": "", "per": "", "units": pd.NA, "unit_usd": np.nan, "unit_w": np.nan,
             "usd": np.nan, "w": np.nan, "counted": False, "estimate": False, "source": ""}
    if line is None:
        if row["item"] in COMPUTE_ITEMS and not include_gpus:
            return {**empty, "note": ""}  # not counted either way: no note
        return {**empty, "note": f"no price for {describe(row)} in {files}: left out of the totals "
                                 "(add a line with --prices FILE, docs/cost.md)"}
    units = row["count"]
    if line.per == "port":
        used, free = row.get("ports_used"), row.get("ports_free")
        if used is None or free is None or pd.isna(used) or pd.isna(free):
            return {**empty, "price_key": line.key,
                    "note": f"no price for {describe(row)}: line {line.key!r} is per port and the row has no "
                            "port count; left out of the totals"}
        units = int(used) + int(free)
    return {"price_key": line.key, "scope": line.scope, "per": line.per, "units": int(units),
            "unit_usd": line.usd, "unit_w": line.watts, "usd": line.usd * units, "w": line.watts * units,
            "counted": line.scope == "network" or include_gpus, "estimate": line.estimate, "source": line.source,
            "note": ""}


def describe(row) -> str:
    """A bill-of-materials row in a few words: ``switch (abstract) 8-port switch, tier dim0``."""
    kind = f" ({row['kind']})" if row.get("kind") else ""
    model = f" {row['model']}" if row.get("model") else ""
    return f"{row['item']}{kind}{model}, tier {row.get('tier') or '-'}"


def totals(priced, n_gpus: int, include_gpus: bool = False) -> dict:
    """Totals of a :func:`cost_table` frame: ``total_usd``, ``total_w``, per GPU, the share of the
    cost that rests on estimated lines, and the rows left unpriced (one line each)."""
    counted = priced[priced["counted"]]
    usd, w = float(counted["usd"].sum()), float(counted["w"].sum())
    est = float(counted.loc[counted["estimate"], "usd"].sum())
    unpriced = [str(note) for note in priced.loc[priced["note"] != "", "note"]]
    per = (lambda v: v / n_gpus) if n_gpus else (lambda v: float("nan"))
    return {"total_usd": usd, "total_w": w, "usd_per_gpu": per(usd), "w_per_gpu": per(w), "n_gpus": int(n_gpus),
            "scope": "network and compute" if include_gpus else "network",
            "estimated_usd_share": est / usd if usd else 0.0, "unpriced": unpriced}


def fabric_cost(topo: Topology, prices=None, include_gpus: bool = False) -> dict:
    """Totals of :func:`cost_table` (see :func:`totals`): ``total_usd``, ``total_w``,
    ``usd_per_gpu``, ``w_per_gpu``, ``n_gpus``, ``scope``, ``estimated_usd_share``, ``unpriced``."""
    return totals(cost_table(topo, prices, include_gpus), topo.n_gpus, include_gpus)


def cost_columns(topo: Topology | None) -> dict:
    """``runs`` columns of a topology's network cost and power under the shipped prices:
    ``cost_usd``, ``power_w``, ``cost_usd_per_gpu``, ``power_w_per_gpu``, ``cost_unpriced`` (rows
    of its bill of materials no line prices); empty for ``None``."""
    if topo is None:
        return {}
    c = fabric_cost(topo)
    return {"cost_usd": c["total_usd"], "power_w": c["total_w"], "cost_usd_per_gpu": c["usd_per_gpu"],
            "power_w_per_gpu": c["w_per_gpu"], "cost_unpriced": len(c["unpriced"])}


# ------------------------------------------------------------------ printing (netsim topo --bom)
def print_bom(topo: Topology, as_json: bool = False, prices=None, include_gpus: bool = False) -> int:
    """Print the bill of materials of ``topo`` with its cost and power (or JSON); exit status 0."""
    priced = cost_table(topo, prices, include_gpus)
    tot = totals(priced, topo.n_gpus, include_gpus)
    if as_json:
        import json

        records = [{k: _plain(v) for k, v in r.items()} for r in priced.astype(object).to_dict(orient="records")]
        print(json.dumps({"name": topo.name, "bom": records, "cost": tot}, indent=2))
    else:
        print(format_bom(priced[list(COLUMNS)], topo.name))
        print()
        print(format_cost(priced, tot))
    return 0


def _plain(v):
    """A JSON value: None for NaN and NA, Python numbers for numpy's."""
    if v is None or (isinstance(v, float) and v != v) or str(v) == "<NA>":
        return None
    return v.item() if isinstance(v, np.generic) else v


def format_cost(priced, tot: dict) -> str:
    """The cost-and-power table and its totals (``netsim topo --bom``): counted rows and unpriced
    ones, ``~`` after an estimated unit price, the price line's key last (what a user file overrides)."""
    scope = "network and compute: GPUs and servers included" if tot["scope"] != "network" else NETWORK_ONLY
    shown = priced[priced["counted"] | (priced["note"] != "")]
    head = ["item", "model", "tier", "units", "per", "unit_usd", "usd", "w", "price line"]
    cells = [[r["item"], r["model"], r["tier"], _num(r["units"]), r["per"],
              _num(r["unit_usd"], 2) + ("~" if r["estimate"] else ""), _num(r["usd"]), _num(r["w"]),
              r["price_key"] if r["counted"] else "NO PRICE (see note)"] for r in shown.to_dict(orient="records")]
    n = tot["n_gpus"]
    cells += [["total", "", "", "", "", "", _num(tot["total_usd"]), _num(tot["total_w"]), ""],
              [f"per GPU ({n:,})", "", "", "", "", "", _num(tot["usd_per_gpu"]), _num(tot["w_per_gpu"], 1), ""]]
    widths = [max([len(h)] + [len(r[j]) for r in cells]) for j, h in enumerate(head)]
    right = {"units", "unit_usd", "usd", "w"}
    fmt = lambda vals: "  ".join(v.rjust(w) if h in right else v.ljust(w)  # noqa: E731
                                 for v, w, h in zip(vals, widths, head)).rstrip()
    rule = fmt(["-" * w for w in widths])
    lines = [f"cost and power  ({scope})", fmt(head), rule, *map(fmt, cells[:-2]), rule, *map(fmt, cells[-2:])]
    lines.append(f"{tot['estimated_usd_share']:.0%} of the cost rests on estimated prices (~); "
                 "sources: netsim topo --bom --json, docs/cost.md; override with --prices FILE")
    lines += [f"note: {note}" for note in tot["unpriced"]]
    return "\n".join(lines)


def _num(v, decimals: int = 0) -> str:
    """A count, price or power with thousands separators and at most ``decimals`` decimals."""
    import pandas as pd

    if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)):
        return ""
    text = f"{float(v):,.{decimals}f}"
    text = text.rstrip("0").rstrip(".") if decimals else text
    return "0" if text in ("-0", "") else text
