"""The default engine equals the event-driven reference, where links are shared.

``run_collective(engine="auto")`` evaluates a collective off the event queue only where
that is provably exact (:mod:`netsim.collectives.fastpath`, :mod:`netsim.collectives.lockstep`)
and fast-forwards periodic regimes; ``engine="event"`` simulates every transfer.  On
random placements, group shapes, sizes, oversubscription 1:1 to 8:1, rail-optimized and
top-of-rack trees and both op families, every rank's finish time and every link's bytes
must agree to 1e-9 relative.
"""

import os
from functools import lru_cache

import numpy as np
import pytest
import simpy
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from netsim.perftests import BenchConfig, validated, build_plan, placed_ranks
from netsim.cli import main
from netsim.collectives.executor import run_collective
from netsim.collectives.lockstep import components, contended_links
from netsim.collectives.schedule import Step
from netsim.network.flow import FlowNetwork
from netsim.topology.spec import build_topology, parse_spec

RTOL = 1e-9


@lru_cache(maxsize=None)
def tree(over: float, rail: bool, nodes: int = 8, gpn: int = 4, routing: str = "ecmp"):
    """``nodes`` nodes of ``gpn`` GPUs (NVSwitch) under a 2-tier tree, leaves ``over``:1 (as built:
    ``per_leaf / over`` of the leaf's ``per_leaf`` up ports cabled, at the NIC rate)."""
    per_leaf = 2 * gpn
    spec = {"name": f"t{over}{rail}{routing}", "node": {"kind": "nvswitch", "gpus": gpn, "links_per_gpu": 4, "link_bw": "25GB/s"},
            "nodes": nodes,
            "scale_out": {"kind": "fat_tree", "nic_bw": "400Gbps", "rail_optimized": rail, "routing": routing,
                          "tiers": [{"name": "leaf", "down": per_leaf, "up": per_leaf, "oversubscription": over},
                                    {"name": "spine", "down": nodes * gpn // per_leaf * 2}]}}
    return build_topology(parse_spec(spec))


def run(topo, cfg: BenchConfig, size: int, engine: str):
    cfg = validated(cfg, topo)
    p = build_plan(topo, cfg, float(size))
    net = FlowNetwork(simpy.Environment(), topo)
    res = run_collective(net, p.schedule, placed_ranks(topo, cfg), engine=engine)
    return res, net.link_stats()["bytes"].copy(), p.label


def assert_same(topo, cfg, size):
    auto, bytes_auto, label = run(topo, cfg, size, "auto")
    ref, bytes_ref, _ = run(topo, cfg, size, "event")
    assert ref.stats["mode"] == "event"
    np.testing.assert_allclose(auto.finish, ref.finish, rtol=RTOL, atol=0, err_msg=f"{label} {cfg}")
    np.testing.assert_allclose(bytes_auto, bytes_ref, rtol=RTOL, atol=0, err_msg=f"{label} {cfg}")
    return auto.stats["mode"]


placements = st.one_of(st.just("packed"), st.integers(0, 10**6).map(lambda s: f"random:{s}"),
                       st.sampled_from(["strided:2", "strided:3"]))


@settings(max_examples=int(os.environ.get('NETSIM_EXAMPLES', 40)), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(over=st.sampled_from([1, 2, 4, 8]), rail=st.booleans(),
       op=st.sampled_from(["all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast"]),
       gpus=st.sampled_from([4, 6, 8, 10, 16]), placement=placements,
       size=st.sampled_from([1 << 12, 1 << 18, 1 << 22, 3 << 20]),
       algo=st.sampled_from(["auto", "ring", "tree"]), routing=st.sampled_from(["ecmp", "ftree", "ftree", "spray", "adaptive"]))
def test_default_engine_equals_event_driven(over, rail, op, gpus, placement, size, algo, routing):
    topo = tree(over, rail, routing=routing)
    if placement.startswith("strided:") and (gpus - 1) * int(placement[8:]) >= topo.n_gpus:
        placement = "strided:2"
    if algo == "tree" and op not in ("all_reduce",):
        algo = "auto"
    if algo == "ring" and op in ("alltoall",):
        algo = "auto"
    event(assert_same(topo, BenchConfig(op, algo=algo, gpus=gpus, placement=placement), size))


def test_the_reported_case_is_exact():
    """64 ranks at random on a 4:1 tree, 16 MiB ring all-reduce (the [contention-engine] report):
    the lockstep evaluation would differ by 5.9 %; the default engine must not."""
    topo = tree(4, False, nodes=16, gpn=8)
    assert assert_same(topo, BenchConfig("all_reduce", algo="ring", gpus=64, placement="random:7"), 16 << 20) \
        == "event"


@pytest.mark.parametrize("placement", ["packed", "strided:4"])
def test_aligned_groups_stay_vectorized(placement):
    """Where durations cannot depend on timing, the default engine skips the event queue."""
    topo = tree(1, True, nodes=16, gpn=8)
    mode = assert_same(topo, BenchConfig("all_reduce", algo="ring", gpus=32, placement=placement), 64 << 20)
    assert mode in ("vectorized", "lockstep")


def test_contended_links_and_components():
    st_ = Step(np.array([0, 1, 2]), np.array([1, 2, 0]), np.ones(3))
    routes = (np.array([0, 2, 3, 4]), np.array([0, 1, 1, 2]))  # transfer 0 on links 0,1; 1 on 1; 2 on 2
    mask = contended_links(4, 3, [(st_, routes)])
    assert mask.tolist() == [False, True, False, False]
    assert components(np.array([0, 0, 1, 2]), routes[1], 3).tolist() == [0, 0, 2]


@pytest.mark.parametrize("argv,needle", [
    (["--placement", "random:x"], "random:SEED"),
    (["--placement", "strided:0"], "strided:K"),
    (["--placement", "strided:9"], "beyond"),
    (["--engine", "fast"], "invalid choice"),
])
def test_bad_placement_and_engine(capsys, argv, needle):
    from conftest import TOPOLOGIES
    rc = main(["bench", "--topology", str(TOPOLOGIES / "dgx-h100.yaml"), "--op", "all_reduce", "--gpus", "4",
               *argv])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_placement_file_errors(tmp_path, capsys):
    from conftest import TOPOLOGIES
    h100 = str(TOPOLOGIES / "dgx-h100.yaml")
    cases = {"twice.txt": ("0 1 1 2", "given to ranks 1 and 2"), "range.txt": ("0 1 2 9", "outside"),
             "text.txt": ("0 one", "integer GPU ids")}
    for name, (body, needle) in cases.items():
        f = tmp_path / name
        f.write_text(body)
        rc = main(["bench", "--topology", h100, "--op", "all_reduce", "--placement", str(f)])
        err = capsys.readouterr().err
        assert rc == 2 and needle in err and name in err, err
    good = tmp_path / "good.txt"
    good.write_text("# four GPUs, two per half\n0, 1\n6 7\n")
    assert main(["bench", "--topology", h100, "--op", "all_reduce", "--placement", str(good)]) == 0
    assert "4 GPUs" in capsys.readouterr().out
