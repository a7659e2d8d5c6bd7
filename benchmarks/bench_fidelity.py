"""netsim beside published measurements of all-to-all, p2p and MoE dispatch/combine (issue 14).

Every published number below was collected by hand from its source (named per row); nothing in
netsim is fitted to them.  The hardware differs where the row says so; netsim runs the closest
shipped topology, or the same one with the measured machine's NVLink count.

Sources
-------
* DEEPEP_V1: deepseek-ai/DeepEP README at commit a8299ca (2025-06-11), "Performance": H800
  (~160 GB/s NVLink: 8 NVLink4 links, DeepSeek-V3 report §3.2.2), one CX7 400 Gb/s IB NIC per GPU.
  Normal kernels (``tests/test_intranode.py`` / ``test_internode.py`` at that commit: 4096 tokens,
  hidden 7168, top-8 of 256 experts, top-4 node groups, FP8 dispatch, BF16 combine): bottleneck
  bandwidth, NVLink for EP8 and RDMA otherwise.  Low-latency kernels ("pure RDMA"; 128 tokens,
  hidden 7168, top-8, ``tests/test_low_latency.py``: 288 experts): latency.
* DEEPEP_V2: deepseek-ai/DeepEP README (V2, SM90 / CX7 rows): normal kernels at 8K tokens, the
  same bandwidth metric (``benchmarks/bench_moe.py`` runs them).
* A100_SENDRECV: li-plus/playground ``cuda/nccl.md``: nccl-tests ``sendrecv_perf -b 128M -e 1G
  -f 2 -g 8`` on 8 x A100 SXM (NVLink3, NVSwitch), busbw GB/s.
* NDR: one NDR 400G NIC reaches 46-49 GB/s in nccl-tests (NVIDIA/nccl-tests#290, #267,
  AddyLaddy): the 2-node sendrecv row is compared with 47.5.

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

ROOT = Path(__file__).resolve().parents[1]
DEEPEP_V1 = "DeepEP README a8299ca"
#: (op, EP) -> normal-kernel bottleneck GB/s (NVLink for EP8, RDMA otherwise)
NORMAL = {("moe_dispatch", 8): 153.0, ("moe_combine", 8): 158.0, ("moe_dispatch", 16): 43.0,
          ("moe_combine", 16): 43.0, ("moe_dispatch", 32): 58.0, ("moe_combine", 32): 57.0,
          ("moe_dispatch", 64): 51.0, ("moe_combine", 64): 50.0}
#: (op, EP) -> low-latency kernel latency, us
LOW_LATENCY = {("moe_dispatch", 16): 118.0, ("moe_combine", 16): 195.0, ("moe_dispatch", 32): 155.0,
               ("moe_combine", 32): 273.0, ("moe_dispatch", 64): 173.0, ("moe_combine", 64): 314.0,
               ("moe_dispatch", 128): 192.0, ("moe_combine", 128): 369.0}
#: nccl-tests sendrecv on 8 x A100 (li-plus/playground cuda/nccl.md), size -> busbw GB/s
A100_SENDRECV = {128 << 20: 110.81, 256 << 20: 188.60, 512 << 20: 192.75, 1 << 30: 195.10}


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
        sim, pub = (s["nvl_GBps"] if ep == 8 else s["rdma_GBps"]), NORMAL[(op, ep)]
        metric = "GB/s NVLink" if ep == 8 else "GB/s RDMA"
    else:
        experts = 288 if 288 % ep == 0 else 256
        cfg = MoEConfig(op, tokens=128, algo="direct", mode="low_latency", experts=experts, max_nodes=0,
                        gpus=ep, model="flow")
        s = run_moe(topo, validated(cfg, topo)).summary
        sim, pub, metric = s["time_us"], LOW_LATENCY[(op, ep)], "us"
    return {"case": f"DeepEP {kind} {op} EP{ep}", "source": DEEPEP_V1, "metric": metric, "netsim": sim,
            "published": pub, "ratio": sim / pub, "cpu_s": time.process_time() - t0}


def _sendrecv(size: int) -> dict:
    import time

    from netsim.perftests import BenchConfig, run_one
    from netsim.topology.spec import load_topology
    t0 = time.process_time()
    row, _ = run_one(load_topology(ROOT / "topologies" / "dgx-a100.yaml"), BenchConfig("sendrecv", gpus=8), size)
    pub = A100_SENDRECV[size]
    return {"case": f"sendrecv 8xA100 {size >> 20} MiB", "source": "li-plus/playground cuda/nccl.md",
            "metric": "busbw GB/s", "netsim": row.busbw_GBps, "published": pub, "ratio": row.busbw_GBps / pub,
            "cpu_s": time.process_time() - t0}


def _ndr() -> dict:
    import time

    from netsim.perftests import BenchConfig, run_one
    from netsim.topology.spec import load_topology
    t0 = time.process_time()
    row, _ = run_one(load_topology(ROOT / "topologies" / "h100-superpod-1su.yaml"), BenchConfig("sendrecv", gpus=16),
                     1 << 30)
    return {"case": "sendrecv 2x8 H100 NDR 1 GiB", "source": "nccl-tests#290, #267", "metric": "busbw GB/s",
            "netsim": row.busbw_GBps, "published": 47.5, "ratio": row.busbw_GBps / 47.5,
            "cpu_s": time.process_time() - t0}


def cases(full: bool) -> list:
    out = [partial(_moe, "normal", op, ep) for ep in (8, 16, 32, 64) for op in ("moe_dispatch", "moe_combine")]
    eps = (16, 32, 64, 128) if full else (16, 32, 64)
    out += [partial(_moe, "low-latency", op, ep) for ep in eps for op in ("moe_dispatch", "moe_combine")]
    out += [partial(_sendrecv, s) for s in A100_SENDRECV] + [_ndr]
    return out


def main() -> None:
    rows = [run_case(c) for c in cases("--full" in sys.argv)]
    print_table(rows, [("case", "case", "s"), ("metric", "metric", "s"), ("netsim", "netsim", ".1f"),
                       ("published", "published", ".1f"), ("ratio", "netsim/pub", ".2f"), ("source", "source", "s"),
                       ("cpu_s", "CPU s", ".2f"), ("wall_s", "wall s", ".2f")])


if __name__ == "__main__":
    main()
