"""ASTRA-sim system JSON: every key ``Sys::initialize_sys`` reads, validated key by key.

Semantics (ASTRA-sim 518bd513, ``astra-sim/system/Sys.cc``, ``astraccl/CollectiveImplLookup.cc``):

* ``scheduling-policy`` LIFO / FIFO / EXPLICIT: priority of a new collective's chunks
  (LIFO: newer first, FIFO: older first, EXPLICIT: the node's ``comm_priority``).
* ``collective-optimization`` baseline / localBWAware: multi-dimensional all-reduce
  staging (RS up the dimensions, AR on the last, AG back down, or one AR per dimension).
* ``preferred-dataset-splits``: chunks per collective, ``chunk = size // splits``; the
  **size-inflation rule**: except for all-gather, a chunk smaller than the NPU count
  is raised to the NPU count (so the collective moves ``splits x NPUs`` bytes).
* ``endpoint-delay`` (ns, default 10, times ``--injection-scale`` only when given),
  ``active-chunks-per-dimension`` (chunks in flight per queue), ``local-mem-bw``
  (decimal GB/s: each reducing message costs ``3 * trunc(bytes / bw)`` ns),
  ``peak-perf`` (TFLOPS) and ``roofline-enabled``, ``replay-only``,
  ``track-local-mem``, ``trace-enabled``.
* ``<coll>-implementation``: one algorithm per dimension: ``ring``, ``direct``,
  ``directN`` (window N), ``halvingDoubling``, ``doubleBinaryTree``, or the flat
  ``oneRing`` / ``oneDirect[N]`` / ``oneHalvingDoubling``;
  ``<coll>-implementation-custom``: ``[ET prefix]`` of a Chakra SEND/RECV/COMP
  collective (overrides the native list); ``per-node-custom-implementation``: a YAML
  file ``{node id: ET prefix}`` (highest priority).

ASTRA-sim reads ``scheduling-policy``, ``preferred-dataset-splits`` and (for native
all-reduce) ``collective-optimization`` without defaults: a missing key is undefined
behaviour there, so :meth:`SystemConfig.require` raises :class:`InputError` naming
the key the first time a run needs it.  Keys ASTRA-sim ignores are accepted with a note.

>>> cfg = parse_system({"scheduling-policy": "LIFO", "preferred-dataset-splits": 4,
...                     "all-reduce-implementation": ["ring", "direct8"], "boost-mode": 0})
>>> [a.name for a in cfg.implementations["all_reduce"]], cfg.endpoint_delay_ns
(['ring', 'direct8'], 10)
>>> cfg.notes[0]
'boost-mode: ignored by ASTRA-sim (it never reads this key)'
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from netsim import inputs
from netsim.errors import InputError

#: Chakra collective -> ASTRA-sim JSON key prefix.
OPS = {"all_reduce": "all-reduce", "reduce_scatter": "reduce-scatter", "all_gather": "all-gather",
       "all_to_all": "all-to-all"}
POLICIES = ("LIFO", "FIFO", "EXPLICIT")
OPTIMIZATIONS = ("baseline", "localBWAware")
#: Read by ASTRA-sim but only for its legacy LogGP shared-bus model (model-shared-bus 1).
LEGACY_BUS = ("local-reduction-delay", "L", "o", "g", "G")
IGNORED = ("boost-mode", "intra-dimension-scheduling", "inter-dimension-scheduling")
_FLAGS = ("roofline-enabled", "replay-only", "trace-enabled", "track-local-mem", "model-shared-bus")


@dataclass(frozen=True)
class Algorithm:
    """One native algorithm: ``kind`` ring / direct / halvingDoubling / doubleBinaryTree,
    ``flat`` for the ``one*`` variants (one ring over all NPUs), ``window`` for direct (-1 = all)."""

    kind: str
    flat: bool = False
    window: int = -1

    @property
    def name(self) -> str:
        """The spelling ASTRA-sim accepts (``ring``, ``direct8``, ``oneHalvingDoubling``...)."""
        base = self.kind if not self.flat else "one" + self.kind[0].upper() + self.kind[1:]
        return base + (str(self.window) if self.kind == "direct" and self.window >= 0 else "")


def parse_algorithm(text: Any, source: str, where: str) -> Algorithm:
    """ASTRA-sim's ``generate_collective_impl_from_input`` for one list entry."""
    if not isinstance(text, str):
        raise InputError(f"expected an algorithm name (string), got {text!r}", source=source, field=where)
    if text == "ring":
        return Algorithm("ring")
    if text == "oneRing":
        return Algorithm("ring", flat=True)
    if text == "doubleBinaryTree":
        return Algorithm("doubleBinaryTree")
    if text == "halvingDoubling":
        return Algorithm("halvingDoubling")
    if text == "oneHalvingDoubling":
        return Algorithm("halvingDoubling", flat=True)
    for prefix, flat in (("direct", False), ("oneDirect", True)):
        if text.startswith(prefix):
            rest = text[len(prefix):]
            if rest == "":
                return Algorithm("direct", flat)
            m = re.match(r"[0-9]+", rest[:5])  # ASTRA-sim: stoi(substr(len(prefix), 5))
            if m and int(m.group()) > 0:
                return Algorithm("direct", flat, int(m.group()))
            raise InputError(f"{text!r}: expected {prefix} or {prefix}N with a window N >= 1",
                             source=source, field=where)
    raise InputError(f"unknown algorithm {text!r}; ASTRA-sim accepts ring, direct, directN, halvingDoubling, "
                     "doubleBinaryTree, oneRing, oneDirect[N], oneHalvingDoubling", source=source, field=where)


