"""benchmarks/validate.py: every record is sourced and runnable; a few cheap rows run end to end."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import validate  # noqa: E402

KINDS = {"all-reduce", "all-to-all", "moe", "end-to-end", "scale-out"}   # issue 14's kinds, each needed
BY_ID = {r["id"]: r for r in validate.RECORDS}


def test_records_are_sourced_and_runnable():
    recs = validate.RECORDS
    assert len(recs) >= 30
    assert len(BY_ID) == len(recs), "ids are unique"
    assert KINDS <= {r["kind"] for r in recs}
    assert validate.ANCHORS <= set(BY_ID), "anchor ids name records"
    assert sum(not r["anchor"] for r in recs) >= 30, "at least 30 held-out points"
    for r in recs:
        assert r["published"] > 0 and r["unit"] and r["desc"], r["id"]
        # a source names a URL or a paper with its table
        assert "github.com" in r["source"] or "/" in r["source"] or "arXiv" in r["source"], r["id"]
        s = r["setting"]
        assert s["run"] in {"bench", "moe", "llm"}, r["id"]
        assert (ROOT / "topologies" / s["topology"]).is_file(), r["id"]
        assert s["model"] in {"flow", "analytical"}, r["id"]
        cmd = validate.command(r)
        assert cmd.startswith("netsim ") or cmd.startswith("run_moe("), r["id"]


def test_settings_are_valid_configs():
    """Every bench/moe setting passes netsim's own validation (topology overrides, op, sizes, GPUs)."""
    from netsim.perftests import BenchConfig, build_plan
    from netsim.topology.overrides import load_topology_set
    from netsim.perftests.moe import MoEConfig, validated

    topos = {}
    for r in validate.RECORDS:
        s = r["setting"]
        if s["run"] == "llm":
            continue
        key = (s["topology"], tuple(s["sets"]))
        if key not in topos:
            topos[key] = load_topology_set(ROOT / "topologies" / s["topology"], s["sets"])
        topo = topos[key]
        assert s["gpus"] <= topo.n_gpus, r["id"]
        if s["run"] == "moe":
            validated(MoEConfig(s["op"], tokens=s["tokens"], algo=s["algo"], mode=s["mode"], experts=s["experts"],
                                max_nodes=s["max_nodes"], gpus=s["gpus"], model=s["model"],
                                ll_transport=s.get("ll_transport", "nvlink")), topo)
        elif s["gpus"] <= 64:   # planning the 1,984-GPU row costs seconds; it runs in validate.py
            build_plan(topo, BenchConfig(s["op"], algo=s["algo"], gpus=s["gpus"], model=s["model"]), float(s["bytes"]))


def test_llm_published_step_time_follows_table4():
    """The 8,192-GPU row: 16.8M tokens x (6N + 12 L d s) / (8,192 x 430 TFLOP/s) = 12.54 s."""
    r = BY_ID["llama3-8k"]
    assert r["published"] == pytest.approx(2048 * 8192 * (6 * 405e9 + 12 * 126 * 16384 * 8192) / (8192 * 430e12),
                                           abs=1e-3)
    assert r["published"] == pytest.approx(12.54, abs=0.01)


@pytest.mark.parametrize("rid", ["ar-h100-ring", "sr-ndr", "deepep-ll-dispatch-ep16", "deepep-llrdma-dispatch-ep8"])
def test_cheap_rows_run(rid):
    row = validate.run_record(BY_ID[rid])
    assert row["simulated"] > 0
    assert row["error_pct"] == pytest.approx(100 * (row["simulated"] / row["published"] - 1))
    if not rid.startswith("deepep-"):      # calibration-anchor rows: within 5 % of the measurement
        assert abs(row["error_pct"]) < 5


def test_command_line_gives_the_same_number():
    """The printed command is the real one: netsim bench on the CLI reports the busbw simulate() returns."""
    r = BY_ID["sr-ndr"]
    out = subprocess.run(shlex.split(validate.command(r)), cwd=ROOT, capture_output=True, text=True, check=True).stdout
    avg = float(next(line for line in out.splitlines() if "Avg bus bandwidth" in line).split(":")[1])
    assert avg == pytest.approx(validate.simulate(r), abs=1e-3)


