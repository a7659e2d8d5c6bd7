"""A step program run whole on the compiled flow table (:mod:`~netsim.network.runkernel`).

The executor (:func:`~netsim.collectives.executor.run_collective`) hands a collective that runs
alone on a :class:`~netsim.network.flow.FlowNetwork` to :meth:`FlowNetwork.run_program
<netsim.network.flow.FlowNetwork.run_program>` as a :class:`Program`: its phases and transfers on
flat arrays.  One kernel call then runs every event, and Python sees the run again only to grow an
array.  The run is the event path's, float for float: the same queue order, callbacks and flow
table operations (see the kernel's module docstring); ``tests/test_flowrun.py`` checks every
rank's finish and every link counter bit for bit against the event path on compiled kernels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Most transfers (over all steps and repeats) a program may hold: the run keeps one pool entry
#: and at most one small record per transfer until it ends (8-40 bytes each).
MAX_TRANSFERS = 64_000_000
#: Most floats the fast-forward history may hold (one per rank and step; 128 MiB): a program with
#: more runs on the event path when it may fast-forward.
MAX_HISTORY = 1 << 24
#: Entries the run's own arrays start with beyond what one event can add (they grow as needed).
INITIAL_ROOM = 4096


@dataclass
class Program:
    """A schedule on flat arrays.  Phase ``p`` holds steps ``first[p] .. first[p] + repeat[p] - 1``,
    each of its transfers ``toff[p] .. toff[p] + ntr[p] - 1`` (global ids), ``delay[p]`` seconds
    for a step without transfers, ``overhead[p]`` seconds after each delivery.  Per transfer: its
    ranks (``es``, ``ed``: local), wire bytes, rate cap (inf: none) and path (CSR ``rt_ptr`` /
    ``rt_links``).  ``touch_ptr[p, r] .. touch_ptr[p, r + 1]`` index ``touch``: the transfers of
    phase ``p`` touching rank ``r`` (global ids); ``degree[p, r]`` how many deliveries rank ``r``
    waits for in a step of phase ``p``.  ``start``: when each rank begins."""

    first: np.ndarray
    repeat: np.ndarray
    ntr: np.ndarray
    delay: np.ndarray
    overhead: np.ndarray
    es: np.ndarray
    ed: np.ndarray
    nbytes: np.ndarray
    cap: np.ndarray
    rt_ptr: np.ndarray
    rt_links: np.ndarray
    touch_ptr: np.ndarray
    touch: np.ndarray
    degree: np.ndarray
    start: np.ndarray

    @property
    def nranks(self) -> int:
        return int(self.start.size)

    @property
    def instances(self) -> int:
        """Transfers over every step and repeat."""
        return int((self.ntr * self.repeat).sum())


def _grow(a: np.ndarray, need: int) -> np.ndarray:
    if a.shape[0] >= need:
        return a
    out = np.zeros((max(2 * a.shape[0], need),) + a.shape[1:], dtype=a.dtype)
    out[:a.shape[0]] = a
    return out


def run(table, prog: Program, link_bytes: np.ndarray, link_lat: np.ndarray, clocks: tuple,
        fast_forward: bool = False) -> dict:
    """Run ``prog`` on the compiled ``table`` (a :class:`~netsim.network.compiled.CompiledFlowTable`
    and its link counters); ``link_bytes`` is added to.  ``clocks``: the network's ``(now, flows'
    clock, drained seconds, shifted seconds, last epoch shift)``.  ``fast_forward``: jump periodic
    regimes as :class:`~netsim.collectives.executor.CollectiveRun` does (the network shifted).
    Returns the ranks' finish times (``finish``, ``done``: how many finished), the clocks after the
    last event (``now``, ``t_flows``, ``drained``, ``shifted``, ``epochs``: the shifts' cumulative
    sums), the network's counters (``events``, ``deliveries``, ``transfers``) and the executor's
    (``batches``, ``steps_skipped``)."""
    from netsim.network import runqueue as rq
    from netsim.network.runkernel import run as kernel_run

    n, total = prog.nranks, int((prog.repeat).sum())
    now, t_flows, drained, shifted, epoch0 = clocks
    per_rank = prog.degree.max(axis=0) if prog.degree.size else np.zeros(n, np.int64)
    bound = int(per_rank.sum()) + n  # most deliveries, flows and rank groups one event can add
    S = np.zeros(rq.N_S, np.int64)
    S[rq.S_TT], S[rq.S_TOTAL], S[rq.S_D], S[rq.S_FF] = int(prog.es.size), total, bound, int(fast_forward)
    F = np.array([now, t_flows, drained, shifted])
    size = bound + INITIAL_ROOM
    hf, hi = np.zeros((size, 2)), np.zeros((size, 5), np.int64)
    ri, rf, pool = np.zeros((size, 3), np.int64), np.zeros(size), np.zeros(size, np.int64)
    pend = np.zeros(size, np.int64)
    # CollectiveRun._begin: the ranks starting at each time, in increasing time (a sorted array is a heap)
    starts = np.unique(prog.start)
    for i, t in enumerate(starts.tolist()):
        group = np.flatnonzero(prog.start == t)
        pool = _grow(pool, int(S[rq.S_NPOOL]) + group.size + bound + 16)
        pool[S[rq.S_NPOOL]:S[rq.S_NPOOL] + group.size] = group
        ri[i] = (S[rq.S_NPOOL], group.size, 0)
        S[rq.S_NPOOL] += group.size
        hf[i] = (now + max(t - now, 0.0), t)
        hi[i] = (rq.NORMAL, i, rq.K_ENTER, i, 0)
    S[rq.S_NH] = S[rq.S_EID] = S[rq.S_NREC] = starts.size
    cq, cqc, cql = np.zeros((bound + 1, 3), np.int64), np.zeros(bound + 1, np.int64), np.zeros(bound + 1)
    cur, rem, t_done = np.full(n, -1, np.int64), np.zeros(n, np.int64), np.zeros(n)
    rows = total if fast_forward else 1
    ff = (np.zeros((rows, n if fast_forward else 1)), np.zeros(rows, np.int8), np.zeros(rows, np.int64),
          np.zeros(total + 2, np.int64), np.full(total + 2, float(epoch0)))
    plen = np.diff(prog.rt_ptr)
    longest = int(plen.max()) if plen.size else 0
    sc = (np.zeros(bound + 2, np.int64), np.zeros(bound * longest + 1, np.int64), np.zeros(bound + 1),
          np.zeros(bound + 1), np.zeros(bound + 1), np.zeros(bound + 1, np.int64))
    P = (prog.first, prog.repeat, prog.ntr, prog.delay, prog.overhead, prog.es, prog.ed, prog.nbytes, prog.cap,
         prog.rt_ptr, prog.rt_links, prog.touch_ptr, prog.touch, prog.degree, prog.start, link_lat)
    while True:
        R = (hf, hi, S, F, ri, rf, pool, pend, cq, cqc, cql, cur, rem, t_done, link_bytes, *ff, table.clock)
        code = kernel_run(P, R, table.kernel_arrays(), *sc)
        if code == 0:
            break
        if code == 2:
            table.make_room(int(S[rq.S_NEED_K]), sc[1][:S[rq.S_NEED_NNZ]].copy())
            continue
        need = int(S[rq.S_NEED])
        hf, hi = _grow(hf, int(S[rq.S_NH]) + need), _grow(hi, int(S[rq.S_NH]) + need)
        ri, rf = _grow(ri, int(S[rq.S_NREC]) + need), _grow(rf, int(S[rq.S_NREC]) + need)
        pool, pend = _grow(pool, int(S[rq.S_NPOOL]) + need), _grow(pend, int(S[rq.S_NPEND]) + 2)
    nj = int(S[rq.S_NJ])
    return {"finish": t_done, "done": int(S[rq.S_FINISHED]), "now": float(F[rq.F_NOW]),
            "t_flows": float(F[rq.F_T]), "drained": float(F[rq.F_DRAINED]), "shifted": float(F[rq.F_SHIFTED]),
            "epochs": ff[4][1:nj + 1].tolist(), "events": int(S[rq.S_EVENTS]), "deliveries": int(S[rq.S_DELIV]),
            "transfers": int(S[rq.S_TRANSFERS]), "batches": int(S[rq.S_BATCHES]), "steps_skipped": int(S[rq.S_SKIPPED])}
