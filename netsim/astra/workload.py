"""ASTRA-sim's workload layer for one rank (``Workload.cc``, ``HardwareResource.cc``), in our own code.

* A node is *free* when its ``data_deps`` are done (ASTRA-sim's feeder ignores
  ``ctrl_deps``); free nodes issue in ascending id order, at most one at a time per
  lane: CPU (``is_cpu_op``), GPU compute (COMP), GPU comm (collectives, sends, memory,
  metadata and invalid nodes); receives take no lane.
* Nodes that finish synchronously (metadata, invalid, zero-byte roofline compute)
  free their children without issuing them; the next event issues them (as in ASTRA-sim).
* COMP: ``duration_micros * 1000`` ns (0 -> 1 ns), or with ``roofline-enabled`` (GPU
  nodes) ``num_ops / min(local-mem-bw * num_ops / tensor_size, peak-perf)``;
  ``replay-only`` replays every node, communication included, from its duration.
* Exposed communication = finish - the sum of non-CPU replayed/roofline durations
  (unsigned, as ASTRA-sim prints it).
"""

from __future__ import annotations

import numpy as np

from netsim import units
from netsim import astra_arith as arith
from netsim.astra.custom import NATIVE_TAGS, dag
from netsim.errors import InputError
from netsim.chakra.schema import CommType, NodeType
from netsim.chakra.model import MISSING

U64 = 1 << 64
_T = NodeType
COLL_OPS = {int(CommType.ALL_REDUCE): "all_reduce", int(CommType.ALL_GATHER): "all_gather",
            int(CommType.REDUCE_SCATTER): "reduce_scatter", int(CommType.ALL_TO_ALL): "all_to_all"}
#: Every Chakra collective code (a node's comm_type may be any integer).
COMM_TYPE_CODES = frozenset(int(c) for c in CommType)
#: Statistics types, in the order netsim prints them.
TYPES = ("CPU", "GPU", "Comm", "Remote mem", "Invalid")
CPU_LANE, GPU_LANE, COMM_LANE = 0, 1, 2


class RankStats:
    """What one rank reports: ticks, per-type busy time (union of intervals), roofline figures."""

    def __init__(self, rank: int):
        self.rank = rank
        self.finish = self.exposed = self.gpu = self.wall = self.overlap = 0
        self.times: dict[str, int] = {}
        self.roofline: tuple[float, float, float, float] | None = None
        self.rows: list[tuple] = []  # (row, node id, name, kind, comm op, bytes, start, end), issue order


def union_length(intervals: list[tuple]) -> float:
    """Total length of the union of ``(start, end)`` intervals.

    >>> union_length([(0, 4), (2, 6), (10, 11)])
    7
    """
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (cur_e - cur_s if cur_e is not None else 0)


