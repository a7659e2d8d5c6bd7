"""The compiled engine: the event engine on arrays (numba), for chain workloads.

Where it applies (:func:`compiled_plan` says why not otherwise): the congestion-aware or the analytical
(congestion-unaware) model on a 1-D ASTRA-sim network, one queue per dimension, no rendezvous, no custom
collectives, roofline or replay-only, a non-zero endpoint delay; every rank's trace is a *chain*
(:func:`netsim.astra.batched.chain_of`) of COMP nodes and world collectives (ALL_REDUCE, ALL_GATHER,
REDUCE_SCATTER, ALL_TO_ALL), every rank issuing the same collectives in the same order, each with one of
``ring``, ``direct``/``directN``, ``halvingDoubling`` or (all-reduce on a power of two)
``doubleBinaryTree``; any number of active chunks, any window, any scheduling policy. These are the runs
the batched engines leave to the event engine: congestion-aware ones where same-instant arrivals on a
link need the event queue's order, analytical ones such as a windowed direct all-reduce or
reduce-scatter.

Why exact. It is not a recurrence but the event engine itself, ported piece by piece
(:mod:`netsim.astra.compiled_kernel`, :mod:`netsim.astra.compiled_loop`): the same events are scheduled
in the same order and draw the same sequence numbers, so same-instant events run in the same order, link
FIFOs fill in the same order, and every time is the same integer. What it leaves out has no effect on
that order: Python closures (events carry a kind and two integers), the fabric's per-message callbacks
(a collective send has none; a receive's is its stream's ``consume``) and the matching entries (messages
of one (tag, source, destination, size) key take one route of FIFO links, so they land in send order and
the n-th landing meets the n-th receive). Pools that run out grow and the run starts again; a deadlock
or an event at t = 0 hands the run back to the event engine (which reports them).
tests/test_astra_compiled.py compares it with ``--engine full`` on random configs (hypothesis) and
benchmarks/fuzz_astra_engines.py does so on random batches.
"""

from __future__ import annotations

import math

import numpy as np

from netsim import astra_arith as arith
from netsim.astra.algorithms import INTER, LEAF, BinaryTree
from netsim.astra.batched import ChainRun, chain_of, ring_of
from netsim.astra.batched_algos import hd_schedule
from netsim.astra.batched_timed import NotBatched
from netsim.chakra.model import MISSING

OPS = {"all_reduce": 0, "reduce_scatter": 1, "all_gather": 2, "all_to_all": 3}  # compiled_kernel AR, RS, AG, A2A
KINDS = {"ring": 0, "direct": 1, "halvingDoubling": 2, "doubleBinaryTree": 3}
NETS = {"Switch": 0, "FullyConnected": 1, "Ring": 2}
POLICIES = {"LIFO": 0, "FIFO": 1, "EXPLICIT": 2}
#: ``engine="auto"`` runs the compiled engine from this many messages on: the crossover of the two
#: engines' CPU seconds per process (``python -m netsim astra``, start-up included, congestion-aware,
#: one loaded 2-core machine, 2026-11-28): the event engine costs about 27 us a message on top of some
#: 0.8 CPU-s at 21,376 messages, the compiled one 1.1-1.3 CPU-s nearly flat (numba and the cached kernels
#: load), so they meet near 38,000 (benchmarks/bench_astra_general.py's cases via ``make_inputs``:
#: general on 16 NPUs 21,376 messages full 0.76-0.79 / compiled 1.07-1.22; on 32 NPUs 77,696: 2.24-2.60 /
#: 1.36-1.84; sequence on 8 NPUs 17,408: 0.70-0.75 / 1.05-1.34; on 16 NPUs 69,632: 1.98-2.17 / 1.28-1.34;
#: a fuzz config of 23,920 messages: 0.72-1.09 / 1.24-1.60).  Below it the event engine also peaks
#: some 100 MB lower (46 against 151 MB there).
MIN_MESSAGES = 40_000


