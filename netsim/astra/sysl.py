"""ASTRA-sim's system layer for one rank (``Sys.cc``), in our own code.

A collective becomes ``ceil(size / chunk)`` *streams* (chunks); each stream is a list
of phases, one per involved dimension (all-gather walks the dimensions downwards;
a ``localBWAware`` all-reduce is reduce-scatter up to the last involved dimension,
all-reduce there, all-gather back down).  Each phase belongs to a *queue* of its
dimension; a queue runs ``ceil(active-chunks-per-dimension / num-queues-per-dim)``
streams at once, in priority order (LIFO / FIFO / EXPLICIT, FIFO within one
collective), and a stream moves to its next phase's queue as soon as a phase ends,
so chunks pipeline across dimensions.  No barrier between ranks: messages match by
tag (the stream id, numbered as :mod:`netsim.astra.streams` says), source and size.
"""

from __future__ import annotations

import math
from collections import deque

from netsim import astra_arith as arith
from netsim.astra.algorithms import (AG, AR, CCW, CW, DoubleBinaryTree, DoubleBinaryTreeTopology, Direct,
                                     GENERAL, HalvingDoubling, INIT, RECV, Ring)
from netsim.astra.engine import Ticker
from netsim.astra.streams import ASTRA, Numbering
from netsim.astra.system import OPS
from netsim.errors import InputError


class RingTopo:
    """A logical ring: ``n`` NPUs ``base + i * offset`` (a dimension line), or an explicit
    member list (a sub-group; ``local`` = ASTRA-sim's Local dimension, 10 ns bundles)."""

    __slots__ = ("n", "base", "offset", "members", "pos", "local", "_next")

    def __init__(self, n: int, base: int = 0, offset: int = 1, members=None, local: bool = False):
        self.n, self.base, self.offset, self.local = n, base, offset, local
        self.members = list(members) if members is not None else None
        self.pos = {m: i for i, m in enumerate(self.members)} if members is not None else None
        self._next: list | None = None

    def index(self, node: int) -> int:
        return self.pos[node] if self.pos is not None else (node - self.base) // self.offset

    def node(self, i: int) -> int:
        return self.members[i] if self.members is not None else self.base + i * self.offset

    def step(self, direction: int) -> dict[int, int]:
        """``{node: its neighbour in direction}`` (CW: the receiver, CCW: the sender), built once."""
        if self._next is None:
            nodes = [self.node(i) for i in range(self.n)]
            self._next = [dict(zip(nodes, nodes[1:] + nodes[:1])), dict(zip(nodes, nodes[-1:] + nodes[:-1]))]
        return self._next[direction]

    def receiver(self, node: int, direction: int) -> int:
        return self.step(direction)[node]

    def sender(self, node: int, direction: int) -> int:
        return self.step(1 - direction)[node]


class LogicalTopology:
    """ASTRA-sim's ``GeneralComplexTopology`` of one rank for one collective's algorithm list."""

    def __init__(self, rank: int, dims: tuple[int, ...], algos, log=None):
        self.dims: list = []
        if len(algos) > len(dims):
            raise InputError(f"lists {len(algos)} algorithms but the network has {len(dims)} dimension(s) "
                             "(ASTRA-sim asserts here)")
        offset = 1
        for d, a in enumerate(algos):
            if a.flat:
                total = math.prod(dims)
                self.dims.append(RingTopo(total, 0, 1))
                _ring_line(log, rank, total, 1)
                return
            line = (rank - rank % (offset * dims[d])) + rank % offset
            if a.kind == "doubleBinaryTree":
                self.dims.append(DoubleBinaryTreeTopology(dims[d], line, offset))
            else:
                self.dims.append(RingTopo(dims[d], line, offset))
                _ring_line(log, rank, dims[d], offset)
            offset *= dims[d]

    @classmethod
    def single(cls, ring: RingTopo) -> "LogicalTopology":
        """A sub-group's plan: one local ring over its members."""
        topo = cls.__new__(cls)
        topo.dims = [ring]
        return topo

    def size(self, d: int) -> int:
        return self.dims[d].n

    def basic(self, d: int):
        t = self.dims[d]
        return t.basic() if isinstance(t, DoubleBinaryTreeTopology) else t


