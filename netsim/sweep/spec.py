"""Sweep files: parse, validate and expand into configurations (see ``docs/sweeps.md``).

A sweep file holds ``kind`` (``bench`` or ``run``), a ``base`` configuration, a ``grid``
(cartesian product), optional ``zip`` groups (parallel lists) and ``seeds``.  Keys are the
long flags of ``netsim bench`` / ``netsim run`` with ``_`` for ``-`` (``comm_groups``), dotted
paths into the topology file (``scale_out.nic_bw``, ``scale_out.tiers.1.oversubscription``,
``nodes``) and, for ``kind: run``, workload-generator parameters (``llm.model``, ``llm.tp``).

>>> s = parse_sweep({"kind": "bench", "base": {"topology": "topologies/dgx-h100.yaml", "op": "all_reduce",
...                  "size": "1M"}, "grid": {"gpus": [2, 4], "algo": ["ring", "tree"]}}, "s.yaml", ".")
>>> len(s.configs), s.swept, s.configs[0]["size"]
(4, ['gpus', 'algo'], 1048576)
"""

from __future__ import annotations

import inspect
import itertools
import re
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

from netsim import inputs, limits, units
from netsim.errors import InputError
from netsim.shipped import nearest, resolve
from netsim.results.dataset import run_id_for

KINDS = ("bench", "run")
TOP_KEYS = ("kind", "name", "description", "base", "grid", "zip", "seeds", "parts")
#: Keys of one entry of ``parts`` (a study of several kinds: each part is a sweep sharing the top level's axes).
PART_KEYS = ("kind", "name", "description", "base", "grid", "zip", "seeds")
#: First components of dotted paths that address the topology file (netsim and ASTRA-sim YAML).
TOPOLOGY_ROOTS = ("name", "description", "node", "nodes", "scale_out", "dims", "npus_count", "bandwidth",
                  "latency")
#: ``netsim bench`` flag names (keys) that differ from the BenchConfig field they set.
BENCH_RENAMES = {"datatype": "dtype", "proto": "protocol"}
#: ``netsim run`` keys -> simulate() parameter (``no_ctrl_deps`` is inverted into ``ctrl_deps``).
RUN_KEYS = {"topology": "topology", "workload": "workload", "comm_groups": "comm_groups", "model": "model",
            "no_ctrl_deps": "ctrl_deps", "streams": "streams"}
RUN_DEFAULTS = {"model": "flow", "no_ctrl_deps": False, "streams": 1, "placement": "packed", "engine": "auto"}
_NOT_KEYS = ("out", "overwrite", "replicas", "label", "notes", "overrides",  # simulate() arguments that the
             "progress", "dry_run")  # sweep owns (overrides: sweeps take dotted topology keys themselves)
PATH_KEYS = ("topology", "workload", "comm_groups", "skew_matrix", "faults")
#: Path keys that also take a bare shipped name (``topology: dgx-h100``), and the kind of that name.
SHIPPED_KINDS = {"topology": "topology", "faults": "faults"}
#: ``placement`` values that are specs, not files (anything else names a file of GPU ids).
PLACEMENT_KINDS = ("packed", "random", "strided")


#: Configurations in one sweep: each is a whole simulation, and expanding (and hashing) the grid
#: costs ~0.1 ms each, so 100,000 takes seconds even with --dry-run.
MAX_CONFIGS = 100_000
#: Integer keys: (lowest, highest) accepted value, as the flags of the same name (netsim.limits).
INT_KEYS = {**{k: limits.bounds(k) for k in ("gpus", "channels", "seed", "streams")},
            **{f"llm.{k}": limits.bounds(k) for k in ("tp", "pp", "dp", "ep", "cp", "microbatches", "seq",
                                                       "micro_batch", "vpp", "global_batch")}}


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


def _check_count(grid: dict, zips: list[dict], seeds: int | None, source: str) -> None:
    """Refuse, before expanding, a sweep of more than :data:`MAX_CONFIGS` configurations."""
    count = 1
    for vals in grid.values():
        count *= len(vals)
    for g in zips:
        count *= len(next(iter(g.values())))
    count *= seeds or 1
    if count > MAX_CONFIGS:
        raise InputError(f"the grid, zip and seeds give {count:,} configurations; expected at most {MAX_CONFIGS:,} "
                         "(split the study into several sweeps)", source=source, field="grid")


