"""Stragglers and faults: seeded, declarative, applied to the runner and the topology.

``--straggler RANK:FACTOR`` (repeatable) multiplies one rank's compute times by FACTOR;
``--faults FILE.yaml`` describes the rest (schema and examples: ``docs/faults.md``):
compute slowdowns (fixed or drawn, per rank or per host), launch jitter, degraded links
(bandwidth factor) and failed links or switches (traffic is re-routed; rank pairs left
without a path are an :class:`~netsim.errors.InputError`).  Random draws come from
``numpy.random.default_rng([seed, section, rule])``: the same spec and seed give the same
faults everywhere, and editing one rule leaves the draws of the others unchanged.

>>> parse_straggler("3:1.5")
(3, 1.5)
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field, replace

import numpy as np

from netsim import inputs, units
from netsim.errors import InputError
from netsim.shipped import resolve
from netsim.topology.model import LINK_KINDS, NODE_KINDS, Topology, node_names  # noqa: F401 (re-exported)
from netsim.vocab import LINK_STATUS, SWITCH_KINDS, TIER_ORDER  # noqa: F401 (shared vocabulary, re-exported)
from netsim.workload.fault_routing import FaultRouter

_SECTIONS = {"compute": 1, "launch_jitter": 2, "links": 3, "switches": 4}
_SELECT = ("ranks", "hosts", "fraction", "count")
_FACTOR_DISTS = {"lognormal": ("sigma", "mu"), "normal": ("std", "mean"), "uniform": ("low", "high")}
_TIME_DISTS = {"uniform": ("low", "high"), "exponential": ("mean",), "normal": ("mean", "std"),
               "lognormal": ("median", "sigma")}


#: Slowdown and bandwidth factors: at most a million-fold (compute draws are clipped to
#: [1e-6, 1e6]; beyond that iteration times overflow to inf and runs end at t = nan).
MIN_FACTOR, MAX_FACTOR = 1e-6, 1e6
#: Fault seeds: numpy's SeedSequence takes any int, but results store the seed as int64.
MAX_SEED = 2**63 - 1
#: lognormal/normal spread of a factor: exp(10 sigma) already spans 43 decades.
MAX_SIGMA = 10.0
#: Ranks (and hosts) a straggler or rule names: at most the largest topology.
MAX_RANK = 1 << 20


def parse_straggler(text: str) -> tuple[int, float]:
    """``RANK:FACTOR`` -> ``(rank, factor)``; FACTOR in (0, 1e6] (2 = compute takes twice as long)."""
    m = re.fullmatch(r"\s*(-?[0-9]{1,12})\s*:\s*([0-9.eE+-]{1,40})\s*", str(text))  # ASCII digits
    try:
        rank, factor = int(m.group(1)), float(m.group(2))  # type: ignore[union-attr]
    except (AttributeError, ValueError):
        raise InputError(f"expected RANK:FACTOR like 3:1.5, got {text!r}", source="--straggler") from None
    if not 0 <= rank <= MAX_RANK:
        raise InputError(f"expected a RANK >= 0, got {text!r}", source="--straggler")
    if not (0 < factor <= MAX_FACTOR):
        raise InputError(f"expected a FACTOR in (0, {MAX_FACTOR:g}], got {text!r}", source="--straggler")
    return rank, factor


@dataclass(frozen=True)
class FaultSpec:
    """What to inject: ``seed``, ``stragglers`` ((rank, factor), ...) and ``doc`` (the faults file)."""

    seed: int = 0
    stragglers: tuple[tuple[int, float], ...] = ()
    doc: dict = field(default_factory=dict)
    source: str = "--faults"

    def config(self) -> dict:
        """The part of a run's config that describes the faults (hashed into the run id)."""
        return {"seed": self.seed, "stragglers": [list(s) for s in self.stragglers], "faults": self.doc or None}


