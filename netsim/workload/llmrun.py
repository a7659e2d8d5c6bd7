"""Generate an LLM training iteration and run it, without writing every rank's trace.

``netsim run --llm MODEL --tp .. --pp .. --dp ..`` (and :func:`simulate_llm`): the
generator builds only the representatives of the data-parallel replicas
(:func:`~netsim.workload.generate.llm.llm_replicas`) and hands their node tables to the
runner directly (the tables reading ``netsim workload llm``'s files for those ranks would
give; no Chakra bytes in between), and the runner simulates one replica standing for all
(:mod:`netsim.workload.replicas`).  A 16,384-rank Llama-3-405B job (TP8 PP16 DP128)
thus walks 128 ranks' graphs instead of 16,384.

The replica run is exact only where :mod:`netsim.workload.symmetry` proves it for the run at
hand; where it does not, every rank is generated and simulated, and the notes say why.
``symmetry="none"``, any straggler or fault (they make ranks differ), or a placement
other than the packed one (replicas are then not shifted copies of each other on the
fabric), generates and simulates every rank from the start; the run's notes say so.
``symmetry="approximate"`` keeps the replica run where copies finish apart.
"""

from __future__ import annotations

#: Generator parameters that name the parallel layout (the rest are passed through).
LAYOUT = ("tp", "pp", "dp", "ep", "cp")


def generate_tables(spec, *, symmetry: str = "auto", **gen):
    """(tables of the simulated ranks, comm groups, replicas or None) for ``generate_llm(spec, **gen)``.

    The tables are built from the generator's stage templates
    (:class:`~netsim.workload.generate.template.RankTemplate`), equal to reading the files
    ``netsim workload llm`` writes for those ranks; one rank per stage beyond the template's
    own is checked against the generator.
    """
    from netsim.errors import InputError
    from netsim.workload.generate.llm import llm_replicas
    from netsim.workload.generate.plan import check_memory, plan_llm
    from netsim.workload.generate.template import RankTemplate

    from netsim.workload.simulation import SYMMETRIES

    if symmetry not in SYMMETRIES:
        raise InputError(f"expected one of {', '.join(SYMMETRIES)}, got {symmetry!r}", source="--symmetry")
    plan = plan_llm(spec, **gen)
    replicas = None
    if symmetry != "none":
        replicas = llm_replicas(**{k: gen[k] for k in LAYOUT if k in gen})
        if replicas.count == 1:
            replicas = None
    if replicas is not None:
        replicas.check_groups(plan.groups, source="generated comm groups")
    ranks = range(plan.world) if replicas is None else replicas.reps.tolist()
    check_memory(plan, len(ranks), "the simulated ranks")
    tables, templates, last = {}, {}, {}
    for rank in ranks:
        stage = plan.stage(rank)
        tpl = templates.get(stage)
        if tpl is None:
            tpl = templates[stage] = RankTemplate.build(plan, rank)
        last[stage] = rank
        tables[rank] = tpl.table(rank, plan.member[rank], f"llm.{rank}.et")
    for stage, rank in last.items():
        if rank != templates[stage].rep:
            templates[stage].check(plan, rank)
    return tables, plan.groups, replicas


