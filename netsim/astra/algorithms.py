"""ASTRA-sim's native collective algorithms as per-rank state machines (our own code).

Each runs one *phase* of one chunk on one rank and is driven by three events:
``INIT`` (the chunk's stream is admitted to its queue), ``GENERAL`` (a packet bundle
finished its endpoint delay, plus the reduction when it carries one) and ``RECV``
(a message arrived).  Mechanics shared by all (ASTRA-sim ``Ring.cc`` and friends):

* every message to send is first a *packet*; releasing it creates a bundle that waits
  ``endpoint-delay`` ns (10 ns on a sub-group's local ring), then, if it carries a
  reduction, ``3 * trunc(bytes / local-mem-bw)`` ns; when it completes the algorithm
  sends its next packet (``ready``);
* the first packet of each batch of ``p - 1`` (ring) is "zero-latency"; in an all-reduce
  the first batch reduces and the second (all-gather) does not;
* a phase ends (``exit``) once everything is sent and the last bundle has completed.

Ring (``ring``/``oneRing``): ``2(p-1)`` messages of ``D/p`` for all-reduce, ``p-1`` of
``D/p`` (reduce-scatter) or ``D`` (all-gather), ``p(p-1)/2`` of ``D/p`` (all-to-all).
Direct (``direct[N]``): ``p-1`` messages kept ``N`` in flight; all-reduce sends its
all-gather half only after all ``p-1`` reduce-scatter messages arrived.
HalvingDoubling: partners at distance 1, 2, 4, ... (all-gather: p/2, ..., 1), sizes
halving (doubling).  DoubleBinaryTree: up a binary tree with reductions, then down.
"""

from __future__ import annotations

from collections import deque
from math import log2

from netsim.errors import InputError

INIT, GENERAL, RECV = 0, 1, 2
AR, RS, AG, A2A = "all_reduce", "reduce_scatter", "all_gather", "all_to_all"
CW, CCW = 0, 1


class Algorithm:
    """Base: ``stream`` (set when the chunk's stream is created) gives ``sys`` and the tag."""

    enabled = True
    stream = None

    def exit(self) -> None:
        self.stream.sys.proceed(self.stream)


class Ring(Algorithm):
    """ASTRA-sim ``Ring`` (also the base of :class:`Direct`)."""

    name = "ring"

    def __init__(self, op: str, rank: int, topo, size: int, direction: int = CW):
        self.op, self.rank, self.topo, self.data_size = op, rank, topo, size
        p = self.p = topo.n
        self.dst = topo.receiver(rank, direction)
        self.src = topo.sender(rank, direction)
        self.direction = direction
        self.parallel = 1
        self.fast = topo.local
        self.stream_count = 2 * (p - 1) if op == AR else (p - 1) * p // 2 if op == A2A else p - 1
        if op == AG:
            self.final_size, self.msg = size * p, size
        elif op == RS:
            self.final_size = self.msg = size // p
        else:
            self.final_size, self.msg = size, size // p
        self.zero = self.nonzero = self.free = self.received = 0
        self.toggle = False
        self.packets: deque = deque()

    def nonzero_packets(self) -> int:
        return (self.p - 1) * self.parallel

    def run(self, event: int) -> None:
        if event == GENERAL:
            self.free += 1
            self.ready()
            self.iterate()
        elif event == RECV:
            self.received += 1
            self.insert()
        else:
            for _ in range(self.parallel):
                self.insert()

    def insert(self) -> None:
        if self.zero == 0 and self.nonzero == 0:
            self.zero, self.nonzero = self.parallel, self.nonzero_packets()
            self.toggle = not self.toggle
        if self.zero > 0:
            self.packets.append((self.dst, self.src, self.msg))
            self.release(False, True)
            self.zero -= 1
        elif self.nonzero > 0:
            self.packets.append((self.dst, self.src, self.msg))
            self.release(self.op == RS or (self.op == AR and self.toggle), False)
            self.nonzero -= 1
        else:  # pragma: no cover - ASTRA-sim panics "should not inject nothing!"
            raise RuntimeError("ASTRA-sim: should not inject nothing!")

    def release(self, processed: bool, to_ma: bool) -> None:
        self.stream.sys.bundle(self.stream, processed, self.msg, self.fast)

    def ready(self) -> bool:
        if not self.packets or self.stream_count == 0 or self.free == 0:
            return False
        dst, src, size = self.packets[0]
        s = self.stream
        sys = s.sys
        sys._send(sys.id, dst, s.ctag, size, None)
        sys._recv(src, sys.id, s.ctag, size, s.consume)
        self.stream_count -= 1
        self.packets.popleft()
        self.free -= 1
        return True

    def iterate(self) -> None:
        if self.stream_count == 0 and self.free == self.parallel:
            self.exit()


