"""Fuzz generators for the command-line and API surfaces: MoE flags, placement / routing / ``--set``
(with ``run --llm`` sizes), damaged datasets through ``netsim.open_results``, and ``sweep --dry-run``.

Each generator is ``gen(rng, tmp, reproducers=True) -> (input class, thunk, invalid)`` like those of
``benchmarks/fuzz.py`` (which runs them; ``tests/test_bad_inputs_fuzz.py`` bounds them): the thunk
runs one input and returns, or raises what the user would see (a one-line CLI error is raised
as an InputError).  ``invalid`` is True only for an input outside the documented ranges, so a
run that accepts it is a *silent invalid*.  ``thunk.input`` is what was run (argv, or the sweep
YAML, or the damage done to a dataset).

:data:`REPRODUCERS` lists the reproducers of issue 36 (crashes, runaway memory, accepted
nonsense; all fixed): the generators produce them unless ``reproducers`` is False, and the tests
run them like any other input.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import shutil
from pathlib import Path

from netsim.errors import InputError

REPO = Path(__file__).resolve().parents[1]
DGX = str(REPO / "topologies/dgx-h100.yaml")
SU = str(REPO / "topologies/h100-superpod-1su.yaml")

#: Inputs of issue 36 (fixed): name -> predicate on ``thunk.input``.
REPRODUCERS = {
    "moe --seed -1 (ValueError in route_tokens)": lambda i: _has(i, "moe_", "--seed", "-1"),
    "moe --tokens 2**63 (crash)": lambda i: _has(i, "moe_", "--tokens", str(2**63)),
    "moe --tokens 100000000 (11.9 GiB)": lambda i: _has(i, "moe_", "--tokens", "100000000"),
    "moe --channels (a flag MoE ops ignore)": lambda i: _has(i, "moe_", "--channels", None),
    "placement file holding 2**63 (OverflowError)": lambda i: isinstance(i, list) and "2**63-file" in i,
    "--placement random: (empty seed accepted)": lambda i: _has(i, "", "--placement", "random:"),
    "run --llm --seq 2**62 (OverflowError)": lambda i: _has(i, "--llm", "--seq", str(2**62)),
    "run --llm --microbatches 100000000 (runaway memory)": lambda i: _has(i, "--llm", "--microbatches", "100000000"),
    "sweep topology path with a NUL byte (crash)": lambda i: isinstance(i, str) and "\\0" in i,
    "sweep llm.microbatches 100000000 (runaway memory)": lambda i: isinstance(i, str) and "100000000" in i,
}


def _has(argv, marker: str, flag: str, value) -> bool:
    if not isinstance(argv, list) or not any(marker in a for a in argv):
        return False
    return any(a == flag and (value is None or b == value) for a, b in zip(argv, argv[1:] + [""]))


def described(thunk, what):
    thunk.input = what
    return thunk


def cli(argv: list[str], shown=None):
    """A thunk running ``netsim <argv>`` in this process: returns on exit 0, raises InputError with
    the line on exit 2 with one ``netsim: error:`` line, RuntimeError on anything else."""
    def run():
        from netsim.cli import main

        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(argv)
        text = err.getvalue().strip()
        if status == 0:
            return status
        if status == 2 and text.startswith("netsim: error: ") and "\n" not in text and "Traceback" not in text:
            raise InputError(text)
        raise RuntimeError(f"exit {status}: {text[:500]}")
    return described(run, shown if shown is not None else argv)


def _pick(rng: random.Random, good, bad=(), open_=(), reproducers=True, p_bad=0.3, p_open=0.08):
    """(value, certainly invalid?, open elsewhere?) from the pools."""
    r = rng.random()
    if open_ and reproducers and r < p_open:
        return rng.choice(open_), True, True
    if bad and r < p_open + p_bad:
        return rng.choice(bad), True, False
    return rng.choice(good), False, False


# ------------------------------------------------------------------ MoE flags
def moe_case(rng: random.Random, tmp: Path, reproducers: bool = True):
    op = rng.choice(["moe_dispatch", "moe_combine"])
    flow = rng.random() < 0.3
    argv = ["bench", "--topology", DGX, "--op", op, "--gpus", "8", "--model", "flow" if flow else "analytical", "-q"]
    invalid = False
    pools = {  # flag: (good, bad, open elsewhere)
        "--tokens": (["1", "64", "512"] + ([] if flow else ["4096"]), ["0", "-5", "abc", "1.5", ""],
                     [str(2**63), "100000000"]),
        "--hidden": (["1", "512", "7168"], ["0", "-1", "x"], []),
        "--topk": (["1", "2", "8"], ["0", "-2", "999"], []),
        "--experts": (["8", "16", "64", "256"], ["0", "-8", "12", "7"], []),
        "--seed": (["0", "7", str(2**40), str(2**63 - 1)], ["x", "1.5"], ["-1"]),
        "--algo": (["auto", "direct", "hierarchical", "node_limited"], ["bogus", ""], []),
        "--skew": (["uniform", "zipf:1.2", "zipf:0.5"], ["bogus", "zipf:"], []),
        "--max-nodes": (["0", "1", "4"], ["-1", "x"], []),
        "--redundant-experts": (["0", "8"], ["-1"], []),
        "--placement-experts": (["contiguous", "round_robin"], ["bogus"], []),
        "--mode": (["normal", "low_latency"], ["bogus"], []),
    }
    values = {}
    for flag, (good, bad, open_) in pools.items():
        if rng.random() < 0.5:
            values[flag], bad_v, _open = _pick(rng, good, bad, open_, reproducers, p_bad=0.12)
            invalid |= bad_v
    if reproducers and rng.random() < 0.08:  # MoE ops take --channels and ignore it
        values["--channels"] = rng.choice(["0", "4", "-1", "65"])
        invalid = True
    for flag, v in values.items():
        argv += [flag, v]
    if values.get("--mode") == "low_latency" and values.get("--algo") in ("hierarchical", "node_limited"):
        invalid = True  # low-latency kernels send directly
    return "MoE flags", cli(argv), invalid


# ------------------------------------------------------------------ placement, routing, --set, run --llm sizes
def _placement_file(rng: random.Random, tmp: Path, n: int, n_gpus: int, reproducers: bool):
    """(path, invalid, open, tag) of a file of GPU ids for ``n`` ranks."""
    ids = rng.sample(range(n_gpus), n)
    kind = rng.choice(["good", "good", "dup", "negative", "range", "text", "empty", "short", "long"]
                      + (["2**63"] if reproducers else []))
    if kind == "dup":
        ids[-1] = ids[0]
    elif kind == "negative":
        ids[0] = -1
    elif kind == "range":
        ids[0] = n_gpus + rng.randrange(1000)
    elif kind == "short":
        ids = ids[:-1]
    elif kind == "long":
        ids = ids + [x for x in range(n_gpus) if x not in ids][:1]
    elif kind == "empty":
        ids = []
    elif kind == "2**63":
        ids[0] = 2**63
    body = "\n".join(map(str, ids)) + "\n"
    if kind == "text":
        body = body.replace(str(ids[0]), "gpu0", 1)
    path = tmp / f"placement-{kind}.txt"
    path.write_text(body)
    return str(path), kind != "good", kind == "2**63", f"{kind}-file" if kind != "2**63" else "2**63-file"


def placement_case(rng: random.Random, tmp: Path, reproducers: bool = True):
    run = rng.random() < 0.3
    n, n_gpus = (8, 256) if run else (16, 256)
    if run:
        argv = ["run", "--topology", SU, "--llm", "llama3-8b", "--tp", "2", "--pp", "2", "--dp", "2",
                "--model", "analytical", "-q"]
    else:
        argv = ["bench", "--topology", SU, "--op", rng.choice(["all_reduce", "alltoall"]), "-b", "1M",
                "--gpus", str(n), "--model", "analytical", "-q"]
    invalid, tags = False, []
    r = rng.random()
    if r < 0.35:
        path, bad, _open, tag = _placement_file(rng, tmp, n, n_gpus, reproducers)
        argv += ["--placement", path]
        invalid, tags = bad, [tag]
    elif r < 0.8:
        top = (n_gpus - 1) // (n - 1)  # the largest stride that fits
        spec, bad, _open = _pick(rng, ["packed", "random", "random:3", f"random:{2**40}", "strided:2",
                                       f"strided:{top}"],
                                 ["strided:0", "strided:-1", "strided:", f"strided:{top + 1}", "random:-1",
                                  "random:abc", "bogus", "", "strided:1.5"], ["random:"], reproducers)
        argv += ["--placement", spec]
        invalid = bad
    routing, bad, _open = _pick(rng, [None, "ftree", "ecmp", "adaptive", "spray"], ["bogus", "", "ECMP!"])
    if routing is not None:
        argv += ["--routing", routing]
        invalid |= bad
    sets = {}  # key -> (value, invalid): a later --set of a key replaces an earlier one
    for _ in range(rng.choice([0, 0, 1, 2])):
        kv, bad, _open = _pick(rng, ["scale_out.nic_bw=800Gbps", "nodes=4", "node.latency=200ns"],
                               ["node.gpus=-1", "bogus.key=1", "noequals", "=1", "scale_out.nic_bw=fast",
                                "nodes=0", "nodes=1e999", "scale_out.tiers.9.down=2"], p_bad=0.6)
        argv += ["--set", kv]
        key = kv.partition("=")[0] if "=" in kv and not kv.startswith("=") else f"malformed {len(sets)}"
        sets[key] = bad
    invalid |= any(sets.values())
    if run:
        for flag, good, badv, open_ in (("--seq", ["256", "1024"], ["0", "-1", "x"], [str(2**62)]),
                                        ("--microbatches", ["1", "2"], ["0", "-3"], ["100000000"])):
            if rng.random() < 0.5:
                v, bad, _open = _pick(rng, good, badv, open_, reproducers, p_open=0.1)
                argv += [flag, v]
                invalid |= bad
        if "--seq" not in argv:
            argv += ["--seq", "256"]
    return "placement/routing/--set", cli(argv, argv + tags), invalid


# ------------------------------------------------------------------ damaged datasets through the API
def _template(tmp: Path) -> Path:
    """A small sound dataset of two runs in ``tmp/template`` (written once per folder)."""
    import pandas as pd

    from netsim.results.dataset import run_id_for, write_run

    root = tmp / "template"
    if (root / "runs").is_dir():
        return root
    for i in range(2):
        cfg = {"fuzz": i}
        ops = pd.DataFrame({"rank": [0, 1] * 50, "node_id": range(100), "name": ["op"] * 100, "kind": ["compute"] * 100,
                            "comm_type": [None] * 100, "group": [None] * 100, "bytes": range(100),
                            "start_ns": [float(x) for x in range(100)], "end_ns": [x + 1.0 for x in range(100)]})
        write_run(root, run_id_for(cfg), {"ops": ops, "ranks": pd.DataFrame({"rank": [0, 1], "finish_ns": [1.0, 2.0]})},
                  cfg)
    return root


def _wrong_schema(rng: random.Random, table: str, path: Path) -> bool:
    """Replace ``path`` with a Parquet file of some of ``table``'s columns, some of another kind;
    returns whether it is invalid (a column missing or of the wrong kind)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from netsim.results.layout import COLUMNS

    cols, invalid = {}, False
    for name, code in COLUMNS[table].items():
        if rng.random() < 0.15:
            invalid = True
            continue
        number = code not in ("string", "dict")
        if rng.random() < 0.15:
            number, invalid = not number, True
        cols[name] = pa.array([1.5, 2.5]) if number else pa.array(["a", "b"])
    cols["extra"] = pa.array([rng.random(), rng.random()])
    pq.write_table(pa.table(cols), path)
    return invalid


