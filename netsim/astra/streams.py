"""Stream numbering: ASTRA-sim's one counter per rank (the default), or matching per communicator.

ASTRA-sim's ``Sys::generate_collective`` (its native path and its custom-collective path alike)
gives every new stream (chunk) of a rank the next value of the rank's counter
(``num_streams``); for a collective on a communicator group it then replaces that id by the
group's own counter, which this rank keeps for that group.  The rank's counter advances either
way.  Collective messages are tagged with the stream id alone (``front_end_sim_send``: the id,
moved into the collective tag range), and the network frontend matches a receive to a send by
(tag, source, destination, size) and order.  So a world collective's streams are numbered by
how many streams the rank created before it *on any group*: when ranks created different
numbers of sub-group streams first (another number of sub-group collectives, or one whose size
cuts into another number of chunks), their tags differ, no message of that collective matches,
and ASTRA-sim stops with ``!!!Hardware Resource sys.id=N has unreleased nodes!!!`` for each
stuck rank, exit status 0 and no ``finished`` line for those ranks.

``MODES``: ``astra`` (default) reproduces that counter and tag; netsim then reports the hang
(:func:`explain`, exit status 2 on the command line).  ``per-group`` numbers world streams by
a counter of world streams only and tags every message with (group, id), i.e. matches streams
per communicator; such workloads then finish, with a note that ASTRA-sim would not
(:func:`diverged`, :func:`static_divergence`).

The fast engines.  ``symmetric`` runs only when every rank's trace is the same and every
collective is on the world (or a group of every rank); every rank then creates the same streams
in the same order, so all counters agree and the ids cannot diverge.  ``batched`` runs chains
(one collective at a time per rank, in chain order); :func:`static_divergence` computes every
rank's counter at each of its world collectives from the chain and the chunk counts, and where
two ranks differ the run goes to the full engine.  Where they agree, world stream ids are equal
on all ranks in both modes and group stream ids are the same numbers as per communicator; the
only difference left is that ASTRA-sim's tag drops the group, so a world stream and a group
stream (or two groups' streams) with the same id, ends and size share a tag.  On one pair of
ranks, messages of one tag then match in the order both ranks run the collectives that carry
them; a rank runs one collective at a time, and the batched engine runs a chain only where
every collective's members reach it in the same order (otherwise it reports a wait, and the
full engine runs), so sender and receiver order them alike and each message matches the same
partner as per communicator.  The batched results therefore equal the full engine's in both
modes (tests/test_astra_streams.py checks both on random group workloads).
"""

from __future__ import annotations

from netsim.chakra.schema import NodeType
from netsim.errors import InputError

ASTRA, PER_GROUP = "astra", "per-group"
COLL = int(NodeType.COMM_COLL_NODE)
MODES = (ASTRA, PER_GROUP)


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise InputError(f"expected one of {', '.join(MODES)}, got {mode!r}", source="--stream-matching")
    return mode


class Numbering:
    """One rank's stream counters and tags (``mode`` one of :data:`MODES`).

    ``total`` is ASTRA-sim's ``num_streams`` (every stream), ``world`` counts world streams,
    ``groups`` is each group's counter on this rank; ``shifts`` lists ``(world index, offset)``
    where the offset ``total - world`` at a world stream changed (what ASTRA-sim's ids would add);
    ``last`` describes the latest collective: ``(op, group key or None, first id, streams)``."""

    __slots__ = ("mode", "total", "world", "groups", "shifts", "last")

    def __init__(self, mode: str = ASTRA):
        self.mode = mode
        self.total = self.world = 0
        self.groups: dict[str, int] = {}
        self.shifts: list[tuple[int, int]] = []
        self.last: tuple | None = None

    def next(self, key: str | None) -> tuple[int, object]:
        """``(stream id, message tag)`` of a new stream on group ``key`` (None: the world)."""
        astra_id = self.total
        self.total += 1
        if key is None:
            offset = astra_id - self.world
            if (self.shifts[-1][1] if self.shifts else 0) != offset:
                self.shifts.append((self.world, offset))
            sid = astra_id if self.mode == ASTRA else self.world
            self.world += 1
            return sid, (sid if self.mode == ASTRA else ("", sid))
        sid = self.groups.get(key, 0)
        self.groups[key] = sid + 1
        return sid, (sid if self.mode == ASTRA else (key, sid))

    def collective(self, op: str, key: str | None, first: int, count: int) -> None:
        self.last = (op, key, first, count)