def _ring_line(log, rank: int, n: int, offset: int) -> None:
    if log is not None and rank == 0:
        log.append(f"ring of node 0, id: 0 dimension: local total nodes in ring: {n} index in ring: 0 "
                   f"offset: {offset} total nodes in ring: {n}")


class Phase:
    __slots__ = ("queue", "algo")

    def __init__(self, queue: int, algo):
        self.queue, self.algo = queue, algo


class DataSet:
    """The chunks of one collective; ``on_done()`` when all have finished."""

    __slots__ = ("total", "finished", "on_done", "created")

    def __init__(self, total: int, on_done, created):
        self.total, self.finished, self.on_done, self.created = total, 0, on_done, created

    def stream_finished(self) -> None:
        self.finished += 1
        if self.finished == self.total and self.on_done is not None:
            self.on_done()


class Stream:
    """One chunk: ``phases`` still to run, the current ``phase``, its queue and priority."""

    __slots__ = ("sys", "id", "tag", "ctag", "priority", "phases", "phase", "queue", "initialized", "steps",
                 "dataset")

    def __init__(self, sys, sid: int, tag, phases: list, priority: int, dataset: DataSet):
        self.sys, self.id, self.tag, self.priority = sys, sid, tag, priority
        self.ctag = ("c", tag)  # the message tag of its collective messages
        self.phases, self.phase, self.queue = deque(phases), None, -1
        self.initialized, self.steps, self.dataset = False, 0, dataset
        for ph in phases:
            ph.algo.stream = self

    def init(self) -> None:
        self.initialized = True
        self.phase.algo.run(INIT)

    def call(self) -> None:
        self.phase.algo.run(GENERAL)

    def consume(self) -> None:
        self.phase.algo.run(RECV)


