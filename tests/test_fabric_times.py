"""Collective times on the fabrics designers compare (issue 34 item 4): rail-only against a full fat-tree
at equal GPUs, multi-plane and dual-plane under every routing policy, on both network models.

The fabrics: 16 HGX H100 nodes (128 GPUs, one 400G NIC per GPU).  The full fat-tree is rail-optimized
and 2-tier, two scalable units of 8 nodes (16 leaves of 8 down / 8 up ports, 8 spines), so traffic
between units crosses the spines; the rail-only fabric is 8 rail switches of 16 ports, no spine.
"""

import pytest

from netsim.perftests import bench
from netsim.topology.spec import build_topology, parse_spec

MiB, GiB = 1 << 20, 1 << 30
NIC = 400e9 / 8 * 0.96  # achievable bytes/s of one NDR NIC (docs/topology.md: InfiniBand efficiency 0.96)
FT = [{"name": "leaf", "down": 8, "up": 8}, {"name": "spine", "down": 16}]
RAIL = [{"name": "rail", "down": 16}]


def fabric(so, node=None, nodes=16):
    data = {"name": "f", "node": node or {"preset": "hgx-h100"}, "nodes": nodes,
            "scale_out": {"nic_bw": "400Gbps", "fabric": "infiniband", **so}}
    return build_topology(parse_spec(data, "f.yaml"), "f.yaml")


def t_us(topo, op, size, model="flow", **kw):
    return bench(topo, op, [size], model=model, **kw)[0].time_us


@pytest.mark.parametrize("model", ["flow", "analytical"])
def test_rail_aligned_ring_all_reduce_is_equal_on_rail_only_and_fat_tree(model):
    # NCCL's rings are rail-aligned: a ring channel crosses nodes between GPUs of one local index, so
    # every inter-node byte stays on one rail.  A rail switch carries it at the NIC's rate; the fat-tree's
    # spines, at full bisection, carry it at the same rate.  The rail-only paper's point
    # (arXiv:2307.12169): the spine adds nothing to rail-aligned traffic.
    ft, ro = fabric({"tiers": FT}), fabric({"kind": "rail_only", "tiers": RAIL})
    a, b = t_us(ft, "all_reduce", GiB, model, algo="ring"), t_us(ro, "all_reduce", GiB, model, algo="ring")
    assert b == pytest.approx(a, rel=1e-9)
    # and it is NIC-bound: a ring all-reduce moves 2(n-1)/n of the buffer through every GPU's link to its
    # ring successor, 1/8 of them across nodes, each NIC at most NIC bytes/s: no faster than that
    assert b * 1e-6 >= 2 * 127 / 128 * GiB / (8 * NIC)


@pytest.mark.parametrize("model", ["flow", "analytical"])
def test_alltoall_rail_only_equals_fat_tree_while_nvlink_has_headroom(model):
    # Direct all-to-all of S = 64 MiB per GPU: every NIC sends 120/128 S (the bytes for the 15 other nodes'
    # GPUs of its rail, from its own GPU and, relayed over NVLink, from the 7 others), on either fabric.
    # Rail-only forwards 7/8 of a GPU's network bytes over NVLink first: 0.875 S on a 371 GB/s link
    # (18 x 25 GB/s x 0.824) takes 158 us, far below the NICs' 1,311 us, and the relay is cut-through
    # (NCCL's PXN proxy pipelines it chunk by chunk), so the two fabrics take the same time.
    ft, ft_spine, ro = (fabric({"tiers": FT}), fabric({"tiers": FT, "pxn": False}),
                        fabric({"kind": "rail_only", "tiers": RAIL}))
    times = [t_us(t, "alltoall", 64 * MiB, model) for t in (ft, ft_spine, ro)]
    nic_bound = 120 / 128 * 64 * MiB / NIC * 1e6
    assert times[2] == pytest.approx(times[0], rel=1e-9) and times[2] == pytest.approx(times[1], rel=1e-9)
    assert nic_bound <= times[2] <= 1.03 * nic_bound


@pytest.mark.parametrize("model", ["flow", "analytical"])
def test_alltoall_is_slower_on_rail_only_when_forwarding_fills_the_scale_up_links(model):
    # A scale-up domain of one 25 GB/s NVLink per GPU (20.6 GB/s achievable).  On the full fat-tree with PXN
    # off, cross-rail bytes take the spines and NVLink carries only the node's own 7/128 S.  On rail-only
    # every GPU must forward 7/8 of its network bytes over NVLink: its NVLink egress (and the relay's
    # ingress) is 7/128 S + 7/8 x 120/128 S = 0.875 S, 2,850 us at 20.6 GB/s, against the NICs' 1,311 us:
    # rail-only pays its missing spine in scale-up bandwidth.
    weak = {"preset": "hgx-h100", "links_per_gpu": 1}
    ft = fabric({"tiers": FT, "pxn": False}, node=weak)
    ro = fabric({"kind": "rail_only", "tiers": RAIL}, node=weak)
    a, b = t_us(ft, "alltoall", 64 * MiB, model), t_us(ro, "alltoall", 64 * MiB, model)
    nic_bound = 120 / 128 * 64 * MiB / NIC * 1e6
    nvlink_bound = 0.875 * 64 * MiB / (25e9 * 20.6 / 25) * 1e6
    assert nic_bound <= a <= 1.03 * nic_bound
    assert nvlink_bound <= b <= 1.03 * nvlink_bound
    assert b / a > 2.0


