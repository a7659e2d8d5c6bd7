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
# # Finding slow GPUs and slow hosts in a data-parallel job
#
# MegaScale (arXiv:2402.15627 §5) found that about 0.5 % of machines ran roughly 10 % slower on
# identical compute, and that in synchronous training every step waits for them. A slow *machine*
# (cooling, power capping, a bad PCIe switch: every GPU of the host) calls for a different fix than
# one slow *GPU*, so the analysis must tell them apart. This notebook replays that story on a
# simulated cluster:
#
# 1. generate one iteration of a data-parallel LLM job (64 GPUs on 8 DGX H100 nodes);
# 2. run it with natural per-GPU jitter, then again with one GPU and one whole host slower
#    (`--straggler RANK:FACTOR` and a `hosts:` rule of `--faults`, here the Python equivalents);
# 3. find them with a heat map normalised against peers and robust z-scores (median / MAD), name
#    each culprit once as a slow GPU or a slow host, and compare with collective launch skew and
#    Holistic Trace Analysis's "late start of the last long collective";
# 4. measure what they cost in iteration time, and how detection degrades for milder slowdowns.
#
# Everything is small so the notebook runs in well under a minute. Numbers in the text below are
# printed by the cells from the results.

# %%
import tempfile
from pathlib import Path

import pandas as pd
from IPython.display import Image, display

# MegaScale (arXiv:2402.15627 §5): the share of machines that ran slower, and by how much
MEGASCALE_SLOW_MACHINES_PCT, MEGASCALE_SLOWDOWN_PCT = 0.5, 10
# the robust z-score's constant: 1/Φ⁻¹(0.75), so that MAD/0.6745 estimates σ for normal data
# (Iglewicz and Hoaglin, 1993; netsim.analysis.stragglers.robust_z)
MAD_TO_Z = 0.6745

import netsim
from netsim.analysis import (compute_heatmap, detection_scores, late_start_caveat, late_start_stragglers,
                             launch_skew, slow_hosts, slow_ranks, straggler_causes, temporal_breakdown)
from netsim.analysis.plots import plot_heatmap, plot_launch_skew, plot_timeline
from netsim.analysis.stragglers import PCT_MAD_FLOOR
from netsim.results.dataset import run_id_for
from netsim.units import format_time
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


def ns(value):
    """A time in ns as people read it: 4 digits in a unit that suits it (``12.35 ms``)."""
    return format_time(float(value) * 1e-9, digits=4, sep=" ")


# %% [markdown]
# ## 1. The workload
#
# A small dense transformer trained with pure data parallelism: each rank runs its microbatches of
# forward and backward compute, then one gradient all-reduce over all ranks. The ranks are placed
# packed, eight per host; the `ranks` table of the results says which host each rank is on.

# %%
spec = llm.ModelSpec("tiny-dp", layers=4, hidden=2048, ffn=8192, heads=16, vocab=32000)
prefix = llm.write_llm_workload(WORK / "workload", spec, tp=1, pp=1, dp=64, microbatches=8, seq=2048)
groups = WORK / "workload" / "comm_groups.json"
print(prefix, groups)

# %% [markdown]
# ## 2. Baseline and injected runs
#
# Real GPUs are never identical: every rank draws its own compute factor from a log-normal
# (`JITTER`, a `--faults` rule, clipped). The straggler run slows one GPU (`SLOW_GPU`, with
# `--straggler`) and every GPU of one host (`SLOW_HOST`, a `compute` rule with `hosts:`) by
# `FACTOR` on top of that — MegaScale's case. Both runs go into one results directory (two
# `run_id`s). The story is about compute, so the fast congestion-unaware `analytical` network model
# is enough (`netsim run --model analytical --straggler 5:1.10 --faults faults.yaml --out DIR`).

# %%
JITTER = {"distribution": {"lognormal": {"sigma": 0.01}}, "min": 0.95, "max": 1.05}
SLOW_GPU, SLOW_HOST, FACTOR = 5, 5, 1.10
RESULTS = WORK / "results"


def run(factor=None):
    """One run with jitter; with ``factor``, GPU ``SLOW_GPU`` and host ``SLOW_HOST`` that much slower."""
    rules = [JITTER] + ([{"hosts": [SLOW_HOST], "factor": factor}] if factor else [])
    res = netsim.simulate(str(TOPOLOGY), str(prefix), str(groups), model="analytical",
                          stragglers=[f"{SLOW_GPU}:{factor}"] if factor else [],
                          faults={"seed": 7, "compute": rules}, out=RESULTS)
    return run_id_for(res.config)


