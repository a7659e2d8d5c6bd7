"""Topology build and routing at scale (issue: foundation-topologies).

Targets: build h100-fat-tree-16k + route one full ring step (every GPU to its
neighbour) <= 5 s and <= 1 GiB; build fat-tree-64k <= 20 s.

Run: python benchmarks/bench_topology.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import print_table, run_case  # noqa: E402

ROOT = Path(__file__).resolve().parents[1] / "topologies"


def build_64k() -> dict:
    from netsim.topology.spec import load_topology
    t = load_topology(ROOT / "fat-tree-64k.yaml")
    return {"case": "build fat-tree-64k", "gpus": t.n_gpus, "links": t.n_links, "topo_MB": t.nbytes() / 2**20}


def ring_16k() -> dict:
    import numpy as np
    from netsim.topology.spec import load_topology
    t0 = time.perf_counter()
    t = load_topology(ROOT / "h100-fat-tree-16k.yaml")
    build = time.perf_counter() - t0
    n = t.n_gpus
    src = np.arange(n)
    t1 = time.perf_counter()
    indptr, links = t.routes(src, (src + 1) % n)
    route = time.perf_counter() - t1
    return {"case": "16k build + ring step", "gpus": n, "links": t.n_links, "topo_MB": t.nbytes() / 2**20,
            "build_s": build, "route_s": route, "path_links": int(links.size)}


def alltoall_1k_routes() -> dict:
    import numpy as np
    from netsim.topology.spec import load_topology
    t = load_topology(ROOT / "h100-fat-tree-16k.yaml")
    n = 1024
    s, d = np.repeat(np.arange(n), n), np.tile(np.arange(n), n)
    t1 = time.perf_counter()
    indptr, links = t.routes(s, d)
    return {"case": "routes 1k x 1k pairs", "gpus": n, "links": t.n_links,
            "route_s": time.perf_counter() - t1, "path_links": int(links.size)}


if __name__ == "__main__":
    rows = [run_case(build_64k, trace=True), run_case(ring_16k, trace=True), run_case(alltoall_1k_routes)]
    print_table(rows, [("case", "case", ""), ("gpus", "GPUs", ","), ("links", "links", ","),
                       ("wall_s", "wall s", ".3f"), ("build_s", "build s", ".3f"), ("route_s", "route s", ".3f"),
                       ("topo_MB", "topo MB", ".1f"), ("peak_alloc_MB", "peak alloc MB", ".1f"),
                       ("peak_rss_MB", "peak RSS MB", ".1f")])
