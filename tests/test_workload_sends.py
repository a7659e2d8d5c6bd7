"""A workload's network sends as NCCL runs them (netsim.workload.sends): one transfer per p2p channel
(part), keyed by its channel, capped at one channel's rate, in the protocol's wire bytes."""

import numpy as np
import pytest

from netsim.chakra import EtNode, NodeType, write_workload
from netsim.collectives import nccl, p2p
from netsim.topology.spec import load_topology
from netsim.workload.sends import Sends
from netsim.workload.simulation import simulate

SU = "topologies/h100-superpod-1su.yaml"  # 32 nodes of 8 H100, one 400G NIC per GPU, rail-optimized


def _one_send(tmp_path, src: int, dst: int, size: int, world: int = 16) -> str:
    per = [[] for _ in range(world)]
    per[src] = [EtNode(1, "send", NodeType.COMM_SEND_NODE, comm_src=src, comm_dst=dst, comm_size=size, comm_tag=1,
                       is_cpu_op=False)]
    per[dst] = [EtNode(1, "recv", NodeType.COMM_RECV_NODE, comm_src=src, comm_dst=dst, comm_size=size, comm_tag=1,
                       is_cpu_op=False)]
    write_workload(tmp_path / "w", per)
    return str(tmp_path / "w")


@pytest.mark.parametrize("src,dst", [(0, 8), (0, 9), (3, 14)])
def test_a_network_send_is_one_flow_per_channel(tmp_path, src, dst):
    """Written from the rule: parts = P2PSetup(pair).parts(S); part p carries S/parts on the route of key
    nic_key(channel) (channels from NCCL's base channel of the pair); the links carry exactly that."""
    size = 256 << 20
    topo = load_topology(SU)
    setup = p2p.P2PSetup.from_info(nccl.CommInfo.from_topology(topo, np.array([src, dst])))
    parts = setup.parts(float(size))
    assert parts == 4  # max(1 NIC, ceil(48 GB/s / 14 GB/s)) channels per network peer (paths.cc:943-952)
    keys, sizes, caps = Sends(topo).split(src, dst, size)
    assert keys.size == parts == np.unique(keys).size and sizes.sum() == size
    assert (caps == 14e9).all()  # Simple protocol: wire bytes = bytes
    res = simulate(SU, _one_send(tmp_path, src, dst, size, 16), model="flow")
    want = np.zeros(topo.n_links)
    for k in keys:
        want[np.asarray(topo.route(src, dst, int(k)))] += size / parts
    links = res.tables()["links"].sort_values("link_id")
    np.testing.assert_allclose(links["bytes"].to_numpy(), want, rtol=1e-12, atol=0)
    assert links["peak_flows"].max() == parts


def test_the_nic_binds_and_the_send_ends_at_bytes_over_its_rate(tmp_path):
    """Four channels of 14 GB/s carry more than the 400G NIC: the NIC binds, S / NIC rate + latency."""
    size = 256 << 20
    topo = load_topology(SU)
    res = simulate(SU, _one_send(tmp_path, 0, 8, size), model="flow")
    (end,) = {e for r, _, n, _, s, e, _ in res.ops}
    path = np.asarray(topo.route(0, 8, 0))
    nic = float(topo.link_bw[path].min())
    assert nic < 4 * 14e9
    assert end == pytest.approx(size / nic + float(topo.link_lat[path].sum()), rel=1e-9)


def test_same_node_and_astra_sends_stay_one_transfer():
    """NVLink sends stay one transfer (their kernel still holds their channels' SMs); on ASTRA-sim's
    networks no send is an NCCL send."""
    topo = load_topology(SU)
    assert Sends(topo).parts(0, 1, 1 << 20) == 0 and Sends(topo).blocks(0, 1, 64 << 20) > 1
    from dataclasses import replace
    fake = replace(topo, facts=replace(topo.facts, astra_network=True))
    assert Sends(fake).parts(0, 8, 1 << 20) == 0 and Sends(fake).blocks(0, 8, 1 << 20) == 0
