"""docs/validation.md, "The ramp and the long ring: what NCCL's chunking gives (issue 33)": NCCL's loops, chunks and
steps at the F and S rows, recomputed from netsim's NCCL rules (v2.30.7-1) and the older versions' chunk rule as the
page states it, and netsim's own runs of the rows' settings (analytical model, fractions of a second)."""

from __future__ import annotations

from functools import lru_cache
from unittest import mock

from doc_claims.validation import C

RING_ID, GB300_ID = "mn-ar-h100-roce-128n-1G", "mn-ar-gb300-oci-2r-64M"
#: v2.27.3-1 .. v2.29.2-1 enqueue.cc (v2.28.7-1:2061-2064): the NVLS tree's chunk is nvlsChunkSize (128 KiB) with
#: the 64 KiB maximum only from 4 nodes; ncclNvlsTreeSm100Tuning (v2.30.7-1 nvls.cc:164-198) does not exist there.
OLD_TREE_CHUNK = 128 << 10


def _rec(rid: str) -> dict:
    import validate

    return next(r for r in validate.RECORDS if r["id"] == rid)


def _topo_info(rid: str):
    import numpy as np

    import validate
    from netsim.collectives import nccl
    from netsim.topology.overrides import load_topology_set

    s = _rec(rid)["setting"]
    t = load_topology_set(validate.TOPO / s["topology"], s["sets"])
    return t, nccl.CommInfo.from_topology(t, np.arange(s["gpus"])), s


def _run(rid: str, nbytes: int, tree_chunk: int | None = None):
    """netsim's row (analytical, as the record runs) at ``nbytes``, with the NVLS-tree chunk ``tree_chunk``."""
    from dataclasses import replace

    from netsim.collectives import nccl
    from netsim.perftests import BenchConfig, run_one

    t, _info, s = _topo_info(rid)
    cfg = BenchConfig(s["op"], algo=s["algo"], gpus=s["gpus"], model=s["model"], protocol=s.get("protocol"),
                      channels=s.get("channels"))
    if tree_chunk is None:
        return run_one(t, cfg, nbytes)[0]
    real = nccl.CommInfo.from_topology.__func__

    def older(cls, topo, ranks, channels=None):
        info = real(cls, topo, ranks, channels)
        return replace(info, nvls_tree_chunk=tree_chunk) if info.nnodes > 1 else info
    with mock.patch.object(nccl.CommInfo, "from_topology", classmethod(older)):
        return run_one(t, cfg, nbytes)[0]


def _measured_us(rid: str) -> float:
    """nccl-tests' time of the published busbw: S x 2(n-1)/n / busbw."""
    r = _rec(rid)
    n, size = r["setting"]["gpus"], r["setting"]["bytes"]
    return size * 2 * (n - 1) / n / (r["published"] * 1e3)


def _sizes(*labels: str) -> list[float]:
    """MiB of the 2-rack GB300 rows of these sizes."""
    return [_rec(f"mn-ar-gb300-oci-2r-{x}")["setting"]["bytes"] >> 20 for x in labels]


def _loops(nbytes: float, chunk: int) -> int:
    """NCCL's loops of the 2-rack GB300 NVLS tree with tree chunk ``chunk`` (no cap on the pieces)."""
    from dataclasses import replace

    from netsim.collectives import nccl

    info = _topo_info(GB300_ID)[1]
    return nccl.nvls_tree_pieces(nbytes, replace(info, nvls_tree_chunk=chunk), limit=1 << 20)


def _halved_from() -> float:
    """The smallest of the rows' sizes (GiB) from which the older chunk halves the loops."""
    info = _topo_info(GB300_ID)[1]
    for label in ("64M", "256M", "1G", "4G", "16G"):
        b = float(_rec(f"mn-ar-gb300-oci-2r-{label}")["setting"]["bytes"])
        if 2 * _loops(b, OLD_TREE_CHUNK) == _loops(b, info.nvls_tree_chunk):
            return b / (1 << 30)
    raise AssertionError("no size")


def _x_loops() -> list[float]:
    """"F" narrows at 1 GiB (fewer loops), "X" at 16 GiB keeps netsim's 64 pieces with either chunk."""
    from dataclasses import replace

    from netsim.collectives import nccl

    info = _topo_info(GB300_ID)[1]
    big = float(16 << 30)
    chunks = (OLD_TREE_CHUNK, info.nvls_tree_chunk)
    pieces = {nccl.nvls_tree_pieces(big, replace(info, nvls_tree_chunk=c)) for c in chunks}
    assert len(pieces) == 1, pieces
    return [_halved_from(), big / (1 << 30), pieces.pop()]


