"""docs/astra.md: every prose number, and how the code bears it out.

The exact figures ASTRA-sim's own inputs give are asserted by the tests that run those inputs (they
need the third-party traces); the benchmark tables' simulated figures are recomputed by running the
benchmarks' cases in this process (64 and 256 NPUs here, larger ones in the slow tier)."""

from __future__ import annotations

import re
from functools import lru_cache

from doc_claims import REPO, claims_for

C = claims_for("astra.md")
DOC = REPO / "docs/astra.md"


def _endpoint_default() -> list[int]:
    import inspect

    from netsim.astra import sysl
    from netsim.astra.system import SystemConfig

    local = re.findall(r"self\.register\((\d+) if fast else self\.e", inspect.getsource(sysl))
    assert local and set(local) == {"10"}, local  # a local (sub-group) ring's bundle delay
    return [SystemConfig.__dataclass_fields__["endpoint_delay_ns"].default, int(local[0])]


def _local_ring() -> list[int]:
    return _endpoint_default()[1:]


def _hops() -> list[int]:
    """Hops of a message between neighbours on FullyConnected and on Switch (zero bytes, latency 1)."""
    from netsim.astra.engine import AstraNetwork, NetDim

    def hops(kind):
        return AstraNetwork("t", (NetDim(kind, 8, 50.0, 1.0),)).delay_ns(0, 1, 0)

    ring = AstraNetwork("t", (NetDim("Ring", 8, 50.0, 1.0),))
    assert ring.delay_ns(0, 7, 0) == 1 and ring.delay_ns(0, 3, 0) == 3  # the shorter direction
    return [hops("FullyConnected"), hops("Switch")]


def _message_cap() -> list[float]:
    from netsim.astra.batched_timed import MAX_MESSAGES

    src = (REPO / "netsim/astra/batched_timed.py").read_text()
    per = int(re.search(r"\((\d+) bytes each", src)[1])
    return [per, MAX_MESSAGES * per / 1e9]


def _timed_sizes() -> list[int]:
    src = (REPO / "tests/test_astra_timed.py").read_text()
    return [int(x) for x in re.search(r'@pytest\.mark\.parametrize\("n", \[(\d+), (\d+)\]\)', src).groups()]


def _stuck_listed() -> list[int]:
    import inspect

    from netsim.astra import run

    found = set(re.findall(r"for wl in stuck\[:(\d+)\]", inspect.getsource(run)))
    assert len(found) == 1, found
    return [int(found.pop())]


def _micro_sizes() -> list[int]:
    src = (REPO / "tests/test_astra_exact.py").read_text()
    m = re.search(r'@pytest\.mark\.parametrize\("n", \[([\d, ]+)\]\)\ndef test_microbenchmarks_closed_forms', src)
    return [int(x) for x in m[1].split(",")]


def _bench_astra(n: int):
    def check() -> list[int]:
        import bench_astra

        assert bench_astra.SYSTEM["preferred-dataset-splits"] == 4
        return [n, bench_astra.expected_ns(n)]
    return check