class Prep:
    """The arrays of one run (see :func:`compiled_plan`)."""

    def __init__(self, chains: dict, seq: list, ctx):
        self.chains, self.seq, self.ctx = chains, seq, ctx
        # messages the run sends: streams x ranks x each one's sends (a tree: fewer than 2 a rank)
        self.messages = sum(row[2] * ctx.npus * (2 if row[1] == KINDS["doubleBinaryTree"] else row[7]) for row in seq)


def _why_not(ctx, rendezvous: bool) -> str | None:
    import importlib.util

    if importlib.util.find_spec("numba") is None:  # pyproject installs it below Python 3.15 only
        return "numba is not installed"
    cfg, net = ctx.system, ctx.network
    if ctx.model not in ("congestion-aware", "analytical"):
        return "it runs the analytical and congestion-aware models only"
    if len(net.dims) != 1 or net.dims[0].kind not in NETS:
        return "the network is not a 1-D ASTRA-sim network"
    if rendezvous or ctx.queues_per_dim != 1 or ctx.endpoint_delay <= 0:
        return "rendezvous, several queues per dimension or a 0 ns endpoint delay"
    if cfg.custom or cfg.per_node_custom or cfg.roofline_enabled or cfg.replay_only:
        return "custom collectives, roofline or replay-only"
    if cfg.scheduling_policy not in POLICIES or cfg.preferred_dataset_splits is None:
        return "scheduling-policy or preferred-dataset-splits missing"
    if ctx.npus < 2:
        return "fewer than 2 NPUs"
    return None


