# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # MoE communication what-ifs
#
# One DeepSeek-V3-style MoE layer on a DGX H100 SuperPOD scalable unit
# (`topologies/h100-superpod-1su.yaml`: 8 GPUs per node on NVSwitch, one 400G NDR NIC per GPU
# behind PCIe Gen5, rail-optimized fat-tree): top-8 of 256 routed experts, hidden 7168, FP8
# dispatch and BF16 combine (DeepSeek-V3 technical report, arXiv:2412.19437 §3.3.2), each token
# on at most 4 nodes (§2.1.2). The same runs from the command line:
#
# ```
# netsim bench --topology topologies/h100-superpod-1su.yaml --gpus 64 --op moe_dispatch \
#     --tokens 4096 --hidden 7168 --topk 8 --experts 256 --algo node_limited [--skew zipf:1.2] \
#     [--placement-experts round_robin] [--redundant-experts 64] [--model analytical] [--out DIR]
# ```
#
# The questions: how much does routing skew cost, which all-to-all algorithm to use, whether
# 800G NICs pay off, whether expert placement and redundant experts win the skew back, and how
# all this changes from EP8 to EP64.
#
# **Small mode.** DeepEP's benchmark uses 4096 tokens per rank; this notebook routes `TOKENS`
# per rank so that it runs in seconds (set `TOKENS = 4096` for the real size). Every conclusion
# below is written by the cell above it from the numbers that cell just computed, so it holds for
# whatever size you run. **Model**: `analytical` times every step of the schedule as if it ran
# alone, its transfers sharing links max-min as in the flow model, so NVLink ports, PCIe, NICs
# and fabric uplinks bound every number with no events; the last section checks one
# configuration against the event-driven `flow` model.

# %%
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import Image, Markdown, display

import netsim
from netsim.perftests.moe import MoEConfig, build_layout, run_moe, validated
from netsim.topology.overrides import load_with_overrides

TOPO = str(netsim.find_shipped("topologies/h100-superpod-1su.yaml"))  # the working folder's, else the package's
OUT = Path(tempfile.mkdtemp(prefix="moe_whatifs_"))
TOKENS = 512
topo = load_with_overrides(TOPO, {})
# the setting the text above describes, as this notebook runs it
_cfg = validated(MoEConfig("moe_dispatch", tokens=TOKENS), topo)
assert (_cfg.topk, _cfg.experts, _cfg.hidden, _cfg.max_nodes, topo.gpus_per_node) == (8, 256, 7168, 4, 8)
assert (topo.facts.nic_port_Bps * 8 / 1e9, topo.facts.pcie_Bps / 1e9) == (400, 63)  # Gb/s NICs, GB/s PCIe Gen5
assert MoEConfig("moe_dispatch").tokens == 4096  # DeepEP's benchmark size: the command line's default


def show(fig, name: str) -> None:
    """Show a figure inline whatever the matplotlib backend (saved next to the results)."""
    path = OUT / f"{name}.png"
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    display(Image(filename=str(path)))


def say(text: str) -> None:
    """A conclusion, written from the numbers just computed (never typed by hand)."""
    display(Markdown(text))


def times(x: float) -> str:
    """A ratio as prose: ``2.3x``."""
    return f"{x:.1f}x"


def pct(x: float) -> str:
    """A fraction as prose: ``7%``."""
    return f"{x:.0%}"


def link(kind: str) -> str:
    """A bound's link kind as prose."""
    return {"nic": "NIC", "nvlink": "NVLink port", "pcie": "PCIe link"}.get(kind, f"{kind} link")


_layouts = {}


def run(op="moe_dispatch", topology=topo, **kw):
    """One simulated dispatch or combine (analytical model); the routed batch is reused per
    (GPUs, skew, placement, replicas) so dispatch, combine and algorithms see the same tokens."""
    cfg = validated(MoEConfig(op, tokens=TOKENS, model=kw.pop("model", "analytical"), **kw), topology)
    key = (cfg.gpus, cfg.skew, cfg.placement_experts, cfg.redundant_experts, cfg.max_nodes)
    if key not in _layouts:
        _layouts[key] = build_layout(topology, cfg)
    return run_moe(topology, cfg, _layouts[key])