@dataclass(frozen=True)
class SystemConfig:
    """A parsed system JSON (None = key absent and ASTRA-sim has no default)."""

    source: str
    scheduling_policy: str | None = None
    collective_optimization: str | None = None
    preferred_dataset_splits: int | None = None
    endpoint_delay_ns: int = 10
    endpoint_delay_given: bool = False
    active_chunks_per_dimension: int = 1
    local_mem_bw_GBps: float = 0.0
    peak_perf_TFLOPS: float = 0.0
    roofline_enabled: bool = False
    replay_only: bool = False
    trace_enabled: bool = False
    track_local_mem: bool = False
    model_shared_bus: bool = False
    implementations: Mapping[str, tuple[Algorithm, ...]] = field(default_factory=dict)
    custom: Mapping[str, str] = field(default_factory=dict)
    per_node_custom: Mapping[int, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def require(self, key: str, why: str) -> Any:
        """The value of a key ASTRA-sim reads without a default; InputError when absent."""
        attr = key.replace("-", "_")
        value = getattr(self, attr)
        if value is None:
            raise InputError(f"missing; ASTRA-sim needs it {why} (without it ASTRA-sim reads an "
                             "uninitialized value and crashes or misbehaves)", source=self.source, field=key)
        return value

    def endpoint_delay(self, injection_scale: float = 1.0) -> int:
        """ns added per message step: ``int(endpoint-delay * --injection-scale)`` when the key
        is given, else ASTRA-sim's default 10 (the scale is not applied to the default)."""
        if not self.endpoint_delay_given:
            return self.endpoint_delay_ns
        return int(self.endpoint_delay_ns * injection_scale)

    def algorithms(self, op: str) -> tuple[Algorithm, ...]:
        """The native per-dimension list of ``op`` (empty when the key is absent)."""
        return tuple(self.implementations.get(op, ()))


#: Chunks per collective (preferred-dataset-splits, active-chunks-per-dimension): every chunk is
#: simulated step by step; ASTRA-sim's examples use 1-64.
MAX_SPLITS = 65_536
#: Unknown keys noted one by one up to this many; beyond, one summarised note.
MAX_KEY_NOTES = 20


def _number(j: dict, key: str, source: str, *, minimum: float = 0.0, integer: bool = False,
            positive: bool = False, maximum: float = 1e300) -> float | int | None:
    if key not in j:
        return None
    v = j[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise InputError(f"expected a number, got {v!r}", source=source, field=key)
    inputs.number(v, source, key)  # finite (also for ints beyond float range)
    if v < minimum or (positive and v <= 0) or v > maximum:
        low = f"{'>' if positive else '>='} {minimum:g}"
        raise InputError(f"expected a number {low} and <= {maximum:g}, got {v!r}", source=source, field=key)
    if integer:
        if v != int(v):
            raise InputError(f"expected an integer, got {v!r} (ASTRA-sim stores it in an int)",
                             source=source, field=key)
        return int(v)
    return v


def _flag(j: dict, key: str, source: str) -> bool:
    v = j.get(key, 0)
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)) and v in (0, 1):
        return bool(v)
    raise InputError(f"expected 0 or 1, got {v!r}", source=source, field=key)