class Sys:
    """One rank's system layer; ``ctx`` (:class:`netsim.astra.run.Context`) holds what ranks share."""

    def __init__(self, rank: int, ctx):
        self.id, self.ctx, self.cfg = rank, ctx, ctx.system
        self.ticker = Ticker(ctx.clock)
        self.register = self.ticker.register
        dims = ctx.network.npus_per_dim
        self.total_nodes = math.prod(dims)
        nq = ctx.queues_per_dim
        self.levels = [_Level(range(d * nq, (d + 1) * nq)) for d in range(len(dims))]
        self.queues = {q: [] for q in range(len(dims) * nq)}
        self.running = {q: 0 for q in self.queues}
        self.threshold = math.ceil(self.cfg.active_chunks_per_dimension / nq)
        self.e = ctx.endpoint_delay
        self._red: dict[int, int] = {}  # reduction ns per message size
        # messages go straight to the matching fabric unless the rendezvous handshake wraps them
        self._send = ctx.send if ctx.rendezvous else ctx.fabric.send
        self._recv = ctx.recv if ctx.rendezvous else ctx.fabric.recv
        self.priority_counter = 0
        self.numbering = Numbering(getattr(ctx, "stream_matching", ASTRA))  # stream ids and tags (streams.py)
        log = ctx.log if rank == 0 else None
        self.logical = {}
        for op, key in OPS.items():
            try:
                self.logical[op] = LogicalTopology(rank, dims, self.cfg.algorithms(op), log)
            except InputError as exc:
                raise exc.at(source=self.cfg.source, field=f"{key}-implementation") from None

    # ------------------------------------------------------- messages
    def bundle(self, stream: Stream, processed: bool, size: int, fast: bool) -> None:
        """A PacketBundle: endpoint delay (10 ns on a local ring), then the reduction if any."""
        if processed:
            red = self._red.get(size)
            if red is None:
                red = self._red[size] = self.ctx.reduction_ns(size)
            register = self.register
            register(10 if fast else self.e, lambda: register(red, stream.call))
        else:
            self.register(10 if fast else self.e, stream.call)

    def coll_send(self, dst: int, stream: Stream, size: int) -> None:
        self._send(self.id, dst, stream.ctag, size, None)

    def coll_recv(self, src: int, stream: Stream, size: int) -> None:
        self._recv(src, self.id, stream.ctag, size, stream.consume)

    # ----------------------------------------------------- collectives
    def priority(self, explicit: int) -> int:
        policy = self.cfg.require("scheduling-policy", "to order collectives")
        if policy == "LIFO":
            self.priority_counter += 1
            return self.priority_counter - 1
        if policy == "FIFO":
            self.priority_counter -= 1
            return self.priority_counter + 1
        return explicit

    def chunking(self, size: int, op: str) -> tuple[int, int]:
        splits = self.cfg.require("preferred-dataset-splits", "to cut a collective into chunks")
        chunk = arith.chunk_bytes(size, splits, self.total_nodes, op)
        if chunk > size // splits:  # raised to the NPU count: the collective moves splits x NPUs bytes
            size = splits * chunk
        return chunk, size

    def generate(self, op: str, size: int, topo, algos, involved, explicit: int, group, on_done,
                 custom=None) -> DataSet:
        """``Sys::generate_collective``: chunks, phases and queues; returns the DataSet."""
        chunk, size = self.chunking(size, op)
        if chunk == 0:
            raise InputError(f"a {size}-byte all-gather with preferred-dataset-splits "
                             f"{self.cfg.preferred_dataset_splits} has 0-byte chunks (ASTRA-sim loops forever)",
                             source=self.cfg.source, field="preferred-dataset-splits")
        ds = DataSet(-(-size // chunk), on_done, self.ctx.clock.now)
        pri = self.priority(explicit)
        if custom is not None:
            if ds.total != 1:
                raise InputError(f"a custom collective waits for {ds.total} chunks but ASTRA-sim creates one, so it "
                                 "never finishes; use preferred-dataset-splits 1 (and a size >= the NPU count)",
                                 source=self.cfg.source, field="preferred-dataset-splits")
            first = self._new_stream([Phase(0, custom)], pri, ds, group)
            self.numbering.collective(op, None if group is None else group.key, first, 1)
            return ds
        count, first = 0, None
        while size > 0:
            count += 1
            order = list(range(len(topo.dims)))
            if op == AG:
                order.reverse()
            size = 0 if chunk > size else size - chunk
            phases = self._phases(op, chunk, topo, algos, involved, order)
            if not phases:
                raise InputError("a collective involves no network dimension (all are size 1 or not in "
                                 "involved_dim); ASTRA-sim never finishes it", field="involved_dim")
            sid = self._new_stream(phases, pri, ds, group)
            first = sid if first is None else first
        ds.total = count
        self.numbering.collective(op, None if group is None else group.key, first, count)
        return ds

    def _phases(self, op, remain, topo, algos, involved, order) -> list[Phase]:
        def active(d: int) -> bool:
            return topo.size(d) != 1 and d < len(involved) and involved[d]

        out = []
        if op != AR or self.cfg.require("collective-optimization", "for a native all-reduce") == "baseline":
            for d in order:
                if active(d):
                    q, direction = self.levels[d].next()
                    out.append(self._phase(op, topo, d, remain, q, direction, algos[d]))
                    remain = out[-1].algo.final_size
            return out
        last = max([d for d in range(len(topo.dims)) if active(d)], default=0)
        for d in range(last):
            if active(d):
                q, direction = self.levels[d].first()
                out.append(self._phase("reduce_scatter", topo, d, remain, q, direction, algos[d]))
                remain = out[-1].algo.final_size
        if active(last):
            q, direction = self.levels[last].first()
            out.append(self._phase(AR, topo, last, remain, q, direction, algos[last]))
            remain = out[-1].algo.final_size
        for d in range(last - 1, -1, -1):
            if active(d):
                q, direction = self.levels[d].last()
                out.append(self._phase(AG, topo, d, remain, q, direction, algos[d]))
                remain = out[-1].algo.final_size
        return out

    def _phase(self, op, topo, d, size, queue, direction, algo) -> Phase:
        try:
            basic = topo.basic(d)
        except InputError as exc:
            raise exc.at(source=self.cfg.source, field=f"{OPS[op]}-implementation") from None
        if algo.kind == "doubleBinaryTree":
            if not hasattr(basic, "links"):
                raise InputError("doubleBinaryTree cannot run on a sub-group's ring (ASTRA-sim casts the ring to "
                                 "a tree and crashes); use ring, direct or halvingDoubling")
            return Phase(queue, DoubleBinaryTree(self.id, basic, size))
        if algo.kind == "ring":
            return Phase(queue, Ring(op, self.id, basic, size, direction))
        if algo.kind == "direct":
            return Phase(queue, Direct(op, algo.window, self.id, basic, size, direction))
        return Phase(queue, HalvingDoubling(op, self.id, basic, size))

    def _new_stream(self, phases, pri, ds, group) -> int:
        """A stream with the next id (ASTRA-sim's one counter per rank, or per communicator: streams.py)."""
        sid, tag = self.numbering.next(None if group is None else group.key)
        stream = Stream(self, sid, tag, phases, pri, ds)
        self.proceed(stream)  # insert_into_ready_list + schedule: straight to the first phase
        return sid

    # --------------------------------------------------------- queues
    def proceed(self, stream: Stream) -> None:
        """``proceed_to_next_vnet_baseline``: leave the current queue, join the next phase's."""
        previous = stream.queue
        if not stream.phases:
            stream.dataset.stream_finished()
        if stream.queue >= 0:
            lst = self.queues[stream.phase.queue]
            for i, s in enumerate(lst):
                if s.id == stream.id:
                    del lst[i]
                    break
        if not stream.phases:
            stream.phase = None  # no event reaches a finished stream; this frees it without the cyclic GC
            if previous >= 0:
                self._removed(previous)
            return
        stream.steps += 1
        stream.phase = stream.phases.popleft()
        stream.queue = stream.phase.queue
        stream.initialized = False
        self._insert(self.queues[stream.queue], stream)
        if previous >= 0:
            self._removed(previous)
        self._added(stream.queue)

    @staticmethod
    def _insert(lst: list, stream: Stream) -> None:
        i = 0
        while i < len(lst) and (lst[i].initialized or lst[i].priority >= stream.priority):
            i += 1
        lst.insert(i, stream)

    def _added(self, q: int) -> None:
        lst, i = self.queues[q], self.running[q]
        while i < len(lst) and self.running[q] < self.threshold:
            self.running[q] += 1
            lst[i].init()
            i += 1

    def _removed(self, q: int) -> None:
        self.running[q] -= 1
        self._added(q)


class _Level:
    """``QueueLevelHandler``: round-robin queue choice per dimension (and ring direction)."""

    def __init__(self, queues: range):
        self.queues = list(queues)
        self.alloc, self.first_alloc, self.last_alloc = 0, 0, len(self.queues) // 2

    def next(self) -> tuple[int, int]:
        n = len(self.queues)
        direction = CCW if n > 1 and self.alloc >= n // 2 else CW
        q = self.queues[self.alloc]
        self.alloc = (self.alloc + 1) % n
        return q, direction

    def first(self) -> tuple[int, int]:
        q = self.queues[self.first_alloc]
        self.first_alloc += 1
        if self.first_alloc >= len(self.queues) // 2:
            self.first_alloc = 0
        return q, CW

    def last(self) -> tuple[int, int]:
        q = self.queues[self.last_alloc]
        self.last_alloc += 1
        if self.last_alloc >= len(self.queues):
            self.last_alloc = len(self.queues) // 2
        return q, CCW