def fault_spec(faults=None, stragglers=(), seed: int | None = None) -> FaultSpec:
    """A :class:`FaultSpec` from a faults YAML path (or dict), straggler strings/pairs and a seed.

    ``seed`` (``--seed``) wins over the file's ``seed``; the default is 0.
    """
    if isinstance(faults, (str, os.PathLike)):
        faults = resolve(faults, "faults")  # a path, or a shipped name (stragglers)
    doc, source = ({}, "--faults") if faults is None else (faults, "--faults") if isinstance(faults, dict) \
        else (_read_yaml(faults), str(faults))
    _validate(doc, source)
    pairs = tuple(parse_straggler(s if isinstance(s, str) else f"{s[0]}:{s[1]}") for s in stragglers)
    if seed is not None and (type(seed) is not int or not 0 <= seed <= MAX_SEED):
        raise InputError(f"expected an integer in 0..2**63-1, got {seed!r}", source="--seed")
    return FaultSpec(int(seed if seed is not None else doc.get("seed", 0)), pairs, doc, source)


@dataclass
class FaultPlan:
    """Faults resolved on one topology: per-rank arrays, per-link arrays, the faulty topology."""

    compute_scale: np.ndarray
    launch_delay: np.ndarray  # seconds
    link_factor: np.ndarray
    failed: np.ndarray  # bool per link
    topology: Topology

    @property
    def link_status(self) -> np.ndarray:
        """Per link: 0 ok, 1 degraded, 2 failed (indexes :data:`LINK_STATUS`)."""
        return np.where(self.failed, 2, np.where(self.link_factor != 1.0, 1, 0)).astype(np.int8)


def plan_faults(spec: FaultSpec, topo: Topology, n_ranks: int, model: str = "flow",
                gpus: np.ndarray | None = None) -> FaultPlan:
    """Draw and apply ``spec`` for a workload of ``n_ranks`` ranks on ``topo``.

    ``gpus``: topology GPU of every rank (the placement; default rank r on GPU r).  A
    rank's host is its GPU's scale-up domain (``gpu // gpus_per_node``).
    """
    doc, src = spec.doc, spec.source
    scale, delay = np.ones(n_ranks), np.zeros(n_ranks)
    gpus = np.arange(n_ranks, dtype=np.int64) if gpus is None else np.asarray(gpus, dtype=np.int64)
    host_of = gpus // max(1, topo.gpus_per_node)
    for section, out in (("compute", scale), ("launch_jitter", delay)):
        for k, rule in enumerate(_as_list(doc.get(section))):
            rng, where = _rng(spec.seed, section, k), f"{section}[{k}]"
            ranks, slot = _pick_ranks(rule, n_ranks, host_of, rng, src, where)
            draws = _draws(rule, slot.max(initial=-1) + 1, rng, src, where, section == "launch_jitter")[slot]
            if section == "compute":
                out[ranks] *= draws
            else:
                out[ranks] += draws
    for rank, factor in spec.stragglers:
        if not 0 <= rank < n_ranks:
            raise InputError(f"rank {rank} is not a rank of the workload (0..{n_ranks - 1})", source="--straggler")
        scale[rank] *= factor
    factor, failed, names = np.ones(topo.n_links), np.zeros(topo.n_links, dtype=bool), None
    for section in ("links", "switches"):
        for k, rule in enumerate(doc.get(section, [])):
            names = names or _Names(topo)
            sel = _pick_links(rule, topo, names, _rng(spec.seed, section, k), src, f"{section}[{k}]")
            if rule.get("failed"):
                failed[sel] = True
            else:
                factor[sel] *= float(rule["factor"])
    if (factor != 1).any() or failed.any():
        if topo.facts.astra_network and model == "analytical":
            raise InputError("link and switch faults need --model flow on an ASTRA-sim network (its analytical "
                             "model charges dimensions, not links)", source=src, field="links/switches")
        router = FaultRouter(topo, failed, n_ranks, gpus=gpus) if failed.any() else topo.router
        topo = replace(topo, link_bw=topo.link_bw * factor, router=router)
    return FaultPlan(scale, delay, factor, failed, topo)