def test_summary_medians():
    rows = [{"kind": "a", "error_pct": e} for e in (-10.0, 2.0, 4.0)] + [{"kind": "b", "error_pct": 30.0}]
    s = validate.summary(rows)
    assert s["all"] == (7.0, 4) and s["a"] == (4.0, 3) and s["b"] == (30.0, 1)


def test_two_a100s_over_four_nvlinks_are_link_bound():
    """sr-a100-2gpu (nccl-tests#331: 4 NVLink3 per pair = 100 GB/s line, 80 at NCCL's 20.0 per link): the
    LEONARDO overrides give that pair, in P2P read mode; the 2 GiB send's channels (netsim 16 from the topology's
    6 links per GPU, NCCL 8 from the pair's 4, paths.cc:936) carry more than 80 GB/s at 14 each, so the links bind."""
    import numpy as np
    from netsim.perftests import BenchConfig, run_one
    from netsim.topology.overrides import load_topology_set
    from netsim.collectives import nccl, p2p
    t = load_topology_set(ROOT / "topologies" / "dgx-a100.yaml", validate.LEONARDO)
    assert t.n_gpus == 4
    s = p2p.P2PSetup.from_info(nccl.CommInfo.from_topology(t, np.arange(2)))
    assert s.read and s.parts(2 << 30) == 16 and min(s.parts(2 << 30), 8) * p2p.P2P_PER_CHANNEL_GBPS > 80
    row, _ = run_one(t, BenchConfig("sendrecv", gpus=2), 2 << 30)
    assert 79.9 < row.busbw_GBps < 80.0
    assert row.busbw_GBps == pytest.approx(validate.simulate(BY_ID["sr-a100-2gpu"]))


def test_pure_rdma_rows_send_same_node_copies_through_the_nic():
    """The rows of DeepEP's first low-latency table (NVSHMEM_DISABLE_P2P=1) run with --ll-transport rdma, the
    rows of the table measured after PR #173 with NVLink; the command line says which."""
    rdma, nvl = BY_ID["deepep-llrdma-dispatch-ep8"], BY_ID["deepep-ll-dispatch-ep8"]
    assert rdma["setting"]["ll_transport"] == "rdma" and nvl["setting"]["ll_transport"] == "nvlink"
    assert "--ll-transport rdma" in validate.command(rdma) and "--ll-transport" not in validate.command(nvl)
    assert validate.simulate(rdma) > 3 * validate.simulate(nvl)  # one NIC instead of NVLink


def test_readme_counts_the_records():
    held_out = sum(not r["anchor"] for r in validate.RECORDS)
    text = (ROOT / "README.md").read_text()
    assert f"Checked against {len(validate.RECORDS)} published measurements ({held_out} never used" in text


def test_llm_rows_run_sequence_parallel_and_the_cli_takes_their_arguments():
    """The Llama 3 rows pass --sequence-parallel (torchtitan's TP plan); their argv parses."""
    from netsim.cli import build_parser

    for rid in ("llama3-8k", "llama3-16k", "llama3-16k-cp16"):
        argv = validate._llm_argv(BY_ID[rid]["setting"])
        assert "--sequence-parallel" in argv and argv == validate.command(BY_ID[rid]).split()
        args = build_parser().parse_args(argv[1:])
        assert args.sequence_parallel is True and args.tp == 8


def test_issue33_held_out_rows_meet_the_count_and_read_their_tables():
    """Issue 33 item 1: >= 25 multi-node held-out nccl-tests rows (most on 16 hosts or more) and >= 5 end-to-end
    rows at >= 256 GPUs, none an anchor, every published figure read from published.yaml."""
    import published
    import validate_scale

    multi = [r for r in validate.RECORDS if r["kind"] in ("mn-all-reduce", "mn-all-to-all")]
    assert len(multi) >= 25 and not any(r["anchor"] for r in multi)
    assert sum(r["setting"]["gpus"] >= 64 for r in multi) > len(multi) / 2
    big = [r for r in validate.RECORDS if r["kind"] == "end-to-end" and "dp" in r["setting"]
           and r["setting"]["tp"] * r["setting"]["cp"] * r["setting"]["pp"] * r["setting"]["dp"] >= 256]
    assert len(big) >= 5
    for label, pub in published.rows("oci_gb300_quickstart")["all_reduce_2rack"].items():
        r = BY_ID[f"mn-ar-gb300-oci-2r-{label}"]
        assert r["published"] == pub and r["setting"]["bytes"] == validate_scale.size_bytes(label)
    tps = published.rows("megatron_bridge_25_11")["dsv3_gb200"]
    assert BY_ID["e2e-dsv3-gb200"]["published"] == pytest.approx(4096 * 4096 / (tps * 256), abs=1e-3)


