"""Issue 16, bad inputs: every reproducer is a clean one-line error (exit 2) naming file and field."""

import gzip
import json
import os

import pytest
import yaml

from netsim.cli import main
from netsim.errors import InputError
from netsim.inputs import load_json, load_yaml
from netsim.units import parse_bandwidth, parse_size, parse_time
from netsim.chakra import EtNode, NodeType, write_et

TOPO = "topologies/dgx-h100.yaml"
SU = "topologies/h100-superpod-1su.yaml"


def fails(argv, capsys, *needles):
    """Run the CLI; assert exit 2, one stderr line, and that it names every needle."""
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    for n in needles:
        assert n in err, err
    return err


def su_with(tmp_path, edit, name="t.yaml"):
    data = yaml.safe_load(open(SU))
    edit(data)
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data))
    return str(p)


# ------------------------------------------------------------------ files (classes 4, 5)
def test_alias_bomb(tmp_path, capsys):
    text = 'a: &a ["x","x","x","x","x","x","x","x","x","x"]\n' + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8))
    p = tmp_path / "bomb.yaml"
    p.write_text(text)
    fails(["topo", str(p)], capsys, "bomb.yaml", "expands to more than")


@pytest.mark.parametrize("content, needle", [
    ("[" * 5000, "nested deeper"), (b"name: \xff\xfe\n", "expected UTF-8"), ("a: [1", "line 1")],
    ids=["deep", "utf8", "unclosed"])
def test_malformed_yaml(tmp_path, capsys, content, needle):
    p = tmp_path / "bad.yaml"
    p.write_bytes(content if isinstance(content, bytes) else content.encode())
    fails(["topo", str(p)], capsys, "bad.yaml", needle)


def test_directory_fifo_and_device(tmp_path, capsys):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    fails(["topo", str(tmp_path)], capsys, "is a directory")
    fails(["topo", str(fifo)], capsys, "not a regular file")
    fails(["topo", "/dev/zero"], capsys, "not a regular file")
    fails(["run", "--topology", TOPO, "--llm", "llama3-70b", "--tp", "2", "--pp", "1", "--dp", "1",
           "--faults", str(tmp_path)], capsys, "is a directory")


def test_json_depth_and_infinity(tmp_path):
    p = tmp_path / "m.json"
    p.write_text("[" * 5000)
    with pytest.raises(InputError, match="nested"):
        load_json(p)
    p.write_text('{"memory-type": "NO_MEMORY_EXPANSION", "remote-mem-latency": Infinity}')
    with pytest.raises(InputError, match="Infinity is not a JSON number"):
        load_json(p)


def test_yaml_size_limit(tmp_path):
    p = tmp_path / "big.yaml"
    p.write_text("x" * (2 << 20))
    with pytest.raises(InputError, match="at most 1 MiB"):
        load_yaml(p)


# ------------------------------------------------------------------ numbers and units (class 6)
@pytest.mark.parametrize("fn, text", [(parse_size, "1e99999999"), (parse_size, "1e999"),
                                      (parse_bandwidth, "1e400GB/s"), (parse_bandwidth, "1e-400GB/s"),
                                      (parse_time, "1e400s"), (parse_time, "1e-400s"), (parse_size, 10**400)],
                         ids=range(7))
def test_units_out_of_range(fn, text):
    with pytest.raises(InputError, match="expected"):
        fn(text, source="f.yaml", field="x")


@pytest.mark.parametrize("edit, field", [
    (lambda d: d["node"].update(preset=None, kind="nvswitch", gpus=2**63, links_per_gpu=18, link_bw="25GB/s"),
     "node.gpus"),
    (lambda d: d["node"].update(preset=None, kind="nvswitch", gpus=1000000, links_per_gpu=18,
                                link_bw="25GB/s"), "node.gpus"),
    (lambda d: d["node"].update(links_per_gpu=1000000), "node.links_per_gpu"),
    (lambda d: d["scale_out"]["tiers"][0].update(up=1000000), "scale_out.tiers[0].up"),
    (lambda d: d["scale_out"]["tiers"][0].update(up_bw="1e-400GB/s"), "scale_out.tiers[0].up_bw"),
    (lambda d: d["scale_out"].update(nic_bw="1e-400GB/s"), "scale_out.nic_bw"),
    (lambda d: d["scale_out"].update(nic_bw="1e400GB/s"), "scale_out.nic_bw"),
    (lambda d: d["scale_out"].update(nic_latency="1e400s"), "scale_out.nic_latency"),
    (lambda d: d["node"].update(link_bw="1e-400GB/s"), "node.link_bw"),
    (lambda d: d["scale_out"]["tiers"][0].update(oversubscription=float("inf"), up_bw=None), "oversubscription"),
    (lambda d: d.update(nodes=10**6), "nodes"),
])
def test_topology_fields(tmp_path, capsys, edit, field):
    def clean(d):
        edit(d)
        d["node"] = {k: v for k, v in d["node"].items() if v is not None}
        for t in d["scale_out"]["tiers"]:
            [t.pop(k) for k in [k for k, v in t.items() if v is None]]
    fails(["topo", su_with(tmp_path, clean)], capsys, "t.yaml", field)