@lru_cache(maxsize=None)
def _one_loop() -> list[float]:
    from netsim.collectives import nccl

    _t, info, s = _topo_info(GB300_ID)
    heads = info.nvls_heads
    chunk = nccl.nvls_tree_chunk(float(s["bytes"]), info.nvls_channels, heads, info.nvls_tree_chunk)
    loops = [nccl.nvls_tree_pieces(float(m << 20), info) for m in (64, 256)]
    assert loops == [1, 4], loops
    return [info.nvls_channels, heads, chunk >> 10, 64, 256, _run(GB300_ID, s["bytes"]).time_us, _measured_us(GB300_ID)]


def _old_rule() -> list[float]:
    """The tree's chunk maximum where no SM100 rule sets it, which is every version before 2.30 (enqueue.cc
    v2.28.7-1:2063, v2.30.7-1 nvls.cc:228-229 keep the same fallback): 64 KiB from how many nodes on."""
    from netsim.collectives import nccl

    small = [k for k in range(2, 9) if nccl.nvls_tuning("hopper", k, 8, 50.0)[1] == 64 << 10]
    assert nccl.nvls_tuning("hopper", 2, 8, 50.0)[1] == OLD_TREE_CHUNK
    return [nccl.nvls_tuning("hopper", small[0], 8, 50.0)[1] >> 10, small[0]]


@lru_cache(maxsize=None)
def _versions() -> list[float]:
    import math

    from netsim.collectives import nccl

    _t, info, _s = _topo_info(GB300_ID)
    ops = info.nvls_channels * info.nvls_heads
    old = [math.ceil((1 << 30) / (ops * nccl.nvls_tree_chunk(float(1 << 30), info.nvls_channels, info.nvls_heads, c)))
           for c in (OLD_TREE_CHUNK, info.nvls_tree_chunk)]
    assert old == [8, 16], old
    pub = {g: _rec(f"mn-ar-gb300-oci-2r-{g}G")["published"] for g in (1, 4)}
    then = [_run(GB300_ID, g << 30, OLD_TREE_CHUNK).busbw_GBps for g in (1, 4)]
    now = [_run(GB300_ID, g << 30).busbw_GBps for g in (1, 4)]
    return [OLD_TREE_CHUNK >> 10, 64, 4, 1, *then, 1, 4, *now, pub[1], pub[4], 16, 64]


@lru_cache(maxsize=None)
def _ring() -> list[float]:
    _t, info, s = _topo_info(RING_ID)
    ch, n = s["channels"], s["gpus"]
    step = 120 * 640 * 8 * 8 // 8  # DEFAULT_LL128_BUFFSIZE / NCCL_STEPS (init.cc:812, device.h:26, :114-115)
    chunk = step // 16 * 15  # enqueue.cc:2227: 15 data words of 16 per 128-byte line (device.h:111-112)
    assert ch * n * chunk > s["bytes"]  # one loop
    per_step = s["bytes"] / (ch * n)
    per_nic = ch // info.local_size  # one 400G NIC per GPU on h100-superpod-1024: 4 of the 32 channels each
    net_hops = 2 * info.nnodes  # the last step's chain goes round the ring twice, crossing every node boundary
    extra_ms = net_hops * per_nic * per_step / 50e9 * 1e3  # a whole step at a 400G NIC's line rate, per network hop
    sim_ms, meas_ms = _run(RING_ID, s["bytes"]).time_us / 1e3, _measured_us(RING_ID) / 1e3
    return [ch, n, chunk, 1, per_step / 1024, 2 * (n - 1), per_nic, per_step / 1024, 50, extra_ms, net_hops,
            meas_ms - sim_ms, sim_ms, meas_ms]


