"""Optuna trials as the GP's data, and the GP fitted to them read for decisions.

The one home of the trials -> GP conversion (:class:`TrialData`), used by the
samplers, the stop rule and the impact ranking:

- every Optuna distribution is a finite parameter of an
  :class:`~iobo._gp.encoding.Encoding`: a categorical one its choices; an
  int or float range a grid (:func:`grid`: every value when there are at
  most ``GRID_LEVELS``, else ``GRID_LEVELS`` values evenly spaced, linear or
  logarithmic, on the step) plus every value a trial took; the GP places
  each number where it lies in the range (linear or log);
- objective values are modelled as ``log(value)`` while every completed
  value is positive (bandwidths and times: multiplicative noise), as the
  values themselves otherwise, negated when minimising: larger is better;
- COMPLETE trials with a value that can be modelled are the data; FAIL
  and PRUNED trials, and COMPLETE ones whose value cannot be modelled
  (not finite, or not positive under ``log``), are *failed*: left out of
  the model, never proposed again; RUNNING trials are *pending*, at the
  parameters they have, those they were enqueued with and those a sampler
  proposed for them (system attr ``PROPOSAL_ATTR``);
- which parameter a conditional one depends on is inferred from the
  trials (:func:`~iobo._gp.encoding.infer_conditions`); a parameter whose
  absence no single parent's values explain (``if x > 5 and c == "a"``)
  is unconditional, and a trial that was not asked it holds ``ANY`` there:
  inactive for the GP, every value when measured configurations are
  excluded (the objective would not ask it there again);
- :func:`configuration_key`: the one key of a distinct configuration.

:class:`Surrogate` is the GP fitted to such data.  The sampler fits it to
choose the next configuration; the stop rule and the impact ranking need
other readings of the same model:

- :meth:`Surrogate.expected_gain_mb_per_s`: the largest expected improvement,
  in MB/s, that one more configuration could bring over the incumbent;
- :meth:`Surrogate.main_effects`: the share of the surrogate's variance each
  parameter explains alone (first-order, variance-based sensitivity);
- :meth:`Surrogate.ablation_gains`: what each parameter's move from a start
  configuration (the system default) to the incumbent's value gains, in
  modelled units (log(MB/s)), along the greedy path between the two
  (surrogate-based ablation analysis, Fawcett & Hoos 2016; Biedenkapp et
  al. 2017).

For a bandwidth the GP models ``log(MB/s)``; with ``f ~ N(m, s^2)`` there, the improvement
of ``exp(f)`` over an incumbent ``b`` (MB/s) has the lognormal closed form
``E[max(e^f - b, 0)] = e^(m + s^2/2) Phi((m + s^2 - ln b) / s) - b Phi((m - ln b) / s)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from iobo.errors import ConfigError
from iobo._gp.encoding import ANY, INACTIVE, Encoding, infer_conditions
from iobo.space import SIZE_RATIOS

PROPOSAL_ATTR = "iobo:proposal"  # trial system attr: the configuration a sampler proposed (a running trial's params-to-be)
PRIOR_WEIGHT_ATTR = "iobo:prior_weight"  # trial system attr: the weight of GPSampler's prior mean when it proposed it
SLICE_ATTR = "iobo:slice"  # trial system attr: what GPSampler held a slice run at, {"held": {name: value}},
# and its prediction for it, "mean" and "sd" (modelled units, log(MB/s) for a bandwidth)
FOLLOWS_ATTR = "iobo:follows"  # trial system attr: the number of the surprising slice trial GPSampler followed up
MAX_CANDIDATES = 20_000  # larger spaces are scored on a seeded random sample of this many configurations
SENSITIVITY_SAMPLES = 4_096  # configurations main effects average over (>= 200 per value of a 16-value parameter)
GRID_LEVELS = 129  # values of an int or float range the GP chooses from (every value of a smaller range)


# -- Optuna distributions as finite parameters -------------------------------------------
def grid(distribution) -> tuple:
    """The values of an Optuna distribution the GP chooses from, ascending (categorical: its choices).

    An int range, or a float range with a step, with at most ``GRID_LEVELS``
    values: all of them; a larger or continuous range: ``GRID_LEVELS`` values
    evenly spaced from ``low`` to ``high`` (in ``log`` for a log range),
    rounded to the step.  Python ints for an int range, floats for a float one.
    """
    from optuna.distributions import CategoricalDistribution, IntDistribution

    if isinstance(distribution, CategoricalDistribution):
        return tuple(distribution.choices)
    low, high, step = distribution.low, distribution.high, distribution.step
    if step is not None:
        count = int(round((high - low) / step)) + 1
        if count <= GRID_LEVELS:
            return tuple(_on_step(distribution, low + k * step) for k in range(count))
    if distribution.log:
        points = np.exp(np.linspace(math.log(low), math.log(high), GRID_LEVELS))
    else:
        points = np.linspace(low, high, GRID_LEVELS)
    points[0], points[-1] = low, high
    values = [snap(distribution, float(v)) for v in points]
    return tuple(sorted(set(values))) if isinstance(distribution, IntDistribution) or step else tuple(values)


def _on_step(distribution, value: float):
    """``value`` rounded to the distribution's step (from ``low``), as an int or a float."""
    from optuna.distributions import IntDistribution

    if isinstance(distribution, IntDistribution):
        k = round((value - distribution.low) / distribution.step)
        return min(int(distribution.low + k * distribution.step), distribution.high)
    k = round((value - distribution.low) / distribution.step)
    return min(float(distribution.low + k * distribution.step), float(distribution.high))