def test_preset_overrides_are_honoured(tmp_path):
    from netsim.topology.spec import load_topology

    lat0 = load_topology(su_with(tmp_path, lambda d: d["node"].update(latency="0ns"), "a.yaml"))
    bw10 = load_topology(su_with(tmp_path, lambda d: d["node"].update(link_bw="10GB/s"), "b.yaml"))
    nvl = lat0.link_kind == 0
    assert (lat0.link_lat[nvl] == 0).all()
    assert (bw10.link_bw[nvl] / bw10.link_width[nvl] == pytest.approx(10e9 * 20.6 / 25))


def test_mesh_preset_refuses_nvls(tmp_path, capsys):
    p = tmp_path / "m.yaml"
    p.write_text("node: {preset: dgx1-v100, nvls: true}\n")
    fails(["topo", str(p)], capsys, "node.nvls")


# ------------------------------------------------------------------ bench (classes 4, 6, 7)
@pytest.mark.parametrize("args, needle", [
    (["-b", "0", "-e", "1G", "-i", "1"], "sizes"), (["-b", "1e99999999"], "-b"), (["-b", "1e999"], "-b")])
def test_bench_sizes(capsys, args, needle):
    fails(["bench", "--topology", TOPO, "--op", "all_reduce", *args], capsys, needle)


def test_bench_alltoall_memory_refused_up_front(capsys):
    fails(["bench", "--topology", "topologies/fat-tree-64k.yaml", "--op", "alltoall", "--gpus", "65536"],
          capsys, "--gpus", "GiB of memory", "or fewer")


def test_bench_skew_matrix_huge(tmp_path, capsys):
    p = tmp_path / "m.csv"
    p.write_text("\n".join(",".join(["1e300"] * 8) for _ in range(8)))
    fails(["bench", "--topology", TOPO, "--op", "alltoall", "--skew-matrix", str(p)], capsys, "m.csv", "[0, 0]")


# ------------------------------------------------------------------ faults and stragglers (6, 7, 8)
RUN = ["run", "--topology", TOPO, "--llm", "llama3-70b", "--tp", "2", "--pp", "2", "--dp", "2"]


@pytest.mark.parametrize("doc, field", [
    ("compute:\n  - distribution: {lognormal: {sigma: -1}}\n", "sigma"),
    ("compute:\n  - factor: 1000000000000000000000000000000\n", "compute[0].factor"),
    ("seed: 1267650600228229401496703205376\n", "seed"),
    ("compute:\n  - distribution: {lognormal: {sigma: 1.0e+308}}\n", "sigma"),
    ("compute:\n  - factor: 1.0e+308\n", "compute[0].factor"),
    ("compute:\n  - distribution: {uniform: {low: -1, high: 2}}\n", "uniform.low"),
    ("compute:\n  - distribution: {uniform: {low: 3, high: 2}}\n", "uniform.low"),
    ("compute:\n  - distribution: {uniform: {low: 1, high: 2}}\n    min: 3\n    max: 2\n", "compute[0].min"),
    ("launch_jitter:\n  distribution: {uniform: {low: 3us, high: 2us}}\n", "uniform.low"),
    ("links:\n  - match: {kind: ib}\n    factor: 1.0e+308\n", "links[0].factor"),
])
def test_faults_file(tmp_path, capsys, doc, field):
    p = tmp_path / "f.yaml"
    p.write_text(doc)
    fails([*RUN, "--faults", str(p)], capsys, "f.yaml", field)


@pytest.mark.parametrize("spec, needle", [("0:1e308", "FACTOR"), ("-1:2", "RANK"), ("0:nan", "FACTOR")])
def test_straggler(capsys, spec, needle):
    fails([*RUN, "--straggler", spec], capsys, "--straggler", needle)


def test_llm_tp_must_divide_heads(capsys):
    fails(["run", "--topology", TOPO, "--llm", "llama3-70b", "--tp", "3", "--pp", "1", "--dp", "1"],
          capsys, "tp", "heads")


# ------------------------------------------------------------------ Chakra on run (classes 6, 7)
def _workload(tmp_path, bad_nodes):
    good = [EtNode(0, "c0", NodeType.COMP_NODE, duration_micros=5),
            EtNode(1, "ar", NodeType.COMM_COLL_NODE, data_deps=(0,), comm_type=0, comm_size=1024)]
    for r, nodes in enumerate((bad_nodes, good)):
        write_et(tmp_path / f"w.{r}.et", nodes)
    return str(tmp_path / "w")