# %% [markdown]
# ## 1. Routing skew: what a hot expert costs
#
# Expert popularity is Zipf(α) over the 256 experts (α = 0 is uniform); experts sit contiguously,
# so the hottest experts share rank 0 and node 0. EP64, node-limited dispatch and combine.

# %%
rows = []
for alpha in (0.0, 0.6, 0.9, 1.2):
    skew = "uniform" if alpha == 0 else f"zipf:{alpha}"
    for op in ("moe_dispatch", "moe_combine"):
        s = run(op, gpus=64, skew=skew, algo="node_limited").summary
        rows.append({"alpha": alpha, **s})
skew_df = pd.DataFrame(rows)
skew_df.pivot(index="alpha", columns="op", values="time_us").round(1)

# %%
piv = skew_df.pivot(index="alpha", columns="op", values="time_us")
fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 3.4))
ax.bar(piv.index.astype(str), piv["moe_dispatch"], label="dispatch (FP8)")
ax.bar(piv.index.astype(str), piv["moe_combine"], bottom=piv["moe_dispatch"], label="combine (BF16)")
for i, (a, g) in enumerate(skew_df.groupby("alpha")):
    ax.text(i, piv.loc[a].sum(), g["bound"].iloc[0], ha="center", va="bottom", fontsize=8)
ax.set_xlabel("Zipf exponent α (0 = uniform)")
ax.set_ylabel("time per layer (µs)")
ax.set_title("EP64 node-limited: dispatch + combine (label: bounding link)", fontsize=9)
ax.legend(fontsize=8)
for alpha in (0.0, 1.2):
    lay = _layouts[(64, "uniform" if alpha == 0 else f"zipf:{alpha}", "contiguous", 0, 4)]
    ax2.plot(np.sort(lay.logical_tokens())[::-1], label="uniform" if alpha == 0 else f"zipf {alpha}")
ax2.set_yscale("log")
ax2.set_xlabel("expert (hottest first)")
ax2.set_ylabel("tokens routed to it")
ax2.set_title("per-expert load", fontsize=9)
ax2.legend(fontsize=8)
show(fig, "skew")

# %%
layer = piv.sum(axis=1)  # dispatch + combine per alpha
bound = skew_df[skew_df["op"] == "moe_dispatch"].set_index("alpha")["bound"]
early = (layer[0.6] - layer[0.0]) / (layer[1.2] - layer[0.0])  # share of the extra cost already there at 0.6
hot = {a: _layouts[(64, "uniform" if a == 0 else f"zipf:{a}", "contiguous", 0, 4)].logical_tokens() for a in (0.0, 1.2)}
hot_x = hot[1.2].max() / hot[1.2].mean()
say(f"""**Conclusion.** At α = 1.2 the layer (dispatch + combine) takes {times(layer[1.2] / layer[0.0])} the
uniform time, and {pct(early)} of the extra cost is already there at α = 0.6: with top-8 routing
nearly every token visits one of the hottest experts, which all sit on node 0. The dispatch's
bound is the {link(bound[0.0])} at α = 0 and the {link(bound[1.2])} at α = 1.2, where the hottest
expert sees {hot_x:.0f}x the mean load (right panel, log scale). The fabric cannot fix this;
spreading the hot experts' load can (section 5).""")

# %% [markdown]
# ## 2. Direct vs hierarchical (Tutel 2DH) vs node-limited (DeepEP) vs low-latency
#
# Same tokens for every algorithm. `direct` sends one copy per (token, destination GPU);
# `hierarchical` regroups inside the node first, then crosses the fabric among same-index GPUs;
# `node_limited` crosses IB once per (token, node) and forwards over NVLink, and its combine
# reduces inside the node before IB; `low_latency` (DeepEP's decode kernels) sends one copy per
# (token, expert) with no forwarding.

