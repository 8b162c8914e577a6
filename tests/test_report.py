"""Report figures computed from stored trials (a real SQLite study, known values)."""

import datetime as dt

import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import FrozenTrial, TrialState

from iobo.report import build_report
from iobo.tuner import ROLE_CONFIRM_BEST, ROLE_CONFIRM_DEFAULT, ROLE_DEFAULT, ROLE_SEARCH

T0 = dt.datetime(2026, 1, 1, 12, 0, 0)


def add(study, value, role, minute, files="shared", state=TrialState.COMPLETE):
    """A finished trial that started at T0 + minute - 1 and ended at T0 + minute."""
    study.add_trial(FrozenTrial(
        number=0, trial_id=0, state=state, value=value if state == TrialState.COMPLETE else None,
        datetime_start=T0 + dt.timedelta(minutes=minute - 1), datetime_complete=T0 + dt.timedelta(minutes=minute),
        params={"files": files}, distributions={"files": CategoricalDistribution(("shared", "per_process"))},
        user_attrs={"role": role, "config": {"files": files}}, system_attrs={}, intermediate_values={},
    ))


@pytest.fixture
def study(storage):
    s = optuna.create_study(storage=storage, study_name="r", direction="maximize")
    s.set_user_attr("kernel", "vpic")
    s.set_user_attr("ranks", 2)
    return s


def test_report_figures_match_the_trials(study):
    for minute, value in ((1, 100.0), (2, 110.0), (3, 90.0)):
        add(study, value, ROLE_DEFAULT, minute)
    add(study, 150.0, ROLE_SEARCH, 4, files="per_process")
    add(study, None, ROLE_SEARCH, 5, state=TrialState.FAIL)
    report = build_report(study)
    assert report.default.median == 100.0
    assert report.best_value == 150.0 and report.best_number == 3
    assert report.best_config == {"files": "per_process"}
    assert report.speedup == pytest.approx(1.5)
    assert report.counts == {"COMPLETE": 4, "FAIL": 1}
    # tuning started at minute 0 (first trial's start) and the failed trial ended at minute 5
    assert report.tuning_minutes == pytest.approx(5.0)
    assert report.roti_curve[-1] == pytest.approx((5.0, 150.0, (150.0 - 100.0) / 5.0))
    # RoTI peaked when the best was found, at minute 4
    assert report.peak_roti == pytest.approx((50.0 / 4.0, 4.0))
    assert "speedup:                 1.50x" in report.text()


def test_confirmation_runs_set_the_headline_speedup(study):
    for minute in (1, 2, 3):
        add(study, 100.0, ROLE_DEFAULT, minute)
    add(study, 300.0, ROLE_SEARCH, 4, files="per_process")  # a lucky run
    for minute, (d, b) in enumerate(((95.0, 180.0), (105.0, 200.0), (100.0, 190.0)), start=10):
        add(study, d, ROLE_CONFIRM_DEFAULT, minute)
        add(study, b, ROLE_CONFIRM_BEST, minute, files="per_process")
    report = build_report(study)
    assert report.confirm_best.median == 190.0 and report.confirm_default.median == 100.0
    assert report.speedup == pytest.approx(1.9)
    assert "re-measured medians" in report.text()
    # confirmation runs are not tuning time: the RoTI curve ends at the search trial
    assert len(report.roti_curve) == 4
