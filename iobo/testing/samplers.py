"""The contract every iobo sampler passes, as a pytest class to subclass.

In the style of ``optuna.testing.pytest_samplers``: subclass
:class:`SamplerContract` in a test module and give it a ``make_sampler``
fixture (seed -> a new sampler), optionally ``max_repeats`` (how many times
the sampler may measure one configuration while others are unmeasured;
default 1)::

    class TestGPSampler(SamplerContract):
        @pytest.fixture
        def make_sampler(self):
            return lambda seed: GPSampler(seed=seed)

Every test runs real Optuna studies (in-memory storage) on small seeded
functions, and checks what a user of the sampler relies on:

- every distribution (int, float: plain, log, step; categorical with mixed
  types) alone and mixed, with define-by-run conditional parameters
  (nested, and one asked under two conditions at once): values of the
  right type, in range, on the step;
- distinct proposals while unmeasured configurations remain (at most
  ``max_repeats`` measurements of one), failed and pruned configurations
  included;
- the same seed gives the same trials, another seed other ones;
- the optimum of small deterministic functions (maximised and minimised,
  negative values included) within a fixed budget, and the noisy
  ``suggest_int`` problem of issue 17 ((7, 6, 4) found, >= 40 distinct
  configurations in 60 trials);
- failed, pruned and NaN trials; ``n_jobs=2`` and pending (asked, not yet
  told) trials; single-value distributions; a distribution that changes
  during the study (warned about once, then sampled within the new one).
"""

from __future__ import annotations

import math
import warnings
import zlib
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import optuna
import pytest
from optuna.samplers import BaseSampler
from optuna.trial import Trial, TrialState

from iobo.surrogate import configuration_key

Factory = Callable[[int], BaseSampler]
Suggest = Callable[[Trial], Any]

# one parameter "p" of each distribution: (suggest call, number of values or None when larger than any budget)
DISTRIBUTIONS: dict[str, tuple[Suggest, int | None]] = {
    "int": (lambda t: t.suggest_int("p", -3, 4), 8),
    "int-step": (lambda t: t.suggest_int("p", 0, 20, step=4), 6),
    "int-log": (lambda t: t.suggest_int("p", 1, 1024, log=True), None),
    "float": (lambda t: t.suggest_float("p", -1.0, 1.0), None),
    "float-step": (lambda t: t.suggest_float("p", 0.0, 1.0, step=0.125), 9),
    "float-log": (lambda t: t.suggest_float("p", 1e-5, 1.0, log=True), None),
    "categorical": (lambda t: t.suggest_categorical("p", ("a", "b", "c")), 3),
    # not True and 1 together: Optuna stores a choice by its index, found with ==, so 1 would come back True
    "categorical-mixed": (lambda t: t.suggest_categorical("p", (None, True, 2, 2.5, "x")), 5),
}


class _Crash(Exception):
    """What the objectives raise to make a trial FAIL."""


def check_value(trial: optuna.trial.FrozenTrial) -> None:
    """Assert every parameter of ``trial`` is a value its distribution can take, of the right type."""
    from optuna.distributions import CategoricalDistribution, IntDistribution

    for name, value in trial.params.items():
        d = trial.distributions[name]
        if isinstance(d, CategoricalDistribution):
            assert any(type(value) is type(c) and value == c for c in d.choices), (name, value, d)
            continue
        kind = int if isinstance(d, IntDistribution) else float
        assert type(value) is kind, (name, value, d)
        assert d.low <= value <= d.high, (name, value, d)
        if d.step is not None:
            k = (value - d.low) / d.step
            assert abs(k - round(k)) < 1e-9, (name, value, d)


def repeats_while_unmeasured(trials, size: int | None, max_repeats: int) -> list[int]:
    """Numbers of the trials that measured a configuration for the ``max_repeats + 1``-th time or
    more while fewer than ``size`` configurations (None: infinitely many) had been measured."""
    seen: Counter = Counter()
    offending = []
    for t in sorted(trials, key=lambda t: t.number):
        key = configuration_key(t.params)
        if seen[key] >= max_repeats and (size is None or len(seen) < size):
            offending.append(t.number)
        seen[key] += 1
    return offending


def issue17(rng: np.random.Generator) -> Callable[[Trial], float]:
    """The noisy objective of issue 17: optimum at (7, 6, 4), 450 configurations, CV 15%."""

    def objective(t: Trial) -> float:
        x, y, z = t.suggest_int("x", 0, 9), t.suggest_int("y", 0, 8), t.suggest_int("z", 0, 4)
        return float(100 - 3 * (x - 7) ** 2 - 2 * (y - 6) ** 2 - 4 * (z - 4) ** 2) * float(np.exp(0.15 * rng.standard_normal()))

    return objective