def snap(distribution, value: Any) -> Any:
    """A trial's value of ``distribution`` as the GP holds it: on the step (ints as Python ints)."""
    from optuna.distributions import CategoricalDistribution

    if isinstance(distribution, CategoricalDistribution):
        return value
    if distribution.step is not None:
        return _on_step(distribution, float(value))
    return float(value)


def scale(distribution) -> tuple[float, float, bool] | None:
    """``(low, high, log)`` of a numeric distribution (the GP's input scale); None for a categorical one."""
    from optuna.distributions import CategoricalDistribution

    if isinstance(distribution, CategoricalDistribution):
        return None
    return float(distribution.low), float(distribution.high), bool(distribution.log)


def contains(distribution, value: Any) -> bool:
    """Whether ``value`` is one the distribution can take (a choice; in range and on the step)."""
    from optuna.distributions import CategoricalDistribution

    from iobo._gp.encoding import same_choice

    if isinstance(distribution, CategoricalDistribution):
        return any(same_choice(value, c) for c in distribution.choices)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not distribution.low <= value <= distribution.high:
        return False
    return distribution.step is None or math.isclose(_on_step(distribution, value), value, rel_tol=0, abs_tol=1e-9)


_INVALID = object()  # a value a distribution cannot take


def _reader(distribution) -> Callable[[Any], Any]:
    """value -> the value as the GP holds it (:func:`snap`), or ``_INVALID`` when ``distribution``
    cannot take it; made once per parameter (trials are read many times)."""
    if scale(distribution) is None:
        keys = {(type(c), c) for c in distribution.choices}
        return lambda v: v if (type(v), v) in keys else _INVALID
    return lambda v: snap(distribution, v) if contains(distribution, v) else _INVALID


def configuration_key(params: Mapping[str, Any]) -> tuple:
    """The key of a distinct configuration: its parameters, name-ordered, values by ``repr``
    (so ``True`` is not ``1`` and ``1`` is not ``1.0``)."""
    return tuple(sorted((name, repr(value)) for name, value in params.items()))


def is_usable(trial, log: bool = True) -> bool:
    """A COMPLETE trial with a finite value, positive when values are modelled as logarithms."""
    value = trial.value if trial.state.name == "COMPLETE" else None
    return value is not None and math.isfinite(value) and (value > 0 or not log)


