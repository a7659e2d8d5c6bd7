"""Write a generated LLM workload as Chakra files, fast: ``netsim workload llm --out DIR``.

How (``docs/workloads.md``, "Writing large workloads"):

* the ranks are split into batches of one pipeline stage each; a batch builds one
  :class:`~netsim.workload.generate.template.RankTemplate` (the generator runs once per
  batch), checks one more of its ranks against the generator, and stamps out every rank's
  bytes (node heads encoded once with numpy, per-rank attribute blocks, one join);
* batches run on a process pool (``jobs``, default: the cores this process may use);
* a rank whose bytes equal an earlier rank's (same heads, same attribute blocks) becomes a
  hard link to the lowest such rank's file (a copy where the file system has no links),
  so identical traces are stored once and readers parse them once;
* every file is written under a temporary name and renamed; ``comm_groups.json`` is
  written last, so a folder without it holds no complete workload;
* the bytes are those of :func:`netsim.chakra.write_et` on the generator's nodes
  (``tests/test_chakra_write_llm.py`` checks this on small configurations).

>>> parse_ranks("0-3, 8", 16)
[0, 1, 2, 3, 8]
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import json
import os
import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netsim.errors import InputError
from netsim.procpool import TrackedPool
from netsim.results.io import atomic_file, kind_of, publish

#: Ranks per batch (at most; a batch never spans two pipeline stages).  Small enough for a
#: smooth progress bar and load balance, large enough that the per-batch template is cheap.
BATCH = 512
#: Ranks per process at least: smaller workloads use fewer processes (one below 2 x this),
#: since starting a worker costs more than writing a few dozen ranks.
MIN_RANKS_PER_JOB = 64
#: Name of the per-rank files: ``<PREFIX>.<rank>.et`` (reference.md §3.1).
PREFIX = "llm"
_RANGE = re.compile(r"\s*([0-9]+)\s*(?:-\s*([0-9]+)\s*)?")  # ASCII digits


@dataclass
class WriteReport:
    """What :func:`write_llm_files` wrote."""

    prefix: Path
    ranks: int
    files: int  # distinct files (the other ranks are hard links to them)
    nodes: int
    bytes: int  # bytes of the distinct files
    wall_s: float
    jobs: int


def parse_ranks(text: str, world: int) -> list[int]:
    """Ranks of a ``--ranks`` spec (``0-63,128``: numbers and inclusive ranges), sorted, distinct.

    Raises InputError (``--ranks``) on bad syntax, an empty range or a rank outside ``0..world-1``.
    """
    items = str(text).split(",")
    spans = []
    for item in items:
        m = _RANGE.fullmatch(item)
        if m is None:
            raise InputError(f"expected ranks and ranges such as 0-63,128, got {str(text)[:80]!r}", source="--ranks")
        for digits in m.groups():
            if digits is not None and len(digits.lstrip("0")) > len(str(world)):  # int() of 5,000 digits fails
                raise InputError(f"rank {digits[:20]}{'...' if len(digits) > 20 else ''} outside 0..{world - 1} "
                                 f"(the job has {world} ranks)", source="--ranks")
        lo = int(m.group(1))
        hi = lo if m.group(2) is None else int(m.group(2))
        if hi < lo:
            raise InputError(f"range {lo}-{hi} is empty (expected LOW-HIGH with LOW <= HIGH)", source="--ranks")
        if hi >= world:
            raise InputError(f"rank {hi} outside 0..{world - 1} (the job has {world} ranks)", source="--ranks")
        spans.append((lo, hi))
    return sorted({r for lo, hi in spans for r in range(lo, hi + 1)})


def default_jobs() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def write_llm_files(out_dir: str | os.PathLike, spec: Any, *, ranks: list[int] | str | None = None,
                    jobs: int | None = None, progress: bool = False, **gen: Any) -> WriteReport:
    """Write ``out_dir/llm.<rank>.et`` for ``ranks`` (default: all) and ``out_dir/comm_groups.json``.

    ``spec`` and ``gen`` are :func:`~netsim.workload.generate.llm.generate_llm`'s (no ``ranks``);
    ``ranks`` is a list or a ``--ranks`` spec string; ``jobs`` processes (default
    :func:`default_jobs`); ``progress`` shows a bar on stderr.  Files of the workload this one
    replaces (other ``llm.<rank>.et``) are removed.  The caller decides about overwriting.
    """
    from netsim.progress import bar
    from netsim.workload.generate.plan import check_memory, plan_llm

    t0 = time.perf_counter()
    plan = plan_llm(spec, **gen)
    if ranks is None:
        selected = list(range(plan.world))
    elif isinstance(ranks, str):
        selected = parse_ranks(ranks, plan.world)
    else:
        selected = sorted(set(ranks))
        if selected and not 0 <= selected[0] <= selected[-1] < plan.world:
            raise InputError(f"ranks outside 0..{plan.world - 1}", source="--ranks")
    jobs = default_jobs() if jobs is None else jobs
    if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1:
        raise InputError(f"expected a positive number of processes, got {jobs!r}", source="--jobs")
    batches = _batches(plan, selected)
    jobs = max(1, min(jobs, len(batches), len(selected) // MIN_RANKS_PER_JOB))
    check_memory(plan, 2 * jobs, f"{jobs} writing process(es), two ranks each (a template and its check)")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    groups_file = out / "comm_groups.json"
    stale = _stale_files(out, set(selected))
    for p in [groups_file, *stale]:
        kind = kind_of(p)
        if kind not in (None, "a regular file"):
            raise InputError(f"is {kind}; netsim writes regular files only and does not replace it", source=str(p))
    groups_file.unlink(missing_ok=True)  # the folder holds no complete workload until the end
    results: list[tuple[list[tuple[int, str]], int, int]] = []
    with bar(len(selected), "write", "rank", progress) as pbar:
        for res in _run(batches, plan, out, jobs):
            results.append(res)
            pbar.update(len(res[0]))
    files, size = _share_across_batches(out, [pair for res, _, _ in results for pair in res])
    for p in stale:
        p.unlink(missing_ok=True)
    with atomic_file(groups_file, "w") as fh:
        fh.write(json.dumps(plan.groups, indent=1) + "\n")
    return WriteReport(out / PREFIX, len(selected), files, sum(r[1] for r in results), size,
                       time.perf_counter() - t0, jobs)


def _batches(plan, selected: list[int]) -> list[list[int]]:
    """Consecutive selected ranks, at most :data:`BATCH` per batch, one pipeline stage per batch."""
    out: list[list[int]] = []
    for r in selected:
        if out and len(out[-1]) < BATCH and plan.stage(out[-1][0]) == plan.stage(r):
            out[-1].append(r)
        else:
            out.append([r])
    return out


def _run(batches: list[list[int]], plan, out: Path, jobs: int):
    """Yield each batch's result as it finishes (in this process when ``jobs`` is 1)."""
    tasks = [(plan.for_ranks(b), b, str(out)) for b in batches]
    if jobs == 1:
        yield from map(write_batch, tasks)
        return
    pool = TrackedPool(jobs, initializer=_worker_init)
    try:
        futures = [pool.submit(write_batch, t) for t in tasks]
        for fut in cf.as_completed(futures):
            yield fut.result()
    except BaseException:
        pool.stop(grace_s=5.0)  # cancel queued batches and terminate the workers now
        _remove_temp_files(out)
        raise
    pool.shutdown(wait=True)


