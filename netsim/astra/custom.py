"""Custom collectives: a Chakra ET of SEND/RECV/COMP nodes per position (ASTRA-sim ``CustomAlgorithm``).

``<prefix>.<pos>.et`` describes what the NPU at position ``pos`` of the group does
(``pos`` = rank for the world group, the index among the sorted members otherwise;
algorithm ranks map to real ranks through the group's member list).  Nodes issue when
their ``data_deps`` are done: a SEND completes when its message lands, a RECV when
its message has landed, a COMP after ``duration_micros`` (0 -> 1 ns).  Messages use
the workload's point-to-point tag space (``comm_tag``); the workload's ``comm_size``
is ignored (the ET's sizes count), and there is no endpoint delay.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from netsim import astra_arith as arith
from netsim.astra.algorithms import Algorithm
from netsim.errors import InputError
from netsim.chakra.schema import NodeType
from netsim.chakra.model import MISSING

SEND, RECV, COMP = int(NodeType.COMM_SEND_NODE), int(NodeType.COMM_RECV_NODE), int(NodeType.COMP_NODE)
#: ASTRA-sim keeps point-to-point tags below this offset (``tag % 500000000``).
NATIVE_TAGS = 500_000_000


def load_custom_table(prefix: str, pos: int, key: str, source: str):
    """The ET of position ``pos`` (``<prefix>.<pos>.et``), with a clear error when missing."""
    from netsim.chakra import read_et_table

    path = f"{prefix}.{pos}.et"
    if not Path(path).is_file():
        raise InputError(f"no custom collective ET {path!r} (ASTRA-sim: 'Cannot access et file for collective "
                         "algorithm'; the path is relative to the working directory)", source=source, field=key)
    return read_et_table(path)


def dag(table, where: str) -> tuple[list[list[int]], list[int]]:
    """Children lists and in-degrees over ``data_deps`` (ASTRA-sim's feeder ignores ctrl_deps
    and rejects ids that are not in the file)."""
    index = {int(v): i for i, v in enumerate(table.id.tolist())}
    children: list[list[int]] = [[] for _ in range(len(table))]
    indeg = [0] * len(table)
    deps, ptr = table.data_deps.tolist(), table.data_ptr.tolist()
    for i in range(len(table)):
        for d in set(deps[ptr[i]:ptr[i + 1]]):
            j = index.get(d)
            if j is None:
                raise InputError(f"node {int(table.id[i])} depends on node {d}, which is not in the file "
                                 "(ASTRA-sim's feeder throws 'not found in index')", source=where, field="data_deps")
            if j != i:
                children[j].append(i)
                indeg[i] += 1
    return children, indeg


class CustomAlgorithm(Algorithm):
    """One rank's run of a custom collective ET (one stream, one phase)."""

    name = "custom"

    def __init__(self, table, rank: int, members, size: int, ctx):
        self.t, self.rank, self.members, self.ctx = table, rank, members, ctx
        self.data_size = self.final_size = size
        self.children, self.indeg = dag(table, table.source)
        self.order = np.argsort(table.id, kind="stable").argsort().tolist()
        self.free = {i for i, d in enumerate(self.indeg) if d == 0}
        self.ongoing: set[int] = set()

    def _real(self, algo_rank: int) -> int:
        return algo_rank if self.members is None else self.members[algo_rank]

    def run(self, event: int) -> None:
        self._issue_free()

    def _issue_free(self) -> None:
        for i in sorted(self.free, key=self.order.__getitem__):
            self.free.discard(i)
            self.ongoing.add(i)
            self._issue(i)

    def _issue(self, i: int) -> None:
        t, typ = self.t, int(self.t.type[i])
        done = lambda: self._done(i)  # noqa: E731
        tag = ("n", 0 if t.comm_tag[i] == MISSING else int(t.comm_tag[i]) % NATIVE_TAGS)
        size = int(t.comm_size[i])
        if typ == SEND:
            self.ctx.send(self.rank, self._real(int(t.comm_dst[i])), tag, size, done)
        elif typ == RECV:
            self.ctx.recv(self._real(int(t.comm_src[i])), self.rank, tag, size, done)
        elif typ == COMP:
            self.stream.sys.register(arith.replay_ns(int(t.duration_micros[i])), done)
        else:
            raise InputError(f"node {int(t.id[i])} has type {NodeType(typ).name}; a custom collective may only "
                             "hold COMM_SEND, COMM_RECV and COMP nodes (ASTRA-sim never finishes it)",
                             source=t.source, field="type")

    def _done(self, i: int) -> None:
        self.ongoing.discard(i)
        for c in self.children[i]:
            self.indeg[c] -= 1
            if self.indeg[c] == 0:
                self.free.add(c)
        self._issue_free()
        if not self.ongoing and not self.free:
            self.exit()
