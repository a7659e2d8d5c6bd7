"""Collective schedules: pure data, no SimPy.

A :class:`Schedule` is a sequence of :class:`Phase` objects; a phase repeats
one :class:`Step` pattern ``repeat`` times (a ring all-reduce is two phases of
``n-1`` identical steps), so a 16,384-rank ring is a few arrays, not 5e8
objects.  Ranks are group-local (0..n-1); the executor maps them onto
topology ranks.

Dependency rule (what the executor enforces): a transfer of step *k* from
*s* to *d* starts when both *s* and *d* have finished step *k-1*; a rank
finishes step *k* when all its step-*k* transfers (sent or received) have
been delivered.  A step with no transfers is a pure delay of ``delay_s``
applied to every rank.  No global barrier: ranks progress independently.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np


#: ``Step.hop`` values.  PATH: the whole route from src to dst.  UP: only the first link
#: of that route (GPU -> its switch); ``dst`` is just a routing hint (any peer in the same
#: switch domain), the transfer belongs to ``src`` alone.  DOWN: only the last link
#: (switch -> GPU); ``src`` is the hint and the transfer belongs to ``dst`` alone.
#: In-switch reduction (NVLS) is written with UP/DOWN transfers.
PATH, UP, DOWN = 0, 1, 2


@dataclass(frozen=True, eq=False)
class Step:
    """One step pattern: transfers ``src[i] -> dst[i]`` of ``nbytes[i]`` bytes.

    overhead_s: added to every delivery of this step (endpoint delay, reduction cost).
    delay_s: for a transfer-less step, time every rank spends in it.
    reduce: whether receivers reduce what they get (reported, and costed via overhead_s).
    key: per-transfer ECMP key (e.g. channel id), or None.
    hop: per-transfer PATH/UP/DOWN (see above), or None for whole routes.
    wire: bytes on the wire per payload byte (protocol framing, e.g. 2.0 for NCCL LL);
        ``nbytes`` stays the payload so byte accounting is protocol-independent.
    rate_cap: most B/s (wire bytes) one transfer can move whatever the links offer, e.g.
        one NCCL channel driven by one thread block; inf = no cap.  One number for every
        transfer, or an array with one per transfer (e.g. NCCL p2p sends: network peers capped
        by their channels, NVLink peers not).
    """

    src: np.ndarray
    dst: np.ndarray
    nbytes: np.ndarray
    overhead_s: float = 0.0
    delay_s: float = 0.0
    reduce: bool = False
    key: np.ndarray | None = None
    hop: np.ndarray | None = None
    wire: float = 1.0
    rate_cap: float | np.ndarray = float("inf")

    @staticmethod
    def delay(seconds: float) -> "Step":
        """A step with no transfers that costs every rank ``seconds``."""
        empty = np.zeros(0, dtype=np.int64)
        return Step(empty, empty, np.zeros(0), delay_s=float(seconds))

    def owners(self) -> tuple[np.ndarray, np.ndarray]:
        """Masks: transfers whose ``src`` takes part, and whose ``dst`` takes part."""
        if self.hop is None:
            every = np.ones(self.src.size, dtype=bool)
            return every, every
        return self.hop != DOWN, self.hop != UP

    def endpoints(self) -> tuple[np.ndarray, np.ndarray]:
        """The ranks each transfer belongs to, for dependencies: (src, dst) with UP
        transfers as (src, src) and DOWN transfers as (dst, dst)."""
        if self.hop is None:
            return self.src, self.dst
        return np.where(self.hop == DOWN, self.dst, self.src), np.where(self.hop == UP, self.src, self.dst)

    @property
    def n_transfers(self) -> int:
        """Transfers in one repetition."""
        return int(self.src.size)


@dataclass(frozen=True, eq=False)
class Phase:
    """``step`` repeated ``repeat`` times."""

    step: Step
    repeat: int = 1


@dataclass(frozen=True, eq=False)
class Schedule:
    """A whole collective for ``nranks`` group-local ranks.

    op: nccl-tests op name; algorithm: what ran; nbytes: the nccl-tests ``size`` (S) it moves.
    flow: the data flow builders record under :func:`netsim.collectives.compose.tracing` (which
    units of the buffer each transfer carries), for checking; ``None`` otherwise.
    blocks: thread blocks the collective's kernel holds on every member GPU while it runs (NCCL: one
    per channel); ``None``: not known (a schedule that is not a GPU kernel's, e.g. ASTRA-sim's).
    """

    op: str
    algorithm: str
    nranks: int
    nbytes: float
    phases: tuple[Phase, ...] = field(default_factory=tuple)
    flow: object = field(default=None, compare=False, repr=False)
    blocks: int | None = field(default=None, compare=False)

    @property
    def in_switch(self) -> bool:
        """Whether a switch reduces or multicasts for it (UP/DOWN transfers, NVLS): the switch
        needs every member's contribution, which the steps' per-rank dependencies leave out."""
        return any(p.step.hop is not None and bool((p.step.hop != PATH).any()) for p in self.phases)

    @property
    def n_steps(self) -> int:
        """Steps including repetitions."""
        return int(sum(p.repeat for p in self.phases))

    def map_steps(self, fn) -> "Schedule":
        """This schedule with ``fn(step)`` in place of every step that has transfers (delays and
        repeats kept)."""
        return replace(self, phases=tuple(ph if ph.step.n_transfers == 0 else Phase(fn(ph.step), ph.repeat)
                                          for ph in self.phases))

    def bytes_sent(self) -> np.ndarray:
        """Bytes each rank sends over the whole schedule (UP transfers included, DOWN not)."""
        out = np.zeros(self.nranks)
        for p in self.phases:
            own = p.step.owners()[0]
            np.add.at(out, p.step.src[own], p.step.nbytes[own] * p.repeat)
        return out

    def bytes_received(self) -> np.ndarray:
        """Bytes each rank receives over the whole schedule (DOWN transfers included, UP not)."""
        out = np.zeros(self.nranks)
        for p in self.phases:
            own = p.step.owners()[1]
            np.add.at(out, p.step.dst[own], p.step.nbytes[own] * p.repeat)
        return out
