"""``netsim.simulate`` (the Python API of ``netsim run``): a Chakra workload on a topology.

Below :mod:`netsim.cli.workload` (the command line) and :mod:`netsim.workload.llmrun`
(``run --llm``), which both call it; it imports nothing heavy at module level.
"""

from __future__ import annotations

from netsim.collectives.executor import ENGINES
from netsim.errors import InputError
from netsim.network.models import network_class


#: ``symmetry`` values: replica symmetry where proven exact (else every rank), even where not, or never.
SYMMETRIES = ("auto", "approximate", "none")


def simulate(topology, workload, comm_groups=None, model: str = "flow", ctrl_deps: bool = True,
             streams: int = 1, *, stragglers=(), faults=None, seed: int | None = None,
             routing: str | None = None, placement: str = "packed",
             engine: str = "auto", out=None, overwrite: bool = False, replicas=None, label: dict | None = None,
             notes=(), overrides: dict | None = None, progress: bool = False, schedules=None,
             compute_efficiency=None, symmetry: str = "auto", sm_contention: str = "on", full_tables=None,
             dry_run: bool = False):
    """Python API of ``netsim run``: returns a :class:`~netsim.workload.runner.WorkloadResult`.

    ``compute_efficiency`` (``--compute-efficiency``): the achieved fraction of the roofline (the GPU's
    peak FLOP/s, or its HBM bandwidth for memory-bound nodes) of roofline-timed compute (nodes with
    ``num_ops`` and no ``duration_micros``, :mod:`netsim.workload.compute`).  ``None`` (default): the GPU
    preset's figure for each node's kernel kind (``op_kind``; nodes naming none, as in ASTRA-sim's traces,
    run at the roofline).  ``"peak"``: every node at the roofline.  F: every node at F x the roofline.  ``{"gemm": 0.7, ...}``: those
    kinds replaced.  See :func:`check_compute_efficiency`.  A setting is recorded in the run's
    config; the fractions used, per kind, in the ``runs`` table (``compute_efficiency_used.*``).

    ``sm_contention`` (``--sm-contention``): ``on`` (default) slows a rank's GPU compute while its
    communication kernels hold SMs (:class:`netsim.workload.compute.SmShare`; GPU presets with an SM
    count only), ``off`` leaves compute alone as ASTRA-sim does.  ``off`` is recorded in the config; the
    ``runs`` table records ``sm_contention`` (whether it applied) and ``gpu_sms``.

    ``schedules``: ``factory(topology, model) -> schedule function`` for the collectives (default:
    NCCL's plans; :func:`netsim.workload.moe_run.schedules_factory` plans MoE all-to-alls).

    ``stragglers``: ``"RANK:FACTOR"`` strings or ``(rank, factor)`` pairs; ``faults``: a faults
    YAML path or dict (``docs/faults.md``); ``seed`` overrides its seed.  ``placement``: which
    topology GPU each job rank runs on (``packed``, ``random[:SEED]``, ``strided:K`` or a file
    of GPU ids; :func:`netsim.topology.placement.place`); a non-packed placement switches
    replica symmetry off (every rank must then be in ``workload``).  ``engine``: ``auto``
    evaluates collectives off the event queue where exact, ``event`` simulates every one
    event-driven (the reference).  ``notes`` are prepended to the run's notes.  ``workload`` may also
    be a dict rank -> NodeTable and ``comm_groups`` a dict name -> ranks (in memory; ``label``
    then names the workload in the run's config), ``routing`` (``ecmp``, ``adaptive``, ``spray``)
    overrides the topology's scale-out routing (:func:`netsim.topology.policy.with_routing`), ``replicas`` a
    :class:`~netsim.workload.replicas.Replicas` (``workload`` needs only the representatives).  ``result.tables()``
    gives the results tables as DataFrames; ``out`` also writes them as a dataset
    (``netsim.results.dataset.run_id_for(result.config)`` names the run).  ``overrides``: dotted
    topology keys -> values applied to the topology file (``--set``; part of the config).
    ``progress``: a bar of executed ops on stderr (:mod:`netsim.progress`).  ``dry_run``: check
    every input exactly as a run does (topology, overrides, workload, groups, placement, faults,
    the runner's set-up) and return None without simulating (``netsim sweep --dry-run``).

    ``symmetry`` (``--symmetry``): ``auto`` looks for replica symmetry in a file set (ranks whose
    traces are the same up to a renaming of ranks and groups, :mod:`netsim.workload.file_symmetry`)
    and simulates one replica standing for all when it is proven exact for this run
    (:mod:`netsim.workload.symmetry`: every replica planned as the representatives, every copy
    finishing with its representative), else every rank; the notes say what was de-duplicated or
    why not.  ``approximate`` keeps one replica even where copies finish apart (the notes give the
    spread; no bound).  ``none`` simulates every rank.  In-memory workloads and ``replicas`` given
    by the caller are taken as they are; ``full_tables`` (every rank's tables, or a function
    returning them) is what an unproven replica run falls back to.
    """
    import time

    from netsim.topology.placement import place
    from netsim.workload.faults import plan_faults
    from netsim.workload.runner import WorkloadRun

    t0 = time.perf_counter()
    config, spec, efficiency, placement = _run_config(
        topology, workload, comm_groups, label, model, ctrl_deps, streams, faults, stragglers, seed, placement,
        engine, symmetry, sm_contention, compute_efficiency, routing, overrides)
    if out is not None:
        from netsim.results.dataset import check_writable, run_id_for
        check_writable(out, run_id_for(config), overwrite)
    topo = _topology(topology, overrides, routing)
    scan, tables, groups, world = _workload(workload, comm_groups, symmetry, replicas)
    gpus = place(placement, world, topo.n_gpus)
    plan = plan_faults(spec, topo, world, model, gpus=gpus)
    if scan is not None:
        replicas, note = _file_replicas(scan, groups, gpus, bool(stragglers) or faults is not None)
        notes = [*notes, note] if note else notes
        tables = scan.tables(None if replicas is None else replicas.reps)
        if replicas is not None:  # every rank's tables, read only if the replica run is not exact
            full_tables = _checked(scan.tables, None)
        _check_runnable(tables)
    sfn = None if schedules is None else schedules(plan.topology, model)
    run_topo, eff_note = _with_compute_efficiency(plan.topology, efficiency)
    wr = WorkloadRun(run_topo, tables, groups, model, ctrl_deps=ctrl_deps, streams=streams,
                     compute_scale=plan.compute_scale, launch_delay=plan.launch_delay, replicas=replicas,
                     placement=gpus, fast=engine == "auto", network=network_class(model, engine), schedule_fn=sfn,
                     sm_contention=sm_contention == "on",
                     symmetry="approximate" if symmetry == "approximate" else "exact", full_tables=full_tables)
    if dry_run:
        return None
    from netsim.progress import Poller
    total = sum(len(st.table) for st in wr.ranks)  # executed ops (a repeated run starts over)
    with Poller(total, lambda: len(wr.ops), "run", "op", progress,
                postfix=lambda: f"{wr.env.now * 1e6:,.1f} us simulated"):
        res = wr.run()
    _add_notes(res, notes, wr, sfn, run_topo, eff_note)
    res.config, res.link_status, res.wall_time_s = config, plan.link_status, time.perf_counter() - t0
    if out is not None:
        res.write(out, overwrite=overwrite)
    return res


