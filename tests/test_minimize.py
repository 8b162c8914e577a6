"""The walk back from the incumbent to the default: only changes that beat the noise stay."""

import numpy as np
import pytest

from iobo import kernels
from iobo.errors import ConfigError
from iobo.minimize import Minimal, revert, walk_back

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