class Workload:
    """One rank's Chakra trace executing on its :class:`~netsim.astra.sysl.Sys`."""

    def __init__(self, sys, table, ctx):
        self.sys, self.t, self.ctx, self.rank = sys, table, ctx, sys.id
        self.children, self.indeg = dag(table, table.source)
        self.order = np.argsort(table.id, kind="stable").argsort().tolist()
        self.types = table.type.tolist()
        self.cpu = (table.is_cpu_op == 1).tolist()
        self.free = {i for i, d in enumerate(self.indeg) if d == 0}
        self.ongoing: set[int] = set()
        self.lanes = [0, 0, 0]
        self.tics_gpu = self.tics_cpu = 0
        self.start: dict[int, float] = {}
        self.end: dict[int, float] = {}
        self.roof: dict[int, tuple] = {}
        self.finished = False
        self.stats: RankStats | None = None

    # ---------------------------------------------------------- lanes
    def _lane(self, i: int) -> int | None:
        if self.cpu[i]:
            return CPU_LANE
        typ = self.types[i]
        if typ == _T.COMP_NODE:
            return GPU_LANE
        return None if typ == _T.COMM_RECV_NODE else COMM_LANE

    def _available(self, i: int) -> bool:
        lane = self._lane(i)
        return lane is None or self.lanes[lane] == 0

    # -------------------------------------------------------- progress
    def fire(self) -> None:
        self.call(None)

    def call(self, i: int | None) -> None:
        """``Workload::call``: node ``i`` finished (or a plain wake-up); issue; maybe report."""
        if self.finished:
            return
        if i is not None:
            self._complete(i)
        for j in sorted(self.free, key=self.order.__getitem__):
            if j in self.free and self._available(j):
                self._issue(j)
        if not self.free and not self.ongoing and not any(self.lanes):
            self._report()

    def _complete(self, i: int) -> None:
        lane = self._lane(i)
        if lane is not None:
            self.lanes[lane] -= 1
        self.end[i] = self.ctx.clock.now
        self.ongoing.discard(i)
        for c in self.children[i]:
            self.indeg[c] -= 1
            if self.indeg[c] == 0:
                self.free.add(c)

    def _issue(self, i: int) -> None:
        self.free.discard(i)
        self.ongoing.add(i)
        lane = self._lane(i)
        if lane is not None:
            self.lanes[lane] += 1
        self.start[i] = self.ctx.clock.now
        typ, cfg = self.types[i], self.ctx.system
        if cfg.replay_only:
            return self._replay(i)
        if typ in (_T.MEM_LOAD_NODE, _T.MEM_STORE_NODE):
            size = self._attr(i, "tensor_size")
            self.ctx.memory.issue(self.rank, size, lambda: self.call(i), self._where(i))
        elif typ == _T.COMP_NODE:
            if cfg.roofline_enabled and not self.cpu[i]:
                self._roofline(i)
            else:
                self._replay(i)
        elif typ in (_T.COMM_COLL_NODE, _T.COMM_SEND_NODE, _T.COMM_RECV_NODE):
            if self.cpu[i]:
                raise InputError("a communication node with is_cpu_op set (ASTRA-sim throws 'Comm node should not "
                                 "be on CPU')", source=self.t.source, field=f"node {int(self.t.id[i])}")
            if typ == _T.COMM_COLL_NODE:
                self._collective(i)
            else:
                self._p2p(i, typ == _T.COMM_SEND_NODE)
        else:
            if typ == _T.METADATA_NODE:
                self.ctx.note("METADATA nodes are skipped (ASTRA-sim 518bd513 asserts in its statistics on them; "
                              "PyTorch process-group metadata is not read)")
            self._complete(i)

    def _where(self, i: int) -> str:
        return f"{self.t.source}: node {int(self.t.id[i])}"

    def _attr(self, i: int, name: str) -> int:
        v = int(getattr(self.t, name)[i])
        if v == MISSING:
            raise InputError(f"missing attribute {name!r} (ASTRA-sim: \"Attribute '{name}' not found in node "
                             f"{int(self.t.id[i])}\")", source=self.t.source, field=f"node {int(self.t.id[i])}")
        return v

    def _replay(self, i: int) -> None:
        runtime = arith.replay_ns(int(self.t.duration_micros[i]))
        if self.cpu[i]:
            self.tics_cpu += runtime
        else:
            self.tics_gpu += runtime
        self.sys.register(runtime, lambda: self.call(i))

    def _roofline(self, i: int) -> None:
        size, ops = self._attr(i, "tensor_size"), self._attr(i, "num_ops")
        if size == 0:
            return self._complete(i)
        cfg = self.ctx.system
        bw, peak = units.astra_local_mem_bw_to_Bps(cfg.local_mem_bw_GBps), units.tflops_to_flops(cfg.peak_perf_TFLOPS)
        oi = ops / size
        perf = min(bw * oi, peak)
        if perf <= 0:
            raise InputError("roofline performance is 0 (num_ops 0?); ASTRA-sim divides by it",
                             source=self.t.source, field=f"node {int(self.t.id[i])}")
        runtime = arith.roofline_ns(ops, perf)
        self.tics_gpu += runtime
        self.roof[i] = (oi, perf / peak, (perf / oi) / bw if oi else 0.0, perf < peak)
        self.sys.register(runtime, lambda: self.call(i))

    def _collective(self, i: int) -> None:
        t = self.t
        ctype = self._attr(i, "comm_type")
        if ctype == CommType.BROADCAST:  # replayed from its duration (ASTRA-sim: "TODO: implement broadcast")
            self.sys.register(arith.replay_ns(int(t.duration_micros[i])), lambda: self.call(i))
            return
        op = COLL_OPS.get(ctype)
        if op is None:
            name = CommType(ctype).name if ctype in COMM_TYPE_CODES else str(ctype)
            raise InputError(f"collective {name} is not simulated by ASTRA-sim ('Unsupported collective comm "
                             "type'); it supports ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL, BROADCAST",
                             source=t.source, field=f"node {int(t.id[i])}")
        size = self._attr(i, "comm_size")
        dim = int(t.involved_dim[i])
        involved = list(t.involved_dims[dim]) if dim >= 0 else [True] * 4
        pg = int(t.pg[i])
        group = self.ctx.group(t.pg_names[pg] if pg >= 0 else None, self.rank, self._where(i))
        prio = int(t.comm_priority[i]) if t.comm_priority[i] != MISSING else 0
        self.ctx.collective(self.sys, op, size, involved, group, prio, int(t.id[i]), lambda: self.call(i))

    def _p2p(self, i: int, send: bool) -> None:
        t = self.t
        me = self.rank
        src = (me if t.comm_src[i] == MISSING else int(t.comm_src[i])) if send else self._attr(i, "comm_src")
        dst = self._attr(i, "comm_dst") if send else (me if t.comm_dst[i] == MISSING else int(t.comm_dst[i]))
        if (src if send else dst) != me:
            raise InputError(f"{'send' if send else 'receive'} node on rank {me} names comm_{'src' if send else 'dst'}"
                             f" {src if send else dst} (ASTRA-sim: '{'Send' if send else 'Recv'} node should be "
                             f"issued by the {'sender' if send else 'receiver'}')",
                             source=t.source, field=f"node {int(t.id[i])}")
        peer = dst if send else src
        if not 0 <= peer < self.ctx.npus:
            raise InputError(f"peer {peer} is not an NPU of the network", source=t.source, field=f"node {int(t.id[i])}")
        tag = ("n", 0 if t.comm_tag[i] == MISSING else int(t.comm_tag[i]) % NATIVE_TAGS)
        size = self._attr(i, "comm_size")
        if send:
            self.ctx.send(me, dst, tag, size, lambda: self.call(i))
        else:
            self.ctx.recv(src, me, tag, size, lambda: self.call(i))

    # ---------------------------------------------------------- report
    def _report(self) -> None:
        self.finished = True
        now = self.ctx.clock.now
        st = self.stats = RankStats(self.rank)
        st.finish, st.gpu = now, self.tics_gpu
        st.exposed = (now - self.tics_gpu) % U64 if isinstance(now, int) else now - self.tics_gpu
        st.wall = max(self.end.values(), default=0)
        groups: dict[str, list] = {}
        t = self.t
        for i, s in self.start.items():
            kind = _kind(self.types[i], self.cpu[i])
            groups.setdefault(kind, []).append((s, self.end[i]))
            ctype = int(t.comm_type[i]) if self.types[i] == _T.COMM_COLL_NODE else MISSING
            nbytes = int(t.comm_size[i]) if t.comm_size[i] != MISSING else 0
            st.rows.append((i, int(t.id[i]), t.name[i], kind, COLL_OPS.get(ctype, ""), nbytes, s, self.end[i]))
        st.times = {k: union_length(groups[k]) for k in TYPES if k in groups}
        if set(st.times) - {"GPU", "Comm"}:
            self.ctx.note("ASTRA-sim 518bd513 aborts after 'Post statistics processing start.' when a rank has "
                          f"{', '.join(sorted(set(st.times) - {'GPU', 'Comm'}))} nodes (its overlap statistics "
                          "accept only GPU and Comm); netsim prints the lines ASTRA-sim would have printed")
        elif len(st.times) == 2:
            st.overlap = (st.times["GPU"] + st.times["Comm"] - st.wall)
            if isinstance(st.overlap, int):
                st.overlap %= U64
        if self.ctx.system.roofline_enabled:
            st.roofline = self._roofline_summary()
        self.ctx.rank_finished(self)

    def _roofline_summary(self) -> tuple[float, float, float, float]:
        bound = comp = mem = oi = 0.0
        total = 1
        for i in self.start:
            if self.types[i] != _T.COMP_NODE:
                continue
            d = self.end[i] - self.start[i]
            r = self.roof.get(i)
            if r is not None:
                bound += 0 if r[3] else d
                oi, comp, mem = oi + r[0] * d, comp + r[1] * d, mem + r[2] * d
            total += d
        return bound / total, comp / total, mem / total, oi / total


def _kind(typ: int, cpu: bool) -> str:
    if typ in (_T.MEM_LOAD_NODE, _T.MEM_STORE_NODE):
        return "Remote mem"
    if typ == _T.COMP_NODE:
        return "CPU" if cpu else "GPU"
    if typ in (_T.COMM_COLL_NODE, _T.COMM_SEND_NODE, _T.COMM_RECV_NODE):
        return "Comm"
    return "Invalid"
