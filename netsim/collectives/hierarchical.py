"""Hierarchical (two-level) and multi-dimensional collectives.

Ranks are laid out dimension by dimension, innermost first: with dims
``[(s0, a0), (s1, a1), ...]`` rank *r* has coordinate ``c_i = (r // stride_i) % s_i``
(``stride_i = s0·…·s_{i-1}``), and a *dim-i group* is the ``s_i`` ranks that differ
only in ``c_i``, ordered by it.  With ``local_size = g`` the two dims are the node
(``g`` consecutive ranks) and the rail (the ``k = n/g`` ranks of equal local index).

Staging (ASTRA-sim's localBWAware, reference §4.6):

* **all-reduce**: reduce-scatter on dims 0 .. D-2 (each leaves a rank 1/s_i of what it
  had), all-reduce on dim D-1 of ``S/(s0·…·s_{D-2})``, all-gather on dims D-2 .. 0.
  Two levels: intra-node RS → inter-node AR of S/g per rail (all rails at once) →
  intra-node AG.
* **reduce-scatter**: RS on dims 0 .. D-1 (input ``S/stride_i`` at dim *i*).
* **all-gather**: AG on dims D-1 .. 0 (output ``S/stride_i`` at dim *i*).  Two levels:
  inter-node AG of the rank's own shard, then intra-node AG of S/g per rank.

A stage is one flat collective (``ring``, ``direct``, ``halving_doubling``; ``tree``
for the all-reduce stage; ``nvls`` on dim 0 only) run by every group of its dim
in parallel (:func:`~netsim.collectives.compose.parallel`).  Rank *r* owns shard *r*
of the reduce-scatter output / all-gather input, as in the flat versions.

Closed form (every stage ring, no contention; α_i, B_i per hop in dim *i*)::

    t = Σ_{i<D-1} 2·(s_i - 1)·(α_i + S/(stride_i·s_i·B_i))  +  2·(s_{D-1} - 1)·(α + S/(n·B))_{D-1}

e.g. two levels: ``2(g-1)(α_nv + S/(g·B_nv)) + 2(k-1)(α_ib + S/(g·k·B_ib))``; per GPU that
moves ``2(g-1)/g·S`` over NVLink and ``2(k-1)/k·S/g`` over the NIC (reference §7).  RS and
AG are one half of it each: ``Σ_i (s_i - 1)·(α_i + S/(stride_i·s_i·B_i))``.

>>> s = hierarchical("all_reduce", 16, 16.0, local_size=4)
>>> s.n_steps, s.bytes_sent().tolist()[0]
(12, 30.0)
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from netsim.collectives.compose import COPY, REDUCE, Flow, check_int, check_nodes, concat, on_groups, traced
from netsim.collectives.direct import default_window
from netsim.collectives import nvls
from netsim.collectives.halving_doubling import hd_all_gather, hd_all_reduce, hd_reduce_scatter
from netsim.collectives.ring import ring_all_gather, ring_all_reduce, ring_reduce_scatter
from netsim.collectives.schedule import DOWN, UP, Phase, Schedule, Step
from netsim.collectives.tree import tree_all_reduce
from netsim.errors import InputError

OPS = ("all_reduce", "all_gather", "reduce_scatter")
ALGORITHMS = ("ring", "direct", "halving_doubling", "tree", "nvls")


def ring_block(op: str, m: int, nbytes: float, channels: int = 1) -> Schedule:
    """The ring collective of :mod:`netsim.collectives.ring`, with its flow when tracing:
    in reduce-scatter step *s* rank *i* sends chunk ``i-s-1`` (reduced), in all-gather step
    *s* chunk ``i-s`` (mod m); channel *h* carries sub-piece *h* of every chunk."""
    build = {"all_reduce": ring_all_reduce, "all_gather": ring_all_gather,
             "reduce_scatter": ring_reduce_scatter}[op]
    sched = build(m, nbytes, channels=channels)

    def make():
        if m < 2:
            return Flow(1, ())
        tid = np.arange(channels * m)
        rank, ch = tid % m, tid // m

        def rs(rep):
            return tid, ((rank - rep - 1) % m) * channels + ch, np.full(tid.size, REDUCE)

        def ag(rep):
            return tid, ((rank - rep) % m) * channels + ch, np.full(tid.size, COPY)
        return Flow(m * channels, {"all_reduce": (rs, ag), "all_gather": (ag,), "reduce_scatter": (rs,)}[op])
    return traced(sched, make)


def direct_block(op: str, m: int, nbytes: float) -> Schedule:
    """Direct reduce-scatter / all-gather / all-reduce among ``m`` ranks: every rank sends
    ``S/m`` to every peer (its shard, reduced; or its own shard), ``window`` peers at once
    (all up to 64 ranks, else 16, like :func:`~netsim.collectives.direct.direct_all_to_all`)."""
    S = float(nbytes)
    if m < 2:
        return Schedule(op, "direct", m, S, ())
    window = default_window(m)
    ranks = np.arange(m, dtype=np.int64)
    steps, fns = [], []
    for gather in ([False, True] if op == "all_reduce" else [op == "all_gather"]):
        for first in range(1, m, window):
            shifts = np.arange(first, min(first + window, m), dtype=np.int64)
            src = np.repeat(ranks, shifts.size)
            dst = (src + np.tile(shifts, m)) % m
            steps.append(Step(src, dst, np.full(src.size, S / m), reduce=not gather, key=np.tile(shifts, m)))

            def fl(rep, src=src, dst=dst, gather=gather):
                return np.arange(src.size), src if gather else dst, np.full(src.size, COPY if gather else REDUCE)
            fns.append(fl)
    sched = Schedule(op, "direct", m, S, tuple(Phase(st) for st in steps))
    return traced(sched, lambda: Flow(m, tuple(fns)))


def block(op: str, algorithm: str, m: int, nbytes: float, *, channels: int = 1,
          chunks: int | None = None) -> Schedule:
    """One flat collective among ``m`` group-local ranks."""
    if algorithm == "ring":
        return ring_block(op, m, nbytes, channels)
    if algorithm == "direct":
        return direct_block(op, m, nbytes)
    if algorithm == "halving_doubling":
        return {"all_reduce": hd_all_reduce, "all_gather": hd_all_gather,
                "reduce_scatter": hd_reduce_scatter}[op](m, nbytes)
    if algorithm == "tree":
        if op != "all_reduce":
            raise InputError(f"the tree algorithm only does all_reduce, not {op}", source="argument",
                             field="algorithm")
        return tree_all_reduce(m, nbytes, chunks=chunks, channels=channels)
    if algorithm == "nvls":
        return {"all_reduce": nvls.nvls_all_reduce, "all_gather": nvls.nvls_all_gather,
                "reduce_scatter": nvls.nvls_reduce_scatter}[op](m, nbytes, chunks=chunks)
    raise InputError(f"expected one of {', '.join(ALGORITHMS)}, got {algorithm!r}", source="argument",
                     field="algorithm")


def _groups(sizes: list[int], i: int) -> np.ndarray:
    """Dim-``i`` groups: rows of ranks differing only in coordinate ``i``."""
    n = int(np.prod(sizes))
    stride = int(np.prod(sizes[:i]))
    r = np.arange(n, dtype=np.int64)
    base = r[(r // stride) % sizes[i] == 0]
    return base[:, None] + np.arange(sizes[i], dtype=np.int64)[None, :] * stride


def _where(sizes: list[int], i: int, L: int, groups: np.ndarray) -> np.ndarray:
    """Parent blocks (over dims < L, c_0 least significant) of each dim-``i`` group's buffer:
    the blocks with the group's coordinates below ``i``, its member's ``c_i`` most significant."""
    strides = np.concatenate(([1], np.cumprod(sizes)))[:L + 1].astype(np.int64)
    var = np.zeros(1, dtype=np.int64)
    for l in range(i, L):  # enumerate c_i .. c_{L-1}, c_i outermost
        var = (var[:, None] + np.arange(sizes[l])[None, :] * strides[l]).ravel()
    low = groups[:, 0] % strides[i]
    return low[:, None] + var[None, :]


def _staged(op: str, algorithm: str, n: int, nbytes: float, dims, *, channels: int = 1,
            chunks: int | None = None) -> Schedule:
    if op not in OPS:
        raise InputError(f"expected one of {', '.join(OPS)}, got {op!r}", source="argument", field="op")
    n = check_int(n, "n")
    channels = check_int(channels, "channels")
    try:
        dims = [(check_int(s, f"dims[{i}].size"), str(a)) for i, (s, a) in enumerate(dims)]
    except (TypeError, ValueError) as err:
        if isinstance(err, InputError):
            raise
        raise InputError(f"expected (size, algorithm) pairs, got {dims!r}", source="argument", field="dims")
    if int(np.prod([s for s, _ in dims])) != n:
        raise InputError(f"dimension sizes {[s for s, _ in dims]} multiply to "
                         f"{int(np.prod([s for s, _ in dims]))}, not the group size {n}",
                         source="argument", field="dims")
    for i, (s, a) in enumerate(dims):
        if a not in ALGORITHMS:
            raise InputError(f"expected one of {', '.join(ALGORITHMS)}, got {a!r}", source="argument",
                             field=f"dims[{i}].algorithm")
        if a == "nvls" and s > 1 and any(size > 1 for size, _ in dims[:i]):
            raise InputError("nvls runs inside one NVSwitch domain: only on the innermost dimension",
                             source="argument", field=f"dims[{i}].algorithm")
    live = [(i, s, a) for i, (s, a) in enumerate(dims) if s > 1]
    sizes = [s for s, _ in dims]
    S = float(nbytes)
    if not live:
        return Schedule(op, algorithm, n, S, ())
    strides = np.concatenate(([1], np.cumprod(sizes))).astype(np.int64)
    last = live[-1][0]
    if op == "all_reduce":
        plan = [(i, "reduce_scatter") for i, _, _ in live[:-1]] + [(last, "all_reduce")]
        plan += [(i, "all_gather") for i, _, _ in live[:-1][::-1]]
        L = last  # blocks over the reduce-scattered dims
    elif op == "reduce_scatter":
        plan, L = [(i, op) for i, _, _ in live], len(sizes)
    else:
        plan, L = [(i, op) for i, _, _ in live[::-1]], len(sizes)
    stages = []
    for i, sub in plan:
        if dims[i][1] == "tree" and sub != "all_reduce":
            raise InputError("tree is for the all-reduce stage only (the outermost dimension of an "
                             "all-reduce)", source="argument", field=f"dims[{i}].algorithm")
        size = S / int(strides[i])
        blk = block(sub, dims[i][1], sizes[i], size, channels=channels, chunks=chunks)
        groups = _groups(sizes, i)
        where = _where(sizes, i, i if sub == "all_reduce" else L, groups)
        stages.append(on_groups(op, algorithm, n, S, blk, groups, where, int(strides[L])))
    return concat(op, algorithm, n, S, *stages)


def multi_dim(op: str, n: int, nbytes: float, dims, *, channels: int = 1,
              chunks: int | None = None) -> Schedule:
    """Collective staged over ``dims`` = ``[(size, algorithm), ...]``, innermost first (see the
    module docstring); algorithms ring | direct | halving_doubling (| tree for the all-reduce
    stage, | nvls on the innermost dim).  Sizes must multiply to ``n``; size-1 dims are skipped."""
    return _staged(op, "multi_dim", n, nbytes, list(dims), channels=channels, chunks=chunks)


def hierarchical(op: str, n: int, nbytes: float, *, local_size: int, intra: str = "ring",
                 inter: str = "ring", channels: int = 1, chunks: int | None = None) -> Schedule:
    """Two-level collective: nodes of ``local_size`` consecutive ranks (``intra`` algorithm) and
    rails of equal local index across nodes (``inter``: ring | tree | halving_doubling | direct).
    ``channels`` applies to ring and tree stages, ``chunks`` to tree and nvls stages."""
    k = check_nodes(n, local_size)
    return _staged(op, "hierarchical", n, nbytes, [(n // k, intra), (k, inter)],
                   channels=channels, chunks=chunks)


def _cap_hop(sched: Schedule, hop: int, rate: float) -> Schedule:
    """``sched`` with every transfer of kind ``hop`` (UP or DOWN) capped at ``rate`` B/s."""
    def cap(st: Step) -> Step:
        if st.hop is None or not (st.hop == hop).any():
            return st
        rc = np.broadcast_to(np.asarray(st.rate_cap, dtype=np.float64), st.nbytes.shape)
        return replace(st, rate_cap=np.where(st.hop == hop, np.minimum(rc, rate), rc))
    return sched.map_steps(cap)


def nvls_tree_all_reduce(n: int, nbytes: float, *, local_size: int, inter: str = "tree",
                         chunks: int | None = None, channels: int = 1, heads: int | None = None,
                         head_rate: float = float("inf")) -> Schedule:
    """NCCL NVLSTree-like all-reduce: NVLS reduce-scatter inside each node of ``local_size``
    GPUs onto its ``heads`` NVLS heads (default: every GPU), an all-reduce of ``S/heads``
    among the heads of equal index across nodes (``inter`` = ``tree`` or ``ring``), then NVLS
    all-gather from the heads inside each node.

    Heads are NCCL's: one per channel of the NVLS graph, each a GPU with its own NIC, at most
    ``NCCL_MAX_NVLS_ARITY`` (:func:`netsim.collectives.nccl.nvls_heads`); only they cross nodes
    (``all_reduce.h``, NVLS_TREE: the head rank reduces chunk ``headRank`` and sends it up its
    tree, connect.cc ``connectNvls``: the trees join heads of equal index).  Heads are the
    node's first ``heads`` GPUs.

    Stages run one after another (NCCL overlaps them); ``chunks`` is the pipeline depth of the
    NVLS and tree stages, ``channels`` applies to the inter-node stage.  ``head_rate`` (B/s): the
    most one head's own share moves at, both where it pulls the node's reduced share from the
    switch and where it stores the result back (NCCL's per-head cap,
    :func:`netsim.collectives.nccl.nvls_tree_head_rate`).
    """
    k = check_nodes(n, local_size)
    if inter not in ("tree", "ring"):
        raise InputError(f"expected inter 'tree' or 'ring', got {inter!r}", source="argument", field="inter")
    g = n // k
    h = g if heads is None else check_int(heads, "heads")
    if h > g:
        raise InputError(f"{h} NVLS heads in a node of {g} GPUs", source="argument", field="heads")
    if h == g and not np.isfinite(head_rate):
        return _staged("all_reduce", "nvls_tree", n, nbytes, [(g, "nvls"), (k, inter)],
                       channels=channels, chunks=chunks)
    S = float(nbytes)
    nodes = np.arange(n, dtype=np.int64).reshape(k, g)
    whole = np.tile(np.arange(h, dtype=np.int64), (k, 1))
    rs = _cap_hop(nvls.nvls_reduce_scatter(g, S, chunks=chunks, owners=h), DOWN, head_rate)
    ag = _cap_hop(nvls.nvls_all_gather(g, S, chunks=chunks, owners=h), UP, head_rate)
    stages = [on_groups("all_reduce", "nvls_tree", n, S, rs, nodes, whole, h)]
    if k > 1:
        mid = block("all_reduce", inter, k, S / h, channels=channels, chunks=chunks)
        rails = nodes[:, :h].T  # head j of every node
        stages.append(on_groups("all_reduce", "nvls_tree", n, S, mid, rails, np.arange(h)[:, None], h))
    stages.append(on_groups("all_reduce", "nvls_tree", n, S, ag, nodes, whole, h))
    return concat("all_reduce", "nvls_tree", n, S, *stages)
