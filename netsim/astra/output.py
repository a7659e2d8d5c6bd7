"""ASTRA-sim's result lines: format them from an :class:`~netsim.astra.run.AstraResult`, parse
them from a real binary's stdout.

Per rank, at the instant it finishes (ASTRA-sim ``Workload::report`` and ``Statistics``)::

    sys[N] finished, X cycles, exposed communication Y cycles.
    sys[N]. Post statistics processing start.
    sys[N]. Post statistics processing end.
    sys[N], Wall time: W
    sys[N], GPU time: G          (one line per node type present: CPU, GPU, Comm, Remote mem, Invalid)
    sys[N], Total compute-communication overlap: O      (when not 0)
    sys[N], Compute bound percentage: ...               (4 lines with roofline-enabled)

preceded by the ``ring of node 0 ...`` lines of the logical topologies and followed by
``Exiting``.  ASTRA-sim prints the per-type lines in ``std::unordered_map`` order;
:func:`stl_order` reproduces libstdc++'s iteration order so the lines come out alike.

>>> text = "[2024] [workload] [info] sys[3] finished, 117780 cycles, exposed communication 117780 cycles."
>>> parse_output(text)[3]["finished"]
117780
"""

from __future__ import annotations

import re

#: libstdc++ ``_Prime_rehash_policy`` bucket counts as a map grows one insertion at a time.
_BUCKETS = (13, 29, 59, 127, 257, 541, 1109, 2357, 5087, 10273, 20753, 42043, 85229, 172933, 351061, 712697,
            1447153, 2938679, 5967347, 12117689, 24607243)
#: ``OperatorType`` enum values (the hash of an enum key is its value).
TYPE_CODES = {"CPU": 0, "GPU": 1, "Comm": 2, "Remote mem": 3, "Invalid": 5}


def stl_order(keys) -> list[int]:
    """Iteration order of a libstdc++ ``std::unordered_map`` after inserting the distinct
    non-negative integer ``keys`` in this order (identity hash, max load factor 1).

    >>> stl_order([1, 2])
    [2, 1]
    """
    head = object()
    nxt: dict = {head: None}
    buckets: dict = {}
    n_bkt, count, step = 1, 0, -1

    def insert(k, nb: int) -> None:
        b = k % nb
        before = buckets.get(b)
        if before is not None:
            nxt[k] = nxt[before]
            nxt[before] = k
        else:
            first = nxt[head]
            nxt[k], nxt[head] = first, k
            if first is not None:
                buckets[first % nb] = k
            buckets[b] = head

    for k in keys:
        if count + 1 > (n_bkt if step >= 0 else 0):
            step += 1
            n_bkt = _BUCKETS[min(step, len(_BUCKETS) - 1)]
            old, p = [], nxt[head]
            while p is not None:
                old.append(p)
                p = nxt[p]
            nxt, buckets = {head: None}, {}
            for p in old:  # libstdc++ _M_rehash_aux, unique keys
                b = p % n_bkt
                if b not in buckets:
                    nxt[p], nxt[head] = nxt[head], p
                    buckets[b] = head
                    if nxt[p] is not None:
                        buckets[nxt[p] % n_bkt] = p
                else:
                    nxt[p] = nxt[buckets[b]]
                    nxt[buckets[b]] = p
        insert(k, n_bkt)
        count += 1
    out, p = [], nxt[head]
    while p is not None:
        out.append(p)
        p = nxt[p]
    return out


def type_order(issued: list[tuple[int, str]]) -> list[str]:
    """The order ASTRA-sim prints per-type times: ``issued`` = (node id, type) in issue order."""
    kind = dict(issued)
    first_seen: list[int] = []
    for nid in stl_order([n for n, _ in issued]):
        code = TYPE_CODES[kind[nid]]
        if code not in first_seen:
            first_seen.append(code)
    by_code = {v: k for k, v in TYPE_CODES.items()}
    return [by_code[c] for c in stl_order(stl_order(first_seen))]