def bench_keys() -> dict[str, str]:
    """Sweep key -> :class:`netsim.perftests.BenchConfig` field (read live: new fields become keys)."""
    from netsim.perftests.collective import BenchConfig

    flag_of = {v: k for k, v in BENCH_RENAMES.items()}
    return {flag_of.get(f.name, f.name): f.name for f in fields(BenchConfig)}


def bench_defaults() -> dict[str, Any]:
    """Defaults filled into every bench configuration (BenchConfig defaults that are not None)."""
    from netsim.perftests.collective import BenchConfig

    flag_of = {v: k for k, v in BENCH_RENAMES.items()}
    return {flag_of.get(f.name, f.name): f.default for f in fields(BenchConfig)
            if f.name != "op" and f.default is not MISSING and f.default is not None}


def simulate_extras() -> list[str]:
    """Parameters of :func:`netsim.workload.simulation.simulate` beyond the ``netsim run`` flags (e.g. faults)."""
    from netsim.workload.simulation import simulate

    return [p for p in inspect.signature(simulate).parameters if p not in RUN_KEYS.values() and p not in _NOT_KEYS]


def llm_params() -> list[str]:
    """Keyword parameters of the LLM workload generator (``llm.<name>`` keys)."""
    from netsim.workload.generate.llm import generate_llm

    params = inspect.signature(generate_llm).parameters
    return ["model"] + [p for p, v in params.items() if v.kind is inspect.Parameter.KEYWORD_ONLY and p != "ranks"]


def topology_key(key: str) -> str | None:
    """The canonical dotted topology path of ``key``, or None if ``key`` is not a topology parameter.

    >>> topology_key("topology.scale_out.tiers[1].radix"), topology_key("nodes"), topology_key("gpus")
    ('scale_out.tiers.1.radix', 'nodes', None)
    """
    path = re.sub(r"\[([0-9]+)\]", r".\1", key)
    if path.startswith("topology."):
        return path[len("topology."):]
    return path if path.split(".")[0] in TOPOLOGY_ROOTS else None


def is_topology_param(key: str) -> bool:
    """Whether a canonical config key addresses the topology file."""
    return key != "topology" and key.split(".")[0] in TOPOLOGY_ROOTS + ("topology",)


@dataclass
class Sweep:
    """An expanded sweep: one dict per configuration, with its run_id and resolved file paths."""

    kind: str
    source: str
    configs: list[dict]
    run_ids: list[str]
    paths: list[dict]  # per configuration: key -> absolute path, for the workers
    swept: list[str] = field(default_factory=list)  # keys that vary (grid, zip, seed)
    name: str = ""

    def __len__(self) -> int:
        return len(self.configs)

    def label(self, i: int) -> str:
        """``key=value`` of the swept keys of configuration ``i`` (for messages)."""
        cfg = self.configs[i]
        return " ".join(f"{k}={cfg[k]}" for k in self.swept if k in cfg)


def load_sweep(path: str | Path) -> Sweep:
    """Read a sweep YAML file (or a shipped study by name: :func:`netsim.shipped.resolve`); relative
    paths inside resolve against its folder, then the cwd, then the shipped files."""
    p = Path(resolve(path, "study"))
    data = inputs.load_yaml(p)
    return parse_sweep(data, str(p), p.resolve().parent)


