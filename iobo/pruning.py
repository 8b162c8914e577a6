"""Pruning inside a trial: stop a kernel run that is clearly slower than the others at the same step.

Kernels print one step line per timestep (bytes, seconds, MB/s of that
step).  A :class:`StepReporter` travels with the trial's job to wherever
Parsl placed it, opens the study from its storage URL there, reports each
step's bandwidth as the trial's intermediate value (``trial.report``) and
asks the study's pruner whether to stop (``trial.should_prune``).  When it
says so, :func:`iobo.launch.run_kernel` kills the MPI job, removes its files
and raises :class:`iobo.errors.KernelPruned`; the tuner marks the trial
PRUNED.

Pruners (:data:`PRUNERS`):

- ``median``: Optuna's ``MedianPruner``: stop when the trial's best step so
  far is below the median of the completed trials at the same step;
- ``margin``: :class:`MarginPruner`: stop when the trial's best step so far
  is below ``MARGIN_FRACTION`` (80%) of that median: a configuration
  clearly slower than the median, not one within the steps' noise of it;
- ``wilcoxon``: Optuna's ``WilcoxonPruner``: stop when a signed-rank test
  of the steps seen so far against the best trial's same steps says the
  trial is worse (p < 0.1).

Replayed over 16 recorded real vpic studies (``experiments/pruning/replay.py``,
two sets of 8), ``margin`` never stopped a study's best configuration;
``median`` stopped it in 3 and ``wilcoxon`` in 2, near-ties on steps
that write to the page cache (the best at 594 MB/s, the next at 558).
``margin`` saves less wall time than ``median`` (33% against 44% on the
second set, the one whose kernel makes each step's data between steps).

Steps are numbered in the order they arrive (repeat after repeat), so a
kernel's repeats add steps.
"""

from __future__ import annotations

import socket
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from optuna.pruners import BasePruner
from optuna.trial import TrialState

from iobo.errors import ConfigError

MIN_COMPLETED = 3  # completed trials before any pruning (the tuner's default runs)
WILCOXON_P = 0.1  # stop when the signed-rank test's p-value (trial worse than the best) falls below this
MARGIN_FRACTION = 0.8  # margin: stop below this fraction of the median step


class MarginPruner(BasePruner):
    """Optuna pruner: stop a trial whose best step so far is below ``fraction`` of the median step.

    The median is over the COMPLETE trials' values at the trial's latest
    step (maximised: bandwidth); nothing is stopped before ``min_completed``
    trials completed.  ``fraction=1`` is Optuna's ``MedianPruner``.
    """

    def __init__(self, fraction: float = MARGIN_FRACTION, min_completed: int = MIN_COMPLETED) -> None:
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
            raise ConfigError(f"MarginPruner fraction must be in (0, 1] (0.8: stop below 80% of the median step); "
                              f"got {fraction!r}")
        self.fraction, self.min_completed = float(fraction), min_completed

    def prune(self, study, trial) -> bool:
        step = trial.last_step
        if step is None:
            return False
        completed = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        at_step = [t.intermediate_values[step] for t in completed if step in t.intermediate_values]
        if len(completed) < self.min_completed or not at_step:
            return False
        best_so_far = max(v for s, v in trial.intermediate_values.items() if s <= step)
        return best_so_far < self.fraction * statistics.median(at_step)


def _median():
    import optuna

    return optuna.pruners.MedianPruner(n_startup_trials=MIN_COMPLETED, n_warmup_steps=0)


def _wilcoxon():
    import optuna

    return optuna.pruners.WilcoxonPruner(p_threshold=WILCOXON_P, n_startup_steps=2)


PRUNERS = {"median": _median, "margin": MarginPruner, "wilcoxon": _wilcoxon}


def make_pruner(name: str):
    """The Optuna pruner called ``name`` (a key of :data:`PRUNERS`)."""
    if name not in PRUNERS:
        raise ConfigError(f"unknown pruner {name!r}; allowed: {', '.join(PRUNERS)}")
    return PRUNERS[name]()


REPORTED_FROM_ATTR = "steps_reported_from"
"""Trial attr: the host whose worker reported the trial's steps (set at the first step, pruned trials too)."""


@dataclass
class StepReporter:
    """Reports a running trial's step bandwidths (MB/s) to its study; picklable, opens the study lazily.

    storage: the study's storage URL (reachable from the worker: SQLite on a
    shared path, ``journal://``, or a database server); study: its name;
    trial_id: Optuna's id of the trial (``trial._trial_id``); pruner: a key
    of :data:`PRUNERS`; prune: ask the pruner (False: only report, for the
    baseline runs the others are compared with at each step).  Calling it
    with a step event returns True when the trial should stop.
    """

    storage: str
    study: str
    trial_id: int
    pruner: str = "median"
    prune: bool = True
    _trial: Any = field(default=None, init=False, repr=False, compare=False)
    _steps: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        make_pruner(self.pruner)  # fail before launch on a bad name

    def __getstate__(self) -> dict:
        return {"storage": self.storage, "study": self.study, "trial_id": self.trial_id, "pruner": self.pruner,
                "prune": self.prune}

    def __setstate__(self, state: dict) -> None:
        self.__init__(**state)

    def __call__(self, event: Mapping[str, Any]) -> bool:
        if self._trial is None:
            import optuna

            from iobo.storage import open_storage

            study = optuna.load_study(study_name=self.study, storage=open_storage(self.storage),
                                      pruner=make_pruner(self.pruner))
            self._trial = optuna.Trial(study, self.trial_id)
            self._trial.set_user_attr(REPORTED_FROM_ATTR, socket.gethostname())
        self._trial.report(float(event["mb_per_s"]), self._steps)
        self._steps += 1
        return self.prune and self._trial.should_prune()
