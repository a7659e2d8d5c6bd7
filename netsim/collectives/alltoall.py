"""All-to-all variants for MoE expert parallelism: alltoallv, Tutel 2DH, DeepEP node-limited.

Ranks are group-local; node ``k`` of ``local_size = g`` GPUs holds ranks
``[k*g, (k+1)*g)``, so rank ``r`` is ``(k, a) = (r // g, r % g)``.  A byte
matrix ``M`` (``M[i, j]`` = bytes rank i sends to rank j, diagonal = what a
rank keeps, which never crosses the network) gives per-pair volumes; see
:mod:`netsim.collectives.skew` to build one from an MoE routing.

What ``Schedule.nbytes`` (the nccl-tests S) is
-----------------------------------------------
* :func:`alltoallv`, and any variant given a matrix: the mean per-rank send
  buffer ``M.sum() / n`` (diagonal included), so a uniform ``S/n`` matrix
  reports S like nccl-tests alltoall;
* :func:`hierarchical_all_to_all` without a matrix: S, moved as S/n to every rank;
* :func:`node_limited_all_to_all` with a routing: ``pair_bytes(routing).sum() / n``
  (a token counted once per destination rank, the bytes the experts receive).

Algorithms
----------
``direct`` (:func:`alltoallv`): rank r sends ``M[r, r+s]`` to ``r+s``, peers in
shifted order, ``window`` peers per step (like
:func:`~netsim.collectives.direct.direct_all_to_all`); zero entries send nothing.

``hierarchical`` (Tutel 2DH): step 1, intra-node: ``(k,a)`` sends to local
peer ``(k,b)`` everything it has for local index ``b`` on *any* node,
``sum_m M[(k,a),(m,b)]``.  Step 2, inter-node among same-index GPUs:
``(k,b)`` sends to ``(m,b)`` everything node k has for it,
``sum_a M[(k,a),(m,b)]`` — N-1 messages per GPU of ~S/N bytes instead of
n-g messages of S/n.  Tutel's final layout swap is a local copy (free).

``node_limited`` (DeepSeek-V3 / DeepEP dispatch): a token goes over IB at
most once per destination node, to the GPU with the sender's in-node index,
``(k,a) -> (m,a)``, carrying ``node_bytes[(k,a), m]`` (one copy per token per
node); ``(m,a)`` then forwards over NVLink to the expert GPUs ``(m,b)``.
Tokens for the sender's own node go straight over NVLink.  The overlap of IB
sends and NVLink forwards is a **pipeline of ``chunks`` chunks**: step c
carries IB chunk c, own-node chunk c and the forwards of chunk c-1 (each
chunk 1/chunks of every volume), so a forward starts only after its chunk
has landed (the executor's rendezvous rule) while the next chunk crosses IB.
``chunks + 1`` steps; time ≈ max(IB, NVLink)·(1 + 1/chunks).  ``chunks=1``
gives two sequential phases (no overlap).

Checking delivery
-----------------
Relays make ``Schedule.bytes_received`` count bytes a GPU only forwards.
:func:`delivery_plan` describes the same algorithm as data items and the hops
carrying them; :func:`final_bytes` replays it (a hop may only send an item its
sender already holds from an earlier stage, no rank gets an item twice) and
returns the bytes each rank finally holds from each origin; compare with
``M`` (or ``pair_bytes(routing)``), and :meth:`DeliveryPlan.hop_bytes` with
:func:`schedule_pair_bytes` of the schedule.

>>> m = np.full((4, 4), 250.0)
>>> s = hierarchical_all_to_all(4, None, local_size=2, matrix=m)
>>> s.nbytes, s.bytes_sent().tolist()
(1000.0, [1000.0, 1000.0, 1000.0, 1000.0])
>>> bool(np.allclose(final_bytes(delivery_plan("hierarchical", 4, m, local_size=2)), m))
True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from netsim.collectives.direct import default_window
from netsim.collectives.schedule import Phase, Schedule, Step
from netsim.collectives.skew import MoERouting, check_matrix, node_bytes, pair_bytes
from netsim.errors import InputError

__all__ = ["alltoallv", "hierarchical_all_to_all", "node_limited_all_to_all", "DeliveryPlan",
           "delivery_plan", "final_bytes", "schedule_pair_bytes", "message_stats"]


# ------------------------------------------------------------------ helpers
def _int(v, field: str, lo: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
        raise InputError(f"expected an integer >= {lo}, got {v!r}", source="argument", field=field)
    return int(v)


def node_split(n: int, local_size) -> tuple[int, int]:
    """``(GPUs per node, nodes)`` of ``n`` ranks in nodes of ``local_size`` (InputError unless it divides ``n``).

    >>> node_split(16, 8)
    (8, 2)
    """
    g = _int(local_size, "local_size")
    if n % g:
        raise InputError(f"expected local_size dividing the {n} ranks (GPUs per node), got {g}",
                         source="argument", field="local_size")
    return g, n // g


def nonempty_step(src, dst, nbytes, key) -> Step | None:
    """A step of the non-empty transfers, or None."""
    keep = nbytes > 0
    if not keep.any():
        return None
    return Step(src[keep].astype(np.int64), dst[keep].astype(np.int64), nbytes[keep].astype(np.float64),
                key=key[keep].astype(np.int64))


def _windows(count: int, window: int | None) -> list[np.ndarray]:
    """Shifts 1..count grouped ``window`` at a time (default: as direct.py)."""
    if count < 1:
        return []
    w = max(1, min(window or default_window(count + 1), count))
    return [np.arange(s, min(s + w, count + 1), dtype=np.int64) for s in range(1, count + 1, w)]


def _phases(steps) -> tuple[Phase, ...]:
    return tuple(Phase(s) for s in steps if s is not None)


def within_node_transfers(n: int, g: int, vol: np.ndarray) -> tuple:
    """Transfers (k,a) -> (k,a+s mod g) for every s: ``vol[r, b]`` bytes from r to local index b."""
    shifts = np.arange(1, g, dtype=np.int64)
    src = np.repeat(np.arange(n, dtype=np.int64), shifts.size)
    s = np.tile(shifts, n)
    b = (src % g + s) % g
    return src, src - src % g + b, vol[src, b], s


def across_node_transfers(n: int, g: int, vol: np.ndarray, shifts: np.ndarray) -> tuple:
    """Transfers (k,b) -> (k+s mod N, b): ``vol[r, m]`` bytes from r to node m."""
    nodes = n // g
    src = np.repeat(np.arange(n, dtype=np.int64), shifts.size)
    s = np.tile(shifts, n)
    m = (src // g + s) % nodes
    return src, m * g + src % g, vol[src, m], s


# --------------------------------------------------------------- schedules
def alltoallv(n: int, matrix, *, window: int | None = None) -> Schedule:
    """Direct all-to-all with per-pair bytes ``matrix[i, j]``; ``window`` peers per step."""
    n = _int(n, "n")
    m = check_matrix(matrix, n)
    nbytes = float(m.sum()) / n
    ranks = np.arange(n, dtype=np.int64)
    steps = []
    for shifts in _windows(n - 1, window):
        src = np.repeat(ranks, shifts.size)
        s = np.tile(shifts, n)
        dst = (src + s) % n
        steps.append(nonempty_step(src, dst, m[src, dst], s))
    return Schedule("alltoall", "direct", n, nbytes, _phases(steps))


def hierarchical_all_to_all(n: int, nbytes: float | None, *, local_size: int, matrix=None,
                            window: int | None = None) -> Schedule:
    """Tutel 2DH all-to-all (see the module docstring); ``window`` bounds the inter-node
    peers per step.  With ``matrix``, volumes follow it and ``nbytes=None`` reports its mean
    row sum (a given ``nbytes`` is reported as is)."""
    n = _int(n, "n")
    g, nodes = node_split(n, local_size)
    if matrix is None:
        if isinstance(nbytes, bool) or not isinstance(nbytes, (int, float, np.number)) \
                or not np.isfinite(nbytes) or nbytes < 0:
            raise InputError(f"expected a size in bytes >= 0 (or a matrix), got {nbytes!r}",
                             source="argument", field="nbytes")
        s_ = float(nbytes)
        to_local = np.full((n, g), s_ / g)  # (k,a) -> local index b: N peers of S/n
        to_node = np.full((n, nodes), s_ / nodes)  # (k,b) -> node m: g sources of S/n
    else:
        m = check_matrix(matrix, n)
        s_ = float(m.sum()) / n if nbytes is None else float(nbytes)
        m4 = m.reshape(nodes, g, nodes, g)  # [k, a, m, b]
        to_local = m4.sum(axis=2).reshape(n, g)
        to_node = m4.sum(axis=1).transpose(0, 2, 1).reshape(n, nodes)
    steps = [nonempty_step(*within_node_transfers(n, g, to_local)) if g > 1 else None]
    steps += [nonempty_step(*across_node_transfers(n, g, to_node, sh)) for sh in _windows(nodes - 1, window)]
    return Schedule("alltoall", "hierarchical", n, s_, _phases(steps))


def _node_limited_volumes(n: int, data, g: int, max_nodes: int | None):
    """(pair matrix, node matrix): the routing's, or a matrix's without deduplication."""
    if isinstance(data, MoERouting):
        if data.n_ranks != n:
            raise InputError(f"expected a routing over {n} ranks, got {data.n_ranks}",
                             source="argument", field="routing")
        if max_nodes is not None:
            lim = _int(max_nodes, "max_nodes")
            spans = np.sort(data.expert_rank[data.choices] // g, axis=1)
            worst = int((1 + (np.diff(spans, axis=1) != 0).sum(axis=1)).max()) if spans.size else 0
            if worst > lim:
                raise InputError(f"a token of the routing targets {worst} nodes, more than max_nodes={lim}; "
                                 "route with route_tokens(..., local_size=, max_nodes=) or pass max_nodes=None",
                                 source="argument", field="max_nodes")
        return pair_bytes(data), node_bytes(data, g)
    m = check_matrix(data, n)
    return m, m.reshape(n, n // g, g).sum(axis=2)


def node_limited_all_to_all(n: int, routing_or_matrix, *, local_size: int, max_nodes: int | None = 4,
                            chunks: int = 4) -> Schedule:
    """DeepSeek-V3/DeepEP dispatch (see the module docstring).

    ``routing_or_matrix``: a :class:`~netsim.collectives.skew.MoERouting` (tokens are
    deduplicated per destination node; every token must span <= ``max_nodes`` nodes unless
    ``max_nodes=None``) or an ``(n, n)`` byte matrix (no per-token information: nothing to
    deduplicate, same relay structure).  ``chunks``: pipeline depth of the IB/NVLink overlap.
    """
    n = _int(n, "n")
    g, nodes = node_split(n, local_size)
    c = _int(chunks, "chunks")
    pair, node = _node_limited_volumes(n, routing_or_matrix, g, max_nodes)
    nbytes = float(pair.sum()) / n
    p4 = pair.reshape(nodes, g, nodes, g)  # [k, a, m, b]
    idx = np.arange(nodes)
    own = p4[idx, :, idx, :]  # [k, a, b]: own-node traffic
    fwd = p4.sum(axis=0).transpose(1, 0, 2) - own  # [m, a, b]: (m,a) forwards to (m,b)
    ib = across_node_transfers(n, g, node, np.arange(1, nodes, dtype=np.int64))
    local = within_node_transfers(n, g, own.reshape(n, g))
    relay = within_node_transfers(n, g, fwd.reshape(n, g))  # same (src, dst, key) order as `local`

    def step(ib_part: float, local_part: float, fwd_part: float) -> Step | None:
        nv = local[2] * local_part + relay[2] * fwd_part
        return nonempty_step(*(np.concatenate([a, b]) for a, b in zip(ib[:2], local[:2])),
                     np.concatenate([ib[2] * ib_part, nv]), np.concatenate([ib[3], local[3]]))

    part = 1.0 / c
    phases = [Phase(s, r) for s, r in ((step(part, part, 0.0), 1), (step(part, part, part), c - 1),
                                       (step(0.0, 0.0, part), 1)) if s is not None and r > 0]
    return Schedule("alltoall", "node_limited", n, nbytes, tuple(phases))


# ---------------------------------------------------------------- checking
@dataclass(frozen=True, eq=False)
class DeliveryPlan:
    """Data items (``size`` bytes, starting on ``origin``, needed by the ranks of the
    (``fin_item``, ``fin_rank``) pairs) and the hops ``src -> dst`` carrying them in
    ``stage`` order (a hop may forward only what arrived in an earlier stage)."""

    n: int
    size: np.ndarray
    origin: np.ndarray
    fin_item: np.ndarray
    fin_rank: np.ndarray
    hop_item: np.ndarray
    hop_src: np.ndarray
    hop_dst: np.ndarray
    hop_stage: np.ndarray

    def hop_bytes(self) -> np.ndarray:
        """``(n, n)`` bytes carried from src to dst over all hops (what a schedule must send)."""
        flat = np.bincount(self.hop_src * self.n + self.hop_dst, weights=self.size[self.hop_item],
                           minlength=self.n * self.n)
        return flat.reshape(self.n, self.n)


def _pair_plan(n: int, m: np.ndarray, g: int, algorithm: str) -> DeliveryPlan:
    """One item per non-zero (i, j) entry."""
    i, j = np.nonzero(m)
    items = np.arange(i.size)
    if algorithm == "direct":
        hops = [(items, i, j, 0)]
    else:
        relay = i - i % g + j % g  # hierarchical: (k,b); node-limited: (m,a)
        if algorithm == "node_limited":
            relay = j - j % g + i % g
        hops = [(items, i, relay, 0), (items, relay, j, 1)]
    cols = [np.concatenate(x) for x in zip(*[(it, s, d, np.full(it.size, st)) for it, s, d, st in hops])]
    keep = cols[1] != cols[2]
    return DeliveryPlan(n, m[i, j], i, items, j, *(c[keep] for c in cols))


def _routing_plan(r: MoERouting, g: int) -> DeliveryPlan:
    """Node-limited dispatch of a routing: one item per (token, destination node)."""
    n = r.n_ranks
    dest = r.expert_rank[r.choices]
    tok = np.broadcast_to(np.arange(dest.shape[0])[:, None], dest.shape).ravel()
    key = np.unique(tok * n + dest.ravel())  # distinct (token, rank)
    t, d = key // n, key % n
    item_key, fin_item = np.unique(t * (n // g) + d // g, return_inverse=True)
    it_tok, it_node = item_key // (n // g), item_key % (n // g)
    origin = it_tok // r.tokens_per_rank
    relay = it_node * g + origin % g  # (m, a); for the own node: the sender itself
    items = np.arange(item_key.size)
    far = it_node != origin // g
    via = far[fin_item]  # final reached through the relay (stage 1) or straight from the sender
    hs = np.concatenate([items[far], fin_item])
    src = np.concatenate([origin[far], np.where(via, relay[fin_item], origin[fin_item])])
    dst = np.concatenate([relay[far], d])
    stage = np.concatenate([np.zeros(int(far.sum()), np.int64), via.astype(np.int64)])
    keep = src != dst
    return DeliveryPlan(n, np.full(items.size, r.bytes_per_token), origin, fin_item, d,
                        hs[keep], src[keep], dst[keep], stage[keep])


def delivery_plan(algorithm: str, n: int, data, *, local_size: int = 1) -> DeliveryPlan:
    """Items and hops of ``algorithm`` ('direct', 'hierarchical', 'node_limited') for ``data``:
    an ``(n, n)`` byte matrix, or a :class:`MoERouting` (token level for 'node_limited')."""
    if algorithm not in ("direct", "hierarchical", "node_limited"):
        raise InputError(f"expected direct, hierarchical or node_limited, got {algorithm!r}",
                         source="argument", field="algorithm")
    g, _ = node_split(n, local_size)
    if isinstance(data, MoERouting):
        if algorithm == "node_limited":
            return _routing_plan(data, g)
        data = pair_bytes(data)
    return _pair_plan(n, check_matrix(data, n), g, algorithm)


def final_bytes(plan: DeliveryPlan) -> np.ndarray:
    """Replay ``plan``; ``(n, n)`` bytes each rank ends up holding from each origin.

    Raises ``ValueError`` if a hop sends an item its sender does not hold yet, an item
    reaches a rank twice, or a final destination never gets its item.
    """
    n = plan.n
    held = np.unique(np.arange(plan.size.size) * n + plan.origin)
    for st in np.unique(plan.hop_stage):
        sel = plan.hop_stage == st
        need = plan.hop_item[sel] * n + plan.hop_src[sel]
        if not np.isin(need, held).all():
            raise ValueError(f"stage {st}: a hop sends an item its sender does not hold")
        new = plan.hop_item[sel] * n + plan.hop_dst[sel]
        if np.unique(new).size != new.size or np.isin(new, held).any():
            raise ValueError(f"stage {st}: an item reaches a rank twice")
        held = np.union1d(held, new)
    want = plan.fin_item * n + plan.fin_rank
    if not np.isin(want, held).all():
        raise ValueError("an item never reaches one of its final ranks")
    flat = np.bincount(plan.origin[plan.fin_item] * n + plan.fin_rank, weights=plan.size[plan.fin_item],
                       minlength=n * n)
    return flat.reshape(n, n)


def schedule_pair_bytes(schedule: Schedule) -> np.ndarray:
    """``(n, n)`` bytes ``schedule`` sends from src to dst over all its steps (repeats included)."""
    n = schedule.nranks
    flat = np.zeros(n * n)
    for p in schedule.phases:
        st = p.step
        flat += np.bincount(st.src * n + st.dst, weights=st.nbytes * p.repeat, minlength=n * n)
    return flat.reshape(n, n)


def message_stats(schedule: Schedule, local_size: int) -> dict:
    """Messages and bytes that stay in a node vs cross nodes (repeats counted)."""
    g, _ = node_split(schedule.nranks, local_size)
    out = {"intra_messages": 0, "intra_bytes": 0.0, "inter_messages": 0, "inter_bytes": 0.0}
    for p in schedule.phases:
        st = p.step
        inter = st.src // g != st.dst // g
        out["inter_messages"] += int(inter.sum()) * p.repeat
        out["intra_messages"] += int((~inter).sum()) * p.repeat
        out["inter_bytes"] += float(st.nbytes[inter].sum()) * p.repeat
        out["intra_bytes"] += float(st.nbytes[~inter].sum()) * p.repeat
    return out
