"""From (topology, ranks, op, size, algorithm) to the schedule that runs.

:func:`plan` picks the algorithm (``auto``: NCCL's cost model, :mod:`netsim.collectives.nccl`),
builds its pure schedule for the group's shape (nodes, GPUs per node) and *shapes* it
with the chosen protocol: a launch delay (NCCL's base latency), protocol framing on the
wire, per-channel throughput caps and NCCL's per-hop latency spread over the schedule's
dependent steps (minus the physical latency the network charges by itself).

>>> from netsim.topology.spec import load_topology  # doctest: +SKIP
>>> p = plan(load_topology("topologies/dgx-h100.yaml"), range(8), "all_reduce", 1 << 30)  # doctest: +SKIP
>>> p.label  # doctest: +SKIP
'nvls/Simple'
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from netsim.collectives.qps import split_connections
from netsim.collectives import nccl, p2p
from netsim.collectives.compose import MAX_PIECES
from netsim.collectives.fastpath import step_latency
from netsim.collectives.schedule import Phase, Schedule, Step
from netsim.errors import InputError
from netsim.topology.model import Topology

#: ``--algo`` names per op; ``auto`` is always accepted.
ALGORITHMS: dict[str, tuple[str, ...]] = {
    "all_reduce": ("ring", "tree", "halving_doubling", "hierarchical", "nvls", "nvls_tree", "direct"),
    "all_gather": ("ring", "halving_doubling", "hierarchical", "nvls"),
    "reduce_scatter": ("ring", "halving_doubling", "hierarchical", "nvls"),
    "alltoall": ("direct", "hierarchical", "node_limited"),
    "broadcast": ("ring",),
    "reduce": ("ring",),
    "sendrecv": ("p2p",),
}
#: p2p (all-to-all, send/recv) protocol threshold, NCCL's (re-exported from :mod:`.p2p`, which
#: applies it per send and channel count as enqueue.cc:932 does).
P2P_LL_THRESHOLD = p2p.P2P_LL_THRESHOLD


@dataclass(frozen=True)
class Plan:
    """A schedule ready to run, and why it was chosen."""

    schedule: Schedule
    algorithm: str
    protocol: str
    channels: int
    predicted_us: float | None  # NCCL's own estimate (None for non-NCCL algorithms)

    @property
    def label(self) -> str:
        return f"{self.algorithm}/{self.protocol}"


def check_algorithm(op: str, algo: str) -> None:
    """InputError unless ``algo`` is ``auto`` or available for ``op``."""
    if algo != "auto" and algo not in ALGORITHMS.get(op, ()):
        raise InputError(f"algorithm {algo!r} is not available for {op}; expected one of "
                         f"auto, {', '.join(ALGORITHMS.get(op, ()))}", source="--algo")


def plan(topo: Topology, ranks, op: str, nbytes: float, algo: str = "auto", *,
         channels: int | None = None, protocol: str | None = None, matrix: np.ndarray | None = None,
         shaped: bool = True) -> Plan:
    """The schedule for ``op`` of nccl-tests size ``nbytes`` over ``ranks`` (topology ranks).

    channels: NCCL channels (default: NCCL's count for the group, reduced for small sizes).
    protocol: force LL / LL128 / Simple (default: NCCL's choice).
    matrix: per-pair bytes for all-to-all (alltoallv).
    shaped: apply protocol effects (False: the bare algorithm on the bare network).
    """
    ranks = np.asarray(ranks, dtype=np.int64)
    n = int(ranks.size)
    d = _decide(topo, ranks, op, nbytes, algo, channels, protocol)
    if d is None:  # nothing to communicate
        return Plan(Schedule(op, "none", n, nbytes, ()), "none", "none", 0, 0.0)
    info, g, choice, name, nc = d
    if choice is None:
        return _p2p_plan(topo, ranks, op, nbytes, algo, info, g, matrix, protocol, shaped)
    loops = (nccl.nvls_tree_pieces(nbytes, info) if name == "nvls_tree" else
             nccl.nvls_pieces(nbytes, info) if name == "nvls" and op == "all_reduce" else 0)
    sched, depth, sched_channels = _build(op, name, n, nbytes, g, nc, choice.protocol, info.nvls_heads, loops,
                                          nccl.nvls_tree_head_rate(info) * 1e9)
    if not shaped:
        return Plan(sched, name, "none", sched_channels, None)
    sched = shape(sched, topo, ranks, choice, depth, nc, sched_channels, f"{name}/{choice.protocol}")
    # NCCL launches one thread block per channel the plan uses (enqueue.cc:1756-1758, v2.30.7-1)
    sched = replace(sched, blocks=int(nc)) if name in nccl.NCCL_ALGOS else sched
    sched = split_connections(sched, topo, ranks)  # queue pairs per connection (one, by default)
    return Plan(sched, name, choice.protocol, nc, choice.time_us if name == choice.algorithm else None)


def check_plan(topo: Topology, ranks, op: str, nbytes: float, algo: str = "auto", *,
               channels: int | None = None, protocol: str | None = None) -> None:
    """Raise the :class:`~netsim.errors.InputError` that :func:`plan` would (an algorithm not
    available for ``op``, a protocol it has not, whole nodes it needs), building no schedule."""
    _decide(topo, np.asarray(ranks, dtype=np.int64), op, nbytes, algo, channels, protocol)


def choice(topo: Topology, ranks, op: str, nbytes: float, algo: str = "auto", *,
           channels: int | None = None, protocol: str | None = None) -> tuple[str, str | None, int | None]:
    """``(algorithm, protocol, channels)`` that :func:`plan` would build, building no schedule;
    ``protocol`` is None for all-to-all and send/recv (chosen per send), ``("none", None, None)``
    for fewer than two ranks.  Passing them back to :func:`plan` for fewer ranks builds the same
    algorithm at a smaller scale (:mod:`netsim.perftests.estimate`)."""
    d = _decide(topo, np.asarray(ranks, dtype=np.int64), op, nbytes, algo, channels, protocol)
    if d is None:
        return "none", None, None
    _info, _g, chosen, name, nc = d
    return name, None if chosen is None else chosen.protocol, nc


#: Algorithms whose schedules need whole, node-aligned groups of ranks, with what they are called.
WHOLE_NODES = {("all_to_all", "hierarchical"): "hierarchical all-to-all needs whole nodes",
               ("all_to_all", "node_limited"): "node_limited all-to-all needs whole nodes",
               ("collective", "hierarchical"): "hierarchical needs whole nodes: a multiple of the GPUs per node, "
                                               "node-aligned",
               ("collective", "nvls_tree"): "nvls_tree needs whole nodes"}


def _decide(topo: Topology, ranks: np.ndarray, op: str, nbytes: float, algo: str, channels, protocol):
    """What :func:`plan` builds, every choice checked: None (fewer than 2 ranks) or
    ``(comm info, ranks per node or None, NCCL choice or None for p2p ops, algorithm, channels)``."""
    check_algorithm(op, algo)
    if protocol is not None and protocol not in nccl.PROTOCOLS:
        raise InputError(f"expected one of {', '.join(nccl.PROTOCOLS)}, got {protocol!r}", source="--proto")
    if ranks.size < 2:
        return None
    info = nccl.CommInfo.from_topology(topo, ranks, channels)
    g = info.local_size if node_aligned(ranks, info.local_size) else None
    p2p_op = op in ("alltoall", "sendrecv")
    if p2p_op:
        choice, name, nc = None, "direct" if algo == "auto" else algo, channels
    else:
        if algo == "auto":  # nvls_tree's schedule needs whole, aligned nodes: otherwise NCCL's next best
            choice = nccl.choose(op, nbytes, info, algorithms=None if g is not None else ("tree", "ring", "nvls"))
        else:
            choice = nccl.protocol_for(algo, op, nbytes, info)
        if protocol is not None:
            choice = _with_protocol(choice, op, nbytes, info, protocol)
        name = algo if algo != "auto" else choice.algorithm
        nc = channels if channels is not None else choice.channels
        if choice.algorithm in nccl.NCCL_ALGOS and nc != choice.channels:
            choice = replace(choice, channel_cap_GBps=nccl.channel_cap(choice, info, nc))
    need = WHOLE_NODES.get(("all_to_all" if op == "alltoall" else "p2p" if p2p_op else "collective", name))
    if need is not None and g is None:
        raise InputError(need, source="--gpus")
    return info, g, choice, name, nc


def node_aligned(ranks: np.ndarray, g: int) -> bool:
    """Whole nodes, in order: ranks are k·g .. k·g+g-1 for consecutive node slots."""
    n = ranks.size
    if g <= 1 or n <= g or n % g:
        return False
    local = ranks.reshape(-1, g)
    return bool((local - local[:, :1] == np.arange(g)).all() and (local[:, 0] % g == 0).all())


def _with_protocol(choice, op, nbytes, info, protocol):
    if protocol not in nccl.PROTOCOLS:
        raise InputError(f"expected one of {', '.join(nccl.PROTOCOLS)}, got {protocol!r}", source="--proto")
    for c in nccl.candidates(op, nbytes, info) + nccl.candidates("all_reduce", nbytes, info):
        if c.algorithm == choice.algorithm and c.protocol == protocol:
            return c
    raise InputError(f"{choice.algorithm} has no {protocol} protocol in NCCL", source="--proto")


def _build(op: str, name: str, n: int, nbytes: float, g: int | None, nc: int, proto: str, heads: int = 0,
           loops: int = 0, head_rate: float = float("inf")):
    """(schedule, steps that share NCCL's latency, channels inside the schedule); ``g`` (ranks per
    node) is set for the algorithms that need whole nodes (:data:`WHOLE_NODES`, checked by :func:`_decide`).

    NCCL's latency (base + per-hop terms) is spread over every step of the schedule, so the
    shaped run pays exactly NCCL's latency and pipelined schedules keep their bandwidth:
    (pieces + depth - 1) steps of one piece each approach S/B as pieces grow.  ``heads``: NCCL's
    NVLS heads per node (:func:`netsim.collectives.nccl.nvls_heads`; 0: every GPU), the only GPUs
    whose NICs carry nvls_tree's inter-node stage; ``loops``: the pipeline pieces of nvls_tree and
    of the one-node nvls all-reduce, NCCL's loops (:func:`netsim.collectives.nccl.nvls_tree_pieces`,
    :func:`netsim.collectives.nccl.nvls_pieces`; 0: one chunk per channel per piece);
    ``head_rate``: B/s of one head's share in it (NCCL's per-head cap,
    :func:`netsim.collectives.nccl.nvls_tree_head_rate`)."""
    from netsim.collectives import chain, ring
    if name == "ring":
        if op == "broadcast":
            s = chain.chain_broadcast(n, nbytes)
            return s, n - 1, 1
        if op == "reduce":
            s = chain.chain_reduce(n, nbytes)
            return s, n - 1, 1
        fn = {"all_reduce": ring.ring_all_reduce, "all_gather": ring.ring_all_gather,
              "reduce_scatter": ring.ring_reduce_scatter}[op]
        s = fn(n, nbytes, channels=nc, local_size=g)
        return s, s.n_steps, nc
    if name == "tree":
        from netsim.collectives.tree import tree_all_reduce
        ch = max(1, min(nc, g or 1))  # channel chains start on different GPUs, hence NICs
        s = tree_all_reduce(n, nbytes, local_size=g or 1, chunks=_pieces(nbytes, nc, proto), channels=ch)
        return s, s.n_steps, ch
    if name == "direct":  # not NCCL's: every rank to every rank, reduce-scatter then all-gather
        from netsim.collectives.direct_reduce import direct_all_reduce
        s = direct_all_reduce(n, nbytes)
        return s, s.n_steps, 1
    if name == "halving_doubling":
        from netsim.collectives import halving_doubling as hd
        fn = {"all_reduce": hd.hd_all_reduce, "all_gather": hd.hd_all_gather,
              "reduce_scatter": hd.hd_reduce_scatter}[op]
        s = fn(n, nbytes)
        return s, s.n_steps, 1
    if name == "hierarchical":
        from netsim.collectives.hierarchical import hierarchical
        s = hierarchical(op, n, nbytes, local_size=g, channels=nc)
        return s, s.n_steps, nc
    if name == "nvls":
        from netsim.collectives import nvls
        fn = {"all_reduce": nvls.nvls_all_reduce, "all_gather": nvls.nvls_all_gather,
              "reduce_scatter": nvls.nvls_reduce_scatter}[op]
        s = fn(n, nbytes, chunks=loops or _pieces(nbytes, nc, proto))
        return s, s.n_steps, 1
    if name == "nvls_tree":
        from netsim.collectives.compose import pipeline
        from netsim.collectives.hierarchical import nvls_tree_all_reduce
        k = loops or _pieces(nbytes, nc, proto)
        h = min(heads, g) if heads > 0 else g
        piece = nvls_tree_all_reduce(n, nbytes / k, local_size=g, chunks=1, channels=max(1, min(nc, h)), heads=h,
                                     head_rate=head_rate)
        s = _steady_cap_only(pipeline("nvls_tree", piece, k, nbytes), k, piece.n_steps, head_rate)
        return s, s.n_steps, max(1, min(nc, h))
    raise InputError(f"unknown algorithm {name!r}", source="--algo")


def _steady_cap_only(s: Schedule, pieces: int, depth: int, rate: float) -> Schedule:
    """``s`` (``pieces`` pipelined pieces of ``depth`` steps) with the heads' rate cap ``rate`` kept
    only in its steady phase, where every stage is in flight: NCCL's per-head cap is a sustained
    rate (its busBw, tuning.cc:321-324), while NCCL's stages run decoupled by their buffers, so a
    loop filling or draining the pipeline is not held to it stage by stage."""
    if not np.isfinite(rate):
        return s
    steady = depth - 1 if pieces >= depth else -1

    def free(st: Step) -> Step:
        rc = np.asarray(st.rate_cap, dtype=np.float64)
        return replace(st, rate_cap=np.where(rc == rate, np.inf, rc)) if rc.ndim else st
    return replace(s, phases=tuple(ph if i == steady or ph.step.n_transfers == 0 else Phase(free(ph.step), ph.repeat)
                                   for i, ph in enumerate(s.phases)))


def _pieces(nbytes: float, nc: int, proto: str) -> int:
    """Pipeline pieces: one NCCL chunk per channel per piece, 1..64.  LL and LL128 stream in
    lines of 16 and 128 bytes, so they pipeline as finely as the schedule allows (64 pieces
    of at least 1 KiB)."""
    if proto != "Simple":
        return int(max(1, min(MAX_PIECES, nbytes // 1024)))
    return int(max(1, min(MAX_PIECES, np.ceil(nbytes / (nc * nccl.CHUNK_BYTES[proto])))))


def _p2p_plan(topo, ranks, op, nbytes, algo, info, g, matrix, protocol, shaped) -> Plan:
    """All-to-all and send/recv as NCCL's p2p engine runs them (:mod:`netsim.collectives.p2p`):
    NCCL's peers in flight per step, its protocol per send, network sends capped by their
    channels; ``node_limited`` (DeepEP's kernels, not NCCL's) keeps its own pipeline."""
    from netsim.collectives import direct
    n = int(ranks.size)
    name = "direct" if algo == "auto" else algo
    setup = p2p.P2PSetup.from_info(info)
    if op == "sendrecv":
        peer = float(nbytes)
    elif matrix is not None:
        off = np.asarray(matrix, dtype=np.float64)[~np.eye(n, dtype=bool)]
        peer = float(off[off > 0].mean()) if (off > 0).any() else 0.0
    else:
        peer = nbytes / n
    parts = setup.parts(peer)
    window = setup.window(parts)
    if op == "sendrecv":
        sched, name = direct.send_recv(n, nbytes), "p2p"
    elif name == "direct":
        if matrix is not None:
            from netsim.collectives.alltoall import alltoallv
            sched = alltoallv(n, matrix, window=window)
        else:
            sched = direct.direct_all_to_all(n, nbytes, window=window)
    elif name == "hierarchical":
        from netsim.collectives.alltoall import hierarchical_all_to_all
        sched = hierarchical_all_to_all(n, nbytes, local_size=g, matrix=matrix)
    else:
        from netsim.collectives.alltoall import node_limited_all_to_all
        from netsim.collectives.skew import skewed_matrix
        m = matrix if matrix is not None else skewed_matrix(n, nbytes, "uniform")
        sched = node_limited_all_to_all(n, m, local_size=g)
    if not shaped:
        return Plan(sched, name, "none", 1, None)
    sched, proto = shape_p2p(sched, topo, ranks, info, name, peer, protocol)
    if name != "node_limited":  # one block per p2p channel in use (enqueue.cc:1756-1758); DeepEP's are its own
        sched = replace(sched, blocks=int(min(setup.channels, parts * (n - 1)) if op == "alltoall" else parts))
    return Plan(split_connections(sched, topo, ranks), name, proto, parts, None)


def shape_p2p(sched: Schedule, topo: Topology, ranks: np.ndarray, info: nccl.CommInfo, name: str,
              peer_bytes: float, protocol: str | None = None) -> tuple[Schedule, str]:
    """``sched`` (sends between ``ranks``) as NCCL's p2p engine runs it: the protocol of a send of
    ``peer_bytes`` (or ``protocol``), NCCL's launch and hop latency per step, network sends (and
    Ampere's P2P-read NVLink sends) capped by the channels they run on
    (:func:`netsim.collectives.p2p.channel_caps`).
    Returns (schedule, protocol)."""
    setup = p2p.P2PSetup.from_info(info)
    proto = protocol or setup.protocol(peer_bytes)
    p = nccl.PROTOCOLS.index(proto)
    inter = info.nnodes > 1
    hop = nccl.HW_LATENCY_US["net" if inter else "nvlink"]["ring"][p]
    parts = setup.parts(peer_bytes)
    choice = nccl.Choice(name, proto, float("nan"), nccl.BASE_LATENCY_US["ring"][p] + hop, nccl.BASE_LATENCY_US["ring"][p],
                         0.0, parts, float("inf"))
    # every step of NCCL's sends is a new set of sends (a channel's next work batch, enqueue.cc:1055):
    # each pays the hop latency (depth 1); node_limited's steps are one pipeline sharing it
    depth = max(sched.n_steps, 1) if name == "node_limited" else 1
    sched = shape(sched, topo, ranks, choice, depth, parts, 1, f"{name}/{proto}")
    if name != "node_limited":  # DeepEP's kernels are not NCCL's channels
        sched = p2p.channel_caps(sched, ranks, info.local_size, setup)
    # NCCL's own peer schedule: its channel ids pick NICs and paths.  Network sends are split per
    # channel: one transfer per send would put every send of a GPU with 2 NICs on its first
    # channel's NIC; at scale sends have 1-2 parts.
    if name in ("direct", "p2p"):
        sched = p2p.key_by_channel(sched, ranks, info.local_size, setup, topo.facts.nics_per_gpu,
                                   topo.facts.intra_node == "nic")
    return sched, proto


def shape(sched: Schedule, topo: Topology, ranks: np.ndarray, choice: nccl.Choice, depth: int,
          nc: int, sched_channels: int, label: str) -> Schedule:
    """Apply a protocol: launch delay, wire framing, channel caps, per-hop latency."""
    wire = nccl.WIRE[choice.protocol]
    per_step = max(0.0, (choice.latency_us - choice.base_us) * 1e-6 / max(depth, 1))
    cap = choice.channel_cap_GBps * 1e9 * wire * nc / max(sched_channels, 1)
    if choice.algorithm in ("nvls", "nvls_tree"):
        # multimem load-reduce/store move nvlsEfficiency of a GPU's NVLink rate (tuning.cc:139-144,
        # 312): a rate cap on each transfer, so the links carry (and the links table counts) the
        # real bytes; it binds NVLink transfers only (NIC transfers are slower anyway).
        info = nccl.CommInfo.from_topology(topo, ranks)
        cap = min(cap, nccl.NVLS_EFFICIENCY[info.arch] * info.bw_intra * 1e9 * wire)
    def shaped(st):
        phys = step_latency(topo, ranks, st)
        return replace(st, overhead_s=st.overhead_s + max(0.0, per_step - phys), wire=wire,
                       rate_cap=np.minimum(st.rate_cap, cap) if np.ndim(st.rate_cap) else min(st.rate_cap, cap))

    phases = [Phase(Step.delay(choice.base_us * 1e-6))] if choice.base_us > 0 else []
    return Schedule(sched.op, label, sched.nranks, sched.nbytes, tuple(phases) + sched.map_steps(shaped).phases)
