"""Per-rank signatures of a Chakra file set: what a trace is up to a renaming of ranks and groups.

A rank's trace names other ranks in two places only: the peers of its sends and receives
(``comm_src`` / ``comm_dst``) and the communicator groups of its collectives (``pg_name``).
:class:`TraceSig` splits a decoded :class:`~netsim.chakra.model.NodeTable` into

* ``body``: a digest of everything else the simulator reads (names, types, durations,
  dependencies as rows rather than node ids, every other attribute, which rows carry a peer
  and which group *slot* each collective uses);
* ``src`` / ``dst``: the peer values of the rows that have them, in row order;
* ``pg_names``: the group names, in slot order (the order the decoder first met them).

Two ranks' traces are the same up to a renaming ``p`` of ranks and groups exactly when their
bodies are equal, ``p[src_a] == src_b``, ``p[dst_a] == dst_b`` and slot ``i`` of one names
the group ``p`` maps slot ``i`` of the other to (:mod:`netsim.workload.file_symmetry` checks
that).  IOInfo ``inputs`` of METADATA nodes (PyTorch's process-group lists) are not in the
body: they only declare groups, which :func:`~netsim.chakra.groups.load_groups` merges and
checks across every file.

:func:`scan_workload` reads a ``<prefix>.<rank>.et`` set keeping one signature per distinct
file content (bytes are hashed first; identical files are signed once, mostly straight from
their bytes, :mod:`netsim.chakra.fastsig`) and no table: a run decodes only the tables it
simulates (:meth:`WorkloadScan.tables`), so memory scales with the traces kept, not the ranks.

>>> import os, tempfile
>>> from netsim.chakra import EtNode, NodeType, write_workload
>>> prefix = os.path.join(tempfile.mkdtemp(), "wl")
>>> _ = write_workload(prefix, [[EtNode(1, "s", NodeType.COMM_SEND_NODE, comm_src=r, comm_dst=1 - r,
...                                      comm_size=8)] for r in range(2)])
>>> scan = scan_workload(prefix)
>>> scan.world, scan.distinct_files, scan.sig(0).body == scan.sig(1).body
(2, 2, True)
>>> scan.sig(1).src.tolist(), scan.sig(1).dst.tolist()
([1], [0])
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from netsim.chakra.model import MISSING, NodeTable

__all__ = ["TraceSig", "WorkloadScan", "scan_workload", "trace_sig"]

@dataclass(frozen=True, eq=False)
class TraceSig:
    """A trace up to a renaming of ranks and groups (see the module docstring)."""

    body: bytes
    src: np.ndarray
    dst: np.ndarray
    pg_names: tuple[str, ...]
    nodes: int
    #: ``## process_group:init ##`` declarations: (node id, node name, inputs.values) per row.
    declared: tuple = ()
    #: Taken from the bytes (:mod:`netsim.chakra.fastsig`): equal bodies prove equality, unequal
    #: ones do not (compare :meth:`WorkloadScan.full_sig` then).
    fast: bool = False


def _digest(h, arrays) -> None:
    """Hash integer columns as one int64 buffer, each preceded by its length."""
    parts = []
    for a in arrays:
        a = np.asarray(a)
        parts.append(np.array([a.size], np.int64))
        parts.append(a.astype(np.int64, copy=False).ravel())
    h.update(np.concatenate(parts).tobytes())


def dep_rows(t: NodeTable) -> tuple[np.ndarray, ...]:
    """Dependencies as rows instead of ids (-1: an id not in the file, which runs ignore), so that
    traces whose node ids differ by a renaming compare equal; with duplicate ids (a run refuses
    them), the raw ids and dependencies."""
    ids = np.asarray(t.id)
    order = np.argsort(ids, kind="stable")
    srt = ids[order]
    if srt.size > 1 and not (srt[1:] != srt[:-1]).all():
        return ids, t.data_deps, t.ctrl_deps
    out = []
    for deps in (t.data_deps, t.ctrl_deps):
        pos = np.minimum(np.searchsorted(srt, deps), max(srt.size - 1, 0))
        known = srt[pos] == deps if srt.size else np.zeros(deps.size, bool)
        out.append(np.where(known, order[pos] if srt.size else -1, -1).astype(np.int64))
    return tuple(out)


def trace_sig(t: NodeTable) -> TraceSig:
    """The :class:`TraceSig` of one decoded trace."""
    from netsim.chakra.groups import pg_declarations

    h = hashlib.blake2b(digest_size=16)
    h.update(repr((t.metadata.version, sorted(t.metadata.attrs.items(), key=lambda kv: kv[0]))).encode())
    src, dst = t.comm_src, t.comm_dst
    _digest(h, (t.data_ptr, t.ctrl_ptr, *dep_rows(t), t.type, t.duration_micros, t.comm_type, t.comm_size,
                t.comm_tag, t.comm_priority, t.num_ops, t.tensor_size, t.pg, t.is_cpu_op, t.involved_dim, t.op_kind,
                t.gemm_m, t.gemm_n,
                src != MISSING, dst != MISSING))
    h.update(repr(t.involved_dims).encode())
    h.update("\x00".join(t.name).encode("utf-8", "surrogatepass"))
    return TraceSig(h.digest(), src[src != MISSING].copy(), dst[dst != MISSING].copy(), tuple(t.pg_names),
                    len(t), tuple(pg_declarations(t)))


@dataclass
class WorkloadScan:
    """Signatures of every rank of a file set; see :func:`scan_workload`.

    ``paths[r]``: rank r's file; ``file_of[r]``: index of its distinct content;
    ``sigs[i]``: signature of distinct content i (``sources[i]`` the first file holding it).
    """

    source: str
    paths: list[Path]
    file_of: np.ndarray
    sigs: list[TraceSig]
    sources: list[str]
    kept: dict[int, NodeTable] = field(default_factory=dict)  # distinct content -> table, read on demand
    fulls: dict[int, TraceSig] = field(default_factory=dict)  # distinct content -> decoded signature

    @property
    def world(self) -> int:
        return len(self.paths)

    @property
    def distinct_files(self) -> int:
        return len(self.sigs)

    @property
    def nodes(self) -> int:
        """Nodes over all ranks."""
        per = np.array([s.nodes for s in self.sigs], dtype=np.int64)
        return int(per[self.file_of].sum()) if self.world else 0

    def sig(self, rank: int) -> TraceSig:
        return self.sigs[int(self.file_of[rank])]

    def full_sig(self, rank: int) -> TraceSig:
        """Rank's signature from its decoded table (read once per distinct content)."""
        i = int(self.file_of[rank])
        if not self.sigs[i].fast:
            return self.sigs[i]
        if i not in self.fulls:
            self.fulls[i] = trace_sig(self.tables([rank])[rank])
        return self.fulls[i]

    def declarations(self) -> list[tuple[str, tuple]]:
        """(source, process-group declarations) of every distinct content that has some."""
        return [(src, s.declared) for src, s in zip(self.sources, self.sigs) if s.declared]

    def tables(self, ranks=None) -> dict[int, NodeTable]:
        """rank -> NodeTable for ``ranks`` (default: every rank); one table per distinct content."""
        from netsim.chakra import read_et_table

        ranks = range(self.world) if ranks is None else [int(r) for r in ranks]
        out: dict[int, NodeTable] = {}
        for r in ranks:
            i = int(self.file_of[r])
            t = self.kept.get(i)
            if t is None:
                t = self.kept[i] = read_et_table(self.sources[i])
            out[r] = t
        return out

    def canonical_classes(self) -> int:
        """Distinct traces up to renaming: bodies with equal peers relative to the rank
        (``peer - rank``) and groups of equal sizes per slot count once (a summary figure)."""
        keys = set()
        for r in range(self.world):
            s = self.sig(r)
            keys.add((s.body, (s.src - r).tobytes(), (s.dst - r).tobytes(), len(s.pg_names)))
        return len(keys)


