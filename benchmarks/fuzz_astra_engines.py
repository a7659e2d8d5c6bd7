"""Differential run of ``netsim astra``'s default engine against its event engine on random configs.

Each config (:func:`draw`, seeded) is a 1-D ASTRA-sim network (Ring, Switch or FullyConnected,
2-16 NPUs), per-rank chains of uneven compute and 1-4 collectives (all-reduce, all-gather,
reduce-scatter, all-to-all of random sizes), an algorithm per operation (ring, direct, directN,
halvingDoubling, doubleBinaryTree where ASTRA-sim can run it), 1-4 active chunks, 1-64
dataset splits, LIFO or FIFO, a random endpoint delay and local memory bandwidth; on 4 NPUs or
more, a third of configs partition the ranks into comm groups and run each collective on the world
or on the groups; both models.
Every config runs with ``engine="auto"`` and ``engine="full"``; the finish, exposed, GPU, wall
and overlap cycles of every rank, every per-type time and the multiset of stdout lines must be
equal (same-instant finishes print in rank order from the batched engines, in event order
from the event engine).  Every config also runs ``engine="compiled"`` where it applies
(:mod:`netsim.astra.compiled`, the event engine ported): its stdout lines must be the event
engine's in the same order, with the same message and event counts.  Prints a table per model:
configs, how many ran batched, how many ran compiled, how many the batched engine handed back at
run time, mismatches, CPU seconds of each engine (identical traces on every rank run on the
symmetric engine, whose message count is one rank's).

    python benchmarks/fuzz_astra_engines.py [--configs 200] [--seed 0] [--models analytical congestion-aware]
                                            [--main DIR]

``--main DIR`` also runs the event engine of another checkout (e.g. a worktree of ``main``) on each
config, in a fresh process, and requires its lines (sorted) to be this checkout's event engine's.

Exit status 1 on any mismatch.  tests/test_astra_batched_algos.py draws from the same generator.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _harness import print_table  # noqa: E402

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
_PAIR = r"from NPU \d+ to NPU \d+"


def draw(rng: random.Random) -> dict:
    """One random config: network, per-rank chains, system keys (see the module docstring)."""
    pow2 = rng.random() < 0.7
    n = rng.choice([2, 4, 8, 16]) if pow2 else rng.choice([3, 5, 6, 7, 12])
    ops = [rng.choice(OPS) for _ in range(rng.randrange(1, 5))]
    sizes = [rng.choice([1, 7, 4096, 65536, 100_003, 1 << 20, rng.randrange(1, 1 << 21)]) for _ in ops]
    algos = {}
    for op in OPS:
        pool = ["ring", "direct", f"direct{rng.randrange(1, 20)}"]
        if pow2 and op != "all_to_all":
            pool.append("halvingDoubling")
            if op == "all_reduce":
                pool.append("doubleBinaryTree")
        algos[op] = rng.choice(pool)
    spread = rng.choice([0, 1, 5, 40, 40])  # per-rank compute in whole microseconds
    compute = [[rng.randrange(0, spread + 1) for _ in range(len(ops) + 1)] for _ in range(n)]
    system = {"scheduling-policy": rng.choice(["LIFO", "FIFO"]), "endpoint-delay": rng.choice([1, 10, 37]),
              "active-chunks-per-dimension": rng.randrange(1, 5), "preferred-dataset-splits": rng.choice([1, 3, 4, 16, 64]),
              "collective-optimization": rng.choice(["localBWAware", "baseline"]),
              "local-mem-bw": rng.choice([50, 1600, 3.3])}
    for op in OPS:
        system[f"{op.replace('_', '-')}-implementation"] = [algos[op]]
    cfg = {"kind": rng.choice(["Ring", "Switch", "FullyConnected"]), "n": n, "ops": ops, "sizes": sizes,
           "compute": compute, "system": system, "bw": rng.choice([50.0, 12.5, 200.0]),
           "latency": rng.choice([500.0, 1.0, 70.0])}
    if n >= 4 and rng.random() < 0.35:  # comm groups: a random partition, each collective on the world or on them
        ranks = list(range(n))
        rng.shuffle(ranks)
        cut = sorted(rng.sample(range(2, n - 1), rng.randrange(0, min(3, n - 3) + 1)))
        cut = [c for i, c in enumerate(cut) if c - ([0] + cut)[i] >= 2 and n - c >= 2]
        bounds = [0, *cut, n]
        cfg["groups"] = {str(i + 1): ranks[a:b] for i, (a, b) in enumerate(zip(bounds, bounds[1:]))}
        cfg["on_group"] = [rng.random() < 0.6 for _ in ops]
    return cfg


def write(cfg: dict, root: Path) -> tuple:
    """The config's files under ``root``; the ``run_astra`` arguments (workload, system, network)."""
    from netsim.astra.system import parse_system
    from netsim.chakra import EtNode, write_workload
    from netsim.chakra.schema import CommType, NodeType

    comp, coll = int(NodeType.COMP_NODE), int(NodeType.COMM_COLL_NODE)
    groups = cfg.get("groups")
    mine = {r: g for g, members in (groups or {}).items() for r in members}
    per = []
    for r in range(cfg["n"]):
        c = cfg["compute"][r]
        nodes = [EtNode(0, "c", comp, duration_micros=c[0])]
        for k, (op, size) in enumerate(zip(cfg["ops"], cfg["sizes"])):
            pg = mine[r] if groups and cfg["on_group"][k] else None
            nodes.append(EtNode(2 * k + 1, f"{op}{k}", coll, data_deps=(2 * k,), comm_type=int(CommType[op.upper()]),
                                comm_size=size, is_cpu_op=False, pg_name=pg))
            nodes.append(EtNode(2 * k + 2, f"c{k}", comp, data_deps=(2 * k + 1,), duration_micros=c[k + 1]))
        per.append(nodes)
    root.mkdir(parents=True, exist_ok=True)
    write_workload(root / "w", per)
    (root / "n.yml").write_text(f"topology: [{cfg['kind']}]\nnpus_count: [{cfg['n']}]\nbandwidth: [{cfg['bw']}]\n"
                                f"latency: [{cfg['latency']}]\n")
    gpath = None
    if groups:
        import json

        gpath = root / "g.json"
        gpath.write_text(json.dumps(groups))
    return root / "w", parse_system(cfg["system"]), root / "n.yml", gpath