class Direct(Ring):
    """ASTRA-sim ``AllToAll`` (the ``direct`` algorithm): ``window`` messages in flight."""

    name = "direct"

    def __init__(self, op: str, window: int, rank: int, topo, size: int, direction: int = CW):
        super().__init__(op, rank, topo, size, direction)
        self.middle = self.p - 1
        self.parallel = self.p - 1 if window == -1 else min(window, self.p - 1)
        self._next, self._prev = topo.step(direction), topo.step(1 - direction)
        if op == A2A:
            self.stream_count = self.p - 1

    def nonzero_packets(self) -> int:
        return self.parallel if not self.topo.local else (self.p - 1) * self.parallel

    def run(self, event: int) -> None:
        if event != GENERAL:
            return super().run(event)
        self.free += 1
        if self.op == AR and self.stream_count <= self.middle:
            if self.received < self.middle:
                return
            for _ in range(self.parallel):  # up to ``parallel`` sends; once one cannot go, none can
                if not self.ready():
                    break
        else:
            self.ready()
        self.iterate()

    def release(self, processed: bool, to_ma: bool) -> None:
        s = self.stream
        s.sys.bundle(s, processed, self.msg, self.fast)
        nxt, prv = self._next, self._prev
        self.dst = nxt[self.dst]
        if self.dst == self.rank:
            self.dst = nxt[self.dst]
        self.src = prv[self.src]
        if self.src == self.rank:
            self.src = prv[self.src]