def test_forced_nccl_settings_reach_the_command_line_and_the_simulation():
    """nccl-tests#322 forced ring, LL128 and 32 channels: the setting forces them, the printed command carries
    them, and the CLI reports the busbw simulate() returns (analytical model, 1,024 ranks)."""
    r = BY_ID["mn-ar-h100-roce-128n-4G"]
    s = r["setting"]
    assert (s["algo"], s["protocol"], s["channels"]) == ("ring", "LL128", 32)
    cmd = validate.command(r)
    assert "--proto LL128 --channels 32" in cmd
    out = subprocess.run(shlex.split(cmd), cwd=ROOT, capture_output=True, text=True, check=True).stdout
    avg = float(next(line for line in out.splitlines() if "Avg bus bandwidth" in line).split(":")[1])
    assert avg == pytest.approx(validate.simulate(r), abs=1e-3)
    forced = validate.simulate(r)
    assert forced != pytest.approx(validate.simulate(r | {"setting": s | {"protocol": "Simple"}}), rel=1e-3)


def test_new_llm_rows_pass_their_parallelism_to_the_cli():
    """The DeepSeek-V3 rows: EP, the interleaved schedule, the global batch and the topology overrides reach argv."""
    from netsim.cli import build_parser

    for rid in ("e2e-dsv3-gb300", "e2e-dsv3-gb200"):
        s = BY_ID[rid]["setting"]
        argv = validate._llm_argv(s)
        args = build_parser().parse_args(argv[1:])
        assert (args.ep, args.schedule, args.vpp, args.global_batch) == (s["ep"], "interleaved", 4, 4096)
        assert args.sets == s["sets"] and args.tp * args.pp * args.dp == 256


def test_sc21_rows_follow_table1_and_its_scripts():
    """Narayanan et al. SC21 Table 1 at >= 256 GPUs: step = eq. 3's FLOPs / (GPUs x achieved FLOP/s); the 1T row:
    96 x 3072 x 2048 x 128 x 25600^2 x (1 + 2048 / (6 x 25600) + 51200 / (16 x 128 x 25600)) / (3072 x 163e12)."""
    import validate_scale as vs

    rows = [r for r in validate.RECORDS if r["id"].startswith("e2e-sc21-")]
    assert len(rows) == 5 and all(r["setting"]["pp"] * r["setting"]["dp"] * 8 >= 256 for r in rows)
    assert set(vs.SC21) == {"18B", "39B", "76B", "145B", "310B", "530B", "1T"}  # every Table 1 row at >= 256 GPUs
    one = vs.sc21_setting("1T")
    flops = 96 * 3072 * 2048 * 128 * 25600 ** 2 * (1 + 2048 / (6 * 25600) + 51200 / (16 * 128 * 25600))
    assert one["published_s"] == pytest.approx(flops / (3072 * 163e12), rel=1e-12)
    # the two rows left out of the table need far more memory than the largest row it runs
    assert vs.sc21_memory_gib("530B") > 10 and vs.sc21_memory_gib("1T") > 20 > 5 > vs.sc21_memory_gib("310B")
    for r in rows:  # the 2021 kernels, full recomputation, the run's own GPUs
        s = r["setting"]
        assert s["kernels"] == "megatron-2021" and s["recompute"] == "full"
        assert "--kernels megatron-2021" in validate.command(r) and "--recompute full" in validate.command(r)
        assert s["sets"] == [f"nodes={s['tp'] * s['pp'] * s['dp'] // 8}"]
    assert "--overlap-grad-reduce" in validate.command(BY_ID["e2e-sc21-18b"])  # DDP-impl torch
    assert "--overlap-grad-reduce" not in validate.command(BY_ID["e2e-sc21-39b"])  # DDP-impl local