def _run_config(topology, workload, comm_groups, label, model, ctrl_deps, streams, faults, stragglers, seed,
                placement, engine, symmetry, sm_contention, compute_efficiency, routing, overrides):
    """The run's config (what names it: its run id) after checking every setting, with the fault
    spec, the compute efficiency and the placement as the run uses them."""
    from netsim.limits import check_int
    from netsim.topology.model import Topology
    from netsim.topology.policy import check_routing
    from netsim.workload.faults import fault_spec

    check_int(streams, "streams", "--streams")
    if symmetry not in SYMMETRIES:
        raise InputError(f"expected one of {', '.join(SYMMETRIES)}, got {symmetry!r}", source="--symmetry")
    if engine not in ENGINES:
        raise InputError(f"expected one of {', '.join(ENGINES)}, got {engine!r}", source="--engine")
    placement = "packed" if placement is None else str(placement).strip()
    spec = fault_spec(faults, stragglers, seed)
    in_memory = isinstance(workload, dict)
    config = {"command": "run", "topology": topology.name if isinstance(topology, Topology) else str(topology),
              **(label if label is not None else
                 {"workload": "in memory" if in_memory else str(workload),
                  "comm_groups": None if comm_groups is None or isinstance(comm_groups, dict) else str(comm_groups)}),
              "model": model, "ctrl_deps": bool(ctrl_deps), "streams": int(streams), **spec.config(),
              "placement": placement, "engine": engine}
    if symmetry != "auto" and not in_memory and label is None:
        config["symmetry"] = symmetry  # auto is the default: left out of the run id
    if sm_contention not in ("on", "off"):
        raise InputError(f"expected on or off, got {sm_contention!r}", source="--sm-contention")
    if sm_contention == "off":
        config["sm_contention"] = "off"  # on is the default: left out of the run id
    efficiency = check_compute_efficiency(compute_efficiency)
    if efficiency is not None:
        config["compute_efficiency"] = efficiency
    if routing is not None or (isinstance(topology, Topology) and topology.routing != "ecmp"):
        config["routing"] = check_routing(routing) if routing is not None else topology.routing
    if overrides:
        if isinstance(topology, Topology):
            raise InputError("topology overrides apply to a topology file, not a built Topology", source="--set")
        config["set"] = dict(overrides)
    return config, spec, efficiency, placement


