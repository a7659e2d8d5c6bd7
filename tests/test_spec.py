"""Topology YAML validation, ASTRA-sim YAML detection and ``netsim topo``."""

import json

import pytest
import yaml

from netsim.cli import main
from netsim.errors import InputError
from netsim.topology.spec import load_topology

from conftest import TOPOLOGIES

SHIPPED = sorted(TOPOLOGIES.glob("*.yaml"))


def write(tmp_path, data, name="t.yaml"):
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return p


FAT = {"name": "ft", "node": {"preset": "hgx-h100"}, "nodes": 4,
       "scale_out": {"nic_bw": "400Gbps", "tiers": [{"name": "leaf", "down": 4, "up": 4, "up_bw": "400Gbps"},
                                                    {"name": "spine", "down": 8}]}}


def test_fat_tree_spec_builds(tmp_path):
    t = load_topology(write(tmp_path, FAT))
    assert t.n_gpus == 32 and t.facts.switches == {"leaf": 8, "spine": 4}


@pytest.mark.parametrize("mutate,field,expect", [
    (lambda d: d["node"].update(kind="crossbar", preset=None) or d["node"].pop("preset"), "node.kind",
     "nvswitch or nvlink_mesh"),
    (lambda d: d["scale_out"].update(nic_bw="-400Gbps"), "scale_out.nic_bw", "positive"),
    (lambda d: d["scale_out"].update(nic_bw="0Gbps"), "scale_out.nic_bw", "positive"),
    (lambda d: d["scale_out"]["tiers"][1].update(down=2), "scale_out.tiers", "cannot reach"),
    (lambda d: d["scale_out"]["tiers"][0].update(radix=6), "scale_out.tiers", "exceed radix"),
    (lambda d: d["scale_out"]["tiers"][0].update(down=-4), "scale_out.tiers[0].down", "positive integer"),
    (lambda d: d["scale_out"]["tiers"][0].update(radx=64), "scale_out.tiers[0].radx", "unknown key"),
    (lambda d: d.pop("scale_out"), "scale_out", "disconnected"),
    (lambda d: d["node"].update(preset="hgx-z100"), "node.preset", "unknown preset"),
    (lambda d: d["scale_out"].update(kind="dragonfly"), "scale_out.kind", "fat_tree"),
    (lambda d: d["scale_out"]["tiers"][0].update(latency="5 parsecs"), "scale_out.tiers[0].latency", ""),
])
def test_bad_specs_name_file_and_field(tmp_path, mutate, field, expect):
    data = yaml.safe_load(yaml.safe_dump(FAT))
    mutate(data)
    path = write(tmp_path, data)
    with pytest.raises(InputError) as info:
        load_topology(path)
    msg = str(info.value)
    assert msg.startswith(str(path)) and field in msg and expect in msg
    assert "\n" not in msg


def test_disconnected_mesh(tmp_path):
    data = {"node": {"kind": "nvlink_mesh", "gpus": 4, "link_bw": "25GB/s", "pairs": [[0, 1, 1], [2, 3, 2]]}}
    with pytest.raises(InputError, match="node.pairs: disconnected GPUs"):
        load_topology(write(tmp_path, data))


def test_not_yaml_and_missing(tmp_path):
    with pytest.raises(InputError, match="not valid YAML"):
        load_topology(write(tmp_path, "a: [1, 2\nb: 3"))
    with pytest.raises(InputError, match="no such file"):
        load_topology(tmp_path / "missing.yaml")
    with pytest.raises(InputError, match="expected a 'node'"):
        load_topology(write(tmp_path, {"name": "x"}))


def test_oversubscription_key(tmp_path):
    data = yaml.safe_load(yaml.safe_dump(FAT))
    data["scale_out"]["tiers"][0] = {"name": "leaf", "down": 4, "up": 4, "oversubscription": 2}
    t = load_topology(write(tmp_path, data))
    assert t.facts.oversubscription == {"leaf": 2.0}
    assert t.facts.bisection_Bps == pytest.approx(32 * 50e9 / 4)


def test_astra_network_yaml_detected(traces):
    t = load_topology(traces / "astra-sim__astra-sim/examples/network/analytical/Ring_8npus.yml")
    assert t.n_gpus == 8 and t.facts.astra_network
    assert t.link_bw[0] == 50 * 2**30  # "GB/s" in ASTRA-sim YAML is GiB/s
    assert t.link_lat[0] == pytest.approx(500e-9)
    t = load_topology(traces / "astra-sim__astra-sim/inputs/network/hgx_h100_32gpu.yml")
    assert t.n_gpus == 32 and [d.kind for d in t.facts.dims] == ["Switch", "Ring"]


def test_astra_tbd_config_is_rejected(traces):
    with pytest.raises(InputError, match=r"dgx_v100_8gpu.yml: bandwidth\[0\]: expected a positive number"):
        load_topology(traces / "astra-sim__astra-sim/inputs/network/dgx_v100_8gpu.yml")


def test_every_astra_network_config_loads(traces):
    for path in sorted((traces / "astra-sim__astra-sim").rglob("*.yml")):
        if path.name == "dgx_v100_8gpu.yml":
            continue
        t = load_topology(path)
        assert t.n_gpus >= 2, path


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_netsim_topo_on_every_shipped_file(path, capsys):
    assert main(["topo", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("gpus", "switches", "links", "bisection_GBps", "diameter_hops",
                "scaleout_GBps_per_gpu", "scaleup_GBps_per_gpu"):
        assert key in out
    assert out["gpus"] > 0 and out["bisection_GBps"] > 0
    assert main(["topo", str(path)]) == 0
    assert "bisection" in capsys.readouterr().out


def test_shipped_figures():
    figures = {p.stem: json.loads(json.dumps(p.name)) for p in SHIPPED}
    assert {"dgx1-v100-nvlink", "dgx-a100", "dgx-h100", "gb200-nvl72", "h100-superpod-1su",
            "h100-superpod-1024", "h100-fat-tree-16k", "llama3-24k", "megascale-12k",
            "fat-tree-64k"} <= set(figures)
    t = load_topology(TOPOLOGIES / "h100-superpod-1024.yaml")
    assert t.facts.switches == {"leaf": 32, "spine": 16}  # as in the DGX SuperPOD RA
    t = load_topology(TOPOLOGIES / "llama3-24k.yaml")
    # 1:7 built with 400G ports: 192 down, 28 uplinks cabled (192/7 = 27.4 is no whole count)
    assert t.n_gpus == 24576 and t.facts.oversubscription["spine"] == pytest.approx(192 / 28, abs=1e-4)


def test_cli_errors_exit_2(tmp_path, capsys):
    assert main(["topo", str(tmp_path / "none.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "none.yaml: no such file" in err
    assert main(["nosuchcommand"]) == 2
    assert main(["topo"]) == 2
