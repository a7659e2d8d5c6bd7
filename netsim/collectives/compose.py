"""Composing schedules: one after another (:func:`concat`) and side by side on
disjoint rank subsets (:func:`parallel`), plus the data-flow annotations that
let tests check what a composite schedule actually moves.

:func:`parallel` merges step by step: step *k* of the result is the union of
step *k* of every part (ranks mapped through the part's ``rank_map``).  When
all parts share their step objects (one sub-schedule placed on many groups,
the usual case) each phase becomes one stacked :class:`Step`; otherwise the
phases are cut at every part's phase boundary so that step indices line up.
Step fields (overhead_s, delay_s, reduce, wire, rate_cap, key, hop) are kept;
parts whose simultaneous steps disagree on a per-step field raise InputError.

**Flows** (testing aid).  A :class:`Flow` says which pieces of the buffer each
transfer carries: the buffer is cut into ``units`` equal units and, for
repetition ``rep`` of phase *i*, ``flow.phases[i](rep)`` returns
``(tid, unit, kind)`` arrays: transfer ``tid`` of the step carries ``unit``,
reduced into the receiver (``REDUCE``) or overwriting it (``COPY``).  For UP
transfers the receiver is the switch, for DOWN the sender is.  Builders
record flows only inside ``with tracing():`` (no cost otherwise); composite
builders transform them with the schedule.

>>> from netsim.collectives.ring import ring_all_gather
>>> a = ring_all_gather(4, 4096)
>>> s = parallel("all_gather", "ring", 8, 4096, [(a, [0, 1, 2, 3]), (a, [4, 5, 6, 7])])
>>> s.n_steps, s.phases[0].step.n_transfers
(3, 8)
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace

import numpy as np

from netsim.collectives.schedule import Phase, Schedule, Step
from netsim.errors import InputError
from netsim.ncclfacts import SIMPLE_CHUNK

COPY, REDUCE = 0, 1

#: Pipelined algorithms cut their data into pieces of at least this many bytes (NCCL's Simple
#: chunk per channel step, :data:`netsim.ncclfacts.SIMPLE_CHUNK`) ...
PIECE_BYTES = SIMPLE_CHUNK
#: ... and into at most this many pieces.
MAX_PIECES = 64


def pipeline_chunks(nbytes: float) -> int:
    """Default pipeline depth: pieces of >= 512 KiB, at most 64, at least 1."""
    return int(max(1, min(MAX_PIECES, nbytes // PIECE_BYTES)))


def check_int(value, name: str, *, low: int = 1) -> int:
    """``value`` as an int >= ``low``, else :class:`InputError` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise InputError(f"expected an integer >= {low}, got {value!r}", source="argument", field=name)
    return int(value)


def check_nodes(n: int, local_size: int) -> int:
    """Nodes of ``local_size`` ranks in a group of ``n`` (``n`` must be a multiple)."""
    n, g = check_int(n, "n"), check_int(local_size, "local_size")
    if n % g:
        raise InputError(f"expected a group size that is a multiple of local_size {g}, got {n}",
                         source="argument", field="local_size")
    return n // g


# ------------------------------------------------------------------ flows
@dataclass(frozen=True, eq=False)
class Flow:
    """What every transfer carries (see the module docstring)."""

    units: int
    phases: tuple

    def scaled(self, units: int) -> "Flow":
        """The same flow on a grid of ``units`` (a multiple of ``self.units``)."""
        f = units // self.units
        if f * self.units != units:
            raise ValueError(f"cannot refine {self.units} units into {units}")
        if f == 1:
            return self
        off = np.arange(f)

        def wrap(fn):
            def out(rep):
                tid, unit, kind = fn(rep)
                return np.repeat(tid, f), (unit[:, None] * f + off).ravel(), np.repeat(kind, f)
            return out
        return Flow(units, tuple(wrap(fn) for fn in self.phases))

    def placed(self, where, parent_blocks: int) -> "Flow":
        """Embed: this buffer is ``len(where)`` equal blocks; block *b* is block ``where[b]``
        of a parent buffer of ``parent_blocks`` blocks."""
        where = np.asarray(where, dtype=np.int64).ravel()
        base = self.scaled(math.lcm(self.units, where.size))
        per = base.units // where.size
        table = (where[:, None] * per + np.arange(per)).ravel()

        def wrap(fn):
            def out(rep):
                tid, unit, kind = fn(rep)
                return tid, table[unit], kind
            return out
        return Flow(parent_blocks * per, tuple(wrap(fn) for fn in base.phases))


