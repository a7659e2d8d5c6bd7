"""Analysis of netsim results: DataFrames in, DataFrames out (no plotting here).

* :mod:`netsim.analysis.stragglers` — compute heat maps, slow ranks/hosts (MAD),
  collective launch skew, HTA's late-start straggler method.
* :mod:`netsim.analysis.overlap` — HTA temporal breakdown, comm/compute overlap,
  exposed communication per collective type and group.
* :mod:`netsim.analysis.links` — hottest links, utilization per tier, oversubscription pressure.
* :mod:`netsim.analysis.timeline` — Chrome-trace / Perfetto JSON of the per-rank timeline.
* :mod:`netsim.analysis.plots` — matplotlib figures of the above (used by ``--plots`` and notebooks).
"""

from __future__ import annotations

from netsim.analysis.links import hottest_links, oversubscription_pressure, utilization_by_tier
from netsim.analysis.overlap import (comm_comp_overlap, exposed_comm_by_collective, overlap_summary,
                                     temporal_breakdown)
from netsim.analysis.stragglers import (assign_steps, compute_heatmap, detection_scores, late_start_stragglers,
                                        launch_skew, slow_hosts, slow_ranks)

__all__ = ["assign_steps", "comm_comp_overlap", "compute_heatmap", "detection_scores", "exposed_comm_by_collective",
           "hottest_links", "late_start_stragglers", "launch_skew", "overlap_summary", "oversubscription_pressure",
           "slow_hosts", "slow_ranks", "temporal_breakdown", "utilization_by_tier"]
