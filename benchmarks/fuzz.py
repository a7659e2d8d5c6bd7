"""Fuzz netsim's loaders, main flags and surfaces with generated bad (and good) inputs; print the table.

Every case runs in this process under a ``signal.alarm`` time limit and a memory limit and is
classified: clean error (InputError with one line; for a command, exit status 2 with one
``netsim: error:`` line), accepted valid, crash (any other exception: a traceback for a user),
hang (over the time limit), memory (a MemoryError, or a peak resident set more than
``--memory`` MiB above the case's start: runaway memory) or silently accepted invalid (the
generator injected a value outside the documented range and the run returned).

    python benchmarks/fuzz.py [--cases 5000] [--seed 0] [--limit 30] [--memory 1024]
                              [--classes "MoE flags,sweep --dry-run"] [--no-reproducers] [--show]

Input classes: topology YAML, faults YAML, sweep YAML, straggler specs, bench flags, input
files, and the surfaces of ``benchmarks/fuzz_surfaces.py`` (MoE flags, placement / routing /
``--set`` with ``run --llm`` sizes, damaged datasets through ``netsim.open_results``, ``sweep
--dry-run``).  The column "reproducers" counts the crashes, hangs, memory and silent
invalids whose input is one of issue 36's reproducers (``fuzz_surfaces.REPRODUCERS``);
``--no-reproducers`` leaves those inputs out.  ``tests/test_bad_inputs_fuzz.py`` runs the same
generators through hypothesis, bounded.
"""

from __future__ import annotations

import argparse
import random
import signal
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from netsim.errors import InputError  # noqa: E402
import fuzz_surfaces  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
# Values outside every documented range, and values inside them.
BAD_NUMBERS = [-1, 0, 10**30, 2**63, 2**100, 1e308, float("inf"), float("nan"), -1e-300, 1.5, "abc", True,
               None, [], {}, "1e400", "1e-400", "1e99999999"]
GOOD_INTS = [1, 2, 4, 8, 16]
BAD_UNITS = ["1e400GB/s", "1e-400GB/s", "0GB/s", "-5Gbps", "GB/s", "1e99999999Gbps", "nan", "1e400s",
             "-1ns", "1e-400s", "5 parsecs", 10**400]
GOOD_BW, GOOD_TIME = ["400Gbps", "25GB/s", "50GiB/s"], ["150ns", "1us", "0"]


# ------------------------------------------------------------------ generators: (input class, thunk, invalid?)
def topology_case(rng: random.Random):
    from netsim.topology.spec import build_topology, parse_spec

    doc = {"node": {"kind": "nvswitch", "gpus": 8, "links_per_gpu": 18, "link_bw": "25GB/s", "latency": "150ns"},
           "nodes": 4, "scale_out": {"nic_bw": "400Gbps", "tiers": [
               {"name": "leaf", "down": 16, "up": 16, "up_bw": "400Gbps"}, {"name": "spine", "down": 32}]}}
    invalid = rng.random() < 0.8
    where = rng.choice(["node.gpus", "node.links_per_gpu", "node.link_bw", "node.latency", "nodes",
                        "scale_out.nic_bw", "scale_out.nic_latency", "tiers.down", "tiers.up", "tiers.up_bw",
                        "tiers.oversubscription", "preset"])
    if invalid:
        value = rng.choice(BAD_UNITS if where.endswith(("bw", "latency")) else BAD_NUMBERS)
        if where in ("node.gpus", "nodes", "node.links_per_gpu", "tiers.up") and value in (0,) \
                and where == "tiers.up":
            invalid = False  # up: 0 is a valid top tier
        if where == "tiers.oversubscription" and value == 1.5:
            invalid = False  # a ratio, any number >= 1 (docs/topology.md)
    else:
        value = rng.choice(GOOD_BW if where.endswith("bw") else GOOD_TIME if where.endswith("latency")
                           else GOOD_INTS)
    _set(doc, where, value)
    return "topology YAML", lambda: build_topology(parse_spec(doc, "t.yaml"), "t.yaml"), invalid and _in_doc(where)


def _set(doc, where, value):
    if where == "preset":
        doc["node"] = {"preset": "hgx-h100", "latency": value, "link_bw": value}
    elif where.startswith("tiers."):
        doc["scale_out"]["tiers"][0][where.split(".")[1]] = value
    elif where == "nodes":
        doc["nodes"] = value
    else:
        a, b = where.split(".")
        doc[a][b] = value


