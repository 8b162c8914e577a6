"""The walk back from the incumbent to the default: only changes that beat the noise stay."""

import math
import re

import numpy as np
import pytest

from iobo import kernels
from iobo.errors import ConfigError
from iobo.measure import paired_ratio, planned_pairs, pooled_noise_sd_log
from iobo.minimize import (MATTERS, MAX_TEST_PAIRS, MINIMAL_ATTR, NO_EFFECT, NO_EFFECT_BAND, SETTLE_AT_MOST, SLOWER,
                           UNDECIDED, WALK_BACK_BUDGET_S, Minimal, pairs_to_settle, proposed, recommendation,
                           recommended, revert, walk_back)
from iobo.trials import ROLE_SEARCH

from support.studies import add, confirmed, defaults, vpic_tuner

SPACE = kernels.get("vpic").space()
WORKLOAD = kernels.get("vpic").workload(2, kernels.get("vpic").resolve_options({}))
INCUMBENT = {**SPACE.default(), "files": "per_process", "meta_block_size": 32768, "sieve_buf_size": 1048576,
             "alignment_threshold": 4096, "alignment_interval": 1048576, "striping_factor": 16}


def noisy(effects, cv=0.05, seed=0):
    """A measure function: 1000 MB/s times each present effect, log-normal noise of ``cv``; records the runs."""
    rng = np.random.default_rng(seed)
    runs = []

    def measure(pairs):
        values = []
        for config, attrs in pairs:
            value = 1000.0
            for (name, wanted), factor in effects.items():
                if config.get(name) == wanted:
                    value *= factor
            values.append(value * float(np.exp(cv * rng.standard_normal())))
            runs.append((dict(config), dict(attrs)))
        return values

    measure.runs = runs
    return measure


def test_one_knob_that_carries_the_gain_is_all_that_stays():
    measure = noisy({("files", "per_process"): 1.8})
    minimal = walk_back(SPACE, WORKLOAD, INCUMBENT, 7, measure, pairs=3)
    assert minimal.changes == {"files": "per_process"}
    first, files = [s for s in minimal.steps if "files" in s.knobs]
    assert minimal.contribution("files") is files and files.retest
    # a clear gain matters at once: 3 pairs, no extra round, in the first test and in its re-test
    assert first.verdict == files.verdict == MATTERS and len(first.with_mb_per_s) == len(files.with_mb_per_s) == 3
    assert "kept: it matters" in first.describe() and minimal.undecided() == []
    # Bounds from the t intervals of 3 pairs at 5% CV a run (0.07 in log ratio): the first test's 95% one
    # (t = 4.30) ends on average at 1.8 exp(-4.30 * 0.07 / sqrt 3) = 1.51x, so "> 1.5" held on half the seeds
    # only (seed 0: 1.26x; seeds 0-9: 1.26x-1.70x), which is why it was loosened to 1.2 when this step was the
    # one checked (95a1faf); the re-test's 80% one (t = 1.89) ends near 1.8 exp(-1.89 * 0.07 / sqrt 3) = 1.67x
    # (seeds 0-9: 1.58x-1.76x), so "> 1.5" holds for it.
    assert first.interval[0] > 1.2 and files.interval[0] > 1.5 and files.ratio == pytest.approx(1.8, rel=0.1)
    # every other change was dropped by a test, not silently
    assert all(not s.kept for s in minimal.steps if "files" not in s.knobs)
    # pairs alternate which arm runs first, so a drift cannot favour one arm
    firsts = [attrs["arm"] for config, attrs in measure.runs[::2]]
    assert "with" in firsts and "without" in firsts


def test_two_knobs_that_matter_both_stay_and_noise_does_not():
    measure = noisy({("files", "per_process"): 1.8, ("alignment_interval", 1048576): 1.3}, cv=0.03)
    minimal = walk_back(SPACE, WORKLOAD, INCUMBENT, 7, measure, pairs=3)
    assert set(minimal.changes) == {"files", "alignment_interval", "alignment_threshold"} or \
        set(minimal.changes) == {"files", "alignment_interval"}


def test_with_a_ranking_negligible_knobs_are_tested_together_first():
    measure = noisy({("files", "per_process"): 1.8})
    importance = {"files": 0.9, "meta_block_size": 0.04, "sieve_buf_size": 0.03, "alignment_threshold": 0.02,
                  "alignment_interval": 0.01, "striping_factor": 0.0}
    minimal = walk_back(SPACE, WORKLOAD, INCUMBENT, 7, measure, importance, pairs=3)
    assert minimal.changes == {"files": "per_process"}
    first = minimal.steps[0]
    assert len(first.knobs) == 5 and not first.kept  # one test for the five negligible changes
    assert [(s.knobs, s.retest) for s in minimal.steps[1:]] == [(("files",), False), (("files",), True)]


