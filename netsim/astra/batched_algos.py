"""Batched kernels for ASTRA-sim's other native algorithms: ``direct``, ``halvingDoubling`` and
``doubleBinaryTree`` streams, every rank at once (congestion-unaware model).

:class:`GeneralBatch` extends :class:`~netsim.astra.batched_ring.RingBatch` (which keeps the ring
recurrence, the waves of :mod:`netsim.astra.batched` and the stream admission: with ``T`` active
chunks, stream ``T + m`` of a collective starts at the m-th earliest exit).  Where it applies
(:func:`general_applies`): the analytical model, one queue per dimension, a world collective on a
1-D network or (direct, halvingDoubling) a sub-group's ring on any network (its members in JSON
order, 10 ns bundles; a direct all-reduce there reduces in its third batch of bundles too when the
ring has more than 2 members, as ``Direct.nonzero_packets`` counts a local ring); in the
congestion-unaware model streams share nothing but admission, so each
stream's timeline is a closed recurrence over the ranks, read from the per-rank state machines
of :mod:`netsim.astra.algorithms` (``e`` = endpoint delay, ``red(b)`` = the reduction of a
``b``-byte message, ``d(u, v)`` = the pair's delay; a receive posted at ``P`` for a message
landing at ``A`` is consumed at ``max(A, P)``):

* halvingDoubling (``p`` a power of two): one message in flight; send ``k`` goes to partner
  ``k`` at ``s_k`` (``s_0 = t0 + e``), its receive is posted then, and the next send leaves at
  ``R_k + e (+ red)``; exit ``e`` after the last receive.
* doubleBinaryTree (all-reduce, ``p`` a power of two; stream ``j`` takes the RootMax tree when
  the run's count of tree streams so far is even): leaves send up at ``t0 + e``; an inner node
  posts both child receives at ``t0`` and sends up ``e + red`` after the later one; the root
  sends down ``e + red`` after its child's message; an inner node sends down ``e + red`` after
  its parent's message (posted when it sent up); a leaf exits ``e`` after it.
* direct all-gather / all-to-all with any window: :meth:`GeneralBatch._direct_unreduced`.
* direct with every peer in flight (window -1 or >= p - 1): the first ``p - 1`` sends leave at
  ``t0 + e``.  All-gather and all-to-all exit ``e`` after their last receive, reduce-scatter
  ``e + red`` after.
  All-reduce: each first-half receive ``R_i`` frees a bundle at ``g_i = R_i + e + red``; a bundle
  that completes before the last first-half receive ``R_max`` sends nothing, the first after it
  (``g*``) sends as many as have completed, the others one each: the m-th second-half send leaves
  at ``max(g*, g_(m))``.  Its receives free bundles at ``h_i = R2_i + e`` (sent nothing more) and
  the stream exits at the last bundle.  Two orders of same-instant or crossing events this
  closed form does not carry raise :class:`NotBatched` (the event engine runs): a bundle
  completing at the very nanosecond of ``R_max`` (which comes first is the event queue's order)
  and a second-half receive's bundle completing before the last second-half send (it would send
  one earlier).

tests/test_astra_batched_algos.py checks every kernel against the event engine (hypothesis:
random sizes, NPU counts, active chunks, splits, uneven compute, all three topologies).
"""

from __future__ import annotations

import math

import numpy as np

from netsim import astra_arith as arith
from netsim.astra.algorithms import LEAF, ROOT, BinaryTree
from netsim.astra.batched_ring import RingBatch
from netsim.astra.batched_timed import NotBatched

KINDS = ("direct", "halvingDoubling", "doubleBinaryTree")