def _in_doc(where):
    return True


def faults_case(rng: random.Random):
    from netsim.topology.builders import hgx_h100
    from netsim.workload.faults import fault_spec, plan_faults

    bad = rng.random() < 0.8
    key = rng.choice(["factor", "sigma", "mu", "low", "high", "seed", "min", "count"])
    v = rng.choice(BAD_NUMBERS) if bad else rng.choice([0.5, 1, 2])
    if key == "factor":
        doc = {"compute": [{"factor": v}]}
    elif key in ("sigma", "mu"):
        doc = {"compute": [{"distribution": {"lognormal": {key: v}}}]}
    elif key in ("low", "high"):
        doc = {"compute": [{"distribution": {"uniform": {"low": v if key == "low" else 1, "high":
                                                          v if key == "high" else 3}}}]}
        bad = bad or (key == "high" and v < 1)
    elif key == "seed":
        doc, bad = {"seed": v}, bad and v not in (0,)
    elif key == "min":
        doc = {"compute": [{"factor": 2, "min": v, "max": 1.5}]}
        bad = True
    else:
        doc = {"compute": [{"factor": 2, "count": v}]}
        bad = bad and v not in (0, 2**63, 2**100, 10**30)  # large counts are clipped to the ranks
    plain = type(v) in (int, float) and v == v and abs(v) < 1e6
    if key in ("factor", "low", "high", "sigma", "mu") and plain and v not in (-1, 0, -1e-300):
        bad = key == "high" and v < 1  # a plain in-range number: invalid only when high < low
    if key == "mu" and v in (-1, 0):
        bad = False
    if key == "sigma" and v == 0:
        bad = False
    if key == "min":
        bad = not (plain and 1e-6 <= v <= 1.5)
    return "faults YAML", lambda: plan_faults(fault_spec(doc), hgx_h100(), 8), bad


def sweep_case(rng: random.Random):
    from netsim.sweep.spec import parse_sweep

    base = {"topology": str(REPO / "topologies/dgx-h100.yaml"), "op": "all_reduce", "size": "1M"}
    kind = rng.choice(["seeds", "gpus", "seed", "channels", "grid", "size"])
    bad = True
    if kind == "seeds":
        data = {"seeds": rng.choice(BAD_NUMBERS + [10**6])}
        bad = data["seeds"] is not None  # seeds: null means no seeds
    elif kind == "grid":
        data = {"grid": {"size": [2**i for i in range(40)], "seed": list(range(rng.choice([10, 5000])))}}
        bad = len(data["grid"]["seed"]) > 10
    elif kind == "size":
        data = {"grid": {"size": [rng.choice(BAD_UNITS + ["1M", "8"])]}}
        bad = data["grid"]["size"][0] not in ("1M", "8")
    else:
        v = rng.choice(BAD_NUMBERS + GOOD_INTS)
        data = {"grid": {kind: [v]}}
        bad = v not in GOOD_INTS and not (kind == "seed" and v in (0,)) and not (kind == "seed" and v == 2**63 - 1)
        bad = bad and v is not None  # null: the default
    doc = {"kind": "bench", "base": base, **data}
    return "sweep YAML", lambda: parse_sweep(doc, "s.yaml", REPO), bad


def straggler_case(rng: random.Random):
    from netsim.workload.faults import parse_straggler

    rank = rng.choice(["0", "3", "-1", "1e3", "99999999999999", "a", ""])
    factor = rng.choice(["1.5", "2", "0", "-2", "1e308", "nan", "inf", "1e-400", "x", "1e6"])
    text = rng.choice([f"{rank}:{factor}", f"{rank}{factor}", f"{rank}:{factor}:1"])
    ok = text.count(":") == 1 and rank in ("0", "3") and factor in ("1.5", "2", "1e6")
    return "straggler spec", lambda: parse_straggler(text), not ok


