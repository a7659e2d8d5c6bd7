"""Price-and-power tables: the shipped default and a user's file over it (issue 34).

The default is ``prices.yaml`` beside this module (shipped in the package); its header and
``docs/cost.md`` describe a line.  :func:`load_prices` reads it and merges a user's table over it
**by line key**: a key the default has takes the user's fields over the default's (``match`` as a
whole), a new key adds a line.  A user line that sets ``usd`` or ``watts`` brings its own
``source`` (default: the user's file), ``estimate`` and ``reason``.

A bill-of-materials row takes the most specific line whose ``match`` it equals
(:meth:`PriceTable.line_for`): a line naming a ``model`` before one that does not, then the line
with more match fields, then a user's line before a default one; two lines left equal are an
:class:`~netsim.errors.InputError` naming both.

>>> t = load_prices({"lines": {"switch QM9700": {"usd": 25000}}})
>>> line = t.line_for({"item": "switch", "kind": "infiniband", "model": "QM9700", "rate_Gbps": 400.0})
>>> line.key, line.usd, line.source
('switch QM9700', 25000.0, 'prices argument')
>>> t.line_for({"item": "switch", "kind": "infiniband", "model": "64-port 400G", "rate_Gbps": 400.0}).per
'port'
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from netsim import inputs
from netsim.errors import InputError

#: The shipped default table (``pyproject.toml`` package-data ships it with the package).
DEFAULT_PRICES = Path(__file__).with_name("prices.yaml")
#: Bill-of-materials columns a line may match on (:data:`netsim.topology.bom.COLUMNS`).
MATCH_FIELDS = ("item", "kind", "model", "tier", "length_class", "rate_Gbps")
#: Fields of a line.
LINE_FIELDS = ("match", "per", "usd", "watts", "scope", "source", "estimate", "reason")
#: ``per``: one price per counted part, or per switch port (count x radix, used or free).
PER = ("unit", "port")
#: ``scope``: counted by default (``network``) or only when GPUs and servers are (``compute``).
SCOPES = ("network", "compute")
#: Most lines in one table (a user's table lists parts, not one line per cable).
MAX_LINES = 10_000


@dataclass(frozen=True)
class PriceLine:
    """One line of a price table: what it matches, its price and power per ``per``, its source."""

    key: str
    match: tuple[tuple[str, object], ...]
    usd: float
    watts: float
    per: str = "unit"
    scope: str = "network"
    source: str = ""
    estimate: bool = False
    reason: str = ""
    origin: str = "default"  # "default" or the user's file that last set the line

    def matches(self, row: Mapping) -> bool:
        """Whether the bill-of-materials ``row`` (column -> value) equals every field of ``match``."""
        for field, want in self.match:
            got = row.get(field)
            if field == "rate_Gbps":
                if got is None or not isinstance(got, (int, float)) or math.isnan(got) or float(got) != want:
                    return False
            elif got != want:
                return False
        return True

    @property
    def rank(self) -> tuple[bool, int, bool]:
        """Specificity: names a model, number of match fields, a user's line."""
        return any(f == "model" for f, _ in self.match), len(self.match), self.origin != "default"


class PriceTable:
    """Price lines by key, and the files they came from (the default first)."""

    def __init__(self, lines: dict[str, PriceLine], files: tuple[str, ...]):
        self.lines, self.files = lines, files

    def line_for(self, row: Mapping) -> PriceLine | None:
        """The most specific line ``row`` matches (see the module docstring), or None."""
        found = sorted((ln for ln in self.lines.values() if ln.matches(row)), key=lambda ln: ln.rank, reverse=True)
        if len(found) > 1 and found[0].rank == found[1].rank:
            what = ", ".join(f"{f}={row.get(f)!r}" for f in MATCH_FIELDS if row.get(f) not in (None, ""))
            raise InputError(f"lines {found[0].key!r} and {found[1].key!r} both match ({what}) equally; "
                             "expected one line to be more specific (a model, or more match fields)",
                             source=" + ".join(self.files))
        return found[0] if found else None

    def frame(self):
        """The table as a DataFrame: one row per line (key, match fields, price, power, source)."""
        import pandas as pd

        rows = [{"key": ln.key, **{f: dict(ln.match).get(f) for f in MATCH_FIELDS}, "per": ln.per, "usd": ln.usd,
                 "watts": ln.watts, "scope": ln.scope, "estimate": ln.estimate, "source": ln.source,
                 "reason": ln.reason, "origin": ln.origin} for ln in self.lines.values()]
        return pd.DataFrame(rows)


def load_prices(prices=None) -> PriceTable:
    """The default table, with ``prices`` merged over it by key: None (the default alone), a YAML
    file path, a mapping of the file's shape (``{"lines": {key: {...}}}``) or a :class:`PriceTable`
    (returned as it is)."""
    if isinstance(prices, PriceTable):
        return prices
    base = parse_prices(inputs.load_yaml(DEFAULT_PRICES), str(DEFAULT_PRICES))
    base.files = ("netsim/topology/prices.yaml",)  # the package-relative name, not a site-packages path
    if prices is None:
        return base
    if isinstance(prices, (str, os.PathLike)):
        path = inputs.path_text(os.fspath(prices), "--prices")
        return parse_prices(inputs.load_yaml(path), path, base)
    if isinstance(prices, Mapping):
        return parse_prices(prices, "prices argument", base)
    raise InputError(f"expected a YAML file path, a mapping or a PriceTable, got {type(prices).__name__}",
                     source="prices")


