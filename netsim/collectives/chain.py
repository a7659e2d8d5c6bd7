"""Pipelined chain broadcast and reduce (NCCL's ring broadcast/reduce).

The ring from the root is cut into a chain of ``n-1`` hops; the buffer is
split into ``chunks`` pieces that flow down the chain back to back, so chunk
*c* crosses hop *h* in step ``c + h``.  Fill and drain steps have their own
patterns; the steady middle (every hop busy) is one repeated phase, so the
time approaches ``S/B + (n-2)·S/(chunks·B)`` for large S.

>>> s = chain_broadcast(4, 4096, root=0, chunks=4)
>>> s.n_steps, s.bytes_received().tolist()
(6, [0.0, 4096.0, 4096.0, 4096.0])
"""

from __future__ import annotations

import numpy as np

from netsim.collectives.compose import PIECE_BYTES
from netsim.collectives.schedule import Phase, Schedule, Step

#: Pipeline chunk for broadcast/reduce (bytes): the pieces every pipelined schedule cuts.
CHUNK_BYTES = PIECE_BYTES


def default_chunks(nbytes: float, n: int) -> int:
    """Chunks of about 512 KiB, at least 1, at most 4·n (keeps schedules small)."""
    return int(max(1, min(np.ceil(nbytes / CHUNK_BYTES), 4 * n)))


def _chain(op: str, n: int, nbytes: float, root: int, chunks: int | None, towards_root: bool) -> Schedule:
    if n < 2:
        return Schedule(op, "ring", n, nbytes, ())
    chunks = chunks or default_chunks(nbytes, n)
    order = (root + np.arange(n)) % n  # chain positions, root first
    hops = n - 1
    size = nbytes / chunks
    phases: list[Phase] = []
    for k in range(chunks + hops - 1):
        lo, hi = max(0, k - chunks + 1), min(k, hops - 1)
        h = np.arange(lo, hi + 1)
        if towards_root:  # reduce: chunks travel from the far end of the chain to the root
            h = hops - 1 - h
            src, dst = order[h + 1], order[h]
        else:
            src, dst = order[h], order[h + 1]
        step = Step(src.astype(np.int64), dst.astype(np.int64), np.full(h.size, size), reduce=towards_root)
        if phases and _same(phases[-1].step, step):
            phases[-1] = Phase(phases[-1].step, phases[-1].repeat + 1)
        else:
            phases.append(Phase(step))
    return Schedule(op, "ring", n, nbytes, tuple(phases))


def _same(a: Step, b: Step) -> bool:
    return a.src.size == b.src.size and np.array_equal(a.src, b.src) and np.array_equal(a.dst, b.dst)


def chain_broadcast(n: int, nbytes: float, root: int = 0, chunks: int | None = None) -> Schedule:
    """Broadcast ``nbytes`` from ``root`` down a pipelined chain."""
    return _chain("broadcast", n, nbytes, root, chunks, towards_root=False)


def chain_reduce(n: int, nbytes: float, root: int = 0, chunks: int | None = None) -> Schedule:
    """Reduce ``nbytes`` to ``root`` up a pipelined chain."""
    return _chain("reduce", n, nbytes, root, chunks, towards_root=True)