# %%
def nic_bytes(res):
    """Bytes through the NICs (both directions of every GPU's NIC link)."""
    return res.links.loc[res.links["tier"] == "nic", "bytes"].sum()


rows = []
for skew in ("uniform", "zipf:1.2"):
    for algo, mode in (("direct", "normal"), ("hierarchical", "normal"), ("node_limited", "normal"),
                       ("direct", "low_latency")):
        for op in ("moe_dispatch", "moe_combine"):
            res = run(op, gpus=64, skew=skew, algo=algo, mode=mode)
            rows.append({"skew": skew, **res.summary, "nic_bytes": nic_bytes(res)})
alg = pd.DataFrame(rows)
alg_t = alg.pivot_table(index="algorithm", columns=["skew", "op"], values="time_us").round(1)
alg_t

# %%
order = ["direct", "hierarchical", "node_limited", "low_latency"]
fig, axes = plt.subplots(1, 2, figsize=(10, 3.4), sharey=False)
for ax, skew in zip(axes, ("uniform", "zipf:1.2")):
    sub = alg[alg["skew"] == skew].pivot(index="algorithm", columns="op", values="time_us").loc[order]
    ax.bar(order, sub["moe_dispatch"], label="dispatch")
    ax.bar(order, sub["moe_combine"], bottom=sub["moe_dispatch"], label="combine")
    ax.set_title(f"EP64, {skew}", fontsize=9)
    ax.set_ylabel("time per layer (µs)")
    ax.tick_params(axis="x", labelsize=8)
axes[0].legend(fontsize=8)
show(fig, "algorithms")

# %%
layer_t = alg.groupby(["skew", "algorithm"])["time_us"].sum().unstack(0)  # dispatch + combine
fastest = layer_t.idxmin()
wire = alg.groupby(["skew", "algorithm"])["nic_bytes"].sum().unstack(0)
hier = layer_t.loc["hierarchical"] / layer_t.loc["direct"] - 1


def vs_direct(d: float) -> str:
    return f"{pct(abs(d))} {'slower' if d > 0 else 'faster'} than direct"


best = (f"{fastest.iloc[0]} is the fastest in every case" if fastest.nunique() == 1 else
        "the fastest is " + ", ".join(f"{v} with {k} routing" for k, v in fastest.items()))
say(f"""**Conclusion.** Of the four, {best}. Node-limited (DeepEP's normal kernels) is
{times(layer_t.loc['direct', 'uniform'] / layer_t.loc['node_limited', 'uniform'])} faster than direct on uniform
routing (a token crosses IB once per node instead of once per GPU) and
{times(layer_t.loc['direct', 'zipf:1.2'] / layer_t.loc['node_limited', 'zipf:1.2'])} under Zipf 1.2, because the hot
GPU's incoming tokens arrive over all the NICs of its node (the relays) instead of its own NIC
alone. Tutel's 2DH is {vs_direct(hier['uniform'])} with uniform routing and {vs_direct(hier['zipf:1.2'])} under
skew: it regroups tokens inside the node first (an extra NVLink hop) but still moves one copy per
GPU across the fabric. Low-latency mode sends one copy per expert: its NICs carry
{times(wire.loc['low_latency', 'uniform'] / wire.loc['node_limited', 'uniform'])} node-limited's bytes on uniform routing
(the most of the four: {wire['uniform'].idxmax()}); it pays off only where latency, not bandwidth, dominates
(small decode batches).""")

# %% [markdown]
# ## 3. Where the time goes: the busiest link of each tier
#
# For each run, the time its busiest link of each class would need alone (bytes / capacity): the
# tallest bar is the bound, and the gap to the simulated time (black tick) is what the schedule
# loses to dependencies and uneven load.