def bench_case(rng: random.Random):
    from netsim.cli import build_parser

    b = rng.choice(["8", "0", "1e999", "1e99999999", "-1", "1G", "1.5", "1P", "abc"])
    e = rng.choice(["1G", "8", "1e400", "1M"])
    step = rng.choice([["-f", "2"], ["-f", "1"], ["-i", "1"], ["-i", "0"], ["-f", "4"]])
    gpus = rng.choice(["8", "1", "0", "-3", "100000", "abc", "4"])
    argv = ["bench", "--topology", str(REPO / "topologies/dgx-h100.yaml"), "--op", "all_reduce",
            "-b", b, "-e", e, *step, "--gpus", gpus]

    def run():
        from netsim import units
        from netsim.perftests import collective as bench
        from netsim.topology.spec import load_topology

        args = build_parser().parse_args(argv)
        topo = load_topology(args.topology)
        bench.validated(bench.BenchConfig("all_reduce", gpus=args.gpus), topo)
        maxb = args.maxbytes if args.maxbytes is not None else args.minbytes
        return bench.sweep_sizes(args.minbytes, maxb, args.stepfactor, args.stepbytes) and units
    # Valid only when every flag is in range (-b <= -e, a step that advances, 2 <= GPUs <= 8).
    sizes = {"8": 8, "0": 0, "1G": 2**30, "1M": 2**20}
    ok = (b in sizes and e in sizes and sizes[b] <= sizes[e] and step not in (["-f", "1"], ["-i", "0"])
          and gpus in ("8", "4") and not (step == ["-i", "1"] and sizes[e] - sizes[b] > 4096))
    return "bench flags", run, not ok


def file_case(rng: random.Random, tmp: Path):
    from netsim import inputs

    kind = rng.choice(["deep", "alias", "utf8", "dir", "fifo", "devzero", "json_deep", "json_inf", "ok"])
    p = tmp / f"case.{kind}"
    if kind == "deep":
        p.write_text(rng.choice(["[", "{a: "]) * rng.randint(65, 6000))
    elif kind == "alias":
        n = rng.randint(7, 12)
        p.write_text('a: &a ["x","x","x","x","x","x","x","x","x","x"]\n' + "".join(
            f"a{i}: &a{i} [{','.join(['*' + ('a' if i == 0 else f'a{i - 1}')] * 10)}]\n" for i in range(n)))
    elif kind == "utf8":
        p.write_bytes(b"name: \xff" + bytes(rng.randint(128, 255) for _ in range(4)) + b"\n")
    elif kind == "dir":
        p.mkdir(exist_ok=True)
    elif kind == "fifo":
        import os
        if not p.exists():
            os.mkfifo(p)
    elif kind == "devzero":
        p = Path("/dev/zero")
    elif kind == "json_deep":
        p.write_text("[" * rng.randint(65, 100000))
    elif kind == "json_inf":
        p.write_text(rng.choice(['{"a": Infinity}', '{"a": NaN}', '[-Infinity]']))
    else:
        p.write_text("a: [1, 2]\n")
    load = inputs.load_json if kind.startswith("json") else inputs.load_yaml
    return "input files", lambda: load(p), kind != "ok"


GENERATORS = [topology_case, faults_case, sweep_case, straggler_case, bench_case]


# ------------------------------------------------------------------ running
class Hang(BaseException):
    """Raised by the alarm; a BaseException so loaders cannot swallow it."""


