"""Scale-out routing policies (ecmp, adaptive, spray): router, spray classes, YAML and CLI."""

import hashlib
import time
from collections import deque

import numpy as np
import pytest

from netsim.cli import main
from netsim.errors import InputError
from netsim.topology.builders import hgx_h100, nvswitch_domain
from netsim.topology.fattree import Tier, fat_tree
from netsim.topology.model import link_kind_id
from netsim.topology.multidim import Dim, multi_dim
from netsim.topology.policy import adaptive_pick, with_routing
from netsim.topology.spec import load_topology, parse_spec, build_topology


# ----------------------------------------------------------------- fabrics
def tree_2t_rail():
    return fat_tree(hgx_h100(), 8, [Tier("leaf", down=8, up=8), Tier("spine", down=16)], nic_bw=50e9,
                    routing="ecmp")


def tree_2t_tor_over():  # 2 leaves of 2 nodes, 8 spines (w = 8), leaf 4:1
    return fat_tree(hgx_h100(), 4, [Tier("leaf", down=16, up=8, up_bw=25e9), Tier("spine", down=2, parallel=1)],
                    nic_bw=50e9, rail_optimized=False, routing="ecmp")


def tree_3t_rail():  # w = 4 at both tiers
    return fat_tree(hgx_h100(), 16, [Tier("leaf", down=4, up=4), Tier("spine", down=4, up=4),
                                     Tier("core", down=8)], nic_bw=50e9, routing="ecmp")


def tree_3t_over(rail=False, pxn=None):  # w = 4, 2; leaf 4:1, spine 2.5:1
    return fat_tree(hgx_h100(), 16, [Tier("leaf", down=8, up=4, up_bw=25e9), Tier("spine", down=4, up=2, up_bw=20e9),
                                     Tier("core", down=16, parallel=1)], nic_bw=50e9, rail_optimized=rail, pxn=pxn,
                    routing="ecmp")


def tree_3t_built_over(rail=False):  # leaf 2:1 as built: 2 of 4 up ports cabled, so w = 2, 4 (16 spines, 8 cores)
    return fat_tree(hgx_h100(), 16, [Tier("leaf", down=4, up=4, up_bw=50e9, oversubscription=2),
                                     Tier("spine", down=4, up=4), Tier("core", down=8)], nic_bw=50e9,
                    rail_optimized=rail, routing="ecmp")


def tree_2t_planes():  # 2 planes (GPUs 0, 2, 4, 6 in plane 0), each 4 leaves and 2 spines; PXN across planes
    return fat_tree(hgx_h100(), 8, [Tier("leaf", down=4, up=4), Tier("spine", down=8)], nic_bw=50e9, planes=2,
                    routing="ecmp")


FABRICS = {"2t-planes": tree_2t_planes, "2t-rail": tree_2t_rail, "2t-tor-over": tree_2t_tor_over,
           "3t-rail": tree_3t_rail,
           "3t-over-tor": tree_3t_over, "3t-over-rail": lambda: tree_3t_over(rail=True),
           "3t-over-tor-pxn": lambda: tree_3t_over(pxn=True), "3t-built-over-tor": tree_3t_built_over,
           "3t-built-over-rail": lambda: tree_3t_built_over(rail=True)}

#: sha256 of the routes of 4000 random (src, dst, key) triples, computed with the router before
#: routing policies existed: ECMP must stay bit for bit the same.
ECMP_GOLDEN = {"2t-rail": "499c6d18f9ca6ec4", "3t-rail-old": "03e98ddbc818560a", "3t-dgx1": "f156158c9ae9cd53"}


def _digest(t):
    rng = np.random.default_rng(1)
    n = t.n_gpus
    src, dst, key = rng.integers(0, n, 4000), rng.integers(0, n, 4000), rng.integers(0, 64, 4000)
    ip, lk = t.routes(src, dst, key)
    return hashlib.sha256(ip.astype(np.int64).tobytes() + lk.astype(np.int64).tobytes()).hexdigest()[:16]