def _worker_init() -> None:
    """Workers leave Ctrl-C to the parent, which stops them."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def write_batch(task: tuple) -> tuple[list[tuple[int, str]], int, int]:
    """Write one batch (ranks of one stage): ([(rank, content key)], nodes, bytes written)."""
    from netsim.chakra.write import metadata_record
    from netsim.workload.generate.template import VERSION, RankTemplate

    plan, ranks, out = task
    tpl = RankTemplate.build(plan, ranks[0])
    if len(ranks) > 1:
        tpl.check(plan, ranks[-1])
    head = metadata_record(VERSION, plan.metadata or None)
    # A rank's bytes are a function of the heads, the attribute codes and its blocks: hash those.
    base = hashlib.blake2b(b"".join(tpl.head_pieces().pieces), digest_size=16)
    base.update(tpl.cols.attr.tobytes())
    memo: dict[Any, bytes] = {}
    first: dict[str, Path] = {}
    keys, size = [], 0
    for r in ranks:
        blocks = tpl.blocks(r, plan.member[r], memo)
        h = base.copy()
        h.update(b"%d," * len(blocks) % tuple(map(len, blocks)))
        h.update(b"".join(blocks))
        key = h.hexdigest()
        path = Path(out) / f"{PREFIX}.{r}.et"
        if key in first:
            share(first[key], path)
        else:
            data = tpl.join(blocks)
            _write(path, head + data)
            first[key] = path
            size += len(head) + len(data)
        keys.append((r, key))
        if len(memo) > 1 << 16:
            memo.clear()
    return keys, len(tpl.cols) * len(ranks), size


def _write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (a temporary file in the same folder, renamed)."""
    tmp = path.parent / f".{path.name}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as fh:  # open() gives the umask's mode already (publish would chmod)
            fh.write(data)
        kind = kind_of(path)
        if kind is not None and kind != "a regular file":
            raise InputError(f"is {kind}; netsim writes regular files only and does not replace it",
                             source=str(path))
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InputError(f"cannot write: {exc.strerror or exc}", source=str(path)) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def share(first: Path, path: Path) -> None:
    """``path`` becomes a hard link to ``first`` (a copy where links are not supported), atomically."""
    import shutil

    tmp = path.parent / f".{path.name}.{os.getpid()}.link.tmp"
    tmp.unlink(missing_ok=True)
    try:
        try:
            os.link(first, tmp)
        except OSError:
            shutil.copyfile(first, tmp)
        publish(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _share_across_batches(out: Path, keys: list[tuple[int, str]]) -> tuple[int, int]:
    """Link equal files of different batches to the lowest rank's; (distinct files, their bytes)."""
    owner: dict[str, Path] = {}
    for rank, key in sorted(keys):
        path = out / f"{PREFIX}.{rank}.et"
        first = owner.setdefault(key, path)
        if first is not path and not os.path.samefile(first, path):
            share(first, path)
    return len(owner), sum(p.stat().st_size for p in owner.values())


def _stale_files(out: Path, keep: set[int]) -> list[Path]:
    """``llm.<rank>.et`` files of a replaced workload (ranks not written now)."""
    pattern = re.compile(rf"{re.escape(PREFIX)}\.([0-9]+)\.et")
    return sorted(p for p in out.iterdir() if (m := pattern.fullmatch(p.name)) is not None and int(m.group(1)) not in keep)


def _remove_temp_files(out: Path) -> None:
    """Remove temporary files of interrupted writers."""
    for p in out.glob(f".{PREFIX}.*.tmp"):
        p.unlink(missing_ok=True)