@lru_cache(maxsize=None)
def _tree_as_pieces() -> list[float]:
    """The 8-node H100 row at 16 MiB with NCCL's tree/LL128 chunks as the tree's pipeline pieces (every hop a whole
    step), against netsim's 64 pieces and the measurement."""
    from netsim.collectives import plan

    rid = "mn-ar-h100-ib-8n-16M"
    pieces = _tree_ll128()[6]
    size = _rec(rid)["setting"]["bytes"]
    with mock.patch.object(plan, "_pieces", lambda nbytes, nc, proto: pieces):
        as_steps = _run(rid, size)
    assert as_steps.algorithm == "tree/LL128", as_steps.algorithm
    return [pieces, as_steps.busbw_GBps, _run(rid, size).busbw_GBps, _rec(rid)["published"]]


@lru_cache(maxsize=None)
def _tree_ll128() -> list[float]:
    nnodes, ppn, nch = 8, 8, 16  # the 8-node H100 row: NCCL's ring/tree channels there (nccl.ring_channels)
    _t, info, _s = _topo_info("mn-ar-h100-ib-8n-16M")
    assert (info.nnodes, info.ppn, info.channels) == (nnodes, ppn, nch)
    nbytes = 16 << 20
    nsteps = 1 + (nnodes.bit_length() - 1) + 0.1 * ppn  # enqueue.cc:2288-2290
    chunk = 614400 // 16 * 15
    while nbytes // (nch * chunk) < nsteps * 64 / ppn and chunk > 131072:
        chunk //= 2
    while nbytes // (nch * chunk) < nsteps * 16 / ppn and chunk > 32768:
        chunk //= 2
    pieces = -(-nbytes // (nch * chunk))
    return [chunk, 1, 8, 0.1, 8, nsteps, pieces, 64]


CLAIMS = [
    C("**One loop at 64 MiB (\"F\").** On 2 GB300 racks NCCL's NVLS tree runs 32 channels × 32 heads × 64 KiB per "
      "loop", lambda: [_sizes("64M")[0], _topo_info(GB300_ID)[1].nnodes, *_one_loop()[:3]]),
    C("so 64 MiB is a single loop, and 256 MiB four", lambda: _sizes("64M", "256M")),
    C("Its 64 MiB run takes 370 µs; the measurement, 666 µs.", lambda: [64, *_one_loop()[5:]]),
    C("There the tree's chunk on 2 nodes is the full 128 KiB (64 KiB only from 4 nodes)",
      lambda: [_topo_info(GB300_ID)[1].nnodes, _versions()[0], *_old_rule()]),
    C("which halves the loops from 1 GiB. With that chunk netsim gives", lambda: [_halved_from()]),
    C("640 GB/s at 1 GiB and 914 at 4 GiB on 2 GB300 racks instead of 794 and 981 (measured 566.95 and 659.43)",
      lambda: [_versions()[4], 1, _versions()[5], 4, _topo_info(GB300_ID)[1].nnodes, *_versions()[8:10],
                     *_versions()[10:12]]),
    C("it would narrow \"F\" at 1 GiB but leave \"X\" (16 GiB, 64 loops either way)", _x_loops),
    C("At 1 GiB a ring loop of 32 channels × 1,024 ranks × 576,000 B", lambda: [1, *_ring()[:3]]),
    C("one loop, 32 KiB per channel per step, 2,046 steps", lambda: [_ring()[4], _ring()[5]]),
    C("would add at most 4 channels × 32 KiB at 50 GB/s per hop, 0.7 ms over 256 network hops",
      lambda: [*_ring()[6:11]], tol=["digits", "digits", "digits", ("abs", 0.05), "digits"]),
    C("not the 8.7 ms between netsim's 10.6 ms and the measured 19.4", lambda: _ring()[11:14]),
    C("NCCL's tree/LL128 chunk there is 72,000 B (1 + log2i(8) + 0.1 × 8 = 4.8 steps), 15 per channel",
      lambda: _tree_ll128()[:7]),
    C("netsim pipelines LL128 in 64 pieces", lambda: [_tree_ll128()[7]]),
    C("with 15 pieces netsim gives 158 GB/s instead of 163 (measured 87.36)", _tree_as_pieces),
    C("so the gap at 64–256 MiB is not the\n  pipeline's fill", lambda: _sizes("64M", "256M")),
    C("**The 1,024-rank ring (\"S\").**", lambda: [_rec(RING_ID)["setting"]["gpus"]]),
    C("**16 MiB on 8 H100 nodes.**", lambda: [_rec("mn-ar-h100-ib-8n-16M")["setting"]["bytes"] >> 20,
                                             _topo_info("mn-ar-h100-ib-8n-16M")[1].nnodes]),
]
