"""Analysis of netsim results: DataFrames in, DataFrames out (no plotting here).

* :mod:`netsim.analysis.stragglers` — compute heat maps (each op against the same op on the
  other ranks), slow ranks (MAD), slow hosts told apart from slow GPUs, collective launch skew.
* :mod:`netsim.analysis.late_start` — HTA's late start of the last long collective, and when to doubt it.
* :mod:`netsim.analysis.overlap` — HTA temporal breakdown, comm/compute overlap,
  exposed communication per collective type and group.
* :mod:`netsim.analysis.links` — hottest links, utilization per tier, oversubscription pressure.
* :mod:`netsim.analysis.timeline` — Chrome-trace / Perfetto JSON of the per-rank timeline.
* :mod:`netsim.analysis.pareto` — design points of a sweep, Pareto fronts of time vs cost and power,
  the cheapest (least-power) configuration within a tolerance of the best time.
* :mod:`netsim.analysis.plots` — matplotlib figures of the above (used by ``--plots`` and notebooks).
"""

from __future__ import annotations

from netsim.analysis.late_start import late_start_caveat, late_start_stragglers
from netsim.analysis.links import hottest_links, oversubscription_pressure, utilization_by_tier
from netsim.analysis.pareto import cheapest_within, design_points, pareto_answer, pareto_front, with_front
from netsim.analysis.overlap import (comm_comp_overlap, exposed_comm_by_collective, overlap_summary,
                                     temporal_breakdown)
from netsim.analysis.stragglers import (assign_steps, compute_heatmap, detection_scores, launch_skew, slow_hosts,
                                        slow_ranks, straggler_causes)

__all__ = ["assign_steps", "cheapest_within", "comm_comp_overlap", "compute_heatmap", "design_points",
           "detection_scores", "exposed_comm_by_collective", "hottest_links", "late_start_caveat",
           "late_start_stragglers", "launch_skew", "overlap_summary", "oversubscription_pressure", "pareto_answer",
           "pareto_front", "slow_hosts", "slow_ranks", "straggler_causes", "temporal_breakdown",
           "utilization_by_tier", "with_front"]
