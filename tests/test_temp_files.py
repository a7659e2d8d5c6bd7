"""Temporary files of killed writers: ``kill -9`` of ``netsim run --out`` / ``netsim bench --out``
mid-write leaves ``.part-0.parquet.<random>.tmp``; the next run of that configuration removes it
at start, a file being written by a live process is never removed, and failed writes remove
their own."""

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from netsim.chakra import write_workload
from netsim.chakra.model import EtNode
from netsim.chakra.schema import CommType, NodeType
from netsim.cli import main
from netsim.errors import InputError
from netsim.results import dataset
from netsim.results.io import TempFile, atomic_file, check_output_file, remove_stale_temps
from netsim.sweep.runner import clean_temp_files

REPO = Path(__file__).resolve().parents[1]
DGX = str(REPO / "topologies" / "dgx-h100.yaml")

#: Runs ``netsim.cli.main(argv)`` with every part writer stopping, for good, after its first chunk
#: (it prints ``TEMP <path of the temporary file>``): the parent kills it there with SIGKILL.
CHILD = textwrap.dedent("""
    import json, sys, time
    from netsim.results import dataset
    from netsim.cli import main

    write = dataset.PartWriter.write
    def stop_after_first_chunk(self, chunk):
        write(self, chunk)
        print("TEMP", self.tmp, flush=True)
        time.sleep(600)
    dataset.PartWriter.write = stop_after_first_chunk
    sys.exit(main(json.loads(sys.argv[1])))
""")


def temps(root: Path) -> list[Path]:
    return sorted(root.rglob("*.tmp"))


def kill_mid_write(tmp_path: Path, argv: list[str]) -> Path:
    """Run ``argv`` in a child, SIGKILL it while it writes its first part; the temporary file left."""
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen([sys.executable, str(script), json.dumps(argv)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env, cwd=str(tmp_path))
    try:
        line = child.stdout.readline()
        while line and not line.startswith("TEMP "):  # the command's own output (bench's table)
            line = child.stdout.readline()
        assert line, child.stderr.read()
        tmp = Path(line[len("TEMP "):].strip())
        assert tmp.is_file() and tmp.name.startswith(".part-0.parquet.") and tmp.name.endswith(".tmp")
        assert remove_stale_temps(tmp.parent, dataset.PART) == []  # held by the live writer: kept
        child.send_signal(signal.SIGKILL)
        assert child.wait(30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()
        child.stderr.close()
    assert temps(tmp_path / "out") == [tmp]  # what kill -9 leaves behind
    return tmp


@pytest.fixture
def workload(tmp_path):
    coll = int(NodeType.COMM_COLL_NODE)
    nodes = [[EtNode(1, "ar", coll, comm_type=int(CommType.ALL_REDUCE), comm_size=1 << 20, is_cpu_op=False)]] * 8
    write_workload(tmp_path / "w", nodes)
    return str(tmp_path / "w")


@pytest.mark.parametrize("command", ["run", "bench"])
def test_killed_run_leaves_a_temp_file_the_next_run_removes(tmp_path, workload, command, capsys, monkeypatch):
    out = tmp_path / "out"
    if command == "run":
        argv = ["run", "--topology", DGX, "--workload", workload, "--model", "analytical", "--out", str(out), "-q"]
    else:
        argv = ["bench", "--topology", DGX, "--op", "all_reduce", "-b", "1M", "--model", "analytical",
                "--out", str(out), "-q"]
    stale = kill_mid_write(tmp_path, argv)
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 0  # the same configuration again: removes the leftover at start, completes
    capsys.readouterr()
    rid = stale.parent.name[len("run_id="):]
    assert dataset.is_complete(out, rid) and temps(out) == [] and not stale.exists()


def test_stale_parts_go_at_start_even_when_the_run_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["bench", "--topology", DGX, "--op", "all_reduce", "-b", "1M", "--model", "analytical",
            "--out", str(out), "-q"]
    assert main(argv) == 0
    rid = dataset.open_results(out).run_ids[0]
    stale = [dataset.part_path(out, t, rid).parent / f".part-0.parquet.{t}.tmp" for t in ("ops", "runs")]
    for p in stale:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"PAR1 half")
    other = dataset.part_path(out, "ops", "0" * 16).parent / ".part-0.parquet.x.tmp"  # another run's: not ours
    other.parent.mkdir(parents=True)
    other.write_bytes(b"")
    live = TempFile(dataset.part_path(out, "ranks", rid))  # a live writer of the same run: kept
    capsys.readouterr()
    assert main(argv) == 2 and "--overwrite" in capsys.readouterr().err  # refused, after cleaning
    assert not any(p.exists() for p in stale) and other.exists() and Path(live.path).exists()
    assert clean_temp_files(out) == 1 and not other.exists() and Path(live.path).exists()  # a sweep's sweep
    live.discard()
    assert temps(out) == []


def test_live_temp_files_are_kept_and_dead_ones_removed(tmp_path):
    target = tmp_path / "x.json"
    held = TempFile(target)
    (tmp_path / ".x.json.dead1.tmp").write_text("left by a killed writer")
    (tmp_path / ".y.json.dead2.tmp").write_text("another target's")
    (tmp_path / ".x.json.link.tmp").symlink_to(tmp_path / ".y.json.dead2.tmp")  # never followed
    os.mkfifo(tmp_path / ".x.json.fifo.tmp")
    assert [p.name for p in remove_stale_temps(tmp_path, "x.json")] == [".x.json.dead1.tmp"]
    assert Path(held.path).exists()
    check_output_file(target)  # the start of a write of x.json: the held one stays
    assert Path(held.path).exists()
    held.release()
    assert [p.name for p in remove_stale_temps(tmp_path, "x.json")] == [Path(held.path).name]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".x.json.fifo.tmp", ".x.json.link.tmp", ".y.json.dead2.tmp"]


def test_failed_writes_remove_their_own(tmp_path):
    with pytest.raises(RuntimeError):
        with atomic_file(tmp_path / "a.txt") as fh:
            fh.write("half")
            raise RuntimeError("simulated failure")
    with pytest.raises(KeyboardInterrupt):
        with atomic_file(tmp_path / "a.txt") as fh:
            raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []
    w = dataset.PartWriter(tmp_path, "ranks", "ab", "{}")
    w.write(pd.DataFrame({"rank": [0]}))
    w.target.mkdir()  # publishing fails: the target became a folder
    with pytest.raises(InputError, match="is a folder"):
        w.close()
    assert temps(tmp_path) == [] and not Path(w.tmp).exists()


def test_a_writer_never_takes_a_removed_name(tmp_path, monkeypatch):
    """A cleaner between ``mkstemp`` and the lock: the writer makes another file."""
    import netsim.results.io as io

    made = []
    real = io.tempfile.mkstemp

    def mkstemp(**kw):
        fd, path = real(**kw)
        made.append(path)
        if len(made) == 1:
            os.unlink(path)  # what a cleaner would have done before the writer locked it
        return fd, path
    monkeypatch.setattr(io.tempfile, "mkstemp", mkstemp)
    t = TempFile(tmp_path / "x")
    assert len(made) == 2 and t.path == made[1] and Path(t.path).exists()
    t.discard()