def compare(cfg: dict, root: Path, model: str, other: str | None = None) -> dict:
    """Run ``cfg`` with the default and the event engine; ``{"engine", "mismatch", "auto_s", "full_s"}``
    (``mismatch``: None, or what differs; an input error on both sides counts as equal when its text is,
    up to the NPU pair a 0-byte message error names: the symmetric engine names rank 0's message, the
    event engine the first one sent)."""
    import numpy as np

    from netsim.astra import run_astra
    from netsim.errors import DeadlockError, InputError

    args = write(cfg, root)
    got = {}
    for engine in ("auto", "full", "compiled"):
        t = time.process_time()
        try:
            got[engine] = run_astra(*args[:3], comm_groups=args[3], model=model, engine=engine)
        except InputError as exc:
            got[engine] = None if "compiled engine does not apply" in str(exc) else str(exc)
        except DeadlockError as exc:  # both engines must stop alike (the batched one hands a deadlock back)
            got[engine] = f"deadlock: {exc} {sorted(getattr(exc, 'lines', []))}"
        got[engine + "_s"] = time.process_time() - t
    a, f = got["auto"], got["full"]
    out = {"auto_s": got["auto_s"], "full_s": got["full_s"], "mismatch": None,
           "engine": getattr(a, "engine", "error"), "compiled": got.get("compiled") is not None,
           "handed_back": any("gave way to the event engine" in x for x in getattr(a, "notes", []))}
    c = got.get("compiled")
    if c is not None and not isinstance(f, str):  # the event engine compiled: the same lines in the same order
        if isinstance(c, str) or c.lines() != f.lines() or c.stats["messages"] != f.stats["messages"] or \
                c.stats["events"] != f.stats["events"] or c.order != f.order:
            out["mismatch"] = "the compiled engine"
            return out
    elif c is not None and c != f:
        out["mismatch"] = f"errors differ: compiled {c!r} vs {f!r}"
        return out
    if isinstance(a, str) or isinstance(f, str):
        # the symmetric engine simulates rank 0 alone, so its 0-byte-message error names rank 0's message
        same = re.sub(_PAIR, "", a) == re.sub(_PAIR, "", f) if a.startswith("a 0-byte") else a == f
        out["mismatch"] = None if same else f"errors differ: {a!r} vs {f!r}"
        return out
    for key in ("finish", "exposed", "gpu", "wall", "overlap"):
        if not np.array_equal(getattr(a, key), getattr(f, key)):
            out["mismatch"] = key
            return out
    if a.times.keys() != f.times.keys() or any(not np.array_equal(a.times[k], f.times[k]) for k in a.times):
        out["mismatch"] = "times"
    elif sorted(a.lines()) != sorted(f.lines()):
        out["mismatch"] = "lines"
    elif a.engine != "symmetric" and a.stats["messages"] != f.stats["messages"]:  # symmetric: one rank's
        out["mismatch"] = "messages"
    elif other is not None and _other_lines(other, args, model) != sorted(f.lines()):
        out["mismatch"] = f"the event engine of {other}"
    return out


