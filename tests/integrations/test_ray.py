"""Trials through Ray Tune on a local Ray (2 CPUs), recorded in the same SQLite Optuna storage."""

import optuna
import pytest
import ray
from optuna.trial import TrialState
from ray.tune.schedulers import FIFOScheduler, TrialScheduler

from iobo.integrations.ray import run
from iobo.trials import ROLE_DEFAULT, ROLE_SEARCH
from iobo.tuner import Tuner

from support.sizes import SMALL_VPIC


@pytest.fixture(scope="module")
def local_ray():
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


def test_ray_trials_land_in_the_tuners_study_and_stopped_ones_are_pruned(local_ray, storage, scratch):
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
        assert trial.state == TrialState.PRUNED and trial.value is None and "bytes" not in trial.user_attrs
        assert trial.params != tuner.space.default()
    assert run(tuner).trials == study.trials  # the study holds its 5 trials: nothing more runs