#: Whether builders record flows (a context variable: set per thread or task by :func:`tracing`).
_TRACING: ContextVar[bool] = ContextVar("netsim_collectives_tracing", default=False)


@contextmanager
def tracing():
    """Within this block, builders attach a :class:`Flow` to the schedules they return."""
    token = _TRACING.set(True)
    try:
        yield
    finally:
        _TRACING.reset(token)


def is_tracing() -> bool:
    """Whether builders should record flows."""
    return _TRACING.get()


def traced(schedule: Schedule, make) -> Schedule:
    """``schedule`` carrying ``make()`` (a :class:`Flow` or ``None``) as its flow when tracing."""
    if _TRACING.get():
        flow = make()
        if flow is not None:
            if len(flow.phases) != len(schedule.phases):
                raise ValueError("a flow needs one entry per phase")
            return replace(schedule, flow=flow)
    return schedule


def flow_of(schedule: Schedule) -> Flow | None:
    """The flow recorded for ``schedule`` (``None`` outside :func:`tracing`)."""
    return schedule.flow


def placed(schedule: Schedule, where, parent_blocks: int) -> Schedule:
    """``schedule`` with its flow embedded in a parent buffer (see :meth:`Flow.placed`); the
    schedule itself when not tracing (the phases are shared either way)."""
    flow = flow_of(schedule)
    if flow is None:
        return schedule
    out = Schedule(schedule.op, schedule.algorithm, schedule.nranks, schedule.nbytes, schedule.phases)
    return traced(out, lambda: flow.placed(where, parent_blocks))


def _common(flows: list) -> list | None:
    if any(f is None for f in flows):
        return None
    units = math.lcm(*[f.units for f in flows]) if flows else 1
    return [f.scaled(units) for f in flows]


def _joined(fns: list, offsets: list):
    """One flow callable running the callables ``fns[q](rep + offsets[q][0])`` with transfer ids
    shifted by ``offsets[q][1]``."""
    def out(rep):
        parts = [fn(rep + r0) for fn, (r0, _) in zip(fns, offsets)]
        tid = np.concatenate([p[0] + t0 for p, (_, t0) in zip(parts, offsets)] or [np.zeros(0, np.int64)])
        unit = np.concatenate([p[1] for p in parts] or [np.zeros(0, np.int64)])
        kind = np.concatenate([p[2] for p in parts] or [np.zeros(0, np.int64)])
        return tid, unit, kind
    return out


# ---------------------------------------------------------------- concat
def concat(op: str, algorithm: str, n: int, nbytes: float, *schedules: Schedule) -> Schedule:
    """The phases of ``schedules`` one after another, all on the same ``n`` ranks."""
    for i, s in enumerate(schedules):
        if s.nranks != n:
            raise InputError(f"expected schedules for {n} ranks, got {s.nranks}", source="argument",
                             field=f"schedules[{i}]")
    out = Schedule(op, algorithm, n, float(nbytes), tuple(p for s in schedules for p in s.phases))

    def flow():
        flows = _common([flow_of(s) for s in schedules])
        if flows is None:
            return None
        units = flows[0].units if flows else 1
        return Flow(units, tuple(fn for f in flows for fn in f.phases))
    return traced(out, flow)


# -------------------------------------------------------------- parallel
def _cap(step: Step) -> float:
    return getattr(step, "rate_cap", float("inf"))


def _extra(step: Step, reps: int = 1) -> dict:
    """Step fields beyond the classic ones that a merge must keep (``rate_cap`` when set; a
    per-transfer cap is tiled ``reps`` times, like the transfers)."""
    cap = _cap(step)
    if np.ndim(cap):
        return {"rate_cap": np.tile(cap, reps)}
    return {} if cap == float("inf") else {"rate_cap": cap}


