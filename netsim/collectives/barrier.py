"""Dissemination barrier (Hensgen, Finkel and Manber).

``ceil(log2 n)`` steps; in step *k* rank *i* sends a ``BARRIER_BYTES`` token to
``(i + 2^k) mod n`` (and receives one from ``(i - 2^k) mod n``).  After step
*k* every rank has heard, directly or through others, from the ``2^(k+1) - 1``
ranks before it, so after the last step from everyone: no rank can leave
before every rank has arrived.  Works for any ``n`` (no power of two needed).

Closed form without contention: ``ceil(log2 n)·(α + 8/B)``.
The schedule's ``nbytes`` is 0 (a barrier moves no user data).

>>> s = barrier(5)
>>> s.n_steps, s.bytes_sent().tolist()
(3, [24.0, 24.0, 24.0, 24.0, 24.0])
"""

from __future__ import annotations

import numpy as np

from netsim.collectives.compose import check_int
from netsim.collectives.schedule import Phase, Schedule, Step

#: Bytes of one barrier token (a flag; NCCL moves 8-byte flags for synchronisation).
BARRIER_BYTES = 8.0


def barrier(n: int) -> Schedule:
    """Dissemination barrier among ``n`` ranks."""
    n = check_int(n, "n")
    src = np.arange(n, dtype=np.int64)
    phases = []
    dist = 1
    while dist < n:
        phases.append(Phase(Step(src, (src + dist) % n, np.full(n, BARRIER_BYTES))))
        dist *= 2
    return Schedule("barrier", "dissemination", n, 0.0, tuple(phases))