# ------------------------------------------------------------------ validation
def _read_yaml(path) -> dict:
    """A faults file's mapping; a file that describes no fault (empty, or no rule section) is refused:
    ``--faults`` turns replica symmetry off, so an empty file would only slow the run down silently."""
    data = inputs.load_yaml(path)
    expect = "a mapping with seed, compute, launch_jitter, links, switches"
    if data is None:
        raise InputError(f"is empty; expected {expect} (docs/faults.md)", source=str(path))
    if not isinstance(data, dict):
        raise InputError(f"expected {expect}", source=str(path))
    if not any(data.get(section) for section in _SECTIONS) and set(data) <= {"seed", *_SECTIONS}:
        raise InputError("describes no fault; expected at least one rule under compute, launch_jitter, links "
                         "or switches (docs/faults.md)", source=str(path))
    return data


_KEYS = {"compute": {*_SELECT, "unit", "factor", "distribution", "min", "max"},
         "launch_jitter": {*_SELECT, "unit", "delay", "distribution", "max"},
         "links": {"match", "factor", "failed", "fraction", "count", "both_directions"},
         "switches": {"node", "kind", "factor", "failed", "fraction", "count"}}
_POSITIVE = (lambda v: _num(v) and MIN_FACTOR <= v <= MAX_FACTOR,
             f"a positive number in {MIN_FACTOR:g}..{MAX_FACTOR:g}")
_CHECKS = {"fraction": (lambda v: _num(v) and 0 < v <= 1, "a number in (0, 1]"),
           "count": (lambda v: type(v) is int and 0 <= v <= MAX_RANK, f"an integer in 0..{MAX_RANK}"),
           "unit": (lambda v: v in ("rank", "host"), "rank or host"),
           "both_directions": (lambda v: isinstance(v, bool), "true or false"),
           "failed": (lambda v: v is True, "true"), "factor": _POSITIVE, "min": _POSITIVE, "max": _POSITIVE,
           "match": (lambda v: isinstance(v, dict) and set(v) <= {"kind", "tier", "link", "node"},
                     "a mapping with kind, tier, link and/or node")}


def _validate(doc: dict, src: str) -> None:
    """Structure checks naming the rule (``links[2].factor``); parameter values are checked when drawn."""
    def fail(where, msg):
        raise InputError(msg, source=src, field=where)

    for key in sorted(set(doc) - {"seed", *_SECTIONS}):
        fail(key, "unknown key; expected seed, compute, launch_jitter, links, switches")
    if type(doc.get("seed", 0)) is not int or not 0 <= doc.get("seed", 0) <= MAX_SEED:
        fail("seed", f"expected an integer in 0..2**63-1, got {_short(doc['seed'])}")
    for section, allowed in _KEYS.items():
        if section != "launch_jitter" and not isinstance(doc.get(section, []), list):
            fail(section, "expected a list of rules")
        for k, rule in enumerate(_as_list(doc.get(section))):
            where = section if isinstance(doc[section], dict) else f"{section}[{k}]"
            if not isinstance(rule, dict):
                fail(where, "expected a mapping")
            for key in sorted(set(rule) - allowed):
                fail(f"{where}.{key}", f"unknown key; expected one of {', '.join(sorted(allowed))}")
            if len([s for s in _SELECT if s in rule]) > 1:
                fail(where, "give at most one of ranks, hosts, fraction, count")
            for key, (ok, what) in _CHECKS.items():
                if key in rule and not (section == "launch_jitter" and key == "max") and not ok(rule[key]):
                    fail(f"{where}.{key}", f"expected {what}, got {_short(rule[key])}")
            if section in ("compute", "launch_jitter"):
                const, dists = ("factor", _FACTOR_DISTS) if section == "compute" else ("delay", _TIME_DISTS)
                d = rule.get("distribution")
                if (const in rule) == (d is not None):
                    fail(where, f"give {const} or distribution (one of them)")
                if d is not None and not (isinstance(d, dict) and len(d) == 1 and next(iter(d)) in dists
                                          and isinstance(next(iter(d.values())), dict)):
                    fail(f"{where}.distribution", f"expected one of {', '.join(dists)} with its parameters")
                for name, params in (d or {}).items():
                    for key in sorted(set(params) - set(dists[name])):
                        fail(f"{where}.distribution.{name}.{key}", f"unknown; expected {', '.join(dists[name])}")
                    _check_params(name, params, section == "launch_jitter", src, f"{where}.distribution.{name}")
                if section == "compute" and _num(rule.get("min", 1)) and _num(rule.get("max", 1)) \
                        and rule.get("min", 0) > rule.get("max", MAX_FACTOR):
                    fail(f"{where}.min", f"expected min <= max, got {rule['min']!r} > {rule['max']!r}")
            elif ("failed" in rule) == ("factor" in rule):
                fail(where, "expected factor: F (bandwidth multiplier) or failed: true (one of them)")
            if (section == "links") != ("match" in rule) or (section == "switches" and ("node" in rule) == ("kind" in rule)):
                fail(where, "expected match: {kind, tier, link, node}" if section == "links" else "give node or kind")


