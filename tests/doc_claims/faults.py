"""docs/faults.md: every prose number, and how the code bears it out."""

from __future__ import annotations

import numpy as np

from doc_claims import REPO, claims_for, cli_default

C = claims_for("faults.md")


def _straggler() -> list[float]:
    from netsim.workload.faults import parse_straggler

    rank, factor = parse_straggler("5:1.1")
    return [rank, round((factor - 1) * 100, 9)]


def _seed_default() -> list[int]:
    from netsim.workload.faults import fault_spec

    assert cli_default("run", "--seed") is None  # None: the file's seed, else the spec's default
    return [fault_spec().seed]


def _delay_floor() -> list[float]:
    """The smallest of many normal launch delays drawn around a mean of zero."""
    from netsim.workload.faults import _draws

    out = _draws({"distribution": {"normal": {"mean": "0us", "std": "5us"}}}, 10_000,
                 np.random.default_rng(0), "t.yaml", "launch_jitter[0]", time=True)
    assert (out == 0).sum() > 1000  # about half were drawn below zero
    return [out.min()]


def _rehash_tries() -> list[int]:
    import inspect

    from netsim.workload.fault_routing import FaultRouter

    return [inspect.signature(FaultRouter.__init__).parameters["tries"].default]


def _run_id_digits() -> list[int]:
    from netsim.results.dataset import run_id_for

    return [len(run_id_for({"kind": "bench"}))]


def _row_group() -> list[int]:
    from netsim.results.dataset import ROW_GROUP_ROWS

    return [ROW_GROUP_ROWS]


def _readme_straggler_run() -> list[float]:
    """README's ``run --straggler 3:1.1 --faults superpod-faults.yaml`` (2 CPU-s): the last two ranks
    to finish, the two ranks slowest against their peers, the faults file's slow rank, the z bar."""
    import contextlib
    import io
    import os
    import re
    import tempfile
    from pathlib import Path

    import yaml

    import netsim
    from netsim.analysis import stragglers as S
    from netsim.cli import main

    readme = (REPO / "README.md").read_text()
    block = re.search(r"\$ (netsim run [^$]*?--straggler 3:1.1[^$]*?--out results/)", readme)[1]
    argv = block.replace("\\\n", " ").split()[1:]
    assert "3:1.1" in argv and "workloads/faults/superpod-faults.yaml" in argv, argv
    with tempfile.TemporaryDirectory() as d:
        old = os.getcwd()
        os.chdir(REPO)
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                assert main([*argv[:-1], str(Path(d) / "r"), "-q"]) == 0
        finally:
            os.chdir(old)
        res = netsim.open_results(str(Path(d) / "r"))
        last = res.ranks.sort_values(["finish_ns", "rank"])["rank"].tolist()[-2:][::-1]
        slow = S.slow_ranks(res.ops).sort_values("pct_over_median")
    top = slow.tail(2)
    assert (slow["robust_z"].abs() < S.slow_ranks.__kwdefaults__["z_threshold"]).all()
    doc = yaml.safe_load((REPO / "workloads/faults/superpod-faults.yaml").read_text())
    rule = next(r for r in doc["compute"] if r.get("ranks") == [int(top["rank"].iloc[1])])
    groups = yaml.safe_load((REPO / "workloads/traces/mixtral-8x7b-pp2dp2ep2/comm_groups.json").read_text())
    assert sorted(last) in sorted(groups.values())  # one stage's pair
    return [*last, top["rank"].iloc[0], top["pct_over_median"].iloc[0], top["rank"].iloc[1],
            top["pct_over_median"].iloc[1], rule["factor"], S.slow_ranks.__kwdefaults__["z_threshold"]]


def _gbps() -> list[float]:
    from netsim.results.nccl_table import make_row

    return [1e9 / make_row("sendrecv", 10**9, 2, 1.0).algbw_GBps]  # 1e9 bytes in 1 s


CLAIMS = [
    C("`--straggler 5:1.1` = rank 5 is 10 % slower", _straggler),
    C("(overrides the file's `seed`; default 0)", _seed_default),
    C("`normal: {mean, std}` (clipped at 0)", _delay_floor),
    C("1. the topology's own router is asked again with the flow's ECMP key re-hashed (up to 16 times;",
      _rehash_tries),
    C("`run_id` = first 16 hex digits", _run_id_digits),
    C("row groups of 262,144 rows", _row_group),
    C("(`_ns`, `_GBps` = 1e9 B/s", _gbps),
    C("on the README's `--straggler 3:1.1` run the last two rows are ranks 1 and 0, the first stage, whatever the "
      "stragglers). `slow_ranks` compares every compute op with the median of the same-named op on the other "
      "ranks (`pct_over_median`; `flagged` once the robust z and the percentage both pass their thresholds); "
      "on that run ranks 3 (+4.8 %) and 1 (+9.3 %, the faults file's 1.2x rank) come last.  With two peers per "
      "op, as there, no robust z can pass 3.5",
      _readme_straggler_run),
    C("(1.0 = as fast as its peers)", why="the meaning of a heat-map value: a ratio to the median of its peers"),
    C("| `bytes` | collective/send/recv: Chakra `comm_size` (per-rank buffer); memory: `tensor_size`; else 0 |",
      why="a column's definition (no bytes for compute)"),
    C("(start 0, end = the size's time", why="a column's definition: each size's row starts at time zero"),
    C("(0 when failed)", why="a column's definition (a failed link carries nothing)"),
    C("(analytical: offered load, may exceed 1)", why="a column's definition: a ratio, 1 = the link's capacity"),
]
