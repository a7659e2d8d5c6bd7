"""Direct all-reduce: every rank reduce-scatters to every other rank directly, then all-gathers.

Rank r owns shard r (``S/n`` bytes).  Reduce-scatter: every rank sends its copy of shard j to
rank j, for every j, as a direct all-to-all of ``S/n`` per peer (receivers reduce); all-gather:
every rank sends its reduced shard to every other rank the same way.  Peers are visited in
shifted order, ``window`` at a time (:func:`netsim.collectives.direct.direct_all_to_all`), as
ASTRA-sim's ``direct`` all-reduce does (its ``DIRECT`` implementation: a reduce-scatter and an
all-gather, each with all peers at once up to its window).  Each rank sends and receives
``2 (n-1)/n S`` bytes, the ring's volume, in 2 rounds of ``n-1`` messages instead of ``2(n-1)``
dependent steps.

>>> s = direct_all_reduce(4, 4000, window=3)
>>> s.n_steps, s.bytes_sent().tolist()
(2, [6000.0, 6000.0, 6000.0, 6000.0])
"""

from __future__ import annotations

from dataclasses import replace

from netsim.collectives.direct import direct_all_to_all
from netsim.collectives.schedule import Phase, Schedule


def direct_all_reduce(n: int, nbytes: float, window: int | None = None) -> Schedule:
    """Direct all-reduce of ``nbytes`` (see the module docstring)."""
    if n < 2:
        return Schedule("all_reduce", "direct", n, nbytes, ())
    a2a = direct_all_to_all(n, nbytes, window)  # S/n to every peer: one shard each
    rs = [Phase(replace(p.step, reduce=True), p.repeat) for p in a2a.phases]
    return Schedule("all_reduce", "direct", n, nbytes, tuple(rs) + a2a.phases)
