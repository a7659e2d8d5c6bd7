"""MoE dispatch and combine: expert placement, redundant experts, and their schedules.

A MoE layer's expert-parallel communication is two all-to-alls per layer: **dispatch** sends
every token to the ranks hosting its top-k experts, **combine** brings the expert outputs back
to the token's rank, weighted and summed.  This module builds both as pure schedules from one
:class:`MoELayout` (who routes where), reusing :mod:`netsim.collectives.skew` for the seeded
token routing and :mod:`netsim.collectives.alltoall` for the all-to-all variants.

Layout
------
The gate picks ``top_k`` *logical* experts per token (seeded, uniform or Zipf popularity, or
given as a tokens x top-k map).  ``expert_rank`` places the logical experts on ranks
(:func:`place_experts`: ``contiguous``, ``round_robin`` or an explicit map).  With
``redundant`` experts (EPLB-style, deepseek-ai/EPLB ``replicate_experts``): the hottest
experts get extra replicas one at a time, always the expert with the largest load per copy,
and each replica goes to the least-loaded rank that does not hold that expert yet (at most
``ceil(redundant / n)`` replicas per rank; an expert already on every free rank is skipped).  A token's copy for a replicated expert goes to
replica ``token mod replicas`` among the replicas on nodes the token already reaches when the
gate is node-limited (so node limits hold), among all replicas otherwise.  The load statistics
are this batch's own counts (an oracle: the best any rebalancing of this batch can do).

Byte counting (what DeepEP counts; deepseek-ai/DeepEP ``tests/test_internode.py`` and
``tests/test_low_latency.py``)
------------------------------------------------------------------------------------------
* A token copy is ``hidden * dtype_bytes`` bytes; FP8 (``dtype_bytes == 1``) adds one FP32
  scale per 128 elements (DeepEP ``per_token_cast_to_fp8``; its ``fp8_factor = (1+4/128)/2``),
  and the low-latency kernels 16 bytes more per copy (``hidden + hidden/128*4 + 16``).
* Normal kernels send a token once per destination *rank* over NVLink and once per destination
  *node* over RDMA; low-latency kernels send one copy per selected *expert*.

Algorithms (``dispatch`` / ``combine``)
---------------------------------------
``direct``: alltoallv of one copy per (token, rank).  ``hierarchical``: Tutel 2DH of the same
matrix.  ``node_limited``: DeepEP's normal internode kernels: dispatch crosses IB once per
node, to the GPU with the sender's in-node index, then NVLink forwards
(:func:`~netsim.collectives.alltoall.node_limited_all_to_all`); combine is its mirror with
**in-node reduction first**: each expert GPU sends its partial sum of a token over NVLink to
that node's relay (the GPU with the token owner's in-node index), the relay reduces them and
sends one copy per node over IB (:func:`node_limited_combine`).  ``low_latency``: direct,
one copy per (token, expert), no forwarding.  Combine moves exactly the dispatch's hop bytes
transposed, at the combine token size.

>>> lay = layout(4, 8, 8, 2, seed=1, local_size=2, bytes_per_token=10.0)
>>> d = dispatch_schedule(lay, "node_limited", local_size=2)
>>> c = combine_schedule(lay.with_bytes(20.0), "node_limited", local_size=2)
>>> from netsim.collectives.alltoall import schedule_pair_bytes
>>> bool(np.allclose(schedule_pair_bytes(c), 2 * schedule_pair_bytes(d).T))
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from netsim.collectives.alltoall import (across_node_transfers, alltoallv, hierarchical_all_to_all, node_limited_all_to_all,
                                         node_split, nonempty_step, within_node_transfers)
from netsim.collectives.schedule import Phase, Schedule
from netsim.collectives.skew import MoERouting, node_bytes, pair_bytes, route_tokens
from netsim.errors import InputError

__all__ = ["ALGORITHMS", "check_memory", "token_bytes", "place_experts", "MoELayout", "layout", "dispatch_schedule",
           "combine_schedule", "node_limited_combine", "expert_pair_bytes", "deepep_bytes"]

ALGORITHMS = ("direct", "hierarchical", "node_limited", "low_latency")
#: Elements per FP32 scale of DeepEP's FP8 tokens (``per_token_cast_to_fp8``: 128-element blocks).
FP8_SCALE_BLOCK = 128
#: Bytes per FP8 scale (FP32).
FP8_SCALE_BYTES = 4
#: Extra bytes per copy of DeepEP's low-latency FP8 dispatch (``tests/test_low_latency.py``:
#: ``num_fp8_bytes = hidden + hidden / 128 * 4 + 16``).
LL_META_BYTES = 16


#: Peak memory per routed token copy (one (token, top-k choice) pair) of a MoE layer: measured peak RSS of
#: ``netsim bench --op moe_dispatch`` on 8 GPUs with 3.2 to 12.8 million copies, 49 to 52 bytes each
#: (the choices, their ranks and nodes, the pair matrices' inputs); rounded up.
BYTES_PER_COPY = 64


def check_memory(n: int, tokens_per_rank: int, top_k: int, source: str = "--tokens") -> None:
    """Refuse, before allocating, a routed batch of ``n * tokens_per_rank * top_k`` copies that would not
    fit in the memory available (``source``: the flag the token count comes from).

    >>> check_memory(8, 4096, 8)
    """
    from netsim import inputs

    copies = n * tokens_per_rank * top_k
    need, avail = copies * BYTES_PER_COPY, inputs.available_memory()
    if need > avail:
        fits = max(1, avail // (BYTES_PER_COPY * n * top_k))
        raise InputError(f"routing {n:,} ranks x {tokens_per_rank:,} tokens x top-{top_k} = {copies:,} token copies "
                         f"needs about {need / 2**30:,.1f} GiB of memory; {avail / 2**30:,.1f} GiB are available "
                         f"(use {fits:,} tokens per rank or fewer)", source=source)


def _arg(message: str, field: str) -> InputError:
    return InputError(message, source="argument", field=field)


def token_bytes(hidden: int, dtype_bytes: float, *, low_latency: bool = False) -> float:
    """Bytes of one token copy as DeepEP counts them (see the module docstring).

    >>> token_bytes(7168, 1), token_bytes(7168, 2), token_bytes(7168, 1, low_latency=True)
    (7392.0, 14336.0, 7408.0)
    """
    b = float(hidden) * float(dtype_bytes)
    if dtype_bytes == 1:  # FP8: per-128-element FP32 scales travel with the token
        b += FP8_SCALE_BYTES * math.ceil(hidden / FP8_SCALE_BLOCK)
        if low_latency:
            b += LL_META_BYTES
    return b


def place_experts(n_experts: int, n_ranks: int, spec="contiguous") -> np.ndarray:
    """Rank hosting every expert: ``contiguous`` (``e // (E/n)``), ``round_robin`` (``e % n``)
    or an array of ``n_experts`` ranks; every rank must host ``E/n`` experts.

    >>> place_experts(8, 4, "round_robin").tolist()
    [0, 1, 2, 3, 0, 1, 2, 3]
    """
    if n_experts % n_ranks:
        raise InputError(f"expected a number of experts divisible by the {n_ranks} ranks, got {n_experts}",
                         source="--experts")
    epr = n_experts // n_ranks
    if isinstance(spec, str) and spec == "contiguous":
        return np.arange(n_experts, dtype=np.int64) // epr
    if isinstance(spec, str) and spec == "round_robin":
        return np.arange(n_experts, dtype=np.int64) % n_ranks
    if isinstance(spec, str):
        raise InputError(f"expected contiguous, round_robin or a file, got {spec!r}", source="--placement-experts")
    a = np.asarray(spec)
    if a.shape != (n_experts,) or a.dtype.kind not in "iu" and not (a.dtype.kind == "f" and np.all(a == np.round(a))):
        raise InputError(f"expected {n_experts} integer ranks (one per expert), got shape {a.shape}",
                         source="--placement-experts")
    a = a.astype(np.int64)
    if a.size and (a.min() < 0 or a.max() >= n_ranks):
        raise InputError(f"expected ranks in [0, {n_ranks}), got {int(a.min())}..{int(a.max())}",
                         source="--placement-experts")
    counts = np.bincount(a, minlength=n_ranks)
    if (counts != epr).any():
        r = int(np.flatnonzero(counts != epr)[0])
        raise InputError(f"expected {epr} experts on every rank, rank {r} has {int(counts[r])}",
                         source="--placement-experts")
    return a


@dataclass(frozen=True, eq=False)
class MoELayout:
    """A routed batch: ``routing`` over *physical* experts (replicas included), ``logical[p]``
    the logical expert of physical expert ``p`` (the first ``n_logical`` are the originals)."""

    routing: MoERouting
    logical: np.ndarray
    n_logical: int
    gated_nodes: int | None = None

    def with_bytes(self, bytes_per_token: float) -> "MoELayout":
        """The same layout with another token size (e.g. the combine's BF16)."""
        return replace(self, routing=self.routing.with_bytes(bytes_per_token))

    def expert_tokens(self) -> np.ndarray:
        """Tokens every *physical* expert processes."""
        return np.bincount(self.routing.choices.ravel(), minlength=self.routing.n_experts)

    def logical_tokens(self) -> np.ndarray:
        """Tokens routed to every logical expert (replicas summed)."""
        return np.bincount(self.logical, weights=self.expert_tokens(), minlength=self.n_logical)


def _route(n, tpr, n_experts, top_k, expert_rank, popularity, seed, local_size, max_nodes) -> np.ndarray:
    """Gate in slot space (slots grouped by rank, so node-limited gating sees whole nodes), then
    map slots back to expert ids: the same sampling law for any balanced placement."""
    order = np.argsort(expert_rank, kind="stable")  # slot -> expert
    p = popularity
    if p is not None and not isinstance(p, str) and not hasattr(p, "kind"):
        p = np.asarray(p, dtype=np.float64)[order]
    elif p is not None:
        from netsim.collectives.skew import parse_skew
        p = parse_skew(p, source="--skew").popularity(n_experts)[order]
    r = route_tokens(n, tpr, n_experts, top_k, popularity=p, seed=seed, local_size=local_size, max_nodes=max_nodes)
    return order[r.choices]


def _replicate(load: np.ndarray, expert_rank: np.ndarray, n: int, redundant: int):
    """EPLB-style replicas: (logical expert, rank) of every extra copy."""
    copies = np.ones(load.size)
    rank_load = np.bincount(expert_rank, weights=load, minlength=n)
    held = {(int(e), int(r)) for e, r in enumerate(expert_rank)}
    cap = -(-redundant // n)
    per_rank = np.zeros(n, dtype=np.int64)
    out_e, out_r = [], []
    for _ in range(redundant):
        for e in np.argsort(-load / copies, kind="stable"):  # the most load per copy that still fits
            e = int(e)
            ok = [r for r in np.argsort(rank_load, kind="stable") if per_rank[r] < cap and (e, int(r)) not in held]
            if ok:
                break
        else:
            raise InputError(f"cannot place {redundant} redundant experts on {n} ranks", source="--redundant-experts")
        share_old, share_new = load[e] / copies[e], load[e] / (copies[e] + 1)
        hosts = [r for (x, r) in held if x == e]
        rank_load[hosts] -= share_old - share_new  # existing copies now carry less
        r = int(ok[0])
        rank_load[r] += share_new
        copies[e] += 1
        per_rank[r] += 1
        held.add((e, r))
        out_e.append(e)
        out_r.append(r)
    return np.array(out_e, dtype=np.int64), np.array(out_r, dtype=np.int64)


def _assign_replicas(choices, expert_rank, rep_e, rep_r, g, gated: bool) -> np.ndarray:
    """Physical expert of every (token, slot): see the module docstring."""
    n_log = expert_rank.size
    phys = choices.copy()
    tok = np.arange(choices.shape[0])
    tok_nodes = expert_rank[choices] // g  # nodes the token already reaches (primaries)
    for e in np.unique(rep_e):
        ids = np.concatenate([[e], n_log + np.flatnonzero(rep_e == e)])
        ranks = np.concatenate([[expert_rank[e]], rep_r[rep_e == e]])
        rows, cols = np.nonzero(choices == e)
        if gated:  # replicas on nodes the token reaches anyway
            ok = (tok_nodes[rows][:, :, None] == (ranks // g)[None, None, :]).any(axis=1)
        else:
            ok = np.ones((rows.size, ids.size), dtype=bool)
        cnt = ok.sum(axis=1)
        pick = tok[rows] % cnt  # which of the eligible replicas
        rank_in_ok = np.cumsum(ok, axis=1) - 1
        sel = np.argmax(ok & (rank_in_ok == pick[:, None]), axis=1)
        phys[rows, cols] = ids[sel]
    return phys


def layout(n: int, tokens_per_rank: int, n_experts: int, top_k: int, *, popularity=None, seed: int = 0,
           expert_rank=None, local_size: int = 1, max_nodes: int | None = None, choices=None,
           redundant: int = 0, bytes_per_token: float = 1.0) -> MoELayout:
    """Route a batch and place its experts (see the module docstring).

    ``choices``: a given ``(n * tokens_per_rank, top_k)`` map of logical expert ids (no gate is
    sampled, ``max_nodes`` is not applied).  ``expert_rank``: :func:`place_experts` output
    (default contiguous).  ``max_nodes``: node-limited gate (None: every node allowed).
    """
    check_memory(n, tokens_per_rank, top_k, source="argument")
    expert_rank = place_experts(n_experts, n) if expert_rank is None else np.asarray(expert_rank, np.int64)
    nodes = n // local_size
    gate = max_nodes if max_nodes is not None and max_nodes < nodes else None
    if choices is None:
        choices = _route(n, tokens_per_rank, n_experts, top_k, expert_rank, popularity, seed,
                         local_size if gate else None, gate)
    else:
        choices = np.asarray(choices, dtype=np.int64)
        gate = None
    logical = np.arange(n_experts, dtype=np.int64)
    ranks = expert_rank
    if redundant:
        load = np.bincount(choices.ravel(), minlength=n_experts).astype(np.float64)
        rep_e, rep_r = _replicate(load, expert_rank, n, int(redundant))
        choices = _assign_replicas(choices, expert_rank, rep_e, rep_r, local_size, gate is not None)
        logical = np.concatenate([logical, rep_e])
        ranks = np.concatenate([expert_rank, rep_r])
    r = MoERouting(n, tokens_per_rank, top_k, ranks, choices, float(bytes_per_token))
    return MoELayout(r, logical, n_experts, gate)


# --------------------------------------------------------------- schedules
def expert_pair_bytes(routing: MoERouting) -> np.ndarray:
    """``(n, n)`` bytes with one copy per (token, expert): DeepEP's low-latency kernels."""
    n = routing.n_ranks
    dest = routing.expert_rank[routing.choices]
    src = np.broadcast_to(routing.token_rank()[:, None], dest.shape)
    return np.bincount((src * n + dest).ravel(), minlength=n * n).reshape(n, n) * routing.bytes_per_token


def _check_algorithm(algorithm: str) -> None:
    if algorithm not in ALGORITHMS:
        raise _arg(f"expected one of {', '.join(ALGORITHMS)}, got {algorithm!r}", "algorithm")


def _window(algorithm: str, n: int, window: int | None) -> int | None:
    """Peers per step: DeepEP's low-latency kernels put every token copy at once (one kernel, no
    rounds: ``internode_ll.cu`` issues an IBGDA put per token and expert, then one count per
    expert); ``direct`` runs ``window`` peers at once (NCCL's, from :mod:`.p2p`; None: default)."""
    return n - 1 if algorithm == "low_latency" else window


def dispatch_schedule(lay: MoELayout, algorithm: str, *, local_size: int, chunks: int = 4,
                      window: int | None = None) -> Schedule:
    """The dispatch of ``lay`` (token copies at ``lay.routing.bytes_per_token``)."""
    _check_algorithm(algorithm)
    r, n = lay.routing, lay.routing.n_ranks
    if algorithm == "node_limited":
        s = node_limited_all_to_all(n, r, local_size=local_size, max_nodes=None, chunks=chunks)
    elif algorithm == "hierarchical":
        s = hierarchical_all_to_all(n, None, local_size=local_size, matrix=pair_bytes(r))
    else:
        s = alltoallv(n, expert_pair_bytes(r) if algorithm == "low_latency" else pair_bytes(r),
                      window=_window(algorithm, n, window))
    return replace(s, op="moe_dispatch", algorithm=algorithm)


def combine_schedule(lay: MoELayout, algorithm: str, *, local_size: int, chunks: int = 4,
                     window: int | None = None) -> Schedule:
    """The combine of ``lay`` (expert outputs at ``lay.routing.bytes_per_token``): the dispatch's
    hops reversed, with in-node reduction before IB for ``node_limited``."""
    _check_algorithm(algorithm)
    r, n = lay.routing, lay.routing.n_ranks
    if algorithm == "node_limited":
        s = node_limited_combine(n, r, local_size=local_size, chunks=chunks)
    elif algorithm == "hierarchical":
        s = _reversed_hierarchical(n, pair_bytes(r), local_size)
    else:
        s = alltoallv(n, (expert_pair_bytes(r) if algorithm == "low_latency" else pair_bytes(r)).T,
                      window=_window(algorithm, n, window))
    return replace(s, op="moe_combine", algorithm=algorithm)


def _reversed_hierarchical(n: int, m: np.ndarray, g: int) -> Schedule:
    """Tutel 2DH run backwards: inter-node among same-index GPUs first, then the intra-node
    scatter, so every hop of the dispatch is retraced in reverse (``(k,b)->(m,b)`` reversed
    is ``(m,b)->(k,b)``, then ``(k,a)->(k,b)`` reversed is ``(k,b)->(k,a)``)."""
    g, nodes = node_split(n, g)
    m4 = m.reshape(nodes, g, nodes, g)  # dispatch [k, a, m, b]
    to_local = m4.sum(axis=2).reshape(n, g)  # dispatch (k,a) -> (k,b)
    to_node = m4.sum(axis=1).transpose(0, 2, 1).reshape(nodes, g, nodes)  # dispatch [(k,b), m]
    back_node = to_node.transpose(2, 1, 0).reshape(n, nodes)  # combine (m,b) -> node k
    back_local = to_local.reshape(nodes, g, g).transpose(0, 2, 1).reshape(n, g)  # (k,b) -> (k,a)
    steps = [nonempty_step(*across_node_transfers(n, g, back_node, np.arange(1, nodes, dtype=np.int64)))]
    steps.append(nonempty_step(*within_node_transfers(n, g, back_local)) if g > 1 else None)
    return Schedule("alltoall", "hierarchical", n, float(m.sum()) / n,
                    tuple(Phase(s) for s in steps if s is not None))


def node_limited_combine(n: int, routing: MoERouting, *, local_size: int, chunks: int = 4) -> Schedule:
    """DeepEP combine: in-node reduction to the relay, then one IB copy per (token, node).

    Expert GPU ``(m,b)`` sends its partial output of a token owned by ``(k,a)`` (``k != m``)
    over NVLink to the relay ``(m,a)``, which reduces all of node m's partials and sends one
    copy over IB to ``(k,a)``; own-node partials go straight to ``(k,a)`` over NVLink.
    Pipelined in ``chunks`` like the dispatch: step c carries NVLink chunk c and IB chunk c-1.
    """
    g, nodes = node_split(n, local_size)
    c = int(chunks)
    if c < 1:
        raise _arg(f"expected chunks >= 1, got {chunks!r}", "chunks")
    pair, node = pair_bytes(routing), node_bytes(routing, g)
    p4 = pair.reshape(nodes, g, nodes, g)  # [k, a, m, b]: token of (k,a) at expert GPU (m,b)
    idx = np.arange(nodes)
    own = p4[idx, :, idx, :]  # [k, a, b]
    fwd = p4.sum(axis=0).transpose(1, 0, 2) - own  # [m, a, b]: partials (m,b) -> relay (m,a)
    local = within_node_transfers(n, g, own.transpose(0, 2, 1).reshape(n, g))  # (k,b) -> (k,a)
    gather = within_node_transfers(n, g, fwd.transpose(0, 2, 1).reshape(n, g))  # (m,b) -> (m,a), same order
    ib_vol = node.reshape(nodes, g, nodes).transpose(2, 1, 0).reshape(n, nodes)  # (m,a) -> node k
    ib = across_node_transfers(n, g, ib_vol, np.arange(1, nodes, dtype=np.int64))

    def step(nv_part: float, ib_part: float):
        nv = (local[2] + gather[2]) * nv_part
        return nonempty_step(*(np.concatenate([a, b]) for a, b in zip(local[:2], ib[:2])),
                     np.concatenate([nv, ib[2] * ib_part]), np.concatenate([local[3], ib[3]]))

    part = 1.0 / c
    phases = [Phase(s, k) for s, k in ((step(part, 0.0), 1), (step(part, part), c - 1), (step(0.0, part), 1))
              if s is not None and k > 0]
    return Schedule("alltoall", "node_limited", n, float(pair.sum()) / n, tuple(phases))


def deepep_bytes(lay: MoELayout, local_size: int, *, low_latency: bool = False) -> dict[str, np.ndarray]:
    """Per-rank bytes as DeepEP's tests count them, at ``lay``'s token size.

    ``rdma``: tokens a rank sends, once per destination node (its own node included)
    (``num_rdma_token_sent``); ``nvl``: tokens a rank receives, once per token (``recv_x``);
    low-latency: ``rdma`` = one copy per selected expert, ``nvl`` = what a rank receives so.
    Combine moves the same counts the other way (DeepEP: ``combine_bf16_rdma_recv_bytes =
    dispatch_bf16_rdma_send_bytes``)."""
    r = lay.routing
    if low_latency:
        m = expert_pair_bytes(r)
        return {"rdma": m.sum(axis=1), "nvl": m.sum(axis=0)}
    return {"rdma": node_bytes(r, local_size).sum(axis=1), "nvl": pair_bytes(r).sum(axis=0)}
