"""ASTRA-sim configuration files: system JSON, remote memory JSON, comm groups, network YAML."""

import json

import pytest

from netsim.astra import load_memory, load_network, load_system, parse_memory, parse_system, run_astra
from netsim.astra.run import load_groups
from netsim.astra.system import Algorithm, parse_algorithm
from netsim.errors import InputError

ASTRA = "astra-sim__astra-sim"
BASE = {"scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
        "preferred-dataset-splits": 4, "all-reduce-implementation": ["ring"], "collective-optimization": "localBWAware",
        "local-mem-bw": 50}


def mb(traces, coll="all_reduce", n=8):
    return traces / ASTRA / f"examples/workload/microbenchmarks/{coll}/{n}npus_1MB/{coll}"


def ring(traces, n=8):
    return traces / ASTRA / f"examples/network/analytical/Ring_{n}npus.yml"


def test_every_shipped_system_json_loads(traces):
    files = sorted((traces / ASTRA).glob("**/system*/**/*.json")) + [traces / ASTRA / "tests/rt_template/inputs/system_cfg.json"]
    assert len(files) >= 12
    for f in files:
        cfg = load_system(f)
        assert cfg.scheduling_policy in ("LIFO", "FIFO")
    rt = load_system(traces / ASTRA / "tests/rt_template/inputs/system_cfg.json")
    assert (rt.endpoint_delay_ns, rt.active_chunks_per_dimension, rt.preferred_dataset_splits) == (10, 1, 4)
    assert rt.local_mem_bw_GBps == 50 and rt.collective_optimization == "localBWAware"
    assert [a.name for a in rt.implementations["all_to_all"]] == ["ring"]
    assert rt.notes == ("boost-mode: ignored by ASTRA-sim (it never reads this key)",)


def test_algorithm_names():
    names = ["ring", "direct", "direct8", "halvingDoubling", "doubleBinaryTree", "oneRing", "oneDirect", "oneDirect4",
             "oneHalvingDoubling"]
    algos = [parse_algorithm(n, "s", "k") for n in names]
    assert [a.name for a in algos] == names
    assert algos[2] == Algorithm("direct", False, 8) and algos[7] == Algorithm("direct", True, 4)
    for bad in ("Ring", "direct0", "directX", "tree", 3):
        with pytest.raises(InputError, match="k"):
            parse_algorithm(bad, "s", "k")


def test_semantics_of_keys():
    cfg = parse_system({**BASE, "endpoint-delay": 7, "peak-perf": 900, "roofline-enabled": 1, "replay-only": 0,
                        "all-gather-implementation-custom": ["x/ag"], "L": 3, "mystery": 1})
    assert cfg.endpoint_delay(2.5) == 17  # int(7 * 2.5): --injection-scale applies to a given delay
    assert parse_system({}).endpoint_delay(2.5) == 10  # ...but not to the default
    assert cfg.roofline_enabled and cfg.peak_perf_TFLOPS == 900 and cfg.custom == {"all_gather": "x/ag"}
    assert any(n.startswith("mystery: ignored") for n in cfg.notes)
    assert any(n.startswith("L: read by ASTRA-sim only for its LogGP") for n in cfg.notes)
    assert any("truncated" in n for n in parse_system({"endpoint-delay": 2.5}).notes)


@pytest.mark.parametrize("patch,field,text", [
    ({"scheduling-policy": "RANDOM"}, "scheduling-policy", "expected one of LIFO, FIFO, EXPLICIT"),
    ({"collective-optimization": "fast"}, "collective-optimization", "baseline, localBWAware"),
    ({"preferred-dataset-splits": 0}, "preferred-dataset-splits", "> 0"),
    ({"preferred-dataset-splits": 2.5}, "preferred-dataset-splits", "integer"),
    ({"active-chunks-per-dimension": 0}, "active-chunks-per-dimension", ">= 1"),
    ({"local-mem-bw": "fast"}, "local-mem-bw", "expected a number"),
    ({"all-reduce-implementation": "ring"}, "all-reduce-implementation", "non-empty list"),
    ({"all-reduce-implementation": ["ring", "warp"]}, "all-reduce-implementation[1]", "unknown algorithm"),
    ({"all-reduce-implementation-custom": ["a", "b"]}, "all-reduce-implementation-custom", "exactly one"),
    ({"roofline-enabled": 1, "peak-perf": 0}, "peak-perf", "roofline"),
    ({"model-shared-bus": 1}, "model-shared-bus", "LogGP"),
    ({"replay-only": 2}, "replay-only", "0 or 1"),
])
def test_bad_values_name_the_key(patch, field, text):
    with pytest.raises(InputError) as info:
        parse_system({**BASE, **patch}, "sys.json")
    assert info.value.field == field and text in info.value.message and str(info.value).startswith("sys.json: ")


@pytest.mark.parametrize("missing,why", [("scheduling-policy", "to order collectives"),
                                         ("preferred-dataset-splits", "to cut a collective into chunks"),
                                         ("collective-optimization", "for a native all-reduce")])
def test_required_keys_missing(traces, tmp_path, missing, why):
    sys_json = tmp_path / "sys.json"
    sys_json.write_text(json.dumps({k: v for k, v in BASE.items() if k != missing}))
    with pytest.raises(InputError) as info:
        run_astra(mb(traces), sys_json, ring(traces))
    assert info.value.field == missing and why in str(info.value) and str(sys_json) in str(info.value)


