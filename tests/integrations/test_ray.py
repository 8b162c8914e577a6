"""Trials through Ray Tune on a local Ray (2 CPUs), recorded in the same SQLite Optuna storage."""

import optuna
import pytest
import ray
from optuna.trial import TrialState
from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, TrialScheduler

from iobo.integrations.ray import run
from iobo.storage import open_storage
from iobo.trials import ROLE_DEFAULT, ROLE_SEARCH
from iobo.tuner import Tuner

from support.sizes import SMALL_VPIC


@pytest.fixture
def local_ray():
    """A local Ray with 2 CPUs for the test, shut down after it (so a leftover check can see its processes end)."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


class StopSearchTrials(FIFOScheduler):
    """Stops every trial that is not the system default after its first step (an early-stopping decision)."""

    def __init__(self, default):
        super().__init__()
        self.default = default

    def on_trial_result(self, tune_controller, trial, result):
        return TrialScheduler.STOP if trial.config != self.default else TrialScheduler.CONTINUE


def test_ray_trials_land_in_the_tuners_study_and_stopped_ones_are_pruned(no_leftover_processes, local_ray, storage,
                                                                         scratch):
    tuner = Tuner(kernel="vpic", ranks=1, trials=5, storage=storage, study="ray", workdir=str(scratch),
                  kernel_options=SMALL_VPIC, sampler=optuna.samplers.RandomSampler(seed=0), max_in_flight=2,
                  echo=None)
    run(tuner, scheduler=StopSearchTrials(tuner.space.default()))
    study = optuna.load_study(study_name="ray", storage=storage)  # a fresh handle on the same SQLite file
    trials = study.get_trials()
    assert study.user_attrs["kernel"] == "vpic" and study.metric_names == ["bandwidth (MB/s)"]
    defaults = [t for t in trials if t.user_attrs["role"] == ROLE_DEFAULT]
    searched = [t for t in trials if t.user_attrs["role"] == ROLE_SEARCH]
    assert len(defaults) == 3 and len(searched) == 2
    for trial in defaults:  # ran to the end: the whole run's bandwidth, the Tuner's attrs, one value per step
        assert trial.state == TrialState.COMPLETE and trial.value > 0
        assert trial.user_attrs["config"] == trial.params == tuner.space.default()
        assert trial.user_attrs["bytes"] == SMALL_VPIC["particles"] * 32 * SMALL_VPIC["steps"]
        assert trial.user_attrs["command"].startswith("mpiexec.mpich -n 1 ")
        steps = trial.user_attrs["step_mb_per_s"]
        assert [trial.intermediate_values[i + 1] for i in range(len(steps))] == pytest.approx(steps)
    for trial in searched:  # stopped by the scheduler at its first step: no bandwidth is told
        assert trial.state == TrialState.PRUNED and "bytes" not in trial.user_attrs
        assert list(trial.intermediate_values) == [1]  # the step it was stopped at, as Optuna records a pruned trial
        assert trial.params != tuner.space.default()
    assert run(tuner).trials == study.trials  # the study holds its 5 trials: nothing more runs


SLOW = {"layout": "chunked", "chunk_size": 65536, "alignment_threshold": 1, "alignment_interval": 4194304}
"""64 KiB chunks, each aligned to 4 MiB: every chunk write is padded (0.03x the default here, MEASURED.md)."""


def test_asha_prunes_trials_whose_steps_are_slower_with_two_ranks(no_leftover_processes, local_ray, storage,
                                                                  scratch):
    """Ray's ASHAScheduler decides on each step's bandwidth (one report per kernel step, 2 MPI ranks per trial).
    Trials run one at a time: 3 default runs, then 3 configurations ~30x slower per step. Every slow one is
    stopped at a rung and told PRUNED with the steps it reported; every pruned trial (a default too may be:
    ASHA knows no roles) was below the median of the earlier trials' values at that rung, ASHA's rule with
    reduction factor 2; the MPI jobs end with their Ray workers."""
    import numpy as np

    options = {"particles": 262144, "steps": 6}  # 16 MB per step on 2 ranks
    tuner = Tuner(kernel="vpic", ranks=2, trials=6, storage=storage, study="asha", workdir=str(scratch),
                  kernel_options=options, sampler=optuna.samplers.RandomSampler(seed=0), max_in_flight=1,
                  echo=None)
    study = tuner.open_study()
    tuner.enqueue_defaults(study)  # trials 0-2, then the slow ones
    for _ in range(3):
        study.enqueue_trial({**tuner.space.default(), **SLOW})
    asha = ASHAScheduler(time_attr="training_iteration", grace_period=1, reduction_factor=2, max_t=100)
    run(tuner, scheduler=asha)
    trials = optuna.load_study(study_name="asha", storage=open_storage(storage)).get_trials()
    assert trials[0].state == TrialState.COMPLETE  # the first has nothing to be compared with
    assert len(trials[0].user_attrs["step_mb_per_s"]) == options["steps"]
    assert trials[0].user_attrs["command"].startswith("mpiexec.mpich -n 2 ")
    assert [t.state for t in trials[3:]] == [TrialState.PRUNED] * 3
    assert all(t.params["layout"] == "chunked" for t in trials[3:])
    for trial in trials:
        if trial.state != TrialState.PRUNED:
            assert trial.state == TrialState.COMPLETE
            continue
        assert "bytes" not in trial.user_attrs  # no whole-run outcome: it did not run to the end
        rung = max(trial.intermediate_values)  # the step (Ray iteration) at which ASHA stopped it
        assert rung in (1, 2, 4) and rung < options["steps"]
        earlier = [t.intermediate_values[rung] for t in trials[:trial.number] if rung in t.intermediate_values]
        assert earlier and trial.intermediate_values[rung] < np.nanpercentile(earlier, 50)
    assert not list(scratch.glob("trial-*"))