def test_ecmp_routes_unchanged_bit_for_bit():
    from netsim.topology.builders import dgx1_v100
    old3 = fat_tree(hgx_h100(), 16, [Tier("leaf", down=4, up=4), Tier("spine", down=4, up=4), Tier("core", down=32)],
                    nic_bw=50e9, routing="ecmp")
    dgx1 = fat_tree(dgx1_v100(), 8, [Tier("leaf", down=4, up=4), Tier("spine", down=4, up=4), Tier("core", down=16)],
                    nic_bw=50e9, routing="ecmp")
    got = {"2t-rail": _digest(tree_2t_rail()), "3t-rail-old": _digest(old3), "3t-dgx1": _digest(dgx1)}
    assert got == ECMP_GOLDEN
    assert tree_2t_rail().routing == "ecmp" and tree_2t_rail().link_class is None


# ------------------------------------------------------------- with_routing
def test_with_routing_returns_a_new_topology_and_keeps_the_old():
    t = tree_3t_rail()
    s = with_routing(t, "spray")
    assert s is not t and t.routing == "ecmp" and s.routing == "spray"
    assert with_routing(s, "spray") is s
    assert with_routing(s, "ecmp").routing == "ecmp" and with_routing(s, "ecmp").link_class is None
    assert t.capacity is t.link_bw and np.array_equal(s.link_bw, t.link_bw)
    a = with_routing(t, "adaptive")
    assert a.capacity is a.link_bw and a.spread(np.ones(3)).tolist() == [1, 1, 1]


@pytest.mark.parametrize("topo", [nvswitch_domain(4, links_per_gpu=2, link_bw=25e9),
                                  multi_dim([Dim("Switch", 4, 50e9, 5e-7), Dim("Ring", 2, 25e9, 1e-6)])])
def test_policies_need_a_fat_tree(topo):
    assert with_routing(topo, "ecmp") is topo
    for policy in ("adaptive", "spray"):
        with pytest.raises(InputError, match=f"--routing: routing '{policy}' applies to a fat-tree"):
            with_routing(topo, policy)


def test_bad_policy_is_a_one_line_error():
    with pytest.raises(InputError) as err:
        with_routing(tree_2t_rail(), "random")
    assert str(err.value) == "--routing: expected one of ecmp, ftree, adaptive, spray, got 'random'"


def test_router_wrapped_for_failures_is_refused():
    from dataclasses import replace
    t = tree_2t_tor_over()
    wrapped = replace(with_routing(t, "adaptive"), router=object())
    with pytest.raises(InputError, match="adaptive routing needs the fat-tree router"):
        wrapped.routes(np.array([0]), np.array([20]))
    sprayed = replace(with_routing(t, "spray"), router=object())
    with pytest.raises(InputError, match="^routing: spray routing needs the fat-tree router"):
        sprayed.routes(np.array([0]), np.array([20]))
    with pytest.raises(InputError, match="router was wrapped"):
        with_routing(replace(wrapped, routing="ecmp"), "spray")


# --------------------------------------------------------------------- spray
@pytest.mark.parametrize("name", sorted(FABRICS))
def test_spray_routes_through_representatives_and_sums_classes(name):
    t = with_routing(FABRICS[name](), "spray")
    n = t.n_gpus
    src, dst = np.repeat(np.arange(n), n), np.tile(np.arange(n), n)
    ip, lk = t.routes(src, dst, np.arange(src.size) % 7)
    assert np.array_equal(t.link_class[lk], lk)  # only representatives (and links of no class)
    rep = t.link_class == np.arange(t.n_links)
    ib = t.link_kind == link_kind_id("ib")
    assert np.isclose(t.capacity[rep].sum(), t.link_bw.sum())  # the sum over classes: the whole fabric
    assert np.isclose(t.capacity[rep & ib].sum(), t.link_bw[ib].sum())
    size = np.bincount(t.link_class, minlength=t.n_links)
    assert np.allclose(t.capacity[rep], t.link_bw[rep] * size[rep])  # healthy tiers: equal members
    assert np.array_equal(t.capacity[~rep], t.link_bw[~rep])
    assert (size[rep & ~ib] == 1).all()  # NVLink and PCIe: no class
    xgft = t.facts.xgft
    widths = sorted({int(s) for s in size[rep & ib]})
    W = np.cumprod([lv.w for lv in xgft])
    assert widths == sorted({1} | {int(w) for w in W[1:]})  # NIC links 1; tier i: W_i = w_2 .. w_i


