"""Replica symmetry found in Chakra file sets (netsim run --workload, --symmetry auto|none)."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.chakra import EtNode, NodeType, read_et, write_et, write_workload
from netsim.chakra.canonical import scan_workload
from netsim.chakra.groups import CommGroups, load_groups
from netsim.chakra.schema import CommType
from netsim.errors import InputError
from netsim.workload.file_symmetry import find_replicas
from netsim.workload.generate.llm import ModelSpec, write_llm_workload
from netsim.workload.simulation import simulate

from conftest import need_traces

TINY = ModelSpec("tiny", layers=4, hidden=1024, ffn=4096, heads=8, vocab=1000)
SUPERPOD = "topologies/h100-superpod-1su.yaml"


@pytest.fixture(scope="module")
def llm(tmp_path_factory):
    """TP2 PP2 DP4 (16 ranks, every file different): 4 replicas of 4 ranks."""
    out = tmp_path_factory.mktemp("llm")
    prefix = write_llm_workload(out, TINY, tp=2, pp=2, dp=4, microbatches=4, seq=1024)
    return prefix, out / "comm_groups.json"


def _both(prefix, groups, model="flow", **kw):
    a = simulate(SUPERPOD, str(prefix), str(groups), model, **kw)
    b = simulate(SUPERPOD, str(prefix), str(groups), model, symmetry="none", **kw)
    return a, b


@pytest.mark.parametrize("model", ["flow", "analytical"])
def test_generated_files_dedup_equals_full_run(llm, model):
    a, b = _both(*llm, model=model)
    assert a.run.replicas is not None and len(a.run.ranks) == 4 and len(b.run.ranks) == 16
    np.testing.assert_allclose(a.finish, b.finish, rtol=1e-9, atol=0)
    np.testing.assert_allclose(a.compute, b.compute, rtol=1e-9, atol=0)
    assert a.finish.size == 16
    assert any(n.startswith("file symmetry: 16 ranks, 16 distinct files") and "4 replicas of 4 ranks" in n
               for n in a.notes), a.notes
    assert not any("file symmetry" in n for n in b.notes)
    assert b.config["symmetry"] == "none" and "symmetry" not in a.config
    # the representatives are the generator's: data-parallel rank 0 of every stage
    assert a.run.replicas.reps.tolist() == [0, 1, 8, 9]


def test_generated_files_same_as_llm_path(llm):
    from netsim.workload.llmrun import simulate_llm

    a = simulate(SUPERPOD, str(llm[0]), str(llm[1]), "flow")
    b = simulate_llm(SUPERPOD, TINY, tp=2, pp=2, dp=4, microbatches=4, seq=1024)
    np.testing.assert_allclose(a.finish, b.finish, rtol=1e-9, atol=0)
    np.testing.assert_array_equal(a.run.replicas.perms, b.run.replicas.perms)


def test_memory_holds_representatives_only(llm):
    scan = scan_workload(llm[0])
    assert scan.kept == {} and scan.distinct_files == 16 and all(sig.fast for sig in scan.sigs)
    rep, _ = find_replicas(scan, CommGroups(json.loads(Path(llm[1]).read_text()), scan.world))
    tables = scan.tables(rep.reps)
    assert sorted(tables) == rep.reps.tolist() and len(scan.kept) == 4


def _straggle(prefix: Path, rank: int, factor: float) -> None:
    """Bake a straggler into one rank's file: its compute takes ``factor`` x as long."""
    path = Path(f"{prefix}.{rank}.et")
    trace = read_et(path, other=True)
    for n in trace.nodes:
        if n.type == NodeType.COMP_NODE:
            n.duration_micros = int(n.duration_micros * factor)
            if n.num_ops:
                n.num_ops = int(n.num_ops * factor)
    path.unlink()  # the writer may have linked identical files: replace this one only
    write_et(path, trace.nodes, metadata_version=trace.metadata.version, metadata_attrs=trace.metadata.attrs)