def general_applies(ctx, op: str, algo, p: int, local: bool = False) -> str | None:
    """None when :class:`GeneralBatch` is exact for collectives ``op`` with ``algo`` on ``p`` NPUs (the
    world, or a sub-group's ring when ``local``), else why not."""
    if algo.kind not in KINDS:
        return f"{op} uses {algo.kind}"
    if ctx.model != "analytical" or (len(ctx.network.dims) != 1 and not local):
        return f"{op} uses {algo.kind}, batched on a 1-D network in the analytical model only"
    if local and algo.kind == "doubleBinaryTree":
        return f"{op} uses doubleBinaryTree on a sub-group (ASTRA-sim crashes; the event engine says so)"
    if algo.flat:
        return f"{op} uses a flat (one*) algorithm"
    pow2 = p >= 2 and p & (p - 1) == 0
    if algo.kind == "direct" and 0 <= algo.window < p - 1 and op not in ("all_gather", "all_to_all"):
        return f"{op} uses direct with a window of {algo.window} (< {p - 1} peers)"
    if op == "all_to_all" and algo.kind != "direct":
        return f"all_to_all uses {algo.kind} (ASTRA-sim cannot run it; the event engine says so)"
    if algo.kind == "halvingDoubling" and not pow2:
        return f"{op} uses halvingDoubling on {p} NPUs (not a power of two)"
    if algo.kind == "doubleBinaryTree" and (op != "all_reduce" or not pow2):
        return f"{op} uses doubleBinaryTree on {p} NPUs (an all-reduce on a power of two only)"
    return None


def hd_schedule(op: str, p: int, chunk: int) -> list[tuple[int, int, bool]]:
    """``(offset, message bytes, reduces)`` of each insert of :class:`~netsim.astra.algorithms.HalvingDoubling`
    (its integer and float arithmetic, in order): the sends, then the exit bundle's insert."""
    levels = int(math.log2(p))
    count = int(2 * math.log2(p)) if op == "all_reduce" else levels
    if op == "all_reduce":
        offset, msg, mult = 1, chunk // 2, 2.0
    elif op == "all_gather":
        offset, msg, mult = p // 2, chunk, 0.5
    else:
        offset, msg, mult = 1, chunk // 2, 2.0
    zero = nonzero = 0
    toggle = False
    out = []
    for _ in range(count + 1):
        if zero == 0 and nonzero == 0:
            zero, nonzero = 1, int(math.log2(p) - 1)
            toggle = not toggle
        if zero > 0:
            reduces = False
            zero -= 1
        else:
            reduces = op == "reduce_scatter" or (op == "all_reduce" and toggle)
            nonzero -= 1
        out.append((offset, msg, reduces))
        offset = int(offset * mult)
        msg = int(msg / mult)
        if offset == p and op == "all_reduce":
            mult = 0.5
            offset = int(offset * mult)
            msg = int(msg / mult)
    return out


class _Tree:
    """A :class:`~netsim.astra.algorithms.BinaryTree` as arrays: parent / children per rank, depth levels."""

    def __init__(self, p: int, root_max: bool):
        tree = BinaryTree(p, 0, 1, root_max)
        links = [tree.links(r) for r in range(p)]
        self.parent = np.array([x[0] for x in links], dtype=np.int64)
        self.left = np.array([x[1] for x in links], dtype=np.int64)
        self.right = np.array([x[2] for x in links], dtype=np.int64)
        self.root = next(r for r in range(p) if links[r][3] == ROOT)
        self.child = int(self.left[self.root] if self.left[self.root] >= 0 else self.right[self.root])
        depth = np.zeros(p, dtype=np.int64)
        order = [self.root]
        for r in order:  # breadth first from the root
            for c in (links[r][1], links[r][2]):
                if c >= 0:
                    depth[c] = depth[r] + 1
                    order.append(c)
        leaf = np.array([x[3] == LEAF for x in links])
        # inner nodes (not leaves, not the root) by depth, deepest first; leaves apart
        self.levels = [np.flatnonzero((depth == k) & ~leaf) for k in range(int(depth.max()), 0, -1)]
        self.levels = [lv for lv in self.levels if lv.size]
        self.leaves = np.flatnonzero(leaf)


