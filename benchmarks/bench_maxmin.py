"""Benchmark of :func:`netsim.network.maxmin.max_min_rates` on synthetic incidences.

Cases
-----
a. ring step: 16,384 flows, rank r -> r+1 on a 3-tier fat tree (rank r on
   leaf ``r mod n_leaves``, so flows cross to the next leaf: 6 links in a
   pod, 8 across pods), two private host hops each way, random ECMP; the
   capacity array covers 500k links (the whole topology), few are used.
b. all-to-all: 1,024 x 1,023 flows on a 3-tier fat tree of 2,816 links with
   4:1 leaf oversubscription (paths of 2, 4 or 6 links; mostly 6).
c. random: 100,000 flows of 8 distinct random links among 50,000 links with
   capacities drawn from {12.5, 25, 50} GB/s.

Run ``python benchmarks/bench_maxmin.py [--repeat N] [--quick]``.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np

from netsim.network.maxmin import link_loads, max_min_rates


@dataclass
class FatTree:
    """Link-id layout of a 3-tier fat tree (hosts, leaves, pod aggs, core planes)."""

    n_hosts: int
    hosts_per_leaf: int
    leaves_per_pod: int
    aggs_per_pod: int  # = uplinks per leaf
    cores_per_agg: int  # = uplinks per agg
    host_hops: int = 1  # private links host <-> leaf, each way

    def layout(self) -> dict[str, int]:
        """Offsets of every link block, and the total."""
        n_leaves = self.n_hosts // self.hosts_per_leaf
        n_pods = n_leaves // self.leaves_per_pod
        sizes = {
            "host_up": self.n_hosts * self.host_hops,
            "host_down": self.n_hosts * self.host_hops,
            "leaf_up": n_leaves * self.aggs_per_pod,
            "leaf_down": n_leaves * self.aggs_per_pod,
            "agg_up": n_pods * self.aggs_per_pod * self.cores_per_agg,
            "agg_down": n_pods * self.aggs_per_pod * self.cores_per_agg,
        }
        offsets, total = {}, 0
        for name, size in sizes.items():
            offsets[name] = total
            total += size
        offsets["total"] = total
        return offsets

    def route(self, src: np.ndarray, dst: np.ndarray, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """CSR paths for flows src -> dst with random (seeded) ECMP choices."""
        off, rng, h = self.layout(), np.random.default_rng(seed), self.host_hops
        ls, ld = src // self.hosts_per_leaf, dst // self.hosts_per_leaf
        ps, pd = ls // self.leaves_per_pod, ld // self.leaves_per_pod
        a = rng.integers(0, self.aggs_per_pod, src.size)
        c = rng.integers(0, self.cores_per_agg, src.size)
        cols = [off["host_up"] + src * h + k for k in range(h)]
        cols += [off["host_down"] + dst * h + k for k in range(h)]
        cross_leaf, cross_pod = ls != ld, ps != pd
        none = np.full(src.size, -1)
        cols.append(np.where(cross_leaf, off["leaf_up"] + ls * self.aggs_per_pod + a, none))
        cols.append(np.where(cross_leaf, off["leaf_down"] + ld * self.aggs_per_pod + a, none))
        core = a * self.cores_per_agg + c
        per_pod = self.aggs_per_pod * self.cores_per_agg
        cols.append(np.where(cross_pod, off["agg_up"] + ps * per_pod + core, none))
        cols.append(np.where(cross_pod, off["agg_down"] + pd * per_pod + core, none))
        return _dense_to_csr(np.stack(cols, axis=1))


def _dense_to_csr(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR from a (flows x width) table padded with -1."""
    keep = table >= 0
    indptr = np.zeros(table.shape[0] + 1, dtype=np.int64)
    np.cumsum(keep.sum(axis=1), out=indptr[1:])
    return indptr, table[keep].astype(np.int32)


def case_ring() -> tuple:
    """(a) one ring step over 16,384 ranks placed leaf-major."""
    tree = FatTree(16_384, 32, 16, 32, 16, host_hops=2)
    n_leaves = tree.n_hosts // tree.hosts_per_leaf
    rank = np.arange(tree.n_hosts)
    host = (rank % n_leaves) * tree.hosts_per_leaf + rank // n_leaves
    indptr, links = tree.route(host, np.roll(host, -1), seed=1)
    capacity = np.full(500_000, 50e9)
    off = tree.layout()
    capacity[off["host_up"] : off["host_up"] + tree.n_hosts * 2 : 2] = 64e9  # GPU -> NIC (PCIe)
    return indptr, links, capacity


def case_all_to_all() -> tuple:
    """(b) 1,024 x 1,023 all-to-all on an oversubscribed fat tree."""
    tree = FatTree(1_024, 16, 8, 4, 4)
    src, dst = np.divmod(np.arange(tree.n_hosts**2), tree.n_hosts)
    keep = src != dst
    indptr, links = tree.route(src[keep], dst[keep], seed=2)
    return indptr, links, np.full(tree.layout()["total"], 50e9)


def case_random(n_flows: int = 100_000, n_links: int = 50_000, width: int = 8) -> tuple:
    """(c) random flows of ``width`` distinct links."""
    rng = np.random.default_rng(3)
    picks = np.sort(rng.integers(0, n_links - width + 1, (n_flows, width)), axis=1)
    links = (picks + np.arange(width)).reshape(-1).astype(np.int32)  # strictly increasing per row
    indptr = np.arange(n_flows + 1, dtype=np.int64) * width
    capacity = rng.choice([12.5e9, 25e9, 50e9], n_links)
    return indptr, links, capacity


def run(name: str, make, repeat: int) -> dict:
    """Time ``repeat`` solves (after one warm-up) and check feasibility."""
    indptr, links, capacity = make()
    rates = max_min_rates(indptr, links, capacity)
    loads = link_loads(indptr, links, rates, capacity.size)
    assert np.all(loads <= capacity * (1 + 1e-9)), name
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        again = max_min_rates(indptr, links, capacity)
        times.append(time.perf_counter() - t0)
    assert again.tobytes() == rates.tobytes(), "not deterministic"
    per_link = np.bincount(links)
    per_link = per_link[per_link > 0]
    return {
        "case": name,
        "flows": indptr.size - 1,
        "nnz": links.size,
        "used links": per_link.size,
        "max flows/link": int(per_link.max()),
        "levels": np.unique(rates).size,
        "ms/solve": 1e3 * float(np.mean(times)),
        "min ms": 1e3 * float(np.min(times)),
    }


def main() -> None:
    """Print the benchmark table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed solves per case")
    parser.add_argument("--quick", action="store_true", help="skip the 1M-flow all-to-all")
    args = parser.parse_args()
    cases = [("a ring step", case_ring, args.repeat * 4), ("c random", case_random, args.repeat)]
    if not args.quick:
        cases.insert(1, ("b all-to-all", case_all_to_all, args.repeat))
    rows = [run(name, make, rep) for name, make, rep in cases]
    header = list(rows[0])
    cells = [[f"{v:.1f}" if isinstance(v, float) else str(v) for v in row.values()] for row in rows]
    widths = [max(len(c) for c in column) for column in zip(header, *cells)]
    for line in [header, *cells]:
        print("  ".join(c.rjust(w) for c, w in zip(line, widths)))


if __name__ == "__main__":
    main()
