"""What a workload run returns: per-rank finish and compute times, the executed ops, the notes,
and the results tables it writes (:mod:`netsim.results.record`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from netsim.workload.runner import WorkloadRun


@dataclass
class WorkloadResult:
    """Per-rank outcome (seconds) and the executed-op rows.

    ``ops`` rows are ``(rank, node_id, name, kind, start, end, row)`` (``row``: index in the
    rank's node table).  :meth:`tables` and :meth:`write` give the results dataset
    (:mod:`netsim.results.record`); ``run`` is the finished :class:`~netsim.workload.runner.WorkloadRun`.
    """

    finish: np.ndarray
    compute: np.ndarray
    ops: list[tuple] = field(default_factory=list)
    unknown_deps: int = 0
    notes: list[str] = field(default_factory=list)
    run: "WorkloadRun | None" = field(default=None, repr=False)
    config: dict = field(default_factory=dict, repr=False)
    wall_time_s: float = float("nan")
    link_status: np.ndarray | None = field(default=None, repr=False)  # per link: 0 ok, 1 degraded, 2 failed

    def tables(self) -> dict:
        """The results tables as pandas DataFrames: ops, collectives, links, ranks, runs."""
        from netsim.results.record import RunRecorder
        return RunRecorder(self).frames()

    def write(self, out_dir, *, overwrite: bool = False):
        """Write the results dataset under ``out_dir``; returns the run id."""
        from netsim.results.record import RunRecorder
        return RunRecorder(self).write(out_dir, overwrite=overwrite)

    @property
    def exposed_comm(self) -> np.ndarray:
        """ASTRA-sim's definition: finish minus the sum of GPU compute time."""
        return self.finish - self.compute
