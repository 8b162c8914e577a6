"""Stop rules: stop on a flat curve, continue on a rising one; the oracle is the RoTI peak."""

import datetime as dt
import math
import re

import numpy as np
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import FrozenTrial, TrialState

from iobo.errors import ConfigError
from iobo.measure import roti
from iobo.stopping import (
    ConfidentStop,
    ExpectedGainBelow,
    FixedBudget,
    MarginalRoTI,
    NoRecentGain,
    ProductionRuns,
    Progress,
    RoTIPastPeak,
    StopRule,
    expected_time_saving,
    oracle_stop,
    recommendation_probability,
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


def add_run(study, minute, value, role, **attrs):
    """A finished run of ``role`` from T0 + minute - 1 to T0 + minute, stored in the real SQLite study."""
    study.add_trial(FrozenTrial(
        number=0, trial_id=0, state=TrialState.COMPLETE, value=value,
        datetime_start=T0 + dt.timedelta(minutes=minute - 1), datetime_complete=T0 + dt.timedelta(minutes=minute),
        params={"files": "shared"}, distributions={"files": CategoricalDistribution(("shared", "per_process"))},
        user_attrs={"role": role, **attrs}, system_attrs={}, intermediate_values={},
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


class AfterTrialsThenFinalists(AfterTrials):
    finalist_runs = 3


def test_a_rule_that_says_stop_lets_the_gp_re_measure_its_best_few_first(storage, scratch):
    """A real GP study over 12 configurations (covered by its runs): the rule says stop after 9 tuning trials,
    the study records that, re-measures configurations it measured before (at most 3 trials), then stops.
    Unless the GP is already sure of its leader then (one run far above the rest, as a lucky run can make it):
    the study stops at once, and the sampler, asked again on the same 9 trials, says the same."""
    from iobo.kernels import vpic
    from iobo.samplers import GPSampler
    from iobo.trials import STOP_SAID_ATTR
    from iobo.tuner import Tuner
    from support.sizes import SMALL_VPIC

    lines = []
    space = vpic.space().select(["files", "romio_cb_write", "transfer_mode"])  # 2 x 3 x 2 configurations
    sampler = GPSampler(seed=0)
    tuner = Tuner(kernel="vpic", ranks=2, trials=15, storage=storage, study="f", workdir=str(scratch),
                  kernel_options=SMALL_VPIC, space=space, sampler=sampler, echo=lines.append,
                  stop_rule=AfterTrialsThenFinalists(9), warmup=False)
    study = tuner.run()
    done = [t for t in study.get_trials() if t.state.is_finished()]
    if STOP_SAID_ATTR not in study.user_attrs:  # the GP was sure at the stop: nothing to re-measure
        assert len(done) == 9 and not sampler.finalists_undecided(study)
        assert any("stop rule AfterTrialsThenFinalists: stopping after 9 tuning trial(s)" in line for line in lines)
        assert not any("re-measuring" in line for line in lines)
        return
    assert study.user_attrs[STOP_SAID_ATTR] == 9
    assert 10 <= len(done) <= 12  # 1 to 3 re-measuring trials (fewer once the leader wins every draw)
    measured = {tuple(sorted(t.params.items())) for t in done[:9]}
    assert all(tuple(sorted(t.params.items())) in measured for t in done[9:])
    assert any("says stop after 9 tuning trial(s)" in line and "at most 3 trials" in line for line in lines)
    assert any(f"stopping after {len(done) - 9} trial(s) re-measuring" in line for line in lines)


def test_every_rule_is_offered_by_the_command_line():
    from iobo.cli import parser
    from iobo.stopping import RULES, make_rule

    for name, rule in RULES.items():
        extra = ["--production-runs", "10"] if name == "production-runs" else []
        args = parser().parse_args(["tune", "vpic", "--stop-rule", name, *extra])
        assert isinstance(make_rule(args.stop_rule, args.production_runs), rule)
    args = parser().parse_args(["tune", "vpic", "--production-runs", "100"])  # alone: that rule
    made = make_rule(args.stop_rule, args.production_runs)
    assert isinstance(made, ProductionRuns) and made.runs == 100


# -- issue 31, item 3: the GP's probability for its own recommendation, and N production runs --------------

def test_each_rule_says_what_it_reads_against_where_it_stops():
    """StopRule.signal: what the tuner prints when the trial target, not the rule, ended the study."""
    rising = Progress([0.1 * i for i in range(1, 9)], [100, 100, 100, 100, 100, 100, 110, 120], 100.0,
                      expected_gain_mb_per_s=6.0, incumbent_mb_per_s=120.0, recommended_probability=0.834,
                      time_gain_fraction=0.1, mb_per_run=60.0)
    assert ConfidentStop(0.9, 10).signal(rising) == (
        "the GP is 83% sure its recommendation is within 85% of the best; stops at 90%")
    assert ExpectedGainBelow(0.02).signal(rising) == (
        "the next trial is expected to add 5% of the incumbent's bandwidth; stops below 2%")
    assert NoRecentGain(5, 0.05).signal(rising) == "the best grew 20% over the last 5 trials; stops below 5%"
    assert RoTIPastPeak(2).signal(rising) == "RoTI is 25.0 MB/s per minute; stops once it has not risen over 2 trials"
    assert MarginalRoTI().signal(rising) == (
        "the next trial is expected to earn 60.0 MB/s per minute against a RoTI of 25.0 so far; stops when it "
        "earns no more")
    assert ProductionRuns(100, calibration=0.5).signal(rising) == (
        "the next trial is expected to save 100 production runs 2.5 s of I/O (counting 0.5 of the GP's estimate) "
        "against its cost of 6.0 s; stops when it saves less")
    unknown = Progress([0.1, 0.2], [100, 100], 100.0)
    assert ConfidentStop().signal(unknown) == ExpectedGainBelow().signal(unknown) == ""
    assert FixedBudget(5).signal(unknown) == ""


def test_confident_stop_waits_for_the_probability_after_its_minimum():
    rule = ConfidentStop(probability=0.6, min_trials=6)
    sure = Progress([0.04 * i for i in range(1, 9)], FLAT[:8], 100.0, recommended_probability=0.7)
    unsure = Progress(sure.minutes, sure.best_mb_per_s, 100.0, recommended_probability=0.5)
    assert rule.should_stop(sure) and not rule.should_stop(unsure)
    early = Progress(sure.minutes[:5], sure.best_mb_per_s[:5], 100.0, recommended_probability=0.99)
    assert not rule.should_stop(early)  # before min_trials
    assert not rule.should_stop(Progress(sure.minutes, sure.best_mb_per_s, 100.0))  # not computed: go on
    for bad in (0, 1, 1.5):
        with pytest.raises(ConfigError, match="ConfidentStop probability must be in"):
            ConfidentStop(probability=bad)
    for bad in (-1, 1.5, True):
        with pytest.raises(ConfigError, match="ConfidentStop finalist_runs must be a whole number"):
            ConfidentStop(finalist_runs=bad)


def _two_level_surrogate(seen, seed=0):
    """A real GP fit on a 2 x 8 grid where y=b is 1.5x faster, measured at ``seen`` with 5% noise."""
    choices = {"x": tuple(range(8)), "y": ("a", "b")}
    truth = lambda c: 100.0 * 2 ** (c["x"] / 4) * (1.5 if c["y"] == "b" else 1.0)  # noqa: E731
    rng = np.random.default_rng(seed)
    return Surrogate.from_runs(choices, seen, [truth(c) * math.exp(0.05 * rng.standard_normal()) for c in seen])


def test_the_recommendation_probability_is_of_the_incumbent_not_of_any_measured_configuration():
    # the old signal (experiments.stopping.bench.found_probability) asks whether ANY measured configuration is
    # within 85% of the best, maximising over them per draw, so it is at least the incumbent's; the new one asks
    # it of the configuration the study would recommend.  Seeded fits of 10 runs at 30% noise on a 8 x 3 grid
    from experiments.stopping.bench import found_probability

    choices = {"x": tuple(range(8)), "y": ("a", "b", "c")}
    every = [{"x": x, "y": y} for x in range(8) for y in "abc"]
    truth = lambda c: 100.0 * (1.3 if c["y"] == "b" else 1.0) * (1 + 0.02 * c["x"])  # noqa: E731
    pairs = []
    for seed in range(4):
        rng = np.random.default_rng(seed)
        seen = [every[i] for i in rng.choice(len(every), 10, replace=False)]
        fitted = Surrogate.from_runs(choices, seen, [truth(c) * math.exp(0.3 * rng.standard_normal()) for c in seen])
        pairs.append((recommendation_probability(fitted, seed=1), found_probability(fitted, every, seed=1)))
    assert all(new <= old + 1e-12 for new, old in pairs) and any(new < old - 0.01 for new, old in pairs)
    done = _two_level_surrogate([{"x": x, "y": y} for x in range(8) for y in "ab"] * 2)
    assert recommendation_probability(done, seed=1) > 0.9  # every configuration measured twice: sure
    assert recommendation_probability(fitted, seed=4) == recommendation_probability(fitted, seed=4)  # seeded


def test_expected_time_saving_is_the_expected_improvement_of_one_over_bandwidth():
    # closed form against a seeded Monte Carlo of the log-normal posterior at the unmeasured configurations
    from scipy.stats import norm  # noqa: F401

    seen = [{"x": x, "y": "a"} for x in range(0, 8, 2)] + [{"x": 1, "y": "b"}]
    surrogate = _two_level_surrogate(seen)
    rows = np.array([r for r in surrogate.candidates().tolist()
                     if tuple(r) not in {tuple(m) for m in surrogate.measured.tolist()}])
    m, v = surrogate.log_posterior(rows)
    draws = np.random.default_rng(0).standard_normal((200_000, 1)) * np.sqrt(v) + m
    incumbent = surrogate.incumbent_mb_per_s
    monte_carlo = np.maximum(1 - incumbent / np.exp(draws), 0).mean(axis=0).max()
    assert expected_time_saving(surrogate) == pytest.approx(monte_carlo, rel=0.02)
    assert expected_time_saving(_two_level_surrogate([{"x": x, "y": y} for x in range(8) for y in "ab"])) == 0.0


def _production(trials, saving=None, mb=134.2, incumbent=None):
    """``trials`` evaluations of 2.1 s each, best 929 MB/s, the GP's time saving ``saving``."""
    return Progress([2.1 / 60 * i for i in range(1, trials + 1)], [929.0] * trials, 929.0,
                    None, incumbent, None, saving, mb)


def test_production_runs_stops_at_once_when_no_configuration_can_pay_for_a_trial():
    # 134.2 MB at 929 MB/s: 0.144 s of I/O per run; 10 runs can save at most 1.44 s < one 2.1 s trial
    assert ProductionRuns(10).should_stop(_production(3))
    assert not ProductionRuns(10).should_stop(_production(2))  # the baseline's 3 default runs come first
    assert not ProductionRuns(15).should_stop(_production(3))  # 2.17 s > 2.1 s: a trial might pay
    assert not ProductionRuns(1000).should_stop(_production(4))  # before the GP: goes on


def test_production_runs_bounds_the_checking_after_the_search_by_its_stake():
    """Issue 31, item 3: the walk-back and the confirmation after the search are worth at most what N production
    runs spend in I/O at the default (no configuration can save more): 134.2 MB at the default's 700 MB/s is
    0.192 s a run; unknown MB count a whole 2.1 s trial a run; a rule without a stake sets no limit."""
    progress = Progress([2.1 / 60 * i for i in range(1, 7)], [929.0] * 6, 700.0, None, None, None, 0.05, 134.2)
    assert ProductionRuns(100).checking_budget_s(progress) == pytest.approx(100 * 134.2 / 700.0)
    assert ProductionRuns(100).checking_budget_s(_production(6, mb=None)) == pytest.approx(100 * 2.1)
    stalled = Progress([2.1 / 60 * i for i in range(1, 7)], [929.0] * 6, 0.0, None, None, None, 0.05, 134.2)
    assert ProductionRuns(100).checking_budget_s(stalled) == pytest.approx(100 * 2.1)  # a default median of 0 MB/s
    assert ConfidentStop().checking_budget_s(progress) == math.inf


def test_production_runs_weighs_the_expected_saving_over_n_runs_against_a_trial():
    # the whole saving counted (calibration=1): 1000 runs x 0.144 s x 5% = 7.2 s > 2.1 s: measure on; x 1% = 1.44 s < 2.1 s: stop
    assert not ProductionRuns(1000, calibration=1).should_stop(_production(6, saving=0.05))
    assert ProductionRuns(1000, calibration=1).should_stop(_production(6, saving=0.01))
    assert not ProductionRuns(1000, min_trials=8, calibration=1).should_stop(_production(6, saving=0.01))
    # the GP's incumbent sets the I/O time: at 2000 MB/s a run does 0.067 s, 1000 x 3% = 2.0 s < 2.1 s
    assert ProductionRuns(1000, calibration=1).should_stop(_production(6, saving=0.03, incumbent=2000.0))
    assert not ProductionRuns(1000, calibration=1).should_stop(_production(6, saving=0.03))
    # MB unknown: a whole trial's time (2.1 s) bounds a run's I/O: 10 runs never stop by the bound
    assert not ProductionRuns(10).should_stop(_production(3, mb=None))
    assert ProductionRuns(10, calibration=1).should_stop(_production(6, saving=0.05, mb=None))  # 10 x 2.1 x 5% = 1.05 s


def test_production_runs_counts_the_calibrated_share_of_the_gps_saving():
    # 1000 runs x 0.144 s x 5% = 7.2 s: half of it (3.6 s) still pays for a 2.1 s trial, a quarter (1.8 s) does not
    assert not ProductionRuns(1000, min_trials=5, calibration=0.5).should_stop(_production(6, saving=0.05))
    assert ProductionRuns(1000, min_trials=5, calibration=0.25).should_stop(_production(6, saving=0.05))
    # the GP's test applies from min_trials on: after the first search trial (4) with min_trials=4
    assert ProductionRuns(1000, min_trials=4, calibration=0.25).should_stop(_production(4, saving=0.05))
    assert not ProductionRuns(1000, min_trials=5, calibration=0.25).should_stop(_production(4, saving=0.05))


@pytest.mark.parametrize("calibration", [0, -0.5, True, "0.5", float("nan")])
def test_production_runs_refuses_a_calibration_that_is_not_a_positive_number(calibration):
    with pytest.raises(ConfigError, match=rf"ProductionRuns calibration must be a number > 0 .*got {re.escape(repr(calibration))}"):
        ProductionRuns(100, calibration=calibration)


@pytest.mark.parametrize("rule, runs, message", [
    (None, "0", "--production-runs must be a whole number of runs >= 1 .*got '0'"),
    (None, "-5", "got '-5'"), (None, "1.5", "got '1.5'"), (None, "many", "got 'many'"), (None, True, "got True"),
    ("no-gain", "10", "--production-runs is read by --stop-rule production-runs only; got --stop-rule no-gain"),
    ("production-runs", None, "--stop-rule production-runs needs --production-runs N"),
])
def test_production_runs_is_checked_before_anything_runs(rule, runs, message):
    from iobo.stopping import make_rule

    with pytest.raises(ConfigError, match=message):
        make_rule(rule, runs)


def test_iobo_tune_refuses_a_bad_production_runs_before_anything_runs(storage, scratch, capsys):
    import optuna

    from iobo.cli import main

    code = main(["tune", "vpic", "--ranks", "2", "--trials", "4", "--storage", storage, "--study", "p",
                 "--workdir", str(scratch), "--production-runs", "0"])
    assert code == 2
    assert capsys.readouterr().err.startswith("iobo: error: --production-runs must be a whole number of runs >= 1")
    assert not list(scratch.iterdir()) and optuna.get_all_study_names(storage) == []


def test_study_progress_reads_the_bytes_a_run_moves(storage):
    import optuna

    for name, attrs in (("none", {}), ("moved", {"bytes": 134_217_728})):
        study = optuna.create_study(storage=storage, study_name=name, direction="maximize")
        for minute, (role, value) in enumerate([("default", 100.0), ("default", 110.0), ("search", 150.0)], 1):
            add_run(study, minute, value, role, **attrs)
        expected = None if not attrs else pytest.approx(134.217728)  # MB, from the runs' bytes
        assert study_progress(study).mb_per_run == expected


@pytest.mark.parametrize("runs, stops_after", [("1", 3), ("1000000", None)])
def test_iobo_tune_production_runs_stops_after_the_defaults_when_no_trial_can_pay(storage, scratch, capsys, runs,
                                                                                  stops_after):
    """Real MPI runs of the vpic kernel: one production run cannot pay for a trial, so the study ends once
    the 3 default runs are in; a million runs keep it going to --trials (the GP's calibrated test, fitted on
    the measured trials, says the next trial pays)."""
    import optuna

    from iobo.cli import main
    from support.sizes import SMALL_VPIC

    code = main(["tune", "vpic", "--storage", storage, "--study", "p", "--workdir", str(scratch), "--trials", "6",
                 "--production-runs", runs, "--runner", "local", "--sampler", "random", "--no-warmup",
                 "--confirm", "0", "--option", f"particles={SMALL_VPIC['particles']}",
                 "--option", f"steps={SMALL_VPIC['steps']}"])
    out = capsys.readouterr()
    assert code == 0, out.err
    complete = [t for t in optuna.load_study(study_name="p", storage=storage).get_trials()
                if t.state == TrialState.COMPLETE]
    said = re.search(r"stop rule ProductionRuns: stopping after (\d+) tuning trial", out.out + out.err)
    never = re.search(r"stop rule ProductionRuns did not say stop within 6 tuning trial\(s\): the trial target ended "
                      r"the study \(the next trial is expected to save 1,000,000 production runs [0-9,.]+ s of I/O",
                      out.out + out.err)
    if stops_after is None:
        assert said is None and len(complete) == 6
        assert never, out.out + out.err  # the user learns why the budget, not the rule, ended the study
    else:
        assert said and int(said.group(1)) == stops_after and len(complete) == stops_after
        assert never is None


def test_the_identified_benchmark_ends_each_seed_where_the_tuner_would():
    """experiments.stopping.identified: after the rule's stop, the branch is read up to the first evaluation
    whose finalists are decided, at most K re-measurements; a rule that never said stop ends at the budget."""
    from experiments.stopping.identified import Outcome, outcome
    from experiments.stopping.trajectories import rule_name

    class Seed:  # what outcome() reads of experiments.stopping.joint.Seed
        budget = 6
        fraction = np.array([0.2, 0.3, 0.4, 0.5, 0.6, 0.7])
        run = {"fires": {rule_name(0.7, 15): 4}, "best_truth": 1000.0, "minutes": [1, 2, 3, 4, 5, 6],
               "branches": {"4": [{"truth": 500.0, "minutes": 4.0, "undecided": True},
                                  {"truth": 800.0, "minutes": 5.0, "undecided": True},
                                  {"truth": 900.0, "minutes": 6.0, "undecided": False}]}}

    assert outcome(Seed(), 0.7, 15, 0) == Outcome(4, 0, 0.5, 4.0)  # K = 0: the incumbent where the rule said stop
    assert outcome(Seed(), 0.7, 15, 1) == Outcome(4, 1, 0.8, 5.0)  # K = 1: one re-measurement
    assert outcome(Seed(), 0.7, 15, 10) == Outcome(4, 2, 0.9, 6.0)  # decided after two: no more
    assert outcome(Seed(), 0.5, 10, 10) == Outcome(6, 0, 0.7, 6.0)  # never said stop: the budget's recommendation


def test_the_identified_benchmark_counts_a_seed_reachable_if_any_stop_or_branch_recommends_85_percent():
    """experiments.stopping.identified.ever_good: the ceiling of any stop rule on a trajectory is a seed whose
    recommendation reaches 85% of the best at some allowed stop (from the default's runs on) or in a branch."""
    from experiments.stopping.identified import ever_good

    class Seed:  # what ever_good() reads of experiments.stopping.joint.Seed
        def __init__(self, fraction, branch_truths):
            self.fraction = np.array(fraction)
            self.run = {"best_truth": 1000.0,
                        "branches": {"4": [{"truth": t, "minutes": 4.0, "undecided": True} for t in branch_truths]}}

    assert ever_good(Seed([0.2, 0.3, 0.86, 0.5], []))  # the main trajectory at the first allowed stop
    assert not ever_good(Seed([0.9, 0.84, 0.5, 0.6], [800.0]))  # 90% before the default's runs end does not count
    assert ever_good(Seed([0.2, 0.3, 0.4, 0.5], [800.0, 850.0]))  # a re-measuring branch gets there


def test_the_ceilings_stake_rule_holds_productionruns_back_until_its_stake_grown_minimum():
    """experiments.stopping.ceiling.StakeMinimum: ProductionRuns' stop, held back before 3 + ceil(a x f(s)) trials
    (s: the trials the stake could pay for), except when no trial can pay."""
    from experiments.stopping.ceiling import StakeMinimum

    # 1000 runs x 0.1445 s of I/O at the default / 2.1 s a trial: s = 68.8; 3 + ceil(log2(69.8)) = 10
    rule = StakeMinimum(1000, "log", 1.0, 5, 1.0)
    assert rule.minimum(_production(6)) == 10 and StakeMinimum(1000, "lin", 0.05, 5, 1.0).minimum(_production(6)) == 7
    assert ProductionRuns(1000, 5, 1.0).should_stop(_production(6, saving=0.01))  # 1.4 s saved < 2.1 s: stops
    assert not rule.should_stop(_production(6, saving=0.01))  # ... but 6 < 10 trials
    assert rule.should_stop(_production(10, saving=0.01))
    assert not rule.should_stop(_production(12, saving=0.05))  # 7.2 s saved > 2.1 s: ProductionRuns goes on, so does it
    assert StakeMinimum(10, "log", 2.0, 5, 1.0).should_stop(_production(3))  # 10 runs cannot pay a trial: at once