def _all_shortest_paths(t, a, b, usable):
    """Every shortest path a -> b over ``usable`` links (lists of link ids), by BFS and back-tracking."""
    out_links, in_links = {}, {}
    for lk in np.flatnonzero(usable).tolist():
        out_links.setdefault(int(t.link_src[lk]), []).append(lk)
        in_links.setdefault(int(t.link_dst[lk]), []).append(lk)
    dist, q = {a: 0}, deque([a])
    while q:
        u = q.popleft()
        for lk in out_links.get(u, []):
            v = int(t.link_dst[lk])
            if v not in dist:
                dist[v] = dist[u] + 1
                q.append(v)
    paths, stack = [], [(b, [])]
    while stack:
        node, suffix = stack.pop()
        if node == a:
            paths.append(suffix)
            continue
        for lk in in_links.get(node, []):
            u = int(t.link_src[lk])
            if dist.get(u, -9) == dist[node] - 1:
                stack.append((u, [lk] + suffix))
    return paths


@pytest.mark.parametrize("name", ["2t-tor-over", "3t-rail", "3t-over-tor", "3t-over-rail", "3t-over-tor-pxn",
                                  "3t-built-over-tor", "2t-planes"])
def test_spread_equals_exact_even_split_over_all_equal_cost_paths(name):
    """Brute force: split every flow's bytes evenly over all shortest fabric paths, per link;
    ``spread`` of the bytes counted on the spray routes must give exactly that."""
    t = with_routing(FABRICS[name](), "spray")
    rng = np.random.default_rng(7)
    n = t.n_gpus
    src, dst = rng.integers(0, n, 60), rng.integers(0, n, 60)
    nbytes = rng.uniform(1, 100, 60)
    ip, lk = t.routes(src, dst)
    on_reps = np.bincount(lk, weights=np.repeat(nbytes, np.diff(ip)), minlength=t.n_links)
    ib = t.link_kind == link_kind_id("ib")
    exact = np.zeros(t.n_links)
    cache = {}
    for i in range(src.size):
        path = lk[ip[i]:ip[i + 1]]
        fab = path[ib[path]]
        exact[path[~ib[path]]] += nbytes[i]
        if not fab.size:
            continue
        a, b = int(t.link_src[fab[0]]), int(t.link_dst[fab[-1]])
        paths = cache.setdefault((a, b), _all_shortest_paths(t, a, b, ib))
        assert len(paths[0]) == fab.size
        for p in paths:
            exact[p] += nbytes[i] / len(paths)
    spread = t.spread(on_reps)
    assert np.allclose(spread, exact)
    assert np.isclose(spread.sum(), on_reps.sum())  # bytes conserved
    copied = t.spread(on_reps, additive=False)
    assert np.array_equal(copied, on_reps[t.link_class])


def test_spread_follows_bandwidth_inside_a_degraded_class():
    from dataclasses import replace
    t = with_routing(tree_2t_tor_over(), "spray")
    rep = int(np.flatnonzero((np.bincount(t.link_class, minlength=t.n_links) > 1))[0])
    members = np.flatnonzero(t.link_class == rep)
    bw = t.link_bw.copy()
    bw[members[1]] *= 0.5  # a degraded member
    d = replace(t, link_bw=bw)
    assert np.isclose(d.capacity[rep], bw[members].sum())
    v = np.zeros(t.n_links)
    v[rep] = 100.0
    s = d.spread(v)
    assert np.isclose(s[members].sum(), 100.0) and np.isclose(s[members[1]], s[members[0]] / 2)