def test_two_step_forwarding_costs_an_nvlink_phase():
    # The rail-only paper charges all-to-all forwarding as a separate step over the HB domain (its
    # 8.2-11.2 % overhead); netsim's hierarchical all-to-all is that schedule (an intra-node phase, then a
    # rail phase), and on rail-only it is slower than the direct, cut-through all-to-all on the fat-tree by
    # about the NVLink phase: 7/8 x 64 MiB over 371 GB/s = 158 us, 12 % of 1,333 us.
    ft, ro = fabric({"tiers": FT}), fabric({"kind": "rail_only", "tiers": RAIL})
    direct = t_us(ft, "alltoall", 64 * MiB)
    staged = t_us(ro, "alltoall", 64 * MiB, algo="hierarchical")
    phase = 7 / 8 * 64 * MiB / (18 * 25e9 * 0.824) * 1e6
    assert staged - direct == pytest.approx(phase, rel=0.15)
    assert 0.08 < staged / direct - 1 < 0.16


#: (routing, model): every policy on the analytical model; the flow model runs adaptive routing event by
#: event (tens of seconds here), so it is checked on a smaller fabric below
RUNS = ([(r, "analytical") for r in ("ftree", "ecmp", "adaptive", "spray")]
        + [(r, "flow") for r in ("ftree", "ecmp", "spray")])


@pytest.mark.parametrize("routing,model", RUNS)
def test_multi_plane_equals_the_full_fat_tree_under_balancing_routing(routing, model):
    # 8 planes (one per GPU's NIC), each a 2-tier tree of 4 leaves (4 down / 4 up) and 4 spines: full
    # bisection in every plane, and PXN keeps an all-to-all's network bytes on the destination's rail, so
    # under the balancing policies it takes exactly as long as on the full fat-tree of the same GPUs
    # (NIC-bound); static ECMP hashes flows onto shared uplinks (3/4 of a plane's traffic leaves its leaf)
    # and is slower.  A rail-aligned ring all-reduce is the same everywhere.
    mpft = fabric({"planes": 8, "tiers": [{"name": "leaf", "down": 4, "up": 4}, {"name": "spine", "down": 4}]})
    ft = fabric({"tiers": FT})
    a2a = [t_us(t, "alltoall", 64 * MiB, model, routing=routing) for t in (mpft, ft)]
    if routing == "ecmp":
        assert a2a[0] > 1.05 * a2a[1]
    else:
        assert a2a[0] == pytest.approx(a2a[1], rel=1e-9)
    rings = [t_us(t, "all_reduce", 256 * MiB, model, algo="ring", routing=routing) for t in (mpft, ft)]
    assert rings[0] == pytest.approx(rings[1], rel=1e-9)


def test_adaptive_routing_on_the_flow_model_across_planes():
    # 4 nodes, 4 planes (PXN relays cross-plane bytes over NVLink), each 2 leaves (4 down / 4 up) under 4
    # spines: adaptive routing places each flow when it starts, on the flow model, as well as ftree's paths
    so = {"planes": 4, "tiers": [{"name": "leaf", "down": 4, "up": 4}, {"name": "spine", "down": 2}]}
    t = fabric(so, nodes=4)
    got = {r: t_us(t, "alltoall", 16 * MiB, routing=r) for r in ("adaptive", "ftree")}
    assert got["adaptive"] == pytest.approx(got["ftree"], rel=0.02)
    assert got["adaptive"] * 1e-6 >= 24 / 32 * 16 * MiB / NIC


@pytest.mark.parametrize("routing,model", RUNS)
def test_dual_plane_times_equal_its_one_plane_twin(routing, model):
    # HPN's dual plane (2 x 200G ports per GPU, port p in plane p): a flow leaves and arrives on ports of
    # the same index, so splitting the fabric into two planes changes no time against one fabric of the
    # same ports (twice the leaves' uplinks reach a single spine layer); it halves the spines each leaf
    # must reach (ECMP's search space, the HPN paper's point), which the fluid model does not time.
    so = {"nics_per_gpu": 2, "nic_bw": "200Gbps", "tiers": [{"name": "leaf", "down": 8, "up": 8}]}
    dual = fabric({**so, "planes": 2, "tiers": so["tiers"] + [{"name": "spine", "down": 16}]})
    one = fabric({**so, "tiers": so["tiers"] + [{"name": "spine", "down": 32}]})
    for op, size, algo in (("alltoall", 64 * MiB, "auto"), ("all_reduce", 256 * MiB, "ring")):
        a, b = (t_us(t, op, size, model, algo=algo, routing=routing) for t in (dual, one))
        assert a == pytest.approx(b, rel=1e-9)