# -- a study's trials as GP data ------------------------------------------------------------
@dataclass(frozen=True)
class TrialData:
    """Trials in the GP's terms.

    encoding: the parameters of ``distributions`` (name order) with the
    inferred conditions; rows: index rows of the usable completed trials
    (``n x p``); targets: their modelled values (``n``, larger is better);
    pending, failed: index rows of RUNNING trials (``k x p``) and of failed
    ones (``f x p``); usable: the trials behind ``rows``; log: whether
    targets are logarithms; sign: +1 maximising, -1 minimising.
    """

    distributions: Mapping[str, Any]
    encoding: Encoding
    rows: np.ndarray
    targets: np.ndarray
    pending: np.ndarray
    failed: np.ndarray
    usable: tuple
    log: bool
    sign: float

    @classmethod
    def from_trials(
        cls,
        trials: Sequence,
        distributions: Mapping[str, Any],
        minimize: bool = False,
        ratios: Sequence[tuple[str, str]] = SIZE_RATIOS,
        log: bool | None = None,
    ) -> "TrialData":
        """The GP's view of ``trials`` (``FrozenTrial`` s) over ``distributions`` (name -> Optuna distribution).

        Values a trial took that are not of its parameter's distribution
        are dropped (the parameter counts as inactive there).  log: model
        ``log(value)`` (non-positive values then fail), or not; None: log
        while every completed finite value is positive.
        """
        names = list(distributions)
        complete = [t for t in trials if is_usable(t, log=False)]
        if log is None:
            log = all(t.value > 0 for t in complete)
        usable = [t for t in complete if is_usable(t, log)]
        running = [t for t in trials if t.state.name == "RUNNING"]
        failed = [t for t in trials if t.state.is_finished() and not is_usable(t, log)]

        readers = {n: _reader(d) for n, d in distributions.items()}

        def params(t) -> dict[str, Any]:
            if t.state.name == "RUNNING":
                given = {**t.system_attrs.get(PROPOSAL_ATTR, {}), **t.system_attrs.get("fixed_params", {}), **t.params}
            else:
                given = t.params
            read = {n: readers[n](v) for n, v in given.items() if n in readers}
            return {n: v for n, v in read.items() if v is not _INVALID}

        configs = {t.number: params(t) for t in (*usable, *running, *failed)}
        choices = {}
        for name in names:
            values = grid(distributions[name])
            if scale(distributions[name]) is not None:
                seen = {c[name] for c in configs.values() if name in c}
                values = tuple(sorted(set(values) | seen))
            choices[name] = values
        conditions = infer_conditions(names, [configs[t.number] for t in usable])
        scales = {n: scale(d) for n, d in distributions.items() if scale(d) is not None}
        encoding = Encoding(choices, conditions, ratios, scales)

        unconditional = [j for j, p in enumerate(encoding.params) if p.parent is None]

        def rows(ts) -> np.ndarray:  # an unconditional parameter a trial was not asked: ANY
            out = encoding.to_rows([configs[t.number] for t in ts])
            for j in unconditional:
                out[out[:, j] == INACTIVE, j] = ANY
            return out

        sign = -1.0 if minimize else 1.0
        values = np.array([t.value for t in usable], dtype=float)
        pending = rows([t for t in running if configs[t.number]])
        return cls(dict(distributions), encoding, rows(usable), sign * (np.log(values) if log else values),
                   pending, rows(failed), tuple(usable), bool(log), sign)

    def value(self, target: float) -> float:
        """A modelled value back in the objective's unit."""
        value = self.sign * target
        return math.exp(value) if self.log else value

    def row(self, params: Mapping[str, Any]) -> np.ndarray:
        """Index row (``p``) of a trial's parameters (those not in the encoding, or with a value it
        does not know, are ignored)."""
        config = {}
        for name, value in params.items():
            if name in self.distributions and contains(self.distributions[name], value):
                value = snap(self.distributions[name], value)
                if (type(value), value) in self.encoding.params[self.encoding.names.index(name)].keys:
                    config[name] = value
        return self.encoding.to_row(config)


