"""ASTRA-sim's integer-nanosecond arithmetic, written once.

Every time ASTRA-sim charges is a C++ ``uint64_t`` cast (truncation) of a ``double``
expression; the order of the operations matters to the last nanosecond, so each formula
here is a transcription of the C++ expression it mirrors (reference §4.3-§4.7), with the
unit conversions taken from :mod:`netsim.units`:

* :func:`message_ns`: ``(uint64)(hops * latency + (double)size / bw_Bpns)``
  (congestion-unaware ``BasicTopology::compute_communication_delay``);
* :func:`link_ns` / :func:`serialization_ns`: ``(uint64)(latency + (double)size / bw_Bpns)`` and
  ``(uint64)((double)size / bw_Bpns)`` (congestion-aware ``Link``);
* :func:`reduction_ns`: ``3 * (uint64)((double)size / (local_mem_bw * 1e9) * 1e9)``
  (``PacketBundle::call``: 2 reads + 1 write);
* :func:`remote_mem_ns`: ``latency + (uint64)((double)size / remote_mem_bw)``
  (``AnalyticalRemoteMemory::get_remote_mem_runtime``);
* :func:`roofline_ns`: ``(uint64)((double)num_ops / perf * 1e9)`` (``Workload::issue_comp``);
* :func:`replay_ns`: ``duration_micros * 1000``, 0 -> 1 ns (``Workload::issue_replay``);
* :func:`chunk_bytes`: ``size / splits``, raised to the NPU count except for all-gather
  (``Sys::generate_collective``).

``bw_Bpns`` is the network YAML bandwidth (GiB/s) as ASTRA-sim converts it,
:func:`netsim.units.astra_bw_to_bytes_per_ns`; ``local-mem-bw`` is decimal GB/s
(:func:`netsim.units.astra_local_mem_bw_to_Bps`).  :func:`message_ns_array` is the
vectorised :func:`message_ns` for numpy callers.

>>> message_ns(32768, 1, 500, 50), reduction_ns(32768, 50), reduction_ns(32768, 1600)
(1110, 1965, 60)
"""

from __future__ import annotations

import numpy as np

from netsim import units


def bytes_per_ns(bw_gib: float) -> float:
    """ASTRA-sim's network bandwidth in bytes/ns from YAML ``bandwidth`` (GiB/s).

    >>> bytes_per_ns(50)
    53.6870912
    """
    return units.astra_bw_to_bytes_per_ns(float(bw_gib))


def message_ns(nbytes: int, hops: int, latency_ns: float, bw_gib: float) -> int:
    """Congestion-unaware delay of one message: ``trunc(hops * latency + bytes / bw)``.

    >>> message_ns(32768, 2, 250, 50)
    1110
    """
    return int(hops * float(latency_ns) + float(nbytes) / bytes_per_ns(bw_gib))


def message_ns_array(nbytes: np.ndarray, hops: np.ndarray, latency_ns: float, bw_gib: float) -> np.ndarray:
    """:func:`message_ns` element by element, as float64 whole nanoseconds.

    >>> message_ns_array(np.array([32768.0, 0.0]), np.array([1, 3]), 500, 50).tolist()
    [1110.0, 1500.0]
    """
    return np.trunc(np.asarray(hops) * float(latency_ns) + np.asarray(nbytes, np.float64) / bytes_per_ns(bw_gib))


def link_ns(nbytes: int, latency_ns: float, bw_gib: float) -> int:
    """Congestion-aware hop: arrival ``trunc(latency + bytes / bw)`` after the link starts sending.

    >>> link_ns(32768, 500, 50)
    1110
    """
    return message_ns(nbytes, 1, latency_ns, bw_gib)


def serialization_ns(nbytes: int, bw_gib: float) -> int:
    """Congestion-aware link busy time: ``trunc(bytes / bw)``.

    >>> serialization_ns(32768, 50)
    610
    """
    return int(float(nbytes) / bytes_per_ns(bw_gib))


def reduction_ns(nbytes: int, local_mem_bw_GBps: float) -> int:
    """Local reduction of one received message: 2 reads + 1 write, each
    ``trunc(bytes / (local-mem-bw * 1e9) * 1e9)`` ns.  ``local-mem-bw`` must be > 0.

    >>> reduction_ns(1 << 20, 1600)
    1965
    """
    bw = units.astra_local_mem_bw_to_Bps(float(local_mem_bw_GBps))
    if not bw > 0:
        raise ValueError("local-mem-bw must be > 0 for reductions (ASTRA-sim divides by it)")
    return 3 * int(float(nbytes) / bw * 1e9)


def remote_mem_ns(nbytes: int, latency_ns: int, bw: float) -> int:
    """One remote-memory access: ``latency + trunc(bytes / remote-mem-bw)`` (bw > 0).

    >>> remote_mem_ns(1000, 5, 3)
    338
    """
    return int(latency_ns) + int(float(nbytes) / bw)


def roofline_ns(num_ops: float, perf_flops: float) -> int:
    """A roofline compute node: ``trunc(num_ops / perf * 1e9)`` with perf in FLOP/s.

    >>> roofline_ns(2e12, 1e15)
    2000000
    """
    return int(float(num_ops) / perf_flops * 1e9)


def replay_ns(duration_micros: int) -> int:
    """A replayed node: ``duration_micros * 1000`` ns, and 1 ns for a zero duration.

    >>> replay_ns(3), replay_ns(0)
    (3000, 1)
    """
    return int(duration_micros) * 1000 if duration_micros else 1


def chunk_bytes(comm_size: int, splits: int, npus: int, op: str = "all_reduce") -> int:
    """ASTRA-sim's chunk: ``comm_size // splits``, raised to ``npus`` except for all-gather.

    >>> chunk_bytes(1 << 20, 4, 8), chunk_bytes(16, 4, 8), chunk_bytes(16, 4, 8, "all_gather")
    (262144, 8, 4)
    """
    chunk = comm_size // splits
    if op != "all_gather" and chunk < npus:
        chunk = npus
    return chunk
