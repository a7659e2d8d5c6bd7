"""When may one rank stand for all?  The symmetric engine's eligibility test and mirror map.

ASTRA-sim's networks are products of Ring / FullyConnected / Switch dimensions, so
shifting every coordinate (``a_d -> a_d + t_d mod n_d``) maps the network onto itself
and keeps every congestion-unaware delay.  Ring and direct collectives along a
dimension are shift-invariant too; halving-doubling pairs ``i`` with ``i xor 2^k``,
which is invariant under ``i -> i xor t`` when the dimension has ``2^m`` NPUs.  If
every rank runs the same trace and every collective uses the world group, all ranks
then follow the same timeline: the message rank 0 receives from ``s`` left ``s`` when
rank 0 sent its like-numbered message to ``mirror(s)`` (the symmetry taking ``s`` to 0
takes 0 to ``mirror(s)``).
"""

from __future__ import annotations

import numpy as np

from netsim.chakra.schema import CommType, NodeType
from netsim.vocab import normalize_group_name

_OPS = {int(CommType.ALL_REDUCE): "all_reduce", int(CommType.ALL_GATHER): "all_gather",
        int(CommType.REDUCE_SCATTER): "reduce_scatter", int(CommType.ALL_TO_ALL): "all_to_all"}
_COLS = ("type", "duration_micros", "comm_type", "comm_size", "comm_priority", "num_ops", "tensor_size",
         "is_cpu_op")


def symmetric_mirror(tables: dict, system, network, memory, groups: dict, model: str, rendezvous: bool):
    """``(mirror, None)`` when the symmetric engine is exact for this run, else ``(None, reason)``."""
    if model != "analytical":
        return None, f"it needs the analytical model (got {model})"
    if rendezvous:
        return None, "the rendezvous protocol is on"
    if not network.dims:
        return None, "the network is not an ASTRA-sim network YAML"
    if system.per_node_custom:
        return None, "per-node custom collectives depend on node ids"
    t0 = tables[0]
    types = set(t0.type.tolist())
    if types & {int(NodeType.COMM_SEND_NODE), int(NodeType.COMM_RECV_NODE)}:
        return None, "the workload has point-to-point messages"
    if types & {int(NodeType.MEM_LOAD_NODE), int(NodeType.MEM_STORE_NODE)} and \
            memory.memory_type != "PER_NPU_MEMORY_EXPANSION":
        return None, f"remote memory {memory.memory_type} is shared between NPUs"
    for name in {t0.pg_names[p] for p in t0.pg.tolist() if p >= 0}:
        key = normalize_group_name(name)
        g = groups.get(key)
        world = (key in ("", "0") and g is None) or (g is not None and len(g.sorted) == network.npus)
        if not world:
            return None, f"collectives on sub-group {name!r}"
    kinds: dict[int, str] = {}
    ops = {_OPS.get(int(c)) for c, typ in zip(t0.comm_type.tolist(), t0.type.tolist())
           if typ == NodeType.COMM_COLL_NODE and int(c) != CommType.BROADCAST}
    for op in sorted(ops, key=str):
        if op is None or op in system.custom:
            return None, "custom or unsupported collectives"
        for d, algo in enumerate(system.algorithms(op)):
            if algo.flat and len(network.dims) > 1:
                return None, f"flat {algo.name} over a multi-dimensional network"
            if algo.kind == "doubleBinaryTree":
                return None, "doubleBinaryTree is not symmetric"
            kind = "xor" if algo.kind == "halvingDoubling" else "shift"
            if kind == "xor" and network.dims[d].npus & (network.dims[d].npus - 1):
                return None, "halvingDoubling on a dimension whose size is not a power of two"
            if kinds.setdefault(d, kind) != kind:
                return None, f"collectives use both shift- and xor-symmetric algorithms on dimension {d}"
    why = _same_traces(tables)
    if why:
        return None, why
    sizes = network.npus_per_dim
    xor = [kinds.get(d) == "xor" for d in range(len(sizes))]

    def mirror(s: int) -> int:
        out, stride = 0, 1
        for k, x in zip(sizes, xor):
            c = s % k
            out += (c if x else (-c) % k) * stride
            s //= k
            stride *= k
        return out

    return mirror, None


def _same_traces(tables: dict) -> str | None:
    """None when every rank's trace equals rank 0's up to node ids (same order of ids)."""
    t0 = tables[0]
    ref, order0 = None, np.argsort(t0.id, kind="stable")
    seen = {id(t0)}
    for r, t in tables.items():
        if id(t) in seen:
            continue
        seen.add(id(t))
        if t.type is t0.type and t.attr_code is t0.attr_code and t.duration_micros is t0.duration_micros and \
                t.pg_names is t0.pg_names:  # rank 0's trace with ids relabelled (traces.py)
            if len(t) > 1 and not np.array_equal(np.argsort(t.id, kind="stable"), order0):
                return f"rank {r}'s node ids are ordered differently from rank 0's"
            continue
        ref = _signature(t0) if ref is None else ref
        sig = _signature(t)
        if len(sig) != len(ref) or any(not np.array_equal(a, b) for a, b in zip(sig, ref)):
            return f"rank {r}'s trace differs from rank 0's"
    return None


def _signature(t) -> list:
    order = np.argsort(t.id, kind="stable")
    row_of = {int(v): i for i, v in enumerate(t.id.tolist())}
    deps = np.array([row_of.get(int(d), -1) for d in t.data_deps.tolist()], dtype=np.int64)
    pgs = [t.pg_names[p] if p >= 0 else "" for p in t.pg.tolist()]
    dims = [t.involved_dims[d] if d >= 0 else () for d in t.involved_dim.tolist()]
    return [np.array([len(t)]), order, deps, t.data_ptr, np.array([normalize_group_name(p) for p in pgs], dtype=object),
            np.array([str(d) for d in dims], dtype=object)] + [np.asarray(getattr(t, c)) for c in _COLS]
