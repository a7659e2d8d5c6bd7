"""A sweep's driver stopped by SIGTERM/SIGINT/SIGKILL leaves no worker behind; its ETA comes from
finished work (netsim.sweep.eta)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import TOPOLOGIES
from netsim.sweep.eta import WorkEstimate, prior_cost

#: Configurations that each take far longer than the test waits (event-driven 1,000-GPU all-to-alls).
SLOW_SWEEP = f"""kind: bench
base:
  topology: {TOPOLOGIES / "h100-superpod-1024.yaml"}
  op: alltoall
  size: 64M
  model: flow
  engine: event
grid:
  gpus: [1024, 1016, 1008, 1000]
"""


def _children(pid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(d))
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_killing_the_driver_leaves_no_worker(tmp_path, sig):
    spec = tmp_path / "slow.yaml"
    spec.write_text(SLOW_SWEEP)
    driver = subprocess.Popen([sys.executable, "-m", "netsim", "sweep", str(spec), "--out", str(tmp_path / "out"),
                               "--jobs", "2", "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline, workers = time.time() + 30, []
        while time.time() < deadline and len(workers) < 2:
            workers = _children(driver.pid)
            time.sleep(0.05)
        assert len(workers) == 2, "the pool did not start"
        time.sleep(0.5)  # the workers are simulating
        driver.send_signal(sig)
        status = driver.wait(timeout=30)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert status == (-9 if sig == signal.SIGKILL else 130)
    deadline = time.time() + 10
    while time.time() < deadline and any(_alive(p) for p in workers):
        time.sleep(0.05)
    assert not [p for p in workers if _alive(p)], "worker processes outlived the driver"
    if sig != signal.SIGKILL:
        assert b"Traceback" not in driver.stderr.read()


def test_eta_weighs_configurations_by_work():
    configs = [{"kind": "bench", "op": "all_reduce", "gpus": g, "size": s, "model": "flow"}
               for g in (8, 512) for s in (1, 2)]
    assert prior_cost(configs[2]) == 64 * prior_cost(configs[0])
    assert prior_cost({**configs[0], "op": "alltoall"}) == 4 * 8 * 8 / 8
    est = WorkEstimate(configs)
    assert est.fraction() == 0.0
    est.finished(0, 1.0)  # 8 GPUs: 1 s; the other size is similar: 1 s; 512 GPUs: 64 s each by the prior
    assert est.fraction() == pytest.approx(1 / (1 + 1 + 64 + 64))
    est.finished(2, 10.0)  # measured: 512 GPUs take 10 s, so its similar configuration too
    assert est.fraction() == pytest.approx(11 / (11 + 1 + 10))
    est.finished(1, float("nan"))  # no wall time (a lost worker): its prediction counts
    est.finished(3, 12.0)
    assert est.fraction() == 1.0
