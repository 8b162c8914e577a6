"""A prior mean for :class:`~iobo.samplers.GPSampler`: another model's prediction, trusted as far as the study's
own runs bear it out.

The prior mean ``m(x)`` is a model's prediction of the modelled value up to a
constant (for a warm start, :class:`iobo.transfer.TransferModel`: the
``log(speedup)`` earlier studies predict at the new context; the constant,
``log`` of the new baseline, is learned by the GP's own constant mean).  At
each fit the sampler's GP models the residual ``y - w m(x)`` of the study's
modelled values ``y`` (``log(MB/s)``), and its posterior mean is
``w m(x)`` plus the residual GP's mean, so the acquisition and the incumbent
see both.

The weight ``w`` in [0, 1] is re-estimated at each fit (:func:`prior_weight`):
the posterior mean of the slope ``b`` in ``y = c + b m(x) + noise`` over the
study's completed runs that ``m`` rates at or above their median, with the prior ``b ~ N(1, PRIOR_SLOPE_SD^2)`` and a
noise of ``NOISE_SD`` (log units), clipped to [0, 1].  Before the runs tell
``m``'s values apart ``w`` is 1 (the model is trusted); when the
configurations ``m`` ranks high measure no better than the others, the
slope, and with it ``w``, falls towards 0 within a few runs and the sampler
is the plain GP again: a wrong prior costs the few runs it takes to see it.

Used for a maximised objective modelled as ``log(value)`` only; otherwise
the prior is left out (``w`` None).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

import numpy as np

from iobo.surrogate import Surrogate, TrialData, configuration_key

PRIOR_SLOPE_SD = 0.5  # prior sd of the slope of the measured values on the prior mean (prior centre: 1)
MIN_TOP = 3  # runs rated at or above the median that the weight is estimated from (else from all runs)
NOISE_SD = 0.2  # sd (log units) of a run around the line: run-to-run noise plus what m(x) cannot know


class PriorMean(Protocol):
    """What the sampler needs of a prior mean."""

    def predict(self, params: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """Predicted modelled value (``log(value)`` up to a constant; larger is better) of each of ``n``
        configurations (``name -> value``; a parameter it does not know is ignored, one missing is at its
        default): an array of ``n`` floats."""


def prior_weight(prior: np.ndarray, targets: np.ndarray) -> float:
    """``w``: the slope of ``targets`` (``n``, log units) on ``prior`` (``n``) shrunk towards 1, in [0, 1].

    Over the runs ``prior`` rates at or above their median (at least ``MIN_TOP`` of them; else over all): the
    configurations the decision is between.  A model that only tells the bad from the good (a shared file
    from a file per process) but ranks the good ones wrongly would misguide the search among them.
    """
    top = prior >= np.median(prior)
    if top.sum() >= MIN_TOP:
        prior, targets = prior[top], targets[top]
    m = prior - prior.mean()
    y = targets - targets.mean()
    shrink = (NOISE_SD / PRIOR_SLOPE_SD) ** 2  # the prior's weight, in units of sum((m - mean m)^2)
    slope = (float(m @ y) + shrink) / (float(m @ m) + shrink)
    return min(max(slope, 0.0), 1.0)


class WeightedPrior:
    """A :class:`PriorMean` in the sampler's fits; ``weight``: its ``w`` at the last fit (None: not used)."""

    def __init__(self, prior: PriorMean) -> None:
        self.prior = prior
        self.weight: float | None = None
        self._values: dict[tuple, float] = {}  # configuration key -> m(x), the prior's predictions so far

    def fit(self, data: TrialData, fit: Callable[[TrialData], Surrogate]) -> Surrogate:
        """``fit`` (data -> Surrogate) applied to the residual of ``data``, with ``w m(x)`` added back to the
        fitted posterior mean."""
        if not data.log or data.sign < 0 or not len(data.targets):
            self.weight = None
            return fit(data)
        encoding = data.encoding
        w = self.weight = prior_weight(self.at_rows(encoding, data.rows), data.targets)
        surrogate = fit(replace(data, targets=data.targets - w * self.at_rows(encoding, data.rows)))
        fitted = surrogate.fit
        offset = lambda slots: w * self.at_slots(encoding, slots) / fitted.scale  # noqa: E731  (standardised)
        fitted = replace(fitted, mean=fitted.mean + w * self.at_rows(encoding, fitted.rows),
                         posterior=_ShiftedPosterior(fitted.posterior, offset))
        return replace(surrogate, fit=fitted, data=data)

    def at_rows(self, encoding, rows: np.ndarray) -> np.ndarray:
        """``m(x)`` at index rows (``n x p``): ``n``."""
        configs = [encoding.to_config(row) for row in np.asarray(rows).tolist()]
        keys = [configuration_key(c) for c in configs]
        new = {k: c for k, c in zip(keys, configs) if k not in self._values}
        if new:
            self._values.update(zip(new, np.asarray(self.prior.predict(list(new.values())), dtype=float).tolist()))
        return np.array([self._values[k] for k in keys], dtype=float)

    def at_slots(self, encoding, slots) -> np.ndarray:
        """``m(x)`` at the GP's inputs (``n x (p + ratios)``, :meth:`Encoding.slots`): ``n``."""
        slots = np.asarray(slots, dtype=np.int64)[:, : len(encoding.params)]
        inactive = np.array([len(p.choices) for p in encoding.params], dtype=np.int64)
        return self.at_rows(encoding, np.where(slots == inactive, -1, slots))


class _ShiftedPosterior:
    """A GP posterior (:class:`iobo._gp.model.Posterior`) with ``offset(slots)`` added to its mean."""

    def __init__(self, base, offset: Callable[[np.ndarray], np.ndarray]) -> None:
        self.base, self.offset = base, offset

    def __getattr__(self, name: str):  # theta, kernel, noise_variance...: the base's
        if name == "base":  # not set yet (a copy being made)
            raise AttributeError(name)
        return getattr(self.base, name)

    def predict(self, xc, batch: int = 1024) -> tuple[np.ndarray, np.ndarray]:
        mean, variance = self.base.predict(xc, batch)
        return mean + self.offset(np.asarray(xc)), variance

    def with_fantasies(self, xp: np.ndarray) -> "_ShiftedPosterior":
        return _ShiftedPosterior(self.base.with_fantasies(xp), self.offset)