def test_knobs_that_did_not_apply_are_reverted_untested_and_never_exported():
    measure = noisy({("files", "per_process"): 1.8})
    minimal = walk_back(SPACE, WORKLOAD, INCUMBENT, 7, measure, not_applied={"striping_factor": "not Lustre"})
    assert "striping_factor" not in minimal.changes and minimal.not_applied == {"striping_factor": "not Lustre"}
    assert all("striping_factor" not in s.knobs for s in minimal.steps)
    assert all(config["striping_factor"] == SPACE["striping_factor"].default for config, _ in measure.runs)


# -- the verdicts: matters, no effect, undecided (issue 31: "undecided is not 'no effect'") -----------------------

FILES_ONLY = {**SPACE.default(), "files": "per_process"}


def test_a_change_whose_interval_lies_inside_the_band_has_no_effect():
    minimal = walk_back(SPACE, WORKLOAD, FILES_ONLY, 7, noisy({}, cv=0.01), pairs=3)  # files does nothing here
    (step,) = minimal.steps
    low, high = step.interval
    assert NO_EFFECT_BAND[0] <= low <= 1.0 <= high <= NO_EFFECT_BAND[1]
    assert step.verdict == NO_EFFECT and not step.kept and len(step.with_mb_per_s) == 3  # settled: no extra pairs
    assert "dropped: no effect (interval inside 0.95x-1.05x)" in step.describe()
    assert minimal.changes == {} and minimal.undecided() == []
    assert minimal.conclusion() == "no change matters: each was shown to have no effect or to slow the run"


def test_a_wide_interval_holding_1_is_undecided_after_more_pairs_up_to_the_cap():
    """A 1.3x gain on a loaded machine (50% CV a run): the first 3 pairs hold 1 and reach far outside the band, so
    the test measures 3 pairs at a time up to its cap, 20 pairs, where it still holds 1 (1.42x, 0.92x-2.18x): the
    change is reverted, but as undecided, with the pairs that would settle it."""
    measure = noisy({("files", "per_process"): 1.3}, cv=0.5, seed=4)
    minimal = walk_back(SPACE, WORKLOAD, FILES_ONLY, 7, measure, pairs=3)
    (step,) = minimal.steps
    low, high = step.interval
    assert low < 1.0 < high and (low < NO_EFFECT_BAND[0] or high > NO_EFFECT_BAND[1])
    assert step.verdict == UNDECIDED and not step.kept
    assert len(step.with_mb_per_s) == MAX_TEST_PAIRS == 20 and len(measure.runs) == 2 * MAX_TEST_PAIRS
    assert sorted({a["pair"] for _, a in measure.runs}) == list(range(20))  # 3 + 3 + ... + 2 pairs, one test
    assert step.stopped == "measuring stopped at the cap of 20 pairs per test"
    logs = np.log(np.array(step.with_mb_per_s) / np.array(step.without_mb_per_s))
    needed = planned_pairs(float(np.std(logs, ddof=1)) / np.sqrt(np.pi), float(np.exp(logs.mean())), 2, 10_000)
    assert step.pairs_to_settle() == needed > 20  # a gain at the measured ratio and noise (the band is further)
    assert f"about {needed - 20} more pairs would settle it" in step.describe()
    assert minimal.changes == {} and minimal.undecided() == [step]
    assert minimal.conclusion() == ("the system default is kept because no change was shown to help; undecided "
                                    "(more pairs could show a gain): files")
    assert re.fullmatch(rf"files=per_process: 1\.\d\dx, 95% CI 0\.\d\dx-\d\.\d\dx after 20 pairs, about "
                        rf"{needed - 20} more pairs would settle it", minimal.undecided_text(FILES_ONLY))
    assert "undecided: files" in minimal.describe()
    assert minimal.budget_s == WALK_BACK_BUDGET_S and not minimal.ended_by_budget  # the test's cap stopped it
    again = Minimal.from_attr(minimal.to_attr())
    assert again == minimal and again.steps[0].stopped == step.stopped