# %%
def tier_times(res):
    lk = res.links
    t = lk["bytes"] / (lk["capacity_GBps"] * 1e3)  # µs
    return t.groupby(lk["tier"]).max()


cases = [("direct", "uniform"), ("node_limited", "uniform"), ("direct", "zipf:1.2"), ("node_limited", "zipf:1.2")]
tiers = ["nvlink", "pcie", "nic", "leaf-spine", "spine-leaf"]
fig, ax = plt.subplots(figsize=(10, 3.4))
w = 0.16
per_case = {}
for i, (algo, skew) in enumerate(cases):
    res = run("moe_dispatch", gpus=64, skew=skew, algo=algo)
    tt = tier_times(res).reindex(tiers).fillna(0.0)
    for j, tier in enumerate(tiers):
        ax.bar(i + (j - 2) * w, tt[tier], w, color=f"C{j}", label=tier if i == 0 else None)
    ax.plot([i - 2.5 * w, i + 2.5 * w], [res.summary["time_us"]] * 2, color="k")
    per_case[(algo, skew)] = (res, tt)
ax.set_xticks(range(len(cases)), [f"{a}\n{s}" for a, s in cases], fontsize=8)
ax.set_ylabel("busiest link alone (µs); black: simulated")
ax.set_title("EP64 dispatch: per-tier busiest-link time", fontsize=9)
ax.legend(fontsize=8, ncol=5)
show(fig, "breakdown")

# %%
(d_u, tt_du), (n_u, tt_nu) = per_case[("direct", "uniform")], per_case[("node_limited", "uniform")]
(d_z, tt_dz), (n_z, tt_nz) = per_case[("direct", "zipf:1.2")], per_case[("node_limited", "zipf:1.2")]
spine = sum(r.links.loc[r.links["tier"].isin(["leaf-spine", "spine-leaf"]), "bytes"].sum()
            for r, _ in per_case.values())
say(f"""**Conclusion.** With uniform routing direct is bound by the {link(d_u.summary['bound'])} and node-limited
by the {link(n_u.summary['bound'])}; node-limited runs within {pct(n_u.summary['time_us'] / tt_nu['nic'] - 1)} of its
busiest NIC's time alone and moves {pct(nic_bytes(n_u) / nic_bytes(d_u))} of direct's NIC bytes: this is where faster
NICs help (section 4). Under Zipf 1.2, direct's busiest {link(tt_dz.idxmax())} needs
{tt_dz.max() / 1e3:.1f} ms alone (the hot GPU's tokens through one port), while node-limited spreads them
over the hot node's NICs: its busiest NVLink port needs {tt_nz['nvlink']:.0f} µs alone and its busiest NIC
{tt_nz['nic']:.0f} µs, so both bound it together. The spine tier carries
{'nothing' if spine == 0 else f'{spine / 1e6:.1f} MB'} here: the {64 // topo.gpus_per_node} nodes sit under one leaf per
rail of this rail-optimized SU, and cross-rail traffic moves over NVLink inside the node first; a
spine what-if needs more nodes than one leaf holds, or a scattered placement.""")

# %% [markdown]
# ## 4. 400G vs 800G NICs
#
# The same topology file with `scale_out.nic_bw` and the leaf uplinks at 800G, and then also
# PCIe Gen6 (126 GB/s instead of Gen5's 63 GB/s between GPU and NIC).

# %%
variants = {"400G": {}, "800G": {"scale_out.nic_bw": "800Gbps", "scale_out.tiers.0.up_bw": "800Gbps"},
            "800G + PCIe Gen6": {"scale_out.nic_bw": "800Gbps", "scale_out.tiers.0.up_bw": "800Gbps",
                                 "scale_out.pcie_bw": "126GB/s"}}
rows = []
for name, ov in variants.items():
    t = load_with_overrides(TOPO, ov)
    for skew in ("uniform", "zipf:1.2"):
        for op in ("moe_dispatch", "moe_combine"):
            s = run(op, topology=t, gpus=64, skew=skew, algo="node_limited").summary
            rows.append({"nics": name, "skew": skew, **s})
