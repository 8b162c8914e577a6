"""The size of a known-truth problem's S, counted from its independent factors, against brute force."""

import pytest

from experiments.harness import problems
from experiments.sampler import known_truth_sets


@pytest.mark.parametrize("level", [0.99, 0.92])
def test_the_factors_count_s_as_enumerating_every_configuration_does(level):
    name = "mpiio6-cv15"
    model = problems.synthetic(name)
    spec = problems.SYNTHETIC[name]
    factors = [values for _, values in problems.term_groups(spec["terms"], model.choices, model.conditions)]
    brute = sum(1 for config in model.grid.configurations() if model.truth(config) >= level * model.best * (1 - 1e-12))
    assert known_truth_sets.set_size(factors, level) == brute
    assert brute > 1


def test_the_report_names_every_factor_and_both_sets():
    lines = known_truth_sets.report("stack12-cv15", repeats=5)
    assert lines[0].startswith("## stack12-cv15 (synthetic, 12 params, CV 15%; 195,955,200 configurations")
    assert sum(line.startswith("factor ") for line in lines) == 4
    assert any(line.startswith("S (within 99% of the optimum): ") for line in lines)
    assert any(line.startswith("one standard error of a 5-run median at CV 15% (92.0% of the optimum)") for line in lines)