def _topology(topology, overrides, routing):
    """The topology the run uses: built, or read from its file with ``--set`` overrides, then routed."""
    from netsim.topology.model import Topology
    from netsim.topology.overrides import load_with_overrides
    from netsim.topology.policy import with_routing
    from netsim.topology.spec import load_topology

    if overrides and not isinstance(topology, Topology):
        topo = load_with_overrides(str(topology), dict(overrides))
    else:
        topo = topology if isinstance(topology, Topology) else load_topology(topology)
    return with_routing(topo, routing) if routing is not None else topo


def _workload(workload, comm_groups, symmetry, replicas):
    """(scan, tables, groups, world): a file set that may be symmetric is only scanned (its tables
    are read later for the ranks simulated); otherwise every rank's tables, checked."""
    from pathlib import Path

    from netsim.chakra.canonical import scan_workload
    from netsim.chakra.groups import CommGroups, load_groups
    from netsim.chakra.inspect import read_workload

    scan = tables = None
    if isinstance(workload, dict):
        tables = workload
    elif symmetry != "none" and replicas is None and not Path(workload).is_file():
        scan = scan_workload(workload)  # signatures; tables are read again for the ranks simulated
    else:
        tables = read_workload(workload)
    if scan is None:
        _check_runnable(tables)
    world = replicas.world if replicas is not None else len(tables) if tables is not None else scan.world
    if isinstance(comm_groups, dict):
        groups = CommGroups(comm_groups, world)
    else:
        groups = load_groups(comm_groups, tables if tables is not None else {}, world,
                             declared=None if scan is None else scan.declarations())
    return scan, tables, groups, world


def _check_runnable(tables) -> None:
    from netsim.chakra.check import check_runnable

    for table in {id(t): t for t in tables.values()}.values():  # shared tables checked once
        check_runnable(table)


def _add_notes(res, notes, wr, sfn, run_topo, eff_note) -> None:
    """The run's notes: the caller's and the compute efficiency's first, then the runner's, the
    schedules' and the network's (e.g. no numba)."""
    used = wr.roofline.used()
    if eff_note is None and any(v != 1.0 for v in used.values()):
        eff_note = (f"compute at {', '.join(f'{k} {v:.3g}' for k, v in used.items())} x the roofline "
                    f"(GPU preset {run_topo.facts.gpu_model}; --compute-efficiency peak for the roofline)")
    res.notes[:0] = list(notes) + ([eff_note] if eff_note else [])
    if getattr(sfn, "note", None) is not None and sfn.note() is not None:
        res.notes.append(sfn.note())
    res.notes.extend(n for n in getattr(wr.net, "notes", ()) if n not in res.notes)


