"""netsim beside published measurements of all-to-all, p2p and MoE dispatch/combine (issue 14).

Every published number was collected by hand from its source (the ``source`` column names its table
in ``benchmarks/data/published.yaml``, which names the source); nothing in netsim is fitted to them.
The hardware differs where the row says so; netsim runs the closest shipped topology, or the same one
with the measured machine's NVLink count.

Sources: the tables of ``benchmarks/data/published.yaml`` (each with its source): DeepEP V1's normal
and low-latency kernels (``deepep_v1_normal``, ``deepep_v1_low_latency``), measured on H800 (~160 GB/s
NVLink: 8 NVLink4 links, DeepSeek-V3 report §3.2.2), one CX7 400 Gb/s IB NIC per GPU, with the kernels'
test settings (``tests/test_intranode.py`` / ``test_internode.py``: 4096 tokens, hidden 7168, top-8 of
256 experts, top-4 node groups, FP8 dispatch, BF16 combine; ``tests/test_low_latency.py``: 128 tokens,
288 experts); nccl-tests sendrecv on 8 x A100 (``li_plus_a100_sendrecv``); one NDR 400G NIC
(``nccl_tests_290``).  DeepEP V2's rows run in ``benchmarks/bench_moe.py``.

Run: python benchmarks/bench_fidelity.py [--full]   (--full adds the EP128 low-latency rows,
which take about a minute of CPU each on the flow model).  Each case runs in a fresh process;
CPU seconds are the process's user+system time.
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import print_table, run_case  # noqa: E402
from published import pair, rows  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def h800_cluster(nodes: int):
    """The DGX H100 SuperPOD SU with H800's 8 NVLinks per GPU (DeepSeek-V3 report §3.2.2)."""
    import yaml

    from netsim.topology.spec import build_topology, parse_spec
    doc = yaml.safe_load((ROOT / "topologies" / "h100-superpod-1su.yaml").read_text())
    doc["node"] = {"kind": "nvswitch", "gpus": 8, "gpu": "H100", "links_per_gpu": 8, "link_bw": "25GB/s",
                   "latency": "150ns", "nvls": True}
    doc["nodes"] = nodes
    doc["name"] = "h800-cluster"
    return build_topology(parse_spec(doc, "h800-cluster"), "h800-cluster")


def _moe(kind: str, op: str, ep: int) -> dict:
    import time

    from netsim.perftests.moe import MoEConfig, run_moe, validated
    t0 = time.process_time()
    topo = h800_cluster(max(2, ep // 8))
    if kind == "normal":
        algo = "direct" if ep == 8 else "node_limited"
        cfg = MoEConfig(op, tokens=4096, algo=algo, gpus=ep, model="flow" if ep == 8 else "analytical")
        s = run_moe(topo, validated(cfg, topo)).summary
        sim, pub = (s["nvl_GBps"] if ep == 8 else s["rdma_GBps"]), pair("deepep_v1_normal", ep, op)
        metric, table = ("GB/s NVLink" if ep == 8 else "GB/s RDMA"), "deepep_v1_normal"
    else:
        experts = 288 if 288 % ep == 0 else 256
        cfg = MoEConfig(op, tokens=128, algo="direct", mode="low_latency", experts=experts, max_nodes=0,
                        gpus=ep, model="flow")
        s = run_moe(topo, validated(cfg, topo)).summary
        sim, pub, metric, table = s["time_us"], pair("deepep_v1_low_latency", ep, op), "us", "deepep_v1_low_latency"
    return {"case": f"DeepEP {kind} {op} EP{ep}", "source": table, "metric": metric, "netsim": sim,
            "published": pub, "ratio": sim / pub, "cpu_s": time.process_time() - t0}


def _sendrecv(size: int) -> dict:
    import time

    from netsim.perftests import BenchConfig, run_one
    from netsim.topology.spec import load_topology
    t0 = time.process_time()
    row, _ = run_one(load_topology(ROOT / "topologies" / "dgx-a100.yaml"), BenchConfig("sendrecv", gpus=8), size)
    pub = rows("li_plus_a100_sendrecv")[size >> 20]
    return {"case": f"sendrecv 8xA100 {size >> 20} MiB", "source": "li_plus_a100_sendrecv",
            "metric": "busbw GB/s", "netsim": row.busbw_GBps, "published": pub, "ratio": row.busbw_GBps / pub,
            "cpu_s": time.process_time() - t0}


def _ndr() -> dict:
    import time

    from netsim.perftests import BenchConfig, run_one
    from netsim.topology.spec import load_topology
    t0 = time.process_time()
    row, _ = run_one(load_topology(ROOT / "topologies" / "h100-superpod-1su.yaml"), BenchConfig("sendrecv", gpus=16),
                     1 << 30)
    pub = rows("nccl_tests_290")["ndr_sendrecv"]
    return {"case": "sendrecv 2x8 H100 NDR 1 GiB", "source": "nccl_tests_290", "metric": "busbw GB/s",
            "netsim": row.busbw_GBps, "published": pub, "ratio": row.busbw_GBps / pub,
            "cpu_s": time.process_time() - t0}


def cases(full: bool) -> list:
    out = [partial(_moe, "normal", op, ep) for ep in (8, 16, 32, 64) for op in ("moe_dispatch", "moe_combine")]
    eps = (16, 32, 64, 128) if full else (16, 32, 64)
    out += [partial(_moe, "low-latency", op, ep) for ep in eps for op in ("moe_dispatch", "moe_combine")]
    out += [partial(_sendrecv, mib << 20) for mib in rows("li_plus_a100_sendrecv")] + [_ndr]
    return out


def main() -> None:
    rows = [run_case(c) for c in cases("--full" in sys.argv)]
    print_table(rows, [("case", "case", "s"), ("metric", "metric", "s"), ("netsim", "netsim", ".1f"),
                       ("published", "published", ".1f"), ("ratio", "netsim/pub", ".2f"), ("source", "source", "s"),
                       ("cpu_s", "CPU s", ".2f"), ("wall_s", "wall s", ".2f")])


if __name__ == "__main__":
    main()
