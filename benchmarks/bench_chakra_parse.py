"""Benchmark the Chakra ET readers on a generated 1,000,000-node trace.

Writes a realistic generated trace with :func:`netsim.chakra.write_et`
(COMP nodes with roofline attributes, COMM_COLL all-reduces/all-gathers on a
few process groups, some pipeline SEND/RECV pairs; 3-5 attributes and 1-2
data deps per node), then times each reader in a fresh child process so that
its peak RSS is its own.

Usage::

    python benchmarks/bench_chakra_parse.py [--nodes 1000000]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

READERS = ("read_et_table", "iter_nodes", "read_et")


def generate(n: int, seed: int = 0) -> Iterator:
    """Yield ``n`` nodes shaped like a generated training-step trace."""
    from netsim.chakra import EtNode, NodeType

    rng = random.Random(seed)
    shapes = [(2 * 4096 * 4096 * 2048, 4096 * 4096 * 2), (2 * 4096 * 11008 * 2048, 4096 * 11008 * 2),
              (2 * 128 * 2048 * 2048, 2048 * 2048 * 4)]
    sizes = [1 << 20, 32 << 20, 64 << 20, 128 << 20]
    for i in range(n):
        deps = (i - 1,) if i else ()
        if i > 8 and rng.random() < 0.3:
            deps += (i - rng.randint(2, 8),)
        r = rng.random()
        if r < 0.70:
            ops, tsize = rng.choice(shapes)
            yield EtNode(i, f"gemm_{i}", NodeType.COMP_NODE, data_deps=deps, duration_micros=rng.randint(5, 900),
                         is_cpu_op=False, num_ops=ops, tensor_size=tsize)
        elif r < 0.92:
            yield EtNode(i, f"coll_{i}", NodeType.COMM_COLL_NODE, data_deps=deps, is_cpu_op=False,
                         comm_type=rng.choice((0, 0, 2, 7)), comm_size=rng.choice(sizes),
                         pg_name=rng.choice(("1", "2", "3")), involved_dim=(True, False))
        else:
            send = rng.random() < 0.5
            peer = rng.randrange(64)
            yield EtNode(i, f"{'send' if send else 'recv'}_{i}",
                         NodeType.COMM_SEND_NODE if send else NodeType.COMM_RECV_NODE, data_deps=deps,
                         is_cpu_op=False, comm_size=rng.choice(sizes[:2]), comm_tag=i % 1024,
                         **({"comm_dst": peer} if send else {"comm_src": peer}))


def measure(reader: str, path: str) -> dict:
    """Run one reader (in this process) and return its timings."""
    import netsim.chakra.files as chakra

    start = time.perf_counter()
    if reader == "read_et_table":
        count = len(chakra.read_et_table(path))
    elif reader == "iter_nodes":
        count = sum(1 for _ in chakra.iter_nodes(path))
    else:
        count = len(chakra.read_et(path).nodes)
    wall = time.perf_counter() - start
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return {"reader": reader, "nodes": count, "wall": wall, "rss_mb": rss_mb}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--measure", nargs=2, metavar=("READER", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(*args.measure)))
        return
    from netsim.chakra import write_et

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.0.et"
        start = time.perf_counter()
        write_et(path, generate(args.nodes))
        write_s = time.perf_counter() - start
        size_mb = path.stat().st_size / 1e6
        print(f"wrote {args.nodes:,} nodes ({size_mb:.1f} MB) with write_et in {write_s:.1f} s "
              f"({args.nodes / write_s:,.0f} nodes/s)\n")
        print(f"| {'reader':<14} | {'nodes':>9} | {'file MB':>7} | {'wall s':>6} | {'nodes/s':>9} | {'peak RSS MB':>11} |")
        print(f"|{'-' * 16}|{'-' * 11}|{'-' * 9}|{'-' * 8}|{'-' * 11}|{'-' * 13}|")
        for reader in READERS:
            out = subprocess.run([sys.executable, __file__, "--measure", reader, str(path)],
                                 check=True, capture_output=True, text=True).stdout
            r = json.loads(out)
            print(f"| {reader:<14} | {r['nodes']:>9,} | {size_mb:>7.1f} | {r['wall']:>6.2f} | "
                  f"{r['nodes'] / r['wall']:>9,.0f} | {r['rss_mb']:>11.0f} |")


if __name__ == "__main__":
    main()
