"""The fast LLM workload writer (netsim.workload.generate.writer) and run --llm's in-memory tables.

The reference is the plain path: ``generate_llm`` -> ``write_workload`` (protobuf-encoded
EtNodes) and ``read_et_table`` on its files.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netsim.chakra import read_et_table, write_workload
from netsim.cli import main
from netsim.errors import InputError
from netsim.workload.generate import writer
from netsim.workload.generate.llm import ModelSpec, generate_llm
from netsim.workload.generate.plan import plan_llm
from netsim.workload.generate.template import RankTemplate
from netsim.workload.generate.writer import parse_ranks, write_llm_files
from netsim.workload.llmrun import generate_tables, simulate_llm
from netsim.workload.simulation import simulate

TINY = ModelSpec("tiny", layers=4, hidden=256, ffn=1024, heads=4, vocab=1000)
MOE = ModelSpec("tiny-moe", layers=4, hidden=256, ffn=512, heads=4, vocab=1000, experts=4, top_k=2, expert_ffn=256)
CONFIGS = [
    dict(spec=TINY, tp=2, pp=2, dp=2, microbatches=2, seq=128),
    dict(spec=TINY, tp=2, pp=2, dp=2, cp=2, microbatches=4, seq=128, schedule="interleaved", recompute="full"),
    dict(spec=MOE, tp=1, pp=2, dp=4, ep=2, microbatches=2, seq=128, recompute="selective"),
    dict(spec=TINY, tp=1, pp=1, dp=4, microbatches=2, seq=128),  # every rank the same trace
]


def _reference(tmp_path, cfg):
    """The plain writer's folder: {file name: bytes}, groups of hard-linked names, comm groups."""
    cfg = dict(cfg)
    spec = cfg.pop("spec")
    nodes, groups = generate_llm(spec, **cfg)
    paths = write_workload(tmp_path / "ref" / "llm", nodes, metadata_attrs=plan_llm(spec, **cfg).metadata)
    return _contents(paths), groups


def _contents(paths):
    data = {p.name: p.read_bytes() for p in paths}
    inodes = {}
    for p in paths:
        inodes.setdefault(os.stat(p).st_ino, set()).add(p.name)
    return data, sorted(sorted(v) for v in inodes.values())


def _written(out):
    return sorted(out.glob("llm.*.et"))


@pytest.mark.parametrize("cfg", CONFIGS, ids=["1f1b", "interleaved-cp-full", "moe-ep", "identical"])
def test_same_bytes_and_links_as_the_plain_writer(tmp_path, cfg):
    (ref, ref_links), groups = _reference(tmp_path, cfg)
    gen = {k: v for k, v in cfg.items() if k != "spec"}
    rep = write_llm_files(tmp_path / "fast", cfg["spec"], jobs=1, **gen)
    data, links = _contents(_written(tmp_path / "fast"))
    assert data == ref and links == ref_links
    assert json.loads((tmp_path / "fast" / "comm_groups.json").read_text()) == groups
    assert rep.ranks == len(ref) and rep.files == len(ref_links)
    assert rep.nodes == sum(len(read_et_table(tmp_path / "fast" / n)) for n in ref)
    assert not list((tmp_path / "fast").glob(".*"))  # no temporary files left


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(tp=st.sampled_from([1, 2, 4]), pp=st.sampled_from([1, 2, 4]), dp=st.sampled_from([1, 2, 3]),
       cp=st.sampled_from([1, 2]), mb=st.sampled_from([1, 2, 4]), sched=st.sampled_from(["1f1b", "interleaved"]),
       recompute=st.sampled_from(["none", "selective", "full"]))
def test_templates_stamp_every_rank_exactly(tmp_path, tp, pp, dp, cp, mb, sched, recompute):
    """Any layout: every rank stamped from its stage's first rank equals the generator's own nodes."""
    if sched == "interleaved" and (pp < 2 or mb % pp or 2 * pp > TINY.layers):
        sched = "1f1b"
    plan = plan_llm(TINY, tp=tp, pp=pp, dp=dp, cp=cp, microbatches=mb, seq=128, schedule=sched,
                    recompute=recompute)
    nodes, _ = generate_llm(TINY, tp=tp, pp=pp, dp=dp, cp=cp, microbatches=mb, seq=128, schedule=sched,
                            recompute=recompute)
    stride = plan.world // pp
    for r in range(plan.world):
        tpl = RankTemplate.build(plan, r - r % stride)
        tpl.check(plan, r)
        expect = write_workload(tmp_path / f"h{r}", [nodes[r]])[0].read_bytes()
        assert tpl.encode(r, plan.member[r], {}) == expect[8:]  # after the 8-byte GlobalMetadata record