def parse_sweep(data: Any, source: str = "<sweep>", root: str | Path = ".") -> Sweep:
    """Validate a parsed sweep mapping and expand it (see the module docstring)."""
    if not isinstance(data, dict):
        raise InputError("expected a mapping with kind, base, grid, zip, seeds", source=source)
    unknown = sorted(set(data) - set(TOP_KEYS))
    if unknown:
        raise InputError(f"unknown key; expected one of {', '.join(TOP_KEYS)}", source=source, field=unknown[0])
    if "parts" in data:
        return _parse_parts(data, source, root)
    kind = data.get("kind")
    if kind not in KINDS:
        raise InputError(f"expected bench or run, got {kind!r}", source=source, field="kind")
    p = _Parser(kind, source, Path(root))
    base = p.mapping(data.get("base") or {}, "base")
    grid = {k: p.values(k, v, f"grid.{k}") for k, v in p.mapping(data.get("grid") or {}, "grid", raw=True).items()}
    zips = p.zips(data.get("zip"))
    seeds = data.get("seeds")
    if seeds is not None and (isinstance(seeds, bool) or not isinstance(seeds, int) or not 1 <= seeds <= MAX_CONFIGS):
        raise InputError(f"expected a positive integer up to {MAX_CONFIGS:,}, got {_short(seeds)}", source=source,
                         field="seeds")
    _check_count(grid, zips, seeds, source)
    axes: list[list[dict]] = [[{k: v} for v in vals] for k, vals in grid.items()]
    axes += [[{k: g[k][i] for k in g} for i in range(len(next(iter(g.values()))))] for g in zips]
    swept = list(grid) + [k for g in zips for k in g]
    seen: dict[str, str] = {}
    for k, where in [(k, "grid") for k in grid] + [(k, "zip") for g in zips for k in g]:
        if k in seen:
            raise InputError(f"swept twice (also in {seen[k]})", source=source, field=f"{where}.{k}")
        seen[k] = where
    if seeds:
        if "seed" in seen or "seed" in base:
            raise InputError("give seeds or a seed key, not both", source=source, field="seeds")
        axes.append([{"seed": s} for s in range(seeds)])
        swept.append("seed")
    defaults = bench_defaults() if kind == "bench" else dict(RUN_DEFAULTS)
    configs, ids, paths, index = [], [], [], {}
    for combo in itertools.product(*axes):
        cfg = {"kind": kind, **defaults, **base}
        for part in combo:
            cfg.update(part)
        p.check_config(cfg)
        rid = run_id_for(cfg)
        if rid in index:  # the same configuration twice (e.g. a grid value equal to another): run once
            continue
        index[rid] = len(configs)
        configs.append(cfg)
        ids.append(rid)
        paths.append({k: p.resolved[(k, cfg[k])] for k in PATH_KEYS + ("llm.model", "placement")
                      if isinstance(cfg.get(k), str) and (k, cfg[k]) in p.resolved})
    return Sweep(kind, source, configs, ids, paths, swept, str(data.get("name") or Path(source).stem))


def _parse_parts(data: dict, source: str, root: str | Path) -> Sweep:
    """A study of several parts (docs/sweeps.md, "Parts"): each entry of ``parts`` is a sweep of its
    own kind whose base, grid and zip groups are added to the top level's (a key may not be swept in
    both); the configurations are the parts' in order, each run once."""
    parts = data["parts"]
    if "kind" in data:
        raise InputError("give kind in every part, not at the top level", source=source, field="kind")
    if not isinstance(parts, list) or not parts or not all(isinstance(x, dict) for x in parts):
        raise InputError(f"expected a non-empty list of mappings (kind, base, grid, zip), got {_short(parts)}",
                         source=source, field="parts")
    top_zip = data.get("zip")
    top_zips = [] if top_zip is None else top_zip if isinstance(top_zip, list) else [top_zip]
    merged = []
    for i, part in enumerate(parts):
        where = f"parts[{i}]"
        unknown = sorted(set(part) - set(PART_KEYS))
        if unknown:
            raise InputError(f"unknown key; expected one of {', '.join(PART_KEYS)}", source=source,
                             field=f"{where}.{unknown[0]}")
        for key in ("base", "grid"):
            for name, block in ((key, data.get(key)), (f"{where}.{key}", part.get(key))):
                if block is not None and not isinstance(block, dict):
                    raise InputError(f"expected a mapping, got {type(block).__name__}", source=source, field=name)
        zips = part.get("zip")
        doc = {"kind": part.get("kind"), "base": {**(data.get("base") or {}), **(part.get("base") or {})},
               "grid": {**(data.get("grid") or {}), **(part.get("grid") or {})},
               "zip": top_zips + ([] if zips is None else zips if isinstance(zips, list) else [zips])}
        both = sorted(set(data.get("grid") or {}) & set(part.get("grid") or {}))
        if both:
            raise InputError("swept at the top level and in the part", source=source, field=f"{where}.grid.{both[0]}")
        if part.get("seeds", data.get("seeds")) is not None:
            doc["seeds"] = part.get("seeds", data.get("seeds"))
        try:
            merged.append(parse_sweep(doc, source, root))
        except InputError as exc:
            raise InputError(exc.message, source=source, field=f"{where}: {exc.field}" if exc.field else where) from None
    configs, ids, paths, swept, seen = [], [], [], [], set()
    for sub in merged:
        for cfg, rid, pth in zip(sub.configs, sub.run_ids, sub.paths):
            if rid not in seen:
                seen.add(rid)
                configs.append(cfg)
                ids.append(rid)
                paths.append(pth)
        swept += [k for k in sub.swept if k not in swept]
    kind = "+".join(dict.fromkeys(sub.kind for sub in merged))
    return Sweep(kind, source, configs, ids, paths, swept, str(data.get("name") or Path(source).stem))