class HalvingDoubling(Algorithm):
    """ASTRA-sim ``HalvingDoubling`` (integer arithmetic as in C++)."""

    name = "halvingDoubling"

    def __init__(self, op: str, rank: int, topo, size: int):
        if op == A2A:
            raise InputError("halvingDoubling cannot run an all-to-all (ASTRA-sim exits: 'unknown communication "
                             "type for HalvingDoubling')", field="all-to-all-implementation")
        self.op, self.rank, self.topo, self.data_size = op, rank, topo, size
        p = self.p = topo.n
        self.parallel, self.fast = 1, topo.local
        self.stream_count = int(2 * log2(p)) if op == AR else int(log2(p))
        if op == AR:
            self.final_size, self.msg, self.offset, self.mult = size, size // 2, 1, 2.0
        elif op == AG:
            self.final_size, self.msg, self.offset, self.mult = size * p, size, p // 2, 0.5
        else:
            self.final_size, self.msg, self.offset, self.mult = size // p, size // 2, 1, 2.0
        self.zero = self.nonzero = self.free = self.received = 0
        self.toggle = False
        self.packets: deque = deque()
        self._partner()

    def _partner(self) -> None:
        t = self.topo
        direction = CW if self.offset == 0 or (t.index(self.rank) // self.offset) % 2 == 0 else CCW
        # ``offset`` steps in that direction
        self.peer = t.node((t.index(self.rank) + (self.offset if direction == CW else -self.offset)) % t.n)

    def run(self, event: int) -> None:
        if event == GENERAL:
            self.free += 1
            self.ready()
            if self.stream_count == 0 and self.free == self.parallel:
                self.exit()
        elif event == RECV:
            self.received += 1
            self.insert()
        else:
            self.insert()

    def insert(self) -> None:
        if self.zero == 0 and self.nonzero == 0:
            self.zero, self.nonzero = self.parallel, int(log2(self.p) - self.parallel)
            self.toggle = not self.toggle
        if self.zero > 0:
            self.packets.append((self.peer, self.peer, self.msg))
            self._release(False)
            self.zero -= 1
        elif self.nonzero > 0:
            self.packets.append((self.peer, self.peer, self.msg))
            self._release(self.op == RS or (self.op == AR and self.toggle))
            self.nonzero -= 1
        else:  # pragma: no cover
            raise RuntimeError("ASTRA-sim: should not inject nothing!")

    def _release(self, processed: bool) -> None:
        self.stream.sys.bundle(self.stream, processed, self.msg, self.fast)
        self.offset = int(self.offset * self.mult)
        self.msg = int(self.msg / self.mult)
        if self.offset == self.p and self.op == AR:
            self.mult = 0.5
            self.offset = int(self.offset * self.mult)
            self.msg = int(self.msg / self.mult)
        self._partner()

    ready = Ring.ready  # same packet admission as the ring


LEAF, ROOT, INTER = "leaf", "root", "intermediate"
(BEGIN, TO_PARENT, WAIT_PARENT, END, WAIT_TWO, WAIT_ONE, TO_CHILDREN) = range(7)


class DoubleBinaryTree(Algorithm):
    """ASTRA-sim ``DoubleBinaryTreeAllReduce`` on one of the two trees (whole chunk per message)."""

    name = "doubleBinaryTree"

    def __init__(self, rank: int, tree, size: int):
        self.op, self.rank, self.data_size = AR, rank, size
        self.final_size = size
        self.parent, self.left, self.right, self.type = tree.links(rank)
        self.state, self.reductions = BEGIN, 0

    def _bundle(self, processed: bool) -> None:
        self.stream.sys.bundle(self.stream, processed, self.data_size, False)

    def _send(self, peer: int) -> None:
        self.stream.sys.coll_send(peer, self.stream, self.data_size)

    def _recv(self, peer: int) -> None:
        self.stream.sys.coll_recv(peer, self.stream, self.data_size)

    def run(self, event: int) -> None:
        st, ty = self.state, self.type
        if ty == LEAF:
            if st == BEGIN:
                self._bundle(False)
                self.state = TO_PARENT
            elif st == TO_PARENT:
                self._send(self.parent)
                self._recv(self.parent)
                self.state = WAIT_PARENT
            elif st == WAIT_PARENT:
                self._bundle(False)
                self.state = END
            elif st == END:
                self.exit()
        elif ty == INTER:
            if st == BEGIN:
                self.state = WAIT_TWO
                self._recv(self.left)
                self._recv(self.right)
            elif st == WAIT_TWO and event == RECV:
                self._bundle(True)
                self.state = WAIT_ONE
            elif st == WAIT_ONE and event == RECV:
                self._bundle(True)
                self.state = TO_PARENT
            elif self.reductions < 1 and event == GENERAL:
                self.reductions += 1
            elif st == TO_PARENT:
                self.state = WAIT_PARENT
                self._send(self.parent)
                self._recv(self.parent)
            elif st == WAIT_PARENT and event == RECV:
                self._bundle(True)
                self.state = TO_CHILDREN
            elif st == TO_CHILDREN:
                self._send(self.left)
                self._send(self.right)
                self.exit()
        else:
            child = self.left if self.left >= 0 else self.right
            if st == BEGIN:
                self.state = WAIT_ONE
                self._recv(child)
            elif st == WAIT_ONE:
                self._bundle(True)
                self.state = TO_CHILDREN
            elif st == TO_CHILDREN:
                self._send(child)
                self.exit()


class BinaryTree:
    """ASTRA-sim's ``BinaryTree``: a full tree under a one-child root, ids assigned in order
    (``start``, ``start + stride``, ...); RootMax puts the root last, RootMin first."""

    def __init__(self, n: int, start: int, stride: int, root_max: bool):
        depth, tmp = 1, n
        while tmp > 1:
            depth += 1
            tmp //= 2
        if 2 ** (depth - 1) != n:
            raise InputError(f"an all-reduce runs doubleBinaryTree on a dimension of {n} NPUs; it needs a power of "
                             "two (ASTRA-sim's tree then misses NPUs and crashes on them)")
        self._links: dict[int, tuple[int, int, int, str]] = {}
        ids = iter(range(start, start + n * stride, stride))
        # in-order numbering: (node id, parent index, left index, right index) over a heap layout
        levels = depth - 1
        order: list[int] = []

        def walk(i: int, level: int) -> None:
            if level < levels:
                walk(2 * i, level + 1)
            order.append(i)
            if level < levels:
                walk(2 * i + 1, level + 1)

        sub: list[int] = []
        if levels:
            walk(1, 1)
            sub = order
        heap_id = {}
        if root_max:
            for h in sub:
                heap_id[h] = next(ids)
            root = next(ids)
        else:
            root = next(ids)
            for h in sub:
                heap_id[h] = next(ids)
        for h, node in heap_id.items():
            parent = root if h == 1 else heap_id[h // 2]
            kids = (heap_id.get(2 * h, -1), heap_id.get(2 * h + 1, -1))
            self._links[node] = (parent, *kids, LEAF if kids == (-1, -1) else INTER)
        top = heap_id.get(1, -1)
        self._links[root] = (-1, top if root_max else -1, -1 if root_max else top, ROOT)
        self.n = n

    def links(self, rank: int) -> tuple[int, int, int, str]:
        """(parent, left child, right child, leaf/root/intermediate) of ``rank``."""
        return self._links[rank]


class DoubleBinaryTreeTopology:
    """Two trees (RootMax, RootMin); each new chunk takes the other one."""

    local = False

    def __init__(self, n: int, start: int, stride: int):
        self.n = n
        # Built on first use: ASTRA-sim builds its trees at start-up without checking the size
        # (BinaryTree.cc keeps the largest power of two <= n), so a configuration whose all-reduce
        # never runs is accepted; only running one on a non-power-of-two dimension fails.
        self._args = (n, start, stride)
        self.trees = None
        self.counter = 0

    def basic(self) -> BinaryTree:
        if self.trees is None:
            n, start, stride = self._args
            self.trees = (BinaryTree(n, start, stride, True), BinaryTree(n, start, stride, False))
        tree = self.trees[self.counter % 2]
        self.counter += 1
        return tree
