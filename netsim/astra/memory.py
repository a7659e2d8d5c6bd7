"""ASTRA-sim remote memory (``--remote-memory-configuration``): memory expansion modes.

The analytical remote-memory backend (astra-sim/astra-memory-analytical 641cce8, the
submodule of ASTRA-sim 518bd513) costs a ``MEM_LOAD``/``MEM_STORE`` node of
``tensor_size`` bytes ``remote-mem-latency + trunc(tensor_size / remote-mem-bw)`` ns
(``remote-mem-bw`` in GB/s = bytes/ns, stored as an unsigned integer) and serializes:

* ``NO_MEMORY_EXPANSION``: a memory node is an error (ASTRA-sim exits);
* ``PER_NPU_MEMORY_EXPANSION``: every NPU has its own memory, no queueing;
* ``PER_NODE_MEMORY_EXPANSION``: NPUs ``r // num-npus-per-node`` share one memory,
  one transaction at a time in FIFO order (``num-nodes`` memories);
* ``MEMORY_POOL``: one memory for everyone, one transaction at a time.

>>> cfg = parse_memory({"memory-type": "PER_NPU_MEMORY_EXPANSION", "remote-mem-latency": 100,
...                     "remote-mem-bw": 50})
>>> cfg.runtime_ns(1000)
120
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from netsim import inputs
from netsim import astra_arith as arith
from netsim.errors import InputError
from netsim.limits import MAX_GPUS

TYPES = ("NO_MEMORY_EXPANSION", "PER_NODE_MEMORY_EXPANSION", "PER_NPU_MEMORY_EXPANSION", "MEMORY_POOL")
_KEYS = {"memory-type", "num-nodes", "num-npus-per-node", "remote-mem-latency", "remote-mem-bw"}
#: Largest num-nodes / num-npus-per-node: a memory per NPU of the largest network netsim builds.
MAX_COUNT = MAX_GPUS


@dataclass(frozen=True)
class RemoteMemoryConfig:
    """A parsed remote-memory JSON."""

    source: str
    memory_type: str = "NO_MEMORY_EXPANSION"
    num_nodes: int = 0
    num_npus_per_node: int = 0
    latency_ns: int = 0
    bw_GBps: int = 0
    notes: tuple[str, ...] = ()

    def runtime_ns(self, tensor_size: int) -> int:
        """ns one access of ``tensor_size`` bytes takes (bandwidth must be > 0)."""
        if self.bw_GBps <= 0:
            raise InputError(f"must be > 0 for {self.memory_type} (a memory node divides by it)",
                             source=self.source, field="remote-mem-bw")
        return arith.remote_mem_ns(tensor_size, self.latency_ns, self.bw_GBps)


def _uint(j: dict, key: str, source: str) -> int:
    v = j.get(key, 0)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or v != v:
        raise InputError(f"expected a non-negative number, got {v!r}", source=source, field=key)
    inputs.number(v, source, key, hi=2**64 - 1, what="a non-negative number")  # ASTRA-sim: uint64_t
    return int(v)  # ASTRA-sim stores these in unsigned integers (truncation)


def _count(j: dict, key: str, source: str) -> int:
    """A count of memories or NPUs: a non-negative integer (ASTRA-sim reads it into an unsigned integer;
    netsim refuses what that would wrap or truncate: -1, 1.5, strings, lists, null)."""
    v = j[key]
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return inputs.bounded_int(v, source, key, 0, MAX_COUNT, what="a non-negative integer")


def parse_memory(j: Any, source: str = "remote memory JSON") -> RemoteMemoryConfig:
    """Validate a parsed remote-memory JSON object."""
    if not isinstance(j, dict):
        raise InputError("expected a JSON object with 'memory-type'", source=source)
    if "memory-type" not in j:
        raise InputError(f"missing; expected one of {', '.join(TYPES)} (ASTRA-sim leaves the type "
                         "uninitialized without it)", source=source, field="memory-type")
    mtype = j["memory-type"]
    if mtype not in TYPES:
        raise InputError(f"expected one of {', '.join(TYPES)}, got {mtype!r} (ASTRA-sim: 'Unsupported memory "
                         "type')", source=source, field="memory-type")
    notes = [f"{k}: ignored by ASTRA-sim's analytical remote memory" for k in j if k not in _KEYS]
    kw = {"latency_ns": _uint(j, "remote-mem-latency", source), "bw_GBps": _uint(j, "remote-mem-bw", source)}
    if isinstance(j.get("remote-mem-bw"), float) and j["remote-mem-bw"] != int(j["remote-mem-bw"]):
        notes.append(f"remote-mem-bw: {j['remote-mem-bw']} truncated to {kw['bw_GBps']} (unsigned integer)")
    counts = {key: _count(j, key, source) for key in ("num-nodes", "num-npus-per-node") if key in j}
    if mtype == "PER_NODE_MEMORY_EXPANSION":
        kw["num_nodes"] = _uint(j, "num-nodes", source)
        kw["num_npus_per_node"] = _uint(j, "num-npus-per-node", source)
    else:  # checked all the same: a value no memory type could use is a mistake in the file
        notes += [f"{k}: used only with PER_NODE_MEMORY_EXPANSION" for k in counts]
    return RemoteMemoryConfig(source, mtype, notes=tuple(notes), **kw)


def load_memory(path: str | Path | None) -> RemoteMemoryConfig:
    """Read a remote-memory JSON; ``None`` means NO_MEMORY_EXPANSION (ASTRA-sim requires the flag)."""
    if path is None:
        return RemoteMemoryConfig("(no --remote-memory-configuration)",
                                  notes=("no remote-memory configuration given; using NO_MEMORY_EXPANSION "
                                         "(ASTRA-sim requires --remote-memory-configuration)",))
    src = str(path)
    if not Path(path).exists():
        raise InputError("no such file (ASTRA-sim: 'Unable to open file')", source=src)
    data = inputs.load_json(path)
    return parse_memory(data, src)


class RemoteMemory:
    """The runtime model: ``issue(rank, bytes, done)``; ``register(rank, delay_ns, fn)`` schedules
    on a rank's event list (ASTRA-sim's ``Sys::register_event``)."""

    def __init__(self, cfg: RemoteMemoryConfig, n_npus: int, register: Callable[[int, int, Callable], None]):
        self.cfg, self.register = cfg, register
        self.busy: dict[int, bool] = {}
        self.pending: dict[int, deque] = {}
        if cfg.memory_type == "PER_NODE_MEMORY_EXPANSION":
            if cfg.num_npus_per_node <= 0:
                raise InputError("must be > 0 for PER_NODE_MEMORY_EXPANSION (ASTRA-sim divides the rank by it)",
                                 source=cfg.source, field="num-npus-per-node")
            if cfg.num_nodes * cfg.num_npus_per_node < n_npus:
                raise InputError(f"num-nodes {cfg.num_nodes} x num-npus-per-node {cfg.num_npus_per_node} covers "
                                 f"fewer than the network's {n_npus} NPUs", source=cfg.source, field="num-nodes")

    def _port(self, rank: int) -> int | None:
        t = self.cfg.memory_type
        if t == "PER_NODE_MEMORY_EXPANSION":
            return rank // self.cfg.num_npus_per_node
        return 0 if t == "MEMORY_POOL" else None

    def issue(self, rank: int, tensor_size: int, done: Callable[[], None], where: str = "") -> None:
        """Start (or queue) one access; ``done`` runs on ``rank`` when it completes."""
        if self.cfg.memory_type == "NO_MEMORY_EXPANSION":
            raise InputError("a MEM_LOAD/MEM_STORE node needs remote memory, but the configuration is "
                             "NO_MEMORY_EXPANSION (ASTRA-sim exits here)", source=where or self.cfg.source,
                             field="memory-type")
        port = self._port(rank)
        if port is None:
            self.register(rank, self.cfg.runtime_ns(tensor_size), done)
        elif self.busy.get(port):
            self.pending.setdefault(port, deque()).append((rank, tensor_size, done))
        else:
            self._start(port, rank, tensor_size, done)

    def _start(self, port: int, rank: int, size: int, done: Callable[[], None]) -> None:
        self.busy[port] = True
        runtime = self.cfg.runtime_ns(size)
        self.register(rank, runtime, done)  # the workload first, then the memory (same tick)
        self.register(rank, runtime, lambda: self._next(port))

    def _next(self, port: int) -> None:
        queue = self.pending.get(port)
        if queue:
            self._start(port, *queue.popleft())
        else:
            self.busy[port] = False
