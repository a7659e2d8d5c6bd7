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
# # Fat-tree design study
#
# `topologies/studies/fat_tree_design.yaml` sweeps an H100 cluster's fabric: 2-tier (256-port
# switches) vs 3-tier (64-port switches), leaf oversubscription 1:1 / 2:1 / 7:1 (down:up),
# rail-optimized or not, 400G vs 800G NICs, for all-reduce and all-to-all at 1k–16k GPUs, and an
# all-to-all job placed at random in a larger cluster:
#
# ```
# netsim sweep topologies/studies/fat_tree_design.yaml --out results/fat_tree_design [--workers N]
# ```
#
# This notebook runs a **reduced** version of the same study (64–256 GPUs instead of thousands)
# through the same machinery, then reads the results dataset. Point
# `OUT` at the full study's output directory to plot the real thing.
#
# **Which network model, and why.** The study asks how the fabric bounds collective bandwidth at
# thousands of GPUs, so it uses the **analytical** model: each collective step is timed as if it
# ran alone, its transfers sharing their links as in the flow model, so NICs, oversubscribed
# leaf uplinks and ECMP collisions bound every number, with no events to simulate. It never
# reports more than a GPU's links allow (nor, for a one-step all-to-all, more than any link
# allows), and it equals the flow model wherever the flow model's steps provably run alone
# (`tests/test_analytical_bound.py`). What it leaves out — steps of different ranks overlapping
# on a link — is checked below on one configuration with the congestion-aware flow model.

# %%
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import yaml
from IPython.display import Image, Markdown, display

import netsim
import netsim.sweep as sweep

STUDY = netsim.find_shipped("topologies/studies/fat_tree_design.yaml")  # the working folder's, else the package's
OUT = Path(tempfile.mkdtemp(prefix="fat_tree_design_"))  # or Path("results/fat_tree_design")


def show(fig, name: str) -> None:
    """Show a figure inline whatever the matplotlib backend (saved next to the results)."""
    path = OUT / f"{name}.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    display(Image(filename=str(path)))


def say(text: str) -> None:
    """A conclusion, written from the numbers just computed (never typed by hand)."""
    display(Markdown(text))

# %% [markdown]
# ## A reduced study
#
# Same fabrics, rail layouts and NIC rates; leaf oversubscription 1:1 and 7:1 only; smaller
# clusters (8 and 32 nodes), smaller messages, and the fragmented job as 64 GPUs at random among 256.

# %%
doc = yaml.safe_load(STUDY.read_text())
# the full study, as the text above describes it
tiers = [yaml.safe_load((STUDY.parent / f).read_text())["scale_out"]["tiers"] for f in doc["grid"]["topology"]]
assert {len(t): {x["radix"] for x in t} for t in tiers} == {2: {256}, 3: {64}}  # 2-tier of 256 ports, 3-tier of 64
assert doc["grid"]["scale_out.tiers.0.oversubscription"] == [1, 2, 7]
doc["grid"]["scale_out.tiers.0.oversubscription"] = [1, 7]
doc["zip"] = {"op": ["all_reduce", "all_reduce", "alltoall", "alltoall", "alltoall"],
              "gpus": [64, 256, 64, 256, 64], "nodes": [8, 32, 8, 32, 32],
              "size": ["256M", "256M", "64M", "64M", "64M"],
              "placement": ["packed", "packed", "packed", "packed", "random:1"]}
small = sweep.parse_sweep(doc, source=str(STUDY), root=STUDY.parent)
print(len(small), "configurations; swept:", ", ".join(small.swept))

# %%
report = sweep.run_sweep(small, OUT, jobs=2, progress=False)
print(report.line())
for failure in report.failed:
    print("failed:", failure["label"], "--", failure["error"])

# %% [markdown]
# Running it again is free: every run_id is already complete.

# %%
print(sweep.run_sweep(small, OUT, jobs=2, progress=False).line())

# %% [markdown]
# ## Results
#
# `netsim.sweep.results(DIR)` joins the `collectives` table with the `runs` table, whose columns
# are the swept parameters.

