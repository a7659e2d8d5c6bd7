"""ASTRA-sim's native ring all-reduce, step for step (reference §4.5, §4.10).

ASTRA-sim splits a collective into ``splits`` chunks (``preferred-dataset-splits``);
with one active chunk they run one after another.  A chunk's all-reduce on a
1-D ring is one phase: an ``endpoint-delay`` at its start, then ``p-1``
reduce-scatter messages of ``chunk/p`` bytes, each costing the network delay
plus ``endpoint-delay`` plus the reduction (:func:`netsim.astra_arith.reduction_ns`), then
``p-1`` all-gather messages costing the network delay plus ``endpoint-delay``.
On the analytical network this reproduces ASTRA-sim's regression value
(8 NPUs, 1 MiB, 4 splits, 50 GB/s, 500 ns, endpoint-delay 10, local-mem-bw 50:
117,780 ns).

>>> s = astra_ring_all_reduce(8, 1 << 20, splits=4, endpoint_delay_ns=10, local_mem_bw_GBps=50)
>>> s.n_steps
60
"""

from __future__ import annotations

from netsim.astra_arith import chunk_bytes, reduction_ns
from netsim.collectives.ring import ring_step
from netsim.collectives.schedule import Phase, Schedule, Step


def astra_ring_all_reduce(npus: int, comm_size: int, *, splits: int, endpoint_delay_ns: float,
                          local_mem_bw_GBps: float) -> Schedule:
    """ASTRA-sim ring all-reduce on a 1-D network, active-chunks-per-dimension 1."""
    d = chunk_bytes(comm_size, splits, npus) // npus
    e = endpoint_delay_ns * 1e-9
    red = reduction_ns(d, local_mem_bw_GBps) * 1e-9
    chunk = (Phase(Step.delay(e)),
             Phase(ring_step(npus, d, overhead_s=e + red, reduce=True), npus - 1),
             Phase(ring_step(npus, d, overhead_s=e), npus - 1))
    return Schedule("all_reduce", "astra_ring", npus, comm_size, chunk * splits)