def test_straggler_in_file_refused_with_reason(llm, tmp_path):
    src = Path(llm[0]).parent
    for f in src.iterdir():
        shutil.copy(f, tmp_path / f.name)
    prefix = tmp_path / Path(llm[0]).name
    _straggle(prefix, 13, 1.5)
    a, b = _both(prefix, tmp_path / "comm_groups.json", model="analytical")
    note = next(n for n in a.notes if n.startswith("file symmetry not found"))
    # precise: which rank, which representative, which node and field, and that it is the only one
    assert "rank 13's trace is not rank 9's renamed to replica 2" in note, note
    assert "num_ops" in note and "it is the only rank that differs" in note, note
    assert a.run.replicas is None and len(a.run.ranks) == 16
    np.testing.assert_array_equal(a.finish, b.finish)
    assert a.finish[13] > a.finish[9] * 0 and a.finish.max() > simulate(
        SUPERPOD, str(llm[0]), str(llm[1]), "analytical").finish.max()


def _coll(i, pg, size=1 << 20, deps=()):
    return EtNode(i, f"ar{i % 100}", int(NodeType.COMM_COLL_NODE), comm_type=int(CommType.ALL_REDUCE), comm_size=size,
                  pg_name=pg, is_cpu_op=False, data_deps=deps)


def test_ring_of_sends_is_one_replica(tmp_path):
    # rank r sends to r+1 and receives from r-1: every rank is joined to every other
    per = [[EtNode(1, "s", int(NodeType.COMM_SEND_NODE), comm_src=r, comm_dst=(r + 1) % 4, comm_size=64),
            EtNode(2, "r", int(NodeType.COMM_RECV_NODE), comm_src=(r - 1) % 4, comm_dst=r, comm_size=64)]
           for r in range(4)]
    write_workload(tmp_path / "w", per)
    res = simulate(SUPERPOD, str(tmp_path / "w"), None, "analytical")
    assert res.run.replicas is None
    assert any("do not split into two or more equal replicas" in n for n in res.notes), res.notes


def test_ids_and_group_names_renamed(tmp_path):
    # 2 replicas of 2 ranks: TP groups "10"/"11" (local), DP groups "20"/"21" (span replicas); node
    # ids differ per rank (id = 100 * rank + i): the same trace up to renaming
    tp = {0: "10", 1: "10", 2: "11", 3: "11"}
    dp = {0: "20", 2: "20", 1: "21", 3: "21"}
    per = [[EtNode(100 * r, "c", int(NodeType.COMP_NODE), duration_micros=5 + 5 * (r % 2)),
            _coll(100 * r + 1, tp[r], deps=(100 * r,)), _coll(100 * r + 2, dp[r], 8 << 20, deps=(100 * r + 1,))]
           for r in range(4)]
    write_workload(tmp_path / "w", per)
    groups = {"10": [0, 1], "11": [2, 3], "20": [0, 2], "21": [1, 3]}
    (tmp_path / "g.json").write_text(json.dumps(groups))
    a, b = _both(tmp_path / "w", tmp_path / "g.json")
    assert a.run.replicas.reps.tolist() == [0, 1]
    np.testing.assert_allclose(a.finish, b.finish, rtol=1e-9, atol=0)
    # renaming a TP group so that rank 2 joins rank 0's group breaks it: refused, with the group named
    per[2][1] = _coll(201, "12", deps=(200,))
    groups["12"] = [2, 3]
    write_workload(tmp_path / "v", per)
    (tmp_path / "h.json").write_text(json.dumps(groups))
    scan = scan_workload(tmp_path / "v")
    rep, note = find_replicas(scan, CommGroups(groups, 4))
    assert rep is None and "file symmetry not found" in note and "where the other ranks renamed from '10' use" in note, note


def test_bad_symmetry_value(llm):
    with pytest.raises(InputError, match="expected one of auto, approximate, none"):
        simulate(SUPERPOD, str(llm[0]), str(llm[1]), "flow", symmetry="maybe")


def test_cli_symmetry_flag(llm, capsys):
    from netsim.cli import main

    assert main(["run", "--topology", SUPERPOD, "--workload", str(llm[0]), "--comm-groups", str(llm[1]),
                 "--model", "analytical", "--json", "-q"]) == 0
    auto = json.loads(capsys.readouterr().out)
    assert main(["run", "--topology", SUPERPOD, "--workload", str(llm[0]), "--comm-groups", str(llm[1]),
                 "--model", "analytical", "--json", "-q", "--symmetry", "none"]) == 0
    none = json.loads(capsys.readouterr().out)
    assert auto["iteration_us"] == pytest.approx(none["iteration_us"], rel=1e-9)
    assert any("file symmetry:" in n for n in auto["notes"]) and not any("symmetry" in n for n in none["notes"])
    assert main(["run", "--topology", SUPERPOD, "--workload", str(llm[0]), "--symmetry", "sideways"]) == 2


