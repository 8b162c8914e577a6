"""The walk back from the incumbent to the default: only changes that beat the noise stay."""

import re

import numpy as np
import pytest

from iobo import kernels
from iobo.errors import ConfigError
from iobo.minimize import MINIMAL_ATTR, Minimal, proposed, recommendation, recommended, revert, walk_back
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
    files = minimal.contribution("files")
    assert files.kept and files.interval[0] > 1.2 and files.ratio == pytest.approx(1.8, rel=0.1)
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
    # alignment_threshold looks 1.5x better during the first 36 runs only (a transient the walk's first test saw)
    rng = np.random.default_rng(3)
    runs = []

    def measure(pairs):
        values = []
        for config, attrs in pairs:
            value = 1000.0 * (1.8 if config.get("files") == "per_process" else 1.0)
            if len(runs) < 36 and config.get("alignment_threshold") == 4096:
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
    assert files.retest and files.kept and "re-test on the minimal configuration: kept" in files.describe()


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
    """'0.93x, 95% CI 0.87-1.10, no gain distinguishable from noise': the recommendation (best, export, run,
    the report, Tuner.best_config) is then the system default, and says why."""
    tuner, study = proposal_study(storage, scratch)
    assert recommendation(study, SPACE).values == {**SPACE.default(), "files": "per_process"}  # not confirmed yet
    confirmed(study, NO_GAIN, {"files": "per_process"})
    chosen = recommendation(study, SPACE)
    low, high = chosen.confirmation.interval
    assert low <= 1.0 <= high and chosen.rejected
    assert chosen.values == SPACE.default() and chosen.proposed == {**SPACE.default(), "files": "per_process"}
    assert re.fullmatch(r"keep the system default: the confirmation of files=per_process measured 0\.\d\dx "
                        r"\[0\.\d\d-1\.\d\d\], no gain \(proposed: the minimal configuration of trial 3 .*\)",
                        chosen.how)
    assert recommended(study, SPACE) == (chosen.values, chosen.how)
    assert tuner.best_config().is_default()


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
