"""Read and write Chakra execution traces (``.et``), fast.

File layout (``reference.md`` §3.1): records, each a base-128 varint length
then one protobuf message; record 0 is ``GlobalMetadata``, the rest ``Node``.
The whole stream may be gzipped (detected by the ``1f 8b`` magic).

Two reading APIs share one decoder:

* :func:`read_et_table` → columnar :class:`NodeTable` (numpy, deps as CSR).
  This is the one the simulator uses.
* :func:`iter_nodes` / :func:`read_et` → one :class:`EtNode` per node.

Why it is fast: the node head (fields 1-9) of a chunk of records is scanned
with numpy in lock-step (one vectorized step per *field*, not per node),
packed dependency lists are decoded with numpy, and the attribute block (the
run of field-10 entries that ends a record) is decoded once per distinct byte
string; generated traces repeat attribute blocks, so most nodes cost one dict
lookup.  A record the fast path does not fully understand (unknown fields,
fields after the attributes, odd encodings) is re-parsed with the protobuf
classes, so the result never depends on which path ran.

Attribute normalisation (reference §3.4) lives in
:func:`netsim.chakra.schema.normalize_attr`; a per-attribute memo
keeps blocks that differ in one value (e.g. p2p tags) cheap too.

Module layout: this module is the public API; the data classes live in
:mod:`~netsim.chakra.model`, framing and vectorised scanning in
:mod:`~netsim.chakra.scan`, the chunked decoder (attribute memo,
protobuf fallback, table assembly) in :mod:`~netsim.chakra.decode`
and record encoding in :mod:`~netsim.chakra.write`.  Everything
they define is re-exported here.

Examples
--------
>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "w.0.et")
>>> write_et(path, [EtNode(id=1, name="ar", type=NodeType.COMM_COLL_NODE, comm_type=0, comm_size=1 << 20)])
>>> read_et(path).nodes[0].comm_size
1048576
"""

from __future__ import annotations

import contextlib
import gc
import gzip as _gzip_module
import hashlib
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from netsim.errors import InputError
from netsim.results.io import publish
from netsim.chakra.decode import (  # noqa: F401  (re-exported)
    ChunkReader,
    chunk_nodes,
    read_table,
)
from netsim.chakra.scan import (  # noqa: F401  (re-exported)
    frame_records,
    load_bytes,
)
from netsim.chakra.schema import (  # noqa: F401  (re-exported)
    NORMALIZED_ATTRS,
    WRITE_MEMBERS,
    AttrTypeError,
    CommType,
    NodeType,
    attr_to_python,
    chakra_classes,
    combine_attrs,
    normalize_attr,
    python_to_attr,
    write_attr,
)
from netsim.chakra.model import (  # noqa: F401  (re-exported)
    MISSING,
    EtMetadata,
    EtNode,
    EtTrace,
    NodeTable,
)
from netsim.chakra.write import (  # noqa: F401  (re-exported)
    attr_record,
    encode_node,
    encode_varint,
    metadata_record,
)

__all__ = [
    "MISSING", "CommType", "EtMetadata", "EtNode", "EtTrace", "NodeTable", "NodeType",
    "iter_nodes", "iter_records", "read_et", "read_et_table", "read_metadata", "write_et", "write_workload",
]
# Also re-exported from the modules above (their home is there; listed so linters see them used).
__all__ += ["NORMALIZED_ATTRS", "WRITE_MEMBERS", "AttrTypeError", "ChunkReader", "attr_record", "attr_to_python",
            "chakra_classes", "chunk_nodes", "combine_attrs", "encode_node", "encode_varint", "frame_records",
            "load_bytes", "metadata_record", "normalize_attr", "python_to_attr", "read_table", "write_attr"]

# Read-time knobs, looked up on every read (tests shrink them to exercise chunking and memo resets).
_CHUNK_BYTES = 8 << 20  # records are decoded in chunks of about this many bytes
_MEMO_CAP = 1 << 16


