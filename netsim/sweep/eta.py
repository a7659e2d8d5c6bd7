"""A sweep's progress and ETA from finished work, not from counts of configurations.

Configurations of one sweep can differ 200x in cost (16 vs 4,096 GPUs), so "7 of 10 done"
says little.  :class:`WorkEstimate` predicts every configuration's wall time and reports the
fraction of the predicted work that is done:

1. **Prior** (:func:`prior_cost`, arbitrary units): the ranks simulated times the model's
   weight.  ``bench``: ``gpus`` (an all-to-all: ``gpus**2 / 8``, its transfers grow as n^2);
   ``run``: the ranks of the workload (``llm.tp * llm.pp * llm.dp * llm.cp``, else ``gpus``, else 64);
   ``model: flow`` weighs 4, ``analytical`` 1.
2. **Measured**: a finished configuration's wall time (``wall_time_s`` from its worker) is its cost.
   An unfinished one is predicted as the mean wall time of finished *similar* ones (the same
   configuration except ``seed`` and ``size``), else as its prior times the seconds per prior
   unit measured so far (sum of walls / sum of priors of the finished ones; before any finished,
   :data:`SECONDS_PER_UNIT`).
3. **Running**: a configuration that has run ``e`` seconds counts ``e`` as done work and is
   predicted at least ``e * (1 + RUNNING_MARGIN)``, so the fraction (and the ETA) moves while
   configurations run, not only when one ends.

``fraction(running)`` = work done / (work done + predicted remaining work); the progress bar shows
it and tqdm turns its rate into the ETA, so parallel workers are accounted for by the rate itself.

>>> est = WorkEstimate([{"kind": "bench", "gpus": 8}, {"kind": "bench", "gpus": 64}])
>>> est.finished(0, 1.0); round(est.fraction(), 3)   # 8 GPUs took 1 s: 64 GPUs predicted 8 s
0.111
"""

from __future__ import annotations

import json

#: Prior weight of a network model (flow simulates events, analytical evaluates steps).
MODEL_WEIGHT = {"flow": 4.0, "analytical": 1.0}
#: Ranks assumed for a ``run`` configuration that names neither generator degrees nor GPUs.
DEFAULT_RANKS = 64
#: Seconds per prior unit before any configuration finished: a 1,024-GPU flow-model all-reduce of 1 GiB
#: (4,096 units) takes about 4-5 CPU-s on a 2-core machine (``netsim.perftests.estimate``).
SECONDS_PER_UNIT = 1e-3
#: A running configuration is predicted to need at least this much more than it has run.
RUNNING_MARGIN = 0.1
#: Keys ignored when deciding whether two configurations are similar.
NOT_SHAPE = ("seed", "size")


def prior_cost(cfg: dict) -> float:
    """The prior cost of one configuration (see the module docstring)."""
    weight = MODEL_WEIGHT.get(str(cfg.get("model", "flow")), 4.0)
    if cfg.get("kind") == "run" and any(k.startswith("llm.") for k in cfg):
        ranks = 1
        for k in ("llm.tp", "llm.pp", "llm.dp", "llm.cp"):
            ranks *= int(cfg.get(k) or 1)
    else:
        ranks = int(cfg.get("gpus") or DEFAULT_RANKS)
    if cfg.get("kind") == "bench" and str(cfg.get("op")) == "alltoall":
        return weight * max(ranks, 1) ** 2 / 8
    return weight * max(ranks, 1)


def shape_key(cfg: dict) -> str:
    """Configurations with the same key are similar (equal except ``seed`` and ``size``)."""
    return json.dumps({k: v for k, v in cfg.items() if k not in NOT_SHAPE}, sort_keys=True, default=str)


class WorkEstimate:
    """Predicted and measured work of a sweep's configurations (indexed as given); O(1) per update."""

    def __init__(self, configs: list[dict]):
        self.prior = [prior_cost(c) for c in configs]
        self.shape = [shape_key(c) for c in configs]
        self.wall: dict[int, float] = {}  # finished: measured seconds
        self._left: dict[str, list] = {}  # shape -> [unfinished count, their prior sum]
        for key, prior in zip(self.shape, self.prior):
            entry = self._left.setdefault(key, [0, 0.0])
            entry[0] += 1
            entry[1] += prior
        self._measured: dict[str, list] = {}  # shape -> [finished count, wall sum]
        self._done_s = self._done_prior = 0.0
        self._similar = 0.0  # predicted seconds of unfinished configurations with measured similar ones
        self._unmeasured_prior = sum(self.prior)  # prior units of unfinished ones without

    def _contribution(self, key: str) -> float:
        left, measured = self._left[key], self._measured.get(key)
        return left[0] * measured[1] / measured[0] if measured else 0.0

    def finished(self, i: int, wall_s: float | None) -> None:
        """Configuration ``i`` ended after ``wall_s`` seconds (None: unknown, its prediction is used)."""
        if i in self.wall:
            return
        if wall_s is None or not wall_s >= 0:  # NaN or missing: count the predicted cost
            wall_s = self.predict(i)
        key, prior = self.shape[i], self.prior[i]
        self._similar -= self._contribution(key)
        if key not in self._measured:
            self._unmeasured_prior -= self._left[key][1]
        left = self._left[key]
        left[0] -= 1
        left[1] -= prior
        measured = self._measured.setdefault(key, [0, 0.0])
        measured[0] += 1
        measured[1] += float(wall_s)
        self._similar += self._contribution(key)
        self.wall[i] = float(wall_s)
        self._done_s += float(wall_s)
        self._done_prior += prior

    def _rate(self) -> float:
        """Seconds per prior unit measured so far (:data:`SECONDS_PER_UNIT` before anything finished)."""
        return self._done_s / self._done_prior if self._done_prior > 0 else SECONDS_PER_UNIT

    def predict(self, i: int) -> float:
        """Predicted seconds of configuration ``i``."""
        measured = self._measured.get(self.shape[i])
        if measured:
            return measured[1] / measured[0]
        return self.prior[i] * self._rate()

    def fraction(self, running: dict[int, float] | None = None) -> float:
        """Work done / total predicted work; ``running``: unfinished configuration -> seconds it
        has run (done work, and a floor on its prediction).  0 before anything finished or ran.

        >>> est = WorkEstimate([{"kind": "bench", "gpus": 8}, {"kind": "bench", "gpus": 8}])
        >>> est.finished(0, 2.0); round(est.fraction(running={1: 1.0}), 3)   # 1 s of a predicted 2 s
        0.75
        """
        running = {i: e for i, e in (running or {}).items() if i not in self.wall and e > 0}
        if not self.wall and not running:
            return 0.0
        total = self._done_s + self._similar + max(self._unmeasured_prior, 0.0) * self._rate()
        for i, e in running.items():  # a running configuration: at least a margin beyond what it has run
            p = self.predict(i)
            total += max(p, e * (1 + RUNNING_MARGIN)) - p
        done = self._done_s + sum(running.values())
        return min(done / total, 1.0) if total > 0 else 1.0
