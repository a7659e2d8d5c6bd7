"""Regenerate the example trace sets and expert maps of ``workloads/`` (run from the repository root:
``python workloads/regenerate.py``).  Deterministic: the same netsim gives the same bytes.

Not shipped in the wheel (setup.py copies data files only).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

#: name -> `netsim workload llm` arguments (kept small: the sets together stay under 500 KB).
TRACES = {
    "llama3-8b-tp2pp2": "--llm llama3-8b --tp 2 --pp 2 --dp 1 --microbatches 2 --seq 2048",
    "mixtral-8x7b-pp2dp2ep2": "--llm mixtral-8x7b --tp 1 --pp 2 --dp 2 --ep 2 --microbatches 2 --seq 2048",
}

#: name -> (GPUs, tokens per GPU, top-k, experts, skew, seed): `netsim bench --expert-map` inputs.
EXPERT_MAPS = {
    "mixtral-ep8-t512-zipf1.2.npy": (8, 512, 2, 8, "zipf:1.2", 0),
    "deepseek-ep8-t64-uniform.csv": (8, 64, 8, 256, None, 0),
}


def traces() -> None:
    for name, args in TRACES.items():
        out = HERE / "traces" / name
        if out.exists():
            shutil.rmtree(out)
        subprocess.run([sys.executable, "-m", "netsim", "workload", "llm", *args.split(), "--out", str(out)],
                       check=True, stdout=subprocess.DEVNULL)


def expert_maps() -> None:
    from netsim.collectives.moe import layout

    for name, (n, tokens, top_k, experts, skew, seed) in EXPERT_MAPS.items():
        choices = layout(n, tokens, experts, top_k, popularity=skew, seed=seed).routing.choices
        path = HERE / "expert-maps" / name
        if path.suffix == ".npy":
            np.save(path, choices.astype(np.int16))
        else:
            header = f"{n} GPUs x {tokens} tokens rows, top-{top_k} of {experts} expert ids, {skew or 'uniform'}, seed {seed}"
            np.savetxt(path, choices, fmt="%d", delimiter=",", header=header)


if __name__ == "__main__":
    traces()
    expert_maps()
