"""NCCL's facts written once (netsim.ncclfacts): the NVLink count comes from the topology, the
per-link rate from NCCL's topo.h, and the topology layer does not import the collectives."""

import ast
from pathlib import Path

import numpy as np
import pytest

from netsim import ncclfacts
from netsim.astra.export import astra_dims
from netsim.collectives import nccl, p2p
from netsim.topology.builders import dgx1_v100, hgx_h100, nvlink_box4
from netsim.topology.efficiency import NVLINK_EFFICIENCY, nvlink_efficiency
from netsim.topology.spec import build_topology, parse_spec


def _h100(efficiency=None):
    doc = {"node": {"preset": "hgx-h100"}}
    if efficiency:
        doc["efficiency"] = efficiency
    return build_topology(parse_spec(doc))


@pytest.mark.parametrize("channels", [None, 64])
def test_nvlink_efficiency_override_keeps_the_links_and_the_p2p_channels(channels):
    """efficiency: {nvlink: 0.5} makes the links slower, not fewer: 18 NVLinks, and NCCL's p2p setup
    (which counts NVLinks at NCCL's own 20.6 GB/s each, topo.h) as on the default H100.  Before, the
    count was bandwidth / 20.6 = 11 links, so an NVLink peer got pow2(2 x 11) = 32 channels, not 64."""
    base, slow = _h100(), _h100({"nvlink": 0.5})
    assert slow.facts.nvlink_links_per_gpu == base.facts.nvlink_links_per_gpu == 18
    infos = [nccl.CommInfo.from_topology(t, np.arange(8), channels) for t in (base, slow)]
    assert infos[1].bw_intra == pytest.approx(infos[0].bw_intra / 0.5 * 0.5 * 0.5 / (20.6 / 25), rel=1e-12)
    setups = [p2p.P2PSetup.from_info(i) for i in infos]
    assert infos[0].nvlinks == infos[1].nvlinks == 18 and infos[0].channels == infos[1].channels
    assert setups[0] == setups[1]
    if channels == 64:  # p2pnChannels 64: per-peer channels are pow2(2 x 18) = 64 (paths.cc:936, 989)
        assert setups[1].per_peer == 64


def test_mesh_and_switch_builders_count_nvlinks():
    assert hgx_h100().facts.nvlink_links_per_gpu == 18
    assert dgx1_v100().facts.nvlink_links_per_gpu == 6  # 6 NVLink2 per V100 (DGX-1 hybrid cube-mesh)
    box = nvlink_box4(links_per_pair=2)
    assert box.facts.nvlink_links_per_gpu == 6 and box.facts.nvlink_link_Bps == 25e9
    uneven = nvlink_box4(links_per_pair=1)
    assert uneven.facts.nvlink_links_per_gpu == 3
    # a mesh has no NVSwitch chips: the ASTRA-sim export says nothing about links over several chips
    assert not any("switch chips" in line for line in astra_dims(dgx1_v100())[1])
    assert any("18 NVLink links per GPU" in line for line in astra_dims(hgx_h100())[1])


def test_nvlink_efficiency_is_nccls_rate_over_the_line_rate():
    assert NVLINK_EFFICIENCY["H100"] == 20.6 / 25 and NVLINK_EFFICIENCY["A100"] == 20.0 / 25
    assert NVLINK_EFFICIENCY["B200"] == 40.1 / 50 and NVLINK_EFFICIENCY["GB200"] == 40.1 / 50
    assert nvlink_efficiency(None) == nvlink_efficiency("X1") == 20.0 / 25  # topo.h:274-281: SM80's rate
    assert ncclfacts.nvlink_gbps("H200") == 20.6 and ncclfacts.arch_of("B200") == "blackwell"


#: Packages above netsim.topology (docs/architecture.md): a topology module imports none of them.
ABOVE_TOPOLOGY = ("network", "collectives", "results", "chakra", "workload", "analysis", "astra", "sweep", "bench",
                  "moe_bench", "moe_cli", "cli", "cli_options", "network_models")


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, function-level imports included."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return out


def test_topology_layer_imports_nothing_above_it():
    """netsim/topology/*.py (and the leaf netsim/ncclfacts.py) import no package above the topology:
    the NCCL facts the topology needs (host CPU vendors, NVLink rates) come from the leaf."""
    root = Path(__file__).resolve().parents[1] / "netsim"
    bad = {f"{p.name}: {m}" for p in [*(root / "topology").glob("*.py"), root / "ncclfacts.py"] for m in _imports(p)
           if m.split(".")[0] == "netsim" and len(m.split(".")) > 1 and m.split(".")[1] in ABOVE_TOPOLOGY}
    assert not bad
    assert not {m for m in _imports(root / "ncclfacts.py") if m.startswith("netsim")}, "ncclfacts is a leaf"
