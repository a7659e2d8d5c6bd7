"""How long a compute node takes: its duration, or the roofline of the topology's GPU preset.

A node with ``duration_micros`` > 0 takes that.  Otherwise a node with ``num_ops`` takes
``num_ops / (e * min(peak, mem_bw * num_ops / tensor_size))``: the roofline (Williams et al., CACM
2009) scaled by ``e``, the achieved fraction of it for the node's kernel kind (its ``op_kind``,
:data:`netsim.vocab.OP_KINDS`) in the topology's ``compute_efficiency`` (the GPU preset's
:data:`~netsim.topology.builders.GPU_EFFICIENCY`, or ``--compute-efficiency``); key ``other`` covers
nodes that name no kind.  The fraction applies to the roof that binds: the peak FLOP/s of a
compute-bound GEMM, the HBM bandwidth of a memory-bound element-wise kernel.  A kind without an entry
runs at the roofline, as ASTRA-sim's does.  A node with nothing to compute costs 1 ns (as in ASTRA-sim).

A ``gemm`` node that is one matrix multiply (it carries ``gemm_m`` x ``gemm_n``, its output shape: the
``megatron-2021`` kernel profile writes them) is timed by its tiles, on a GPU whose SM count netsim knows
(:data:`~netsim.topology.builders.GPU_SMS`): cuBLAS computes the output in tiles, one per SM at a time, so a
GEMM takes ``ceil(tiles / SMs)`` waves of whole tiles.  Its compute roof is the peak times the fraction of
that SM-time holding real outputs (:func:`gemm_utilization`); the preset's ``gemm`` efficiency (measured at the
best shape) scales it as before, so an aligned GEMM whose tiles fill every wave runs at exactly that figure.

>>> from types import SimpleNamespace as NS
>>> import numpy as np
>>> facts = NS(peak_flops=1e15, mem_bw_Bps=1e12, compute_efficiency={"gemm": 0.5, "elementwise": 0.8})
>>> t = NS(duration_micros=np.zeros(3), num_ops=np.array([10**12] * 2 + [10**6]),
...        tensor_size=np.array([1, 1, 2 * 10**6]), op_kind=np.array([0, -1, 3], np.int8))
>>> r = Roofline(facts)
>>> r.time(t, 0), r.time(t, 1), r.time(t, 2), r.used()
(0.002, 0.001, 2.5e-06, {'gemm': 0.5, 'elementwise': 0.8, 'other': 1.0})
"""

from __future__ import annotations

import math

import numpy as np

from netsim.vocab import MISSING, OP_KINDS

__all__ = ["GEMM_TILES", "Roofline", "gemm_utilization"]

#: Output tiles (rows x columns) of cuBLAS's most efficient GEMM kernels, one thread block (CTA) per tile:
#: 256x128 and 128x256.  NVIDIA, "Matrix Multiplication Background User's Guide" (DU-09799-001_v001, 2023),
#: §2.3 "Typical Tile Dimensions In cuBLAS And Performance" (the largest tiles are the most efficient) and
#: §3 "Dimension Quantization Effects" (a partial tile costs a whole one; tiles run in waves of one per SM,
#: 108 at a time on A100).
GEMM_TILES = ((256, 128), (128, 256))


def gemm_utilization(m: int, n: int, sms: int) -> float:
    """Fraction of a GEMM's SM-time that computes real outputs: ``m * n`` over the tiles it runs
    (``ceil(m / rows) * ceil(n / cols)``, tile quantization) rounded up to whole waves of ``sms`` tiles
    (wave quantization), for the better of :data:`GEMM_TILES`.

    >>> gemm_utilization(256 * 108, 128 * 4, 108)      # aligned: every tile full, every wave full
    1.0
    >>> round(gemm_utilization(2048, 2304, 108), 4)    # 144 tiles of 256x128: 2 waves of 108
    0.6667
    """
    best = 0.0
    for rows, cols in GEMM_TILES:
        tiles = math.ceil(m / rows) * math.ceil(n / cols)
        waves = math.ceil(tiles / sms)
        best = max(best, m * n / (waves * sms * rows * cols))
    return best