def _jobs(world: int, jobs: int | None) -> int:
    if jobs is not None:
        return max(1, int(jobs))
    if world < PARALLEL_RANKS:
        return 1
    try:
        return max(1, min(len(os.sched_getaffinity(0)), 8))
    except AttributeError:  # not Linux
        return max(1, min(os.cpu_count() or 1, 8))


#: File sets with at least this many ranks are signed by a process pool (``jobs``).
PARALLEL_RANKS = 1024


def sign_files(paths: list[str], fast: bool = True) -> tuple[list[bytes], dict[bytes, tuple[TraceSig, str]]]:
    """(content digest per file, digest -> (signature, first file)) of some files: each distinct
    content signed once, from its bytes where :func:`~netsim.chakra.fastsig.fast_sig` can (and
    ``fast``), else decoded."""
    import gc

    from netsim.chakra.decode import ChunkReader, read_table
    from netsim.chakra.fastsig import fast_sig
    from netsim.chakra.scan import load_bytes

    digests, found, memo = [], {}, {}
    was = gc.isenabled()
    gc.disable()  # millions of acyclic objects: the cyclic GC would rescan them (as read_et_table)
    try:
        for f in paths:
            data = load_bytes(f)
            digest = hashlib.blake2b(data, digest_size=16).digest()
            if digest not in found:
                quick = fast_sig(data, str(f), memo) if fast else None
                if quick is not None:
                    sig = TraceSig(*quick, fast=True)
                else:
                    sig = trace_sig(read_table(ChunkReader(f, False, data=data), False))
                found[digest] = (sig, str(f))
            digests.append(digest)
    finally:
        if was:
            gc.enable()
    return digests, found