def dataset_case(rng: random.Random, tmp: Path, reproducers: bool = True):
    import netsim
    from netsim.results.layout import TABLES

    template = _template(tmp)
    root = tmp / "damaged"
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(template, root)
    parts = sorted(root.glob("*/run_id=*/part-0.parquet"))
    part = rng.choice(parts)
    table = part.parent.parent.name
    data = part.read_bytes()
    damage = rng.choice(["none", "truncate", "empty", "garbage", "span", "flip", "append", "schema", "no-config",
                         "bad-config", "part-dir", "no-table", "empty-dir", "unrelated-dir", "missing", "fifo",
                         "text-file", "symlink-garbage"])
    target, invalid = root, True
    if damage == "none":
        invalid = False
    elif damage == "truncate":
        part.write_bytes(data[:rng.randrange(len(data))])
    elif damage == "empty":
        part.write_bytes(b"")
    elif damage == "garbage":
        part.write_bytes(rng.randbytes(rng.choice([4, 100, len(data)])))
    elif damage in ("span", "flip"):  # may decode into other values: no verdict
        at = rng.randrange(len(data))
        n = 1 if damage == "flip" else rng.randrange(1, 200)
        part.write_bytes(data[:at] + rng.randbytes(n) + data[at + n:])
        invalid = False
    elif damage == "append":
        part.write_bytes(data + rng.randbytes(rng.randrange(1, 64)) + b"x")
    elif damage == "schema":
        invalid = _wrong_schema(rng, table, part) or table == "runs"  # runs: its config metadata is gone too
    elif damage in ("no-config", "bad-config"):
        import pyarrow.parquet as pq

        part = part.parents[2] / "runs" / part.parent.name / "part-0.parquet"
        tbl = pq.read_table(part)
        pq.write_table(tbl.replace_schema_metadata({} if damage == "no-config" else {"netsim.config": "{x"}), part)
    elif damage == "part-dir":  # a folder where a part belongs: that run or table is absent, not damaged
        part.unlink()
        part.mkdir()
        invalid = False
    elif damage == "no-table":
        shutil.rmtree(part.parent.parent)
        invalid = False
    elif damage == "empty-dir":
        target = tmp / "empty"
        target.mkdir(exist_ok=True)
    elif damage == "unrelated-dir":
        target = REPO / "docs"
    elif damage == "missing":
        target = tmp / "no-such-dir"
    elif damage == "fifo":
        target = tmp / "fifo"
        if not target.exists():
            os.mkfifo(target)
    elif damage == "text-file":
        target = REPO / "README.md"
    else:
        part.unlink()
        junk = tmp / "junk.bin"
        junk.write_bytes(rng.randbytes(50))
        part.symlink_to(junk)

    def read():
        res = netsim.open_results(target)
        for name in TABLES:
            res.table(name)
        for rid in res.run_ids:
            res.config(rid)
    return "damaged datasets (API)", described(read, f"{damage} {table}"), invalid


