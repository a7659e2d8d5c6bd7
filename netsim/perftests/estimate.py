"""What a ``netsim bench`` run will cost, before it runs: its CPU seconds from the size of its schedules.

A size costs the routing of its schedule's transfers plus their simulation::

    flow model:        cpu_s = SIZE_S + ROUTE_S * routed + SIM_S * simulated
    analytical model:  cpu_s = SIZE_S + ANALYTICAL_S * routed + STEP_S * total

* **routed**: the transfers of the schedule's distinct steps.  A phase repeats one step pattern, and
  its routes are computed once per pattern (by the plan, the executor's exactness check and the
  executor), not once per repetition.
* **simulated**: the transfers the flow model simulates event by event.  The executor
  fast-forwards a phase once its step times advance uniformly (:mod:`netsim.collectives.executor`),
  so each phase costs ``min(repeat, K)`` repetitions of its transfers: ``K`` = :data:`FF_STEPS` (a
  period is recognised after three equal advances), :data:`RING_STEPS` for rings (their ranks
  settle more slowly).  Every repetition counts (no fast-forward) with ``--engine event`` or
  ``reference`` and on hashed routing (ECMP, adaptive, spray) across nodes, where ranks do not
  advance uniformly (:data:`HASHED_SIM_S` per transfer: measured where flows rarely collide).
* Flow *events* are not counted: where hashed flows collide (ECMP on oversubscribed,
  non-rail-optimized fabrics, all-to-alls) they finish one by one and a run can take more than
  10x the estimate (``llama3-24k.yaml``: about 70 us per transfer), and so can rings whose hops
  cross tiers of different latency (16,384 GPUs of ``h100-fat-tree-16k.yaml``): they drift for
  thousands of steps before the executor can fast-forward them.
* **total**: every transfer of every repetition; the analytical model (and the flow model where
  it provably runs in lockstep) passes over them as numpy arrays, step by step, without events.
* The flow model is costed as event-driven: where the executor proves a schedule contention-free
  or lockstep it evaluates it without events, in far less than the estimate.
* Counts come, for up to :data:`MAX_PROBES` sizes spread over the sweep (each other size takes its
  nearest one's), from the bare schedule (:func:`netsim.collectives.plan.plan`, ``shaped=False``) of the
  algorithm, protocol and channels NCCL picks for the whole group
  (:func:`netsim.collectives.plan.choice`).  Above :data:`EXACT_RANKS` ranks, building it would
  take seconds, so the same algorithm is built at two smaller node-aligned scales (at most
  :data:`EXACT_RANKS` ranks, the second twice the first) and every count is extrapolated as a
  power law of the rank count (within 10 % of counting whole at 4,096 GPUs, ``tests/test_estimate.py``).
* The constants are CPU seconds per transfer measured on ``h100-fat-tree-16k.yaml`` and
  ``h100-superpod-1024.yaml`` (256 to 4,096 GPUs, every op) on a shared 2-core machine; they scale
  with the machine's speed.  ``tests/test_estimate.py`` checks the estimate within :data:`FACTOR` of the
  measured CPU time.

>>> from netsim.topology.spec import load_topology  # doctest: +SKIP
>>> est = estimate(load_topology("topologies/h100-fat-tree-16k.yaml"), BenchConfig("all_reduce", gpus=16384), [1 << 30])  # doctest: +SKIP
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from netsim.collectives import plan as plan_mod
from netsim.errors import InputError
from netsim.perftests.collective import BenchConfig, placed_ranks
from netsim.results import nccl_table as nt
from netsim.topology.model import Topology

#: CPU seconds per size whatever its schedule (network, plan and table set-up).
SIZE_S = 0.01
#: CPU seconds per routed transfer (routes, capacities and the exactness check).
ROUTE_S = 1.2e-6
#: CPU seconds per transfer the flow model simulates (its start, rate solves and completion events):
#: 1.4-1.7 us measured quiet, about twice that on a loaded 2-core machine (the 512- and 2,048-GPU
#: all-reduce of ``tests/test_estimate.py``, after the whole-run kernel and cheaper relayouts).
SIM_S = 4e-6
#: The same on hashed routing across nodes, where colliding flows finish one by one.
HASHED_SIM_S = 4e-6
#: CPU seconds per routed transfer on the analytical model (each step's max-min drain alone, identical
#: transfers timed once: measured on the README table's analytical rows) ...
ANALYTICAL_S = 1e-6
#: ... and per transfer of every repetition (the vectorized pass over the steps).
STEP_S = 6e-9
#: Repetitions of a phase simulated before the executor fast-forwards it ...
FF_STEPS = 5
#: ... and for rings.
RING_STEPS = 24
#: Ranks above which counts are extrapolated from smaller scales (building the schedule takes seconds).
EXACT_RANKS = 1024
#: Sizes whose schedules are counted (the others take the nearest one's counts).
MAX_PROBES = 8
#: The estimate is within this factor of the measured CPU time on the cases of ``tests/test_estimate.py``.
FACTOR = 3.0
#: Hashed routing policies (ranks finish their steps at different instants).
HASHED = ("ecmp", "adaptive", "spray")


@dataclass(frozen=True)
class Counts:
    """Transfers of one schedule: of its distinct steps (``routed``), simulated by the flow model
    (``simulated``), and in all (``total``, every repetition)."""

    routed: float
    simulated: float
    total: float


@dataclass(frozen=True)
class Estimate:
    """Predicted CPU seconds of a bench run, per size, and the counts they come from."""

    model: str
    gpus: int
    cpu_s: tuple[float, ...]  # per size: the whole size ...
    sim_s: tuple[float, ...]  # ... and of it, the flow model's simulation (0 on the analytical model)
    counts: tuple[Counts, ...]  # per size
    hashed: bool  # hashed routing across nodes (no fast-forward)
    extrapolated: bool  # counts from smaller scales (above EXACT_RANKS ranks)

    @property
    def total_s(self) -> float:
        return float(sum(self.cpu_s))

    @property
    def simulated(self) -> float:
        """Transfers the flow model simulates, over every size (0 on the analytical model)."""
        return float(sum(c.simulated for c in self.counts)) if self.model == "flow" else 0.0


def estimate(topo: Topology, cfg: BenchConfig, sizes: list[int]) -> Estimate:
    """CPU seconds of ``netsim bench`` with ``cfg`` (validated, routing applied to ``topo``) over
    ``sizes`` (nccl-tests sizes), from the model in the module docstring."""
    n = cfg.gpus or topo.n_gpus
    ranks = placed_ranks(topo, cfg)
    hashed = topo.routing in HASHED and n > topo.gpus_per_node and topo.facts.scaleout is not None
    flow = cfg.model == "flow"
    ff = cfg.engine == "auto" and not hashed
    probe = _probed(len(sizes))
    cpu, sim, per_size, extrapolated, seen = [], [], [], False, {}
    for i, nbytes in enumerate(sizes):
        if probe[i] not in seen:
            size = float(nt.size_and_count(cfg.op, sizes[probe[i]], n, cfg.dtype)[0])
            seen[probe[i]] = counts(topo, cfg, ranks, size, ff)
        c, ext = seen[probe[i]]
        extrapolated |= ext
        per_size.append(c)
        if flow:
            sim.append((HASHED_SIM_S if hashed else SIM_S) * c.simulated)
            cpu.append(SIZE_S + ROUTE_S * c.routed + sim[-1])
        else:
            sim.append(0.0)
            cpu.append(SIZE_S + ANALYTICAL_S * c.routed + STEP_S * c.total)
    return Estimate(cfg.model, n, tuple(cpu), tuple(sim), tuple(per_size), hashed, extrapolated)


def _probed(k: int) -> list[int]:
    """For each of ``k`` sizes, the size whose schedule is counted for it: every size up to
    :data:`MAX_PROBES`, else the nearest of :data:`MAX_PROBES` spread evenly (the largest included).

    >>> _probed(3), _probed(9)
    ([0, 1, 2], [0, 1, 2, 3, 3, 5, 6, 7, 8])
    """
    if k <= MAX_PROBES:
        return list(range(k))
    probes = np.unique(np.round(np.linspace(0, k - 1, MAX_PROBES)).astype(int))
    return [int(probes[np.abs(probes - i).argmin()]) for i in range(k)]


def counts(topo: Topology, cfg: BenchConfig, ranks: np.ndarray, size: float, ff: bool) -> tuple[Counts, bool]:
    """(transfers of the schedule of ``size`` bytes on ``ranks``, whether extrapolated); ``ff``:
    the executor fast-forwards periodic phases."""
    n = int(ranks.size)
    name, proto, nc = plan_mod.choice(topo, ranks, cfg.op, size, cfg.algo, channels=cfg.channels,
                                      protocol=cfg.protocol)
    if name == "none":
        return Counts(0.0, 0.0, 0.0), False
    pinned = replace(cfg, algo=name, protocol=proto, channels=nc)
    keep = (RING_STEPS if name == "ring" else FF_STEPS) if ff else None
    scales = _scales(n, topo.gpus_per_node if _aligned(ranks, topo.gpus_per_node) else 1)
    if scales is not None:
        try:
            (m1, c1), (m2, c2) = ((m, _count(topo, pinned, ranks[:m], size, keep)) for m in scales)
        except (InputError, ValueError):  # the algorithm needs this scale: count it whole
            pass
        else:
            grow = [_power(a, b, m1, m2, n) for a, b in zip((c1.routed, c1.simulated, c1.total),
                                                              (c2.routed, c2.simulated, c2.total))]
            return Counts(*grow), True
    return _count(topo, pinned, ranks, size, keep), False


def _count(topo: Topology, cfg: BenchConfig, ranks: np.ndarray, size: float, keep: int | None) -> Counts:
    p = plan_mod.plan(topo, ranks, cfg.op, size, cfg.algo, channels=cfg.channels, protocol=cfg.protocol,
                      shaped=False)
    phases = [(ph.step.n_transfers, ph.repeat) for ph in p.schedule.phases]
    return Counts(float(sum(t for t, _ in phases)),
                  float(sum(t * (r if keep is None else min(r, keep)) for t, r in phases)),
                  float(sum(t * r for t, r in phases)))


def _aligned(ranks: np.ndarray, g: int) -> bool:
    return plan_mod.node_aligned(ranks, g)


def _scales(n: int, unit: int) -> tuple[int, int] | None:
    """Two smaller rank counts (multiples of ``unit``, the second twice the first, at most
    :data:`EXACT_RANKS`) to extrapolate from, or None when ``n`` is small enough to count whole."""
    if n <= EXACT_RANKS:
        return None
    m2 = n
    while m2 > EXACT_RANKS:
        m2 //= 2
    m2 = max(2 * unit, m2 // unit * unit)
    m1 = m2 // 2 // unit * unit
    if m1 < max(unit, 2) or m2 >= n:
        return None
    return m1, m2


def _power(q1: float, q2: float, m1: int, m2: int, n: int) -> float:
    """``q`` at ``n`` ranks from its values at ``m1`` and ``m2`` ranks, as a power law of the ranks."""
    if q1 <= 0 or q2 <= 0:
        return q2 * n / m2
    return q2 * (n / m2) ** (math.log(q2 / q1) / math.log(m2 / m1))


def duration(seconds: float) -> str:
    """``seconds`` for a person: "8 s", "3 min", "1.5 h".

    >>> duration(7.6), duration(184), duration(5400)
    ('8 s', '3 min', '1.5 h')
    """
    if seconds < 90:
        return f"{max(seconds, 1):.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
