"""docs/validation.md: every prose number, and how the code bears it out.

The table's rows are tied to ``benchmarks/validate.py``'s ``RECORDS``: the setting's numbers and the
published figure in the default tier, the netsim and error columns by re-running the row (slow
tier, ``validate.run_record``).  The summary and every median or range the text quotes are
recomputed from the table as printed (so a row that moves moves them too).  Figures quoted from a
source (a thread, NCCL's code, a paper) are citations, said so with ``why``."""

from __future__ import annotations

import re
import statistics
from functools import lru_cache

from doc_claims import REPO, claims_for
from readme_numbers import Claim, claim_numbers, value

C = claims_for("validation.md")
#: A count is exact; a median of the table's printed errors (0.1 % steps) is within 0.05 of the median
#: the script computes from unrounded ones, which the page prints.
MEDIAN = ("abs", 0.0501)
DOC = REPO / "docs/validation.md"
ERROR = re.compile(r"^(?:\*\*)?([−+])(\d+\.\d) %(?:\*\*)?$")


@lru_cache(maxsize=None)
def records() -> dict:
    import validate

    return {r["id"]: r for r in validate.RECORDS}


@lru_cache(maxsize=None)
def table() -> dict:
    """id -> (line, signed error % as printed) of every row of the page's table."""
    out = {}
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rid = cells[0].removesuffix(" ᵃ") if len(cells) == 7 else ""
        if rid in records():
            m = ERROR.match(cells[4])
            assert m, line
            out[rid] = (line, (-1 if m[1] == "−" else 1) * float(m[2]))
    return out


def _setting_numbers(rid: str) -> list[float]:
    """The numbers of the record's description (the page's setting cell must state the same)."""
    return [value(n) for n in claim_numbers(Claim(records()[rid]["desc"].replace("x", "×"), doc="docs/x.md"))]


def _row_head(rid: str):
    def check() -> list[float]:
        return [*_setting_numbers(rid), records()[rid]["published"]]
    return check


def _row_full(rid: str):
    def check() -> list[float]:
        import validate

        r = validate.run_record(records()[rid])
        printed = table()[rid][1]
        assert abs(printed) < 0.05 or (printed > 0) == (r["error_pct"] > 0), (printed, r["error_pct"])
        return [*_setting_numbers(rid), r["published"], r["simulated"], abs(r["error_pct"])]
    return check


def _row_claims() -> list:
    out = []
    for rid, (line, _) in table().items():
        head = line[:line.index(" | ", line.index(" | ", line.index(" | ", 2) + 1) + 1) + 2]  # id | setting | published |
        out += [C(head, _row_head(rid)), C(line, _row_full(rid), slow=True)]
    assert len(table()) == len(records()), sorted(set(records()) - set(table()))
    return out


def _err(rid: str) -> float:
    return table()[rid][1]


def _med(ids) -> float:
    return statistics.median(abs(_err(r)) for r in ids)


def _ids(kind=None, held=None, pred=None) -> list[str]:
    return [r for r, rec in records().items() if kind in (None, rec["kind"]) and held in (None, not rec["anchor"])
            and (pred is None or pred(r))]


def _nvlink_p2p(rid: str) -> bool:
    return rid.startswith("sr-a100")


def _summary_row(kind, pred=None):
    def check() -> list[float]:
        every, held = _ids(kind, pred=pred), _ids(kind, True, pred)
        return [len(every), len(held), _med(every)] + ([_med(held)] if held else [])
    return check


def _kinds() -> list[str]:
    return list(dict.fromkeys(r["kind"] for r in records().values()))


def _summary_claims() -> list:
    text, out = DOC.read_text(), []
    names = {"all-reduce (NVLink node)": "all-reduce", "all-gather": "all-gather", "all-to-all": "all-to-all",
             "p2p (sendrecv, NVLink and network)": "p2p", "scale-out": "scale-out",
             "MoE dispatch/combine (DeepEP)": "moe", "end-to-end (Llama 3 405B step)": "end-to-end"}
    assert set(names.values()) == set(_kinds()), _kinds()
    for label, kind in names.items():
        line = next(x for x in text.splitlines() if x.startswith(f"| {label} |"))
        out.append(C(line, _summary_row(kind), tol=MEDIAN))
    out.append(C("| **all** | 58 (50) | **7.3 %** | **8.0 %** |", _summary_row(None), tol=MEDIAN))
    out.append(C("| — of which NVLink (A100) | 5 (4) | 17.6 % | 20.2 % |", _summary_row("p2p", _nvlink_p2p), tol=MEDIAN))
    return out


