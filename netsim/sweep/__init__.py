"""Design-study sweeps: many bench/run configurations into one results dataset.

>>> from netsim.sweep import load_sweep, run_sweep  # doctest: +SKIP
>>> report = run_sweep(load_sweep("topologies/studies/fat_tree_design.yaml"), "out/")  # doctest: +SKIP

See ``docs/sweeps.md`` for the sweep file format and the output layout.
"""

from __future__ import annotations

from netsim.sweep.runner import SweepReport, failures, make_executor, results, run_sweep
from netsim.sweep.spec import Sweep, load_sweep, parse_sweep

__all__ = ["Sweep", "SweepReport", "failures", "load_sweep", "make_executor", "parse_sweep", "results",
           "run_sweep"]