def mixed(t: Trial) -> float:
    """Every distribution, two levels of conditional parameters; maximum 10 at
    kind=float, f=0.75, mode=b, x=3, lr=1e-2, s=0.5 (all on the samplers' grids)."""
    value = 10.0 - (t.suggest_int("x", 0, 8) - 3) ** 2 - (math.log10(t.suggest_float("lr", 1e-4, 1.0, log=True)) + 2) ** 2
    value -= 4 * (t.suggest_float("s", 0.0, 1.0, step=0.25) - 0.5) ** 2
    kind = t.suggest_categorical("kind", ("int", "float", "none"))
    if kind == "int":
        value -= 1.0 + 0.1 * abs(math.log2(t.suggest_int("n", 1, 64, log=True)) - 3)
    elif kind == "float":
        value -= 4 * (t.suggest_float("f", 0.0, 1.0) - 0.75) ** 2
        if t.suggest_categorical("mode", ("a", "b")) == "a":
            value -= 0.5 + abs(math.log10(t.suggest_float("g", 1e-3, 1.0, log=True)))
    else:
        value -= 2.0
    return value


def shifted_bowl(t: Trial) -> float:
    """Minimum -5 at x=2, y=0.25, c=u; negative near the optimum, positive far from it."""
    x, y = t.suggest_int("x", -5, 5), t.suggest_float("y", 0.0, 1.0)
    c = t.suggest_categorical("c", ("u", "v", "w"))
    return (x - 2) ** 2 + 10 * (y - 0.25) ** 2 + {"u": 0.0, "v": 1.0, "w": 3.0}[c] - 5.0


def run(sampler: BaseSampler, objective: Callable[[Trial], float], n_trials: int, direction: str = "maximize",
        **optimize: Any) -> optuna.Study:
    """A new in-memory study of ``sampler`` after ``n_trials`` of ``objective`` (failures caught)."""
    study = optuna.create_study(direction=direction, sampler=sampler)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.optimize(objective, n_trials=n_trials, catch=(_Crash,), **optimize)
    return study