nic = pd.DataFrame(rows)
nic_t = nic.groupby(["skew", "nics"], sort=False)["time_us"].sum().unstack(0)
speedup = (nic_t.iloc[0] / nic_t).round(2)
display(nic.pivot_table(index=["skew", "nics"], columns="op", values=["time_us"], aggfunc="first").round(1))
display(nic.pivot_table(index=["skew", "nics"], columns="op", values="bound", aggfunc="first"))
speedup

# %%
fig, ax = plt.subplots(figsize=(7, 3.2))
x = np.arange(len(variants))
for k, skew in enumerate(("uniform", "zipf:1.2")):
    ax.bar(x + (k - 0.5) * 0.35, speedup[skew], 0.35, label=skew)
    for i, name in enumerate(variants):
        b = nic[(nic["skew"] == skew) & (nic["nics"] == name) & (nic["op"] == "moe_dispatch")]["bound"].iloc[0]
        ax.text(i + (k - 0.5) * 0.35, speedup[skew].iloc[i], b, ha="center", va="bottom", fontsize=8)
ax.set_xticks(x, list(variants))
ax.set_ylabel("speed-up over 400G (dispatch + combine)")
ax.set_title("EP64 node-limited (label: dispatch's bounding link)", fontsize=9)
ax.legend(fontsize=8)
show(fig, "nics")

# %%
nb = nic[nic["op"] == "moe_dispatch"].set_index(["skew", "nics"])["bound"]
pcie_GBps = run("moe_dispatch", gpus=64, algo="node_limited").links.query("tier == 'pcie'")["capacity_GBps"].max()
say(f"""**Conclusion.** 800G NICs alone give {times(speedup.loc['800G', 'uniform'])} on uniform routing: PCIe Gen5 x16
({pcie_GBps:.0f} GB/s) between GPU and NIC becomes the bound (the dispatch's bound: the {link(nb['uniform', '800G'])}).
With PCIe Gen6 the bound is the {link(nb['uniform', '800G + PCIe Gen6'])} and the speed-up is
{times(speedup.loc['800G + PCIe Gen6', 'uniform'])}. Under Zipf 1.2 faster NICs buy
only {times(speedup.loc['800G', 'zipf:1.2'])} and {times(speedup.loc['800G + PCIe Gen6', 'zipf:1.2'])} (the bound stays the
{link(nb['zipf:1.2', '800G'])}): fix the skew first.""")

# %% [markdown]
# ## 5. Expert placement and redundant experts (EPLB)
#
# Zipf 1.2, EP64 node-limited. `round_robin` deals experts 0, 1, 2, … to ranks 0, 1, 2, … so the
# hot experts land on different GPUs and nodes; `--redundant-experts N` adds N replicas of the
# hottest experts, EPLB-style, on the least-loaded ranks (the gate's decisions are unchanged).

# %%
rows = []
for placement in ("contiguous", "round_robin"):
    for red in (0, 32, 64):
        res = run("moe_dispatch", gpus=64, skew="zipf:1.2", algo="node_limited", placement_experts=placement,
                  redundant_experts=red)
        comb = run("moe_combine", gpus=64, skew="zipf:1.2", algo="node_limited", placement_experts=placement,
                   redundant_experts=red)
        rows.append({"placement": placement, "redundant": red, "dispatch_us": res.summary["time_us"],
                     "combine_us": comb.summary["time_us"], "bound": res.summary["bound"],
                     "hottest_rank_tokens": res.ranks["expert_tokens"].max(),
                     "mean_rank_tokens": res.ranks["expert_tokens"].mean()})
pl = pd.DataFrame(rows)
pl["layer_us"] = pl["dispatch_us"] + pl["combine_us"]
pl["rank_imbalance"] = pl["hottest_rank_tokens"] / pl["mean_rank_tokens"]
pl.round(2)