def test_check_catches_a_rank_that_is_not_a_stamp():
    plan = plan_llm(TINY, tp=2, pp=2, dp=2, microbatches=2, seq=128)
    tpl = RankTemplate.build(plan, 0)
    with pytest.raises(RuntimeError, match="rank 4 is not rank 0's trace"):
        tpl.check(plan, 4)  # another pipeline stage


def test_process_pool_and_batches_give_the_same_files(tmp_path, monkeypatch):
    cfg = dict(tp=1, pp=1, dp=8, microbatches=2, seq=128)
    write_llm_files(tmp_path / "one", TINY, jobs=1, **cfg)
    monkeypatch.setattr(writer, "BATCH", 3)  # batches inside a stage; identical files across batches
    monkeypatch.setattr(writer, "MIN_RANKS_PER_JOB", 1)
    rep = write_llm_files(tmp_path / "two", TINY, jobs=2, **cfg)
    assert rep.jobs == 2
    one, two = _contents(_written(tmp_path / "one")), _contents(_written(tmp_path / "two"))
    assert one == two and len(one[1]) == 1  # tp = pp = 1: one trace, hard-linked across batches


def test_ranks_subset(tmp_path):
    cfg = dict(tp=2, pp=2, dp=2, microbatches=2, seq=128)
    write_llm_files(tmp_path / "all", TINY, jobs=1, **cfg)
    rep = write_llm_files(tmp_path / "some", TINY, ranks="0-2, 6,5", jobs=1, **cfg)
    assert rep.ranks == 5 and [p.name for p in _written(tmp_path / "some")] == [f"llm.{r}.et" for r in (0, 1, 2, 5, 6)]
    for p in _written(tmp_path / "some"):
        assert p.read_bytes() == (tmp_path / "all" / p.name).read_bytes()
    assert (tmp_path / "some" / "comm_groups.json").read_bytes() == (tmp_path / "all" / "comm_groups.json").read_bytes()


@pytest.mark.parametrize("spec,match", [("x", "expected ranks and ranges"), ("", "expected ranks"),
                                        ("1,,2", "expected ranks"), ("-1", "expected ranks"),
                                        ("5-3", "range 5-3 is empty"), ("0-8", "rank 8 outside 0..7"),
                                        ("9" * 30, "outside 0..7")])
def test_parse_ranks_errors(spec, match):
    with pytest.raises(InputError, match=match) as exc:
        parse_ranks(spec, 8)
    assert str(exc.value).startswith("--ranks: ") and "\n" not in str(exc.value)


def test_cli_ranks_jobs_overwrite(tmp_path, capsys):
    out = tmp_path / "wl"
    base = ["workload", "llm", "--llm", "llama3-8b", "--tp", "2", "--pp", "2", "--dp", "2", "--out", str(out), "-q"]
    assert main(base + ["--jobs", "2"]) == 0
    assert "wrote 8 ranks" in capsys.readouterr().out
    before = {p.name: p.read_bytes() for p in _written(out)}
    assert main(base + ["--ranks", "0-3"]) == 2  # refuses to overwrite
    assert "pass --overwrite" in capsys.readouterr().err
    for bad in ("0-9", "a", "3-1"):
        assert main(base + ["--overwrite", "--ranks", bad]) == 2
        err = capsys.readouterr().err
        assert "--ranks: " in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert main(base + ["--overwrite", "--jobs", "0"]) == 2 and "--jobs" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in _written(out)} == before  # bad flags wrote nothing
    assert main(base + ["--overwrite", "--ranks", "0-1,7"]) == 0
    assert "wrote 3 of 8 ranks" in capsys.readouterr().out
    assert [p.name for p in _written(out)] == ["llm.0.et", "llm.1.et", "llm.7.et"]  # the replaced workload's files went
    assert all(before[p.name] == p.read_bytes() for p in _written(out))


def _assert_tables_equal(a, b):
    for f in a.__slots__:
        if f == "cache":
            continue
        if f == "source":
            assert os.path.basename(a.source) == os.path.basename(b.source)
            continue
        x, y = getattr(a, f), getattr(b, f)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y), f
        elif f == "attr_columns":
            assert x.keys() == y.keys() and all(x[k].dtype == y[k].dtype and np.array_equal(x[k], y[k]) for k in x)
        else:
            assert x == y, f


