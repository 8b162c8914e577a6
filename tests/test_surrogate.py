"""Trials as the GP's data (every Optuna distribution) and the fitted surrogate's readings."""

import math

import numpy as np
import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState, create_trial

from iobo._gp.encoding import ANY
from iobo.errors import ConfigError
from iobo.surrogate import GRID_LEVELS, Surrogate, TrialData, configuration_key, contains, grid, snap

optuna.logging.set_verbosity(optuna.logging.WARNING)


@pytest.mark.parametrize(
    "distribution, expected",
    [
        (IntDistribution(0, 9), tuple(range(10))),
        (IntDistribution(-10, 10, step=5), (-10, -5, 0, 5, 10)),
        (FloatDistribution(0.0, 1.0, step=0.25), (0.0, 0.25, 0.5, 0.75, 1.0)),
        (CategoricalDistribution(("a", 1, None)), ("a", 1, None)),
        (IntDistribution(3, 3), (3,)),
    ],
)
def test_small_ranges_take_every_value(distribution, expected):
    values = grid(distribution)
    assert values == expected
    assert [type(v) for v in values] == [type(v) for v in expected]


def test_large_and_continuous_ranges_take_an_even_grid_with_both_ends():
    linear = grid(FloatDistribution(-1.0, 1.0))
    assert len(linear) == GRID_LEVELS and linear[0] == -1.0 and linear[-1] == 1.0
    assert np.allclose(np.diff(linear), 2.0 / (GRID_LEVELS - 1))
    log = grid(FloatDistribution(1e-5, 1e-1, log=True))
    assert log[0] == 1e-5 and log[-1] == 1e-1 and np.allclose(np.diff(np.log(log)), math.log(1e4) / (GRID_LEVELS - 1))
    wide = grid(IntDistribution(1, 1_000_000, log=True))
    assert wide[0] == 1 and wide[-1] == 1_000_000 and all(isinstance(v, int) for v in wide)
    assert len(wide) == len(set(wide)) <= GRID_LEVELS
    stepped = grid(IntDistribution(0, 10_000, step=10))
    assert all(v % 10 == 0 for v in stepped) and stepped[-1] == 10_000


def test_values_snap_to_the_step_and_containment_checks_range_and_step():
    assert snap(FloatDistribution(0.0, 1.0, step=0.1), 0.30000000000000004) == snap(FloatDistribution(0.0, 1.0, step=0.1), 0.3)
    assert contains(IntDistribution(0, 10, step=2), 4) and not contains(IntDistribution(0, 10, step=2), 5)
    assert not contains(FloatDistribution(0.0, 1.0), 1.5) and not contains(IntDistribution(0, 1), True)
    assert contains(CategoricalDistribution((1, "a")), "a") and not contains(CategoricalDistribution((1, "a")), True)


def test_configuration_key_keeps_types_apart_and_ignores_order():
    assert configuration_key({"a": 1, "b": "x"}) == configuration_key({"b": "x", "a": 1})
    assert configuration_key({"a": 1}) != configuration_key({"a": True})
    assert configuration_key({"a": 1}) != configuration_key({"a": 1.0})


DISTS = {"x": IntDistribution(0, 9), "lr": FloatDistribution(1e-4, 1.0, log=True), "mode": CategoricalDistribution(("a", "b"))}


def _trial(number, value=None, state=TrialState.COMPLETE, **params):
    t = create_trial(params=params, distributions={n: DISTS[n] for n in params}, value=value, state=state)
    t.number = number
    return t


def test_trial_data_models_logs_of_positive_values_and_the_values_otherwise():
    trials = [_trial(0, 2.0, x=1, lr=1e-3, mode="a"), _trial(1, 8.0, x=3, lr=0.5, mode="b")]
    data = TrialData.from_trials(trials, DISTS)
    assert data.log and data.targets == pytest.approx([math.log(2.0), math.log(8.0)])
    assert data.value(data.targets[1]) == pytest.approx(8.0)
    trials.append(_trial(2, -1.0, x=4, lr=1e-2, mode="a"))
    data = TrialData.from_trials(trials, DISTS, minimize=True)
    assert not data.log and data.targets == pytest.approx([-2.0, -8.0, 1.0])  # minimised: negated
    assert data.value(data.targets[2]) == pytest.approx(-1.0)
    # log forced: the non-positive run counts as failed
    data = TrialData.from_trials(trials, DISTS, log=True)
    assert len(data.targets) == 2 and data.encoding.to_config(data.failed[0]) == {"x": 4, "lr": 1e-2, "mode": "a"}