def _signed(paths: list[str], jobs: int, fast: bool):
    """Yield sign_files results of consecutive slices of ``paths``, in order."""
    from functools import partial

    size = max(1, min(256, -(-len(paths) // (8 * jobs))))
    slices = [paths[i:i + size] for i in range(0, len(paths), size)]
    task = partial(sign_files, fast=fast)
    if jobs == 1:
        yield from map(task, slices)
        return
    import signal

    from netsim.procpool import TrackedPool

    pool = TrackedPool(jobs, initializer=signal.signal, initargs=(signal.SIGINT, signal.SIG_IGN))
    try:
        futures = [pool.submit(task, sl) for sl in slices]
        for fut in futures:
            yield fut.result()
    except BaseException:
        pool.stop()
        raise
    pool.shutdown(wait=True)


def scan_workload(path_or_prefix: str | os.PathLike, jobs: int | None = None, fast: bool = True) -> WorkloadScan:
    """Signatures of every rank of a trace set (one ``.et`` file or ``<prefix>.<rank>.et``).

    Each file's bytes are hashed first and each distinct content signed once (from its bytes
    where it can, ``fast``; else decoded).  No table is kept: :meth:`WorkloadScan.tables` reads
    the ones a run needs.  ``jobs`` processes sign the files (default: the available cores, up
    to 8, from :data:`PARALLEL_RANKS` ranks on).  The result does not depend on ``jobs``."""
    from netsim.chakra.inspect import discover_ranks

    found = discover_ranks(path_or_prefix)
    paths = [found[r] for r in sorted(found)]
    by_digest: dict[bytes, int] = {}
    file_of = np.empty(len(paths), dtype=np.int64)
    sigs: list[TraceSig] = []
    sources: list[str] = []
    rank = 0
    for digests, new in _signed([str(p) for p in paths], _jobs(len(paths), jobs), fast):
        for digest in digests:
            i = by_digest.get(digest)
            if i is None:
                sig, source = new[digest]
                i = by_digest[digest] = len(sigs)
                sigs.append(sig)
                sources.append(source)
            file_of[rank] = i
            rank += 1
    return WorkloadScan(str(path_or_prefix), paths, file_of, sigs, sources)