def _other_lines(repo: str, args: tuple, model: str) -> list[str]:
    """Sorted stdout lines of ``repo``'s event engine on the same files (a fresh process)."""
    import json
    import os
    import subprocess

    code = ("import json, sys; from netsim.astra import run_astra; from netsim.astra.system import parse_system; "
            "w, s, n, g, m = json.loads(sys.argv[1]); "
            "print(json.dumps(sorted(run_astra(w, parse_system(s), n, comm_groups=g, model=m, engine='full')"
            ".lines())))")
    env = dict(os.environ, PYTHONPATH=repo)
    wl, sysc, net, groups = args
    out = subprocess.run([sys.executable, "-c", code, json.dumps([str(wl), sysc.raw, str(net),
                                                                  groups and str(groups), model])],
                         capture_output=True, text=True, env=env, cwd=tempfile.gettempdir(), check=True)
    return json.loads(out.stdout)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--models", nargs="+", default=["analytical", "congestion-aware"])
    ap.add_argument("--main", metavar="DIR", help="also compare with the event engine of the checkout in DIR")
    args = ap.parse_args(argv)
    rows, bad = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models:
            row = {"model": model, "configs": 0, "batched": 0, "compiled": 0, "handed": 0, "mismatches": 0,
                   "auto_s": 0.0, "full_s": 0.0}
            for i in range(args.configs):
                cfg = draw(random.Random(f"{args.seed}:{i}"))
                res = compare(cfg, Path(tmp) / f"{model}{i}", model, args.main)
                row["configs"] += 1
                row["batched"] += res["engine"] == "batched"
                row["handed"] += res["handed_back"]
                row["compiled"] += res["compiled"]
                row["auto_s"] += res["auto_s"]
                row["full_s"] += res["full_s"]
                if res["mismatch"]:
                    row["mismatches"] += 1
                    bad.append((model, i, res["mismatch"], cfg))
            rows.append(row)
    print_table(rows, [("model", "model", "s"), ("configs", "configs", "d"), ("batched", "ran batched", "d"),
                       ("compiled", "compiled ran (== full, in order)", "d"),
                       ("handed", "handed back", "d"), ("mismatches", "mismatches", "d"),
                       ("auto_s", "default CPU s", ".1f"), ("full_s", "event engine CPU s", ".1f")])
    for model, i, what, cfg in bad:
        print(f"MISMATCH {model} config {args.seed}:{i}: {what}: {cfg}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