def test_trial_data_places_numbers_in_their_range_and_keeps_off_grid_values():
    trials = [_trial(0, 1.0, x=1, lr=0.0123, mode="a"), _trial(1, 2.0, x=9, lr=1.0, mode="b"),
              _trial(2, state=TrialState.FAIL, x=5, lr=1e-4, mode="a"), _trial(3, state=TrialState.RUNNING, x=2)]
    data = TrialData.from_trials(trials, DISTS)
    lr = data.encoding.params[data.encoding.names.index("lr")]
    assert 0.0123 in lr.choices and len(lr.choices) == GRID_LEVELS + 1
    at = dict(zip(lr.choices, lr.positions))
    assert at[1e-4] == 0 and at[1.0] == 1 and at[0.0123] == pytest.approx(math.log(0.0123 / 1e-4) / math.log(1e4))
    assert data.encoding.to_config(data.rows[0]) == {"x": 1, "lr": 0.0123, "mode": "a"}
    assert data.encoding.to_config(data.failed[0]) == {"x": 5, "lr": 1e-4, "mode": "a"}
    assert data.encoding.to_config(data.pending[0]) == {"x": 2}


def test_trial_data_infers_a_conditional_parameter():
    dists = {"kind": CategoricalDistribution(("int", "float")), "n": IntDistribution(1, 64, log=True),
             "f": FloatDistribution(0.0, 1.0)}
    trials = []
    for i, (kind, extra) in enumerate([("int", {"n": 4}), ("float", {"f": 0.5}), ("int", {"n": 16}), ("float", {"f": 0.1})]):
        params = {"kind": kind, **extra}
        t = create_trial(params=params, distributions={n: dists[n] for n in params}, value=1.0 + i)
        t.number = i
        trials.append(t)
    data = TrialData.from_trials(trials, dists)
    enc = data.encoding
    assert enc.params[enc.names.index("n")].parent[0] == enc.names.index("kind")
    assert enc.params[enc.names.index("f")].parent[0] == enc.names.index("kind")


def test_surrogate_from_trials_of_every_distribution_finds_the_incumbent_and_ranks_the_parameters():
    rng = np.random.default_rng(0)
    study = optuna.create_study(direction="minimize", sampler=optuna.samplers.RandomSampler(seed=0))
    for _ in range(30):
        t = study.ask()
        x, lr, mode = t.suggest_int("x", 0, 9), t.suggest_float("lr", 1e-4, 1.0, log=True), t.suggest_categorical("mode", ("a", "b"))
        study.tell(t, (x - 6) ** 2 + 0.01 * (math.log10(lr) + 2) ** 2 + (mode == "b") * 0.1 + 0.01 * rng.standard_normal())
    surrogate = Surrogate.from_trials(study.trials, minimize=True)
    assert surrogate.incumbent["x"] == 6
    effects = surrogate.main_effects()
    assert max(effects, key=effects.get) == "x"
    with pytest.raises(ConfigError, match="maximised bandwidth modelled as log"):
        surrogate.expected_gain_mb_per_s()


def test_a_parameter_no_condition_explains_is_any_where_a_trial_was_not_asked():
    dists = {"x": IntDistribution(0, 9), "c": CategoricalDistribution(("a", "b")), "y": IntDistribution(0, 3)}
    runs = [({"x": 7, "c": "a", "y": 1}, 1.0), ({"x": 7, "c": "b"}, 2.0), ({"x": 2, "c": "a"}, 3.0), ({"x": 8, "c": "a", "y": 0}, 4.0)]
    trials = []
    for i, (params, value) in enumerate(runs):  # y where x > 5 and c == "a": no single parent explains it
        trials.append(create_trial(params=params, distributions={n: dists[n] for n in params}, value=value))
        trials[-1].number = i
    data = TrialData.from_trials(trials, dists)
    assert data.encoding.params[data.encoding.names.index("y")].parent is None
    y = data.encoding.names.index("y")
    assert data.rows[:, y].tolist() == [1, ANY, ANY, 0]
