"""Differential run of ``netsim astra`` against the real ASTRA-sim binaries on random configs.

Each config is drawn by ``fuzz_astra_engines.draw`` (seeded: ``--seed S`` gives configs ``S:0`` ..
``S:N-1``) and written as ASTRA-sim gets it: one ``.et`` per NPU, a network YAML, a system JSON,
a remote-memory JSON and, where the config has comm groups, a comm-group JSON.  Then, one process
after the other, ``python -m netsim astra ... --model M`` (the command line as a user types it,
interpreter start-up included) and the ASTRA-sim binary of that model get the same flags.  Each
side is timed from outside (``_harness.run_child``: CPU seconds = user + system of that process, its
own peak RSS).

A config *matches* when both print the same multiset of result lines (``sys[N] finished, T
cycles, exposed communication E cycles.`` and the per-type ``cycles`` lines: finish times to the
nanosecond), or when both end without finishing every rank and print the same finish lines (ASTRA-
sim stops with "unreleased nodes" and exit status 0 where its stream tags stop matching; netsim
reports the deadlock with its own exit status).  Anything else is a mismatch and is printed with
its config.

Prints one row per (config, model): NPUs, netsim CPU s, ASTRA-sim CPU s, their ratio, both peak
MB, the match; then a summary per model: configs, mismatches, how many took more CPU than
ASTRA-sim, the worst ratio, the totals.  ``--inproc`` also times ``run_astra`` inside this process
(no interpreter start-up, imports already warm) as a column of its own.

    python benchmarks/diff_astra_binary.py --astra-bin PATH --astra-aware-bin PATH
                                           [--configs 80] [--seed 0] [--models analytical congestion-aware]
                                           [--engine auto] [--inproc] [--keep DIR] [--only I ...]

The binaries: ``--astra-bin`` (``$ASTRA_SIM_BIN``, ASTRA-sim's ``AstraSim_Analytical_Congestion_Unaware``)
and ``--astra-aware-bin`` (``$ASTRA_SIM_AWARE_BIN``, ``AstraSim_Analytical_Congestion_Aware``); a model
whose binary is not given is left out with a message (none given: exit status 2).  Exit status 1 on
any mismatch.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _harness import print_table, run_child  # noqa: E402
from bench_astra_general import finish_lines  # noqa: E402
from fuzz_astra_engines import draw, write  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
MODELS = ("analytical", "congestion-aware")
_FINISHED = re.compile(r"sys\[(\d+)\] finished")
_PREFIX = re.compile(r"^(\[[^\]]*\] )+")  # spdlog's "[time] [logger] [level] "


def write_inputs(cfg: dict, root: Path) -> list[str]:
    """The config's files under ``root``; ASTRA-sim's flags (``--key=value``) naming them."""
    wl, _system, net, groups = write(cfg, root)
    (root / "s.json").write_text(json.dumps(cfg["system"], indent=2))
    (root / "m.json").write_text(json.dumps({"memory-type": "NO_MEMORY_EXPANSION"}))
    flags = [f"--workload-configuration={wl}", f"--system-configuration={root / 's.json'}",
             f"--network-configuration={net}", f"--remote-memory-configuration={root / 'm.json'}"]
    if groups:
        flags.append(f"--comm-group-configuration={groups}")
    return flags


def outcome(run: dict, npus: int) -> tuple[str, list[str]]:
    """How one side's run ended, and what to compare: ``finished`` (every rank's result lines, exit
    status 0), ``stopped`` (not every rank finished and ``Exiting`` is the last line, as ASTRA-sim ends a
    hang: exit status 0 from ASTRA-sim, 2 from netsim; the lines include the ``unreleased nodes``
    report), ``loops`` (killed at the timeout, or netsim's error saying ASTRA-sim loops or never
    finishes there), ``aborts`` (another non-zero status, or netsim's error saying ASTRA-sim throws,
    crashes or aborts there), ``refused`` (netsim's other input errors)."""
    out = [_PREFIX.sub("", ln) for ln in run["stdout"].splitlines()]
    lines = sorted(finish_lines("\n".join(out)))
    done = {int(m.group(1)) for ln in lines for m in [_FINISHED.match(ln)] if m}
    if run["status"] is None:
        return "loops", []
    if len(done) == npus and run["status"] == 0:
        return "finished", lines
    if run["status"] in (0, 2) and [ln for ln in out if ln.strip()][-1:] == ["Exiting"]:
        return "stopped", sorted(lines + [ln for ln in out if "unreleased" in ln])
    err = run["stderr"]
    if "netsim: error:" in err:
        if re.search(r"ASTRA-sim (loops forever|never finishes)", err):
            return "loops", []
        if re.search(r"ASTRA-sim[^;]*\b(throws|crashes|aborts|asserts)\b", err):
            return "aborts", []
        return "refused", []
    return "aborts", []


def one(cfg: dict, flags: list[str], model: str, binary: str, engine: str, inproc: bool, root: Path,
        timeout: float) -> dict:
    """Both sides on one config; the table row."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    mine = run_child([sys.executable, "-m", "netsim", "astra", *flags, "--model", model, "--engine", engine], env,
                     str(root), timeout)
    theirs = run_child([binary, *flags], dict(os.environ), str(root), timeout)
    n = cfg["n"]
    (m_end, m_lines), (a_end, a_lines) = outcome(mine, n), outcome(theirs, n)
    if m_end != a_end:
        match = f"netsim {m_end}, ASTRA-sim {a_end}"
    elif m_lines != a_lines:
        match = "lines differ"
    else:
        match = "yes" if m_end == "finished" else f"yes (both: {m_end})"
    row = {"model": model, "npus": n, "groups": "groups" in cfg, "end": a_end, "timed": a_end in ("finished", "stopped"), "cpu_s": mine["cpu_s"],
           "a_cpu": theirs["cpu_s"], "ratio": mine["cpu_s"] / max(theirs["cpu_s"], 1e-9), "MB": mine["peak_MB"],
           "a_MB": theirs["peak_MB"], "match": match, "_mine": mine, "_theirs": theirs}
    if inproc:
        row["in_cpu"], row["in_engine"] = _inproc(cfg, root / "inproc", model, engine)
    return row


def _inproc(cfg: dict, root: Path, model: str, engine: str) -> tuple[float, str]:
    """CPU seconds of ``run_astra`` in this process (imports warm) and the engine it chose."""
    from netsim.astra import run_astra
    from netsim.errors import DeadlockError, InputError

    wl, system, net, groups = write(cfg, root)
    t = time.process_time()
    try:
        name = run_astra(wl, system, net, comm_groups=groups, model=model, engine=engine).engine
    except DeadlockError:
        name = "deadlock"
    except InputError:
        name = "input error"
    return time.process_time() - t, name


def summary(rows: list[dict]) -> list[dict]:
    """Per model: configs, mismatches, how each ended; over the configs ASTRA-sim finished or stopped
    (the others ran until the timeout or aborted, so their times say nothing): how many took netsim
    more CPU, the worst ratio, the totals, the largest peak RSS of each side."""
    out = []
    for model in dict.fromkeys(r["model"] for r in rows):
        mine = [r for r in rows if r["model"] == model]
        timed_ = [r for r in mine if r["timed"]]
        ends = {}
        for r in mine:
            ends[r["end"]] = ends.get(r["end"], 0) + 1
        out.append({"model": model, "configs": len(mine), "mismatches": sum(not r["match"].startswith("yes") for r in mine),
                    "ends": ", ".join(f"{k} {v}" for k, v in sorted(ends.items())), "timed": len(timed_),
                    "slower": sum(r["cpu_s"] > r["a_cpu"] for r in timed_),
                    "worst": max((r["ratio"] for r in timed_), default=float("nan")),
                    "cpu": sum(r["cpu_s"] for r in timed_), "a_cpu": sum(r["a_cpu"] for r in timed_),
                    "MB": max((r["MB"] for r in timed_), default=float("nan")),
                    "a_MB": max((r["a_MB"] for r in timed_), default=float("nan"))})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", type=int, default=80)
    ap.add_argument("--seed", default="0", help="configs SEED:0 .. SEED:N-1 of fuzz_astra_engines.draw")
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--engine", default="auto", choices=["auto", "full", "batched", "compiled", "symmetric"])
    ap.add_argument("--only", type=int, nargs="+", help="run only these config numbers (e.g. a mismatch again)")
    ap.add_argument("--inproc", action="store_true", help="also time run_astra in this process (no start-up)")
    ap.add_argument("--timeout", type=float, default=30.0,
                    help="seconds before a side is killed (ASTRA-sim loops forever on some inputs, e.g. 0-byte chunks)")
    ap.add_argument("--keep", help="write the inputs here instead of a temporary directory")
    ap.add_argument("--astra-bin", default=os.environ.get("ASTRA_SIM_BIN"),
                    help="ASTRA-sim's congestion-unaware binary (default $ASTRA_SIM_BIN)")
    ap.add_argument("--astra-aware-bin", default=os.environ.get("ASTRA_SIM_AWARE_BIN"),
                    help="ASTRA-sim's congestion-aware binary (default $ASTRA_SIM_AWARE_BIN)")
    args = ap.parse_args(argv)
    bins = {"analytical": args.astra_bin, "congestion-aware": args.astra_aware_bin}
    for model in args.models:
        if not bins[model]:
            print(f"no ASTRA-sim binary for {model} (--{'astra-bin' if model == 'analytical' else 'astra-aware-bin'}"
                  f" PATH or ${'ASTRA_SIM_BIN' if model == 'analytical' else 'ASTRA_SIM_AWARE_BIN'}): left out")
    models = [m for m in args.models if bins[m]]
    if not models:
        print("no ASTRA-sim binary given: nothing to compare", file=sys.stderr)
        return 2
    for m in models:
        if not (Path(bins[m]).is_file() and os.access(bins[m], os.X_OK)):
            print(f"{bins[m]}: not an executable file", file=sys.stderr)
            return 2
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.keep or tmp)
        for i in args.only if args.only is not None else range(args.configs):
            cfg = draw(random.Random(f"{args.seed}:{i}"))
            flags = write_inputs(cfg, root / f"c{i}")
            for model in models:
                rows.append({"config": f"{args.seed}:{i}", **one(cfg, flags, model, bins[model], args.engine,
                                                                  args.inproc, root / f"c{i}", args.timeout)})
                if not rows[-1]["match"].startswith("yes"):
                    rows[-1]["cfg"] = cfg
    cols = [("config", "config", "s"), ("model", "model", "s"), ("npus", "NPUs", "d"), ("end", "ASTRA-sim", "s"),
            ("cpu_s", "netsim CPU s", ".3f"), ("a_cpu", "ASTRA-sim CPU s", ".3f"), ("ratio", "ratio", ".2f"),
            ("MB", "netsim MB", ".0f"), ("a_MB", "ASTRA-sim MB", ".0f"), ("match", "match", "s")]
    if args.inproc:
        cols[6:6] = [("in_cpu", "run_astra CPU s", ".3f"), ("in_engine", "engine", "s")]
    print_table(rows, cols)
    print()
    print_table(summary(rows), [("model", "model", "s"), ("configs", "configs", "d"), ("mismatches", "mismatches", "d"),
                                ("ends", "ASTRA-sim ends", "s"), ("timed", "timed", "d"),
                                ("slower", "netsim more CPU", "d"),
                                ("worst", "worst ratio", ".2f"), ("cpu", "netsim CPU s", ".1f"),
                                ("a_cpu", "ASTRA-sim CPU s", ".1f"), ("MB", "netsim max MB", ".0f"),
                                ("a_MB", "ASTRA-sim max MB", ".0f")])
    bad = [r for r in rows if not r["match"].startswith("yes")]
    for r in bad:
        print(f"MISMATCH {r['model']} config {r['config']}: {r['match']}: {r['cfg']}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