class Roofline:
    """Compute-node times on one topology; remembers which kernel kinds it timed."""

    def __init__(self, facts):
        self.peak, self.bw = facts.peak_flops, facts.mem_bw_Bps
        self.sms = getattr(facts, "gpu_sms", None)  # tiles and waves of shaped GEMMs (None: not modelled)
        eff = dict(getattr(facts, "compute_efficiency", None) or {})
        #: achieved fraction per op_kind code; the last entry (code -1) is for nodes naming no kind
        self.eff = [float(eff.get(k, 1.0)) for k in OP_KINDS] + [float(eff.get("other", 1.0))]
        self.codes: set[int] = set()

    def time(self, t, i: int) -> float:
        """Seconds that row ``i`` of node table ``t`` computes for (before any straggler scale)."""
        dur = float(t.duration_micros[i]) * 1e-6
        if dur > 0:
            return dur
        ops, size = int(t.num_ops[i]), int(t.tensor_size[i])
        if ops > 0 and self.peak:
            code = int(t.op_kind[i])
            self.codes.add(code)
            peak = self.peak
            gm = getattr(t, "gemm_m", None)
            if gm is not None and self.sms and int(gm[i]) != MISSING:
                peak = peak * gemm_utilization(int(gm[i]), int(t.gemm_n[i]), self.sms)
            roof = min(peak, self.bw * ops / size) if size > 0 and self.bw else peak
            return ops / (self.eff[code] * roof)
        return 1e-9

    def times(self, t) -> np.ndarray:
        """:meth:`time` of every row of node table ``t`` at once (the same operations, element by element,
        so the same floats), without recording kinds (:meth:`note_kinds`).

        >>> from types import SimpleNamespace as NS
        >>> facts = NS(peak_flops=1e15, mem_bw_Bps=1e12, compute_efficiency={"gemm": 0.5})
        >>> t = NS(duration_micros=np.array([0, 0, 0, 7]), num_ops=np.array([10**12, 0, 10**6, 5]),
        ...        tensor_size=np.array([1, 1, 2 * 10**6, 1]), op_kind=np.array([0, -1, -1, 0], np.int8))
        >>> r = Roofline(facts)
        >>> r.times(t).tolist() == [r.time(t, i) for i in range(4)]
        True
        """
        out = np.asarray(t.duration_micros).astype(np.float64) * 1e-6
        idx = np.flatnonzero(~(out > 0) & (np.asarray(t.num_ops) > 0)) if self.peak else np.zeros(0, np.int64)
        out[~(out > 0)] = 1e-9
        if idx.size == 0:
            return out
        peak = np.full(idx.size, float(self.peak))
        gm = getattr(t, "gemm_m", None)
        if gm is not None and self.sms:
            m, n = np.asarray(gm)[idx], np.asarray(t.gemm_n)[idx]
            shaped = np.flatnonzero(m != MISSING)
            util: dict = {}
            for j, mn in zip(shaped.tolist(), zip(m[shaped].tolist(), n[shaped].tolist())):
                if mn not in util:
                    util[mn] = gemm_utilization(mn[0], mn[1], self.sms)
                peak[j] = peak[j] * util[mn]
        ops = np.asarray(t.num_ops)[idx].astype(np.float64)
        size = np.asarray(t.tensor_size)[idx]
        roof = peak.copy()
        if self.bw:
            b = size > 0
            roof[b] = np.minimum(peak[b], self.bw * ops[b] / size[b].astype(np.float64))
        out[idx] = ops / (np.asarray(self.eff)[np.asarray(t.op_kind)[idx]] * roof)
        return out

    def note_kinds(self, t, rows: np.ndarray) -> None:
        """Record the kernel kinds of ``rows`` of ``t`` that the roofline times (what :meth:`time` records)."""
        if self.peak:
            rows = rows[~(np.asarray(t.duration_micros)[rows] > 0) & (np.asarray(t.num_ops)[rows] > 0)]
            self.codes.update(np.unique(np.asarray(t.op_kind)[rows]).astype(int).tolist())

    def used(self) -> dict[str, float]:
        """Kernel kind -> achieved fraction of the roofline, for the kinds of the roofline-timed nodes so far."""
        return {("other" if c < 0 else OP_KINDS[c]): self.eff[c] for c in sorted(self.codes, key=lambda c: (c < 0, c))}


