"""Read a workload the way ASTRA-sim does: ``<prefix>.<i>.et`` for every NPU ``i`` of the network.

Generated workloads are often the same trace on every rank up to node ids (ASTRA-sim's
microbenchmarks use id = rank).  Each file is decoded with protobuf and compared with the
traces already read after clearing ids, dependencies and compute durations, and with
each ``pg_name`` string replaced by its order of first appearance in the file; a match
reuses that :class:`~netsim.chakra.model.NodeTable` with the ids, durations and group
names relabelled (the decoder numbers group names in that same order), so 4,096 ranks
cost one full parse plus 4,096 cheap protobuf decodes, also when every rank computes
for its own time or runs its own comm group.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from netsim.errors import InputError

#: Files larger than this are always parsed in full.
SMALL = 1 << 16


def _records(data: bytes) -> list[bytes] | None:
    out, pos = [], 0
    while pos < len(data):
        n = shift = 0
        while True:
            if pos >= len(data):
                return None
            b = data[pos]
            pos += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        out.append(data[pos:pos + n])
        pos += n
    return out if pos == len(data) else None


def _shape(data: bytes):
    """(key without ids/deps/durations/group names, ids, data deps, ctrl deps, durations, group names in order
    of first appearance) of a small trace, or None."""
    from netsim.chakra.schema import chakra_classes

    recs = _records(data) if len(data) <= SMALL else None
    if not recs:
        return None
    node_cls = chakra_classes().Node
    ids, data_deps, ctrl_deps, durs, body, pgs = [], [], [], [], [recs[0]], {}
    try:
        for rec in recs[1:]:
            node = node_cls.FromString(rec)
            ids.append(node.id)
            data_deps.append(list(node.data_deps))
            ctrl_deps.append(list(node.ctrl_deps))
            durs.append(node.duration_micros)
            for f in ("id", "data_deps", "ctrl_deps", "duration_micros"):
                node.ClearField(f)
            for a in node.attr:
                if a.name == "pg_name":
                    if a.WhichOneof("value") != "string_val":
                        return None  # let the decoder say what such a group name means
                    a.string_val = "#" + str(pgs.setdefault(a.string_val, len(pgs)))
            body.append(node.SerializeToString(deterministic=True))
    except Exception:  # noqa: BLE001 - legacy or corrupt files: let the full reader explain
        return None
    return tuple(body), ids, data_deps, ctrl_deps, durs, list(pgs)


def _relabel(table, ref_ids, ids, ref_deps: list[list[int]], deps: list[list[int]], column: str):
    """The reference table's deps in ``column`` mapped to this file's ids, or None if inconsistent."""
    m = dict(zip(ref_ids, ids))
    flat = []
    for a, b in zip(ref_deps, deps):
        if len(a) != len(b) or any(m.get(x, x) != y for x, y in zip(a, b)):
            return None
        flat.extend(b)
    return np.array(flat, dtype=np.int64) if len(flat) == getattr(table, column).size else None


def read_traces(prefix, npus: int, notes: list[str]) -> dict:
    """Rank -> NodeTable for ranks 0..npus-1 (ASTRA-sim's error when a file is missing)."""
    from netsim.chakra import read_et_table

    out, seen = {}, {}
    for r in range(npus):
        path = Path(f"{prefix}.{r}.et")
        if not path.is_file():
            if r == 0 and Path(str(prefix)).is_file() and npus == 1:
                path = Path(str(prefix))
            else:
                raise InputError(f"workload file: {path} does not exist (the network has {npus} NPUs and "
                                 "ASTRA-sim reads one trace per NPU)", source="--workload-configuration")
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise InputError(f"workload file: {path} exists but is not readable ({exc.strerror})",
                             source="--workload-configuration") from None
        shape = _shape(data)
        hit = seen.get(shape[0]) if shape else None
        table = None
        if hit is not None:
            ref, ref_shape = hit
            dd = _relabel(ref, ref_shape[1], shape[1], ref_shape[2], shape[2], "data_deps")
            cd = _relabel(ref, ref_shape[1], shape[1], ref_shape[3], shape[3], "ctrl_deps")
            names = dict(zip(ref_shape[5], shape[5]))
            if dd is not None and cd is not None and all(x in names for x in ref.pg_names):
                durs = np.array(shape[4], dtype=ref.duration_micros.dtype)
                pgs = [names[x] for x in ref.pg_names]
                table = replace(ref, source=str(path), id=np.array(shape[1], dtype=np.int64), data_deps=dd,
                                ctrl_deps=cd, cache={}, pg_names=ref.pg_names if pgs == ref.pg_names else pgs,
                                duration_micros=ref.duration_micros if np.array_equal(durs, ref.duration_micros)
                                else durs)  # shared objects: symmetry.py's test for "rank 0's trace relabelled"
        if table is None:
            table = read_et_table(path)
            if shape:
                seen[shape[0]] = (table, shape)
        out[r] = table
    if Path(f"{prefix}.{npus}.et").is_file():
        notes.append(f"trace files beyond the network's {npus} NPUs are ignored (as by ASTRA-sim)")
    return out
