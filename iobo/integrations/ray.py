"""Trials through Ray Tune, the other engine.

``run(tuner)`` runs the trials a :class:`~iobo.tuner.Tuner` describes (kernel,
ranks, space, study, storage, sampler, trials, max_in_flight) with
``ray.tune.Tuner`` instead of Parsl:

- ``OptunaSearch`` asks the Tuner's study in its persistent storage (never an
  in-memory one) with the Tuner's sampler (iobo's GP sampler by default); a
  define-by-run function suggests the space with its constraints repaired and
  records owner, role and config on the trial as the Tuner does, and the
  study first holds the Tuner's system-default runs;
- ``ConcurrencyLimiter`` keeps ``max_in_flight`` trials running, each
  reserving ``ranks`` of Ray's CPUs;
- a trial runs the kernel (:func:`~iobo.launch.run_kernel`) and reports each
  step's bandwidth (``mb_per_s``, MB/s) with ``tune.report`` as the kernel
  prints it, so a Ray scheduler (``ASHAScheduler``, ``MedianStoppingRule``)
  can stop a slow trial early: Optuna records it PRUNED. A trial that runs to
  the end reports the whole run's bandwidth last; Optuna is told that value
  (COMPLETE) with the Tuner's attrs; a stopped one keeps the step values it
  reported, the one it was stopped at included. A failed kernel is a Ray
  error and a FAIL trial. Ray's schedulers know no roles: a default run may
  be stopped too (iobo's own pruners never stop one).

Start Ray first with a fixed CPU count (``ray.init(num_cpus=2,
include_dashboard=False)``); otherwise ``ray.tune`` starts a local Ray on
every core. A trial Ray stops early ends its MPI job with its Ray worker (the
kernel's launcher gets SIGTERM when its parent dies). Many Ray nodes writing
one study need a shared storage: PostgreSQL or a journal file (see
:mod:`iobo.storage`).
"""

from __future__ import annotations

import json
import queue
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ray.tune.search.optuna import OptunaSearch

from iobo import kernels
from iobo.launch import KernelJob, remove_run_dirs, run_kernel
from iobo.space import Space, Workload
from iobo.storage import open_storage
from iobo import _compat
from iobo.samplers.registry import make_sampler
from iobo.trials import count_finished, outcome_attrs, record_suggestion
from iobo.tuner import Tuner

METRIC = "mb_per_s"
"""What each ``tune.report`` carries: a step's bandwidth, then the whole run's (MB/s)."""
FINAL = "iobo_outcome"
"""Key of the last report of a trial that ran to the end: its attrs as JSON."""


def run(tuner: Tuner, scheduler=None, storage_path: str | None = None):
    """Run ``tuner``'s remaining trials through Ray Tune; returns the Optuna study.

    scheduler: a Ray ``TrialScheduler`` for early stopping (its metric and
    mode are set to ``mb_per_s``, ``max``; its time unit is Ray's
    ``training_iteration``, one per kernel step); storage_path: where Ray
    keeps its experiment files (default: ``<workdir>/ray_results``).
    """
    from ray import tune
    from ray.tune.search import ConcurrencyLimiter

    study = tuner.open_study()
    tuner.enqueue_defaults(study)
    remaining = tuner.trials - count_finished(study)
    if remaining <= 0:
        return study
    workdir = Path(tuner.workdir).resolve()  # Ray runs each trial in a directory of its own
    searcher = _StudySearch(
        _Suggest(tuner.space, tuner.workload), metric=METRIC, mode="max", study_name=tuner.study,
        sampler=tuner.sampler or make_sampler("gp", tuner.seed, trials=tuner.trials),
        storage=open_storage(tuner.storage),
    )
    job = KernelJob(kernel=kernels.get(tuner.kernel), values={}, ranks=tuner.ranks, workdir=str(workdir),
                    options=tuner.kernel_options, launcher=tuner.launcher, timeout_s=tuner.timeout_s)
    searcher.ended = []
    trainable = tune.with_resources(tune.with_parameters(_trial, job=job), {"cpu": tuner.ranks})
    tune.Tuner(
        trainable,
        tune_config=tune.TuneConfig(
            metric=METRIC, mode="max", scheduler=scheduler, num_samples=remaining, reuse_actors=False,
            search_alg=ConcurrencyLimiter(searcher, max_concurrent=tuner.max_in_flight),
        ),
        run_config=tune.RunConfig(name=tuner.study, storage_path=storage_path or str(workdir / "ray_results"),
                                  verbose=0),
    ).fit()
    for trial_id in searcher.ended:  # a trial Ray stopped died with its worker: its run directory is left
        remove_run_dirs(workdir, trial_id)
    return tuner.open_study()


@dataclass(frozen=True)
class _Suggest:
    """OptunaSearch's define-by-run space: the Tuner's suggestion and trial attrs."""

    space: Space
    workload: Workload

    def __call__(self, trial) -> dict[str, Any]:
        return record_suggestion(trial, self.space, self.workload)


def _trial(config: dict[str, Any], job: KernelJob) -> None:
    """A Ray Tune function trainable: one kernel run, one report per step, the outcome last."""
    from ray import tune

    events: queue.Queue = queue.Queue()
    finished: dict[str, Any] = {}

    def launch() -> None:  # run_kernel calls on_step from its reader thread; Ray wants reports from this one
        try:
            finished["outcome"] = run_kernel(replace(job, values=config, tag=tune.get_context().get_trial_id()),
                                             on_step=events.put)
        except BaseException as exc:
            finished["error"] = exc
        finally:
            events.put(None)

    threading.Thread(target=launch, name="iobo-kernel", daemon=True).start()
    while (event := events.get()) is not None:
        tune.report({METRIC: event["mb_per_s"], "step": event["step"]})
    if "error" in finished:
        raise finished["error"]
    outcome = finished["outcome"]
    tune.report({METRIC: outcome["mb_per_s"], FINAL: json.dumps(outcome_attrs(outcome))})


class _StudySearch(OptunaSearch):
    """``OptunaSearch`` that records a trial stopped by the scheduler as PRUNED, not COMPLETE.

    Ray hands a stopped trial's last report (a step's bandwidth) to
    ``on_trial_complete``; only a report carrying :data:`FINAL` is a finished
    run, whose attrs are then recorded on the Optuna trial.
    """

    ended: list[str]  # the Ray trial ids that ended (their run directories are tagged with them); set by run()

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        self.ended.append(trial_id)
        if error or not result or FINAL not in result:
            if not error and result and METRIC in result and "training_iteration" in result:
                # the step the scheduler stopped it at reaches the searcher here, not in on_trial_result
                _compat.optuna_search_trial(self, trial_id).report(result[METRIC], result["training_iteration"])
            super().on_trial_complete(trial_id, result=None, error=error)  # FAIL on error, else PRUNED
            return
        trial = _compat.optuna_search_trial(self, trial_id)
        for key, value in json.loads(result[FINAL]).items():
            trial.set_user_attr(key, value)
        super().on_trial_complete(trial_id, result=result, error=False)