def _int(v) -> int:
    return int(round(float(v))) if not isinstance(v, int) else v


def format_lines(res) -> list[str]:
    """ASTRA-sim's stdout for ``res`` (no ``[time] [logger] [level]`` prefixes)."""
    lines: list[str] = []
    for r in res.log:
        if isinstance(r, str):
            lines.append(r)
            continue
        lines += [f"sys[{r}] finished, {_int(res.finish[r])} cycles, exposed communication "
                  f"{_int(res.exposed[r])} cycles.",
                  f"sys[{r}]. Post statistics processing start.",
                  f"sys[{r}]. Post statistics processing end.",
                  f"sys[{r}], Wall time: {_int(res.wall[r])}"]
        rows = res.rows.get(r, res.rows.get(0, []))  # issue order
        order = type_order([(row[1], row[3]) for row in rows])
        lines += [f"sys[{r}], {k} time: {_int(res.times[k][r])}" for k in order if k in res.times]
        if _int(res.overlap[r]) != 0:
            lines.append(f"sys[{r}], Total compute-communication overlap: {_int(res.overlap[r])}")
        if res.roofline is not None:
            bound, comp, mem, oi = res.roofline[r]
            lines += [f"sys[{r}], Compute bound percentage: {bound * 100:.3f}%",
                      f"sys[{r}], Average compute utilization: {comp * 100:.3f}%",
                      f"sys[{r}], Average memory utilization: {mem * 100:.3f}%",
                      f"sys[{r}], Average operation intensity: {oi:.3f}"]
    lines.append("Exiting")
    return lines


def unreleased_lines(stuck: list) -> list[str]:
    """ASTRA-sim's lines for ranks that never finish: at exit each rank's ``HardwareResource``
    (rank order) logs, when it still holds a node, ``!!!Hardware Resource sys.id=N has unreleased
    nodes!!!`` and the node ids it holds (CPU, GPU compute, GPU comm; receives hold none)."""
    from netsim.astra.workload import COMM_LANE, CPU_LANE, GPU_LANE

    labels = ((CPU_LANE, "CPU node id"), (GPU_LANE, "GPU comp node id"), (COMM_LANE, "GPU comm node id"))
    lines: list[str] = []
    for wl in sorted(stuck, key=lambda w: w.rank):
        held = [(lane, i) for i in sorted(wl.ongoing) if (lane := wl._lane(i)) is not None]
        if held:
            lines.append(f"!!!Hardware Resource sys.id={wl.rank} has unreleased nodes!!!")
            lines += [f"{label}: {int(wl.t.id[i])}" for lane, label in labels for k, i in held if k == lane]
    return lines


_PREFIX = re.compile(r"^(\[[^\]]*\]\s*){1,3}")
_FINISHED = re.compile(r"sys\[(\d+)\] finished, (\d+) cycles, exposed communication (\d+) cycles\.")
_TIME = re.compile(r"sys\[(\d+)\], ([A-Za-z ]+?) time: (\d+)")
_OVERLAP = re.compile(r"sys\[(\d+)\], Total compute-communication overlap: (\d+)")


def parse_output(text: str) -> dict[int, dict]:
    """Per-rank numbers from ASTRA-sim's stdout (with or without log prefixes):
    ``finished``, ``exposed``, ``wall`` and one ``<type>`` key per time line (``comm``, ``gpu``...)."""
    out: dict[int, dict] = {}
    for raw in text.splitlines():
        line = _PREFIX.sub("", raw.strip())
        m = _FINISHED.search(line)
        if m:
            out.setdefault(int(m[1]), {}).update(finished=int(m[2]), exposed=int(m[3]))
            continue
        m = _TIME.search(line)
        if m:
            key = "wall" if m[2] == "Wall" else m[2].lower().replace(" ", "_")
            out.setdefault(int(m[1]), {})[key] = int(m[3])
            continue
        m = _OVERLAP.search(line)
        if m:
            out.setdefault(int(m[1]), {})["overlap"] = int(m[2])
    return out