# %%
fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 3.4))
labels = [f"{p}\n+{r}" for p, r in zip(pl["placement"], pl["redundant"])]
ax.bar(labels, pl["layer_us"], color=["C0"] * 3 + ["C1"] * 3)
uni = skew_df[skew_df["alpha"] == 0.0]["time_us"].sum()
ax.axhline(uni, color="k", ls="--", lw=1, label="uniform routing")
ax.set_ylabel("dispatch + combine (µs)")
ax.tick_params(axis="x", labelsize=7)
ax.legend(fontsize=8)
ax2.bar(labels, pl["rank_imbalance"], color=["C0"] * 3 + ["C1"] * 3)
ax2.set_ylabel("hottest rank's expert load / mean")
ax2.tick_params(axis="x", labelsize=7)
show(fig, "placement")

# %%
cell = pl.set_index(["placement", "redundant"])
base, rr, best = cell.loc[("contiguous", 0)], cell.loc[("round_robin", 0)], cell.loc[("round_robin", 64)]
say(f"""**Conclusion.** Round-robin placement alone cuts the hottest GPU's expert load
{times(base['rank_imbalance'] / rr['rank_imbalance'])} (the hot experts no longer share a GPU) but the layer only
{pct(1 - rr['layer_us'] / base['layer_us'])}: with top-8 routing almost every token still visits the few hottest
experts, so the links of their nodes stay the bound. Replicas help the network too: 64
redundant experts (one per GPU) on a round-robin placement cut the layer by
{pct(1 - best['layer_us'] / base['layer_us'])}, to {times(best['layer_us'] / uni)} the uniform time, and the hottest GPU's
load to {times(best['rank_imbalance'])} the mean. The rest is the node-limited gate: a replica only serves
tokens already headed to its node. Compute follows the expert load column, so for the whole
layer (GEMMs included) placement and replicas matter more than this communication-only view
shows.""")

# %% [markdown]
# ## 6. EP8 to EP64
#
# Same tokens per GPU and 256 experts (EP8 is one node: `auto` uses direct NVLink all-to-all;
# beyond one node, node-limited). RDMA GB/s is DeepEP's metric: per-GPU bytes, counted once per
# destination node, divided by the time.

# %%
rows = []
for gpus in (8, 16, 32, 64):
    for skew in ("uniform", "zipf:1.2"):
        s = run("moe_dispatch", gpus=gpus, skew=skew).summary
        rows.append({"gpus": gpus, "skew": skew, **s})
ep = pd.DataFrame(rows)
ep[["gpus", "skew", "algorithm", "time_us", "rdma_GBps", "nvl_GBps", "bound"]].round(1)

# %%
fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 3.4))
for skew, g in ep.groupby("skew"):
    ax.plot(g["gpus"], g["time_us"], marker="o", label=skew)
    ax2.plot(g["gpus"], g["rdma_GBps"], marker="o", label=skew)
for a in (ax, ax2):
    a.set_xscale("log", base=2)
    a.set_xticks([8, 16, 32, 64], ["EP8", "EP16", "EP32", "EP64"])
    a.legend(fontsize=8)
ax.set_ylabel("dispatch time (µs)")
ax2.set_ylabel("RDMA GB/s per GPU (DeepEP's algbw)")
show(fig, "ep_scaling")