class _Parser:
    """Key and value checks for one sweep file."""

    def __init__(self, kind: str, source: str, root: Path):
        self.kind, self.source, self.root = kind, source, root
        self.resolved: dict[tuple, str] = {}
        if kind == "bench":
            self.known = set(bench_keys()) | {"topology", "size"}
            self.aliases = {v: k for k, v in BENCH_RENAMES.items()}
        else:
            self.known = set(RUN_KEYS) | set(simulate_extras()) | {"seed"} | {f"llm.{p}" for p in llm_params()}
            self.aliases = {"comm-groups": "comm_groups", "no-ctrl-deps": "no_ctrl_deps"}
            if "stragglers" in self.known:  # netsim run --straggler RANK:FACTOR (repeatable)
                self.aliases["straggler"] = "stragglers"

    def key(self, key: Any, where: str) -> str:
        if not isinstance(key, str) or not key:
            raise InputError(f"expected a non-empty string key, got {key!r}", source=self.source, field=where)
        key = self.aliases.get(key, key)
        if key in self.known:
            return key
        topo = topology_key(key)
        if topo is not None:
            return topo if topo.split(".")[0] in TOPOLOGY_ROOTS else "topology." + topo
        hint = ("; workload-generator parameters are llm.<name>: " + ", ".join(llm_params())
                if self.kind == "run" else "")
        raise InputError(f"unknown key for kind {self.kind}; expected one of {', '.join(sorted(self.known))} "
                         f"or a dotted path into the topology (scale_out.nic_bw){hint}",
                         source=self.source, field=f"{where}.{key}" if where else key)

    def mapping(self, data: Any, where: str, raw: bool = False) -> dict:
        if not isinstance(data, dict):
            raise InputError(f"expected a mapping, got {type(data).__name__}", source=self.source, field=where)
        out = {}
        for k, v in data.items():
            key = self.key(k, where)
            out[key] = v if raw else self.value(key, v, f"{where}.{key}")
        return out

    def values(self, key: str, vals: Any, where: str) -> list:
        if not isinstance(vals, list) or not vals:
            raise InputError(f"expected a non-empty list of values, got {vals!r}", source=self.source, field=where)
        return [self.value(key, v, f"{where}[{i}]") for i, v in enumerate(vals)]

    def zips(self, data: Any) -> list[dict]:
        if data is None:
            return []
        groups = data if isinstance(data, list) else [data]
        out = []
        for gi, group in enumerate(groups):
            where = "zip" if not isinstance(data, list) else f"zip[{gi}]"
            g = {k: self.values(k, v, f"{where}.{k}") for k, v in self.mapping(group, where, raw=True).items()}
            if not g:
                raise InputError("expected at least one key", source=self.source, field=where)
            lengths = {k: len(v) for k, v in g.items()}
            if len(set(lengths.values())) > 1:
                raise InputError("zip lists must have equal lengths, got " +
                                 ", ".join(f"{k}: {n}" for k, n in lengths.items()), source=self.source, field=where)
            out.append(g)
        return out

    def value(self, key: str, v: Any, where: str) -> Any:
        """Normalize one value (op names, sizes, integers) and resolve file paths."""
        if key in INT_KEYS and v is not None:
            lo, hi = INT_KEYS[key]
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise InputError(f"expected an integer in {lo}..{hi:,}, got {_short(v)}", source=self.source,
                                 field=where)
            return v
        if key == "op":
            from netsim.results.nccl_table import canonical_op

            try:
                return canonical_op(v)
            except InputError as exc:
                raise exc.at(source=self.source, field=where) from None
        if key == "size":
            if isinstance(v, float) and v.is_integer():
                v = int(v)
            return units.parse_size(v, source=self.source, field=where)
        if key in ("routing", "scale_out.routing"):
            from netsim.topology.policy import check_routing

            return check_routing(v, source=self.source, field=where)
        if key == "compute_efficiency":  # checked like --compute-efficiency, kept as written (run ids)
            from netsim.workload.simulation import check_compute_efficiency

            try:
                check_compute_efficiency(v)
            except InputError as exc:
                raise InputError(exc.message, source=self.source, field=where) from None
            return v
        if key == "sm_contention" and v not in ("on", "off"):
            raise InputError(f"expected on or off, got {v!r}", source=self.source, field=where)
        if key == "faults" and isinstance(v, dict):  # an inline faults document
            return v
        if key == "placement":
            return self.placement(v, where)
        if key in PATH_KEYS + ("llm.model",) and v is not None:
            found = self.find(inputs.path_text(v, self.source, where), key)
            if found is None and key != "llm.model":
                kind = SHIPPED_KINDS.get(key)
                near = f", nor a shipped {kind} name; nearest shipped: {', '.join(nearest(v, kind))}" \
                    if kind and len(Path(v).parts) == 1 else ""
                raise InputError(f"no such file (looked in {self.root} and the current folder){near}",
                                 source=self.source, field=where)
            if found is not None:
                self.resolved[(key, v)] = found
        return v

    def placement(self, v: Any, where: str) -> str:
        """A placement spec (checked like ``--placement``) or a file of GPU ids (resolved)."""
        from netsim.topology.placement import place

        if not isinstance(v, str) or not v.strip():
            raise InputError(f"expected packed, random[:SEED], strided:K or a file of GPU ids, got {v!r}",
                             source=self.source, field=where)
        v = inputs.path_text(v.strip(), self.source, where)
        kind = v.partition(":")[0]
        if kind in PLACEMENT_KINDS:
            try:
                place(v, 1, 1)  # the syntax (seed, stride); GPU counts are checked per configuration
            except InputError as exc:
                raise InputError(exc.message, source=self.source, field=where) from None
            return v
        found = self.find(v)
        if found is None:
            raise InputError(f"expected packed, random[:SEED], strided:K or a file of GPU ids, got {v!r} "
                             f"(no such file in {self.root} or the current folder)", source=self.source, field=where)
        self.resolved[("placement", v)] = found
        return v

    def find(self, text: str, key: str | None = None) -> str | None:
        """``text`` in the sweep file's folder, then the current folder, then the shipped files (a
        repository-relative path, or a bare name of the kind ``key`` takes); None if nowhere."""
        for base in (self.root, Path.cwd()):
            p = (base / text).resolve()
            if p.exists() or (p.parent.is_dir() and any(p.parent.glob(f"{p.name}.*.et"))):
                return str(p)
        try:
            found = resolve(text, SHIPPED_KINDS.get(key or ""), prefix=key == "workload")
        except InputError:
            return None
        return str(found.resolve()) if isinstance(found, Path) else None

    def check_config(self, cfg: dict) -> None:
        need = ("topology", "op", "size") if self.kind == "bench" else ("topology",)
        for k in need:
            if cfg.get(k) is None:
                raise InputError(f"every configuration needs {k!r} (in base, grid or zip)", source=self.source,
                                 field="base")
        if self.kind == "run" and ("workload" in cfg) == ("llm.model" in cfg):
            raise InputError("kind run needs exactly one of workload (a trace) or llm.model (generated)",
                             source=self.source, field="base")
        if self.kind == "run" and "llm.model" in cfg:
            missing = [k for k in ("llm.tp", "llm.pp", "llm.dp") if k not in cfg]
            if missing:
                raise InputError(f"a generated workload needs {', '.join(missing)}", source=self.source,
                                 field="base")
