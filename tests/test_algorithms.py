"""Tree, halving-doubling, hierarchical / multi-dim, NVLS, barrier and schedule composition.

Data flow is checked symbolically: builders record, under ``compose.tracing()``, which
units of the buffer each transfer carries; :func:`check_flow` replays the schedule on
per-rank contribution counts and verifies the end state (every contribution exactly once).
"""

import math

import numpy as np
import pytest
import simpy

from netsim.collectives import compose
from netsim.collectives.barrier import barrier
from netsim.collectives.compose import REDUCE, concat, flow_of, parallel, traced, tracing
from netsim.collectives.executor import run_collective
from netsim.collectives.halving_doubling import hd_all_gather, hd_all_reduce, hd_reduce_scatter
from netsim.collectives.hierarchical import hierarchical, multi_dim, nvls_tree_all_reduce
from netsim.collectives.nvls import nvls_all_gather, nvls_all_reduce, nvls_reduce_scatter
from netsim.collectives.ring import ring_all_gather, ring_all_reduce
from netsim.collectives.schedule import DOWN, PATH, UP, Phase, Schedule, Step
from netsim.collectives.tree import dtree_parents, tree_all_reduce, tree_edges, tree_height
from netsim.errors import InputError
from netsim.network.analytical import AnalyticalNetwork
from netsim.network.flow import FlowNetwork
from netsim.topology.builders import nvswitch_domain
from netsim.topology.fattree import Tier, fat_tree

from conftest import TOPOLOGIES

NS = [2, 3, 5, 6, 7, 8, 12, 16, 17, 24, 64]
MODELS = [AnalyticalNetwork, FlowNetwork]
B, LAT = 50e9, 1e-6
HD = {"all_reduce": hd_all_reduce, "reduce_scatter": hd_reduce_scatter, "all_gather": hd_all_gather}
NVLS = {"all_reduce": nvls_all_reduce, "reduce_scatter": nvls_reduce_scatter, "all_gather": nvls_all_gather}