def chunk_count(size: int, op: str, splits: int, npus: int) -> int:
    """Streams ``Sys::generate_collective`` creates for a ``size``-byte collective (as
    :meth:`netsim.astra.sysl.Sys.chunking` cuts it)."""
    from netsim import astra_arith as arith

    chunk = arith.chunk_bytes(size, splits, npus, op)
    if chunk > size // splits:
        size = splits * chunk
    return -(-size // chunk) if chunk > 0 else 0


def _core(w: int, r0: int, a: int, r: int, b: int) -> str:
    return (f"ASTRA-sim would number world stream #{w} {a} on rank {r0} but {b} on rank {r} (its one stream "
            "counter per rank counts sub-group streams too)")


def static_divergence(counts_per_rank: dict[int, list[tuple[bool, int]]]) -> str | None:
    """Where ranks' chains make ASTRA-sim's world stream ids differ, say so (else None).

    ``counts_per_rank[r]``: rank r's collectives in chain order as ``(on the world, streams)``;
    the text is :func:`diverged`'s for the same run."""
    starts: dict[int, list[tuple[int, int]]] = {}
    for r, seq in counts_per_rank.items():
        total = world = 0
        mine = []
        for on_world, n in seq:
            if on_world:
                mine.append((world, total))
                world += n
            total += n
        starts[r] = mine
    ref_rank = min(starts)
    ref = starts[ref_rank]
    for r in sorted(starts):
        for (w, a), (_w, b) in zip(ref, starts[r]):
            if a != b:
                return _core(w, ref_rank, a, r, b)
    return None


def diverged(numberings: dict) -> str | None:
    """After a per-group run (``{rank: Numbering}``): where ASTRA-sim's world stream ids would have
    differed between ranks (else None)."""
    ref_rank = min(numberings)
    ref = numberings[ref_rank].shifts
    for r in sorted(numberings):
        mine = numberings[r].shifts
        if mine != ref:
            w = _first_shift(ref, mine)
            return _core(w, ref_rank, w + _offset(ref, w), r, w + _offset(mine, w))
    return None


def _first_shift(a: list, b: list) -> int:
    """The first world-stream index at which two shift lists give different offsets."""
    points = sorted({w for w, _ in a} | {w for w, _ in b})
    for w in points:
        if _offset(a, w) != _offset(b, w):
            return w
    return points[-1] if points else 0


def _offset(shifts: list, w: int) -> int:
    off = 0
    for at, o in shifts:
        if at > w:
            break
        off = o
    return off


def per_group_note(text: str) -> str:
    """The note of a per-group run ASTRA-sim would not finish."""
    return (f"--stream-matching per-group matched streams per communicator; {text}, so its tags would not match "
            "and it would not finish this workload (run without --stream-matching per-group to see where it stops)")


def explain(ctx, stuck: list) -> list[str]:
    """Deadlock report lines when collective stream ids stopped matching (``astra`` mode), else []."""
    if ctx.stream_matching != ASTRA:
        return []
    sends: dict[tuple, set] = {}
    recvs: dict[tuple, set] = {}
    for kind, tag, src, dst, size in ctx.fabric.unmatched():
        if isinstance(tag, tuple) and tag[0] == "c" and isinstance(tag[1], int):
            (sends if kind == "send" else recvs).setdefault((src, dst), set()).add(tag[1])
    pairs = sorted(k for k in sends.keys() & recvs.keys() if sends[k] != recvs[k])
    if not pairs:
        return []
    lines = ["  stream ids stopped matching: ASTRA-sim numbers every stream of a rank from one counter, which also "
             "counts the rank's streams on comm groups (Sys::generate_collective), and tags a collective's messages "
             "with the stream id alone"]
    for src, dst in pairs[:8]:
        lines.append(f"    rank {src} sends stream(s) {_ids(sends[(src, dst)])} to rank {dst}, which waits for "
                     f"stream(s) {_ids(recvs[(src, dst)])} from it")
    if len(pairs) > 8:
        lines.append(f"    ... and {len(pairs) - 8} more pair(s)")
    by: dict[str, list] = {}
    for wl in stuck:
        nb = getattr(getattr(wl, "sys", None), "numbering", None)
        if nb is not None and nb.last is not None:
            held = [int(wl.t.id[i]) for i in sorted(wl.ongoing) if int(wl.t.type[i]) == COLL]
            by.setdefault(_describe(nb, held), []).append((wl.rank, tuple(sorted(nb.groups.items()))))
    for text, members in sorted(by.items(), key=lambda kv: min(kv[1]))[:8]:
        sets = {g for _r, g in members}
        if text.startswith("world") and len(sets) == 1 and sets != {()}:  # which groups, when the ranks share them
            text += f" ({', '.join(f'{n} on group {g!r}' for g, n in sets.pop())})"
        lines.append(f"    rank(s) {_ranks([r for r, _g in members])}: {text}")
    lines.append("  (--stream-matching per-group matches streams per communicator instead; ASTRA-sim has no such "
                 "option)")
    return lines


def _describe(nb: Numbering, nodes: list[int]) -> str:
    op, key, first, count = nb.last
    ids = _ids(set(range(first, first + count)))
    node = f" (node {', '.join(map(str, nodes))})" if nodes else ""
    if key is not None:
        return f"{op}{node} on group {key!r} is stream(s) {ids}"
    before = sum(nb.groups.values())
    return f"world {op}{node} is stream(s) {ids}" + (f", after {before} stream(s) on comm groups" if before else "")


def _ids(values: set) -> str:
    return _ranks(sorted(values))


def _ranks(values: list) -> str:
    """``[0, 1, 2, 5]`` -> ``0-2, 5``."""
    out, values = [], sorted(values)
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        out.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ", ".join(out[:12]) + (f", ... ({len(values)} in all)" if len(out) > 12 else "")