def _check_params(name: str, p: dict, time: bool, src: str, where: str) -> None:
    """Distribution parameters: finite, in range, ``low <= high`` (checked before any simulation)."""
    def fail(key, msg):
        raise InputError(msg, source=src, field=f"{where}.{key}")

    def value(key):
        if time and key != "sigma":
            return units.parse_time(p[key], source=src, field=f"{where}.{key}")
        if not _num(p[key]):
            fail(key, f"expected a number, got {_short(p[key])}")
        return float(p[key])

    vals = {k: value(k) for k in p}
    for key, limit in {"sigma": MAX_SIGMA, "std": units.MAX_TIME if time else MAX_FACTOR}.items():
        if key in vals and not 0 <= vals[key] <= limit:
            fail(key, f"expected a spread in 0..{limit:g}, got {_short(p[key])}")
    for key in ("mu",):
        if key in vals and not -20 <= vals[key] <= 20:  # exp(20) ~ 5e8: a median slowdown beyond MAX_FACTOR
            fail(key, f"expected a log-mean in -20..20, got {_short(p[key])}")
    if not time:
        for key in ("low", "high", "mean"):
            if key in vals and not MIN_FACTOR <= vals[key] <= MAX_FACTOR:
                fail(key, f"expected a factor in {MIN_FACTOR:g}..{MAX_FACTOR:g}, got {_short(p[key])}")
    if "low" in vals and "high" in vals and vals["low"] > vals["high"]:
        fail("low", f"expected low <= high, got {p['low']!r} > {p['high']!r}")
    if time and "mean" in vals and name == "exponential" and vals["mean"] <= 0:
        fail("mean", f"expected a positive mean delay, got {p['mean']!r}")


def _short(v) -> str:
    text = repr(v)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


def _num(x) -> bool:
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return False
    try:
        return math.isfinite(x)
    except OverflowError:  # an int beyond float range
        return False


def _as_list(value) -> list:
    return [] if value is None else value if isinstance(value, list) else [value]


# ------------------------------------------------------------------ drawing
def _rng(seed: int, section: str, rule: int) -> np.random.Generator:
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, _SECTIONS[section], rule])


def _sample(ids: np.ndarray, rule, rng) -> np.ndarray:
    """All ``ids``, or a seeded subset of ``count`` or ``fraction`` of them (at least one)."""
    if "fraction" not in rule and "count" not in rule:
        return ids
    k = rule["count"] if "count" in rule else max(1, int(round(rule["fraction"] * ids.size)))
    return np.sort(rng.choice(ids, size=min(k, ids.size), replace=False)) if ids.size else ids