def _real(*parts):
    return need_traces(*parts)


@pytest.mark.parametrize("model", ["flow", "analytical"])
def test_real_trace_2d_torus(model):
    # shuoshuc/astra-sim-artifacts T2D: 16 ranks, row all-reduce, 100 us compute, column all-reduce
    base = _real("shuoshuc__astra-sim-artifacts", "examples", "T2D-analytical")
    topo, groups = str(base / "inputs" / "network.yml"), str(base / "inputs" / "comm_group.json")
    a = simulate(topo, str(base / "trace" / "trace"), groups, model)
    b = simulate(topo, str(base / "trace" / "trace"), groups, model, symmetry="none")
    assert a.run.replicas is not None and a.run.replicas.count == 4
    np.testing.assert_allclose(a.finish, b.finish, rtol=1e-9, atol=0)


def test_real_trace_microbenchmark_ids_differ():
    # ASTRA-sim's all_reduce/8npus_1MB: node id = rank (rank 0 omits it); one world all-reduce
    base = _real("astra-sim__astra-sim", "examples", "workload", "microbenchmarks", "all_reduce", "8npus_1MB")
    topo = str(_real("astra-sim__astra-sim", "examples", "network", "analytical", "Ring_8npus.yml"))
    a = simulate(topo, str(base / "all_reduce"), None, "analytical")
    b = simulate(topo, str(base / "all_reduce"), None, "analytical", symmetry="none")
    assert a.run.replicas is not None and a.run.replicas.reps.tolist() == [0]
    np.testing.assert_allclose(a.finish, b.finish, rtol=1e-9, atol=0)


def test_scan_same_with_process_pool(llm):
    one, two = scan_workload(llm[0], jobs=1), scan_workload(llm[0], jobs=2)
    np.testing.assert_array_equal(one.file_of, two.file_of)
    assert [s.body for s in one.sigs] == [s.body for s in two.sigs] and one.sources == two.sources
    for a, b in zip(one.sigs, two.sigs):
        np.testing.assert_array_equal(a.src, b.src)
        assert a.pg_names == b.pg_names


