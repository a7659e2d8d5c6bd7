"""``netsim astra compare``: run the real ASTRA-sim binary and netsim on the same inputs.

The binary (``--astra-bin`` or ``$ASTRA_SIM_BIN``) gets the ASTRA-sim flags exactly as
given; its stdout is parsed with :func:`~netsim.astra.output.parse_output`.  The
``comparison`` table has one row per rank: ``astra_ns``, ``netsim_ns``, ``ratio``
(netsim / ASTRA-sim) and the exposed-communication pair.  A binary whose name says
``Congestion_Aware`` is compared with netsim's congestion-aware model unless
``--model`` says otherwise.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from netsim.errors import InputError


def run_binary(binary: str, astra_argv: list[str], timeout: float = 3600.0) -> tuple[dict, dict]:
    """Run ASTRA-sim; returns (parsed per-rank numbers, {"wall_s"})."""
    from netsim.astra.output import parse_output

    path = Path(binary)
    if not path.is_file() or not os.access(path, os.X_OK):
        raise InputError("not an executable file", source=f"--astra-bin {binary}")
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([str(path), *astra_argv], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise InputError(f"did not finish within {timeout:g} s", source=f"--astra-bin {binary}") from None
    wall = time.perf_counter() - t0
    parsed = parse_output(proc.stdout)
    if proc.returncode != 0 or not parsed:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise InputError(f"exited with status {proc.returncode} and {len(parsed)} 'sys[N] finished' line(s); "
                         f"last output: {' | '.join(tail) or '(none)'}", source=f"--astra-bin {binary}")
    return parsed, {"wall_s": wall}


def comparison_table(parsed: dict, res):
    """One row per rank of ASTRA-sim's and netsim's finish (and exposed communication) times."""
    import pandas as pd

    rows = []
    for r in range(res.npus):
        a = parsed.get(r, {})
        astra, mine = a.get("finished"), float(res.finish[r])
        rows.append({"rank": r, "astra_ns": float(astra) if astra is not None else float("nan"), "netsim_ns": mine,
                     "ratio": mine / astra if astra else float("nan"),
                     "astra_exposed_ns": float(a["exposed"]) if "exposed" in a else float("nan"),
                     "netsim_exposed_ns": float(res.exposed[r])})
    return pd.DataFrame(rows)


def compare(args, opts: dict, astra_argv: list[str]) -> str:
    """The ``compare`` sub-action: run both, optionally write the dataset, return the summary text."""
    from netsim.astra.session import note, run_from_args, write_dataset

    if not args.astra_bin:
        raise InputError("no ASTRA-sim binary: pass --astra-bin PATH or set ASTRA_SIM_BIN (without one, "
                         "'netsim astra' with the same flags runs netsim alone)", source="netsim astra compare")
    if "Congestion_Aware" in Path(args.astra_bin).name and args.model is None:
        args.model = "congestion-aware"
        note("the binary is ASTRA-sim's congestion-aware build; comparing with --model congestion-aware")
    parsed, run = run_binary(args.astra_bin, astra_argv, args.timeout)
    res = run_from_args(args, opts)
    table = comparison_table(parsed, res)
    if args.out:
        write_dataset(args.out, res, opts, args, overwrite=args.overwrite, extra={"comparison": table})
    exact = int((table["astra_ns"] == table["netsim_ns"]).sum())
    diff = (table["netsim_ns"] - table["astra_ns"]).abs()
    lines = [f"ranks       {len(table)} compared ({len(parsed)} reported by ASTRA-sim), model {res.model}",
             f"exact       {exact} of {len(table)} ranks to the nanosecond",
             f"finish      ASTRA-sim max {table['astra_ns'].max():.0f} ns, netsim max {table['netsim_ns'].max():.0f} ns",
             f"difference  max |netsim - ASTRA-sim| {diff.max():.0f} ns; ratio {table['ratio'].min():.6f} .. "
             f"{table['ratio'].max():.6f}",
             f"wall time   ASTRA-sim {run['wall_s']:.3f} s, "
             f"netsim {res.stats['wall_s']:.3f} s ({res.engine} engine)"]
    if args.out:
        lines.append(f"dataset     {args.out} (tables comparison, ranks, ops, runs)")
    return "\n".join(lines)