@lru_cache(maxsize=None)
def _scale_inputs(n: int, shape: str) -> dict:
    import atexit
    import shutil
    import tempfile
    from pathlib import Path

    import bench_astra_scale

    root = Path(tempfile.mkdtemp(prefix="netsim-docs-astra-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return bench_astra_scale.make_inputs(root, n, shape)


def _scale_row(n: int, model: str, shape: str, engine: str):
    def check() -> list[int]:
        import bench_astra_scale

        row = bench_astra_scale.Case(_scale_inputs(n, shape), model, "auto")()
        assert row["engine"] == engine, (row["engine"], engine)
        return [n, row["messages"], row["finish_max"]]
    return check


def _scale_claims() -> list:
    out = []
    for line in DOC.read_text().splitlines():
        m = re.match(r"\| ([\d,]+) \| (analytical|congestion-aware) \| (\S+) \| (\w+) \| [\d,]+ \| [\d,]+ \|$", line)
        if m:
            n = int(m[1].replace(",", ""))
            out.append(C(line, _scale_row(n, m[2], m[3], m[4]), slow=n > 256))
    assert len(out) == 20, len(out)
    return out


def _scale_setup() -> list[float]:
    """The benchmark's network and collectives, read back from the inputs it writes (64 NPUs)."""
    import yaml

    from netsim.chakra import read_et

    import bench_astra_scale

    paths = _scale_inputs(64, "groups+world")
    net = yaml.safe_load(open(paths["network"]).read())
    assert net["topology"] == ["Switch"]
    sizes = [n.comm_size for n in read_et(paths["workload"] + ".0.et").nodes if n.comm_size]
    uneven = [n.comm_size for n in read_et(_scale_inputs(64, "uneven")["workload"] + ".0.et").nodes if n.comm_size]
    groups = bench_astra_scale.group_sizes(64)
    assert max(groups) == 64 // 8, groups
    return [net["bandwidth"][0], net["latency"][0], uneven[0] >> 20, sizes[0] >> 20, sizes[1] >> 10,
            groups[0], groups[1], sizes[2] >> 20]


def _full_check(sizes: tuple[int, ...], extra: tuple[str, ...] = ()):
    def check() -> list[int]:
        import contextlib
        import io

        import bench_astra_scale

        with contextlib.redirect_stdout(io.StringIO()):
            assert bench_astra_scale.main(["--npus", *map(str, sizes), "--symmetric", "--check", *map(str, sizes),
                                           *extra]) == 0
        return list(sizes)
    return check



def _general_cases() -> list[float]:
    """The bench_astra_general cases as the page describes them, from the script's own table."""
    import bench_astra_general as g

    gen, seq = g.CASES["general"], g.CASES["sequence"]
    assert gen["topology"] == "Switch" and seq["topology"] == "Ring"
    assert [a for _, _, a in gen["steps"]] == ["doubleBinaryTree", "direct", "halvingDoubling"]
    assert [a for _, _, a in seq["steps"]] == ["direct", "halvingDoubling"]
    mib = [b / 2**20 for _, b, _ in gen["steps"]]
    assert seq["rounds"] == 8  # "eight rounds"
    return [gen["npus"], *mib, gen["splits"], gen["active"], seq["npus"],
            seq["steps"][0][1] / 1024, seq["steps"][1][1] / 1024, seq["splits"], seq["active"]]

CLAIMS = [
    C("rank 0", why="a rank's index (the first rank), wherever the page names it"),
    C("exit status 2", by_test="tests/test_astra_streams.py::test_command_line_exit_status_and_output",
      why="the same status as every netsim error"),
    C("RS on dimensions 0..k-1", why="dimension indices: the first k dimensions"),
    C("ns per packet bundle (default 10); times `--injection-scale` only when given; sub-group rings use "
      "ASTRA-sim's fixed 10 ns", _endpoint_default),
    C("(must be > 0 then)", why="a bound on an input (a positive bandwidth)"),
    C("(`preferred-dataset-splits` 1)", why="an input's value: one chunk"),
    C("`model-shared-bus` 1 |", why="an input's value: the legacy bus switched on"),
    C('(`"1.0"` is group 1)', why="a group's name"),
    C("with 10 ns bundles, and logs", _local_ring),
    C("(ranks 0 and 1 all-reduce on group {0, 1}, then all four ranks all-reduce on the world; or two groups whose "
      "all-reduces cut into 5 and 4 chunks)",
      why="an example's inputs (rank indices and chunk counts; tests/test_astra_streams.py runs such cases)"),
    C("with **exit status 0** and no `finished` line",
      by_test="tests/test_astra_streams.py::test_command_line_exit_status_and_output",
      why="ASTRA-sim's own exit status when it hangs (its source: no error path), which netsim does not copy"),
    C("**netsim's exit status on such a hang (and on any deadlock) is 2**, not ASTRA-sim's 0",
      by_test="tests/test_astra_streams.py::test_command_line_exit_status_and_output"),
    C("(Ring: shorter direction; FullyConnected 1 hop; Switch 2 hops)", _hops),
    C("(any sizes >= 2, in JSON member order, 10 ns bundles", lambda: [2, *_local_ring()],
      why="2: a group has at least two members (a ring)"),
    C("the time-ordered engine keeps 9 bytes per message, 2.4 GB at the cap", _message_cap),
    C("link latencies (0 included)", why="an input the hypothesis test draws (a zero latency)"),
    C("the benchmark's `groups+world` shape at 8 and 24 NPUs", _timed_sizes),
    C("(`tests/test_astra_general.py` checks this on the general case at 16 NPUs)",
      by_test="tests/test_astra_general.py::test_cost_benchmark_counts_switch_arrivals_and_their_order_matters"),
    C('(first 8, then "and N more"), exit status 2 (ASTRA-sim: 0)',
      lambda: [*_stuck_listed(), 2, 0], why="0: ASTRA-sim's exit status on a deadlock (it has no error path)"),
    C("event at t = 0 (an endpoint delay of 0 ns, e.g. after `--injection-scale`) makes ASTRA-sim abort (its "
      "`EventQueue::proceed` asserts every event time is > 0)",
      why="the condition ASTRA-sim's assertion tests (an event at time zero), in its terms"),
    C("ASTRA-sim's reference output (117,780 ns, every line)",
      by_test="tests/test_astra_exact.py::test_rt_template_reference_stdout", traces=True),
    C("at 4, 8 and 16 NPUs", _micro_sizes),
    C("64,440 ns for `Ring_4chunks.json`", by_test="tests/test_astra_exact.py::test_shipped_ring_config_64440",
      traces=True),
    C("halving-doubling (63,168 ns)", by_test="tests/test_astra_exact.py::test_halving_doubling_closed_form",
      traces=True),
    C("direct (15,944 ns)", by_test="tests/test_astra_exact.py::test_direct_closed_form_on_switch", traces=True),
    C("(111,408 ns)", by_test="tests/test_astra_exact.py::test_two_dimensional_local_bw_aware_pipeline",
      traces=True),
    C("T2D 165,080 ns exposed", by_test="tests/test_astra_features.py::test_t2d_row_and_column_groups", traces=True),
    C("T3D 159,045 ns", by_test="tests/test_astra_features.py::test_t3d_two_rank_groups", traces=True),
    C("the custom MSCCL ring (90,174 ns)", by_test="tests/test_astra_features.py::test_custom_collective_ring",
      traces=True),
    C("`python benchmarks/bench_astra.py`: 1 MiB ring all-reduce", lambda: [1]),
    C("| 1,024 | symmetric | 8,298,616 |", _bench_astra(1024)),
    C("| 4,096 | symmetric | 33,120,400 |", _bench_astra(4096)),
    C("1-D Switch, 50 GiB/s, 500 ns; each case in a fresh process). `uneven`: per-rank compute of rank-dependent "
      "length, then a 1 MiB ring all-reduce on the world. `groups`: uneven compute, a 1 MiB all-reduce and a 256 "
      "KiB all-gather on the rank's comm group (sizes 2, 4, ..., n/8 side by side). `groups+world`: then a 1 MiB",
      _scale_setup),
    *_scale_claims(),
    C("the 1,024-NPU congestion-aware `groups+world` run went to the full engine; it now runs batched",
      lambda: _scale_row(1024, "congestion-aware", "groups+world", "batched")()[:1], slow=True),
    C("every batched run at 64 and 256 NPUs, all three workloads and both models, gives the full engine's",
      _full_check((64, 256)), slow=True),
    C("At 1,024 NPUs the `groups+world` congestion-aware case is checked the same way",
      _full_check((1024,), ("--shapes", "groups+world", "--models", "congestion-aware")), slow=True),
    C("`general`: 64 NPUs on a 1-D Switch, per-rank compute, a 1 MiB `doubleBinaryTree` all-reduce, a 1 MiB "
      "`direct` all-gather and a 1 MiB `halvingDoubling` reduce-scatter, 64 dataset splits, 4 active chunks per "
      "dimension. `sequence`: 32 NPUs on a 1-D Ring, eight rounds of uneven compute, a 256 KiB `direct` all-reduce "
      "and a 64 KiB `halvingDoubling` all-gather, 16 splits, 2 active chunks", _general_cases),
    C("(counting again from 0 pairs the same messages", why="a counter's start value"),
    C("(issue 38, item 1)", why="the issue and item that ask for it"),
]