@pytest.mark.parametrize("nodes, field", [
    ([EtNode(1, "ar", NodeType.COMM_COLL_NODE, comm_type=99, comm_size=8)], "comm_type"),
    ([EtNode(1, "ar", NodeType.COMM_COLL_NODE, comm_type=0, comm_size=-8)], "comm_size"),
    ([EtNode(1, "ar", NodeType.COMM_COLL_NODE, comm_size=8)], "comm_type"),
    ([EtNode(2, "x", 99)], "type"),
    ([EtNode(0, "c", NodeType.COMP_NODE, duration_micros=5, data_deps=(0,))], "data_deps"),
    ([EtNode(0, "c", NodeType.COMP_NODE, duration_micros=5, tensor_size=2**64 - 5)], "tensor_size"),
])
def test_chakra_run(tmp_path, capsys, nodes, field):
    fails(["run", "--topology", TOPO, "--workload", _workload(tmp_path, nodes)], capsys, "w.0.et", field)


def test_gzip_bomb(tmp_path, capsys):
    p = tmp_path / "b.0.et"
    with gzip.open(p, "wb", compresslevel=9) as f:
        for _ in range(16):
            f.write(b"\0" * (16 << 20))
    fails(["trace", "inspect", str(p)], capsys, "b.0.et", "gzip bomb")


# ------------------------------------------------------------------ sweeps (classes 4, 6, 7)
def _sweep(tmp_path, extra):
    p = tmp_path / "s.yaml"
    p.write_text(f"kind: bench\nbase: {{topology: {os.path.abspath(TOPO)}, op: all_reduce, size: 1M}}\n{extra}")
    return str(p)


@pytest.mark.parametrize("extra, field", [
    ("grid:\n  size: [" + ",".join(str(2**i) for i in range(41)) + "]\n  seed: [" +
     ",".join(map(str, range(3000))) + "]\n", "configurations"),
    ("seeds: 1000000\n", "seeds"), ("grid: {seed: [1.5]}\n", "grid.seed[0]"),
    ("grid: {gpus: [abc]}\n", "grid.gpus[0]")])
def test_sweep_dry_run(tmp_path, capsys, extra, field):
    fails(["sweep", _sweep(tmp_path, extra), "--out", str(tmp_path / "o"), "--dry-run"], capsys, "s.yaml", field)


def test_sweep_scheduler_garbage(tmp_path, capsys):
    fails(["sweep", _sweep(tmp_path, ""), "--out", str(tmp_path / "o"), "--scheduler", "garbage"], capsys,
          "--scheduler")


# ------------------------------------------------------------------ ASTRA-sim inputs
def test_astra_system_and_groups(tmp_path):
    from netsim.astra.system import parse_system
    from netsim.chakra.groups import CommGroups

    with pytest.raises(InputError, match="preferred-dataset-splits"):
        parse_system({"preferred-dataset-splits": 1e308}, "s.json")
    cfg = parse_system({f"k{i}": i for i in range(300_000)}, "s.json")
    assert len(cfg.notes) == 1 and "300,000 keys ignored" in cfg.notes[0]
    with pytest.raises(InputError, match="integer ranks"):
        CommGroups({"0": [True, False, 2, 3]}, 8, "g.json")
    p = tmp_path / "m.json"
    p.write_text('{"memory-type": "NO_MEMORY_EXPANSION", "remote-mem-latency": Infinity}')
    with pytest.raises(InputError, match="m.json"):
        from netsim.astra.memory import load_memory
        load_memory(p)


@pytest.mark.parametrize("value", ["nan", "-100", "inf"])
def test_astra_injection_scale(traces, capsys, value):
    d = traces / "astra-sim__astra-sim/tests/rt_template/inputs"
    mb = traces / "astra-sim__astra-sim/examples/workload/microbenchmarks/all_reduce/8npus_1MB/all_reduce"
    fails(["astra", f"--workload-configuration={mb}", f"--system-configuration={d / 'system_cfg.json'}",
           f"--network-configuration={d / 'network_cfg.yml'}", f"--injection-scale={value}"], capsys,
          "--injection-scale")


# ------------------------------------------------------------------ one line (class 8)
def test_warnings_dropped_when_the_run_fails(tmp_path, capsys):
    import warnings

    from netsim.cli import app as cli

    def boom(args):
        warnings.warn("overflow encountered", RuntimeWarning)
        raise InputError("bad", source="x")
    parser = cli.build_parser()
    capsys.readouterr()
    orig = cli.build_parser
    try:
        cli.build_parser = lambda argv=None: parser
        parser.set_defaults(func=boom)
        assert cli.main([]) == 2
    finally:
        cli.build_parser = orig
    err = capsys.readouterr().err
    assert err.strip() == "netsim: error: x: bad"


def test_long_messages_stay_one_line():
    from netsim.cli import one_line

    text = one_line("a\nb" + "x" * 5000)
    assert "\n" not in text and len(text) <= 2000
    assert json.dumps(text)