def _merged_cap(moving: list) -> dict:
    """The ``rate_cap`` of parts run as one step: one number if they share it, else one per transfer."""
    caps = [_cap(st) for st, _ in moving]
    if all(np.ndim(c) == 0 for c in caps) and len(set(caps)) == 1:
        return {} if caps[0] == float("inf") else {"rate_cap": caps[0]}
    return {"rate_cap": np.concatenate([np.broadcast_to(np.asarray(c, dtype=np.float64), st.nbytes.shape)
                                        for c, (st, _) in zip(caps, moving)])}


def _merge(items: list) -> Step:
    """One step: the union of ``(step, rank_map)`` items."""
    moving = [(st, m) for st, m in items if st.n_transfers]
    delays = [st.delay_s for st, _ in items if not st.n_transfers]
    if not moving:
        return Step.delay(max(delays, default=0.0))
    if any(d > 0 for d in delays):
        raise InputError("cannot run a delay step in parallel with transfers", source="argument",
                         field="parts")
    first = moving[0][0]
    for st, _ in moving:
        if (st.overhead_s, st.wire) != (first.overhead_s, first.wire):
            raise InputError("parallel parts disagree on overhead_s or wire in the same step",
                             source="argument", field="parts")
    cat = np.concatenate
    key = hop = None
    if any(st.key is not None for st, _ in moving):
        key = cat([np.zeros(st.n_transfers, np.int64) if st.key is None else st.key for st, _ in moving])
    if any(st.hop is not None for st, _ in moving):
        hop = cat([np.zeros(st.n_transfers, np.int64) if st.hop is None else st.hop for st, _ in moving])
    return Step(cat([m[st.src] for st, m in moving]), cat([m[st.dst] for st, m in moving]),
                cat([st.nbytes for st, _ in moving]), overhead_s=first.overhead_s,
                reduce=any(st.reduce for st, _ in moving), key=key, hop=hop, wire=first.wire,
                **_merged_cap(moving))


def _stacked(step: Step, maps: np.ndarray) -> Step:
    """``step`` run by every row of ``maps`` (parts x ranks) at once."""
    P = maps.shape[0]
    if not step.n_transfers:
        return step
    tile = (lambda a: None if a is None else np.tile(a, P))
    return Step(maps[:, step.src].ravel(), maps[:, step.dst].ravel(), np.tile(step.nbytes, P),
                overhead_s=step.overhead_s, reduce=step.reduce, key=tile(step.key), hop=tile(step.hop),
                wire=step.wire, **_extra(step, P))


def _same_structure(parts) -> bool:
    s0, m0 = parts[0]
    for s, m in parts[1:]:
        if m.size != m0.size or len(s.phases) != len(s0.phases):
            return False
        if any(a.step is not b.step or a.repeat != b.repeat for a, b in zip(s.phases, s0.phases)):
            return False
    return True