def check_compute_efficiency(value):
    """``--compute-efficiency``: ``None`` (the GPU preset's per-kind figures), ``"peak"`` (every kind at
    the peak), a fraction F in (0, 1] (every kind, and nodes naming none, at F) or per-kind fractions
    ``"gemm=0.7,attn_fwd=0.6"`` (or a dict) replacing the preset's for those kinds
    (:data:`netsim.vocab.OP_KINDS`, plus ``other`` for nodes naming no kind).  Returns None,
    ``"peak"``, a float or a dict; InputError otherwise.

    >>> check_compute_efficiency("gemm=0.7, attn_bwd=0.5"), check_compute_efficiency("0.4")
    ({'gemm': 0.7, 'attn_bwd': 0.5}, 0.4)
    """
    from netsim.vocab import OP_KINDS

    if value is None or value == "peak":
        return value
    kinds = (*OP_KINDS, "other")
    expect = f"a fraction in (0, 1], peak, or KIND=F pairs with KIND one of {', '.join(kinds)}"
    if isinstance(value, str) and "=" in value:
        value = _kind_pairs(value, expect)
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k not in kinds:
                raise InputError(f"unknown kernel kind {k!r}; expected {expect}", source="--compute-efficiency")
            out[k] = _fraction(v, expect)
        if not out:
            raise InputError(f"expected {expect}, got {value!r}", source="--compute-efficiency")
        return out
    return _fraction(value, expect)


def _kind_pairs(text: str, expect: str) -> dict[str, str]:
    """``"gemm=0.7,attn_bwd=0.5"`` -> {kind: text}; every comma-separated item one KIND=F, each kind once."""
    out: dict[str, str] = {}
    for i, item in enumerate(text.split(",")):
        kind, eq, frac = (x.strip() for x in item.partition("="))
        if not eq or not kind:
            what = "an empty item" if not item.strip() else repr(item.strip())
            raise InputError(f"expected {expect}, got {what} as item {i + 1} of {text!r}",
                             source="--compute-efficiency")
        if kind in out:
            raise InputError(f"kernel kind {kind!r} given twice in {text!r} (expected each kind once)",
                             source="--compute-efficiency")
        out[kind] = frac
    return out


def _fraction(value, expect: str) -> float:
    from netsim.inputs import float_text

    try:
        f = float_text(value, None) if isinstance(value, str) else float(value)
    except (TypeError, ValueError, OverflowError):  # InputError is a ValueError
        f = float("nan")
    if isinstance(value, bool) or not 0.0 < f <= 1.0:  # nan fails too
        raise InputError(f"expected {expect} (achieved / roofline), got {value!r}", source="--compute-efficiency")
    return f


def _with_compute_efficiency(topo, setting):
    """(topology whose GPU runs each kernel kind at ``setting``'s fraction of its roofline, note or None);
    ``setting`` as :func:`check_compute_efficiency` returns it (None: the preset, unchanged)."""
    from dataclasses import replace

    from netsim.vocab import OP_KINDS

    if setting is None:
        return topo, None
    if not topo.facts.peak_flops:
        return topo, (f"compute efficiency {setting} has no effect: the topology names no GPU compute "
                      "preset (node.gpu), so compute takes the traces' durations")
    if setting == "peak":
        eff, what = {}, "compute at the peak"
    elif isinstance(setting, dict):
        eff = {**topo.facts.compute_efficiency, **setting}
        what = "compute efficiency " + ", ".join(f"{k} {v:g}" for k, v in setting.items())
    else:
        eff = dict.fromkeys((*OP_KINDS, "other"), setting)
        peak = float(topo.facts.peak_flops)
        what = (f"compute at {setting:g} x the roofline ({peak * setting / 1e12:,.0f} of {peak / 1e12:,.0f} "
                "TFLOP/s when compute-bound)")
    return replace(topo, facts=replace(topo.facts, compute_efficiency=eff)), what


def _file_replicas(scan, groups, gpus, faulty: bool):
    """(Replicas or None, note) for a scanned file set under ``--symmetry auto``."""
    import numpy as np

    from netsim.topology.placement import is_packed
    from netsim.workload.file_symmetry import find_replicas

    if scan.world < 2:  # nothing to de-duplicate, nothing to say
        return None, None
    if not is_packed(np.asarray(gpus)):
        return None, ("file symmetry off: the placement is not packed, so replicas would not be shifted copies "
                      "on the fabric; simulated every rank")
    if faulty:  # as run --llm: stragglers, jitter and link faults make ranks or their paths differ
        return None, "file symmetry off: stragglers or faults make ranks differ; simulated every rank"
    return find_replicas(scan, groups)


def _checked(read, ranks):
    """``read(ranks)`` later, with every distinct table checked runnable (a fallback's tables)."""
    def tables():
        from netsim.chakra.check import check_runnable

        out = read(ranks)
        for table in {id(t): t for t in out.values()}.values():
            check_runnable(table)
        return out
    return tables