def test_a_gain_nine_pairs_left_undecided_is_measured_until_it_matters():
    """The demo of issue 31: 1.59x on a loaded machine, "dropped: within noise" after 9 pairs; measured on, it
    matters (here after 15 pairs)."""
    measure = noisy({("files", "per_process"): 1.59}, cv=0.45, seed=4)
    minimal = walk_back(SPACE, WORKLOAD, FILES_ONLY, 7, measure, pairs=3)
    first = minimal.steps[0]
    assert first.verdict == MATTERS and first.interval[0] > 1.0 and 9 < len(first.with_mb_per_s) <= MAX_TEST_PAIRS
    assert minimal.changes == {"files": "per_process"}


def test_told_the_confirmation_s_pairs_an_undecided_test_stops_once_no_gain_they_could_show_is_left():
    """--via-kernel: the program's confirmation runs 5 pairs. An inert change at 12% CV a run is undecided after
    3 pairs and still after 20 (0.94x-1.04x: it reaches outside NO_EFFECT_BAND); told the 5 pairs, the test stops
    as soon as its upper end lies below the gain 5 pairs show at its noise: after 6 pairs (0.92x-1.08x, 5 pairs
    show 1.13x), not 20. Told 20 pairs, which show smaller gains, it measures on. A 1.3x gain, which 5 pairs can
    show, is still measured until it matters."""
    from iobo.measure import confirmable_speedup

    unbounded = walk_back(SPACE, WORKLOAD, FILES_ONLY, 7, noisy({}, cv=0.12, seed=0), pairs=3)
    assert [s.verdict for s in unbounded.steps] == [UNDECIDED]
    assert len(unbounded.steps[0].with_mb_per_s) == MAX_TEST_PAIRS
    told = walk_back(SPACE, WORKLOAD, FILES_ONLY, 7, noisy({}, cv=0.12, seed=0), pairs=3, confirm_pairs=5)
    (step,) = told.steps
    confirmable = confirmable_speedup(step.run_noise_sd_log(), 5)
    assert step.verdict == UNDECIDED and not step.kept and len(step.with_mb_per_s) == 6
    assert step.interval[1] < confirmable
    assert step.stopped == (f"measuring stopped: a gain of at most {step.interval[1]:.2f}x is below the "
                            f"{confirmable:.2f}x a confirmation of 5 pairs could show at this test's noise")
    assert told.changes == {} and told.undecided() == [step] and step.stopped in step.describe()
    shorter = walk_back(SPACE, WORKLOAD, FILES_ONLY, 7, noisy({}, cv=0.12, seed=0), pairs=3, confirm_pairs=20)
    assert len(shorter.steps[0].with_mb_per_s) > 6  # 20 pairs could show a smaller gain: it measures on
    gain = walk_back(SPACE, WORKLOAD, FILES_ONLY, 7, noisy({("files", "per_process"): 1.3}, cv=0.12, seed=0),
                     pairs=3, confirm_pairs=5)
    assert gain.changes == {"files": "per_process"} and gain.steps[0].verdict == MATTERS


@pytest.mark.parametrize("confirm_pairs", [0, True, 2.5])
def test_a_confirmation_s_pairs_that_are_not_a_count_are_refused(confirm_pairs):
    with pytest.raises(ConfigError, match=r"confirm_pairs must be the confirmation's number of interleaved pairs "
                                          r"\(>= 1\) or None; got "):
        walk_back(SPACE, WORKLOAD, FILES_ONLY, 7, noisy({}), confirm_pairs=confirm_pairs)


def timed(effects, cv, seconds_per_run, seed=4):
    """A measure function whose every run takes ``seconds_per_run`` of wall clock (slept): 1000 MB/s times each
    present effect, log-normal noise of ``cv`` drawn from the run's own seed (walk step, pair, arm), so the values
    do not depend on how many runs came before it."""
    import time

    runs = []

    def measure(pairs):
        values = []
        for config, attrs in pairs:
            time.sleep(seconds_per_run)
            rng = np.random.default_rng([seed, attrs["minimize_step"], attrs["pair"], attrs["arm"] == "with"])
            value = 1000.0 * float(np.prod([f for (name, wanted), f in effects.items() if config.get(name) == wanted]))
            values.append(value * float(np.exp(cv * rng.standard_normal())))
            runs.append(dict(attrs))
        return values

    measure.runs = runs
    return measure


TWO_CHANGES = {**FILES_ONLY, "meta_block_size": 32768}
EQUAL = {"files": 0.5, "meta_block_size": 0.5}  # each change tested on its own


