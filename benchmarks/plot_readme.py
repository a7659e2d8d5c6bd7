"""Draw docs/allreduce_h100.png: `netsim bench` all-reduce curves, as in the README.

Run: python benchmarks/plot_readme.py   (about 10 s on 2 cores)
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from netsim.perftests import bench, sweep_sizes  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SIZES = sweep_sizes(8, 8 << 30, 4)


def main() -> None:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    one = str(ROOT / "topologies/dgx-h100.yaml")
    for algo in ("auto", "ring", "tree", "nvls"):
        rows = bench(one, "all_reduce", SIZES, algo=algo)
        axes[0].plot([r.size_bytes for r in rows], [r.busbw_GBps for r in rows], marker=".", label=algo)
    axes[0].set_title("8x H100 (one DGX), all_reduce")
    su = str(ROOT / "topologies/h100-superpod-1su.yaml")
    for gpus in (16, 64, 256):
        rows = bench(su, "all_reduce", SIZES, gpus=gpus)
        axes[1].plot([r.size_bytes for r in rows], [r.busbw_GBps for r in rows], marker=".",
                     label=f"{gpus} GPUs (auto)")
    axes[1].set_title("DGX H100 SuperPOD SU, NDR rail-optimized")
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("size (bytes, nccl-tests S)")
        ax.grid(alpha=.3)
        ax.legend()
    axes[0].set_ylabel("busbw (GB/s), flow model")
    fig.tight_layout()
    out = ROOT / "docs" / "allreduce_h100.png"
    fd, tmp = tempfile.mkstemp(suffix=".png", dir=out.parent)
    os.close(fd)
    fig.savefig(tmp, dpi=110)
    os.replace(tmp, out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