def _prefix(p: str):
    return lambda: (lambda ids: [len(ids), _med(ids)])(_ids(pred=lambda r: r.startswith(p)))


def _anchors() -> list[float]:
    rec = records()
    anchors = [r for r in rec if rec[r]["anchor"]]
    pub = {r: rec[r]["published"] for r in anchors}
    assert {pub["ar-h100-ring"], pub["ag-h100"], pub["a2a-h100"]} == {370.0}, pub
    assert pub["ar-h100-meas"] == 476
    return [len(anchors) - 1, 8, 370, pub["ar-h100-nvls"], 8, pub["ar-a100-ring"], pub["sr-ndr"]]


def _eighth() -> list[float]:
    from netsim.collectives import p2p

    rec = records()["sr-a100-128M"]
    assert rec["anchor"] and rec["setting"]["bytes"] == 128 << 20
    return [8, 128, p2p.P2P_PER_CHANNEL_NET_GBPS]


def _held() -> list[float]:
    anchors = [r for r in records() if records()[r]["anchor"]]
    added = [r for r in records() if r.startswith("ar-gb200")]
    return [len(anchors), len(records()) - len(anchors), len(added)]


def _p2p_bullet() -> list[float]:
    every = _ids("p2p")
    network = ["sr-gh200-4n", "sr-gh200-8n"]
    nvl = _ids("p2p", pred=_nvlink_p2p)
    big = ["sr-a100-256M", "sr-a100-512M", "sr-a100-1024M"]
    return [_med(every), len(every), max(abs(_err(r)) for r in network), _med(nvl), 8, 256,
            min(abs(_err(r)) for r in big), max(abs(_err(r)) for r in big)]


def _worst_scale_out() -> list[float]:
    held = _ids("scale-out", True)
    worst = max(held, key=lambda r: abs(_err(r)))
    assert worst == "ar-h200-1984", worst
    return [abs(_err(worst))]


def _e2e() -> list[float]:
    return [abs(_err(r)) for r in ("llama3-8k", "llama3-16k", "llama3-16k-cp16")]


def _sixteen_k_models() -> list[float]:
    import copy

    import validate

    rec = copy.deepcopy(records()["llama3-16k"])
    flow = validate.simulate(rec)
    rec["setting"]["model"] = "analytical"
    ana = validate.simulate(rec)
    assert abs(ana / flow - 1) < 0.01
    return [1, flow, ana, 100 * (ana / rec["published"] - 1)]


def _flops() -> list[float]:
    """Llama 3's FLOPs per token (validate._llm's count, 6N + 12·L·d·s) against the causal count."""
    import validate

    cp = records()["llama3-16k-cp16"]
    seq, n, layers, d = cp["setting"]["seq"], 405e9, 126, 16384
    full, causal = 6 * n + 12 * layers * d * seq, 6 * n + 6 * layers * d * seq
    assert abs(cp["published"] - cp["setting"]["published_s"]) < 1e-3
    assert "per_token = 6 * 405e9 + 12 * 126 * 16384 * seq" in (REPO / "benchmarks/validate.py").read_text()
    netsim = float(re.search(r"\| (\d+\.\d) \| −7\.6 %", table()["llama3-16k-cp16"][0])[1])
    shorter = cp["published"] * causal / full
    return [12, 6, 100 * 12 * layers * d * seq / full, 100 * (1 - causal / full), shorter, 100 * (netsim / shorter - 1)]


def _causal_share() -> list[float]:
    seq = records()["llama3-16k-cp16"]["setting"]["seq"]
    attn = 6 * 126 * 16384 * seq
    return [100 * attn / (6 * 405e9 + attn)]


def _rest_of_gb200() -> list[float]:
    return _outside("gb200-nvl72-20rack", (256 << 20, 1 << 30, 4 << 30, 8 << 30))[1:3]


@lru_cache(maxsize=None)
def _outside(name: str, sizes: tuple) -> list[float]:
    import netsim

    t = netsim.load_topology(REPO / f"topologies/{name}.yaml")
    return [r.busbw_GBps for r in netsim.bench(t, "all_reduce", list(sizes), gpus=t.n_gpus, model="analytical")]


def _racks_row() -> list[float]:
    t = _rack_topo()
    return [20, t.n_gpus, *_outside("gb200-nvl72-20rack", (256 << 20, 1 << 30, 4 << 30, 8 << 30))]