def _pick_ranks(rule, n, host_of, rng, src, where) -> tuple[np.ndarray, np.ndarray]:
    """Selected ranks and, per selected rank, its draw slot (one draw per rank or per host).

    ``host_of``: the host of every rank; the units drawn from are the hosts that hold ranks."""
    host = "hosts" in rule or (rule.get("unit") == "host" and "ranks" not in rule)
    unit_of = host_of if host else np.arange(n)
    units, key = np.unique(unit_of), ("hosts" if host else "ranks")
    chosen = _sample(units, rule, rng)
    if key in rule:
        ids = rule[key]
        valid = set(units.tolist())
        if not (isinstance(ids, list) and all(type(i) is int and i in valid for i in ids)):
            span = (f"in 0..{units.size - 1}" if np.array_equal(units, np.arange(units.size))
                    else f"among the job's hosts {units[:8].tolist()}{'...' if units.size > 8 else ''}")
            raise InputError(f"expected a list of {key} {span}, got {ids!r}", source=src, field=f"{where}.{key}")
        chosen = np.unique(np.asarray(ids, dtype=np.int64))
    ranks = np.flatnonzero(np.isin(unit_of, chosen))
    return ranks, np.searchsorted(chosen, unit_of[ranks])


def _draws(rule, size: int, rng, src: str, where: str, time: bool) -> np.ndarray:
    """Compute factors (``time=False``) or launch delays in seconds, one per slot."""
    def num(p, key, default=None, t=time):
        value = p.get(key, default)
        if t:
            return units.parse_time(value, source=src, field=f"{where}.{key}")
        if not _num(value):
            raise InputError(f"expected a number, got {value!r}", source=src, field=f"{where}.{key}")
        return float(value)

    const = "delay" if time else "factor"
    if const in rule:
        out = np.full(size, num(rule, const))
    else:
        name, p = next(iter(rule["distribution"].items()))
        where = f"{where}.distribution.{name}"
        if name == "uniform":
            out = rng.uniform(num(p, "low"), num(p, "high"), size)
        elif name == "exponential":
            out = rng.exponential(num(p, "mean"), size)
        elif name == "normal":
            out = rng.normal(num(p, "mean", None if time else 1.0), num(p, "std"), size)
        elif time:  # lognormal around a median delay
            out = num(p, "median") * np.exp(rng.normal(0.0, num(p, "sigma", t=False), size))
        else:
            out = np.exp(rng.normal(num(p, "mu", 0.0), num(p, "sigma"), size))
    if time:
        return np.clip(out, 0.0, num(rule, "max") if "max" in rule else np.inf)
    return np.clip(out, max(float(rule.get("min", MIN_FACTOR)), MIN_FACTOR), float(rule.get("max", MAX_FACTOR)))