def test_keys_needed_only_when_used(traces, tmp_path):
    # collective-optimization is read only for native all-reduce: an all-gather runs without it
    cfg = parse_system({k: v for k, v in BASE.items() if k != "collective-optimization"} |
                       {"all-gather-implementation": ["ring"]})
    assert run_astra(mb(traces, "all_gather"), cfg, ring(traces)).finish[0] > 0
    with pytest.raises(InputError, match="reduce-scatter-implementation: missing; the workload has a REDUCE_SCATTER"):
        run_astra(mb(traces, "reduce_scatter"), parse_system(BASE), ring(traces))
    with pytest.raises(InputError, match="local-mem-bw: must be > 0"):
        run_astra(mb(traces), parse_system({**BASE, "local-mem-bw": 0}), ring(traces))
    with pytest.raises(InputError, match="lists 2 algorithms but the network has 1 dimension"):
        run_astra(mb(traces), parse_system({**BASE, "all-reduce-implementation": ["ring", "ring"]}), ring(traces))


def test_track_local_mem_needs_tensor_inputs(traces):
    # hgx_h100_8gpu.json enables track-local-mem; the microbenchmarks carry no 'inputs' (ASTRA-sim stops too)
    with pytest.raises(InputError) as info:
        run_astra(mb(traces), traces / ASTRA / "inputs/system/analytical/hgx_h100_8gpu.json",
                  traces / ASTRA / "inputs/network/hgx_h100_8gpu.yml")
    assert info.value.field == "track-local-mem" and "Attribute 'inputs' not found in node 0" in info.value.message


def test_file_errors(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load_system(tmp_path / "none.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(InputError, match="not valid JSON"):
        load_system(bad)
    bad.write_text("[1]")
    with pytest.raises(InputError, match="expected a JSON object"):
        load_system(bad)


def test_broken_example_network_names_the_field(traces):
    """inputs/network/dgx_v100_8gpu.yml has a literal 'tbd' (ASTRA-sim: yaml-cpp 'bad conversion')."""
    with pytest.raises(InputError) as info:
        load_network(traces / ASTRA / "inputs/network/dgx_v100_8gpu.yml")
    assert info.value.field == "bandwidth[0]" and "'tbd'" in info.value.message


def test_networks_load(traces):
    for f in sorted((traces / ASTRA / "inputs/network").glob("*.yml")) + sorted(
            (traces / ASTRA / "examples/network/analytical").glob("*.yml")):
        if f.name == "dgx_v100_8gpu.yml":
            continue
        net = load_network(f)
        assert net.npus >= 2 and net.dims
    net = load_network(traces / ASTRA / "inputs/network/hgx_h100_32gpu.yml")
    assert net.npus_per_dim == (8, 4) and net.dims[0].latency == 936.25  # kept exactly as written
    assert net.delay_ns(0, 1, 32768) == int(2 * 936.25 + 32768 / (400 * 2**30 / 1e9))
    assert net.delay_ns(0, 8, 32768) == int(1000 + 32768 / (50 * 2**30 / 1e9))  # first differing dim only
    assert net.delay_ns(1, 9, 32768) == net.delay_ns(0, 8, 32768)


def test_remote_memory_configs(traces, tmp_path):
    cfg = load_memory(traces / ASTRA / "examples/remote_memory/analytical/no_memory_expansion.json")
    assert cfg.memory_type == "NO_MEMORY_EXPANSION" and not cfg.notes
    svc = load_memory(traces / "astra-sim__astra-sim-service/service/tests/test-resources/remote_memory.json")
    assert svc.memory_type and svc.latency_ns >= 0
    assert load_memory(None).memory_type == "NO_MEMORY_EXPANSION" and "requires" in load_memory(None).notes[0]
    m = parse_memory({"memory-type": "PER_NODE_MEMORY_EXPANSION", "num-nodes": 2, "num-npus-per-node": 4,
                      "remote-mem-latency": 100, "remote-mem-bw": 12.7, "x": 1})
    assert (m.num_nodes, m.num_npus_per_node, m.bw_GBps) == (2, 4, 12) and m.runtime_ns(120) == 110
    assert any("truncated" in n for n in m.notes) and any(n.startswith("x: ignored") for n in m.notes)
    with pytest.raises(InputError, match="memory-type: missing"):
        parse_memory({})
    with pytest.raises(InputError, match="Unsupported memory type"):
        parse_memory({"memory-type": "HBM"})


def test_comm_group_files(traces, tmp_path):
    g = load_groups(traces / "shuoshuc__astra-sim-artifacts/examples/T2D-analytical/inputs/comm_group.json", 16)
    assert g["0"].members == [0, 1, 2, 3] and g["4"].members == [0, 4, 8, 12]
    assert load_groups(None, 4) == {} and load_groups("path/with/empty/groups.json", 4) == {}
    unsorted = tmp_path / "g.json"
    unsorted.write_text(json.dumps({"1": [3, 1, 2]}))
    grp = load_groups(unsorted, 4)["1"]
    assert grp.members == [3, 1, 2] and grp.position(3) == 2  # the ring keeps JSON order, positions are sorted
    unsorted.write_text(json.dumps({"1": [0, 9]}))
    with pytest.raises(InputError, match="rank 9 is outside"):
        load_groups(unsorted, 4)
