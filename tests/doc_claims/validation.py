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
             "MoE dispatch/combine (DeepEP)": "moe", "end-to-end (training step)": "end-to-end",
             "multi-node all-reduce (issue 33)": "mn-all-reduce", "multi-node all-to-all (issue 33)": "mn-all-to-all"}
    assert set(names.values()) == set(_kinds()), _kinds()
    for label, kind in names.items():
        line = next(x for x in text.splitlines() if x.startswith(f"| {label} |"))
        out.append(C(line, _summary_row(kind), tol=MEDIAN))
    out.append(C("| **all** | 98 (90) | **10.3 %** | **11.9 %** |", _summary_row(None), tol=MEDIAN))
    out.append(C("| — of which NVLink (A100) | 5 (4) | 17.6 % | 20.2 % |", _summary_row("p2p", _nvlink_p2p), tol=MEDIAN))
    return out


def _issue33(prefix=("mn-", "e2e-dsv3")) -> list[str]:
    """The rows issue 33 item 1 added (benchmarks/validate_scale.py; item 4's Megatron-LM rows: :func:`_sc21`)."""
    return [r for r in records() if r.startswith(prefix)]


def _dsv3_gpus() -> list[int]:
    """The GPUs of the DeepSeek-V3 rows (two, of one size)."""
    sizes = {records()[r]["setting"]["pp"] * records()[r]["setting"]["dp"] for r in _issue33("e2e-dsv3")}
    assert len(_issue33("e2e-dsv3")) == 2 and len(sizes) == 1, sizes
    return [*sizes]


def _sc21() -> list[str]:
    """The Megatron-LM SC21 rows (issue 33 item 4, benchmarks/validate_scale.py ``sc21_records``)."""
    return [r for r in records() if r.startswith("e2e-sc21-")]


def _sc21_gpus() -> list[int]:
    gpus = [records()[r]["setting"]["tp"] * records()[r]["setting"]["pp"] * records()[r]["setting"]["dp"]
            for r in _sc21()]
    return [min(gpus), max(gpus)]


def _sc21_range() -> list[float]:
    """The SC21 rows' |error| range as the page's rounded integers, all of them short."""
    errs = [_err(r) for r in _sc21()]
    assert all(e < 0 for e in errs), errs
    return [round(min(map(abs, errs))), round(max(map(abs, errs)))]


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
    added = [r for r in records() if r.startswith(("ar-gb200", "mn-", "e2e-dsv3", "e2e-sc21"))]
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