@dataclass(frozen=True)
class Surrogate:
    """A fitted GP over ``encoding`` with the rows it was fitted to.

    fit: the :class:`iobo._gp.propose.Fit`; measured: index rows measured so
    far (``n x p``); data: the trials behind it (None when fitted to plain
    runs, :meth:`from_runs`).
    """

    encoding: Encoding
    fit: Any
    measured: np.ndarray
    data: TrialData | None = None

    @classmethod
    def from_runs(
        cls,
        choices: Mapping[str, Sequence[Any]],
        configs: Sequence[Mapping[str, Any]],
        mb_per_s: Sequence[float],
        conditions: Mapping[str, tuple[str, Any]] | None = None,
        warm: np.ndarray | None = None,
        ratios: Sequence[tuple[str, str]] = SIZE_RATIOS,
    ) -> "Surrogate":
        """Fit to measured ``configs`` and their bandwidths (MB/s, positive), modelled as ``log(MB/s)``.

        choices: parameter -> allowed values; conditions: parameter -> (parent,
        activating value), inferred from the configs when omitted; warm: the
        hyperparameters of an earlier fit (``surrogate.fit.posterior.theta``);
        ratios: parameter pairs modelled through their ratio too, as the
        sampler does (:class:`iobo.samplers.GPSampler`).
        """
        from iobo._gp.propose import fit

        pairs = [(c, v) for c, v in zip(configs, mb_per_s) if v is not None and math.isfinite(v) and v > 0]
        _check_enough(len(pairs))
        names = list(choices)
        if conditions is None:
            conditions = infer_conditions(names, [c for c, _ in pairs])
        encoding = Encoding({n: tuple(choices[n]) for n in names}, conditions, ratios)
        rows = np.array([encoding.to_row({n: v for n, v in c.items() if n in choices}) for c, _ in pairs])
        log_values = np.log([v for _, v in pairs])
        return cls(encoding, fit(encoding, rows, log_values, warm), rows)

    @classmethod
    def from_trials(cls, trials, warm: np.ndarray | None = None, minimize: bool = False) -> "Surrogate":
        """Fit to Optuna ``FrozenTrial`` s: every parameter any of them has (see :class:`TrialData`).

        A parameter seen with two different distributions is left out.
        """
        return cls.from_data(TrialData.from_trials(trials, common_distributions(trials), minimize), warm)

    @classmethod
    def from_data(cls, data: TrialData, warm: np.ndarray | None = None, optimise: bool = True) -> "Surrogate":
        """Fit to :class:`TrialData` (warm, optimise: as :func:`iobo._gp.propose.fit`)."""
        from iobo._gp.propose import fit

        _check_enough(len(data.targets), minimum=1)
        return cls(data.encoding, fit(data.encoding, data.rows, data.targets, warm, optimise), data.rows, data)

    # -- readings ----------------------------------------------------------------
    def row(self, config: Mapping[str, Any]) -> np.ndarray:
        """Index row (``p``) of a configuration (a trial's parameters; unknown names ignored)."""
        if self.data is not None:
            return self.data.row(config)
        return self.encoding.to_row({n: v for n, v in config.items() if n in self.encoding.names})

    def candidates(self, seed: int = 0, limit: int = MAX_CANDIDATES) -> np.ndarray:
        """Every configuration as index rows, or a seeded sample of ``limit`` of a larger space."""
        if self.encoding.size() <= limit:
            return self.encoding.enumerate()
        return np.unique(self.encoding.random(limit, np.random.default_rng(seed)), axis=0)

    def log_posterior(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and variance of the modelled value (``log(MB/s)`` for a bandwidth; larger is
        better) of the true value at ``rows``."""
        mean, variance = self.fit.posterior.predict(self.encoding.slots(rows))
        return self.fit.shift + self.fit.scale * mean, self.fit.scale**2 * variance

    @property
    def incumbent(self) -> dict[str, Any]:
        """The measured configuration with the best posterior mean (its active parameters)."""
        return self.encoding.to_config(self.fit.rows[self.fit.best])

    @property
    def incumbent_mb_per_s(self) -> float:
        """The measured configuration with the best posterior mean: that mean in the objective's unit
        (for a bandwidth modelled as ``log(MB/s)``: its geometric-mean bandwidth, MB/s)."""
        best = float(self.fit.mean[self.fit.best])
        return self.data.value(best) if self.data is not None else math.exp(best)

    def unmeasured_log_posterior(self, seed: int = 0) -> tuple[np.ndarray, np.ndarray] | None:
        """Posterior mean and variance of ``log(MB/s)`` at the candidates (:meth:`candidates`) not measured
        yet, each of shape ``(n,)``; None when every candidate has been measured."""
        measured = {tuple(r) for r in self.measured.tolist()}
        rows = np.array([r for r in self.candidates(seed).tolist() if tuple(r) not in measured])
        return None if rows.size == 0 else self.log_posterior(rows)

    def expected_gain_mb_per_s(self, seed: int = 0) -> float:
        """Largest expected improvement (MB/s) over the incumbent of one unmeasured configuration.

        For a maximised bandwidth modelled as ``log(MB/s)`` only (ConfigError otherwise).
        """
        from scipy.stats import norm

        if self.data is not None and (not self.data.log or self.data.sign < 0):
            raise ConfigError(
                "expected_gain_mb_per_s reads a maximised bandwidth modelled as log(MB/s); these trials are "
                f"{'minimised' if self.data.sign < 0 else 'maximised'} with values modelled "
                f"{'as logarithms' if self.data.log else 'as they are (some are not positive)'}; "
                "use it on a study of positive bandwidths"
            )

        unmeasured = self.unmeasured_log_posterior(seed)
        if unmeasured is None:
            return 0.0
        m, v = unmeasured
        s = np.sqrt(np.maximum(v, 1e-18))
        log_b = math.log(self.incumbent_mb_per_s)
        gain = np.exp(m + v / 2) * norm.cdf((m + v - log_b) / s) - math.exp(log_b) * norm.cdf((m - log_b) / s)
        return float(max(gain.max(), 0.0))

    def main_effects(self, seed: int = 0) -> dict[str, float]:
        """First-order sensitivity of the posterior mean of ``log(MB/s)`` to each parameter.

        For parameter ``j``: the variance over its values of the mean
        prediction at that value (the others averaged over the candidates),
        divided by the total variance of the predictions (over every
        configuration, or ``SENSITIVITY_SAMPLES`` of a larger space).  A conditional
        parameter is compared over the candidates where it is active, weighted
        by their share (``chunk_size`` does not inherit ``layout``'s effect).
        Not normalised to sum to 1: the remainder is what interactions explain.
        """
        rows = self.candidates(seed, SENSITIVITY_SAMPLES)
        mean, _ = self.log_posterior(rows)
        total = float(np.var(mean))
        effects = {}
        for j, name in enumerate(self.encoding.names):
            active = rows[:, j] != INACTIVE
            groups = [mean[active & (rows[:, j] == k)] for k in np.unique(rows[active, j])]
            weights = np.array([len(g) for g in groups], dtype=float) / len(mean)
            means = np.array([g.mean() for g in groups])
            centre = np.sum(weights * means) / np.sum(weights)
            between = float(np.sum(weights * (means - centre) ** 2))
            effects[name] = between / total if total > 0 else 0.0
        return effects

    def ablation_gains(self, start: Mapping[str, Any]) -> dict[str, float]:
        """Gain in posterior mean log(MB/s) of each parameter's move from ``start`` to the incumbent.

        The path starts at ``start`` (e.g. the system default) and, each step,
        moves the one parameter whose move to the incumbent's value raises the
        posterior mean most; that rise (0 when negative: a move that pays only
        with later ones) is the parameter's gain.  A parameter moves with its
        conditional children (``layout`` brings ``chunk_size``), which gain 0;
        parameters equal in both configurations, or inactive in both, gain 0.
        What impact-first tuning needs: which parameters must leave the default.
        """
        names = self.encoding.names
        goal = self.row(self.incumbent)
        moves = {n: [j for j, p in enumerate(self.encoding.params) if names[j] == n or (p.parent and names[p.parent[0]] == n)]
                 for n in names}  # a parameter moves with its conditional children

        def moved(row: np.ndarray, name: str) -> np.ndarray:
            out = row.copy()
            out[moves[name]] = goal[moves[name]]
            return self.encoding.deactivate(out[None, :])[0]

        gains = dict.fromkeys(names, 0.0)
        current = self.row(start)
        here = float(self.log_posterior(current[None, :])[0][0])
        while True:
            steps = {n: moved(current, n) for n in names}
            steps = {n: r for n, r in steps.items() if not np.array_equal(r, current)}
            if not steps:
                return gains
            means = self.log_posterior(np.array(list(steps.values())))[0]  # one prediction per step
            scores = {n: float(m) for n, m in zip(steps, means)}
            name = max(scores, key=lambda n: (scores[n], n))
            gains[name] = max(scores[name] - here, 0.0)
            current, here = steps[name], scores[name]

    def inverse_lengthscales(self) -> dict[str, float]:
        """1 / fitted lengthscale of each parameter (larger: the bandwidth changes faster along it)."""
        lengthscales = self.fit.posterior.kernel.value("lengthscale").detach().numpy()
        return {name: float(1.0 / ls) for name, ls in zip(self.encoding.names, lengthscales)}


def _check_enough(n: int, minimum: int = 2) -> None:
    if n < minimum:
        raise ConfigError(
            f"a surrogate needs at least {minimum} completed runs with a value it can model; got {n}: "
            "measure more configurations first"
        )


def common_distributions(trials) -> dict:
    """Every parameter the trials have, name-ordered, with its distribution; a parameter seen with
    two different distributions (a range that changed) is left out (see :func:`split_distributions`)."""
    return split_distributions(trials)[0]


def split_distributions(trials) -> tuple[dict, set]:
    """``(name -> distribution of the parameters every trial that has them agrees on, name-ordered;
    the names seen with two different distributions)``."""
    space: dict[str, Any] = {}
    conflicting: set[str] = set()
    for t in trials:
        for name, dist in t.distributions.items():
            if space.setdefault(name, dist) != dist:
                conflicting.add(name)
    return {n: space[n] for n in sorted(space) if n not in conflicting}, conflicting