def parse_system(j: Any, source: str = "system JSON", base_dir: str | Path | None = None) -> SystemConfig:
    """Validate a parsed system JSON object; see the module docstring."""
    if not isinstance(j, dict):
        raise InputError("expected a JSON object of system settings", source=source)
    notes: list[str] = []
    kw: dict[str, Any] = {}
    for key, choices, attr in (("scheduling-policy", POLICIES, "scheduling_policy"),
                               ("collective-optimization", OPTIMIZATIONS, "collective_optimization")):
        if key in j:
            if j[key] not in choices:
                raise InputError(f"expected one of {', '.join(choices)}, got {j[key]!r} (ASTRA-sim exits with "
                                 "'unknown value ... in sys input file')", source=source, field=key)
            kw[attr] = j[key]
    splits = _number(j, "preferred-dataset-splits", source, integer=True, positive=True, maximum=MAX_SPLITS)
    if splits is not None:
        kw["preferred_dataset_splits"] = splits
    delay = _number(j, "endpoint-delay", source, maximum=1e15)
    if delay is not None:
        if delay != int(delay):
            notes.append(f"endpoint-delay: {delay} truncated to {int(delay)} ns (ASTRA-sim stores it in an int)")
        kw.update(endpoint_delay_ns=int(delay), endpoint_delay_given=True)
    chunks = _number(j, "active-chunks-per-dimension", source, integer=True, minimum=1, maximum=MAX_SPLITS)
    if chunks is not None:
        kw["active_chunks_per_dimension"] = chunks
    for key, attr in (("local-mem-bw", "local_mem_bw_GBps"), ("peak-perf", "peak_perf_TFLOPS")):
        v = _number(j, key, source, maximum=1e9)
        if v is not None:
            kw[attr] = float(v)
    for key in _FLAGS:
        kw[key.replace("-", "_")] = _flag(j, key, source)
    if kw["model_shared_bus"]:
        raise InputError("1 (ASTRA-sim's legacy LogGP shared-bus model) is not supported by netsim; use 0",
                         source=source, field="model-shared-bus")
    if kw["roofline_enabled"] and (kw.get("peak_perf_TFLOPS", 0) <= 0 or kw.get("local_mem_bw_GBps", 0) <= 0):
        missing = "peak-perf" if kw.get("peak_perf_TFLOPS", 0) <= 0 else "local-mem-bw"
        raise InputError("must be > 0 when roofline-enabled is 1 (ASTRA-sim's roofline divides by it)",
                         source=source, field=missing)
    if kw["trace_enabled"]:
        notes.append("trace-enabled: issue/callback trace lines go to ASTRA-sim's log.log; netsim does not write them")
    impls: dict[str, tuple[Algorithm, ...]] = {}
    custom: dict[str, str] = {}
    for op, prefix in OPS.items():
        key = f"{prefix}-implementation"
        if key in j:
            if not isinstance(j[key], list) or not j[key]:
                raise InputError("expected a non-empty list with one algorithm per dimension",
                                 source=source, field=key)
            impls[op] = tuple(parse_algorithm(a, source, f"{key}[{i}]") for i, a in enumerate(j[key]))
            if op != "all_reduce" and any(a.kind == "doubleBinaryTree" for a in impls[op]):
                notes.append(f"{key}: doubleBinaryTree always runs an all-reduce tree in ASTRA-sim")
        ckey = f"{prefix}-implementation-custom"
        if ckey in j:
            v = j[ckey]
            if not isinstance(v, list) or len(v) != 1 or not isinstance(v[0], str):
                raise InputError("expected a list with exactly one Chakra ET prefix (ASTRA-sim throws "
                                 "'There should be 1 Chakra ET only')", source=source, field=ckey)
            custom[op] = resolve_prefix(v[0], base_dir, notes, ckey)
    per_node: dict[int, str] = {}
    if "per-node-custom-implementation" in j:
        per_node = _per_node(j["per-node-custom-implementation"], source, base_dir, notes)
    if "local-mem-trace-filename" in j and not kw["track_local_mem"]:
        notes.append("local-mem-trace-filename: used only with track-local-mem 1")
    for key in LEGACY_BUS:
        if key in j:
            notes.append(f"{key}: read by ASTRA-sim only for its LogGP shared bus (model-shared-bus 1); no effect")
    known = set(_FLAGS) | set(LEGACY_BUS) | {"scheduling-policy", "collective-optimization", "endpoint-delay",
                                             "preferred-dataset-splits", "active-chunks-per-dimension",
                                             "local-mem-bw", "peak-perf", "per-node-custom-implementation",
                                             "local-mem-trace-filename"}
    known |= {f"{p}-implementation{s}" for p in OPS.values() for s in ("", "-custom")}
    ignored = [key for key in j if key in IGNORED or key not in known]
    if len(ignored) > MAX_KEY_NOTES:  # one summarised note, not one line per key
        notes.insert(0, f"{len(ignored):,} keys ignored by ASTRA-sim (it never reads them), e.g. "
                        f"{', '.join(repr(k[:40]) for k in ignored[:3])}")
    else:
        notes[:0] = [f"{key}: ignored by ASTRA-sim (it never reads this key)" for key in ignored]
    return SystemConfig(source=source, implementations=impls, custom=custom, per_node_custom=per_node,
                        notes=tuple(notes), raw=dict(j), **kw)


