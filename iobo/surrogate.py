"""The GP of :mod:`iobo._gp` fitted to measured configurations, read for decisions.

The sampler fits the GP to choose the next configuration; the stop rule and
the impact ranking need two other readings of the same model:

- :meth:`Surrogate.expected_gain_mb_per_s`: the largest expected improvement,
  in MB/s, that one more configuration could bring over the incumbent;
- :meth:`Surrogate.main_effects`: the share of the surrogate's variance each
  parameter explains alone (first-order, variance-based sensitivity);
- :meth:`Surrogate.ablation_gains`: what each parameter's move from a start
  configuration (the system default) to the incumbent's value gains, in
  log(MB/s), along the greedy path between the two (surrogate-based
  ablation analysis, Fawcett & Hoos 2016; Biedenkapp et al. 2017).

The GP models ``log(MB/s)``; with ``f ~ N(m, s^2)`` there, the improvement
of ``exp(f)`` over an incumbent ``b`` (MB/s) has the lognormal closed form
``E[max(e^f - b, 0)] = e^(m + s^2/2) Phi((m + s^2 - ln b) / s) - b Phi((m - ln b) / s)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from iobo.errors import ConfigError
from iobo._gp.encoding import INACTIVE, Encoding, infer_conditions
from iobo.space import SIZE_RATIOS

MAX_CANDIDATES = 20_000  # larger spaces are scored on a seeded random sample of this many configurations


@dataclass(frozen=True)
class Surrogate:
    """A fitted GP over ``encoding`` with the rows it was fitted to.

    fit: the :class:`iobo._gp.propose.Fit`; measured: index rows measured so far (``n x p``).
    """

    encoding: Encoding
    fit: Any
    measured: np.ndarray

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
        """Fit to measured ``configs`` and their bandwidths (MB/s, positive).

        choices: parameter -> allowed values; conditions: parameter -> (parent,
        activating value), inferred from the configs when omitted; warm: the
        hyperparameters of an earlier fit (``surrogate.fit.posterior.theta``);
        ratios: parameter pairs modelled through their ratio too, as the
        sampler does (:class:`iobo.samplers.GPSampler`).
        """
        from iobo._gp.propose import fit

        pairs = [(c, v) for c, v in zip(configs, mb_per_s) if v is not None and math.isfinite(v) and v > 0]
        if len(pairs) < 2:
            raise ConfigError(
                f"a surrogate needs at least 2 runs with a positive bandwidth; got {len(pairs)}: "
                "measure more configurations first"
            )
        names = list(choices)
        if conditions is None:
            conditions = infer_conditions(names, [c for c, _ in pairs])
        encoding = Encoding({n: tuple(choices[n]) for n in names}, conditions, ratios)
        rows = np.array([encoding.to_row({n: v for n, v in c.items() if n in choices}) for c, _ in pairs])
        log_values = np.log([v for _, v in pairs])
        return cls(encoding, fit(encoding, rows, log_values, warm), rows)

    @classmethod
    def from_trials(cls, trials, warm: np.ndarray | None = None) -> "Surrogate":
        """Fit to Optuna ``FrozenTrial`` s (COMPLETE ones with a positive value; categorical params)."""
        from optuna.distributions import CategoricalDistribution

        usable = [t for t in trials if t.state.name == "COMPLETE" and t.value is not None and t.value > 0]
        choices: dict[str, tuple] = {}
        for t in usable:
            for name, dist in t.distributions.items():
                if isinstance(dist, CategoricalDistribution):
                    choices.setdefault(name, tuple(dist.choices))
        choices = {n: choices[n] for n in sorted(choices)}
        return cls.from_runs(choices, [t.params for t in usable], [t.value for t in usable], warm=warm)

    # -- readings ----------------------------------------------------------------
    def candidates(self, seed: int = 0) -> np.ndarray:
        """Every configuration as index rows, or a seeded sample of ``MAX_CANDIDATES`` of a large space."""
        if self.encoding.size() <= MAX_CANDIDATES:
            return self.encoding.enumerate()
        return np.unique(self.encoding.random(MAX_CANDIDATES, np.random.default_rng(seed)), axis=0)

    def log_posterior(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and variance of ``log(MB/s)`` of the true value at ``rows``."""
        mean, variance = self.fit.posterior.predict(self.encoding.slots(rows))
        return self.fit.shift + self.fit.scale * mean, self.fit.scale**2 * variance

    @property
    def incumbent(self) -> dict[str, Any]:
        """The measured configuration with the best posterior mean (its active parameters)."""
        return self.encoding.to_config(self.fit.rows[self.fit.best])

    @property
    def incumbent_mb_per_s(self) -> float:
        """The measured configuration with the best posterior mean: its geometric-mean bandwidth (MB/s)."""
        return float(math.exp(self.fit.mean[self.fit.best]))

    def expected_gain_mb_per_s(self, seed: int = 0) -> float:
        """Largest expected improvement (MB/s) over the incumbent of one unmeasured configuration."""
        from scipy.stats import norm

        rows = self.candidates(seed)
        measured = {tuple(r) for r in self.measured.tolist()}
        rows = np.array([r for r in rows.tolist() if tuple(r) not in measured])
        if rows.size == 0:
            return 0.0
        m, v = self.log_posterior(rows)
        s = np.sqrt(np.maximum(v, 1e-18))
        log_b = math.log(self.incumbent_mb_per_s)
        gain = np.exp(m + v / 2) * norm.cdf((m + v - log_b) / s) - math.exp(log_b) * norm.cdf((m - log_b) / s)
        return float(max(gain.max(), 0.0))

    def main_effects(self, seed: int = 0) -> dict[str, float]:
        """First-order sensitivity of the posterior mean of ``log(MB/s)`` to each parameter.

        For parameter ``j``: the variance over its values of the mean
        prediction at that value (the others averaged over the candidates),
        divided by the total variance of the predictions.  A conditional
        parameter is compared over the candidates where it is active, weighted
        by their share (``chunk_size`` does not inherit ``layout``'s effect).
        Not normalised to sum to 1: the remainder is what interactions explain.
        """
        rows = self.candidates(seed)
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
        goal = self.incumbent
        current = {n: v for n, v in start.items() if n in self.encoding.names}
        names = self.encoding.names
        children = {n: [p.name for p in self.encoding.params if p.parent and names[p.parent[0]] == n] for n in names}

        def moved(config: dict[str, Any], name: str) -> dict[str, Any]:
            out = dict(config)
            for n in (name, *children[name]):
                out.pop(n, None)
                if n in goal:
                    out[n] = goal[n]
            return out

        def log_mean(config: dict[str, Any]) -> float:
            return float(self.log_posterior(self.encoding.to_row(config)[None, :])[0][0])

        gains = dict.fromkeys(self.encoding.names, 0.0)
        here = log_mean(current)
        while True:
            row = self.encoding.to_row(current)
            steps = {n: moved(current, n) for n in self.encoding.names}
            steps = {n: c for n, c in steps.items() if not np.array_equal(self.encoding.to_row(c), row)}
            if not steps:
                return gains
            scores = {n: log_mean(c) for n, c in steps.items()}
            name = max(scores, key=lambda n: (scores[n], n))
            gains[name] = max(scores[name] - here, 0.0)
            current, here = steps[name], scores[name]

    def inverse_lengthscales(self) -> dict[str, float]:
        """1 / fitted lengthscale of each parameter (larger: the bandwidth changes faster along it)."""
        lengthscales = self.fit.posterior.kernel.value("lengthscale").detach().numpy()
        return {name: float(1.0 / ls) for name, ls in zip(self.encoding.names, lengthscales)}