def simulate_llm(topology, spec, *, model: str = "flow", symmetry: str = "auto", ctrl_deps: bool = True,
                 streams: int = 1, stragglers=(), faults=None, seed: int | None = None, placement: str = "packed",
                 engine: str = "auto", routing: str | None = None, out=None, overwrite: bool = False,
                 overrides: dict | None = None, progress: bool = False, moe=None, compute_efficiency=None,
                 sm_contention: str = "on", dry_run: bool = False, **gen):
    """Generate ``spec`` (a preset name, YAML path or ModelSpec) with the generator's keyword
    arguments ``gen`` and run it on ``topology``; see the module docstring.  ``placement``,
    ``engine``, ``routing``, ``overrides``, ``progress``, ``sm_contention`` and ``compute_efficiency`` (achieved / peak
    FLOP/s; None: the model's ``compute_efficiency`` if it has one, else the GPU preset's) are
    :func:`~netsim.workload.simulation.simulate`'s.  Returns the
    :class:`~netsim.workload.runner.WorkloadResult` (its config names the generator call).
    ``moe`` (:class:`~netsim.workload.moe_run.MoERunConfig`): MoE all-to-alls run as the bench's
    dispatch and combine (skew, expert placement, algorithm); None: uniform all-to-alls.
    ``dry_run``: generate and check everything, simulate nothing, return None
    (:func:`~netsim.workload.simulation.simulate`'s ``dry_run``)."""
    from netsim.workload.generate.kernels import DEFAULT as DEFAULT_KERNELS
    from netsim.workload.generate.kernels import profile as kernel_profile
    from netsim.workload.generate.presets import load_model_spec
    from netsim.workload.simulation import simulate

    if compute_efficiency is None:  # the model YAML's, over the GPU preset's
        compute_efficiency = load_model_spec(spec).compute_efficiency
    notes = []
    if stragglers or faults is not None:
        symmetry = "none"
    elif symmetry != "none" and not _packed(placement, gen):
        symmetry = "none"
        notes.append(f"replica symmetry off: placement {placement} does not lay the data-parallel replicas out "
                     "as shifted copies on the fabric; generated and simulated every rank")
    tables, groups, replicas = generate_tables(spec, symmetry=symmetry, **gen)
    name = spec if isinstance(spec, str) else getattr(spec, "name", str(spec))
    label = {"workload": f"llm:{name}", "llm": dict(sorted(gen.items())), "symmetry": symmetry,
             "overlap": overlap_settings(gen), "kernels": kernel_profile(gen.get("kernels", DEFAULT_KERNELS)).name}
    schedules = None
    if moe is not None:
        from netsim.workload.moe_run import schedules_factory
        schedules = schedules_factory(spec, moe, gen.get("dtype_bytes", 2))
        label["moe"] = moe.config()
    return simulate(topology, tables, groups, model, ctrl_deps, streams, stragglers=stragglers, faults=faults,
                    seed=seed, placement=placement, engine=engine, routing=routing, out=out, overwrite=overwrite,
                    replicas=replicas, label=label, notes=notes, overrides=overrides, progress=progress,
                    schedules=schedules, compute_efficiency=compute_efficiency, sm_contention=sm_contention,
                    symmetry="approximate" if symmetry == "approximate" else "auto", dry_run=dry_run,
                    full_tables=None if replicas is None else lambda: generate_tables(spec, symmetry="none", **gen)[0])


def overlap_settings(gen: dict) -> dict:
    """Every overlap setting of a generator call, defaults included (recorded in the ``runs`` table)."""
    import inspect

    from netsim.workload.generate.plan import plan_llm

    params = inspect.signature(plan_llm).parameters
    return {k: gen.get(k, params[k].default) for k in ("overlap_grad_reduce", "tp_comm_overlap", "comm_streams")}


def _packed(placement, gen: dict) -> bool:
    """Whether ``placement`` puts rank r on GPU r for the generated job (decided before the
    topology is known: ``random`` never counts as packed; a bad spec raises InputError)."""
    import math

    from netsim.topology.placement import is_packed, place

    text = "packed" if placement is None else str(placement).strip()
    if text == "packed":
        return True
    world = math.prod(int(gen.get(k) or 1) for k in ("tp", "pp", "dp", "cp"))
    kind = text.partition(":")[0]
    if kind == "random":
        place(text, 1, 1)  # checks the seed
        return False
    if kind == "strided":
        return is_packed(place(text, 2, 1 << 62))  # [0, K]: packed when K = 1
    return is_packed(place(text, world, 1 << 62))  # a file: its GPU ids, checked against the topology later