class SamplerContract:
    """The contract; subclass it with a ``make_sampler`` fixture (seed -> sampler)."""

    @pytest.fixture
    def make_sampler(self) -> Factory:
        raise NotImplementedError("define a make_sampler fixture: seed -> a new sampler")

    @pytest.fixture
    def max_repeats(self) -> int:
        return 1

    # -- distributions -----------------------------------------------------------------
    @pytest.mark.parametrize("kind", list(DISTRIBUTIONS))
    def test_each_distribution_alone(self, make_sampler: Factory, max_repeats: int, kind: str) -> None:
        suggest, size = DISTRIBUTIONS[kind]

        def objective(t: Trial) -> float:
            value = suggest(t)
            return float(zlib.crc32(repr(value).encode()) % 97)  # any deterministic number per value

        study = run(make_sampler(0), objective, 10)
        assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 10
        for t in study.trials:
            check_value(t)
        assert repeats_while_unmeasured(study.trials, size, max_repeats) == []

    def test_mixed_distributions_with_conditional_parameters(self, make_sampler: Factory, max_repeats: int) -> None:
        study = run(make_sampler(1), mixed, 16)
        for t in study.trials:
            assert t.state == TrialState.COMPLETE
            check_value(t)
            assert ("n" in t.params) == (t.params["kind"] == "int")
            assert ("f" in t.params) == ("mode" in t.params) == (t.params["kind"] == "float")
            assert ("g" in t.params) == (t.params.get("mode") == "a")
        assert repeats_while_unmeasured(study.trials, None, max_repeats) == []

    def test_a_parameter_under_two_conditions_is_not_asked_again_in_vain(self, make_sampler: Factory,
                                                                         max_repeats: int) -> None:
        def objective(t: Trial) -> float:  # y only where x > 5 and c == "a": 14 + 2 * 4 = 22 configurations
            x, c = t.suggest_int("x", 0, 7), t.suggest_categorical("c", ("a", "b"))
            value = -((x - 6) ** 2) + (c == "a")
            if x > 5 and c == "a":
                value -= (t.suggest_int("y", 0, 3) - 2) ** 2
            return float(value)

        study = run(make_sampler(0), objective, 20)
        assert repeats_while_unmeasured(study.trials, 22, max_repeats) == []

    def test_single_value_distributions(self, make_sampler: Factory) -> None:
        def objective(t: Trial) -> float:
            params = (t.suggest_categorical("a", (1,)), t.suggest_int("b", 1, 1), t.suggest_int("c", 1, 1, log=True),
                      t.suggest_float("d", 1.0, 1.0), t.suggest_float("e", 1.0, 1.0, log=True),
                      t.suggest_float("f", 1.0, 1.0, step=1.0))
            assert params == (1, 1, 1, 1.0, 1.0, 1.0)
            return 1.0

        study = run(make_sampler(0), objective, 7)
        assert all(t.state == TrialState.COMPLETE for t in study.trials)

    def test_a_changed_distribution_is_warned_about_once_then_sampled_within_the_new_one(self, make_sampler: Factory) -> None:
        def objective(low: int) -> Callable[[Trial], float]:
            return lambda t: t.suggest_float("x", low, low + 10) + t.suggest_int("y", 0, 3)

        sampler = make_sampler(0)
        run_study = optuna.create_study(sampler=sampler)
        run_study.optimize(objective(0), n_trials=6)
        with pytest.warns(UserWarning, match="'x'") as caught:
            run_study.optimize(objective(20), n_trials=4)
        assert sum("'x'" in str(w.message) for w in caught) == 1
        assert all(20 <= t.params["x"] <= 30 for t in run_study.trials[6:])

    # -- distinct configurations, seeds --------------------------------------------------
    def test_distinct_proposals_while_unmeasured_configurations_remain(self, make_sampler: Factory,
                                                                       max_repeats: int) -> None:
        rng = np.random.default_rng(2)

        def noisy(t: Trial) -> float:  # 4 x 3 x 2 = 24 configurations
            x, c, b = t.suggest_int("x", 0, 3), t.suggest_categorical("c", ("a", "b", "c")), t.suggest_categorical("b", (False, True))
            return (10.0 + x + (c == "b") + 0.5 * b) * float(np.exp(0.3 * rng.standard_normal()))

        study = run(make_sampler(2), noisy, 24)
        assert repeats_while_unmeasured(study.trials, 24, max_repeats) == []

    def test_same_seed_same_trials_other_seed_other_trials(self, make_sampler: Factory) -> None:
        def params(seed: int) -> list[dict]:
            return [t.params for t in run(make_sampler(seed), mixed, 12).trials]

        assert params(3) == params(3)
        assert params(3) != params(4)

    # -- finding the optimum -----------------------------------------------------------------
    def test_issue17_noisy_integers(self, make_sampler: Factory) -> None:
        study = run(make_sampler(0), issue17(np.random.default_rng(0)), 60)
        configs = [(t.params["x"], t.params["y"], t.params["z"]) for t in study.trials]
        assert (7, 6, 4) in configs
        assert len(set(configs)) >= 40

    def test_maximum_of_a_mixed_conditional_function(self, make_sampler: Factory) -> None:
        study = run(make_sampler(0), mixed, 40)
        assert study.best_value == pytest.approx(10.0, abs=0.05)

    def test_minimum_of_a_function_with_negative_values(self, make_sampler: Factory) -> None:
        study = run(make_sampler(0), shifted_bowl, 30, direction="minimize")
        assert study.best_value <= -4.95
        assert study.best_params["x"] == 2 and study.best_params["c"] == "u"

    # -- failures, concurrency ------------------------------------------------------------------
    def test_failed_pruned_and_nan_trials_are_not_proposed_again(self, make_sampler: Factory, max_repeats: int) -> None:
        def objective(t: Trial) -> float:  # 6 x 4 = 24 configurations; a third of them fail
            x, y = t.suggest_int("x", 0, 5), t.suggest_int("y", 0, 3)
            if x == 0:
                raise optuna.TrialPruned()
            if x == 5:
                raise _Crash("a configuration that crashes the program")
            if (x, y) == (1, 1):
                return math.nan
            return float(10 * x + y)

        study = run(make_sampler(0), objective, 22)
        states = Counter(t.state for t in study.trials)
        assert states[TrialState.COMPLETE] > 0 and states[TrialState.PRUNED] + states[TrialState.FAIL] > 0
        assert repeats_while_unmeasured(study.trials, 24, max_repeats) == []

    def test_parallel_jobs_and_pending_trials_get_distinct_configurations(self, make_sampler: Factory,
                                                                          max_repeats: int) -> None:
        def objective(t: Trial) -> float:
            return -((t.suggest_int("x", 0, 9) - 4) ** 2) - (t.suggest_int("y", 0, 9) - 5) ** 2

        study = run(make_sampler(0), objective, 12, n_jobs=2)
        assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 12
        assert repeats_while_unmeasured(study.trials, 100, max_repeats) == []
        pending = [study.ask() for _ in range(4)]
        asked = [(t.suggest_int("x", 0, 9), t.suggest_int("y", 0, 9)) for t in pending]
        assert len(set(asked)) == 4
        if max_repeats == 1:
            measured = {(t.params["x"], t.params["y"]) for t in study.trials if t.state == TrialState.COMPLETE}
            assert not set(asked) & measured