def test_the_walk_back_s_budget_ends_the_measuring_of_undecided_tests():
    """Issue 31: the direct CaNS walk-back measured undecided changes for 57 min (112 runs) on a loaded machine.
    Two changes each undecided on their first 3 pairs (an inert knob tested first, then a 1.3x gain; 50% CV a
    run), runs of 0.2 s: with a 2 s budget for the whole walk, the first test measures extra rounds only while the
    budget lasts (its first round ends after 1.2 s, a second after 2.4 s; without a budget it goes on to 15 pairs),
    and the second test runs its first 3 pairs only (without a budget: 20). Both are reverted as undecided, with
    the pairs that would settle them, and the conclusion says the budget ended the measuring."""
    paired_ratio([1.0, 2.0], [1.0, 1.0])  # its first call imports SciPy (1.3 s here): not in the walk's 2 s
    measure = timed({("files", "per_process"): 1.3}, cv=0.5, seconds_per_run=0.2)
    minimal = walk_back(SPACE, WORKLOAD, TWO_CHANGES, 7, measure, EQUAL, pairs=3, budget_s=2.0)
    first, second = minimal.steps
    assert first.verdict == second.verdict == UNDECIDED and minimal.changes == {}
    assert 3 < len(first.with_mb_per_s) < MAX_TEST_PAIRS and len(second.with_mb_per_s) == 3
    assert first.stopped == second.stopped == "measuring stopped: the walk-back's budget of 2 s was spent"
    assert len(measure.runs) == 2 * (len(first.with_mb_per_s) + 3)
    assert minimal.undecided() == [first, second] and minimal.ended_by_budget and minimal.budget_s == 2.0
    assert all(f"{s.settle_text()}" in minimal.undecided_text() for s in (first, second))
    budget = "the walk-back's budget of 2 s was spent, so undecided tests measured no more pairs"
    assert minimal.conclusion() == ("the system default is kept because no change was shown to help; undecided "
                                    f"(more pairs could show a gain): {first.knobs[0]}, {second.knobs[0]} ({budget})")
    assert f"  {budget}" in minimal.describe().splitlines()
    again = Minimal.from_attr(minimal.to_attr())
    assert again == minimal and again.ended_by_budget


def test_a_walk_back_budget_of_0_gives_each_test_its_first_pairs_only():
    """No time to settle anything: each test runs its first pairs and stops there, undecided, saying why; the
    same walk without that budget measures the first test on (the 1.59x gain of the demo at 45% CV settles)."""
    effects = {("files", "per_process"): 1.59}
    minimal = walk_back(SPACE, WORKLOAD, TWO_CHANGES, 7, timed(effects, 0.45, 0.0), EQUAL, pairs=3, budget_s=0)
    assert [len(s.with_mb_per_s) for s in minimal.steps] == [3, 3]
    assert {s.verdict for s in minimal.steps} == {UNDECIDED} and minimal.ended_by_budget
    assert "the walk-back's budget of 0 s was spent" in minimal.steps[0].stopped
    unbounded = walk_back(SPACE, WORKLOAD, TWO_CHANGES, 7, timed(effects, 0.45, 0.0), EQUAL, pairs=3)
    assert max(len(s.with_mb_per_s) for s in unbounded.steps) > 3 and not unbounded.ended_by_budget


@pytest.mark.parametrize("budget", [-1, float("nan"), True, "900"])
def test_a_walk_back_budget_that_is_not_seconds_is_refused(budget):
    with pytest.raises(ConfigError, match=r"budget_s must be a number of seconds >= 0 .*; got "):
        walk_back(SPACE, WORKLOAD, INCUMBENT, 7, noisy({}), budget_s=budget)


def test_a_walk_round_trips_through_the_study_attr():
    minimal = walk_back(SPACE, WORKLOAD, INCUMBENT, 7, noisy({("files", "per_process"): 1.8}))
    again = Minimal.from_attr(minimal.to_attr())
    assert again == minimal and "files" in again.describe()


def test_reverting_a_parent_drops_its_child_and_repairs_constraints():
    chunked = {**SPACE.default(), "layout": "chunked", "chunk_size": 1 << 20}
    assert "chunk_size" not in revert(SPACE, WORKLOAD, chunked, ["layout"])
    aligned = {**SPACE.default(), "alignment_threshold": 1 << 20, "alignment_interval": 1 << 20}
    reverted = revert(SPACE, WORKLOAD, aligned, ["alignment_interval"])
    assert reverted["alignment_interval"] == 1 and SPACE.validate(reverted, WORKLOAD) == reverted


