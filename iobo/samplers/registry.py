"""Samplers by their command-line name (``iobo tune --sampler NAME``).

- ``gp``: iobo's GP sampler (:class:`iobo.samplers.GPSampler`), the default;
- ``impact-first``: tune the highest-impact parameters first
  (:class:`iobo.samplers.ImpactFirstSampler`), ranked by earlier studies of
  the same kernel in the storage (``iobo importance``) or by a short screening;
- ``tpe``: Optuna's multivariate TPE with the constant liar (several trials in flight);
- ``random``: Optuna's random sampler.
"""

from __future__ import annotations

import math

from iobo.errors import ConfigError

SAMPLERS = ("gp", "impact-first", "tpe", "random")
TPE_STARTUP_TRIALS = 5
WARM_STARTUP_TRIALS = 2  # with a prior mean: the GP proposes once the default and one other configuration ran
IDENTIFY_SHARE = 0.4  # of a trial budget: the last share, where the space is covered, tells the best few apart


def identify_from(trials: int | None) -> int:
    """The run from which ``gp`` with a budget of ``trials`` runs spends the last ``IDENTIFY_SHARE`` of it
    telling its best few configurations apart (``GPSampler(identify_from=...)``; 0 without a budget: never)."""
    return max(1, math.ceil((1 - IDENTIFY_SHARE) * trials)) if trials else 0


def make_sampler(name: str = "gp", seed: int = 0, *, storage=None, kernel: str | None = None,
                 study: str | None = None, prior_mean=None, trials: int | None = None):
    """The sampler called ``name``, seeded with ``seed``.

    ``impact-first`` takes its prior ranking from the rankings that earlier
    studies of ``kernel`` saved in ``storage`` (study ``study`` excluded);
    with none saved (or no storage given), it screens first.  ``gp`` takes
    ``prior_mean`` (a warm start's :class:`iobo.transfer.TransferModel`, see
    :class:`iobo.samplers.GPSampler`) and then models from its second
    distinct configuration (``WARM_STARTUP_TRIALS``) instead of after a hypercube.  Given the study's budget
    of ``trials`` runs, ``gp`` spends its last ``IDENTIFY_SHARE`` telling the best few configurations apart
    (:func:`identify_from`), where the runs cover the space.
    """
    import optuna

    if name == "gp":
        from iobo.samplers import GPSampler

        if prior_mean is not None:
            return GPSampler(seed=seed, prior_mean=prior_mean, n_startup_trials=WARM_STARTUP_TRIALS,
                             identify_from=identify_from(trials))
        return GPSampler(seed=seed, identify_from=identify_from(trials))
    if name == "impact-first":
        from iobo.importance import impact_order, stored_rankings
        from iobo.samplers import ImpactFirstSampler
        from iobo.storage import open_storage

        rankings = stored_rankings(open_storage(storage), kernel, exclude=study) if storage and kernel else []
        return ImpactFirstSampler(seed=seed, prior_ranking=impact_order(rankings) if rankings else None)
    if name == "tpe":
        return optuna.samplers.TPESampler(multivariate=True, constant_liar=True, seed=seed,
                                          n_startup_trials=TPE_STARTUP_TRIALS)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    raise ConfigError(f"sampler {name!r} is unknown; allowed: {', '.join(SAMPLERS)}")
