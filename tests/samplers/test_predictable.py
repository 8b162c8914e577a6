"""experiments.sampler.predictable: would the rest of a table point a sampler at S?"""

import itertools
import math

import numpy as np
import pytest

from experiments.sampler import predictable

EFFECTS = {"a": (0.0, 0.4, 0.9, 0.2), "b": (0.0, -0.3, 0.5, 0.1), "c": (0.0, 0.6, -0.2, 0.3)}  # log effects
SPREAD = (0.97, 0.99, 1.0, 1.01, 1.03)  # every configuration's repeats around its median


def write_table(path, spike=None):
    """A 4 x 4 x 4 table whose log median is the sum of EFFECTS; ``spike``: (configuration, factor) made
    the best by itself, whatever its effects say."""
    lines = ["a,b,c,repeat,mb_per_s"]
    for combo in itertools.product(range(4), repeat=3):
        median = 1000 * math.exp(sum(EFFECTS[n][i] for n, i in zip("abc", combo)))
        if spike and combo == spike[0]:
            median *= spike[1]
        lines += [f"{combo[0]},{combo[1]},{combo[2]},{r},{median * f:.3f}" for r, f in enumerate(SPREAD)]
    path.write_text("\n".join(lines) + "\n")
    path.with_suffix(".json").write_text('{"default": {"a": 0, "b": 0, "c": 0}}')
    return str(path)


def test_an_additive_table_points_at_its_best(tmp_path):
    lines = predictable.report(write_table(tmp_path / "t.csv"))
    additive = next(line for line in lines if line.startswith("additive"))
    assert "S after 2 evaluations (structure could reach S" in additive  # the default, then the best
    assert float(additive.split("R^2 ")[1].split(";")[0]) > 0.99


def test_a_best_that_nothing_else_predicts_is_beyond_structure(tmp_path):
    # (0, 0, 2): effects 0 + 0 - 0.2, among the worst; made the best by a factor nothing else shows
    lines = predictable.report(write_table(tmp_path / "t.csv", spike=((0, 0, 2), 20.0)))
    for line in lines[2:]:
        evaluations = int(line.split("S after ")[1].split(" ")[0])
        assert evaluations > predictable.TARGET, line
        assert "beyond what structure shows" in line


def test_leave_one_out_is_a_refit_without_the_configuration():
    rng = np.random.default_rng(0)
    x = np.column_stack([np.ones(30), rng.integers(0, 2, (30, 5))]).astype(float)
    y = x @ rng.normal(size=6) + 0.3 * rng.normal(size=30)
    fast = predictable.leave_one_out(x, y)
    for i in range(30):
        keep = np.arange(30) != i
        beta = np.linalg.solve(x[keep].T @ x[keep] + predictable.RIDGE * np.eye(6), x[keep].T @ y[keep])
        assert fast[i] == pytest.approx(x[i] @ beta, abs=1e-9)


def test_blind_sampling_expectations_match_a_seeded_simulation():
    n, s, budget = 40, 3, 10
    rng = np.random.default_rng(1)
    found = []
    for _ in range(20000):
        order = rng.permutation(n - 1)  # the others after the default; 0..s-1 are S
        found.append(1 + 1 + int(np.flatnonzero(order < s)[0]))
    found = np.array(found)
    assert predictable.blind_expected(n, s, False) == pytest.approx(found.mean(), rel=0.02)
    assert predictable.blind_within(n, s, False, budget) == pytest.approx(np.mean(found <= budget), abs=0.01)
    assert predictable.blind_median(n, s, False) == int(np.ceil(np.quantile(found, 0.5)))
    assert predictable.blind_expected(n, s, True) == 1.0 and predictable.blind_within(n, s, True) == 1.0


def test_blinds_chance_of_showing_its_own_figures_matches_shuffled_benchmarks():
    """Checked against benchmarks simulated the plain way: 20 runs, each a shuffle of the 39 non-default
    configurations of a 40-configuration table with 3 in S."""
    n, s, runs = 40, 3, 20
    rng = np.random.default_rng(1)
    shuffles = np.argsort(rng.random((4000, runs, n - 1)), axis=2)
    evaluations = 2 + np.argmax(shuffles < s, axis=2)  # the default, then up to the first S member
    median, within = predictable.blind_median(n, s, False), math.floor(runs * predictable.blind_within(n, s, False))
    plain = np.mean((np.median(evaluations, axis=1) <= median) & ((evaluations <= predictable.WITHIN).sum(axis=1) >= within))
    assert predictable.blind_meets_its_own_figures(n, s, False) == pytest.approx(plain, abs=0.03)
    assert 0.2 < plain < 0.8  # neither sure nor hopeless: a coin flip
    assert predictable.blind_meets_its_own_figures(n, s, True) == 1.0