def test_too_few_pairs_are_refused():
    with pytest.raises(ConfigError, match="at least 2 interleaved pairs"):
        walk_back(SPACE, WORKLOAD, INCUMBENT, 7, noisy({}), pairs=1)


def test_a_change_kept_by_a_passing_phase_of_the_machine_is_dropped_by_its_re_test():
    # alignment_threshold looks 1.5x better until the walk first tests files (a transient the walk's first test
    # saw; keyed on the walk's progress, not a run count, since undecided tests before it take more pairs)
    rng = np.random.default_rng(3)
    runs = []

    def measure(pairs):
        values = []
        for config, attrs in pairs:
            value = 1000.0 * (1.8 if config.get("files") == "per_process" else 1.0)
            passing = not any("files" in a["minimize_knobs"] for a in runs + [attrs])
            if passing and config.get("alignment_threshold") == 4096:
                value *= 1.5
            values.append(value * float(np.exp(0.05 * rng.standard_normal())))
            runs.append(dict(attrs))
        return values

    importance = {"files": 0.5, "alignment_threshold": 0.06, "meta_block_size": 0.2, "sieve_buf_size": 0.2,
                  "alignment_interval": 0.03, "striping_factor": 0.01}  # alignment_threshold tested early
    minimal = walk_back(SPACE, WORKLOAD, INCUMBENT, 7, measure, importance, pairs=3)
    assert minimal.changes == {"files": "per_process"}
    first, again = [s for s in minimal.steps if s.knobs == ("alignment_threshold",)]
    assert first.kept and not first.retest  # the first test was fooled...
    assert again.retest and not again.kept  # ...its re-test on the minimal configuration was not
    assert minimal.contribution("alignment_threshold") is again
    files = minimal.contribution("files")
    assert files.retest and files.kept and "re-test on the minimal configuration: kept: it matters" in files.describe()


def test_the_expected_speedup_is_the_product_of_the_kept_changes_last_tests():
    measure = noisy({("files", "per_process"): 1.8, ("alignment_interval", 1048576): 1.3}, cv=0.03)
    minimal = walk_back(SPACE, WORKLOAD, INCUMBENT, 7, measure, pairs=3)
    kept = {minimal.contribution(k).ratio for k in minimal.changes}  # one step may hold several knobs
    assert minimal.expected_speedup == pytest.approx(np.prod(sorted(kept)))
    assert minimal.expected_speedup == pytest.approx(1.8 * 1.3, rel=0.1)
    assert all(minimal.contribution(k).retest for k in minimal.changes)  # the re-test's ratio, not the first's
    nothing = walk_back(SPACE, WORKLOAD, INCUMBENT, 7, noisy({}, cv=0.03), pairs=3)
    assert nothing.changes == {} and nothing.expected_speedup == 1.0


# -- the recommendation: the proposal, unless its own confirmation showed no gain --------------------------------

CHANGES = {"files": "per_process", "meta_block_size": 32768}
NO_GAIN = [(100.0, 93.0), (96.0, 101.0), (104.0, 88.0), (101.0, 97.0), (99.0, 104.0), (100.0, 91.0)]
GAIN = [(100.0, 180.0), (104.0, 190.0), (97.0, 170.0), (101.0, 185.0), (99.0, 178.0)]


def proposal_study(storage, scratch):
    """Default runs, a faster search trial that changes CHANGES, and its minimal configuration: files only."""
    tuner = vpic_tuner(storage, scratch)
    study = tuner.open_study()
    defaults(study)
    add(study, 150.0, ROLE_SEARCH, 4, CHANGES)
    study.set_user_attr(MINIMAL_ATTR, Minimal(3, {"files": "per_process"}).to_attr())
    return tuner, study


def test_a_proposal_its_own_confirmation_rejects_is_not_recommended(storage, scratch):
    """'0.93x, 95% CI 0.87-1.10', undecided: the recommendation (best, export, run,
    the report, Tuner.best_config) is then the system default, and says why."""
    tuner, study = proposal_study(storage, scratch)
    assert recommendation(study, SPACE).values == {**SPACE.default(), "files": "per_process"}  # not confirmed yet
    confirmed(study, NO_GAIN, {"files": "per_process"})
    chosen = recommendation(study, SPACE)
    low, high = chosen.confirmation.interval
    assert low <= 1.0 <= high and chosen.rejected
    assert chosen.values == SPACE.default() and chosen.proposed == {**SPACE.default(), "files": "per_process"}
    assert re.fullmatch(r"keep the system default: the confirmation of files=per_process measured 0\.\d\dx "
                        r"\[0\.\d\d-1\.\d\d\], undecided after 6 pairs, not shown to help: about \d+ more pairs would "
                        r"settle it \(proposed: the minimal configuration of trial 3 .*\)",
                        chosen.how)
    assert recommended(study, SPACE) == (chosen.values, chosen.how)
    assert tuner.best_config().is_default()


