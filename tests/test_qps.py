"""Queue pairs per connection on RoCE (scale_out.qps_per_connection, NCCL_IB_QPS_PER_CONNECTION)."""

import numpy as np
import pytest

from netsim.collectives.plan import plan
from netsim.collectives.qps import QP_KEY_STRIDE, split_connections
from netsim.errors import InputError
from netsim.topology.spec import build_topology, parse_spec
from netsim.workload.sends import Sends


def roce_tree(qps: int = 1, over: float = 4):
    spec = {"name": "roce", "node": {"kind": "nvswitch", "gpus": 8, "links_per_gpu": 4, "link_bw": "25GB/s"},
            "nodes": 16,
            "scale_out": {"kind": "fat_tree", "fabric": "roce", "qps_per_connection": qps, "nic_bw": "400Gbps",
                          "rail_optimized": False,
                          "tiers": [{"name": "leaf", "down": 16, "up": 4, "oversubscription": over},
                                    {"name": "spine", "down": 16}]}}
    return build_topology(parse_spec(spec, "roce.yaml"), "roce.yaml")


def test_one_queue_pair_changes_nothing():
    t = roce_tree(1)
    p = plan(t, np.arange(32), "all_reduce", 64 << 20)
    assert split_connections(p.schedule, t, np.arange(32)) is p.schedule
    assert t.routing == "ecmp" and t.facts.qps_per_connection == 1


@pytest.mark.parametrize("op", ["all_reduce", "alltoall", "all_gather"])
def test_queue_pairs_split_nic_transfers_only(op):
    ranks = np.arange(0, 64, 2)  # two GPUs of every node: NVLink and NIC transfers
    one, four = plan(roce_tree(1), ranks, op, 16 << 20).schedule, plan(roce_tree(4), ranks, op, 16 << 20).schedule
    np.testing.assert_allclose(four.bytes_sent(), one.bytes_sent(), rtol=1e-12)
    for a, b in zip(one.phases, four.phases):
        sa, sb = a.step, b.step
        net = (ranks[sa.src] // 8) != (ranks[sa.dst] // 8)
        assert sb.n_transfers == sa.n_transfers + 3 * int(net.sum())
        if net.any():  # each NIC transfer's four parts carry a quarter each, keyed apart, capped at a quarter
            nic = (ranks[sb.src] // 8) != (ranks[sb.dst] // 8)
            keys = sb.key[nic]
            triples = np.stack([sb.src[nic], sb.dst[nic], keys])
            assert np.unique(triples, axis=1).shape[1] == keys.size  # every part its own flow to the hash
            assert set((keys // QP_KEY_STRIDE).tolist()) == {0, 1, 2, 3}
            np.testing.assert_allclose(np.sort(sb.nbytes[nic]), np.sort(np.repeat(sa.nbytes[net], 4) / 4))
    assert four.blocks == one.blocks  # the same channels (thread blocks) drive them


def test_sends_run_on_every_channels_queue_pairs():
    one, two = Sends(roce_tree(1)), Sends(roce_tree(2))
    k1, s1, c1 = one.split(0, 8, 64 << 20)
    k2, s2, c2 = two.split(0, 8, 64 << 20)
    assert k2.size == 2 * k1.size and np.unique(k2).size == k2.size
    assert s2.sum() == pytest.approx(s1.sum()) and c2[0] == pytest.approx(c1[0] / 2)
    assert one.parts(0, 8, 64 << 20) == two.parts(0, 8, 64 << 20)  # channels, as NCCL counts them


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_more_queue_pairs_beat_one_on_a_contended_all_to_all(seed):
    # 64 GPUs at random on a 4:1 RoCE tree: more queue pairs give the ECMP hash more flows to spread,
    # and every count above one beats one.  Not monotone: with seed 1, 4 QPs lose to 2 by 0.4 %
    # (a connection ends with its slowest queue pair; docs/topology.md, benchmarks/bench_routing.py R2)
    from netsim.perftests import bench

    got = [bench(roce_tree(q), "alltoall", [16 << 20], gpus=64, placement=f"random:{seed}")[0].time_us
           for q in (1, 2, 4, 8)]
    assert all(t < got[0] for t in got[1:]), got
    assert min(got[1:]) < got[0] * 0.98


def test_bad_value_is_a_one_line_error():
    spec = {"node": {"preset": "hgx-h100"}, "nodes": 2,
            "scale_out": {"qps_per_connection": 0, "tiers": [{"down": 16, "up": 16}, {"down": 2}]}}
    with pytest.raises(InputError, match=r"t.yaml: scale_out.qps_per_connection: expected a positive integer"):
        parse_spec(spec, "t.yaml")


def test_topo_shows_queue_pairs(tmp_path, capsys):
    import yaml

    from netsim.cli import main

    doc = yaml.safe_load(open("topologies/llama3-24k.yaml"))
    doc["scale_out"]["qps_per_connection"] = 4
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(doc))
    assert main(["topo", str(tmp_path / "t.yaml")]) == 0
    assert "routing       ecmp (RoCE fabric, 4 queue pairs per connection)" in capsys.readouterr().out