def _superpod_cap() -> list[float]:
    import numpy as np

    import netsim
    from netsim.collectives import nccl

    t = netsim.load_topology(REPO / "topologies/h100-superpod-1su.yaml")
    info = nccl.CommInfo.from_topology(t, np.arange(t.n_gpus))
    bound = info.nvls_heads * nccl.PER_CH_NVLS_TREE["hopper"][2]
    assert _outside("h100-superpod-1su", (256 << 20, 1 << 30, 8 << 30))[2] <= bound  # it binds: the run stays under
    return [info.nvls_heads, nccl.PER_CH_NVLS_TREE["hopper"][2]]


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
    C("runs netsim on 98 published measurements", lambda: [len(records())]),
    C("7 rows restate the README's calibration anchors: 8×H100 ring all-reduce, all-gather and all-to-all at 370 "
      "GB/s, NVLS at 480/476, 8×A100 at 240, and one NDR NIC at 47", _anchors),
    C("An eighth, the 8×A100 sendrecv at 128 MiB, was in view when NCCL's 14 GB/s", _eighth),
    C("These 8 rows are flagged `anchor` and are not held-out evidence. The other 90 are held out (44 of them added "
      "in issue 33)", _held),
    *_summary_claims(),
    C("- DeepEP V2 (6 rows): 2.9 %.", _prefix("deepep-v2"), tol=MEDIAN),
    C("- V1 normal (8 rows): 10.5 %.", _prefix("deepep-v1"), tol=MEDIAN),
    C("- V1 low-latency as published now (12 rows", lambda: _prefix("deepep-ll-")()[:1]),
    C("since DeepEP PR #173): 10.4 %.", lambda: _prefix("deepep-ll-")()[1:], tol=MEDIAN),
    C("- V1 low-latency as first published (8 rows, pure RDMA: every copy through the NIC): 8.3 %.",
      _prefix("deepep-llrdma"), tol=MEDIAN),
    C("(median ≤ 10 % overall, no kind worse than 15 %)", why="the bar issue 14 set"),
    C("- **The overall median no longer passes**: 10.3 % on all rows, 11.9 % on the held-out "
      "rows. The 35 multi-node and 256-GPU rows of issue 33 miss by a median of 30.2 %",
      lambda: [_med(_ids()), _med(_ids(held=True)), len(_issue33()), 256, _med(_issue33())], tol=MEDIAN),
    C("and the 5 Megatron-LM steps of 2021 by 13.6 %", lambda: [len(_sc21()), _med(_sc21())], tol=MEDIAN),
    C("The five Megatron-LM steps of 2021 on 256 to 1,920 A100 run the\n  2021 kernel profile and are 12–18 % short",
      lambda: [*_sc21_gpus(), *_sc21_range()]),
    C("10.3 % on 7 rows. The three new held-out rows are every further published sendrecv measurement with a "
      "setting netsim can run (see \"How the p2p rows were searched\"). Two of them are NIC-bound network rings "
      "that agree within 1.1 % (as does `sr-ndr`, the network sendrecv anchor kept under scale-out). On its NVLink "
      "rows alone the kind is at 17.6 % and still fails. The 8×A100 rows from 256 MiB miss by 18–24 %", _p2p_bullet,
      tol=[MEDIAN, "digits", "digits", MEDIAN, "digits", "digits", "digits", "digits"]),
    C("Its worst held-out row, `ar-h200-1984`, misses by 15.0 %.", _worst_scale_out),
    C("Llama 3 rows give −1.0 % (8K GPUs), +22.4 % (16K, flow model) and −7.6 % (128K context)", _e2e),
    C("The two DeepSeek-V3 rows at 256 GPUs", _dsv3_gpus),
    *_row_claims(),
    C("The choice of model moves the 16K row by under 1 %: 8.25 s on the flow model and 8.20 s (+21.7 %) on the "
      "analytical one", _sixteen_k_models, slow=True),
    C("with 6N + 12·L·d·s FLOPs per token (PaLM, arXiv:2204.02311, App. B), which counts the attention scores "
      "without the causal mask. netsim's generator counts the work a causal kernel does, 6N + 6·L·d·s. Meta does "
      "not state its FLOP accounting, and at 128K the full-attention term is 57 % of the total. If Meta counted "
      "causal attention, the CP16 row's published step time would be 28.6 % shorter (10.9 s), and netsim would be "
      "about 29 % slow there", _flops),
    C("Causal attention is 40 % of the FLOPs here", _causal_share),
    C("| 20 GB200 NVL72 racks (1,440 GPUs, `gb200-nvl72-20rack`), auto = NVLS tree | 367 | 483 | 810 | 883 |",
      _racks_row),
    C("| 32 × 8 H100 (`h100-superpod-1su`), auto = NVLS tree | 274 | 324 | | 331 |", _superpod_row),
    C("On the H100 nodes NCCL's per-head cap binds (8 heads × 45.5 GB/s;", _superpod_cap),
    C("NCCL runs 24 channels × 32 heads × 128 KiB chunks per loop (nvls.cc:191-195: NIC >= 48 GB/s on Grace), so 1 "
      "GiB is 11 loops", _pipeline_fill),
    C("The 32 heads of a rack do not bind here: 32 NICs × 48 GB/s exceed the NVLS stage", _heads_bind),
    C("the issue's aside measurement is below netsim's 483 and 810 GB/s", _rest_of_gb200),
    C("H100 32 nodes at 256 MiB: the aside measurement is about half of netsim's 274 GB/s",
      lambda: [32, 256, _outside("h100-superpod-1su", (256 << 20, 1 << 30, 8 << 30))[0]],
      why="about half: the issue's measurement, quoted"),
    C("its times grow by ~4.9 ms per GiB with a ~5 ms intercept, which NCCL's model (a 200 µs latency)",
      why="the issue's measurement and NCCL's latency term, quoted"),
]