def test_path_bottleneck_uses_capacity():
    t = tree_2t_tor_over()
    s = with_routing(t, "spray")
    src, dst = np.array([0]), np.array([20])  # leaf 0 -> leaf 1 via a spine
    assert t.path_bottleneck(*t.routes(src, dst))[0] == pytest.approx(25e9)  # one 4:1 uplink
    assert s.path_bottleneck(*s.routes(src, dst))[0] == pytest.approx(50e9)  # 8 sprayed uplinks: the NIC


# ------------------------------------------------------------------ adaptive
def test_adaptive_on_an_idle_fabric_is_ecmp_for_each_flow():
    for make in (tree_2t_tor_over, tree_3t_rail, tree_3t_over, tree_3t_built_over):
        t = make()
        a = with_routing(t, "adaptive")
        rng = np.random.default_rng(3)
        for s, d, k in zip(rng.integers(0, t.n_gpus, 150), rng.integers(0, t.n_gpus, 150), rng.integers(0, 9, 150)):
            s, d, k = np.array([s]), np.array([d]), np.array([k])
            expect = t.routes(s, d, k)[1]
            assert np.array_equal(a.routes(s, d, k)[1], expect)
            assert np.array_equal(a.routes(s, d, k, load=np.zeros(t.n_links, np.int64))[1], expect)


def _colliding_flows(t, k):
    """k flows leaf 0 -> leaf 1 (distinct sources and destinations) that ECMP puts on one uplink."""
    src, dst = np.arange(16), 16 + (np.arange(16) * 5) % 16
    ip, lk = t.routes(src, dst)
    up = lk[ip[:-1] + 2]  # gpu->nic (PCIe), nic->leaf, leaf->spine, spine->leaf, ...
    values, counts = np.unique(up, return_counts=True)
    hot = values[np.argmax(counts)]
    rows = np.flatnonzero(up == hot)[:k]
    assert rows.size == k, "the fixture should have an ECMP collision"
    return src[rows], dst[rows], hot


def test_adaptive_spreads_flows_that_ecmp_collides():
    t = tree_2t_tor_over()
    a = with_routing(t, "adaptive")
    src, dst, hot = _colliding_flows(t, 3)
    ip, lk = a.routes(src, dst)
    up = lk[ip[:-1] + 2]
    down = lk[ip[:-1] + 3]
    assert len(set(up.tolist())) == 3 and len(set(down.tolist())) == 3
    assert up[0] == hot  # the first keeps its ECMP path
    assert all(t.link_kind[up] == link_kind_id("ib"))


def test_adaptive_avoids_loaded_links_and_leaves_the_callers_load_alone():
    t = tree_2t_tor_over()
    a = with_routing(t, "adaptive")
    src, dst = np.array([0]), np.array([20])
    ecmp = t.routes(src, dst)[1]
    load = np.zeros(t.n_links, np.int64)
    load[ecmp[2]] = 5  # the ECMP uplink
    before = load.copy()
    got = a.routes(src, dst, load=load)[1]
    assert got[2] != ecmp[2] and np.array_equal(load, before)
    # the others tie: the first branch in cyclic order from the ECMP branch wins
    base, w = ecmp[2] - (ecmp[2] - t.router.level_base[0]) % 8, 8
    assert got[2] == base + ((ecmp[2] - base) + 1) % w