def _open(path: str | os.PathLike, other: bool) -> ChunkReader:
    """Open a trace with the current ``_CHUNK_BYTES`` / ``_MEMO_CAP``."""
    return ChunkReader(path, other, _CHUNK_BYTES, _MEMO_CAP)


# --------------------------------------------------------------------------- public readers


def iter_records(path: str | os.PathLike) -> Iterator[bytes]:
    """Yield the raw message bytes of every record (gzip handled, empty records kept).

    Examples
    --------
    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "t.et")
    >>> _ = Path(p).write_bytes(b"\\x02ab\\x00\\x01c")
    >>> list(iter_records(p))
    [b'ab', b'', b'c']
    """
    data = load_bytes(path)
    pos = index = 0
    while pos < len(data):
        starts, ends, pos = frame_records(data, pos, index, pos + _CHUNK_BYTES, str(path))
        index += len(starts)
        yield from (data[s:e] for s, e in zip(starts.tolist(), ends.tolist()))


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while building millions of acyclic objects (it rescans them otherwise)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def read_et_table(path: str | os.PathLike, *, other: bool = False) -> NodeTable:
    """Read a trace into a columnar :class:`NodeTable` (the fast reader).

    Parameters
    ----------
    path
        A ``.et`` file (plain or gzipped).
    other
        Also collect every non-normalised attribute into ``table.other``
        (one dict per node; slower on traces with unique attributes).

    Examples
    --------
    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "t.0.et")
    >>> write_et(p, [EtNode(0, "a", NodeType.COMP_NODE, duration_micros=5),
    ...              EtNode(1, "b", NodeType.COMM_COLL_NODE, data_deps=(0,), comm_type=2, comm_size=64)])
    >>> t = read_et_table(p)
    >>> t.type.tolist(), t.comm_size.tolist()[1], t.data_deps[t.data_ptr[1]:t.data_ptr[2]].tolist()
    ([4, 7], 64, [0])
    """
    reader = _open(path, other)
    with _gc_paused():
        return read_table(reader, other)



def iter_nodes(path: str | os.PathLike, *, other: bool = False) -> Iterator[EtNode]:
    """Stream the nodes of a trace as :class:`EtNode` (metadata is checked up front).

    Examples
    --------
    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "t.0.et")
    >>> write_et(p, [EtNode(3, "x", NodeType.COMM_SEND_NODE, comm_dst=1, comm_size=8, comm_tag=7)])
    >>> [(n.id, n.comm_dst, n.comm_tag) for n in iter_nodes(p)]
    [(3, 1, 7)]
    """
    reader = _open(path, other)

    def gen() -> Iterator[EtNode]:
        for ch in reader.chunks():
            yield from chunk_nodes(ch, reader.decoder.values, other)
    return gen()


def read_et(path: str | os.PathLike, *, other: bool = False) -> EtTrace:
    """Read a whole trace as metadata plus a list of :class:`EtNode`.

    Parameters
    ----------
    path
        A ``.et`` file (plain or gzipped).
    other
        Fill ``EtNode.other`` with every non-normalised attribute.

    Examples
    --------
    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "t.0.et")
    >>> write_et(p, [EtNode(0, "c", NodeType.COMP_NODE, other={"rf_id": 9})], metadata_attrs={"schema": "x"})
    >>> tr = read_et(p, other=True)
    >>> tr.metadata.version, tr.metadata.attrs, tr.nodes[0].other
    ('0.0.4', {'schema': 'x'}, {'rf_id': 9})
    """
    reader = _open(path, other)
    with _gc_paused():
        nodes = [n for ch in reader.chunks() for n in chunk_nodes(ch, reader.decoder.values, other)]
    return EtTrace(reader.metadata, nodes)


def read_metadata(path: str | os.PathLike) -> EtMetadata:
    """Return only the GlobalMetadata of a trace (legacy files are rejected).

    Examples
    --------
    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "t.0.et")
    >>> write_et(p, [], metadata_version="1.0.0")
    >>> read_metadata(p).version
    '1.0.0'
    """
    return _open(path, False).metadata


# --------------------------------------------------------------------------- writing


