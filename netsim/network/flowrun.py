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
MAX_TRANSFERS = 16_000_000
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


def run(table, prog: Program, link_bytes: np.ndarray, link_lat: np.ndarray, now: float, t_flows: float,
        drained: float) -> dict:
    """Run ``prog`` from ``now`` on the compiled ``table`` (a
    :class:`~netsim.network.compiled.CompiledFlowTable` and its link counters); ``link_bytes`` is
    added to.  ``t_flows``/``drained``: the network's flow clock and drained seconds.  Returns the
    ranks' finish times (``finish``, ``done``: how many finished), the clocks after the last event
    (``now``, ``t_flows``, ``drained``) and the network's counters (``events``, ``deliveries``,
    ``transfers``) and the executor's (``batches``)."""
    from netsim.network import runkernel as rk

    n, total = prog.nranks, int((prog.repeat).sum())
    per_rank = prog.degree.max(axis=0) if prog.degree.size else np.zeros(n, np.int64)
    bound = int(per_rank.sum()) + n  # most deliveries, flows and rank groups one event can add
    S = np.zeros(rk.N_S, np.int64)
    S[rk.S_TT], S[rk.S_TOTAL], S[rk.S_D] = int(prog.es.size), total, bound
    F = np.array([now, t_flows, drained])
    size = bound + INITIAL_ROOM
    hf, hi = np.zeros(size), np.zeros((size, 4), np.int64)
    ri, rf, pool = np.zeros((size, 3), np.int64), np.zeros(size), np.zeros(size, np.int64)
    pend = np.zeros(size, np.int64)
    # CollectiveRun._begin: the ranks starting at each time, in increasing time (a sorted array is a heap)
    starts = np.unique(prog.start)
    for i, t in enumerate(starts.tolist()):
        group = np.flatnonzero(prog.start == t)
        pool[S[rk.S_NPOOL]:S[rk.S_NPOOL] + group.size] = group
        ri[i] = (S[rk.S_NPOOL], group.size, 0)
        S[rk.S_NPOOL] += group.size
        hf[i] = now + max(t - now, 0.0)
        hi[i] = (rk.NORMAL, i, rk.K_ENTER, i)
    S[rk.S_NH] = S[rk.S_EID] = S[rk.S_NREC] = starts.size
    if S[rk.S_NPOOL] + bound > pool.size:
        pool = _grow(pool, int(S[rk.S_NPOOL]) + bound + 1024)
    cq, cqc, cql = np.zeros((bound + 1, 3), np.int64), np.zeros(bound + 1, np.int64), np.zeros(bound + 1)
    cur, rem, t_done = np.full(n, -1, np.int64), np.zeros(n, np.int64), np.zeros(n)
    plen = np.diff(prog.rt_ptr)
    longest = int(plen.max()) if plen.size else 0
    sc = (np.zeros(bound + 2, np.int64), np.zeros(bound * longest + 1, np.int64), np.zeros(bound + 1),
          np.zeros(bound + 1), np.zeros(bound + 1), np.zeros(bound + 1, np.int64))
    P = (prog.first, prog.repeat, prog.ntr, prog.delay, prog.overhead, prog.es, prog.ed, prog.nbytes, prog.cap,
         prog.rt_ptr, prog.rt_links, prog.touch_ptr, prog.touch, prog.degree, prog.start, link_lat)
    while True:
        R = (hf, hi, S, F, ri, rf, pool, pend, cq, cqc, cql, cur, rem, t_done, link_bytes)
        code = rk.run(P, R, table.kernel_arrays(), *sc)
        if code == 0:
            break
        if code == 2:
            table.make_room(int(S[rk.S_NEED_K]), sc[1][:S[rk.S_NEED_NNZ]].copy())
            continue
        need = int(S[rk.S_NEED])
        hf, hi = _grow(hf, int(S[rk.S_NH]) + need), _grow(hi, int(S[rk.S_NH]) + need)
        ri, rf = _grow(ri, int(S[rk.S_NREC]) + need), _grow(rf, int(S[rk.S_NREC]) + need)
        pool, pend = _grow(pool, int(S[rk.S_NPOOL]) + need), _grow(pend, int(S[rk.S_NPEND]) + 2)
    return {"finish": t_done, "done": int(S[rk.S_FINISHED]), "now": float(F[rk.F_NOW]),
            "t_flows": float(F[rk.F_T]), "drained": float(F[rk.F_DRAINED]), "events": int(S[rk.S_EVENTS]),
            "deliveries": int(S[rk.S_DELIV]), "transfers": int(S[rk.S_TRANSFERS]), "batches": int(S[rk.S_BATCHES])}