def test_bad_file_one_line_also_from_workers(llm, tmp_path, capsys):
    from netsim.cli import main

    for f in Path(llm[0]).parent.iterdir():
        shutil.copy(f, tmp_path / f.name)
    (tmp_path / "llm.7.et").write_bytes(b"\x05abc")
    for jobs in (1, 2):
        with pytest.raises(InputError, match=r"llm\.7\.et: record\[0\]: truncated record"):
            scan_workload(tmp_path / "llm", jobs=jobs)
    assert main(["run", "--topology", SUPERPOD, "--workload", str(tmp_path / "llm"), "--comm-groups",
                 str(tmp_path / "comm_groups.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "llm.7.et" in err[0] and "Traceback" not in err[0]


def test_stragglers_and_placement_switch_it_off(llm):
    a = simulate(SUPERPOD, str(llm[0]), str(llm[1]), "analytical", stragglers=["3:2"])
    assert a.run.replicas is None and any(n.startswith("file symmetry off: stragglers") for n in a.notes)
    b = simulate(SUPERPOD, str(llm[0]), str(llm[1]), "analytical", placement="strided:2")
    assert b.run.replicas is None and any("placement is not packed" in n for n in b.notes)


def _verdict(prefix, groups):
    out = []
    for fast in (True, False):
        scan = scan_workload(prefix, fast=fast)
        rep, note = find_replicas(scan, CommGroups(groups, scan.world) if isinstance(groups, dict)
                                  else load_groups(groups, {}, scan.world, declared=scan.declarations()))
        out.append((None if rep is None else (rep.reps.tolist(), rep.perms.tolist()),
                    note.split(": ", 1)[0].split(" (")[0]))
    return out


def _mutations(src: Path, tmp_path: Path):
    """Copies of a generated set with one file changed: (label, prefix)."""
    import random

    rng = random.Random(7)
    for k in range(6):
        d = tmp_path / f"m{k}"
        d.mkdir()
        for f in src.parent.iterdir():
            shutil.copy(f, d / f.name)
        rank = rng.randrange(1, 16)
        path = d / f"{src.name}.{rank}.et"
        trace = read_et(path, other=True)
        n = trace.nodes[rng.randrange(len(trace.nodes))]
        what = ("duration_micros", "comm_dst", "pg_name", "name", "id", "num_ops")[k]
        if what == "id":  # renumber every node (a renaming: still symmetric)
            for m in trace.nodes:
                m.id += 1000
                m.data_deps = tuple(x + 1000 for x in m.data_deps)
                m.ctrl_deps = tuple(x + 1000 for x in m.ctrl_deps)
        elif what == "comm_dst":
            n = next(m for m in trace.nodes if m.comm_dst is not None and m.type == NodeType.COMM_SEND_NODE)
            n.comm_dst = (n.comm_dst + 2) % 16
        elif what == "pg_name":
            n = next(m for m in trace.nodes if m.pg_name)
            n.pg_name = "0"
        elif what == "name":
            n.name += "x"
        else:
            setattr(n, what, (getattr(n, what) or 0) + 1)
        path.unlink()
        write_et(path, trace.nodes, metadata_version=trace.metadata.version, metadata_attrs=trace.metadata.attrs)
        yield what, d / src.name


def test_fast_signatures_agree_with_decoded(llm, tmp_path):
    # the signature from bytes is only an accelerator: the verdict is the decoded one's
    prefix, groups = Path(llm[0]), Path(llm[1])
    fast, full = _verdict(prefix, groups)
    assert fast == full and fast[0] is not None
    for what, mutated in _mutations(prefix, tmp_path):
        fast, full = _verdict(mutated, groups)
        assert fast == full, what
        assert (fast[0] is not None) == (what == "id"), (what, fast[1])


def test_tp_equal_to_dp_prefers_data_parallel_replicas(tmp_path):
    # TP2 DP2: TP and DP groups both have 2 ranks; the DP groups (wider spacing) span the replicas
    prefix = write_llm_workload(tmp_path, TINY, tp=2, pp=1, dp=2, microbatches=2, seq=512)
    a, b = _both(prefix, tmp_path / "comm_groups.json", model="analytical")
    assert a.run.replicas.reps.tolist() == [0, 1]
    np.testing.assert_allclose(a.finish, b.finish, rtol=1e-9, atol=0)


def test_real_traces_3d_torus_and_ring_of_sends():
    # T3D: 8 ranks, three two-rank all-reduces (group "0" = [0, 1] is a subgroup); the custom ring
    # all-reduce: every rank sends to the next, so the ranks form one replica and nothing is de-duplicated
    base = _real("shuoshuc__astra-sim-artifacts", "examples", "T3D-analytical")
    topo, groups = str(base / "inputs" / "network.yml"), str(base / "inputs" / "comm_group.json")
    a = simulate(topo, str(base / "trace" / "trace"), groups, "analytical")
    b = simulate(topo, str(base / "trace" / "trace"), groups, "analytical", symmetry="none")
    assert a.run.replicas is not None and a.run.replicas.count >= 2
    np.testing.assert_allclose(a.finish, b.finish, rtol=1e-9, atol=0)
    ring = _real("astra-sim__astra-sim", "examples", "system", "custom_collectives",
                 "custom_ring_allreduce_8npus_1MB")
    c = simulate(str(_real("astra-sim__astra-sim", "examples", "network", "analytical", "Ring_8npus.yml")),
                 str(ring / "custom_allreduce"), None, "analytical")
    assert c.run.replicas is None and any("do not split" in n for n in c.notes), c.notes


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000))
def test_components_match_a_breadth_first_search(seed):
    from collections import deque

    from netsim.workload.file_symmetry import _components
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    e = int(rng.integers(0, 50))
    a, b = rng.integers(0, n, e), rng.integers(0, n, e)
    local = [rng.permutation(n)[:int(rng.integers(1, n + 1))] for _ in range(int(rng.integers(0, 3)))]
    adj = [set() for _ in range(n)]
    for x, y in list(zip(a.tolist(), b.tolist())) + [(int(m[i]), int(m[i + 1])) for m in local for i in range(m.size - 1)]:
        adj[x].add(y)
        adj[y].add(x)
    ref, k = [-1] * n, 0
    for start in range(n):  # components numbered by their lowest rank
        if ref[start] < 0:
            ref[start], queue = k, deque([start])
            while queue:
                for y in adj[queue.popleft()]:
                    if ref[y] < 0:
                        ref[y] = k
                        queue.append(y)
            k += 1
    assert _components(n, (a, b), local).tolist() == ref
