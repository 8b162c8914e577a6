"""Stop rules: stop on a flat curve, continue on a rising one; the oracle is the RoTI peak."""

import datetime as dt
import math

import numpy as np
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import FrozenTrial, TrialState

from iobo.errors import ConfigError
from iobo.measure import roti
from iobo.stopping import (
    ExpectedGainBelow,
    FixedBudget,
    MarginalRoTI,
    NoRecentGain,
    Progress,
    RoTIPastPeak,
    StopRule,
    oracle_stop,
    study_progress,
)
from iobo.surrogate import Surrogate

MINUTE = 1.0  # every trial costs one minute


def progress(best, gain=None, default=100.0, incumbent=None):
    return Progress([MINUTE * (i + 1) for i in range(len(best))], best, default, gain, incumbent)


FLAT = [100.0, 100.0, 100.0, 150.0] + [150.0] * 8  # found 150 MB/s at trial 4, nothing since
RISING = [100.0 + 20.0 * i for i in range(12)]      # 20 MB/s more every trial


def test_no_recent_gain_stops_on_flat_and_continues_on_rising():
    rule = NoRecentGain(patience=5, min_gain=0.05)
    assert rule.should_stop(progress(FLAT))
    assert not rule.should_stop(progress(RISING))
    assert not rule.should_stop(progress(FLAT[:5]))  # not enough history yet


def test_fixed_budget():
    assert not FixedBudget(12).should_stop(progress(FLAT[:11]))
    assert FixedBudget(12).should_stop(progress(FLAT))


def test_marginal_roti_compares_expected_gain_per_minute_with_roti():
    rule = MarginalRoTI(min_trials=8)
    # flat: RoTI = 50 MB/s / 12 min = 4.2; the GP expects 1 MB/s from the next 1-minute trial
    assert rule.should_stop(progress(FLAT, gain=1.0))
    # rising: RoTI = 220 / 12 = 18.3; the GP expects 20 MB/s per minute: still worth it
    assert not rule.should_stop(progress(RISING, gain=20.0))
    assert not rule.should_stop(progress(FLAT[:7], gain=0.0))  # before min_trials
    with pytest.raises(ConfigError, match="expected_gain_mb_per_s"):
        rule.should_stop(progress(FLAT))


def test_marginal_roti_goes_on_without_gain_until_its_patience():
    nothing = [100.0] * 12  # nothing beat the default
    rule = MarginalRoTI(min_trials=5, patience=12)
    assert not rule.should_stop(progress(nothing[:11], gain=0.0))
    assert rule.should_stop(progress(nothing, gain=0.0))


def test_marginal_roti_judges_the_noise_aware_incumbent_not_the_luckiest_run():
    # one lucky run of 150 MB/s; the GP believes the incumbent is worth 105: RoTI 5/12 per minute
    rule = MarginalRoTI(min_trials=5)
    assert rule.should_stop(progress(FLAT, gain=1.0))  # 1 MB/s per minute < 50/12 (the lucky RoTI)
    assert not rule.should_stop(progress(FLAT, gain=1.0, incumbent=105.0))  # 1 > 5/12


def test_expected_gain_below_stops_when_little_is_left_to_find():
    rule = ExpectedGainBelow(fraction=0.02, min_trials=6)
    assert rule.should_stop(progress(FLAT, gain=2.0))  # 2 < 2% of 150
    assert not rule.should_stop(progress(FLAT, gain=10.0))
    assert not rule.should_stop(progress(FLAT, gain=2.0, incumbent=90.0))  # the GP's incumbent: 2 > 2% of 90
    assert not rule.should_stop(progress(FLAT[:5], gain=0.0))  # before min_trials
    with pytest.raises(ConfigError, match="expected_gain_mb_per_s"):
        rule.should_stop(progress(FLAT))


def test_roti_past_peak_stops_on_flat_and_continues_on_rising():
    rule = RoTIPastPeak(patience=2, min_trials=8)
    assert rule.should_stop(progress(FLAT))  # RoTI 50/12 now, 50/10 two trials ago: falling
    assert not rule.should_stop(progress(RISING))  # +20 MB/s per minute > RoTI 220/12: still rising
    assert not rule.should_stop(progress(FLAT[:7]))  # before min_trials
    assert not rule.should_stop(progress([100.0] * 12))  # nothing beat the default: the budget decides


def test_roti_past_peak_goes_on_while_the_last_trials_pay_more_than_roti():
    # 100 MB/s found at trial 4, then +5 and +5: the last 2 minutes earned 5 MB/s per minute
    slowing = [100.0] * 3 + [200.0] * 4 + [205.0, 210.0]
    assert RoTIPastPeak(2, 8).should_stop(progress(slowing))  # RoTI 110/9 = 12.2 > 5
    assert not RoTIPastPeak(2, 8).should_stop(progress(slowing, default=195.0))  # RoTI 15/9 = 1.7 < 5


def test_roti_past_peak_is_the_marginal_test_on_the_measured_curve():
    # the docstring's claim: RoTI has not risen over the last p trials  <=>  the best rose over them
    # by at most RoTI x their minutes (G' <= RoTI), on seeded random curves and costs
    rng = np.random.default_rng(3)
    for _ in range(300):
        n, patience = int(rng.integers(4, 20)), int(rng.integers(1, 4))
        minutes = np.cumsum(rng.uniform(0.02, 0.2, n))
        best = np.maximum.accumulate(rng.lognormal(math.log(100.0), 0.4, n))
        default = float(rng.uniform(60.0, 140.0))
        p = Progress(list(minutes), list(best), default)
        now = roti(best[-1], default, minutes[-1])
        marginal = best[-1] - best[-1 - patience] <= now * (minutes[-1] - minutes[-1 - patience]) + 1e-9
        assert RoTIPastPeak(patience, min_trials=1).should_stop(p) == (now > 0 and marginal)


