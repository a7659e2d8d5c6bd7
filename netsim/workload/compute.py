"""How long a compute node takes: its duration, or the roofline of the topology's GPU preset.

A node with ``duration_micros`` > 0 takes that.  Otherwise a node with ``num_ops`` takes
``num_ops / min(e * peak, mem_bw * num_ops / tensor_size)``, where ``e`` is the achieved fraction
of the peak for the node's kernel kind (its ``op_kind``, :data:`netsim.vocab.OP_KINDS`) in the
topology's ``compute_efficiency`` (the GPU preset's :data:`~netsim.topology.builders.GPU_EFFICIENCY`,
or ``--compute-efficiency``); key ``other`` covers nodes that name no kind.  A kind without an
entry runs at the peak, as ASTRA-sim's roofline does.  A node with nothing to compute costs 1 ns
(as in ASTRA-sim).

>>> from types import SimpleNamespace as NS
>>> import numpy as np
>>> facts = NS(peak_flops=1e15, mem_bw_Bps=1e12, compute_efficiency={"gemm": 0.5})
>>> t = NS(duration_micros=np.zeros(2), num_ops=np.array([10**12] * 2), tensor_size=np.array([1, 1]),
...        op_kind=np.array([0, -1], np.int8))
>>> r = Roofline(facts)
>>> r.time(t, 0), r.time(t, 1), r.used()
(0.002, 0.001, {'gemm': 0.5, 'other': 1.0})
"""

from __future__ import annotations

from netsim.vocab import OP_KINDS

__all__ = ["Roofline"]


class Roofline:
    """Compute-node times on one topology; remembers which kernel kinds it timed."""

    def __init__(self, facts):
        self.peak, self.bw = facts.peak_flops, facts.mem_bw_Bps
        eff = dict(getattr(facts, "compute_efficiency", None) or {})
        #: achieved fraction per op_kind code; the last entry (code -1) is for nodes naming no kind
        self.eff = [float(eff.get(k, 1.0)) for k in OP_KINDS] + [float(eff.get("other", 1.0))]
        self.perf = [self.peak * e for e in self.eff] if self.peak else None
        self.codes: set[int] = set()

    def time(self, t, i: int) -> float:
        """Seconds that row ``i`` of node table ``t`` computes for (before any straggler scale)."""
        dur = float(t.duration_micros[i]) * 1e-6
        if dur > 0:
            return dur
        ops, size = int(t.num_ops[i]), int(t.tensor_size[i])
        if ops > 0 and self.perf:
            code = int(t.op_kind[i])
            self.codes.add(code)
            peak = self.perf[code]
            return ops / (min(peak, self.bw * ops / size) if size > 0 and self.bw else peak)
        return 1e-9

    def used(self) -> dict[str, float]:
        """Kernel kind -> achieved fraction of the peak, for the kinds of the roofline-timed nodes so far."""
        return {("other" if c < 0 else OP_KINDS[c]): self.eff[c] for c in sorted(self.codes, key=lambda c: (c < 0, c))}