def parallel(op: str, algorithm: str, n: int, nbytes: float, parts) -> Schedule:
    """Run sub-schedules simultaneously on disjoint rank subsets of ``n`` ranks.

    ``parts``: list of ``(schedule, rank_map)``; ``rank_map[i]`` is the rank that plays the
    part's local rank *i*.  Step *k* of the result holds step *k* of every part.
    """
    parts = [(s, np.asarray(m, dtype=np.int64).ravel()) for s, m in parts]
    for i, (s, m) in enumerate(parts):
        if m.size != s.nranks:
            raise InputError(f"expected a rank map of {s.nranks} ranks, got {m.size}", source="argument",
                             field=f"parts[{i}]")
    every = np.concatenate([m for _, m in parts] or [np.zeros(0, np.int64)])
    if every.size and (every.min() < 0 or every.max() >= n):
        raise InputError(f"a rank map leaves 0..{n - 1}", source="argument", field="parts")
    if every.size and np.bincount(every, minlength=n).max() > 1:
        raise InputError("parallel parts must use disjoint ranks", source="argument", field="parts")
    parts = [(s, m) for s, m in parts if s.phases]
    if not parts:
        return Schedule(op, algorithm, n, float(nbytes), ())
    flows = _common([flow_of(s) for s, _ in parts])
    phases, fns = [], []
    if _same_structure(parts):
        maps = np.stack([m for _, m in parts])
        for i, ph in enumerate(parts[0][0].phases):
            phases.append(Phase(_stacked(ph.step, maps), ph.repeat))
            if flows is not None:
                t = ph.step.n_transfers
                fns.append(_joined([f.phases[i] for f in flows], [(0, q * t) for q in range(len(parts))]))
    else:
        starts = [np.cumsum([0] + [p.repeat for p in s.phases]) for s, _ in parts]
        bounds = np.unique(np.concatenate(starts))
        for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            items, sub, offs, t0 = [], [], [], 0
            for q, ((s, m), st) in enumerate(zip(parts, starts)):
                if lo >= st[-1]:
                    continue
                i = int(np.searchsorted(st, lo, side="right")) - 1
                step = s.phases[i].step
                items.append((step, m))
                if flows is not None:
                    sub.append(flows[q].phases[i])
                    offs.append((lo - int(st[i]), t0))
                t0 += step.n_transfers
            phases.append(Phase(_merge(items), hi - lo))
            if flows is not None:
                fns.append(_joined(sub, offs))
    out = Schedule(op, algorithm, n, float(nbytes), tuple(phases))
    return traced(out, lambda: None if flows is None else Flow(flows[0].units, tuple(fns)))


def on_groups(op: str, algorithm: str, n: int, nbytes: float, block: Schedule, groups,
              where=None, parent_blocks: int = 1) -> Schedule:
    """``block`` run by every row of ``groups`` (a groups x members rank array) in parallel.

    With ``where`` (groups x blocks), group *q* works on the parent-buffer blocks ``where[q]``
    (used for flows only).
    """
    groups = np.asarray(groups, dtype=np.int64)
    if flow_of(block) is None and groups.ndim == 2 and groups.shape[1] == block.nranks and groups.size:
        if groups.min() < 0 or groups.max() >= n or np.bincount(groups.ravel(), minlength=n).max() > 1:
            raise InputError(f"groups must be disjoint ranks in 0..{n - 1}", source="argument", field="groups")
        phases = tuple(Phase(_stacked(ph.step, groups), ph.repeat) for ph in block.phases)
        return Schedule(op, algorithm, n, float(nbytes), phases)
    parts = []
    for q, row in enumerate(groups):
        s = block if where is None else placed(block, where[q], parent_blocks)
        parts.append((s, row))
    return parallel(op, algorithm, n, nbytes, parts)


def pipeline(algorithm: str, piece: Schedule, pieces: int, nbytes: float | None = None) -> Schedule:
    """Software-pipeline ``pieces`` copies of ``piece`` (the schedule of one piece of data).

    Piece *p* runs the k-th step of ``piece`` in step ``p + k``, so stages of different
    pieces overlap (NCCL runs NVLS-Tree's intra-node reduce, inter-node tree and intra-node
    broadcast concurrently on successive chunks): ``pieces + m - 1`` steps for an m-step
    piece, the steady middle one repeated phase.
    """
    check_int(pieces, "pieces")
    steps = [ph.step for ph in piece.phases for _ in range(ph.repeat)]
    if any(st.n_transfers == 0 for st in steps):
        raise InputError("cannot pipeline a schedule with delay steps", source="argument", field="piece")
    m, ident = len(steps), np.arange(piece.nranks)
    phases: list[Phase] = []
    t = 0
    while t < pieces + m - 1:
        active = [steps[t - p] for p in range(pieces) if 0 <= t - p < m]
        if t == m - 1 and pieces >= m:  # steady state: every step of the piece is in flight
            phases.append(Phase(_merge([(st, ident) for st in steps]), pieces - m + 1))
            t = pieces
            continue
        phases.append(Phase(_merge([(st, ident) for st in active])))
        t += 1
    total = piece.nbytes * pieces if nbytes is None else nbytes
    return Schedule(piece.op, algorithm, piece.nranks, total, tuple(phases))