T0 = dt.datetime(2026, 1, 1, 12, 0, 0)


def add_run(study, minute, value, role):
    """A finished run of ``role`` from T0 + minute - 1 to T0 + minute, stored in the real SQLite study."""
    study.add_trial(FrozenTrial(
        number=0, trial_id=0, state=TrialState.COMPLETE, value=value,
        datetime_start=T0 + dt.timedelta(minutes=minute - 1), datetime_complete=T0 + dt.timedelta(minutes=minute),
        params={"files": "shared"}, distributions={"files": CategoricalDistribution(("shared", "per_process"))},
        user_attrs={"role": role}, system_attrs={}, intermediate_values={},
    ))


@pytest.mark.parametrize("fifth, stops", [(("search", 150.0), True), (("default", 160.0), False)])
def test_roti_past_peak_judges_against_the_median_of_every_default_run(storage, fifth, stops):
    # defaults 100, 160, 100 (median 100), 180 found at minute 4, then 190 and 199 at minutes 9 and 10:
    # the last 2 minutes earned 9.5 MB/s per minute.  Against 100 RoTI is 9.9: past its peak.  When the
    # fifth run re-measures the default at 160 the baseline is the median of 4 runs, 130: RoTI 6.9, still rising
    import optuna

    study = optuna.create_study(storage=storage, study_name="s", direction="maximize")
    runs = [("default", 100.0), ("default", 160.0), ("default", 100.0), ("search", 180.0), fifth,
            ("search", 150.0), ("search", 150.0), ("search", 150.0), ("search", 190.0), ("search", 199.0)]
    for minute, (role, value) in enumerate(runs, 1):
        add_run(study, minute, value, role)
    progress = study_progress(optuna.load_study(study_name="s", storage=storage))
    assert progress.default_mb_per_s == (100.0 if fifth[0] == "search" else 130.0)
    assert RoTIPastPeak(patience=2, min_trials=8).should_stop(progress) is stops


def test_oracle_stops_at_the_roti_peak():
    # gains of 50 at trial 4 then 10 at trial 10: RoTI 12.5 at 4 beats 6.0 at 10
    best = [100.0] * 3 + [150.0] * 6 + [160.0] * 3
    assert oracle_stop(progress(best)) == 4


def test_rules_reject_bad_settings():
    for make in (lambda: FixedBudget(0), lambda: NoRecentGain(patience=0), lambda: NoRecentGain(min_gain=-1),
                 lambda: MarginalRoTI(min_trials=0), lambda: MarginalRoTI(patience=0),
                 lambda: RoTIPastPeak(patience=0), lambda: RoTIPastPeak(min_trials=0),
                 lambda: ExpectedGainBelow(fraction=0), lambda: ExpectedGainBelow(fraction=1.5)):
        with pytest.raises(ConfigError):
            make()


def test_surrogate_expects_gain_where_unexplored_and_little_once_everything_is_known():
    choices = {"x": tuple(range(8)), "y": ("a", "b")}
    truth = lambda c: 100.0 * 2 ** (c["x"] / 2) * (1.5 if c["y"] == "b" else 1.0)  # noqa: E731
    rng = np.random.default_rng(0)
    low = [{"x": x, "y": "a"} for x in range(4)]  # only the slow half seen
    every = [{"x": x, "y": y} for x in range(8) for y in "ab"]
    seen = Surrogate.from_runs(choices, low, [truth(c) * math.exp(0.02 * rng.standard_normal()) for c in low])
    known = Surrogate.from_runs(choices, every, [truth(c) * math.exp(0.02 * rng.standard_normal()) for c in every])
    assert seen.expected_gain_mb_per_s() > 20.0  # the fast half is unexplored
    assert known.expected_gain_mb_per_s() == 0.0  # nothing left unmeasured
    assert seen.expected_gain_mb_per_s(seed=3) == seen.expected_gain_mb_per_s(seed=3)


class AfterTrials(StopRule):
    def __init__(self, n):
        self.n = n

    def should_stop(self, progress):
        return progress.trials >= self.n


def test_tuner_ends_the_study_when_its_stop_rule_says_so(storage, scratch):
    import optuna

    from iobo.tuner import Tuner
    from support.sizes import SMALL_VPIC

    lines = []
    tuner = Tuner(kernel="vpic", ranks=2, trials=10, storage=storage, study="s", workdir=str(scratch),
                  kernel_options=SMALL_VPIC, sampler=optuna.samplers.RandomSampler(seed=0), echo=lines.append,
                  stop_rule=AfterTrials(5))
    study = tuner.run()
    assert len(study.get_trials()) == 5
    assert any("stop rule AfterTrials: stopping after 5 tuning trial(s)" in line for line in lines)


def test_every_rule_is_offered_by_the_command_line():
    from iobo.cli import parser
    from iobo.stopping import RULES

    for name, rule in RULES.items():
        args = parser().parse_args(["tune", "vpic", "--stop-rule", name])
        assert isinstance(RULES[args.stop_rule](), rule)