class GeneralBatch(RingBatch):
    """:class:`RingBatch` plus the direct / halvingDoubling / doubleBinaryTree kernels (module docstring)."""

    def __init__(self, ctx):
        super().__init__(ctx)
        self._delay: dict[int, np.ndarray] = {}  # bytes -> p x p delay matrix [src, dst]
        self._trees: dict[bool, _Tree] = {}
        self.tree_streams = 0  # doubleBinaryTree phases created so far (every rank alike)

    def delays(self, src: np.ndarray, dst: np.ndarray, msg: int) -> np.ndarray:
        """Delay of a ``msg``-byte message from rank ``src`` to rank ``dst`` (arrays of one shape); a
        matrix per size where the network is small, else computed."""
        n = self.ctx.npus
        if n > 512:
            return self._delays(src, dst, msg)
        d = self._delay.get(msg)
        if d is None:
            a, b = np.divmod(np.arange(n * n, dtype=np.int64), n)
            off = a != b
            flat = np.zeros(n * n, dtype=np.int64)
            flat[off] = self._delays(a[off], b[off], msg)
            d = self._delay[msg] = flat.reshape(n, n)
        return d[src, dst]

    def collective(self, op: str, size: int, p: int, ranks: np.ndarray, pred: np.ndarray, start: np.ndarray,
                   bundle: int, algo=None, local: bool = False) -> np.ndarray:
        """As :meth:`RingBatch.collective`; ``algo`` other than ring runs its kernel (slots ``k p .. k p + p - 1``
        are ring ``k``'s members in ring order, ``local``: sub-group rings)."""
        if algo is None or algo.kind == "ring":
            return super().collective(op, size, p, ranks, pred, start, bundle)
        self._ranks, self._p, self._local = ranks, p, local
        self._window = p - 1 if algo.window < 0 else min(algo.window, p - 1)
        slot = np.arange(ranks.size, dtype=np.int64)
        self._base, self._idx = slot - slot % p, slot % p
        cfg = self.ctx.system
        splits = cfg.preferred_dataset_splits
        chunk = arith.chunk_bytes(size, splits, self.ctx.npus, op)
        if chunk > size // splits:
            size = splits * chunk
        count = -(-size // chunk)
        threshold = math.ceil(cfg.active_chunks_per_dimension / self.ctx.queues_per_dim)
        stream = {"direct": self._direct, "halvingDoubling": self._hd, "doubleBinaryTree": self._dbt}[algo.kind]
        exits: list[np.ndarray] = []
        for j in range(count):
            if j < threshold:
                t0 = start
            else:
                t0 = np.sort(np.stack(exits, axis=1), axis=1)[:, j - threshold]
            exits.append(stream(op, p, chunk, t0, bundle))
        return np.max(np.stack(exits, axis=1), axis=1)

    def _red(self, nbytes: int) -> int:
        return arith.reduction_ns(nbytes, self.ctx.system.local_mem_bw_GBps)

    # ------------------------------------------------------------------ kernels
    def _hd(self, op: str, p: int, chunk: int, t0: np.ndarray, e: int) -> np.ndarray:
        sched = hd_schedule(op, p, chunk)
        idx, base, ranks = self._idx, self._base, self._ranks
        s = t0 + e
        r = s
        for k, (offset, msg, _reduces) in enumerate(sched[:-1]):
            if msg < 1:
                raise NotBatched("a halvingDoubling message of 0 bytes")
            up = (idx // offset) % 2 == 0
            peer = base + np.where(up, idx + offset, idx - offset) % p  # the partner's slot
            r = np.maximum(s[peer] + self.delays(ranks[peer], ranks, msg), s)
            nxt = sched[k + 1]
            s = r + e + (self._red(nxt[1]) if nxt[2] else 0)
        self.messages += ranks.size * (len(sched) - 1)
        self.steps += len(sched) - 1
        return r + e

    def _dbt(self, op: str, p: int, chunk: int, t0: np.ndarray, e: int) -> np.ndarray:
        root_max = self.tree_streams % 2 == 0
        self.tree_streams += 1
        tree = self._trees.get(root_max)
        if tree is None:
            tree = self._trees[root_max] = _Tree(p, root_max)
        step = e + self._red(chunk)
        ranks = self._ranks  # the world: slot = rank
        kids = np.flatnonzero(tree.parent >= 0)
        d_up = np.zeros(p, dtype=np.int64)  # each node's message to its parent, and back
        d_down = np.zeros(p, dtype=np.int64)
        d_up[kids] = self.delays(ranks[kids], ranks[tree.parent[kids]], chunk)
        d_down[kids] = self.delays(ranks[tree.parent[kids]], ranks[kids], chunk)
        up = np.zeros(p, dtype=np.int64)  # when each node sends up (the root: down)
        up[tree.leaves] = t0[tree.leaves] + e
        for lv in tree.levels:
            lt, rt = tree.left[lv], tree.right[lv]
            got = np.maximum(np.maximum(up[lt] + d_up[lt], up[rt] + d_up[rt]), t0[lv])
            up[lv] = got + step
        root, child = tree.root, tree.child
        down = np.zeros(p, dtype=np.int64)  # when each node sends down (leaves: exit)
        down[root] = max(int(up[child] + d_up[child]), int(t0[root])) + step
        for lv in tree.levels[::-1]:
            down[lv] = np.maximum(down[tree.parent[lv]] + d_down[lv], up[lv]) + step
        lf = tree.leaves
        down[lf] = np.maximum(down[tree.parent[lf]] + d_down[lf], up[lf]) + e
        self.messages += 2 * (p - 1)
        self.steps += 2 * len(tree.levels) + 2
        return down

    def _direct(self, op: str, p: int, chunk: int, t0: np.ndarray, e: int) -> np.ndarray:
        msg = chunk if op == "all_gather" else chunk // p
        if msg < 1:
            raise NotBatched("a direct message of 0 bytes")
        ranks, n = self._ranks, self._ranks.size
        # packet i's peer slot (the sender of the message I receive with it) and that message's delay
        src = self._base[:, None] + (self._idx[:, None] - 1 - np.arange(p - 1, dtype=np.int64)[None, :]) % p
        d = self.delays(ranks[src], np.broadcast_to(ranks[:, None], src.shape), msg)
        if op in ("all_gather", "all_to_all"):  # all-to-all: p - 1 messages of chunk / p, none reduced
            self.messages += n * (p - 1)
            return self._direct_unreduced(p, t0, e, src, d)
        s1 = t0 + e
        r1 = np.maximum(s1[src] + d, s1[:, None])
        self.steps += 2
        red = self._red(msg)
        if op == "reduce_scatter":
            self.messages += n * (p - 1)
            return r1.max(axis=1) + e + red
        g = r1 + e + red
        rmax = r1.max(axis=1)
        if np.any(g == rmax[:, None]):
            raise NotBatched("a direct all-reduce bundle completes at the instant of its last first-half receive "
                             "(their order is the event queue's)")
        gstar = np.where(g > rmax[:, None], g, np.iinfo(np.int64).max).min(axis=1)
        send2 = np.maximum(np.sort(g, axis=1), gstar[:, None])  # the m-th second-half send: packet m
        cols = np.broadcast_to(np.arange(p - 1, dtype=np.int64)[None, :], src.shape)
        r2 = np.maximum(send2[src, cols] + d, send2)
        # a sub-group's ring (local) keeps reducing in its third batch of bundles when p > 2 (Direct.nonzero_packets)
        h = r2 + e + (red if self._local and p > 2 else 0)
        if np.any(h.min(axis=1) < send2.max(axis=1)):
            raise NotBatched("a direct all-reduce second-half receive frees a bundle before the last second-half "
                             "send")
        self.messages += 2 * n * (p - 1)
        self.steps += 2
        return np.maximum(h.max(axis=1), g.max(axis=1))

    def _direct_unreduced(self, p: int, t0: np.ndarray, e: int, src: np.ndarray, d: np.ndarray) -> np.ndarray:
        """A direct all-gather / all-to-all with ``W`` messages in flight: no bundle reduces, so bundles
        complete in insert order and send k leaves ``e`` after insert k: at ``t0`` for the first ``W``,
        then at the (k - W)-th receive (among the first k: a later one cannot come sooner); exit ``e``
        after the last receive."""
        w = self._window
        if w == p - 1:  # every send at once
            s1 = t0 + e
            self.steps += 2
            return np.maximum(s1[src] + d, s1[:, None]).max(axis=1) + e
        sends = np.empty(src.shape, dtype=np.int64)
        got = np.empty(src.shape, dtype=np.int64)
        for k in range(p - 1):
            sends[:, k] = t0 + e if k < w else np.partition(got[:, :k], k - w, axis=1)[:, k - w] + e
            got[:, k] = np.maximum(sends[src[:, k], k] + d[:, k], sends[:, k])
        self.steps += p - 1
        return got.max(axis=1) + e