@pytest.mark.parametrize("pairs, verdict, words", [
    (GAIN, "gain", "a gain"),
    (NO_GAIN, UNDECIDED, "undecided after 6 pairs, not shown to help: about"),
    ([(100.0 + d, 100.0 - d) for d in (0.5, -0.5, 1.0, -1.0, 0.0, 0.5, -0.5)], NO_EFFECT,
     "no effect (interval inside 0.95x-1.05x)"),
    ([(100.0, 80.0 + d) for d in (0.0, 1.0, 2.0, -1.0, -2.0)], SLOWER, "slower than the system default"),
])
def test_a_confirmation_tells_a_gain_no_effect_slower_and_undecided_apart(storage, scratch, pairs, verdict, words):
    """Issue 31: "undecided" (the interval holds 1 and reaches outside 0.95x-1.05x) is not "no effect" (inside)."""
    _, study = proposal_study(storage, scratch)
    confirmed(study, pairs, {"files": "per_process"})
    confirmation = recommendation(study, SPACE).confirmation
    assert confirmation.verdict == verdict and confirmation.verdict_text().startswith(words)
    assert (words in recommendation(study, SPACE).how) == (verdict != "gain")  # said when the default is kept


def test_an_undecided_confirmation_says_how_many_more_pairs_would_settle_it(storage, scratch):
    """A 1.15x gain at 20% noise after 6 pairs: undecided; the pairs named are those planned to show 1.15x at the
    noise pooled over both sides' runs (fewer than showing no effect would take)."""
    rng = np.random.default_rng(3)
    pairs = [(100.0 * float(np.exp(0.2 * rng.standard_normal())), 115.0 * float(np.exp(0.2 * rng.standard_normal())))
             for _ in range(6)]
    _, study = proposal_study(storage, scratch)
    confirmed(study, pairs, {"files": "per_process"})
    confirmation = recommendation(study, SPACE).confirmation
    assert confirmation.verdict == UNDECIDED
    noise = pooled_noise_sd_log(confirmation.default.values, confirmation.best.values)
    needed = planned_pairs(noise, confirmation.speedup, 2, SETTLE_AT_MOST)
    assert needed == pairs_to_settle(math.log(confirmation.speedup), noise) and needed > 6
    assert confirmation.verdict_text().endswith(f"about {needed - 6} more pairs would settle it")


def test_a_confirmed_gain_keeps_the_proposal_and_another_configuration_s_confirmation_does_not_count(storage, scratch):
    _, study = proposal_study(storage, scratch)
    confirmed(study, NO_GAIN, {"files": "per_process", "sieve_buf_size": 1 << 20})  # of another configuration
    chosen = recommendation(study, SPACE)
    assert chosen.confirmation is None and chosen.values == {**SPACE.default(), "files": "per_process"}
    confirmed(study, GAIN, {"files": "per_process"}, first_minute=200)
    chosen = recommendation(study, SPACE)
    assert chosen.confirmation.shows_gain and not chosen.rejected
    assert chosen.confirmation.default.n == len(GAIN)  # the default runs interleaved with it, not the other's
    assert chosen.values == {**SPACE.default(), "files": "per_process"}


def test_the_recommendation_follows_the_proposal_confirmed_last(storage, scratch):
    """`confirm --no-minimize` confirms the best trial's whole configuration: when that confirmation is the latest,
    it is the study's conclusion (rejected here), whatever the minimal configuration's."""
    _, study = proposal_study(storage, scratch)
    confirmed(study, GAIN, {"files": "per_process"})
    assert recommendation(study, SPACE).values == {**SPACE.default(), "files": "per_process"}
    confirmed(study, NO_GAIN, CHANGES, first_minute=200)
    chosen = recommendation(study, SPACE)
    assert chosen.rejected and chosen.proposed == {**SPACE.default(), **CHANGES}
    assert chosen.values == SPACE.default() and "trial 3's whole configuration" in chosen.how
    assert recommendation(study, SPACE, minimal=False).values == SPACE.default()
    assert proposed(study, SPACE, minimal=False)[0] == {**SPACE.default(), **CHANGES}