def resolve_prefix(prefix: str, base_dir: str | Path | None, notes: list[str], key: str) -> str:
    """ASTRA-sim opens custom ETs relative to the working directory; when ``<prefix>.0.et`` is
    not there, also try the system JSON's folder and its parents (with a note)."""
    if Path(f"{prefix}.0.et").is_file() or Path(prefix).is_absolute() or base_dir is None:
        return prefix
    for parent in [Path(base_dir), *Path(base_dir).resolve().parents]:
        cand = parent / prefix
        if Path(f"{cand}.0.et").is_file():
            notes.append(f"{key}: {prefix!r} is relative to the working directory in ASTRA-sim; "
                         f"found it under {parent}")
            return str(cand)
    return prefix


def _per_node(path: Any, source: str, base_dir, notes: list[str]) -> dict[int, str]:
    key = "per-node-custom-implementation"
    if not isinstance(path, str):
        raise InputError("expected the path of a YAML file {node id: ET prefix}", source=source, field=key)
    p = Path(path)
    if not p.is_file() and base_dir is not None and (Path(base_dir) / p).is_file():
        p = Path(base_dir) / p
    if not p.exists():
        raise InputError(f"cannot read {path!r} (ASTRA-sim: 'Failed to open YAML file')",
                         source=source, field=key)
    data = inputs.load_yaml(p)
    if not isinstance(data, dict) or not all(isinstance(k, int) and isinstance(v, str) for k, v in data.items()):
        raise InputError("expected a mapping of integer node ids to ET prefixes", source=str(p))
    return {k: resolve_prefix(v, base_dir, notes, f"{key}[{k}]") for k, v in data.items()}


def load_system(path: str | Path) -> SystemConfig:
    """Read and validate an ASTRA-sim system JSON file (Python API of ``--system-configuration``)."""
    src = str(path)
    if not Path(path).exists():
        raise InputError("no such file (ASTRA-sim: 'Unable to open file')", source=src)
    data = inputs.load_json(path)
    return parse_system(data, src, Path(path).parent)