# %%
df = sweep.results(OUT)
df["fabric"] = df["topology"].str.replace(".yaml", "", regex=False).str.replace("fat_tree_", "", regex=False)
df["oversub"] = df["scale_out.tiers.0.oversubscription"].astype(int)
df["rail"] = df["scale_out.rail_optimized"].map({True: "rail-optimized", False: "ToR"})
df["job"] = [f"{o} {g}" + ("" if p == "packed" else f" {p}") for o, g, p in zip(df["op"], df["gpus"], df["placement"])]
cols = ["job", "fabric", "oversub", "rail", "scale_out.nic_bw", "algorithm", "busbw_GBps"]
df[cols].sort_values(cols[:5]).reset_index(drop=True).head(12)

# %% [markdown]
# ### Bus bandwidth vs leaf oversubscription
#
# One panel per job; lines per fabric and rail layout (400G NICs). Oversubscription can only cost
# where traffic leaves the leaf; the conclusion below says where it did.

# %%
panels = sorted(df["job"].unique())
fig, axes = plt.subplots(1, len(panels), figsize=(3.6 * len(panels), 3.4), sharey=False)
for ax, job in zip(axes, panels):
    sub = df[(df["job"] == job) & (df["scale_out.nic_bw"] == "400Gbps")]
    for (fabric, rail), g in sub.groupby(["fabric", "rail"]):
        g = g.sort_values("oversub")
        ax.plot(g["oversub"], g["busbw_GBps"], marker="o", label=f"{fabric}, {rail}")
    ax.set_title(job, fontsize=9)
    ax.set_xlabel("leaf oversubscription (down:up)")
    ax.set_xticks(sorted(df["oversub"].unique()))
axes[0].set_ylabel("bus bandwidth (GB/s)")
axes[-1].legend(fontsize=7)
fig.tight_layout()
show(fig, "busbw_vs_oversubscription")

# %%
lo, hi = min(df["oversub"]), max(df["oversub"])
base = df[df["scale_out.nic_bw"] == "400Gbps"].pivot_table(index=["job", "fabric", "rail"], columns="oversub",
                                                           values="busbw_GBps")
loss = (1 - base[hi] / base[lo]).sort_values(ascending=False)
hit = loss[loss > 0.01]
layouts = sorted(set(base.index.get_level_values("rail")) - set(hit.index.get_level_values("rail")))
say(f"""**Conclusion.** From {lo}:1 to {hi}:1 leaves, bus bandwidth drops in {len(hit)} of the {len(loss)}
(job, fabric, layout) cases, where the job's traffic leaves its leaves:

""" + "\n".join(f"- {job}, {fabric}, {rail}: {drop:.0%} less" for (job, fabric, rail), drop in hit.items()) + f"""

{'On ' + ' and '.join(layouts) + ' leaves no job loses anything: each rail' + chr(39) + 's traffic stays on its leaf.'
 if layouts else 'Every layout loses somewhere.'}""")

# %% [markdown]
# ### What does an 800G NIC buy?
#
# Ratio of bus bandwidth at 800G to 400G, per configuration.

# %%
key = ["op", "job", "fabric", "oversub", "rail"]
wide = df.pivot_table(index=key, columns="scale_out.nic_bw", values="busbw_GBps").reset_index()
wide["speedup_800G"] = wide["800Gbps"] / wide["400Gbps"]
fig, ax = plt.subplots(figsize=(8, 3.4))
short = {"all_reduce": "AR", "alltoall": "A2A"}
labels = [f"{short.get(r.op, r.op)}{r.job.split(' ', 1)[1]} {r.fabric} {r.rail[:4]} {r.oversub}:1"
          for r in wide.itertuples()]
ax.bar(range(len(wide)), wide["speedup_800G"], color=["C0" if o == "all_reduce" else "C1" for o in wide["op"]])
ax.set_xticks(range(len(wide)), labels, rotation=90, fontsize=6)
ax.axhline(1, color="grey", lw=0.8)
ax.set_ylabel("busbw 800G / 400G")
fig.tight_layout()
show(fig, "nic_800g_speedup")

# %%
double = wide[wide["speedup_800G"] > 1.9]
say(f"""**Conclusion.** 800G NICs raise bus bandwidth {wide['speedup_800G'].min():.2f}x to {wide['speedup_800G'].max():.2f}x.
The {len(double)} configurations above 1.9x all have {' / '.join(f'{o}:1' for o in sorted(set(double['oversub'])))}
{' and '.join(sorted(set(double['rail'])))} leaves: the cases above that lost the most to oversubscription.""")

