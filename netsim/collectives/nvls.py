"""In-switch reduction on an NVSwitch domain (NVLink SHARP, NCCL's NVLS).

Written with UP (GPU -> switch) and DOWN (switch -> GPU) transfers; the peer
named in a transfer is only a routing hint (GPU ``(i+1) mod n`` of the same
domain).  What the switch does, per pipeline piece of ``S/chunks`` bytes made
of ``n`` shards (GPU *j* owns shard *j*):

* **multimem.ld_reduce** (reduce-scatter half): the switch reads every GPU's
  copy of every shard (each GPU's up-link carries the whole piece) and
  returns the reduced shard *j* to GPU *j* (down: piece/n).
* **multimem.st** (all-gather half): GPU *j* writes its shard up (piece/n)
  and the switch multicasts it, so every down-link carries the whole piece.

Per GPU in total: all-reduce up ``S(n+1)/n`` and down ``S(n+1)/n``;
reduce-scatter up ``S``, down ``S/n``; all-gather up ``S/n``, down ``S``.

Pipeline: the all-reduce's four stages (ld up, ld down, st up, st down) of
piece *p* run in steps ``p, p+1, p+2, p+3``, so a step carries up-traffic of
two pieces and down-traffic of two others; the two stages of RS / AG run in
steps ``p, p+1``.  Stages in the same direction of the same step are merged
into one transfer per GPU (one flow per link).  Default chunks: pieces of at
least 512 KiB, at most 64 (:func:`~netsim.collectives.compose.pipeline_chunks`).

Closed form (link latency λ on GPU<->switch, per-GPU bandwidth B, c chunks):
``t = Σ_s (λ + max(up_s, down_s)/B)`` over the ``c + stages - 1`` steps, where
``up_s``/``down_s`` are the per-GPU bytes of step *s*; for the all-reduce with
c >= 3 that is ``(c+3)·λ + (S(c+3)/c + S(c-1)/(c·n))/B``, → ``S(n+1)/(n·B)``.

The executor ties an UP transfer to its sender and a DOWN transfer to its
receiver only.  The switch waits for every GPU's contribution, so in a workload
every member starts the collective when the last one has issued it
(:attr:`Schedule.in_switch`, ``netsim.workload.collectives.Instances.join``);
in ``netsim bench`` all GPUs start together anyway.

>>> s = nvls_all_reduce(4, 4096, chunks=1)
>>> s.bytes_sent().tolist(), s.bytes_received().tolist()
([5120.0, 5120.0, 5120.0, 5120.0], [5120.0, 5120.0, 5120.0, 5120.0])
"""

from __future__ import annotations

import numpy as np

from netsim.collectives.compose import COPY, REDUCE, Flow, check_int, pipeline_chunks, traced
from netsim.collectives.schedule import DOWN, UP, Phase, Schedule, Step
from netsim.errors import InputError

# stage: (step offset, hop, carries "all" shards of the piece or the GPU's "own", kind)
_STAGES = {
    "all_reduce": ((0, UP, "all", REDUCE), (1, DOWN, "own", COPY), (2, UP, "own", COPY), (3, DOWN, "all", COPY)),
    "reduce_scatter": ((0, UP, "all", REDUCE), (1, DOWN, "own", COPY)),
    "all_gather": ((0, UP, "own", COPY), (1, DOWN, "all", COPY)),
}


def _nvls(op: str, algorithm: str, n: int, nbytes: float, chunks: int | None, owners: int | None = None) -> Schedule:
    """The NVLS collective; ``owners`` (default ``n``): GPUs ``0 .. owners-1`` own the shards
    (the reduce-scatter's outputs, the all-gather's inputs), one each, ``piece/owners`` bytes."""
    n = check_int(n, "n")
    S = float(nbytes)
    if n < 2:
        return Schedule(op, algorithm, n, S, ())
    h = n if owners is None else check_int(owners, "owners")
    if h > n:
        raise InputError(f"{h} shard owners among {n} GPUs", source="argument", field="owners")
    c = pipeline_chunks(S) if chunks is None else check_int(chunks, "chunks")
    stages = _STAGES[op]
    piece = S / c
    last = max(s[0] for s in stages)
    bounds = np.unique([b for s in stages for b in (s[0], s[0] + c)])
    gpu = np.arange(n, dtype=np.int64)
    peer = (gpu + 1) % n
    phases, fns = [], []
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        live = [s for s in stages if s[0] <= lo < s[0] + c]
        src, dst, nb, hop = [], [], [], []
        per_dir = {}
        for d in (UP, DOWN):
            mine = [s for s in live if s[1] == d]
            if mine:
                # a direction that carries only owners' shards has transfers on the owners alone
                who = gpu if any(s[2] == "all" for s in mine) else gpu[:h]
                per_dir[d] = (sum(a.size for a in src), mine)
                src.append(who if d == UP else peer[who])
                dst.append(peer[who] if d == UP else who)
                nb.append(sum(np.full(who.size, piece) if s[2] == "all" else np.where(who < h, piece / h, 0.0)
                              for s in mine))
                hop.append(np.full(who.size, d, dtype=np.int64))
        st = Step(np.concatenate(src), np.concatenate(dst), np.concatenate(nb),
                  reduce=any(s[3] == REDUCE for s in live), hop=np.concatenate(hop))
        phases.append(Phase(st, hi - lo))

        def fl(rep, lo=lo, per_dir=per_dir):
            tids, units, kinds = [], [], []
            for base, mine in per_dir.values():
                for off, _, which, kind in mine:
                    p = lo + rep - off
                    if which == "own":  # owner j: unit (shard j, piece p)
                        tid, unit = base + gpu[:h], gpu[:h] * c + p
                    else:  # every shard of piece p
                        tid = base + np.repeat(gpu, h)
                        unit = np.tile(gpu[:h] * c + p, n)
                    tids.append(tid)
                    units.append(unit)
                    kinds.append(np.full(tid.size, kind))
            return np.concatenate(tids), np.concatenate(units), np.concatenate(kinds)
        fns.append(fl)
    assert sum(p.repeat for p in phases) == c + last
    sched = Schedule(op, algorithm, n, S, tuple(phases))
    return traced(sched, lambda: Flow(h * c, tuple(fns)))


def nvls_all_reduce(n: int, nbytes: float, *, chunks: int | None = None) -> Schedule:
    """NVLS all-reduce of an ``nbytes`` buffer per GPU on one NVSwitch domain of ``n`` GPUs."""
    return _nvls("all_reduce", "nvls", n, nbytes, chunks)


def nvls_reduce_scatter(n: int, nbytes: float, *, chunks: int | None = None,
                        owners: int | None = None) -> Schedule:
    """NVLS reduce-scatter (ld_reduce only); ``nbytes`` is the total input, GPU j gets shard j
    (of ``owners`` shards, default ``n``: NVLS-tree's heads, :func:`netsim.collectives.hierarchical.nvls_tree_all_reduce`)."""
    return _nvls("reduce_scatter", "nvls", n, nbytes, chunks, owners)


def nvls_all_gather(n: int, nbytes: float, *, chunks: int | None = None, owners: int | None = None) -> Schedule:
    """NVLS all-gather (multicast store only); ``nbytes`` is the total output, held by GPUs
    ``0 .. owners-1`` (default ``n``) in equal shards."""
    return _nvls("all_gather", "nvls", n, nbytes, chunks, owners)