base_id = run()
slow_id = run(FACTOR)
results = netsim.open_results(RESULTS)
ops, rank_table = results.ops, results.ranks
base_ops = ops[ops["run_id"] == base_id]
slow_ops = ops[ops["run_id"] == slow_id]
HOSTS = rank_table.loc[rank_table["run_id"] == slow_id, ["rank", "host"]]  # rank -> host
HOST_RANKS = HOSTS.loc[HOSTS["host"] == SLOW_HOST, "rank"].tolist()
INJECTED = sorted({SLOW_GPU, *HOST_RANKS})  # every rank that was made slow
print(results, f"baseline {base_id}, stragglers {slow_id}")
print(f"injected: GPU {SLOW_GPU} (host {HOSTS.set_index('rank').loc[SLOW_GPU, 'host']}) and host {SLOW_HOST} "
      f"(ranks {HOST_RANKS[0]}-{HOST_RANKS[-1]}), {100 * (FACTOR - 1):.0f} % slower")

# %% [markdown]
# ## 3. The heat map
#
# MegaScale's heat map: compute per rank and step (here a step is a microbatch, read from the op
# names `mb<k>.…`). Each op is divided by the median of the same op on all ranks, so a cell is 1.0
# when the rank is as fast as its peers. Absolute times would mislead as soon as ranks do different
# work: with pipeline parallelism the stage holding the LM head computes more and would look as hot
# as a slow machine. Lines separate the hosts: a slow host is a red block, a slow GPU one red row.

# %%
heat = compute_heatmap(slow_ops)
show(plot_heatmap(heat, hosts=HOSTS, title="compute per rank and microbatch vs the same ops on all ranks"),
     "heatmap")
hot = heat.mean(axis=1)
print(f"hottest rows: {', '.join(f'rank {r} {v:.3f}' for r, v in hot.nlargest(3).items())}; "
      f"median row {hot.median():.3f}")

# %% [markdown]
# ## 4. Robust outlier detection
#
# Every compute op is compared with the median duration of the same-named op on all ranks, giving
# each rank's "% over median". A rank is flagged when its robust z-score
# 0.6745·(x − median)/MAD reaches `Z` **and** it is at least `PCT` % slower. The MAD is floored at
# `PCT_MAD_FLOOR` percentage points: simulated peers can be identical to the last bit, and a
# near-zero MAD would turn any straggler into a z of millions.
#
# A slow GPU and a slow host look alike rank by rank. A host is slow only when its GPUs are slow
# *together*: the slowdown a majority of its GPUs reach must pass the same two rules (its z taken
# against all ranks). `straggler_causes` then names every culprit once: the slow host, and each
# flagged GPU its host does not explain.

# %%
Z, PCT = 3.5, 5.0
print(f"thresholds: robust z >= {Z}, >= {PCT} % over the median; MAD floor {PCT_MAD_FLOOR} points")
ranks = slow_ranks(slow_ops, z_threshold=Z, pct_threshold=PCT, hosts=HOSTS)
flagged = ranks.loc[ranks["flagged"], "rank"].tolist()
print("flagged ranks:", flagged, "scores:", detection_scores(flagged, INJECTED))
hosts = slow_hosts(slow_ops, HOSTS, z_threshold=Z, pct_threshold=PCT)
print(hosts[["host", "pct_over_median", "robust_z", "max_pct", "slow_gpus", "flagged"]].round(2)
      .to_string(index=False))
causes = straggler_causes(slow_ops, HOSTS, z_threshold=Z, pct_threshold=PCT)
for c in causes.itertuples():
    what = (f"slow host {c.host}: its {c.gpus} GPUs" if c.cause == "host"
            else f"slow GPU: rank {c.rank} on host {c.host}")
    print(f"{what}, {c.pct_over_median:+.1f} % compute over peers (robust z {c.robust_z:.1f})")