def test_generated_tables_equal_the_read_files(tmp_path):
    gen = dict(tp=2, pp=2, dp=2, cp=2, microbatches=4, seq=128, schedule="interleaved")
    write_llm_files(tmp_path, TINY, jobs=1, **gen)
    tables, groups, replicas = generate_tables(TINY, symmetry="none", **gen)
    assert replicas is None and sorted(tables) == list(range(16))
    assert groups == json.loads((tmp_path / "comm_groups.json").read_text())
    for r, t in tables.items():
        _assert_tables_equal(t, read_et_table(tmp_path / f"llm.{r}.et"))
    # ranks of one stage share their read-only per-node columns (one copy per stage)
    assert tables[0].data_deps is tables[7].data_deps and not tables[0].data_deps.flags.writeable
    assert tables[0].id is not tables[8].id  # another stage
    reps, _, replicas = generate_tables(TINY, symmetry="auto", **gen)
    assert sorted(reps) == replicas.reps.tolist() == [0, 1, 2, 3, 8, 9, 10, 11]
    for r in reps:
        _assert_tables_equal(reps[r], tables[r])


#: 4 nodes of 4 GPUs (NVSwitch) under a rail-optimized 2-tier tree, leaves 2:1.
TREE = {"name": "tiny-tree", "node": {"kind": "nvswitch", "gpus": 4, "links_per_gpu": 4, "link_bw": "25GB/s"},
        "nodes": 4, "scale_out": {"kind": "fat_tree", "nic_bw": "400Gbps", "rail_optimized": True,
                                  "tiers": [{"name": "leaf", "down": 4, "up": 2, "oversubscription": 2},
                                            {"name": "spine", "down": 4}]}}


@pytest.mark.parametrize("symmetry", ["none", "auto"])
def test_run_llm_equals_running_the_written_files(tmp_path, symmetry):
    """run --llm (tables in memory) and run --workload on the written files: same times, rank by rank."""
    import yaml

    topo = tmp_path / "tree.yaml"
    topo.write_text(yaml.safe_dump(TREE))
    gen = dict(tp=4, pp=2, dp=2, microbatches=2, seq=256)
    prefix = write_llm_files(tmp_path / "wl", TINY, jobs=1, **gen).prefix
    files = simulate(str(topo), str(prefix), str(tmp_path / "wl" / "comm_groups.json"), "flow")
    mem = simulate_llm(str(topo), TINY, model="flow", symmetry=symmetry, **gen)
    assert files.finish.size == mem.finish.size == 16
    assert mem.finish.max() == files.finish.max()  # the iteration time
    np.testing.assert_array_equal(mem.finish, files.finish)
    np.testing.assert_array_equal(mem.exposed_comm, files.exposed_comm)


def test_identical_traces_copied_where_links_fail(tmp_path, monkeypatch):
    def no_links(*a, **k):
        raise OSError("no hard links here")
    monkeypatch.setattr(os, "link", no_links)
    rep = write_llm_files(tmp_path, TINY, jobs=1, tp=1, pp=1, dp=3, microbatches=2, seq=128)
    paths = _written(tmp_path)
    assert rep.files == 1 and len(paths) == 3 and len({os.stat(p).st_ino for p in paths}) == 3
    assert len({p.read_bytes() for p in paths}) == 1


def test_interrupted_write_leaves_no_complete_workload(tmp_path, monkeypatch):
    cfg = dict(tp=2, pp=2, dp=2, microbatches=2, seq=128)
    write_llm_files(tmp_path, TINY, jobs=1, **cfg)
    real, calls = writer.write_batch, []

    def failing(task):
        calls.append(task)
        if len(calls) == 2:
            raise InputError("disk full", source="test")
        return real(task)
    monkeypatch.setattr(writer, "BATCH", 2)
    monkeypatch.setattr(writer, "write_batch", failing)
    with pytest.raises(InputError, match="disk full"):
        write_llm_files(tmp_path, TINY, jobs=1, **cfg)
    assert len(calls) == 2 and not (tmp_path / "comm_groups.json").exists() and not list(tmp_path.glob(".*"))


def test_progress_bar_counts_ranks(tmp_path, monkeypatch, capsys):
    from netsim import progress

    monkeypatch.setattr(progress, "STATUS_AFTER_S", 0.0)  # not a terminal: status lines, from the start
    real_bar = progress.bar
    monkeypatch.setattr(progress, "bar", lambda *a, **kw: real_bar(*a, mininterval=0, miniters=1, **kw))
    monkeypatch.setattr(writer, "BATCH", 4)
    write_llm_files(tmp_path, TINY, jobs=1, progress=True, tp=2, pp=2, dp=2, microbatches=2, seq=128)
    err = capsys.readouterr().err
    assert "write" in err and "4/8" in err and "8/8" in err and "rank" in err


@pytest.mark.parametrize("name", ["comm_groups.json", "llm.9.et", "llm.3.et"])
def test_folders_in_the_way_are_one_line_errors(tmp_path, capsys, name):
    (tmp_path / name).mkdir()
    argv = ["workload", "llm", "--llm", "llama3-8b", "--tp", "2", "--pp", "2", "--dp", "2", "--out", str(tmp_path),
            "--overwrite", "-q"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{name}: is a folder" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "comm_groups.json").is_file()
