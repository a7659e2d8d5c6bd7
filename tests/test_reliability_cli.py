"""Issue 36, the command line: every reproducer is one line on stderr naming the flag or file, exit 2,
no traceback; integers are read as ASCII digits within bounds, sizes are estimated before allocating,
and routing around failed switches is vectorized (same paths)."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from netsim.chakra import EtNode, NodeType, write_et
from netsim.cli import main
from netsim.errors import InputError

REPO = Path(__file__).resolve().parents[1]
TOPO = str(REPO / "topologies/dgx-h100.yaml")
SU = str(REPO / "topologies/h100-superpod-1su.yaml")
MOE = ["bench", "--topology", TOPO, "--op", "moe_dispatch", "--gpus", "8", "--tokens", "64", "--hidden", "512",
       "--topk", "2", "--experts", "16"]
RUN = ["run", "--topology", TOPO, "--llm", "llama3-70b", "--tp", "2", "--pp", "2", "--dp", "2"]
BIG = "9223372036854775808"  # 2**63: one past int64


def fails(argv, capsys, *needles) -> str:
    """Run the CLI in this process: exit 2, one line on stderr naming every needle, no traceback."""
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("netsim: error: ") and "\n" not in err and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err
    return err


# ------------------------------------------------------------------ tracebacks: integers used unbounded
@pytest.mark.parametrize("flag, value", [("--seed", "-1"), ("--tokens", BIG)])
def test_moe_integer_flags(capsys, flag, value):
    args = [a for a in MOE]
    if flag in args:
        args[args.index(flag) + 1] = value
    else:
        args += [flag, value]
    fails(args, capsys, flag, "expected an integer in")


@pytest.mark.parametrize("command", ["bench", "run"])
def test_placement_file_beyond_int64(tmp_path, capsys, command):
    f = tmp_path / "gpus.txt"
    f.write_text(f"0\n{BIG}\n")
    argv = (["bench", "--topology", TOPO, "--op", "all_reduce", "--gpus", "2"] if command == "bench" else RUN)
    fails([*argv, "--placement", str(f)], capsys, "gpus.txt", "line 2", "integer GPU ids in 0..")


def test_llm_seq_beyond_int64(capsys):
    fails([*RUN, "--seq", "4611686018427387904"], capsys, "--seq", "expected an integer in 1..")


def test_llm_seq_whose_nodes_overflow_int64(capsys):
    """In bounds alone, but the core attention's operations exceed Chakra's int64 attributes."""
    fails([*RUN, "--seq", "2147483647"], capsys, "--seq", "2**63-1")


@pytest.mark.parametrize("dry_run", [True, False])
def test_sweep_path_with_nul_byte(tmp_path, capsys, dry_run):
    s = tmp_path / "s.yaml"
    s.write_text(f'kind: bench\nbase: {{topology: "{TOPO}\\0x", op: all_reduce, size: 1M}}\n')
    argv = ["sweep", str(s), "--out", str(tmp_path / "out")] + (["--dry-run"] if dry_run else [])
    fails(argv, capsys, "s.yaml", "base.topology", "NUL")


@pytest.mark.parametrize("argv, flag", [
    (["bench", "--topology", TOPO, "--op", "all_reduce", "--gpus", "\u0663"], "--gpus"),
    (["bench", "--topology", TOPO, "--op", "all_reduce", "--channels", "1" * 30], "--channels"),
    (["bench", "--topology", TOPO, "--op", "all_reduce", "-f", "\u0662"], "--stepfactor"),
    ([*RUN[:-6], "--tp", "\u0662", "--pp", "2", "--dp", "2"], "--tp"),
    ([*RUN, "--microbatches", "1_000"], "--microbatches"),
    ([*RUN, "--streams", "0"], "--streams"),
    (["workload", "llm", "--llm", "llama3-70b", "--tp", "2", "--pp", "2", "--dp", "2", "--seq", "\u0664", "--out", "o"],
     "--seq"),
    (["analyze", ".", "--top", "\u0665"], "--top"),
    (["sweep", "s.yaml", "--out", "o", "--jobs", "\u0662"], "--jobs"),
], ids=["gpus", "channels", "stepfactor", "tp", "underscore", "streams", "workload-seq", "top", "sweep-jobs"])
def test_every_integer_flag_reads_ascii_digits_within_bounds(capsys, argv, flag):
    fails(argv, capsys, flag, "expected")


# ------------------------------------------------------------------ runaway memory: estimated first
def _limited(argv: list[str]) -> tuple[subprocess.CompletedProcess, float]:
    """``netsim ARGV`` in a child limited to 1 GiB of address space."""
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30)); "
            "from netsim.cli import main; sys.exit(main(sys.argv[1:]))")
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120,
                          env=env, cwd=REPO)
    return proc, time.perf_counter() - t0


@pytest.mark.parametrize("argv, flag", [
    ([*RUN, "--microbatches", "100000000"], "--microbatches"),
    ([*MOE[:7], "--tokens", "100000000"], "--tokens"),
], ids=["microbatches", "tokens"])
def test_runaway_memory_refused_with_the_estimate(argv, flag):
    proc, wall = _limited(argv)
    err = proc.stderr.strip()
    assert proc.returncode == 2 and "\n" not in err and "Traceback" not in err, err
    assert flag in err and "GiB of memory" in err and "available" in err, err
    assert wall < 30, wall  # refused up front (the allocation took minutes before)


def test_memory_estimates_scale_with_the_input():
    """The estimates are of the work asked for: more microbatches or tokens, proportionally more."""
    from netsim.collectives.moe import BYTES_PER_COPY, check_memory
    from netsim.workload.generate.plan import plan_llm

    small, large = (plan_llm("llama3-70b", tp=2, pp=2, dp=2, seq=4096, microbatches=m) for m in (4, 400))
    assert large.nodes_estimate() == pytest.approx(100 * small.nodes_estimate(), rel=0.02)
    assert len(small.nodes(0)) <= small.nodes_estimate() <= 1.05 * len(small.nodes(0))
    check_memory(8, 4096, 8)  # DeepEP's benchmark fits
    with pytest.raises(InputError, match="--tokens: routing 8 ranks"):
        check_memory(8, (1 << 50) // (8 * 8 * BYTES_PER_COPY), 8)


# ------------------------------------------------------------------ the near-hang: failed NVSwitches
def _reference_paths(router, src, dst, key):
    """The per-pair walk the vectorized router replaced (netsim before issue 36), for comparison."""
    from netsim.topology.model import mix_hash

    ptr, links = router._in
    out = []
    for s, d, k in zip(src.tolist(), dst.tolist(), key.tolist()):
        v, path = int(router.gpus[d]), []
        dist = router._bfs(int(router.gpus[s]))
        while dist[v] > 0:
            inl = links[ptr[v]:ptr[v + 1]]
            preds = inl[dist[router.link_src[inl]] == dist[v] - 1]
            pick = int(preds[int(mix_hash(np.int64(s), np.int64(d), np.int64(k), np.int64(len(path)))
                                 % np.uint64(preds.size))])
            path.append(pick)
            v = int(router.link_src[pick])
        out.append(path[::-1])
    return out


def test_failed_nvswitches_route_fast_and_unchanged():
    from netsim.topology.model import NODE_KINDS
    from netsim.topology.spec import load_topology
    from netsim.workload.fault_routing import FaultRouter

    topo = load_topology(SU)
    nvs = np.flatnonzero(topo.node_kind == NODE_KINDS.index("nvswitch"))
    router = FaultRouter(topo, np.isin(topo.link_src, nvs) | np.isin(topo.link_dst, nvs), topo.n_gpus)
    src, dst = (a.ravel() for a in np.meshgrid(np.arange(topo.n_gpus), np.arange(topo.n_gpus), indexing="ij"))
    src, dst = src[src != dst], dst[src != dst]
    key = np.random.default_rng(0).integers(-2**62, 2**62, src.size)
    t0 = time.perf_counter()
    ip, lk = router._shortest(src, dst, key)  # every pair of the 256 GPUs (45 s before, per pair)
    assert time.perf_counter() - t0 < 15
    pick = np.random.default_rng(1).choice(src.size, 300, replace=False)
    ref = _reference_paths(router, src[pick], dst[pick], key[pick])
    assert [lk[ip[i]:ip[i + 1]].tolist() for i in pick] == ref
    ip2, lk2 = router.routes(src[pick], dst[pick], key[pick])  # detours first, then these paths
    assert ip2.size == pick.size + 1 and not router.failed[lk2].any()
    mixed = np.concatenate([pick[:100], np.random.default_rng(2).choice(src.size, 100)])  # remembered and new
    fresh = FaultRouter(topo, router.failed, topo.n_gpus).routes(src[mixed], dst[mixed], key[mixed])
    again = router.routes(src[mixed], dst[mixed], key[mixed])
    assert all(np.array_equal(a, b) for a, b in zip(again, fresh))


# ------------------------------------------------------------------ accepted nonsense, refused
@pytest.mark.parametrize("value", ["-1", '"4"', "[2]", "null", "1.5"])
def test_astra_remote_memory_counts(traces, tmp_path, capsys, value):
    m = tmp_path / "mem.json"
    m.write_text('{"memory-type": "PER_NPU_MEMORY_EXPANSION", "remote-mem-latency": 100, "remote-mem-bw": 50, '
                 f'"num-nodes": {value}}}')
    d = traces / "astra-sim__astra-sim/tests/rt_template/inputs"
    mb = traces / "astra-sim__astra-sim/examples/workload/microbenchmarks/all_reduce/8npus_1MB/all_reduce"
    fails(["astra", f"--workload-configuration={mb}", f"--system-configuration={d / 'system_cfg.json'}",
           f"--network-configuration={d / 'network_cfg.yml'}", f"--remote-memory-configuration={m}"], capsys,
          "mem.json", "num-nodes", "non-negative integer")


def _trace(tmp_path, first, name="w"):
    good = [EtNode(1, "ar", NodeType.COMM_COLL_NODE, comm_type=0, comm_size=1024)]
    for r, nodes in enumerate((first, good)):
        write_et(tmp_path / f"{name}.{r}.et", nodes)
    return str(tmp_path / name)


@pytest.mark.parametrize("node", [EtNode(1, "ar", NodeType.COMM_COLL_NODE, comm_type=0),
                                  EtNode(1, "send", NodeType.COMM_SEND_NODE, comm_src=0, comm_dst=1)],
                         ids=["collective", "send"])
def test_chakra_node_without_comm_size(tmp_path, capsys, node):
    fails(["run", "--topology", TOPO, "--workload", _trace(tmp_path, [node])], capsys, "w.0.et",
          "node 1", "comm_size")


def test_chakra_inspect_negative_size(tmp_path, capsys):
    p = _trace(tmp_path, [EtNode(1, "ar", NodeType.COMM_COLL_NODE, comm_type=0, comm_size=-1)])
    err = fails(["trace", "inspect", p], capsys, "w.0.et", "node 1", "comm_size", ">= 0")
    assert "-1 B" not in err


def test_real_traces_still_run(traces):
    """Host-side collectives of PyTorch traces have no comm_size: they stay runnable, as every real
    trace that decodes does."""
    from netsim.chakra import read_et_table
    from netsim.chakra.check import check_runnable

    checked = 0
    for f in sorted(glob.glob(str(traces / "**/*.et"), recursive=True)):
        try:
            table = read_et_table(f)
        except InputError:  # pre-GlobalMetadata files are refused by the decoder, as before
            continue
        check_runnable(table)
        checked += 1
    assert checked > 200
    assert main(["run", "--topology", TOPO, "--workload", str(traces / "mlcommons__chakra/tests/data/chakra.0.et"),
                 "--json"]) == 0


@pytest.mark.parametrize("flag, value", [("--z", "nan"), ("--z", "inf"), ("--z", "-1"), ("--pct", "-5"),
                                         ("--pct", "1e999")])
def test_analyze_thresholds(capsys, flag, value):
    fails(["analyze", ".", flag, value], capsys, flag, "expected")


@pytest.mark.parametrize("value, needle", [("gemm=0.5,gemm=0.6", "given twice"), ("gemm=0.5,,attn_fwd=0.6", "empty item"),
                                           ("gemm=0.5,", "empty item"), ("gemm=\u0660.\u0665", "got")])
def test_compute_efficiency_items(capsys, value, needle):
    fails([*RUN, "--compute-efficiency", value], capsys, "--compute-efficiency", needle)


@pytest.mark.parametrize("command", ["bench", "run"])
@pytest.mark.parametrize("spec", ["random:", "random:\u0663", f"random:{BIG}", "strided:"])
def test_placement_spec_needs_its_number(capsys, command, spec):
    argv = ["bench", "--topology", TOPO, "--op", "all_reduce"] if command == "bench" else RUN
    fails([*argv, "--placement", spec], capsys, "--placement", repr(spec))


@pytest.mark.parametrize("flag, value", [("--channels", "0"), ("--channels", "4"), ("--proto", "LL"), ("-b", "1M")])
def test_moe_ops_refuse_nccl_flags(capsys, flag, value):
    fails([*MOE, flag, value], capsys, flag)


def test_straggler_ascii_rank(capsys):
    fails([*RUN, "--straggler", "\u0663:2"], capsys, "--straggler", "RANK:FACTOR")


@pytest.mark.parametrize("body", ["", "# nothing\n", "seed: 3\n", "compute: []\n"], ids=["empty", "comment", "seed", "no-rule"])
def test_faults_file_without_a_fault(tmp_path, capsys, body):
    f = tmp_path / "f.yaml"
    f.write_text(body)
    fails([*RUN, "--faults", str(f)], capsys, "f.yaml", "expected")


def test_valid_inputs_still_run(capsys):
    """The same commands with valid values run (the checks refuse only what they should)."""
    assert main([*MOE, "--seed", "7"]) == 0
    assert main(["bench", "--topology", TOPO, "--op", "all_reduce", "--placement", "random:3", "--gpus", "4",
                 "-b", "1M"]) == 0
    assert "all_reduce" in capsys.readouterr().out
