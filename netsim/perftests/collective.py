"""nccl-tests for a simulated cluster (the library behind ``netsim bench``, :mod:`netsim.cli.bench`).

Sweeps message sizes like nccl-tests' ``-b/-e/-f/-i``, runs one collective per
size on a fresh simulation of the topology's first ``gpus`` GPUs, and returns
nccl-tests' rows (size, count, type, redop, root, time, algbw, busbw) with
nccl-tests' definitions of size, algbw and busbw.

>>> rows = bench("topologies/dgx-h100.yaml", "all_reduce", [1 << 30])  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import simpy

from netsim import inputs, units
from netsim.collectives import plan as plan_mod
from netsim.collectives.executor import ENGINES, run_collective
from netsim.errors import InputError
from netsim.limits import check_int
from netsim.network.models import MODELS, network_class  # noqa: F401 (re-exported: bench.MODELS)
from netsim.results import nccl_table as nt
from netsim.topology.model import Topology
from netsim.topology.placement import place
from netsim.topology.policy import with_routing
from netsim.topology.spec import load_topology


#: ``--algo`` names per op (``auto``, the default, chooses like NCCL).
ALGORITHMS = plan_mod.ALGORITHMS


@dataclass(frozen=True)
class BenchConfig:
    """One bench invocation.

    op: nccl-tests op name. algo: algorithm name or ``auto``. gpus: ranks used (first N of the
    topology). model: ``flow`` or ``analytical``. dtype: nccl-tests data type. channels: NCCL
    channels (default: NCCL's count, reduced for small sizes like NCCL). protocol: force
    LL/LL128/Simple. skew: ``zipf:ALPHA`` or ``uniform`` expert load (all-to-all becomes
    alltoallv). skew_matrix: file with an n x n byte matrix (alltoallv). seed: skew seed.
    routing: scale-out routing ftree/ecmp/adaptive/spray overriding the topology file's (None keeps it).
    """

    op: str
    algo: str = "auto"
    gpus: int | None = None
    model: str = "flow"
    dtype: str = "float"
    channels: int | None = None
    protocol: str | None = None
    skew: str | None = None
    skew_matrix: str | None = None
    seed: int = 0
    placement: str = "packed"
    engine: str = "auto"
    routing: str | None = None


def sweep_sizes(min_bytes: int, max_bytes: int, factor: int | None = None, increment: int | None = None) -> list[int]:
    """nccl-tests' size sweep: multiply by ``factor`` or add ``increment`` while <= max."""
    if min_bytes < 0 or max_bytes < min_bytes:
        raise InputError(f"expected 0 <= minBytes <= maxBytes, got {min_bytes} and {max_bytes}",
                         source="-b/-e")
    if factor is not None and increment is not None:
        raise InputError("give -f (factor) or -i (increment), not both", source="-f/-i")
    if factor is None and increment is None:
        factor = 2
    if factor is not None and factor < 2:
        raise InputError(f"expected a step factor >= 2, got {factor}", source="-f")
    if increment is not None and increment < 1:
        raise InputError(f"expected a positive step increment, got {increment}", source="-i")
    count = _size_count(min_bytes, max_bytes, factor, increment)
    if count > MAX_SIZES:
        raise InputError(f"-b {min_bytes} -e {max_bytes} with {'-i ' + str(increment) if increment else '-f ' + str(factor)}"
                         f" gives {count:,} sizes; expected at most {MAX_SIZES:,} (use a larger step or -f)",
                         source="-b/-e/-i")
    sizes, size = [], min_bytes
    while size <= max_bytes:
        sizes.append(size)
        if size == 0 and factor:
            size = 1
            continue
        size = size * factor if factor else size + increment
    return sizes


#: Sizes in one sweep: nccl-tests' -f 2 from 1 byte to 1 PiB is 51 sizes; each size is a whole simulation.
MAX_SIZES = 4096


def _size_count(lo: int, hi: int, factor: int | None, increment: int | None) -> int:
    """How many sizes ``sweep_sizes`` would produce (without building them)."""
    if increment:
        return (hi - lo) // increment + 1
    count, size = 0, lo
    while size <= hi and count <= MAX_SIZES:
        count, size = count + 1, max(1, size * factor)
    return count


#: Memory per (sender, receiver) pair of a one-step all-to-all, in bytes: measured peak RSS of
#: ``bench --op alltoall --model analytical`` on fat-tree-64k.yaml at 1,024 and 2,048 GPUs (148 and
#: 158 bytes per pair: transfer arrays, routes, max-min state); the flow model needs at least as much.
ALLTOALL_BYTES_PER_PAIR = 160


def check_memory(cfg: BenchConfig, n: int) -> None:
    """Refuse, before allocating, an all-to-all whose n^2 transfers would not fit in memory."""
    if cfg.op != "alltoall":
        return
    need = n * (n - 1) * ALLTOALL_BYTES_PER_PAIR
    avail = inputs.available_memory()
    if need > avail:
        fits = int((avail / ALLTOALL_BYTES_PER_PAIR) ** 0.5)
        raise InputError(f"an all-to-all on {n:,} GPUs has {n * (n - 1):,} transfers and needs about "
                         f"{need / units.GiB:,.0f} GiB of memory; {avail / units.GiB:,.0f} GiB are available "
                         f"(use --gpus {fits:,} or fewer)", source="--gpus")


def _check_skew_matrix(cfg: BenchConfig, n: int) -> None:
    """A per-pair byte matrix within nccl-tests sizes (each entry at most 1 PiB)."""
    from netsim.collectives import skew

    m = skew.load_matrix(cfg.skew_matrix, n)
    if m.size and m.max() > units.MAX_SIZE:
        i, j = np.unravel_index(int(np.argmax(m)), m.shape)
        raise InputError(f"expected at most 1PiB (2**50 bytes) per pair, got {m[i, j]:g}",
                         source=cfg.skew_matrix, field=f"[{i}, {j}]")


def build_plan(topo: Topology, cfg: BenchConfig, size_bytes: float) -> plan_mod.Plan:
    """The shaped schedule ``cfg`` asks for, for an nccl-tests size ``size_bytes``."""
    n = cfg.gpus or topo.n_gpus
    matrix = None
    if cfg.op == "alltoall" and (cfg.skew or cfg.skew_matrix):
        from netsim.collectives import skew
        if cfg.skew_matrix:
            matrix = skew.load_matrix(cfg.skew_matrix, n)
        else:
            matrix = skew.skewed_matrix(n, size_bytes, cfg.skew, seed=cfg.seed)
    return plan_mod.plan(topo, placed_ranks(topo, cfg), cfg.op, size_bytes, cfg.algo, channels=cfg.channels,
                         protocol=cfg.protocol, matrix=matrix)


def check_plan(topo: Topology, cfg: BenchConfig, size_bytes: float) -> None:
    """Raise what :func:`build_plan` would raise for ``cfg`` (``topo`` with ``cfg.routing`` applied),
    building no schedule (``netsim sweep --dry-run``)."""
    plan_mod.check_plan(topo, placed_ranks(topo, cfg), cfg.op, size_bytes, cfg.algo, channels=cfg.channels,
                        protocol=cfg.protocol)


def placed_ranks(topo: Topology, cfg: BenchConfig) -> np.ndarray:
    """Topology GPU of every rank of the job (``cfg.placement``)."""
    return place(cfg.placement, cfg.gpus or topo.n_gpus, topo.n_gpus)


def run_one(topo: Topology, cfg: BenchConfig, nbytes: int, keep: list | None = None,
            watch=None) -> tuple[nt.BenchRow, dict]:
    """Simulate one size; returns the table row and the executor/network counters (``keep``: a list
    that gets the size's link and rank counters, :func:`netsim.results.bench_tables.capture`;
    ``watch``: called with the network before it runs, for a progress bar)."""
    n = cfg.gpus or topo.n_gpus
    size, _count, _per_rank = nt.size_and_count(cfg.op, nbytes, n, cfg.dtype)
    if cfg.routing is not None:
        topo = with_routing(topo, cfg.routing)
    p = build_plan(topo, cfg, float(size))
    net = network_class(cfg.model, cfg.engine)(simpy.Environment(), topo)
    if watch is not None:
        watch(net)
    result = run_collective(net, p.schedule, placed_ranks(topo, cfg), engine=cfg.engine)
    time_s = result.time
    if time_s <= 0:  # zero bytes: nccl-tests still reports a launch; keep a tiny positive time
        time_s = 1e-9
    row = nt.make_row(cfg.op, nbytes, n, time_s, dtype=cfg.dtype, algorithm=p.label)
    if keep is not None:
        from netsim.results.bench_tables import capture
        keep.append(capture(size, time_s, net, result))
    return row, {**result.stats, **net.summary(), "nccl_predicted_us": p.predicted_us,
                 "notes": list(getattr(net, "notes", ()))}


def bench(topology: str | Topology, op: str, sizes: list[int], **kwargs) -> list[nt.BenchRow]:
    """Python API: one :class:`~netsim.results.nccl_table.BenchRow` per size."""
    topo = load_topology(topology) if not isinstance(topology, Topology) else topology
    cfg = validated(BenchConfig(op=nt.canonical_op(op), **kwargs), topo)
    topo = with_routing(topo, cfg.routing) if cfg.routing is not None else topo
    return [run_one(topo, cfg, s)[0] for s in sizes]


def validated(cfg: BenchConfig, topo: Topology) -> BenchConfig:
    """``cfg`` checked against ``topo`` (model, GPU count, placement, algorithm); raises InputError."""
    if cfg.model not in MODELS:
        raise InputError(f"expected one of {', '.join(MODELS)}, got {cfg.model!r}", source="--model")
    for flag, value in (("--gpus", cfg.gpus), ("--channels", cfg.channels), ("--seed", cfg.seed)):
        if value is not None:
            check_int(value, flag, flag)
    n = cfg.gpus if cfg.gpus is not None else topo.n_gpus
    if cfg.gpus is None and cfg.placement not in (None, "packed"):  # a placement file sets the count
        n = place(cfg.placement, None, topo.n_gpus).size
    if n < 2 or n > topo.n_gpus:
        raise InputError(f"expected 2 <= GPUs <= {topo.n_gpus} (the topology's GPU count), got {n}",
                         source="--gpus")
    if cfg.dtype not in nt.DTYPE_SIZES:
        raise InputError(f"expected one of {', '.join(nt.DTYPE_SIZES)}, got {cfg.dtype!r}", source="-d")
    plan_mod.check_algorithm(cfg.op, cfg.algo)
    if cfg.engine not in ENGINES:
        raise InputError(f"expected one of {', '.join(ENGINES)}, got {cfg.engine!r}", source="--engine")
    if cfg.routing is not None:
        with_routing(topo, cfg.routing)  # a known policy, and a fabric it applies to
    place(cfg.placement, n, topo.n_gpus)  # validates the spec for this many ranks
    if (cfg.skew or cfg.skew_matrix) and cfg.op != "alltoall":
        raise InputError(f"skew applies to alltoall only, not {cfg.op}", source="--skew")
    if cfg.skew and cfg.skew_matrix:
        raise InputError("give --skew or --skew-matrix, not both", source="--skew")
    if cfg.skew:
        from netsim.collectives.skew import parse_skew
        parse_skew(cfg.skew)
    if cfg.skew_matrix:
        _check_skew_matrix(cfg, n)
    check_memory(cfg, n)
    return replace(cfg, gpus=n)
