"""Pruning inside a trial: slow steps stop a trial, fast ones leave it alone (real SQLite, real MPI runs)."""

import pickle

import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState, create_trial

from iobo.errors import ConfigError, KernelPruned
from iobo.launch import KernelJob, run_kernel
from iobo.pruning import MarginPruner, StepReporter
from iobo.storage import open_storage
from iobo.trials import ROLE_DEFAULT, ROLE_SEARCH
from iobo.tuner import Tuner

from support.sizes import SMALL_VPIC

STEPS = 4


def add_finished(study, step_mb_per_s: float, params=None, distributions=None, n=3):
    """``n`` completed search trials whose every step ran at ``step_mb_per_s``."""
    params = params or {"files": "shared"}
    distributions = distributions or {"files": CategoricalDistribution(("shared", "per_process"))}
    for _ in range(n):
        study.add_trial(create_trial(
            params=params, distributions=distributions, value=step_mb_per_s, user_attrs={"role": ROLE_SEARCH},
            intermediate_values={step: step_mb_per_s for step in range(3 * STEPS)},
        ))


@pytest.mark.all_storages
@pytest.mark.parametrize("pruner", ["median", "margin", "wilcoxon"])
def test_reporter_prunes_a_slow_trial_and_leaves_a_fast_one(storage, pruner):
    study = optuna.create_study(storage=open_storage(storage), study_name="p", direction="maximize")
    add_finished(study, 1000.0)
    slow, fast = study.ask(), study.ask()
    slow_reporter = pickle.loads(pickle.dumps(StepReporter(storage, "p", slow._trial_id, pruner)))
    fast_reporter = StepReporter(storage, "p", fast._trial_id, pruner)
    slow_says = [slow_reporter({"event": "step", "mb_per_s": 100.0}) for _ in range(STEPS)]
    fast_says = [fast_reporter({"event": "step", "mb_per_s": 2000.0}) for _ in range(STEPS)]
    assert any(slow_says) and not any(fast_says)
    stored = study.get_trials()
    assert stored[slow.number].intermediate_values[0] == 100.0  # reported where the study lives
    assert len(stored[fast.number].intermediate_values) == STEPS


@pytest.mark.parametrize("pruner, stopped", [("median", [True, True]), ("margin", [False, True])])
def test_margin_spares_a_trial_within_the_steps_noise_of_the_median(storage, pruner, stopped):
    study = optuna.create_study(storage=storage, study_name="p", direction="maximize")
    add_finished(study, 1000.0)
    says = []
    for mb_per_s in (900.0, 500.0):  # 90% and 50% of the median step; MARGIN_FRACTION is 0.8
        trial = study.ask()
        says.append(StepReporter(storage, "p", trial._trial_id, pruner)({"event": "step", "mb_per_s": mb_per_s}))
    assert says == stopped


def test_margin_fraction_outside_0_1_is_refused():
    with pytest.raises(ConfigError, match=r"fraction must be in \(0, 1\].*got 1.5"):
        MarginPruner(1.5)


def test_a_reporter_told_not_to_prune_only_reports(storage):
    study = optuna.create_study(storage=storage, study_name="p", direction="maximize")
    add_finished(study, 1000.0)
    baseline = study.ask()
    reporter = pickle.loads(pickle.dumps(StepReporter(storage, "p", baseline._trial_id, "median", prune=False)))
    assert not any(reporter({"event": "step", "mb_per_s": 100.0}) for _ in range(STEPS))
    assert len(study.get_trials()[baseline.number].intermediate_values) == STEPS


def test_unknown_pruner_is_refused():
    with pytest.raises(ConfigError, match="allowed: median, margin, wilcoxon"):
        StepReporter("sqlite:///x.db", "p", 0, "percentile")


class StopAtFirstStep:
    def __init__(self):
        self.steps = 0

    def __call__(self, event):
        self.steps += 1
        return True


@pytest.mark.usefixtures("no_leftover_processes")
def test_a_pruned_kernel_is_killed_and_its_files_removed(scratch):
    options = {**SMALL_VPIC, "steps": STEPS, "repeats": 20}
    job = KernelJob("vpic", {}, ranks=2, workdir=str(scratch), options=options)
    full = run_kernel(job)
    stop = StopAtFirstStep()
    with pytest.raises(KernelPruned, match="pruned after 1 step"):
        run_kernel(job, on_step=stop)
    assert stop.steps == 1  # no more steps were asked about once it said stop
    assert list(scratch.iterdir()) == []  # the trial directory is gone
    assert len(full["step_mb_per_s"]) == STEPS * 20


def tuner(storage, scratch, trials=8, **kwargs):
    return Tuner(kernel="vpic", ranks=2, trials=trials, storage=storage, study="t", workdir=str(scratch),
                 kernel_options={**SMALL_VPIC, "steps": STEPS}, sampler=optuna.samplers.RandomSampler(seed=0),
                 echo=None, pruner="median", **kwargs)


@pytest.mark.usefixtures("no_leftover_processes")
@pytest.mark.parametrize("earlier_mb_per_s, searched", [(1e9, TrialState.PRUNED), (1e-3, TrialState.COMPLETE)])
def test_tuner_prunes_search_trials_slower_than_earlier_ones(storage, scratch, earlier_mb_per_s, searched):
    earlier = 6  # outnumber the default runs and a first search trial, which report their steps too
    t = tuner(storage, scratch, trials=earlier + 3 + 2)
    study = t.open_study()
    default = t.space.default()
    add_finished(study, earlier_mb_per_s, default, {p.name: p.distribution() for p in t.space if p.name in default},
                 n=earlier)
    t.run()
    trials = study.get_trials()[earlier:]
    defaults = [x for x in trials if x.user_attrs["role"] == ROLE_DEFAULT]
    assert [x.state for x in defaults] == [TrialState.COMPLETE] * 3
    assert all(len(x.intermediate_values) == STEPS for x in defaults)  # the baseline the median is taken over
    search = [x for x in trials if x.user_attrs["role"] == ROLE_SEARCH]
    assert [x.state for x in search] == [searched] * 2
    assert all(x.intermediate_values for x in search)  # steps were reported from the Parsl worker
    if searched == TrialState.PRUNED:
        assert all(x.user_attrs["pruned_reason"].startswith("kernel 'vpic' was pruned after") for x in search)
    assert list(scratch.glob("trial-*")) == []


def test_pruning_needs_a_storage_url(scratch):
    with pytest.raises(ConfigError, match="storage as a URL"):
        tuner(optuna.storages.InMemoryStorage(), scratch)