# ----------------------------------------------------------- the checker
def check_flow(sched, op, dom=None):
    """Replay ``sched`` on contribution counts; assert the end state ``op`` requires.

    state[r, u, c]: how many times rank c's contribution to unit u is in rank r's buffer
    (rows n.. are the switches of NVLS domains of ``dom`` ranks).  A step reads a snapshot
    of the state before it: REDUCE adds (on an UP transfer: the switch gets the sum of the
    step's contributions), COPY overwrites.
    """
    flow = flow_of(sched)
    assert flow is not None, "no flow recorded"
    n, U = sched.nranks, flow.units
    assert len(flow.phases) == len(sched.phases)
    dom = dom or n
    state = np.zeros((n + -(-n // dom), U, n), dtype=np.int32)
    units = np.arange(U)
    assert op == "all_reduce" or U % n == 0
    owner = units // max(U // n, 1)  # shard owners (RS output, AG input)
    if op == "all_gather":
        state[owner, units, owner] = 1
    else:
        state[np.arange(n), :, np.arange(n)] = 1
    unit_b = sched.nbytes / U
    for ph, fn in zip(sched.phases, flow.phases):
        st = ph.step
        hop = np.zeros(st.n_transfers, np.int64) if st.hop is None else st.hop
        for rep in range(ph.repeat):
            tid, unit, kind = (np.asarray(a, dtype=np.int64) for a in fn(rep))
            carried = np.bincount(tid, minlength=st.n_transfers) * unit_b
            assert np.allclose(carried, st.nbytes, rtol=1e-9, atol=1e-9), "bytes do not match the pieces"
            h, s, d = hop[tid], st.src[tid], st.dst[tid]
            assert ((unit >= 0) & (unit < U)).all()
            read = np.where(h == DOWN, n + d // dom, s)
            write = np.where(h == UP, n + s // dom, d)
            vals = state[read, unit]
            red = kind == REDUCE
            assert not (red & (h == DOWN)).any()
            key = write * U + unit
            copies = key[~red]
            assert np.unique(copies).size == copies.size, "two copies into one place"
            assert not np.isin(copies, key[red]).any(), "copy and reduce into one place"
            state[write[~red], unit[~red]] = vals[~red]
            up = red & (h == UP)
            if up.any():
                uk, inv = np.unique(key[up], return_inverse=True)
                acc = np.zeros((uk.size, n), np.int32)
                np.add.at(acc, inv, vals[up])
                state[uk // U, uk % U] = acc
            path = red & (h == PATH)
            np.add.at(state, (write[path], unit[path]), vals[path])
    final = state[:n]
    if op == "all_reduce":
        assert (final == 1).all(), "not every rank holds the full reduction"
    elif op == "reduce_scatter":
        assert (final[owner, units] == 1).all(), "a shard owner lacks its reduced shard"
    elif op == "all_gather":
        want = np.zeros((U, n), np.int32)
        want[units, owner] = 1
        assert (final == want[None]).all(), "not every rank holds every shard"
    return final


def traced_build(fn, *args, **kw):
    with tracing():
        return fn(*args, **kw)


def volumes(s):
    return s.bytes_sent(), s.bytes_received()


def domain(n):
    return nvswitch_domain(n, links_per_gpu=1, link_bw=B, latency=LAT, nvls=True)


def run(model, topo, s, ranks=None, **kw):
    return run_collective(model(simpy.Environment(), topo), s, ranks, **kw).time


def check_common(s, op, S):
    """Conservation and the volume every rank must move."""
    sent, recv = volumes(s)
    n = s.nranks
    if all(p.step.hop is None or (p.step.hop == PATH).all() for p in s.phases):
        assert sent.sum() == pytest.approx(recv.sum())
    if n > 1 and op in ("all_reduce", "all_gather"):
        assert (recv >= (n - 1) / n * S * (1 - 1e-9)).all()
    if n > 1 and op in ("all_reduce", "reduce_scatter"):
        assert (sent >= (n - 1) / n * S * (1 - 1e-9)).all()


# ------------------------------------------------ halving-doubling
@pytest.mark.parametrize("op", list(HD))
@pytest.mark.parametrize("n", NS)
def test_hd_data_flow_and_volumes(op, n):
    S = 3.0 * 2**20
    s = traced_build(HD[op], n, S)
    check_flow(s, op)
    check_common(s, op, S)
    p = 1 << (n.bit_length() - 1)
    sent, recv = volumes(s)
    factor = 2 if op == "all_reduce" else 1
    if n == p:
        assert np.allclose(sent, factor * (n - 1) / n * S) and np.allclose(recv, sent)
        assert s.n_steps == factor * int(math.log2(n))
    elif op == "all_reduce":
        core = 2 * (p - 1) / p * S
        want = np.r_[np.full(n - p, core + S), np.full(2 * p - n, core), np.full(n - p, S)]
        assert np.allclose(sent, want) and np.allclose(recv, want)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("n", [2, 3, 4, 6, 8, 12, 16])
def test_hd_closed_form(model, n):
    S, a = 2**26, 2 * LAT
    p = 1 << (n.bit_length() - 1)
    fold = 0.0 if n == p else 2 * (a + S / B)  # non-powers of two: fold + unfold of the whole buffer
    want = fold + 2 * math.log2(p) * a + 2 * (p - 1) / p * S / B
    assert run(model, domain(n), hd_all_reduce(n, S)) == pytest.approx(want, rel=1e-9)
    if n == p:
        for fn in (hd_reduce_scatter, hd_all_gather):
            assert run(model, domain(n), fn(n, S)) == pytest.approx(math.log2(n) * a + (n - 1) / n * S / B, rel=1e-9)


# ------------------------------------------------------------- tree
TREE_CASES = [(n, 1, 1) for n in NS] + [(8, 4, 1), (12, 4, 2), (16, 4, 1), (24, 4, 1), (64, 4, 2),
                                        (8, 8, 1), (16, 8, 2), (24, 8, 1), (64, 8, 1), (64, 8, 4)]


@pytest.mark.parametrize("n,g,ch", TREE_CASES)
def test_tree_data_flow_and_volumes(n, g, ch):
    S, c = 2.0**22, 3
    s = traced_build(tree_all_reduce, n, S, local_size=g, chunks=c, channels=ch)
    check_flow(s, "all_reduce")
    check_common(s, "all_reduce", S)
    child, parent, *_ , H = tree_edges(n, g, ch)
    degree = np.bincount(np.r_[child, parent], minlength=n)
    sent, recv = volumes(s)
    assert np.allclose(sent, degree * S / (2 * ch)) and np.allclose(recv, sent)
    assert H == tree_height(n, g) and s.n_steps == c + 2 * H - 1


@pytest.mark.parametrize("k", list(range(1, 40)))
def test_double_binary_tree_shape(k):
    t0, t1 = dtree_parents(k)
    for par in (t0, t1):
        assert (par < 0).sum() == 1  # one root, a tree (depth computation terminates)
    assert t0[0] == -1 and t1[(1 if k % 2 else k - 1) if k > 1 else 0] == -1  # NCCL's roots
    if k % 2 == 0 and k > 2:  # complementary: interior in one tree = leaf in the other
        interior = [np.isin(np.arange(k), par[par >= 0]) for par in (t0, t1)]
        assert not (interior[0] & interior[1]).any()
    if k == 14:  # NCCL's illustration in trees.cc (ranks 0..13)
        assert t0[8] == 0 and t0[12] == 8 and t0[13] == 12 and t0[4] == 8 and t0[10] == 12


@pytest.mark.parametrize("n,g,ch", [(2, 1, 1), (5, 1, 1), (8, 1, 1), (16, 4, 1), (12, 4, 2), (8, 8, 1)])
def test_tree_analytical_shares_links_like_flow(n, g, ch):
    # the two trees' pieces share links in the steady steps: the analytical model charges a
    # step for its own load (processor sharing per link), which here is what max-min gives
    S, c, a = 2**24, 8, 2 * LAT
    s = tree_all_reduce(n, S, local_size=g, chunks=c, channels=ch)
    t = run(AnalyticalNetwork, domain(n), s)
    assert t == pytest.approx(run(FlowNetwork, domain(n), s, engine="event"), rel=1e-9)
    H = tree_height(n, g)
    assert t > (c + 2 * H - 1) * (a + S / (2 * ch * c * B)) * 1.5  # more than the no-sharing form


def test_tree_closed_form_flow_two_ranks():
    # both trees share the only link pair: steady steps carry two pieces per link
    S, c, a = 2**24, 8, 2 * LAT
    p = S / (2 * c)
    for ff in (True, False):
        t = run(FlowNetwork, domain(2), tree_all_reduce(2, S, chunks=c), fast_forward=ff)
        assert t == pytest.approx(2 * (a + p / B) + (c - 1) * (a + 2 * p / B), rel=1e-9)


def test_tree_default_chunks():
    assert tree_all_reduce(16, 2**30).n_steps == 64 + 2 * 4 - 1
    assert tree_all_reduce(16, 2**20).n_steps == 1 + 2 * 4 - 1  # 512 KiB per tree: one piece


# ------------------------------------------------------------- NVLS
@pytest.mark.parametrize("op", list(NVLS))
@pytest.mark.parametrize("n", NS)
def test_nvls_data_flow_and_volumes(op, n):
    S = 2.0**22
    s = traced_build(NVLS[op], n, S, chunks=3)
    check_flow(s, op)
    up, down = volumes(s)
    want = {"all_reduce": (S * (n + 1) / n,) * 2, "reduce_scatter": (S, S / n), "all_gather": (S / n, S)}[op]
    assert np.allclose(up, want[0]) and np.allclose(down, want[1])
    assert s.algorithm == "nvls" and s.n_steps == 3 + (3 if op == "all_reduce" else 1)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("op", list(NVLS))
@pytest.mark.parametrize("n,c", [(2, 1), (4, 3), (8, 5), (8, 16)])
def test_nvls_closed_form(model, op, n, c):
    S = 2**26
    stages = {"all_reduce": [(0, UP, 1.0), (1, DOWN, 1 / n), (2, UP, 1 / n), (3, DOWN, 1.0)],
              "reduce_scatter": [(0, UP, 1.0), (1, DOWN, 1 / n)],
              "all_gather": [(0, UP, 1 / n), (1, DOWN, 1.0)]}[op]
    last = max(o for o, _, _ in stages)
    want = 0.0
    for step in range(c + last):
        per = {UP: 0.0, DOWN: 0.0}
        for off, hop, frac in stages:
            if 0 <= step - off < c:
                per[hop] += frac * S / c
        want += LAT + max(per.values()) / B
    if op == "all_reduce" and c >= 3:
        assert want == pytest.approx((c + 3) * LAT + (S * (c + 3) / c + S * (c - 1) / (c * n)) / B)
    assert run(model, domain(n), NVLS[op](n, S, chunks=c)) == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("inter", ["tree", "ring"])
@pytest.mark.parametrize("n,g", [(8, 4), (16, 8), (24, 4), (64, 8)])
def test_nvls_tree_data_flow(inter, n, g):
    s = traced_build(nvls_tree_all_reduce, n, 2.0**22, local_size=g, inter=inter, chunks=2)
    assert s.algorithm == "nvls_tree"
    check_flow(s, "all_reduce", dom=g)


# ----------------------------------------------- hierarchical / multi-dim
OPS = ["all_reduce", "all_gather", "reduce_scatter"]
HIER = [(8, 4), (12, 4), (16, 4), (16, 8), (24, 4), (24, 8), (64, 8)]
PAIRS = [(op, a, b) for op in OPS for a, b in [("ring", "ring"), ("ring", "halving_doubling"),
                                                  ("halving_doubling", "ring"), ("direct", "direct")]]
PAIRS += [("all_reduce", "ring", "tree"), ("all_reduce", "halving_doubling", "tree")]


@pytest.mark.parametrize("n,g", HIER)
@pytest.mark.parametrize("op,intra,inter", PAIRS)
def test_hierarchical_data_flow(op, n, g, intra, inter):
    S = 2.0**22
    s = traced_build(hierarchical, op, n, S, local_size=g, intra=intra, inter=inter, chunks=2)
    check_flow(s, op)
    check_common(s, op, S)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n,g,ch", [(8, 4, 1), (24, 8, 2), (64, 8, 1), (6, 1, 1), (6, 6, 2)])
def test_hierarchical_ring_volumes(op, n, g, ch):
    S, k = 2.0**22, n // g
    s = traced_build(hierarchical, op, n, S, local_size=g, channels=ch)
    check_flow(s, op)
    sent, recv = volumes(s)
    if op == "all_reduce":  # reference §7: NVLink 2(g-1)/g·S, NIC 2(k-1)/k·S/g
        want = 2 * (g - 1) / g * S + 2 * (k - 1) / k * S / g
    else:
        want = (g - 1) / g * S + (k - 1) * S / n
    assert np.allclose(sent, want) and np.allclose(recv, want)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dims", [
    [(2, "ring"), (3, "direct"), (4, "halving_doubling")],
    [(4, "ring"), (2, "halving_doubling"), (2, "ring")],
    [(3, "halving_doubling"), (1, "ring"), (5, "ring")],
    [(4, "nvls"), (3, "ring"), (2, "direct")],
    [(17, "ring")],
])
def test_multi_dim_data_flow(op, dims):
    n = int(np.prod([s for s, _ in dims]))
    S = 2.0**22
    s = traced_build(multi_dim, op, n, S, dims, chunks=2)
    check_flow(s, op, dom=dims[0][0])
    check_common(s, op, S)
    assert s.algorithm == "multi_dim"


@pytest.mark.parametrize("call,match", [
    (lambda: multi_dim("all_reduce", 12, 1.0, [(4, "ring"), (2, "ring")]), "multiply"),
    (lambda: multi_dim("all_reduce", 8, 1.0, [(4, "ring"), (2, "bogus")]), "expected one of"),
    (lambda: multi_dim("all_reduce", 8, 1.0, [(4, "ring"), (2, "nvls")]), "innermost"),
    (lambda: multi_dim("all_reduce", 8, 1.0, [(4, "tree"), (2, "ring")]), "all-reduce stage"),
    (lambda: multi_dim("all_gather", 8, 1.0, [(4, "ring"), (2, "tree")]), "all-reduce stage"),
    (lambda: multi_dim("all_reduce", 8, 1.0, [(8, "ring"), (0, "ring")]), "integer >= 1"),
    (lambda: hierarchical("alltoall", 8, 1.0, local_size=4), "expected one of"),
    (lambda: hierarchical("all_reduce", 10, 1.0, local_size=4), "multiple"),
    (lambda: hierarchical("reduce_scatter", 8, 1.0, local_size=4, inter="tree"), "all-reduce stage"),
    (lambda: tree_all_reduce(12, 2**20, local_size=8), "multiple of local_size"),
    (lambda: tree_all_reduce(8, 2**20, chunks=0), "chunks"),
    (lambda: nvls_all_reduce(8, 2**20, chunks=1.5), "chunks"),
    (lambda: nvls_tree_all_reduce(16, 1.0, local_size=8, inter="direct"), "inter"),
])
def test_input_errors(call, match):
    with pytest.raises(InputError, match=match):
        call()


def two_node_fabric(lat_nv=150e-9):
    node = nvswitch_domain(8, links_per_gpu=18, link_bw=25e9, latency=lat_nv, nvls=True)
    return fat_tree(node, 2, [Tier("leaf", down=4, up=4, up_bw=50e9), Tier("spine", down=8)], nic_bw=50e9)


def path(topo, a, b):
    ip, lk = topo.routes(np.array([a]), np.array([b]))
    return float(topo.path_latency(ip, lk)[0]), float(topo.path_bottleneck(ip, lk)[0])


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("ranks", [np.arange(16), np.r_[0:4, 8:12], np.r_[12:16, 4:8]])
def test_hierarchical_two_level_closed_form(model, ranks):
    topo = two_node_fabric()
    g, k, S = ranks.size // 2, 2, 2**28
    a_nv, b_nv = path(topo, ranks[0], ranks[1])
    a_ib, b_ib = path(topo, ranks[0], ranks[g])
    assert b_nv == 450e9 and b_ib == 50e9 and a_ib > a_nv
    want = 2 * (g - 1) * (a_nv + S / g / b_nv) + 2 * (k - 1) * (a_ib + S / (g * k) / b_ib)
    assert run(model, topo, hierarchical("all_reduce", 2 * g, S, local_size=g), ranks) == pytest.approx(want)
    half = (g - 1) * (a_nv + S / g / b_nv) + (k - 1) * (a_ib + S / (g * k) / b_ib)
    for op in ("all_gather", "reduce_scatter"):
        assert run(model, topo, hierarchical(op, 2 * g, S, local_size=g), ranks) == pytest.approx(half, rel=1e-9)
    if model is AnalyticalNetwork:  # other inter-node algorithms (k = 2): tree of c pieces, halving-doubling
        for kw in ({"inter": "tree", "chunks": 4}, {"inter": "halving_doubling"}):
            s = hierarchical("all_reduce", 2 * g, S, local_size=g, **kw)
            t = run(model, topo, s, ranks)  # the g inter-node rings share the leaf uplinks: as in flow
            assert t == pytest.approx(run(FlowNetwork, topo, s, ranks, engine="event"), rel=1e-9)
            assert t > 2 * (g - 1) * (a_nv + S / g / b_nv) + (a_ib + S / g / b_ib)


# ------------------------------------------- subsets of a larger topology
@pytest.mark.parametrize("model", MODELS)
def test_groups_on_a_subset_of_the_topology(model):
    big, S, a, c = domain(16), 2**24, 2 * LAT, 4
    assert run(model, big, hd_all_reduce(4, S), [3, 7, 11, 15]) == pytest.approx(4 * a + 1.5 * S / B, rel=1e-9)
    tree = tree_all_reduce(8, S, local_size=4, chunks=c)
    t = run(model, big, tree, np.arange(2, 10))
    assert t == pytest.approx(run(model, domain(8), tree), rel=1e-9)
    if model is AnalyticalNetwork:  # the steps' own sharing: as on the flow model
        assert t == pytest.approx(run(FlowNetwork, big, tree, np.arange(2, 10), engine="event"), rel=1e-9)
    t = run(model, big, nvls_all_reduce(4, S, chunks=c), [9, 1, 14, 6])
    assert t == pytest.approx((c + 3) * LAT + (S * (c + 3) / c + S * (c - 1) / (c * 4)) / B, rel=1e-9)
    assert run(model, big, barrier(5), [15, 0, 4, 8, 12]) == pytest.approx(3 * (a + 8 / B), rel=1e-9)


# ------------------------------------------------------------ barrier
@pytest.mark.parametrize("n", [1] + NS)
def test_barrier_dissemination(n):
    s = barrier(n)
    assert s.n_steps == math.ceil(math.log2(n)) and s.op == "barrier"
    know = np.eye(n, dtype=bool)
    for ph in s.phases:
        new = know.copy()
        new[ph.step.dst] |= know[ph.step.src]
        know = new
    assert know.all()  # every rank has heard from every rank
    for model in MODELS if n > 1 else []:
        assert run(model, domain(n), s) == pytest.approx(s.n_steps * (2 * LAT + 8 / B), rel=1e-9)


# ------------------------------------------------------------ compose
def test_parallel_general_case_lines_up_steps():
    a, b = ring_all_reduce(4, 4096.0), ring_all_gather(3, 3000.0)
    s = parallel("x", "mix", 8, 0.0, [(a, [0, 2, 4, 6]), (b, [1, 3, 5])])
    assert [(p.repeat, p.step.n_transfers) for p in s.phases] == [(2, 7), (1, 4), (3, 4)]
    sent = s.bytes_sent()
    assert np.allclose(sent[[0, 2, 4, 6]], a.bytes_sent()) and np.allclose(sent[[1, 3, 5]], b.bytes_sent())
    assert run(AnalyticalNetwork, domain(8), s) == pytest.approx(6 * (1024 / B + 2 * LAT))


def one_step(repeat=3, **kw):
    return Schedule("x", "y", 2, 2.0, (Phase(Step(np.array([0, 1]), np.array([1, 0]), np.ones(2), **kw), repeat),))


def test_compose_keeps_step_attributes_and_checks_input():
    attrs = dict(overhead_s=2e-6, reduce=True, wire=2.0, rate_cap=7e9)
    s = one_step(key=np.array([5, 6]), hop=np.array([PATH, PATH]), **attrs)
    for other in (s, one_step(**attrs)):  # the same step objects (stacked) or not (merged)
        out = parallel("x", "y", 4, 2.0, [(s, [0, 1]), (other, [2, 3])])
        m = out.phases[0].step
        assert (out.phases[0].repeat, m.overhead_s, m.reduce, m.wire, m.rate_cap) == (3, 2e-6, True, 2.0, 7e9)
        assert m.src.tolist() == [0, 1, 2, 3] and m.hop.tolist() == [PATH] * 4
    assert m.key.tolist() == [5, 6, 0, 0] and concat("x", "y", 2, 2.0, s, s).n_steps == 6
    a = ring_all_reduce(4, 4096.0)
    for bad, match in [([(a, [0, 1, 2, 3]), (a, [3, 4, 5, 6])], "disjoint"), ([(a, [0, 1, 2])], "rank map of 4"),
                       ([(a, [1, 2, 3, 4, 9])], "rank map"), ([(a, [4, 5, 6, 8])], "leaves"),
                       ([(a, [0, 1, 2, 3]), (Schedule("x", "d", 2, 0.0, (Phase(Step.delay(1e-6)),)), [4, 5])], "delay"),
                       ([(s, [0, 1]), (one_step(overhead_s=1e-6, wire=2.0), [2, 3])], "overhead_s")]:
        with pytest.raises(InputError, match=match):
            parallel("x", "y", 8, 0.0, bad)
    # parts with different caps keep one cap per transfer (NCCL p2p: network sends capped, NVLink not)
    m = parallel("x", "y", 4, 2.0, [(s, [0, 1]), (one_step(overhead_s=2e-6, wire=2.0), [2, 3])]).phases[0].step
    assert m.rate_cap.tolist() == [7e9, 7e9, float("inf"), float("inf")]
    per = one_step(overhead_s=2e-6, wire=2.0, rate_cap=np.array([1e9, 2e9]))
    out = parallel("x", "y", 4, 2.0, [(per, [0, 1]), (per, [2, 3])])  # stacked: the caps tile
    assert out.phases[0].step.rate_cap.tolist() == [1e9, 2e9, 1e9, 2e9]
    with pytest.raises(InputError, match="for 8 ranks"):
        concat("x", "y", 8, 0.0, a)


@pytest.mark.parametrize("build", [
    lambda: hierarchical("all_reduce", 24, 2.0**20, local_size=4, inter="tree", chunks=2),
    lambda: multi_dim("all_gather", 24, 2.0**20, [(2, "ring"), (3, "direct"), (4, "halving_doubling")]),
    lambda: nvls_tree_all_reduce(16, 2.0**20, local_size=8, chunks=2),
    lambda: tree_all_reduce(24, 2.0**20, local_size=4, chunks=3, channels=2),
])
def test_tracing_does_not_change_schedules(build):
    plain, seen = build(), traced_build(build)
    assert [p.repeat for p in plain.phases] == [p.repeat for p in seen.phases]
    for a, b in zip(plain.phases, seen.phases):
        for f in ("src", "dst", "nbytes", "key", "hop", "reduce", "wire", "overhead_s"):
            assert np.array_equal(*(np.asarray(getattr(x.step, f), dtype=object) for x in (a, b))), f


def test_checker_can_fail():
    with tracing():
        good = hd_all_reduce(8, 8.0)
        flow = flow_of(good)
        short = traced(Schedule("all_reduce", "hd", 8, 8.0, good.phases[:-1]),
                       lambda: compose.Flow(flow.units, flow.phases[:-1]))
        twice = concat("all_reduce", "x", 8, 8.0, hd_reduce_scatter(8, 8.0), hd_reduce_scatter(8, 8.0),
                       hd_all_gather(8, 8.0))
        st = good.phases[0].step
        fat = Step(st.src, st.dst, st.nbytes * 2, reduce=True)
        wrong = traced(Schedule("all_reduce", "hd", 8, 8.0, (Phase(fat),) + good.phases[1:]), lambda: flow)
    check_flow(good, "all_reduce")
    for bad in (short, twice, wrong):
        with pytest.raises(AssertionError):
            check_flow(bad, "all_reduce")


# ------------------------------------------------------ scale (benchmarks)
@pytest.mark.slow
@pytest.mark.parametrize("name,model", [("tree", AnalyticalNetwork), ("hierarchical", FlowNetwork)])
def test_16k_build_and_run(name, model):
    # The tree runs on FlowNetwork too, but event-driven (a node's NIC carries transfers to
    # several peers, so the vectorized path does not apply): ~70k rate solves, tens of minutes.
    import time
    from netsim.topology.spec import load_topology
    t0 = time.perf_counter()
    s = (tree_all_reduce(16384, 2**30, local_size=8) if name == "tree"
         else hierarchical("all_reduce", 16384, 2**30, local_size=8))
    assert time.perf_counter() - t0 < 1.0
    assert run(model, load_topology(TOPOLOGIES / "h100-fat-tree-16k.yaml"), s) > 0