def test_adaptive_is_transfer_by_transfer_on_3_tiers_and_with_pxn():
    """Batch placement equals placing the transfers one at a time, carrying the load along."""
    for t in (with_routing(tree_3t_over(), "adaptive"), with_routing(tree_3t_over(pxn=True), "adaptive"),
              with_routing(tree_3t_rail(), "adaptive"), with_routing(tree_3t_built_over(), "adaptive")):
        rng = np.random.default_rng(11)
        src, dst = rng.integers(0, t.n_gpus, 80), rng.integers(0, t.n_gpus, 80)
        load = rng.integers(0, 3, t.n_links)
        ip, lk = t.routes(src, dst, load=load)
        live = load.copy()
        fabric_levels = t.link_kind == link_kind_id("ib")
        for i in range(src.size):
            one = t.routes(src[i:i + 1], dst[i:i + 1], load=live)[1]
            assert np.array_equal(one, lk[ip[i]:ip[i + 1]])
            live[one[fabric_levels[one]]] += 1


def test_adaptive_pick_ties_and_order():
    loads = np.array([[0, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0]])
    up, down = np.array([0, 0, 0, 0]), np.array([100, 100, 100, 200])
    assert adaptive_pick(loads, up, down, np.array([2, 2, 2, 2])).tolist() == [2, 0, 1, 2]


def test_adaptive_routes_16k_transfers_fast():
    t = with_routing(load_topology("topologies/studies/fat_tree_3tier.yaml"), "adaptive")
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, t.n_gpus, 16384), rng.integers(0, t.n_gpus, 16384)
    t0 = time.perf_counter()
    t.routes(src, dst, load=np.zeros(t.n_links, np.int64))
    assert time.perf_counter() - t0 < 1.0


# ---------------------------------------------------------------- YAML + CLI
DOC = {"node": {"preset": "hgx-h100"}, "nodes": 4,
       "scale_out": {"rail_optimized": False, "tiers": [{"down": 16, "up": 8}, {"down": 2, "parallel": 1}]}}


def test_yaml_routing_field():
    assert build_topology(parse_spec(DOC)).routing == "ftree"  # InfiniBand by default
    for policy in ("ecmp", "ftree", "adaptive", "spray"):
        doc = {**DOC, "scale_out": {**DOC["scale_out"], "routing": policy}}
        t = build_topology(parse_spec(doc, "t.yaml"), "t.yaml")
        assert t.routing == policy and (t.link_class is not None) == (policy == "spray")
    with pytest.raises(InputError) as err:
        parse_spec({**DOC, "scale_out": {**DOC["scale_out"], "routing": "ugal"}}, "t.yaml")
    assert str(err.value) == "t.yaml: scale_out.routing: expected one of ecmp, ftree, adaptive, spray, got 'ugal'"


def _write(tmp_path, routing):
    import yaml
    p = tmp_path / f"t-{routing}.yaml"
    p.write_text(yaml.safe_dump({**DOC, "scale_out": {**DOC["scale_out"], "routing": routing}}))
    return str(p)