# %% [markdown]
# ### The analytical bound against the flow model
#
# The fragmented all-to-all on the 3-tier top-of-rack fabric at 7:1, once more with the
# congestion-aware flow model (every flow simulated; links shared max-min fairly as flows start
# and end). A one-step all-to-all cannot beat its busiest link in either model.

# %%
from netsim.topology.overrides import load_with_overrides  # noqa: E402  (dotted keys, as the sweep applies them)

topo = load_with_overrides(str(STUDY.parent / "fat_tree_3tier.yaml"),
                           {"nodes": 32, "scale_out.tiers.0.oversubscription": 7,
                            "scale_out.rail_optimized": False, "scale_out.nic_bw": "400Gbps"})
both = {m: netsim.bench(topo, "alltoall", [64 << 20], gpus=64, placement="random:1", model=m)[0]
        for m in ("analytical", "flow")}
for m, row in both.items():
    print(f"{m:10s} {row.time_us:9.1f} us  busbw {row.busbw_GBps:6.2f} GB/s")
gap = both["flow"].time_us / both["analytical"].time_us - 1
say(f"The flow model's time is {abs(gap):.1%} {'above' if gap > 0 else 'below'} the analytical one here."
    if abs(gap) > 1e-9 else "The two models give the same time here.")

# %% [markdown]
# ## Routing: InfiniBand's ftree vs ECMP vs adaptive vs packet spraying
#
# `topologies/studies/fat_tree_routing.yaml` compares `scale_out.routing` policies
# (docs/topology.md#routing) with the congestion-aware flow model: an InfiniBand subnet manager
# (`ftree`, OpenSM's fat-tree engine) routes by destination, which never puts two flows of a shift
# permutation on one link; static ECMP hashing (RoCE) can put several flows on one uplink while
# others idle; adaptive routing picks the least-loaded path when a flow starts; spraying splits
# every flow over all paths.  Reduced here to an all-to-all on 64
# GPUs of the 3-tier fabric (top-of-rack, 2:1 leaves) and the event-driven reference engine.

# %%
ROUTING = netsim.find_shipped("topologies/studies/fat_tree_routing.yaml")
rdoc = yaml.safe_load(ROUTING.read_text())
rdoc["base"].update(gpus=64, nodes=8, engine="event")
rdoc["grid"]["topology"] = ["fat_tree_3tier.yaml"]
rdoc["grid"]["scale_out.tiers.0.oversubscription"] = [2]
rdoc["zip"] = {"op": ["alltoall"], "size": ["16M"]}
ROUT = Path(tempfile.mkdtemp(prefix="fat_tree_routing_"))  # or Path("results/fat_tree_routing")
print(sweep.run_sweep(sweep.parse_sweep(rdoc, source=str(ROUTING), root=ROUTING.parent), ROUT, jobs=2,
                      progress=False).line())
rdf = sweep.results(ROUT).set_index("scale_out.routing").loc[["ftree", "ecmp", "adaptive", "spray"]]
fig, ax = plt.subplots(figsize=(4.5, 3))
ax.bar(rdf.index, rdf["busbw_GBps"], color=["C1", "C3", "C0", "C2"])
ax.set_ylabel("bus bandwidth (GB/s)")
ax.set_title("all-to-all 16 MiB, 64 GPUs, 3-tier 2:1")
fig.tight_layout()
show(fig, "busbw_by_routing")
bw = rdf["busbw_GBps"]
say(f"""**Conclusion.** Bus bandwidth by routing: {', '.join(f'{r} {v:.1f} GB/s' for r, v in bw.items())}.
{' and '.join(bw.index[bw >= bw.max() * (1 - 1e-9)])} give the most; static ECMP reaches {bw['ecmp'] / bw.max():.0%} of it.""")

# %% [markdown]
# The `runs` table also records each configuration's wall time, netsim version and status;
# failed configurations are in `netsim.sweep.failures(OUT)`.

# %%
runs = netsim.open_results(OUT).runs
print(f"{len(runs)} runs, simulated in {runs['wall_time_s'].sum():.1f} s of worker time;",
      f"failures: {len(sweep.failures(OUT))}")
