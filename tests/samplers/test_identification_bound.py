"""The oracle that is told the best few configurations of a table: its picks and its report."""

import numpy as np
import pytest

from experiments.harness.problems import write_emulated_table
from experiments.sampler import identification_bound


@pytest.mark.parametrize("rule", [identification_bound.uniform, identification_bound.halving])
def test_the_oracle_picks_a_configuration_that_is_clearly_ahead(rule):
    rng = np.random.default_rng(0)
    candidates = [np.array([90.0, 100.0, 110.0]), np.array([300.0, 310.0, 320.0]), np.array([95.0, 105.0])]
    estimate = identification_bound.ESTIMATORS["log-mean"]
    assert all(rule(rng, candidates, 12, estimate) == 1 for _ in range(20))


def test_a_skewed_configuration_leads_by_median_and_trails_by_log_mean():
    skewed, steady = np.array([100.0, 1000.0, 1000.0]), np.array([900.0, 900.0, 900.0])
    median, log_mean = identification_bound.ESTIMATORS["median"], identification_bound.ESTIMATORS["log-mean"]
    assert median(skewed) > median(steady) and log_mean(skewed) < log_mean(steady)


def test_the_report_gives_s_the_ranks_and_three_oracles(tmp_path):
    lines = identification_bound.report(str(write_emulated_table(tmp_path / "emulated.csv")), budget=50, reps=20)
    assert lines[0].startswith("## emulated (") and " S = " in lines[0]
    assert lines[1].startswith("median-best ") and "(rank " in lines[1]
    assert sum(line.startswith("oracle told the top ") for line in lines) == 3


def test_a_level_scores_against_the_configurations_above_that_share_of_the_best_median(tmp_path):
    path = str(write_emulated_table(tmp_path / "emulated.csv"))
    s_size = int(identification_bound.report(path, budget=50, reps=20)[0].split(" S = ")[1].split()[0])
    lines = identification_bound.report(path, budget=50, reps=20, level=0.5)
    half = int(lines[0].split(" A50% = ")[1].split()[0])
    assert half > s_size  # half the best median admits more than one standard error does
    assert all("pick in A50%:" in line for line in lines if line.startswith("oracle told"))