def _status_kib(key: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak() -> int | None:
    """Reset the peak resident set (Linux ``clear_refs``); the resident set now, in KiB."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
    except OSError:
        return None
    return _status_kib("VmRSS")


def classify(thunk, invalid: bool, limit: int, memory_mib: int | None = None, cap: bool = False) -> str:
    """The outcome of one case (see the module docstring).  ``memory_mib``: the most the case may
    add to the peak resident set; ``cap``: also make allocations beyond twice that fail
    (:func:`limit_memory`, for a process of its own: the limit stays after the case)."""
    import gc

    def on_alarm(signum, frame):
        raise Hang()
    if memory_mib and cap:
        limit_memory(memory_mib)
    start = _reset_peak() if memory_mib else None
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(limit)
    try:
        thunk()
        outcome = "silent invalid" if invalid else "accepted valid"
    except InputError as exc:
        outcome = "clean" if "\n" not in str(exc) else "crash"
    except Hang:
        outcome = "hang"
    except MemoryError:
        outcome = "memory"
    except Exception:  # noqa: BLE001 - a traceback for the user
        outcome = "crash"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    if start is None:
        return outcome
    peak, now = _status_kib("VmHWM"), _status_kib("VmRSS")
    if outcome == "memory" or now - start > 256 * 1024:
        gc.collect()  # what a runaway case left in reference cycles (its traceback's frames), before the next
    return "memory" if outcome not in ("hang", "memory") and peak - start > memory_mib * 1024 else outcome


def limit_memory(mib: int) -> None:
    """Make allocations more than ``2 * mib`` MiB above the data segment now fail (MemoryError),
    so a runaway case stops instead of taking the machine (Linux ``RLIMIT_DATA``)."""
    import resource

    data = _status_kib("VmData")
    if data is not None:
        resource.setrlimit(resource.RLIMIT_DATA, ((data + 2 * mib * 1024) * 1024, resource.RLIM_INFINITY))


COLUMNS = ["cases", "clean", "accepted valid", "crash", "hang", "memory", "silent invalid", "reproducers"]
BAD = ("crash", "hang", "memory", "silent invalid")


def generators() -> list[tuple[str, object, str]]:
    """(input class, generator, how it is called) of every input class, in the order cases take them."""
    loaders = [("topology YAML", topology_case), ("faults YAML", faults_case), ("sweep YAML", sweep_case),
               ("straggler spec", straggler_case), ("bench flags", bench_case)]
    surfaces = [("MoE flags", fuzz_surfaces.moe_case), ("placement/routing/--set", fuzz_surfaces.placement_case),
                ("damaged datasets (API)", fuzz_surfaces.dataset_case),
                ("sweep --dry-run", fuzz_surfaces.sweep_dry_run_case)]
    return ([(n, g, "rng") for n, g in loaders] + [("input files", file_case, "tmp")] +
            [(n, g, "surface") for n, g in surfaces])


def _case(gen, how: str, rng: random.Random, tmp: Path, reproducers: bool):
    if how == "rng":
        return gen(rng)
    if how == "tmp":
        return gen(rng, tmp)
    return gen(rng, tmp, reproducers=reproducers)


def main(argv=None) -> int:
    import tempfile
    import time

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit", type=int, default=30, help="seconds per case before it counts as a hang")
    ap.add_argument("--memory", type=int, default=1024, help="MiB a case may add to the peak resident set")
    ap.add_argument("--classes", default=None, help="comma-separated input classes to run (default: all)")
    ap.add_argument("--no-reproducers", action="store_true", help="leave out issue 36's reproducers")
    ap.add_argument("--show", action="store_true", help="print every crash, hang, memory and silent invalid")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    classes = None if args.classes is None else {c.strip() for c in args.classes.split(",")}
    table: dict[str, Counter] = defaultdict(Counter)
    t0 = time.perf_counter()
    gens = [g for g in generators() if classes is None or g[0] in classes]
    if not gens:
        ap.error(f"no input class among {args.classes!r}; expected some of {', '.join(g[0] for g in generators())}")
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.cases):
            _cls, gen, how = gens[i % len(gens)]
            name, thunk, invalid = _case(gen, how, rng, Path(tmp), not args.no_reproducers)
            outcome = classify(thunk, invalid, args.limit, args.memory, cap=True)
            table[name]["cases"] += 1
            table[name][outcome] += 1
            inp = getattr(thunk, "input", None)
            known = outcome in BAD and inp is not None and fuzz_surfaces.reproducers_in(inp)
            table[name]["reproducers"] += bool(known)
            if args.show and outcome in BAD:
                if inp is None:
                    inp = [c.cell_contents for c in thunk.__closure__ or () if not callable(c.cell_contents)]
                print(f"{outcome}{' (issue-36 reproducer)' if known else ''}: {name}: {inp!r:.400}", file=sys.stderr)
    print(f"{'input class':<24}" + "".join(f"{c:>15}" for c in COLUMNS))
    total = Counter()
    for name, c in sorted(table.items()):
        total.update(c)
        print(f"{name:<24}" + "".join(f"{c[k]:>15}" for k in COLUMNS))
    print(f"{'total':<24}" + "".join(f"{total[k]:>15}" for k in COLUMNS))
    print(f"{time.perf_counter() - t0:.0f} s, seed {args.seed}")
    return 0 if not any(total[k] for k in BAD) else 1


if __name__ == "__main__":
    sys.exit(main())