def _rack_topo():
    import netsim

    t = netsim.load_topology(REPO / "topologies/gb200-nvl72-20rack.yaml")
    assert t.n_gpus == 20 * 72
    return t


def _superpod_row() -> list[float]:
    import netsim

    t = netsim.load_topology(REPO / "topologies/h100-superpod-1su.yaml")
    return [t.n_gpus // 8, 8, *_outside("h100-superpod-1su", (256 << 20, 1 << 30, 8 << 30))]


def _pipeline_fill() -> list[float]:
    import math

    from netsim.collectives.nccl import nvls_heads, nvls_tree_chunk, nvls_tuning

    channels, chunk = nvls_tuning("blackwell", 20, 72, 48.0, False)
    heads = nvls_heads(72, 72)
    c = nvls_tree_chunk(1 << 30, channels, heads, chunk)
    loops = math.ceil((1 << 30) / (channels * heads * c))
    return [channels, heads, c >> 10, 48, 1, loops]


def _heads_bind() -> list[float]:
    from netsim.collectives.nccl import nvls_heads

    return [nvls_heads(72, 72), nvls_heads(72, 72), 48]


CLAIMS = [
    C("runs netsim on 58 published measurements", lambda: [len(records())]),
    C("7 rows restate the README's calibration anchors: 8×H100 ring all-reduce, all-gather and all-to-all at 370 "
      "GB/s, NVLS at 480/476, 8×A100 at 240, and one NDR NIC at 47", _anchors),
    C("An eighth, the 8×A100 sendrecv at 128 MiB, was in view when NCCL's 14 GB/s", _eighth),
    C("These 8 rows are flagged `anchor` and are not held-out evidence. The other 50 are held out (4 of them added "
      "in issue 33)", _held),
    *_summary_claims(),
    C("- DeepEP V2 (6 rows): 2.9 %.", _prefix("deepep-v2"), tol=MEDIAN),
    C("- V1 normal (8 rows): 10.5 %.", _prefix("deepep-v1"), tol=MEDIAN),
    C("- V1 low-latency as published now (12 rows", lambda: _prefix("deepep-ll-")()[:1]),
    C("since DeepEP PR #173): 10.4 %.", lambda: _prefix("deepep-ll-")()[1:], tol=MEDIAN),
    C("- V1 low-latency as first published (8 rows, pure RDMA: every copy through the NIC): 8.3 %.",
      _prefix("deepep-llrdma"), tol=MEDIAN),
    C("(median ≤ 10 % overall, no kind worse than 15 %)", why="the bar issue 14 set"),
    C("- **The overall median passes**: 7.3 % on all rows, 8.0 % on the held-out rows.",
      lambda: [_med(_ids()), _med(_ids(held=True))], tol=MEDIAN),
    C("10.3 % on 7 rows. The three new held-out rows are every further published sendrecv measurement with a "
      "setting netsim can run (see \"How the p2p rows were searched\"). Two of them are NIC-bound network rings "
      "that agree within 1.1 % (as does `sr-ndr`, the network sendrecv anchor kept under scale-out). On its NVLink "
      "rows alone the kind is at 17.6 % and still fails. The 8×A100 rows from 256 MiB miss by 18–24 %", _p2p_bullet,
      tol=[MEDIAN, "digits", "digits", MEDIAN, "digits", "digits", "digits", "digits"]),
    C("Its worst held-out row, `ar-h200-1984`, misses by 13.9 %.", _worst_scale_out),
    C("The rows give −1.0 % (8K GPUs), +22.4 % (16K, flow model) and −7.6 % (128K context)", _e2e),
    *_row_claims(),
    C("The choice of model moves the 16K row by under 1 %: 8.25 s on the flow model and 8.20 s (+21.7 %) on the "
      "analytical one", _sixteen_k_models, slow=True),
    C("with 6N + 12·L·d·s FLOPs per token (PaLM, arXiv:2204.02311, App. B), which counts the attention scores "
      "without the causal mask. netsim's generator counts the work a causal kernel does, 6N + 6·L·d·s. Meta does "
      "not state its FLOP accounting, and at 128K the full-attention term is 57 % of the total. If Meta counted "
      "causal attention, the CP16 row's published step time would be 28.6 % shorter (10.9 s), and netsim would be "
      "about 29 % slow there", _flops),
    C("Causal attention is 40 % of the FLOPs here", _causal_share),
    C("| 20 GB200 NVL72 racks (1,440 GPUs, `gb200-nvl72-20rack`), auto = NVLS tree | 367 | 483 | 803 | 874 |",
      _racks_row),
    C("| 32 × 8 H100 (`h100-superpod-1su`), auto = NVLS tree | 277 | 333 | | 343 |", _superpod_row),
    C("NCCL runs 24 channels × 32 heads × 128 KiB chunks per loop (nvls.cc:191-195: NIC >= 48 GB/s on Grace), so 1 "
      "GiB is 11 loops", _pipeline_fill),
    C("The 32 heads of a rack do not bind here: 32 NICs × 48 GB/s exceed the NVLS stage", _heads_bind),
    C("the issue's aside measurement is below netsim's 483 and 803 GB/s", _rest_of_gb200),
    C("H100 32 nodes at 256 MiB: the aside measurement is about half of netsim's 277 GB/s",
      lambda: [32, 256, _outside("h100-superpod-1su", (256 << 20, 1 << 30, 8 << 30))[0]],
      why="about half: the issue's measurement, quoted"),
    C("its times grow by ~4.9 ms per GiB with a ~5 ms intercept, which NCCL's model (a 200 µs latency)",
      why="the issue's measurement and NCCL's latency term, quoted"),
]


def _leonardo() -> list[float]:
    """validate.LEONARDO on dgx-a100.yaml: links and rates of a GPU pair, the GPU's links, a send's channels."""
    import numpy as np

    import validate
    from netsim.perftests.collective import BenchConfig, build_plan, validated
    from netsim.topology.overrides import load_topology_set

    s = records()["sr-a100-2gpu"]["setting"]
    assert s["sets"] == validate.LEONARDO
    t = load_topology_set(validate.TOPO / s["topology"], s["sets"])
    nv = t.link_kind == 0
    pair = np.flatnonzero(nv & (t.link_src == t.gpus[0]) & (t.link_dst == t.gpus[1]))[0]
    links = int(t.link_width[pair])
    line = float(re.search(r"node\.link_bw=(\d+)GB/s", " ".join(validate.LEONARDO))[1])
    achieved = t.link_bw[pair] / 1e9
    per_gpu = int(t.link_width[np.flatnonzero(nv & (t.link_src == t.gpus[0]))].sum())
    channels = build_plan(t, validated(BenchConfig("sendrecv", gpus=2), t), float(s["bytes"])).channels
    assert (per_gpu, channels) == _LEONARDO_SEND
    return [t.n_gpus, links * line / 25, links, line, links * line, achieved / links * 25 / line, 25, achieved]


#: GPU0's NVLinks and a send's channels on validate.LEONARDO (the page's "6 per GPU", "16 channels").
_LEONARDO_SEND = (6, 16)


def _ndr() -> list[float]:
    import numpy as np

    from netsim.topology.model import link_tier

    t = _topo("h100-superpod-1su")
    nic = float(t.link_bw[np.asarray(link_tier(t)) == "nic"].max() / 1e9)
    return [nic, t.facts.nic_port_Bps / 1e9]


def _topo(name: str):
    import netsim

    return netsim.load_topology(REPO / f"topologies/{name}.yaml")


def _b200_links() -> list[int]:
    import numpy as np

    t = _topo("gb200-nvl72")
    return [int(t.link_width[np.flatnonzero((t.link_kind == 0) & (t.link_src == t.gpus[0]))].sum())]


def _roce_pair() -> list[float]:
    import netsim

    r = netsim.bench(_topo("h100-superpod-1su"), "sendrecv", [1 << 30], gpus=2, placement="strided:8")[0]
    return [r.busbw_GBps, 100 * (r.busbw_GBps / 13.1 - 1)]


def _gb200_rows() -> list[float]:
    ids = ["ar-gb200-nvl4x3-ring", "ar-gb200-nvl4x3-tree", "ar-gb200-nvl8x3-ring", "ar-gb200-nvl8x3-tree"]
    sizes = {records()[r]["setting"]["bytes"] for r in ids}
    assert sizes == {16 << 30}, sizes
    return [3, 16, *[abs(_err(r)) for r in ids]]


def _gb200_cut() -> list[int]:
    ids = ["ar-gb200-nvl4x3-ring", "ar-gb200-nvl8x3-ring"]
    sets = [records()[r]["setting"]["sets"] for r in ids]
    assert all("nodes=3" in s and "node.nvls=false" in s for s in sets), sets
    gpus = [int(re.search(r"node\.gpus=(\d+)", " ".join(s))[1]) for s in sets]
    return [3, *gpus, *gpus]


QUOTE = "figures quoted from the cited source (the table's published column checks the ones a row uses)"
CLAIMS += [
    C("- **nccl-tests#212**: `sjeaugey`. 8×H100 reaches about 370 GB/s busbw on ring and non-allreduce ops,\n"
      "  and about 480 with NVLS.", why=QUOTE),
    C("- **nccl-tests#290**: a measured single-node all-reduce of 476 GB/s. AddyLaddy adds that NDR gives\n"
      "  46–48 GB/s per NIC.", why=QUOTE),
    C("An 8×A100 node should reach close to 240 GB/s.", why=QUOTE),
    C("a measured 8×H800 all-reduce busbw of 215 GB/s.", why=QUOTE),
    C('1,984 H200 ranks, all-reduce at 512 MiB, "typically around 350" GB/s.', why=QUOTE),
    C("For 6 nodes at 48.5 GB/s per NIC, that gives 58.2 GB/s", lambda: [6, 48.5, 48.5 * 6 / 5]),
    C("2 of a Leonardo node's 4 A100-SXM-64GB (`NV4`: 4 NVLink3 per pair), NCCL 2.22.3, `sendrecv_perf -t 2 -g 1` "
      "up to 2 GiB in one process (`P2P/direct pointer/read`). Peak about 72–73 GB/s; the row takes 72.5.", why=QUOTE),
    C("4 GH200 per node, one Slingshot 200G NIC per GPU (aws-ofi-nccl), `sendrecv_perf -g 1 -b 512M -e 512M`, 4 ranks "
      "per node. NCCL 2.19.4: 24.24 GB/s on 8 nodes; 24.2–24.3 on 2 and 4 nodes", why=QUOTE),
    C("(EP8–64 re-measured later;", why=QUOTE),
    C("Table 4**: 430, 400 and 380 TFLOPs/GPU", why=QUOTE),
    C("- **nccl#1272 at 8 nodes under NCCL 2.20.5: 18.3 GB/s.** 2.20 gave a network peer one channel there (v2.20.5 "
      "`paths.cc:714-724`). 2.30.7 gives two, as 2.19.4 did, so the row uses 2.19.4's 24.24. It is still evidence: "
      "one network channel carried 18.3 GB/s, above the 14 GB/s", why=QUOTE + "; 14: netsim's P2P_PER_CHANNEL_NET_GBPS"),
    C("- **nccl#2409 / #2408**: 2×8 H100, 8×400G RoCE, NCCL 2.31.2. `sendrecv_perf` with 2 ranks on 1 rail gives "
      "13.1 GB/s. On the same system every collective falls far short of what the reporter expects: all-reduce "
      "reaches 216–231 GB/s against the ~470 he expects, and alltoall reaches 25.", why=QUOTE),
    C("netsim gives 48.0 there (`--gpus 2 --placement strided:8`), +266 %", _roce_pair),
    C('2 H100 "connected via NVLink", sendrecv plateau about 180 GB/s.', why=QUOTE),
    C("an HPE Apollo 8×A100.", why="a machine's name"),
    C("(GTX 1080 over PCIe), **#214** (2 × A40", why="a GPU's name and a thread's setting, quoted"),
    C("(4 GPUs, 4 NVLink3 per pair): `dgx-a100.yaml` with the `nvlink-box4` preset (2 links per pair) at 50 GB/s per "
      "link. That is the same 100 GB/s per pair and, at NCCL's 20.0 GB/s per 25 of line rate, the same 80 GB/s",
      _leonardo),
    C("counts the topology's NVLinks: 6 per GPU here", lambda: [_leonardo() and _LEONARDO_SEND[0]]),
    C("so a send gets 16 channels", lambda: [_leonardo() and _LEONARDO_SEND[1]]),
    C("(NDR's 48 of 50 GB/s)", _ndr),
    C("which gives the same 18 × NVLink5", _b200_links),
    C("3 × GB200 NVL4 and NVL8 partitions on three racks, ring and tree, 16 GiB (NCCL #1801, `ar-gb200-nvl*`): −2.5 %, "
      "−3.0 %, −2.8 %, −7.3 %", _gb200_rows),
    C("cut to 3 nodes of 4 or 8 GPUs with NVLS off, as measured; the issue does not state the NIC, and CX-7 NDR (GB200 "
      "NVL72's) was assumed. They do not exercise NVLS heads either (NVLS off; 4 or 8 GPUs each with a NIC)",
      _gb200_cut),
]


def _footnote_models() -> list[float]:
    """The two models' 16K step times as footnote ³ prints them (its slow claim recomputes them)."""
    flow, ana = map(float, re.search(r"([\d.]+) s on the flow model and ([\d.]+) s", DOC.read_text()).groups())
    return [100 * abs(flow / ana - 1)]


def _channels(rid_or_topo, op: str, gpus: int, sizes: list[int], sets=(), placement="packed") -> list[int]:
    import validate
    from netsim.perftests.collective import BenchConfig, build_plan, validated
    from netsim.topology.overrides import load_topology_set

    t = load_topology_set(validate.TOPO / rid_or_topo, list(sets))
    cfg = validated(BenchConfig(op, gpus=gpus, placement=placement), t)
    return [build_plan(t, cfg, float(n)).channels for n in sizes]


def _netsim_cell(rid: str) -> float:
    return value(table()[rid][0].strip("|").split("|")[3].strip())


def _a2a_h100() -> list[float]:
    return [8, _netsim_cell("a2a-h100"), *_channels("dgx-h100.yaml", "alltoall", 8, [4 << 30])]


def _p2p_rate() -> list[float]:
    from netsim.collectives import p2p

    return [p2p.P2P_PER_CHANNEL_NET_GBPS]


def _send_channels() -> list[int]:
    sizes = [128 << 20, 256 << 20, 512 << 20]
    ch = _channels("dgx-a100.yaml", "sendrecv", 8, sizes + [1 << 30])
    assert ch[3] == ch[2], ch  # "and more"
    return [128, ch[0], 256, ch[1], 512, ch[2]]


def _a100_links() -> tuple[int, float]:
    import numpy as np

    t = _topo("dgx-a100")
    mine = np.flatnonzero((t.link_kind == 0) & (t.link_src == t.gpus[0]))
    width = int(t.link_width[mine].sum())
    return width, float(t.link_bw[mine].sum() / 1e9 / width)


def _p_result() -> list[float]:
    width, per_link = _a100_links()
    big = ["sr-a100-256M", "sr-a100-512M", "sr-a100-1024M"]
    assert _netsim_cell("sr-a100-512M") == _netsim_cell("sr-a100-1024M") <= width * per_link
    return [_netsim_cell("sr-a100-128M"), 128, records()["sr-a100-128M"]["published"], _netsim_cell("sr-a100-256M"),
            256, 512, width * per_link, width, per_link, 256,
            min(abs(_err(r)) for r in big), max(abs(_err(r)) for r in big)]


def _cap() -> list[float]:
    return [512, 100 * (224 / records()["sr-a100-512M"]["published"] - 1),
            100 * (224 / records()["sr-a100-1024M"]["published"] - 1), _netsim_cell("sr-a100-512M")]


def _p2() -> list[float]:
    lo = _leonardo()
    return [abs(_err("sr-a100-2gpu")), lo[5], lo[7], records()["sr-a100-2gpu"]["published"],
            100 * records()["sr-a100-2gpu"]["published"] / lo[7]]


def _within(ids, bound: float) -> list[float]:
    return [max(abs(_err(r)) for r in ids)]


def _nvls_cap() -> list[float]:
    from netsim.collectives.nccl import NVLS_EFFICIENCY, _log2i

    nodes = records()["ar-h200-1984"]["setting"]["gpus"] // 8
    import math
    return [records()["ar-h200-1984"]["setting"]["gpus"], NVLS_EFFICIENCY["hopper"], abs(_err("ar-h200-1984")),
            _log2i(nodes), nodes, math.log2(nodes)]


CLAIMS += [
    C("so NCCL 2.18 or 2.19)", why="NCCL versions"),
    C("What 2.18/2.19 did differently", why="NCCL versions"),
    C("gone in 2.20)", why="an NCCL version"),
    C("two A100s over 4 NVLinks", lambda: [_leonardo()[1]]),
    C("RDMA kernel overheads at 2 nodes.** At EP16", lambda: [records()["deepep-v1-dispatch-ep16"]["setting"]["gpus"]
                                                              // 8]),
    C("agree within 1 % (footnote ³)", _footnote_models, tol=[("at_most", None)]),
    C("| setting | 256 MiB | 1 GiB | 4 GiB | 8 GiB |", lambda: [256, 1, 4, 8],
      why="the sizes the rows below are computed at (_racks_row, _superpod_row use the same)"),
    C("At 8 GiB the NVLS stages bind", why="a size of the table above"),
    C("- GB200 racks at 1 and 4 GiB: the issue's aside measurement is below netsim's 483 and 803 GB/s",
      lambda: [1, 4, *_rest_of_gb200()]),
    C("640 threads, split between the send (10 warps) and the receive (9 warps) of each operation",
      why="NCCL's figures at the cited lines (enqueue.cc:1135, sendrecv.h:106-109)"),
    C("(8×H100 alltoall: 370 GB/s on 32 channels)", _a2a_h100),
    C("`NCCL_P2P_PER_CHANNEL_NET_BW` = 14 GB/s", _p2p_rate),
    C("applied with the 128 MiB row in view", lambda: [records()["sr-a100-128M"]["setting"]["bytes"] >> 20]),
    C("A send of 128 MiB takes 8 channels, 256 MiB 16, 512 MiB and more 32", _send_channels),
    C("The result is 111 GB/s at 128 MiB (published 111) and 222 at 256 MiB. From 512 MiB the links' 240 (12 × 20.0, "
      "`topo.h`) bind. The rows from 256 MiB still miss by 18–24 %", _p_result),
    C("`NCCL_P2P_NVL_CHUNKSIZE` is 512 KiB (v2.19.3 `init.cc:538`, v2.30.7 `init.cc:820`), with a 4 MiB Simple "
      "buffer in `NCCL_STEPS` = 8 slots. Sends above 16 KiB per channel use Simple. nccl-tests posts one send (to "
      "rank+1) and one receive (from rank−1) per rank in a group (`sendrecv.cu:52-60`). In v2.19.3 both sit in the "
      "same round, so they have the same base channel (`channel.h:15-37`). Each channel's block therefore runs one "
      "receive (8 warps) and one send (9 warps, 8 copying)", why="NCCL's figures at the cited lines"),
    C("they capped one send at 16 channels on one node", why="NCCL 2.19's rule at the cited lines"),
    C("netsim follows 2.30.7 (32 channels from 512 MiB)", lambda: [_send_channels()[5], 512]),
    C("With the cap, netsim gives 224 GB/s",
      by_test="tests/test_nccl_p2p.py::test_nccl_2_19_cap_would_give_224_on_8_a100"),
    C("from 512 MiB (+16 %, +15 %), not 239", _cap),
    C("under 15 % anyway", why="the bar of issue 14 (no kind worse than 15 %)"),
    C("128 MiB runs 16 MiB per channel on 8 channels in 1211 µs; 256 MiB runs 16 MiB per channel on 16 channels in "
      "1423 µs. So doubling the channels costs each channel 15 % of its rate (13.9 → 11.8 GB/s, then 12.0–12.2 at 512 "
      "MiB–1 GiB). HBM traffic at 195 GB/s is 4 × 195 = 780 GB/s per GPU, half or less of the A100's 1,555–2,039 "
      "GB/s.", why="the cited measurement (li-plus/playground) and the A100 datasheet, with arithmetic on them"),
    C("Ring all-reduce reaches about 230 GB/s on the same links (sjeaugey, nccl-tests#149) with 24 channels of 16 "
      "warps each. What remains is the rate of one channel's 8 receive warps: the loads they keep in flight (8 warps "
      "× 32 threads × 8 × 16 B = 32 KiB, `COLL_UNROLL` 8 on SM80, `device.h:351-354`) per loaded NVLink round trip. "
      "The fitted round trip would be 2.4 µs on 8 channels and 2.7 µs on 16",
      why="figures of the cited thread and NCCL's source, and the round trip they imply"),
    C("(`sr-a100-2gpu`, +10 %). netsim streams at NCCL's 20.0 GB/s per link (80 GB/s), and NCCL reaches about 72.5 "
      "(91 %)", _p2),
    C("NCCL gives this pair 8 channels per peer (2 × 4 links, `paths.cc:936`; the issue's log shows channels 0–7)",
      why="NCCL's rule at the cited line and the issue's log"),
    C("netsim gives 16, from the topology's 6 links per GPU", lambda: [_leonardo() and _LEONARDO_SEND[1],
                                                                        _LEONARDO_SEND[0]]),
    C("Either way the send's channels at 14 GB/s", _p2p_rate),
    C("DeepEP's NVLink kernels run on 20–64 SMs", why="DeepEP's figures (Buffer.num_sms, the V2 table's 64 SMs)"),
    C("both include the 1/8 a rank keeps", why="a fraction of the definition (one rank of eight keeps its share)"),
    C("At EP32 and EP64 the NIC is the bound and netsim is within 6 %",
      lambda: _within([r for r in records() if re.match(r"deepep-v1-.*-ep(32|64)$", r)], 6),
      tol=[("at_most", None)]),
    C("EP8 reaches 98 GB/s there", why="DeepEP's table, quoted"),
    C("EP8 dispatch at −46 %", lambda: [abs(_err("deepep-ll-dispatch-ep8"))]),
    C("the 98 GB/s rule that out", why="DeepEP's table, quoted"),
    C("They land within 7–13 %", lambda: (lambda e: [min(e), max(e)])(
        [abs(_err(r)) for r in records() if r.startswith("deepep-llrdma")])),
    C("The error shrinks from −26 % at EP16 to −4 % at EP128",
      lambda: [abs(_err("deepep-ll-dispatch-ep16")), abs(_err("deepep-ll-combine-ep128"))]),
    C("(255 peers into one NIC)", lambda: [records()["deepep-ll-dispatch-ep256"]["setting"]["gpus"] - 1]),
    C("the residual (+5 %, +8.5 %)", lambda: [_err("deepep-ll-dispatch-ep256"), _err("deepep-ll-combine-ep256")]),
    C("NVLS + tree at about 2,000 GPUs.** NCCL's `nvlstree` pipelines NVLink-SHARP reduction inside the node with "
      "the inter-node tree. netsim caps NVLS transfers at 0.85 of the GPU's NVLink rate (NCCL's `nvlsEfficiency`, "
      "`tuning.cc:139-144`; a rate cap, so the links table counts the real bytes) rather than modelling switch "
      "multicast and reduction throughput. The result is −14 % (with NCCL's integer `log2i` tree depth in the "
      "latency, issue 33: 7 levels for 248 nodes, not 7.95)", _nvls_cap,
      tol=[("rel", 0.01), "digits", "digits", "digits", "digits", "digits"]),
    C("The NVL8 × 3 tree row is 7 % low while the NVL4 and ring rows are within 3 %", lambda: [
        3, abs(_err("ar-gb200-nvl8x3-tree")),
        *_within(["ar-gb200-nvl4x3-ring", "ar-gb200-nvl4x3-tree", "ar-gb200-nvl8x3-ring"], 3)],
      tol=["digits", "digits", ("at_most", None)]),
    C("(chain of 8 inside the partition, NCCL's per-channel cap `perChMaxTreeBw` Blackwell 24 GB/s at >= 3 nodes, "
      "tuning.cc:205)", why="NCCL's figures at the cited line; the chain is the partition's 8 GPUs"),
    C("lines 181, 219 and 233", why="source lines"),
    C("256 MiB send between nodes runs on 4 p2p channels (`max(NICs, ceil(48 GB/s / 14 GB/s))`, `paths.cc:943-952`). "
      "Each channel is its own connection, so ECMP hashes 4 flows of 64 MiB, not one flow of 256 MiB",
      lambda: (lambda ch: [256, ch, ch, 256 // ch, 256])(_channels("h100-superpod-1su.yaml", "sendrecv", 2,
                                                                  [256 << 20], (), "strided:8")[0])),
    C("plain 1F1B over 16 stages with 32 or 16 microbatches", lambda: [
        records()["llama3-8k"]["setting"]["pp"], records()["llama3-8k"]["setting"]["microbatches"],
        records()["llama3-16k"]["setting"]["microbatches"]]),
    C("what is left of the +22 % is not network contention", lambda: [_err("llama3-16k")]),
    C("They simulate one data-parallel replica for all 64 or 128", lambda: [
        records()["llama3-8k"]["setting"]["dp"], records()["llama3-16k"]["setting"]["dp"]]),
    C("- **128K context (CP16):** −7.6 % on the analytical model", lambda: [abs(_err("llama3-16k-cp16"))]),
    C("The 16,384-rank Llama 3 405B DP128 run", lambda: [records()["llama3-16k"]["setting"]["gpus"]
                                                         if "gpus" in records()["llama3-16k"]["setting"] else 16384]),
]