# %% [markdown]
# ## 5. Collective launch skew and HTA's late-start method
#
# All ranks meet in the gradient all-reduce at the end of the iteration. The fast ranks arrive
# early and wait; the slow ones *launch* late — MegaScale's DP launch-skew diagnosis. HTA's straggler
# analysis picks the last long collective and ranks GPUs by how late they start it. It returns the
# k latest ranks, so with a slow host it names a few of that host's GPUs and cannot say whether the
# host or those GPUs are at fault; the verdict above can.

# %%
skew = launch_skew(slow_ops)
w = skew.loc[skew["skew_ns"].idxmax()]
print(f"largest launch skew: {w['comm_type']} on group {w['group']} ({w['ranks']} ranks), {ns(w['skew_ns'])}, "
      f"last rank {w['last_rank']}")
late = late_start_stragglers(slow_ops, n_stragglers=2)
print(f"HTA: kernel {late.kernel}, suspects {late.stragglers}")
print("caveat:", late_start_caveat(late, ranks, hosts) or "none (the suspects are compute-slow ranks)")
gpu_host = int(HOSTS.set_index("rank").loc[SLOW_GPU, "host"])
shown = HOSTS.loc[HOSTS["host"].isin([gpu_host, SLOW_HOST]), "rank"].tolist()
show(plot_timeline(slow_ops, ranks=shown, title=f"timeline of hosts {gpu_host} and {SLOW_HOST}"), "timeline")
show(plot_launch_skew(skew), "skew")

# %% [markdown]
# ## 6. What the stragglers cost
#
# The iteration ends when the last rank finishes the all-reduce, so every rank waits for the
# slowest: compare how much the step grew with the stragglers' own extra compute.

# %%
def step_ns(frame):
    return float(frame["end_ns"].max() - frame["start_ns"].min())


base_step, slow_step = step_ns(base_ops), step_ns(slow_ops)
bd = temporal_breakdown(slow_ops).set_index("rank")
healthy = bd.drop(index=INJECTED)
extra = float(bd.loc[INJECTED, "compute_ns"].max() - healthy["compute_ns"].median())
print(f"iteration: baseline {ns(base_step)}, with stragglers {ns(slow_step)} "
      f"(+{100 * (slow_step / base_step - 1):.1f} %)")
print(f"slowest straggler's extra compute {ns(extra)}; the step grew by {ns(slow_step - base_step)} "
      f"({100 * (slow_step - base_step) / extra:.0f} % of it): all {len(bd)} ranks wait for it")
print(f"median non-compute time (the all-reduce and waiting for it) per healthy rank: "
      f"{ns(healthy['non_compute_ns'].median())}")

# %% [markdown]
# ## 7. How slow must a straggler be to be found?
#
# A sweep over the slowdown factor of the same GPU and host, same jitter and thresholds: a
# slowdown well below `PCT` hides in the noise; above it both culprits are named, and nothing else.

# %%
factors = {1.02: None, 1.05: None, FACTOR: slow_id, 1.20: None}
for factor, rid in factors.items():
    factors[factor] = rid or run(factor)
all_ops = netsim.open_results(RESULTS).ops
rows = []
for factor, rid in factors.items():
    frame = all_ops[all_ops["run_id"] == rid]
    c = straggler_causes(frame, HOSTS, z_threshold=Z, pct_threshold=PCT)
    gpus, hosts_found = c.loc[c["cause"] == "gpu", "rank"].tolist(), c.loc[c["cause"] == "host", "host"].tolist()
    rows.append({"factor": factor, "slow_gpus": gpus, "slow_hosts": hosts_found,
                 "exact": gpus == [SLOW_GPU] and hosts_found == [SLOW_HOST],
                 "step_ms": step_ns(frame) / 1e6, "cost_pct": 100 * (step_ns(frame) / base_step - 1)})
sweep = pd.DataFrame(rows)
exact = sweep.loc[sweep["exact"], "factor"].tolist()
print(f"named exactly (GPU {SLOW_GPU} and host {SLOW_HOST}, nothing else) at factors {exact or 'none'}")
for r in sweep.loc[~sweep["exact"]].itertuples():
    print(f"  at {r.factor}: slow GPUs {r.slow_gpus or 'none'}, slow hosts {r.slow_hosts or 'none'}")
print("step time lost per 1 % of slowdown: "
      + ", ".join(f"{r.cost_pct / (100 * (r.factor - 1)):.2f} % at {r.factor}" for r in sweep.itertuples()))
sweep

# %%
print(f"notebook outputs in {WORK}")
