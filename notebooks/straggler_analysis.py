# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Finding slow hosts in a data-parallel job
#
# MegaScale (arXiv:2402.15627 §5) found that about 0.5 % of machines ran roughly 10 % slower on
# identical compute, and that in synchronous training every step waits for them. This notebook
# replays that story on a simulated cluster:
#
# 1. generate one iteration of a data-parallel LLM job (64 GPUs on 8 DGX H100 nodes);
# 2. run it with natural per-GPU jitter (±1 %), then again with two GPUs 10 % slower
#    (`--straggler RANK:FACTOR`, here the Python equivalent);
# 3. find them with a compute heat map and robust z-scores (median / MAD), with collective launch
#    skew, and with Holistic Trace Analysis's "late start of the last long collective";
# 4. measure what they cost in iteration time, and how detection degrades for milder slowdowns.
#
# Everything is small so the notebook runs in well under a minute.

# %%
import tempfile
from pathlib import Path

import pandas as pd
from IPython.display import Image, display

import netsim
from netsim.analysis import (compute_heatmap, detection_scores, late_start_stragglers, launch_skew,
                             slow_hosts, slow_ranks, temporal_breakdown)
from netsim.analysis.plots import plot_heatmap, plot_launch_skew, plot_timeline
from netsim.analysis.stragglers import late_start_caveat
from netsim.results.dataset import run_id_for
from netsim.workload.generate import llm

TOPOLOGY = netsim.find_shipped("topologies/h100-superpod-1su.yaml")  # the working folder's, else the package's
WORK = Path(tempfile.mkdtemp(prefix="netsim-stragglers-"))
FIGS = WORK / "figs"


def show(fig, name):
    """Save a figure and show it inline."""
    path = FIGS / f"{name}.png"
    FIGS.mkdir(exist_ok=True)
    fig.savefig(path, dpi=90)
    display(Image(filename=str(path)))


# %% [markdown]
# ## 1. The workload
#
# A small dense transformer (4 layers, hidden 2048) trained with pure data parallelism over 64 GPUs:
# each rank runs 8 microbatches of forward and backward compute, then one gradient all-reduce over
# all 64 ranks. With `tp = pp = 1` rank *r* sits on host *r // 8*.

# %%
spec = llm.ModelSpec("tiny-dp", layers=4, hidden=2048, ffn=8192, heads=16, vocab=32000)
prefix = llm.write_llm_workload(WORK / "workload", spec, tp=1, pp=1, dp=64, microbatches=8, seq=2048)
groups = WORK / "workload" / "comm_groups.json"
GPUS_PER_HOST = 8
print(prefix, groups)

# %% [markdown]
# ## 2. Baseline and injected runs
#
# Real GPUs are never identical: every rank draws its own compute factor from a log-normal with
# σ = 1 % (a `--faults` rule, clipped to ±5 %). The straggler run multiplies ranks 5 and 42 by 1.10
# on top of that — the MegaScale case. Both runs go into one results directory (two `run_id`s).
# The story is about compute, so the fast congestion-unaware `analytical` network model is enough
# (`netsim run --model analytical --straggler 5:1.10 --straggler 42:1.10 --faults jitter.yaml --out DIR`).

# %%
JITTER = {"seed": 7, "compute": [{"distribution": {"lognormal": {"sigma": 0.01}}, "min": 0.95, "max": 1.05}]}
INJECTED = [5, 42]
RESULTS = WORK / "results"


def run(stragglers=()):
    res = netsim.simulate(str(TOPOLOGY), str(prefix), str(groups), model="analytical",
                          stragglers=list(stragglers), faults=JITTER, out=RESULTS)
    return run_id_for(res.config)


base_id = run()
slow_id = run(f"{r}:1.10" for r in INJECTED)
results = netsim.open_results(RESULTS)
ops = results.ops
base_ops = ops[ops["run_id"] == base_id]
slow_ops = ops[ops["run_id"] == slow_id]
print(results, f"baseline {base_id}, stragglers {slow_id}")

# %% [markdown]
# ## 3. The heat map
#
# MegaScale's heat map: compute time per rank and step (here a step is a microbatch, read from the
# op names `mb<k>.…`). Two rows stand out.

# %%
heat = compute_heatmap(slow_ops)
show(plot_heatmap(heat, title="compute time per rank and microbatch (stragglers 5 and 42)"), "heatmap")