# ------------------------------------------------------------------ sweep --dry-run
def sweep_dry_run_case(rng: random.Random, tmp: Path, reproducers: bool = True):
    import yaml

    invalid = False
    run = rng.random() < 0.25
    if run:
        base = {"topology": DGX, "llm.model": "llama3-8b", "llm.tp": 2, "llm.pp": 2, "llm.dp": 2, "llm.seq": 256,
                "model": "analytical"}
    else:
        base = {"topology": DGX, "op": "all_reduce", "size": "1M", "model": "analytical"}
    doc = {"kind": "run" if run else "bench", "base": base, "grid": {}}
    choices = ["topology", "node.gpus", "placement", "seeds"] + (["llm.seq", "llm.microbatches"] if run else
                                                                 ["algo", "gpus", "proto", "op", "routing", "size"])
    for key in rng.sample(choices, rng.randint(1, 3)):
        if key == "topology":
            topo, bad, _open = _pick(rng, [DGX, "../topologies/dgx-h100.yaml"],
                                     [str(REPO / "README.md"), "self", str(tmp / "none.yaml"), str(REPO / "docs"),
                                      "/dev/null", ""], ["with NUL"], reproducers, p_bad=0.6, p_open=0.1)
            if topo == "self":
                topo = str(tmp / "sweep.yaml")
            elif topo == "with NUL":
                topo = DGX + "\0x"
            elif topo.startswith(".."):
                topo = os.path.relpath(DGX, tmp)
            base["topology"], invalid = topo, invalid or bad
            continue
        if key == "seeds":
            v, bad, _open = _pick(rng, [2, 3], [0, -1, 10**7, "x"])
            doc["seeds"], invalid = v, invalid or bad
            continue
        pools = {"node.gpus": ([8, 4], [-1, 0, 1000, "x", 1.5]),
                 "placement": (["packed", "random:2", "strided:1"], ["strided:0", "bogus", "strided:9"]),
                 "algo": (["ring", "tree", "auto"], ["bogus", ""]),
                 "gpus": ([2, 8], [1, 9, -1, "x"]),
                 "proto": (["LL", "Simple"], ["bogus", "ll"]),
                 "op": (["all_reduce", "all_gather"], ["bogus", ""]),
                 "routing": (["ecmp"], ["bogus"]),
                 "size": (["1M", "0", 8], ["-1", "1e400", "x"]),
                 "llm.seq": ([128, 512], [0, -1]),
                 "llm.microbatches": ([1, 2], [0, -4])}
        good, bad_pool = pools[key]
        open_ = ([100000000] if key == "llm.microbatches" else [])
        values, any_bad = [], False
        for _ in range(rng.randint(1, 2)):
            v, bad, _open = _pick(rng, good, bad_pool, open_, reproducers, p_open=0.15)
            values.append(v)
            any_bad |= bad
        doc["grid"][key] = values
        invalid |= any_bad
    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=False)
    path = tmp / "sweep.yaml"
    path.write_text(text)
    out = tmp / "sweep-out"
    return "sweep --dry-run", cli(["sweep", str(path), "--out", str(out), "--dry-run"], text), invalid


SURFACES = [moe_case, placement_case, dataset_case, sweep_dry_run_case]


def reproducers_in(inp) -> list[str]:
    """Names of :data:`REPRODUCERS` entries that input ``inp`` reproduces."""
    return [name for name, hit in REPRODUCERS.items() if hit(inp)]


if __name__ == "__main__":  # print a few generated inputs
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        rng = random.Random(0)
        for gen in SURFACES:
            for _ in range(3):
                name, thunk, invalid = gen(rng, Path(d))
                print(f"{name:<24} invalid={invalid!s:<5} {json.dumps(thunk.input, default=str)[:200]}")