# %%
#: DeepEP's README (H100-class GPUs, CX7): RDMA "logical bandwidth" that "contains local rank traffic"
DEEPEP_RDMA_GBPS, DEEPEP_TOKENS = {16: 90, 32: 61}, 8192
uni_ep = ep[ep["skew"] == "uniform"].set_index("gpus")
skew_x = ep.pivot(index="gpus", columns="skew", values="time_us")
skew_x = skew_x["zipf:1.2"] / skew_x["uniform"]
nic_GBps = run("moe_dispatch", gpus=64).links.query("tier == 'nic'")["capacity_GBps"].max()
say(f"""**Conclusion.** Within one node (EP8) dispatch is bound by the {link(uni_ep.loc[8, 'bound'])} and takes
{uni_ep.loc[8, 'time_us']:.0f} µs. From EP16 on, tokens cross the fabric and the bound is the
{' and '.join(link(b) for b in sorted(set(uni_ep.loc[16:, 'bound'])))}; DeepEP's RDMA metric counts copies that stay in the node
too, so it reads {uni_ep.loc[16, 'rdma_GBps']:.0f} GB/s at EP16 and {uni_ep.loc[64, 'rdma_GBps']:.0f} GB/s at EP64,
against the NIC's {nic_GBps:.0f} GB/s (DeepEP's README reports {DEEPEP_RDMA_GBPS[16]} GB/s at EP 8x2 and
{DEEPEP_RDMA_GBPS[32]} GB/s at EP 8x4 at {DEEPEP_TOKENS} tokens, where this notebook's `TOKENS = {TOKENS}` gives
{uni_ep.loc[16, 'rdma_GBps']:.0f} and {uni_ep.loc[32, 'rdma_GBps']:.0f}). Skew costs
{', '.join(f'{times(x)} at EP{g}' for g, x in skew_x.items())}, most at EP{skew_x.idxmax()}: there most
GPUs send to the same hot experts while the other links idle.""")

# %% [markdown]
# ## 7. The hottest links
#
# The `links` table (also written by `netsim bench --out DIR`) for EP64, Zipf 1.2, node-limited
# dispatch: the ten links with the largest busy share.

# %%
res = run("moe_dispatch", gpus=64, skew="zipf:1.2", algo="node_limited")
lk = res.links.assign(alone_us=res.links["bytes"] / (res.links["capacity_GBps"] * 1e3))
hot = lk.sort_values("alone_us", ascending=False).head(10)
display(hot[["src", "dst", "tier", "capacity_GBps", "bytes", "alone_us", "utilization"]].round(2))
fig, ax = plt.subplots(figsize=(8, 3.2))
for tier, g in lk[lk["bytes"] > 0].groupby("tier"):
    ax.hist(g["alone_us"] / res.summary["time_us"], bins=30, alpha=0.6, label=tier)
ax.set_yscale("log")
ax.set_xlabel("link busy share of the dispatch (bytes / capacity / time)")
ax.set_ylabel("links")
ax.legend(fontsize=8)
show(fig, "hot_links")

# %%
busy = lk.sort_values("utilization", ascending=False).reset_index(drop=True)
top = busy[busy["utilization"] >= 0.9 * busy["utilization"].iloc[0]]
node0 = {f"{kind}{i}" for kind in ("gpu", "nic") for i in range(topo.gpus_per_node)}
assert set(top["dst"]) <= node0  # all of them lead into node 0, where the hottest experts sit
say(f"""**Conclusion.** {len(top)} links, all into node 0, are within 10% of the busiest
({pct(top['utilization'].min())}–{pct(top['utilization'].max())} busy): {', '.join(top['src'] + '->' + top['dst'])}. The next one is
{pct(busy['utilization'].iloc[len(top)])} busy and the median link with traffic {pct(busy.loc[busy['bytes'] > 0, 'utilization'].median())}
(the histogram is log-scale): a placement problem rather than a bandwidth problem. The same table after `--placement-experts round_robin --redundant-experts 64`
(section 5) shows the load spread.""")

# %% [markdown]
# ## 8. Check: analytical vs flow model
#
# The event-driven flow model also lets steps of different ranks overlap on a link. The uniform
# EP64 node-limited dispatch on both models:

# %%
a = run("moe_dispatch", gpus=64, algo="node_limited").summary["time_us"]
f = run("moe_dispatch", gpus=64, algo="node_limited", model="flow").summary["time_us"]
print(f"analytical {a:.1f} us, flow {f:.1f} us ({f / a - 1:+.1%})")