def _collective(ctx, op: str, size: int) -> tuple[tuple | None, str | None]:
    """``(op code, kind, streams, chunk, message bytes, parallel, nonzero, stream count, HD rows)``."""
    cfg, p = ctx.system, ctx.npus
    algos = cfg.algorithms(op)
    if len(algos) != 1 or algos[0].flat or algos[0].kind not in KINDS:
        return None, f"{op} does not run one of ring, direct, halvingDoubling, doubleBinaryTree on the dimension"
    algo = algos[0]
    if algo.kind == "doubleBinaryTree" and (op != "all_reduce" or p & (p - 1)):
        return None, f"{op} uses doubleBinaryTree on {p} NPUs (an all-reduce on a power of two only)"
    if algo.kind == "halvingDoubling" and op == "all_to_all":
        return None, "all_to_all uses halvingDoubling (ASTRA-sim cannot run it; the event engine says so)"
    if op in ("all_reduce", "reduce_scatter") and not cfg.local_mem_bw_GBps > 0:
        return None, "local-mem-bw is not positive"
    if op == "all_reduce" and cfg.collective_optimization is None:
        return None, "collective-optimization missing"
    splits = cfg.preferred_dataset_splits
    chunk = arith.chunk_bytes(size, splits, ctx.npus, op)
    if chunk < 1:
        return None, "a collective with empty chunks"
    if chunk > size // splits:
        size = splits * chunk
    count = -(-size // chunk)
    msg = chunk if op == "all_gather" else chunk // p
    hd = []
    if algo.kind == "ring":
        par, nz = 1, p - 1
        sc = 2 * (p - 1) if op == "all_reduce" else p * (p - 1) // 2 if op == "all_to_all" else p - 1
    elif algo.kind == "direct":
        par = p - 1 if algo.window == -1 else min(algo.window, p - 1)
        nz, sc = par, 2 * (p - 1) if op == "all_reduce" else p - 1
    elif algo.kind == "halvingDoubling":
        par, nz = 1, int(math.log2(p) - 1)
        sc = int(2 * math.log2(p)) if op == "all_reduce" else int(math.log2(p))
        hd = [(off, m) for off, m, _r in hd_schedule(op, p, chunk)]
        if any(m < 1 for _off, m in hd[:sc]):
            return None, "a halvingDoubling message of 0 bytes"
    else:
        par = nz = sc = 0
        msg = chunk
    if algo.kind != "halvingDoubling" and msg < 1:
        return None, "a collective with empty messages"
    return (OPS[op], KINDS[algo.kind], count, chunk, msg, par, nz, sc, hd), None


def compiled_plan(tables: dict, ctx, groups: dict, rendezvous: bool) -> tuple[Prep | None, str | None]:
    """``(Prep, None)`` when the compiled engine runs this exactly, else ``(None, reason)``."""
    why = _why_not(ctx, rendezvous)
    if why:
        return None, why
    chains, by_table, seqs = {}, {}, {}
    for r, t in tables.items():
        ch = by_table.get(id(t))
        if ch is None:
            ch, why = chain_of(t)
            if ch is None:
                return None, why
            by_table[id(t)] = ch
            for op, size, name, dim0 in ch.colls.values():
                ring, why = ring_of(name, groups, ctx)
                if ring is None or ring.local or ring.key != "" or not dim0:
                    return None, why or "a collective on a communicator group or not on dimension 0"
            seqs[id(t)] = [c[:2] for c in (ch.colls[i] for i in ch.order if i in ch.colls)]
        chains[r] = ch
    seq = seqs[id(tables[0])]
    if any(s != seq for s in seqs.values()):
        return None, "ranks issue different collectives (the event engine reports where they wait)"
    rows = []
    for op, size in seq:
        row, why = _collective(ctx, op, size)
        if row is None:
            return None, why
        rows.append(row)
    return Prep(chains, rows, ctx), None


def _arrays(prep: Prep) -> dict:
    """Everything :func:`netsim.astra.compiled_loop.run` reads, pools at their first sizes."""
    ctx = prep.ctx
    n, d = ctx.npus, ctx.network.dims[0]
    sizes = sorted({m for row in prep.seq for m in [row[4], row[3]] + [m for _o, m in row[8]] if m >= 0})
    zi = {s: i for i, s in enumerate(sizes)}
    hd_rows, C = [], np.zeros((len(prep.seq), 9), dtype=np.int64)
    for k, (op, kind, count, chunk, msg, par, nz, sc, hd) in enumerate(prep.seq):
        C[k] = (op, kind, count, zi[msg] if msg >= 1 else 0, par, nz, sc, len(hd_rows), zi[chunk])
        hd_rows += [(off, zi[m]) for off, m in hd]
    S = int(C[:, 2].sum())
    tree = np.full((2, n, 4), -1, dtype=np.int64)
    if any(row[1] == KINDS["doubleBinaryTree"] for row in prep.seq):
        for j, root_max in enumerate((True, False)):
            bt = BinaryTree(n, 0, 1, root_max)
            for r in range(n):
                parent, left, right, ty = bt.links(r)
                tree[j, r] = (parent, left, right, 0 if ty == LEAF else 1 if ty == INTER else 2)
    offs, dur, prio = [0], [], []
    for r in range(n):
        ch = prep.chains[r]
        t = ch.t
        for i in ch.order:
            dur.append(-1 if i in ch.colls else arith.replay_ns(int(t.duration_micros[i])))
            prio.append(int(t.comm_priority[i]) if i in ch.colls and t.comm_priority[i] != MISSING else 0)
        offs.append(len(dur))
    cfg = ctx.system
    links = {"Switch": 2 * n, "FullyConnected": n * n, "Ring": 2 * n}[d.kind] if ctx.model != "analytical" else 1
    unaware = ctx.model == "analytical"
    hops = max(n // 2, 2) + 1 if unaware else 1  # analytical: lk[size * hops + h]: the delay over h hops
    lk = np.array([arith.message_ns(s, h, d.latency, d.bw) if unaware else arith.link_ns(s, d.latency, d.bw)
                   for s in sizes for h in range(hops)], dtype=np.int64)
    ser = np.array([arith.serialization_ns(s, d.bw) for s in sizes], dtype=np.int64)
    red = np.array([ctx.reduction_ns(s) if cfg.local_mem_bw_GBps > 0 else 0 for s in sizes], dtype=np.int64)
    threshold = math.ceil(cfg.active_chunks_per_dimension / ctx.queues_per_dim)
    P = np.array([n, S, threshold, ctx.endpoint_delay, NETS[d.kind], POLICIES[cfg.scheduling_policy], len(sizes),
                  int(unaware), hops], dtype=np.int64)
    return {"P": P, "lk": lk, "ser": ser, "red": red, "C": C, "HD": np.array(hd_rows or [(0, 0)], dtype=np.int64),
            "TREE": tree, "NODE": np.array(offs, dtype=np.int64), "NDUR": np.array(dur, dtype=np.int64),
            "NPRIO": np.array(prio, dtype=np.int64), "links": links, "S": S,
            "qcap": int(C[:, 2].max()) + 2 if len(C) else 2,
            "pool": max(4096, 2 * n * threshold * (int(C[:, 4].max(initial=0)) + 3))}  # messages a rank keeps in flight


def run_compiled(prep: Prep) -> list[ChainRun]:
    """Run the kernel (growing its pools until they suffice); the ranks' chains with their node times,
    reported in the event engine's order.  Raises :class:`NotBatched` where the event engine must run."""
    from netsim.astra import compiled_kernel as K
    from netsim.astra.compiled_loop import run
    from netsim.astra.workload import Workload

    ctx, a = prep.ctx, _arrays(prep)
    n, S, pool, qcap = ctx.npus, a["S"], a["pool"], a["qcap"]
    if S * n * n * len(a["lk"]) >= 1 << 62:
        raise NotBatched("too many streams for the compiled engine's integer keys")
    while True:
        I = np.zeros(19, dtype=np.int64)
        I[K.SEQ] = 1
        I[[K.MFREE, K.CFREE, K.LFREE, K.SLFREE]] = -1
        LK = np.zeros((a["links"], 5), dtype=np.int64)
        LK[:, K.L_FA] = -1
        LK[:, K.L_PH] = LK[:, K.L_PT] = -1
        out = (np.zeros(len(a["NDUR"]), dtype=np.int64), np.zeros(len(a["NDUR"]), dtype=np.int64),
               np.zeros((n, 2), dtype=np.int64))
        ST, RK = np.zeros((n * S, 16), dtype=np.int64), np.zeros((n, 10), dtype=np.int64)
        table = 1 << max(10, (2 * pool - 1).bit_length())  # tick and fab: at most half full
        heap, tick, fab = (np.zeros((pool, 5), dtype=np.int64), np.full((table, 2), -1, dtype=np.int64),
                           np.full((table, 2), -1, dtype=np.int64))
        CB, LS, SL, MS = (np.zeros((pool, w), dtype=np.int64) for w in (4, 2, 5, 7))
        run(heap, tick, fab, I, a["P"], CB, LS, SL, LK, MS, a["lk"], a["ser"], a["red"], ST, a["C"], a["HD"],
            a["TREE"], RK, np.zeros((n, qcap), dtype=np.int64), a["NODE"], a["NDUR"], a["NPRIO"], *out)
        if I[K.ERR] != 1:
            break
        pool, qcap = pool * 4, qcap * 2
    if I[K.ERR] == 2:
        raise NotBatched("the compiled engine found a deadlock or a state it does not follow")
    if I[K.ATZERO]:
        raise NotBatched("events at t = 0 (the event engine notes them)")
    start, end, rep = out
    ctx.clock.events, ctx.fabric.messages = int(I[K.EVENTS]), int(I[K.MSGS])
    runs = []
    for r in range(n):
        ch = prep.chains[r]
        run_r = ChainRun(r, ch, ctx)
        lo = int(a["NODE"][r])
        for j, i in enumerate(ch.order):
            run_r.start[i], run_r.end[i] = int(start[lo + j]), int(end[lo + j])
            if i not in ch.colls and not run_r.cpu[i]:
                run_r.tics_gpu += int(a["NDUR"][lo + j])
        run_r.pos = len(ch.order)
        runs.append(run_r)
    for r, t in rep.tolist():
        ctx.clock.now = t
        Workload._report(runs[r])  # the event engine's statistics, in its order
    return runs


__all__ = ["Prep", "compiled_plan", "run_compiled"]