# %% [markdown]
# ## 4. Robust outlier detection
#
# Every compute op is compared with the median duration of the same-named op on all ranks, giving
# each rank's "% over median". A rank is flagged when its robust z-score
# 0.6745·(x − median)/MAD reaches 3.5 **and** it is at least 5 % slower. The MAD is floored at
# 0.5 percentage points (`netsim.analysis.stragglers.PCT_MAD_FLOOR`): simulated peers can be
# identical to the last bit, and a near-zero MAD would turn any straggler into a z of millions.
# Hosts inherit the slowest of their GPUs.

# %%
ranks = slow_ranks(slow_ops, z_threshold=3.5, pct_threshold=5.0, hosts=GPUS_PER_HOST)
flagged = ranks.loc[ranks["flagged"], "rank"].tolist()
print("flagged ranks:", flagged)
print("scores:", detection_scores(flagged, INJECTED))
print(ranks.sort_values("pct_over_median", ascending=False).head(5).to_string(index=False))
hosts = slow_hosts(slow_ops, GPUS_PER_HOST)
print("flagged hosts:", hosts.loc[hosts["flagged"], "host"].tolist())

# %% [markdown]
# ## 5. Collective launch skew and HTA's late-start method
#
# All 64 ranks meet in the gradient all-reduce at the end of the iteration. The fast ranks arrive
# early and wait; the slow ones *launch* late — MegaScale's DP launch-skew diagnosis. HTA's straggler
# analysis picks the last long collective and ranks GPUs by how late they start it.

# %%
skew = launch_skew(slow_ops)
worst = skew.sort_values("skew_ns", ascending=False).head(1)
print(worst[["comm_type", "group", "ranks", "skew_ns", "last_rank"]].to_string(index=False))
late = late_start_stragglers(slow_ops, n_stragglers=2)
print(f"HTA: kernel {late.kernel}, suspects {late.stragglers}")
print("caveat:", late_start_caveat(late, ranks) or "none (the suspects are the compute-slow ranks)")
show(plot_timeline(slow_ops, ranks=[*range(0, 8), *range(40, 48)], title="timeline of hosts 0 and 5"),
     "timeline")
show(plot_launch_skew(skew), "skew")

# %% [markdown]
# ## 6. What the stragglers cost
#
# The iteration ends when the last rank finishes the all-reduce. Two slow GPUs out of 64 stretch
# every rank's step by almost their own extra compute: the others sit idle waiting for them.

# %%
def step_ns(frame):
    return float(frame["end_ns"].max() - frame["start_ns"].min())


base_step, slow_step = step_ns(base_ops), step_ns(slow_ops)
bd = temporal_breakdown(slow_ops).set_index("rank")
extra = float(bd.loc[INJECTED, "compute_ns"].mean() - bd["compute_ns"].median())
print(f"iteration: baseline {base_step / 1e3:,.1f} us, with stragglers {slow_step / 1e3:,.1f} us "
      f"(+{100 * (slow_step / base_step - 1):.1f} %)")
print(f"straggler extra compute {extra / 1e3:,.1f} us; step grew by {(slow_step - base_step) / 1e3:,.1f} us")
print(f"median idle+exposed wait per rank: {bd['non_compute_ns'].median() / 1e3:,.1f} us")

# %% [markdown]
# ## 7. How slow must a straggler be to be found?
#
# A sweep over the slowdown factor, same jitter: with a 5 % threshold, 2 % stragglers hide in the
# noise, while 10 % and 20 % are found exactly — and the cost grows linearly with the factor.

# %%
factors = {1.02: None, 1.05: None, 1.10: slow_id, 1.20: None}
for factor, rid in factors.items():
    factors[factor] = rid or run(f"{r}:{factor}" for r in INJECTED)
all_ops = netsim.open_results(RESULTS).ops
rows = []
for factor, rid in factors.items():
    frame = all_ops[all_ops["run_id"] == rid]
    found = slow_ranks(frame, hosts=GPUS_PER_HOST).query("flagged")["rank"].tolist()
    sc = detection_scores(found, INJECTED)
    rows.append({"factor": factor, "flagged": found, "precision": sc["precision"], "recall": sc["recall"],
                 "step_us": step_ns(frame) / 1e3, "cost_pct": 100 * (step_ns(frame) / base_step - 1)})
sweep = pd.DataFrame(rows)
sweep

# %%
print(f"notebook outputs in {WORK}")