def parse_prices(doc, source: str, base: PriceTable | None = None) -> PriceTable:
    """A price table from the parsed YAML ``doc`` (from ``source``), merged over ``base`` by key."""
    if not isinstance(doc, Mapping):
        raise InputError("expected a mapping with 'lines' (key -> price line)", source=source)
    unknown = sorted(set(doc) - {"lines", "currency"})
    if unknown:
        raise InputError(f"unknown key {unknown[0]!r}; expected 'lines' (and 'currency: USD')", source=source)
    if doc.get("currency", "USD") != "USD":
        raise InputError(f"expected USD (every price is in US dollars), got {doc['currency']!r}", source=source,
                         field="currency")
    lines = doc.get("lines")
    if not isinstance(lines, Mapping) or not lines:
        raise InputError("expected a non-empty mapping of line key -> price line", source=source, field="lines")
    if len(lines) > MAX_LINES:
        raise InputError(f"expected at most {MAX_LINES:,} lines, got {len(lines):,}", source=source, field="lines")
    out = dict(base.lines) if base is not None else {}
    for key, fields in lines.items():
        if not isinstance(key, str) or not key.strip():
            raise InputError(f"expected a non-empty text key, got {key!r}", source=source, field="lines")
        old = out.get(key)
        out[key] = _line(key, fields, source, old, base is not None)
    return PriceTable(out, (*(base.files if base is not None else ()), source))


def _line(key: str, fields, source: str, old: PriceLine | None, user: bool) -> PriceLine:
    """One line from its YAML mapping, over ``old`` (the default's line of that key) if any."""
    where = f"lines.{key}"
    if not isinstance(fields, Mapping):
        raise InputError(f"expected a mapping of {', '.join(LINE_FIELDS)}", source=source, field=where)
    for f in fields:
        if f not in LINE_FIELDS:
            raise InputError(f"unknown field {f!r}; expected one of {', '.join(LINE_FIELDS)}", source=source,
                             field=where)
    if old is None:
        for f in ("match", "usd", "watts") + (() if user else ("source",)):
            if f not in fields:
                raise InputError(f"expected '{f}' (a new line needs match, usd, watts)", source=source,
                                 field=f"{where}.{f}")
    new: dict = {"origin": source} if user else {}
    if "match" in fields:
        new["match"] = _match(fields["match"], source, f"{where}.match")
    for f in ("usd", "watts"):
        if f in fields:
            new[f] = float(inputs.number(fields[f], source, f"{where}.{f}", lo=0))
    for f, choices in (("per", PER), ("scope", SCOPES)):
        if f in fields and fields[f] not in choices:
            raise InputError(f"expected one of {', '.join(choices)}, got {fields[f]!r}", source=source,
                             field=f"{where}.{f}")
        if f in fields:
            new[f] = fields[f]
    if old is None or "usd" in new or "watts" in new:  # new figures: their own source, not the default's
        new.setdefault("source", source)
        new.setdefault("estimate", False)
        new.setdefault("reason", "")
    new.update(_provenance(fields, source, where))
    if not str(new.get("source", old.source if old else "")).strip():
        raise InputError("expected a non-empty source (a document, datasheet or paper)", source=source,
                         field=f"{where}.source")
    line = replace(old, **new) if old is not None else PriceLine(key=key, **new)
    if line.estimate and not line.reason.strip():
        raise InputError("expected a one-line reason for an estimate", source=source, field=f"{where}.reason")
    return line


def _provenance(fields: Mapping, source: str, where: str) -> dict:
    """``source``, ``estimate`` and ``reason`` as given in a line."""
    out: dict = {}
    for f in ("source", "reason"):
        if f in fields:
            if not isinstance(fields[f], str):
                raise InputError(f"expected text, got {fields[f]!r}", source=source, field=f"{where}.{f}")
            out[f] = " ".join(fields[f].split())
    if "estimate" in fields:
        if not isinstance(fields["estimate"], bool):
            raise InputError(f"expected true or false, got {fields['estimate']!r}", source=source,
                             field=f"{where}.estimate")
        out["estimate"] = fields["estimate"]
    return out


def _match(value, source: str, where: str) -> tuple[tuple[str, object], ...]:
    """``match`` as sorted (field, value) pairs: text fields are text, ``rate_Gbps`` a number."""
    if not isinstance(value, Mapping) or "item" not in value:
        raise InputError(f"expected a mapping naming at least 'item' (fields: {', '.join(MATCH_FIELDS)})",
                         source=source, field=where)
    out = []
    for f, v in value.items():
        if f not in MATCH_FIELDS:
            raise InputError(f"unknown field {f!r}; expected one of {', '.join(MATCH_FIELDS)}", source=source,
                             field=where)
        if f == "rate_Gbps":
            v = float(inputs.number(v, source, f"{where}.{f}", lo=0, lo_open=True))
        elif not isinstance(v, str) or not v:
            raise InputError(f"expected non-empty text, got {v!r}", source=source, field=f"{where}.{f}")
        out.append((f, v))
    return tuple(sorted(out))