def write_et(path: str | os.PathLike, nodes: Iterable[EtNode], *, metadata_version: str = "0.0.4",
             metadata_attrs: Mapping[str, Any] | None = None, gzip: bool = False) -> None:
    """Write a trace atomically: GlobalMetadata, then one record per node.

    Attributes are written with the members ASTRA-sim/Chakra expect
    (``is_cpu_op`` bool_val, ``comm_type``/``comm_size``/``num_ops`` int64_val,
    ``comm_src``/``comm_dst``/``comm_tag``/``comm_priority`` int32_val,
    ``pg_name`` string_val, ``involved_dim`` bool_list, ``tensor_size``
    uint64_val), in that order, followed by ``other``; ``EtNode.inputs``, when
    set, becomes the node's IOInfo ``inputs.values``.

    Parameters
    ----------
    path
        Output file; written to a temporary file in the same folder, then renamed.
    nodes
        The nodes, in file order.
    metadata_version, metadata_attrs
        GlobalMetadata ``version`` and attributes (Python values).
    gzip
        Gzip the whole stream (ASTRA-sim cannot read gzipped traces).

    Examples
    --------
    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "t.1.et")
    >>> write_et(p, [EtNode(1, "n", NodeType.COMP_NODE, duration_micros=3)], gzip=True)
    >>> read_et(p).nodes[0].duration_micros
    3
    """
    target = Path(path)
    memo: dict[tuple[Any, ...], bytes] = {}
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as raw:
            out = _gzip_module.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) if gzip else raw
            try:
                out.write(metadata_record(metadata_version, metadata_attrs))
                for node in nodes:
                    try:
                        out.write(encode_node(node, memo))
                    except (ValueError, TypeError) as exc:
                        raise InputError(f"cannot encode node {getattr(node, 'id', node)!r}: {exc}",
                                         source=str(path)) from exc
            finally:
                if gzip:
                    out.close()
        publish(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_workload(prefix: str | os.PathLike, per_rank_nodes: Sequence[Iterable[EtNode]] | Mapping[int, Iterable[EtNode]],
                   **kwargs: Any) -> list[Path]:
    """Write ``<prefix>.<rank>.et`` for every rank; return the paths in rank order.

    ``per_rank_nodes`` is a sequence (index = rank) or a mapping rank → nodes
    covering ranks 0..N-1.  Extra keyword arguments go to :func:`write_et`.  Ranks whose
    nodes are identical share one file's content: the later ones are hard links to the
    first (copies on file systems without links), so identical traces are encoded and
    stored once; readers parse each distinct file once.

    Examples
    --------
    >>> import os, tempfile
    >>> prefix = os.path.join(tempfile.mkdtemp(), "wl")
    >>> paths = write_workload(prefix, [[EtNode(0, "c", NodeType.COMP_NODE)]] * 2)
    >>> [p.name for p in paths]
    ['wl.0.et', 'wl.1.et']
    """
    items = dict(per_rank_nodes) if isinstance(per_rank_nodes, Mapping) else dict(enumerate(per_rank_nodes))
    if sorted(items) != list(range(len(items))):
        raise InputError(f"ranks must be 0..{len(items) - 1}, got {sorted(items)}", source="per_rank_nodes")
    base = Path(prefix)
    base.parent.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    written: dict[bytes, Path] = {}  # digest of the node content -> the file that holds it
    for rank in range(len(items)):
        p = base.parent / f"{base.name}.{rank}.et"
        nodes = list(items[rank])
        key = hashlib.sha256(repr(nodes).encode()).digest()  # EtNode's repr is its content
        first = written.get(key)
        if first is not None:
            _share(first, p)
        else:
            write_et(p, nodes, **kwargs)
            written[key] = p
        paths.append(p)
    return paths


def _share(first: Path, path: Path) -> None:
    """``path`` becomes a hard link to ``first`` (a copy where links are not supported), atomically."""
    import shutil

    tmp = path.parent / f".{path.name}.link.tmp"
    tmp.unlink(missing_ok=True)
    try:
        os.link(first, tmp)
    except OSError:
        shutil.copyfile(first, tmp)
    try:
        publish(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
