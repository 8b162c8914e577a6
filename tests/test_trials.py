"""The study's vocabulary (iobo.trials) on real Optuna storage: which trial is the incumbent."""

import optuna
from optuna.distributions import CategoricalDistribution
from optuna.trial import create_trial

from iobo.storage import open_storage
from iobo.trials import ROLE_CONFIRM_BEST, ROLE_DEFAULT, ROLE_SEARCH, best_trial

FILES = {"files": CategoricalDistribution(["shared", "per_process"])}


def study_of(storage, runs, name="t"):
    """A study holding ``runs``: (role, files, MB/s) in trial order."""
    study = optuna.create_study(study_name=name, storage=open_storage(storage), direction="maximize")
    for role, files, mb_per_s in runs:
        study.add_trial(create_trial(params={"files": files}, distributions=FILES, value=mb_per_s,
                                     user_attrs={"role": role}))
    return study


def test_a_lucky_default_run_does_not_hide_a_search_trial_that_beats_the_baseline(storage):
    """One default run at 2,813 MB/s over a median of 1,895 (CI on a shared machine): the incumbent is still
    the search's 2,600 MB/s trial, which the walk-back and the confirmation then test against the default."""
    study = study_of(storage, [(ROLE_DEFAULT, "shared", 2813), (ROLE_DEFAULT, "shared", 1895),
                               (ROLE_DEFAULT, "shared", 1713), (ROLE_SEARCH, "per_process", 2600),
                               (ROLE_SEARCH, "shared", 1500), (ROLE_CONFIRM_BEST, "per_process", 3500)])
    assert best_trial(study).number == 3


def test_the_default_stays_the_incumbent_when_no_search_trial_beats_its_median(storage):
    study = study_of(storage, [(ROLE_DEFAULT, "shared", 2000), (ROLE_DEFAULT, "shared", 2100),
                               (ROLE_DEFAULT, "shared", 1900), (ROLE_SEARCH, "per_process", 1950)])
    assert best_trial(study).number == 1  # the fastest default run: keep the system default


def test_search_trials_alone_or_nothing(storage):
    assert best_trial(study_of(storage, [])) is None
    study = study_of(storage, [(ROLE_SEARCH, "shared", 10), (ROLE_SEARCH, "per_process", 20)], name="u")
    assert best_trial(study).number == 1