class SmShare:
    """GPU compute slowed by the communication kernels running beside it on the same GPU.

    An NCCL kernel holds one thread block per channel for as long as it runs, waiting for its peers
    included (one block per channel: ``enqueue.cc:1756-1758``, NCCL v2.30.7-1).  A block is up to 640
    threads (``NCCL_MAX_NTHREADS``, ``src/include/device.h:93``) of at most 96 registers each
    (``-maxrregcount=96``, ``makefiles/common.mk:103``): up to 61,440 of the 65,536 registers of an SM
    (V100, A100 and H100 whitepapers), so no GEMM thread block fits beside it and the SM is lost to
    compute.  A rank's compute therefore runs at ``(sms - held) / sms`` of its speed while its comm kernels
    hold ``held`` blocks (none below zero; ``sms``: the GPU preset's, :data:`~netsim.topology.builders.GPU_SMS`),
    re-timed whenever a kernel starts or ends: a fluid model that leaves out tile quantization and the
    memory bandwidth the comm kernel also takes.  ``sms=None`` (unknown GPU, ASTRA-sim networks, or
    ``--sm-contention off``): compute never slows.

    >>> from types import SimpleNamespace as NS
    >>> import simpy
    >>> env = simpy.Environment()
    >>> net = NS(env=env, call_at=lambda t, fn: env.timeout(t - env.now).callbacks.append(lambda _e: fn()))
    >>> share, ends = SmShare(net, 100), []
    >>> share.compute(0, 1.0, lambda: ends.append(env.now))
    >>> env.run(until=0.5); release = share.hold(0, 50)      # half the SMs from t=0.5 ...
    >>> env.run(until=0.7); release()                          # ... to t=0.7
    >>> env.run(); ends, round(share.stretch[0], 9)
    ([1.1], 0.1)
    """

    def __init__(self, net, sms: int | None, sends=None):
        self.net, self.sms, self.sends = net, (int(sms) if sms else None), sends
        self.held: dict[int, int] = {}  # rank -> blocks its running comm kernels hold
        #: rank -> job id -> [work left (s at full speed), since, done, token, seconds, start]
        self.jobs: dict[int, dict[int, list]] = {}
        self.stretch: dict[int, float] = {}  # rank -> compute time lost to comm kernels (s)
        self.peak: dict[int, int] = {}  # rank -> most blocks held at once
        self._next = 0

    def rate(self, rank: int) -> float:
        """Fraction of ``rank``'s SMs free for compute now."""
        return max(self.sms - self.held.get(rank, 0), 0) / self.sms

    def compute(self, rank: int, seconds: float, done) -> None:
        """Run ``seconds`` of compute (at full speed) on ``rank``; ``done()`` when it has run."""
        now = self.net.env.now
        if self.sms is None:
            self.net.call_at(now + seconds, done)
            return
        self._next += 1
        job = [seconds, now, done, 0, seconds, now]
        self.jobs.setdefault(rank, {})[self._next] = job
        self._arm(rank, self._next, job)

    def p2p_blocks(self, src_gpu: int, dst_gpu: int, nbytes: int) -> int:
        """Thread blocks an NCCL send (or its receive) of ``nbytes`` between two GPUs runs on: its
        channels (:meth:`netsim.workload.sends.Sends.blocks`)."""
        if self.sms is None or self.sends is None:
            return 0
        return self.sends.blocks(src_gpu, dst_gpu, nbytes)

    def hold(self, rank: int, blocks):
        """A comm kernel of ``blocks`` thread blocks starts on ``rank``; returns its end (call once)."""
        if self.sms is None or not blocks:
            return _nothing
        self._retime(rank, int(blocks))
        self.peak[rank] = max(self.peak.get(rank, 0), self.held[rank])
        return lambda: self._retime(rank, -int(blocks))

    def notes(self, copies: int = 1) -> list[str]:
        """What the run's notes say of compute slowed by comm kernels (nothing if it never was); ``copies``:
        the ranks each simulated rank stands for (replica symmetry)."""
        if not self.stretch or not self.peak:
            return []
        lost = np.array(list(self.stretch.values()))
        return [f"communication kernels held SMs while compute ran (up to {max(self.peak.values())} of "
                f"{self.sms} SMs): compute took {lost.max() * 1e3:.3f} ms longer on the most slowed rank, "
                f"{lost.mean() * 1e3:.3f} ms on average over the {lost.size * copies} ranks slowed"]

    def _retime(self, rank: int, delta: int) -> None:
        jobs, now = self.jobs.get(rank), self.net.env.now
        if jobs:
            rate = self.rate(rank)
            for job in jobs.values():
                job[0] -= (now - job[1]) * rate
                job[1] = now
        self.held[rank] = self.held.get(rank, 0) + delta
        if jobs:
            for jid, job in jobs.items():
                self._arm(rank, jid, job)

    def _arm(self, rank: int, jid: int, job: list) -> None:
        job[3] += 1
        rate = self.rate(rank)
        if rate > 0:  # else it waits for a kernel to end
            token = job[3]
            self.net.call_at(job[1] + max(job[0], 0.0) / rate, lambda: self._fire(rank, jid, token))

    def _fire(self, rank: int, jid: int, token: int) -> None:
        jobs = self.jobs[rank]
        job = jobs.get(jid)
        if job is None or job[3] != token:
            return  # re-timed since
        del jobs[jid]
        lost = self.net.env.now - job[5] - job[4]
        if lost > 1e-12 + 1e-9 * job[4]:  # not rounding: a kernel held SMs while it ran
            self.stretch[rank] = self.stretch.get(rank, 0.0) + lost
        job[2]()


def _nothing() -> None:
    return None


class Kernel:
    """``done`` of a communication node, wrapped so that its kernel's thread blocks are held on
    ``rank`` from :meth:`start` until the node is done (a node done before it started holds none)."""

    __slots__ = ("share", "rank", "done", "release", "ended")

    def __init__(self, share: SmShare, rank: int, done):
        self.share, self.rank, self.done, self.release, self.ended = share, rank, done, _nothing, False

    def start(self, blocks) -> None:
        if not self.ended:
            self.release = self.share.hold(self.rank, blocks)

    def __call__(self) -> None:
        self.ended = True
        self.release()
        self.done()
