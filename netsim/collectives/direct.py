"""Direct all-to-all (windowed) and send/recv.

All-to-all: each rank sends ``S/n`` bytes to every other rank (S = nccl-tests
size, the whole per-rank send buffer).  Peers are visited in the shifted
order ``r+1, r+2, ...`` and ``window`` of them are in flight at once (one
step per window), like NCCL's grouped p2p over a bounded number of
connections; ``window = n-1`` sends to everyone at once.  Transfer keys here are peer offsets;
:func:`netsim.collectives.plan.shape_p2p` re-keys NCCL's sends by the p2p channels they run on
(:func:`netsim.collectives.p2p.key_by_channel`), which pick their NICs and ECMP paths.

>>> s = direct_all_to_all(4, 4000, window=3)
>>> s.n_steps, s.bytes_sent().tolist()
(1, [3000.0, 3000.0, 3000.0, 3000.0])
"""

from __future__ import annotations

import numpy as np

from netsim.collectives.schedule import Phase, Schedule, Step


def default_window(n: int) -> int:
    """All peers at once up to 64 ranks, else 16 in flight."""
    return n - 1 if n <= 64 else 16


def direct_all_to_all(n: int, nbytes: float, window: int | None = None) -> Schedule:
    """Direct all-to-all of an ``nbytes`` per-rank send buffer."""
    if n < 2:
        return Schedule("alltoall", "direct", n, nbytes, ())
    window = max(1, min(window or default_window(n), n - 1))
    per_peer = nbytes / n
    ranks = np.arange(n, dtype=np.int64)
    phases = []
    for first in range(1, n, window):
        shifts = np.arange(first, min(first + window, n), dtype=np.int64)
        src = np.repeat(ranks, shifts.size)
        dst = (src + np.tile(shifts, n)) % n
        phases.append(Phase(Step(src, dst, np.full(src.size, per_peer), key=np.tile(shifts, n))))
    return Schedule("alltoall", "direct", n, nbytes, tuple(phases))


def send_recv(n: int, nbytes: float) -> Schedule:
    """nccl-tests sendrecv: rank r sends ``nbytes`` to r+1 and receives from r-1, once."""
    src = np.arange(n, dtype=np.int64)
    if n < 2:
        return Schedule("sendrecv", "p2p", n, nbytes, ())
    return Schedule("sendrecv", "p2p", n, nbytes, (Phase(Step(src, (src + 1) % n, np.full(n, float(nbytes)))),))