# ------------------------------------------------------------------ selecting links
class _Names:
    """Node ids by name, link ids by (src, dst), each link's reverse and tier."""

    def __init__(self, topo: Topology):
        self.index = {name: i for i, name in enumerate(node_names(topo))}
        self.n = np.int64(topo.n_nodes)
        keys = topo.link_src.astype(np.int64) * self.n + topo.link_dst
        self.order = np.argsort(keys, kind="stable")
        self.sorted = keys[self.order]
        self.reverse = self.find(topo.link_dst, topo.link_src)
        level = np.array([TIER_ORDER.index(k) for k in NODE_KINDS])
        kinds = topo.node_kind
        self.tier = np.array(TIER_ORDER)[np.maximum(level[kinds[topo.link_src]], level[kinds[topo.link_dst]])]

    def find(self, s, d) -> np.ndarray:
        """Link id of each (s, d) node pair, -1 when there is none."""
        keys = np.asarray(s, np.int64) * self.n + np.asarray(d, np.int64)
        if not self.sorted.size:
            return np.full(keys.shape, -1)
        pos = np.minimum(np.searchsorted(self.sorted, keys), self.sorted.size - 1)
        return np.where(self.sorted[pos] == keys, self.order[pos], -1)

    def node(self, name, src, where) -> int:
        if isinstance(name, str) and name in self.index:
            return self.index[name]
        raise InputError(f"no node {name!r} in the topology (names look like gpu0, nvswitch0, nic0, leaf0, "
                         "spine0)", source=src, field=where)

    def link(self, x, src, where) -> np.ndarray:
        """Ids named by a link id, ``a->b`` (one direction) or ``a<->b`` (both)."""
        if type(x) is int and 0 <= x < self.reverse.size:
            return np.array([x])
        m = re.fullmatch(r"\s*(\w+)\s*(<->|->)\s*(\w+)\s*", str(x))
        if not m:
            raise InputError(f"expected a link id (0..{self.reverse.size - 1}) or a name like leaf0->spine1 "
                             f"or leaf0<->spine1, got {x!r}", source=src, field=where)
        a, b = self.node(m.group(1), src, where), self.node(m.group(3), src, where)
        ids = self.find([a, b], [b, a])[:1 if m.group(2) == "->" else 2]
        if ids[0] < 0:
            raise InputError(f"no link {x!r} in the topology", source=src, field=where)
        return ids[ids >= 0]


def _pick_links(rule, topo, names: _Names, rng, src, where) -> np.ndarray:
    """Link ids a links/switches rule selects (both directions of a cable unless told otherwise)."""
    if "match" not in rule:  # a switches rule: every link touching the chosen switches
        if "node" in rule:
            nodes = np.array([names.node(x, src, f"{where}.node") for x in _as_list(rule["node"])])
        else:
            kinds = [NODE_KINDS.index(k) for k in _as_list(rule["kind"]) if k in SWITCH_KINDS]
            nodes = _sample(np.flatnonzero(np.isin(topo.node_kind, kinds)), rule, rng)
        if not nodes.size or any(NODE_KINDS[int(topo.node_kind[v])] not in SWITCH_KINDS for v in nodes):
            raise InputError(f"expected switches ({', '.join(SWITCH_KINDS)}); fail GPU or NIC links with links: "
                             "rules", source=src, field=where)
        return np.flatnonzero(np.isin(topo.link_src, nodes) | np.isin(topo.link_dst, nodes))
    m, mask = rule["match"], np.ones(topo.n_links, dtype=bool)
    for key, known, have in (("kind", LINK_KINDS, lambda: np.array(LINK_KINDS)[topo.link_kind]),
                             ("tier", TIER_ORDER, lambda: names.tier)):
        if key in m:
            if any(v not in known for v in _as_list(m[key])):
                raise InputError(f"expected one of {', '.join(known)}, got {m[key]!r}", source=src,
                                 field=f"{where}.match.{key}")
            mask &= np.isin(have(), _as_list(m[key]))
    if "link" in m:
        ids = [names.link(x, src, f"{where}.match.link") for x in _as_list(m["link"])]
        mask &= np.isin(np.arange(topo.n_links), np.concatenate(ids))
    if "node" in m:
        nodes = [names.node(x, src, f"{where}.match.node") for x in _as_list(m["node"])]
        mask &= np.isin(topo.link_src, nodes) | np.isin(topo.link_dst, nodes)
    cand, rev = np.flatnonzero(mask), names.reverse
    both = rule.get("both_directions", True)
    if both:  # sample cables, not directions
        cand = np.unique(np.where(rev[cand] >= 0, np.minimum(cand, rev[cand]), cand))
    cand = _sample(cand, rule, rng)
    if not cand.size:
        raise InputError("matches no link", source=src, field=f"{where}.match")
    return np.unique(np.concatenate([cand, rev[cand][rev[cand] >= 0]])) if both else cand