def test_cli_bad_values_exit_2_with_one_line(tmp_path, capsys):
    good = _write(tmp_path, "spray")
    assert main(["topo", good]) == 0 and "routing       spray" in capsys.readouterr().out
    bad = _write(tmp_path, "foo")
    assert main(["topo", bad]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"netsim: error: {bad}: scale_out.routing: expected one of ecmp, ftree, adaptive, spray, got 'foo'"
    for argv in (["bench", "--topology", good, "--op", "all_reduce", "--routing", "foo"],
                 ["run", "--topology", good, "--workload", str(tmp_path / "none"), "--routing", "foo"],
                 ["run", "--topology", good, "--llm", "llama3-70b", "--tp", "8", "--pp", "1", "--dp", "4",
                  "--routing", "foo"]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err == "netsim: error: --routing: expected one of ecmp, ftree, adaptive, spray, got 'foo'", argv
    assert main(["bench", "--topology", "topologies/dgx-h100.yaml", "--op", "all_reduce", "--routing", "spray"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "applies to a fat-tree" in err


def test_bench_routing_flag_overrides_the_file(tmp_path, capsys):
    import json
    topo = _write(tmp_path, "ecmp")
    for policy in ("ecmp", "adaptive", "spray"):
        out = tmp_path / f"{policy}.json"
        assert main(["bench", "--topology", topo, "--op", "alltoall", "-b", "16M", "--routing", policy,
                     "-J", str(out)]) == 0
        text = capsys.readouterr().out
        assert (f"routing {policy}" in text) == (policy != "ecmp")
        assert json.loads(out.read_text())["config"]["routing"] == policy
    from netsim.perftests import bench
    rows = bench(topo, "all_reduce", [1 << 20], routing="spray")
    assert rows[0].time_us > 0


def test_sweep_keys_and_run_ids():
    from netsim.sweep.spec import parse_sweep
    base = {"topology": "topologies/studies/fat_tree_2tier.yaml", "op": "all_reduce", "size": "1M"}
    s = parse_sweep({"kind": "bench", "base": base, "grid": {"scale_out.routing": ["ecmp", "spray"],
                                                             "routing": ["adaptive"]}}, "s.yaml", ".")
    assert [c["scale_out.routing"] for c in s.configs] == ["ecmp", "spray"] and len(set(s.run_ids)) == 2
    plain = parse_sweep({"kind": "bench", "base": base}, "s.yaml", ".")
    assert "routing" not in plain.configs[0]  # no routing key: earlier run ids unchanged
    with pytest.raises(InputError, match=r"s.yaml: grid.routing\[1\]: expected one of ecmp, ftree, adaptive, spray"):
        parse_sweep({"kind": "bench", "base": base, "grid": {"routing": ["ecmp", "x"]}}, "s.yaml", ".")
    run = parse_sweep({"kind": "run", "base": {"topology": base["topology"], "llm.model": "llama3-70b",
                                               "llm.tp": 8, "llm.pp": 1, "llm.dp": 2},
                       "grid": {"routing": ["ecmp", "spray"]}}, "s.yaml", ".")
    assert [c["routing"] for c in run.configs] == ["ecmp", "spray"]


def test_run_routing_flag_and_api(tmp_path, capsys):
    import json
    from netsim.workload.simulation import simulate
    topo = _write(tmp_path, "ecmp")
    gen = ["--tp", "2", "--pp", "2", "--dp", "2", "--ep", "2", "--seq", "256", "--microbatches", "2"]
    assert main(["run", "--topology", topo, "--llm", "mixtral-8x7b", *gen, "--routing", "spray", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["iteration_us"] > 0
    wl = tmp_path / "wl"
    assert main(["workload", "llm", "--model", "mixtral-8x7b", *gen, "--out", str(wl)]) == 0
    plain = simulate(topo, str(wl / "llm"), str(wl / "comm_groups.json"))
    routed = simulate(topo, str(wl / "llm"), str(wl / "comm_groups.json"), routing="adaptive")
    assert "routing" not in plain.config and routed.config["routing"] == "adaptive"


@pytest.mark.parametrize("module", ["netsim.topology.policy", "netsim.topology.model", "netsim.topology.fattree"])
def test_doctests(module):
    import doctest
    import importlib
    assert doctest.testmod(importlib.import_module(module)).failed == 0


def test_run_sweep_with_routing_keys(tmp_path):
    import netsim
    import netsim.sweep as sweep
    topo = _write(tmp_path, "ecmp")
    s = sweep.parse_sweep({"kind": "run", "base": {"topology": topo, "llm.model": "mixtral-8x7b", "llm.tp": 2,
                                                   "llm.pp": 2, "llm.dp": 2, "llm.ep": 2, "llm.seq": 256,
                                                   "llm.microbatches": 2},
                           "grid": {"routing": ["ecmp", "spray"], "scale_out.routing": ["adaptive"]}}, "s.yaml", ".")
    report = sweep.run_sweep(s, tmp_path / "out", jobs=1, progress=False)
    assert not report.failed
    runs = netsim.open_results(tmp_path / "out").runs
    assert sorted(runs["routing"]) == ["ecmp", "spray"] and set(runs["scale_out.routing"]) == {"adaptive"}
