"""What a congestion-aware ``netsim astra`` run of bench_astra_general's cases costs, piece by piece (issue 38).

Every row is a fresh process (``_harness.run_child``: the child's own CPU seconds and peak RSS):

* ``import numpy``, ``import netsim.astra.run`` (what every ``netsim astra`` run loads) and the same
  plus ``import numba`` (what the compiled engine adds before it runs anything);
* ``python -m netsim astra ... --engine E`` for each engine asked (start-up, trace reading, output);
* ``stages``: one process that imports ``netsim.astra.run``, then numba, then runs the compiled engine
  twice through ``run_astra`` and prints the CPU seconds and peak RSS after each step: the first run
  pays numba's target context and the cached kernel's load, the second is the engine alone.

``--ties`` runs the event engine (``--engine full``) in a child that counts, per Switch down-link, the
messages that reach the switch in the same nanosecond as another one for that down-link (their order
is the event queue's: the order in which their up-link transmissions started), then runs it again with
every arrival at the switch taken in reverse order and before the other events of its nanosecond (they
take negated sequence numbers) and counts the ranks whose finish time changed.  A batched (array)
engine computes link queues from times alone; this is the order it would have to reproduce.

Usage::

    python benchmarks/bench_astra_costs.py [--case general] [--npus N] [--engines compiled full auto] [--ties]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import print_table, run_child  # noqa: E402
from bench_astra_general import CASES, REPO, make_inputs  # noqa: E402

#: The stages child: CPU seconds and peak RSS (MB) after each step, as one JSON line.
STAGES = """import json, resource, sys, time
def mark(name):
    out.append((name, time.process_time(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))
out = []
mark("interpreter")
from netsim.astra.run import run_astra
mark("import netsim.astra.run")
import numba
mark("import numba")
args = sys.argv[1:5]
run_astra(*args, model="congestion-aware", engine="compiled")
mark("compiled run 1 (numba context, kernel load, run)")
run_astra(*args, model="congestion-aware", engine="compiled")
mark("compiled run 2 (the engine alone)")
print(json.dumps(out))
"""

#: The ties child: same-nanosecond switch arrivals per down-link, and the finish times with their order reversed.
TIES = """import heapq, json, sys
from collections import Counter
from netsim.astra import congestion
from netsim.astra.run import run_astra

args = sys.argv[1:5]
seen = Counter()
send = congestion._HeapLink.send
def counting(self, chunk):
    if chunk.i == 1:  # the message reached the switch: this is its down-link
        seen[(id(self), self.clock.now)] += 1
    send(self, chunk)
congestion._HeapLink.send = counting
ref = run_astra(*args, model="congestion-aware", engine="full")
congestion._HeapLink.send = send
def reversed_push(q, item):
    t, s, fn = item
    if isinstance(fn, congestion._Chunk) and fn.i == 0 and len(fn.path) > 1:
        item = (t, -s, fn)  # an arrival at the switch: before every other event of its nanosecond, in reverse
    heapq.heappush(q, item)
congestion.heappush = reversed_push
alt = run_astra(*args, model="congestion-aware", engine="full")
diff = [abs(int(a) - int(b)) for a, b in zip(ref.finish, alt.finish)]
groups = [v for v in seen.values() if v > 1]
print(json.dumps({"arrivals": sum(seen.values()), "tied_groups": len(groups), "tied_messages": sum(groups),
                  "ranks_changed": sum(d > 0 for d in diff), "max_change_ns": max(diff)}))
"""


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _child(cmd: list[str]) -> dict:
    r = run_child([sys.executable, *cmd], _env(), tempfile.gettempdir())
    if r["status"] != 0:
        print(r["stderr"], file=sys.stderr)
        raise SystemExit(f"{' '.join(cmd[:3])}: exit status {r['status']}")
    return r


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", default="general", choices=list(CASES))
    ap.add_argument("--npus", type=int, help="run the case on this many NPUs instead of its own")
    ap.add_argument("--engines", nargs="+", default=["compiled", "full", "auto"],
                    choices=["auto", "full", "compiled"])
    ap.add_argument("--ties", action="store_true", help="count same-nanosecond switch arrivals and reverse their order")
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cli = make_inputs(Path(tmp), args.case, args.npus)
        files = list(cli.values())
        for what, code in (("import numpy", "import numpy"), ("import netsim.astra.run", "import netsim.astra.run"),
                           ("import netsim.astra.run, numba", "import netsim.astra.run, numba")):
            r = _child(["-c", code])
            rows.append({"what": what, "cpu_s": r["cpu_s"], "wall_s": r["wall_s"], "peak_MB": r["peak_MB"]})
        for engine in args.engines:
            r = _child(["-m", "netsim", "astra", *[x for kv in cli.items() for x in kv], "--model",
                        "congestion-aware", "--engine", engine])
            rows.append({"what": f"netsim astra --engine {engine}", "cpu_s": r["cpu_s"], "wall_s": r["wall_s"],
                         "peak_MB": r["peak_MB"]})
        r = _child(["-c", STAGES, *files])
        marks = json.loads(r["stdout"].strip().splitlines()[-1])
        for (_n0, c0, _m0), (name, c1, m1) in zip(marks, marks[1:]):
            rows.append({"what": f"stages: {name}", "cpu_s": c1 - c0, "peak_MB": m1})
        print(f"{args.case} on {args.npus or CASES[args.case]['npus']} NPUs, congestion-aware "
              "(stages: CPU s of that step, peak MB after it)")
        print_table(rows, [("what", "what", "s"), ("wall_s", "wall s", ".2f"), ("cpu_s", "CPU s", ".2f"),
                           ("peak_MB", "peak MB", ".0f")])
        if args.ties:
            r = _child(["-c", TIES, *files])
            t = json.loads(r["stdout"].strip().splitlines()[-1])
            print()
            print_table([t], [(k, k.replace("_", " "), ",d") for k in t])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
