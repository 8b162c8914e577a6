"""Which parameters matter for this workload: impact rankings of a study's parameters.

Five views of a study's completed runs, each a dict parameter -> importance
summing to 1, most important first. PED-ANOVA and fANOVA rank the tuning
trials (default and search runs: the re-measurements would count the best
configuration again in their top 10%). The GP views model every measured
run, the walk-back's and the confirmation's too: the search moves knobs
together (a GP that proposes near its incumbent changes a file per process
and an alignment at once), and only the walk-back's interleaved runs, which
change one knob at a time, tell such knobs apart:

- ``ped-anova``: Optuna's PED-ANOVA, how the values differ in the top 10%
  of trials from all trials;
- ``fanova``: Optuna's fANOVA (a random forest's functional ANOVA);
- ``gp-sensitivity``: first-order variance-based sensitivity of iobo's GP
  surrogate (:meth:`iobo.surrogate.Surrogate.main_effects`);
- ``gp-lengthscale``: inverse GP lengthscales (how fast bandwidth changes
  along each parameter; interactions included);
- ``gp-ablation``: what moving each parameter from the system default to
  the incumbent's value gains on the GP surrogate, along the greedy path
  between the two (:meth:`iobo.surrogate.Surrogate.ablation_gains`): the
  parameters that must leave their defaults, what impact-first tuning
  activates first.  Needs the study's default run, and an incumbent that
  differs from it.

:func:`rank_parameters` computes them, :func:`save_ranking` stores them on
the study (user attr ``importance`` and an optuna-dashboard figure), so later studies
of similar workloads in the same storage can start from them
(:func:`stored_rankings`).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from iobo.errors import ConfigError
from iobo.trials import FROZEN_ATTR, default_config, measured_trials, tuning_trials

# PED-ANOVA ranks parameters by how their values differ in the top 10% of
# trials; with 20 trials that top holds 2, the fewest it can compare.
IMPORTANCE_TOP_QUANTILE = 0.1
MIN_IMPORTANCE_TRIALS = 20
MIN_GP_TRIALS = 5  # the GP views need a few distinct configurations
METHODS = ("ped-anova", "fanova", "gp-sensitivity", "gp-lengthscale", "gp-ablation")
ROBUST_VIEWS = ("gp-ablation", "gp-sensitivity")
"""The views measured as robust to noise and inert knobs (experiments/results/impact-views.txt): the GP's ablation
first, its main effects when the ablation has nothing to say (the incumbent is the default)."""
USER_ATTR = "importance"
FIGURE_ID = "impact_ranking"
GP_FIT_ATTR = "iobo:gp_fit"  # study system attr: the GP hyperparameters fit_surrogate found, and on what
RESAMPLES = 10  # refits on random 80% subsets of the trials, for the interval of the robust view


def import_gp_libraries() -> None:
    """Import torch and gpytorch (about 1.5 s) now: ``iobo importance`` does it while a forked process opens
    the study."""
    import gpytorch  # noqa: F401
    import torch  # noqa: F401


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """Torch and BLAS on one thread: on a shared 2-core node more threads made a GP fit 4x slower."""
    import torch
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(1):
            yield
    finally:
        torch.set_num_threads(before)


@dataclass(frozen=True)
class Importance:
    """One robust importance view with its uncertainty.

    view: ``gp-ablation`` or ``gp-sensitivity``; share: parameter -> share of
    the importance (sums to 1, most important first) from the GP fitted to
    every measured run; low / high: 10th and 90th percentiles of the share
    over ``resamples`` refits on random 80% subsets of the trials (the GP's
    hyperparameters kept, conditioned on each subset), widened to hold
    ``share``;
    secondary: PED-ANOVA's shares (None with fewer than
    ``MIN_IMPORTANCE_TRIALS`` trials), shown as a second opinion; left_out:
    knobs the environment reported as never applied (not ranked).
    """

    view: str
    share: dict[str, float]
    low: dict[str, float]
    high: dict[str, float]
    resamples: int
    secondary: dict[str, float] | None = None
    left_out: tuple[str, ...] = ()

    @property
    def top(self) -> str:
        return next(iter(self.share))

    def text(self) -> str:
        lines = [f"{'parameter':24s}{self.view + ' (%)':>18s}{'10-90% of refits':>20s}{'ped-anova (%)':>16s}"]
        for name, share in self.share.items():
            secondary = f"{100 * self.secondary.get(name, 0.0):15.1f}" if self.secondary else f"{'-':>15s}"
            lines.append(f"{name:24s}{100 * share:17.1f} {100 * self.low[name]:9.1f} - {100 * self.high[name]:5.1f}"
                         f"   {secondary}")
        if self.left_out:
            lines.append(f"left out (never applied here): {', '.join(self.left_out)}")
        return "\n".join(lines)


def _gp_view(surrogate, default, left_out) -> tuple[str, dict[str, float]] | None:
    """The first robust view the surrogate has something to say in, without ``left_out`` knobs, renormalised."""
    view = ablation_view(surrogate, default)
    name = "gp-ablation"
    if view is None:
        view, name = normalised(surrogate.main_effects(0)), "gp-sensitivity"
    kept = {k: v for k, v in view.items() if k not in left_out}
    return (name, normalised(kept)) if kept else None


def robust_importance(study, resamples: int = RESAMPLES, seed: int = 0, surrogate=None,
                      ped_anova: Mapping[str, float] | None = None) -> Importance | None:
    """The GP ablation view (else its main effects) with 10-90% intervals over refits; None with fewer than
    ``MIN_GP_TRIALS`` distinct configurations. surrogate: the study's GP if already fitted; ped_anova:
    :func:`param_importances` of the study if already computed (the secondary column)."""
    import numpy as np

    from iobo.surrogate import Surrogate, TrialData

    surrogate = surrogate or fit_surrogate(study)
    if surrogate is None:
        return None
    measured = measured_trials(study)
    left_out = tuple(study.user_attrs.get(FROZEN_ATTR, {}))
    default = default_config(study.get_trials(deepcopy=False))
    with _one_thread():
        found = _gp_view(surrogate, default, left_out)
        if found is None:
            return None
        view, share = found
        rng = np.random.default_rng(seed)
        distributions = modelled_distributions(study, measured)
        draws = []
        for _ in range(resamples):
            subset = [measured[i] for i in sorted(rng.choice(len(measured), max(2, int(0.8 * len(measured))),
                                                             replace=False))]
            try:
                # the same hyperparameters, conditioned on the subset: the spread the data leave
                refit = Surrogate.from_data(TrialData.from_trials(subset, distributions),
                                            warm=surrogate.fit.posterior.theta, optimise=False)
            except ConfigError:
                continue
            again = _gp_view(refit, default, left_out) if view == "gp-ablation" else \
                (view, normalised({k: v for k, v in refit.main_effects(0).items() if k not in left_out}))
            if again is not None and again[0] == view:
                draws.append(again[1])
    # the range holds the point estimate too: refits on subsets can all land on one side of it
    low = {n: min(share[n], float(np.quantile([d.get(n, 0.0) for d in draws], 0.1))) if draws else share[n]
           for n in share}
    high = {n: max(share[n], float(np.quantile([d.get(n, 0.0) for d in draws], 0.9))) if draws else share[n]
            for n in share}
    secondary = param_importances(study) if ped_anova is None else ped_anova
    if secondary is not None:
        secondary = normalised({k: v for k, v in secondary.items() if k not in left_out})
    return Importance(view, share, low, high, len(draws), secondary, left_out)


def ablation_shares(study) -> dict[str, float] | None:
    """The GP ablation view of ``study`` alone (no intervals): what :mod:`iobo.minimize` orders its tests by."""
    surrogate = fit_surrogate(study)
    if surrogate is None:
        return None
    with _one_thread():
        return ablation_view(surrogate, default_config(study.get_trials(deepcopy=False)))


def param_importances(study, evaluator_class=None) -> dict[str, float] | None:
    """PED-ANOVA importance of each parameter for reaching the top 10% bandwidth (sums to 1).

    Computed on the completed tuning trials over the values the sampler
    proposed (the trials' params, before any constraint repair), most
    important first; None with fewer than ``MIN_IMPORTANCE_TRIALS`` of them.
    evaluator_class: Optuna's ``PedAnovaImportanceEvaluator`` as already
    imported (default: imported here, which loads scikit-learn for fANOVA: ~1.5 s).
    """
    tuning = tuning_trials(study)
    if len(tuning) < MIN_IMPORTANCE_TRIALS:
        return None
    if evaluator_class is None:
        from optuna.importance import PedAnovaImportanceEvaluator as evaluator_class

    return _optuna_importances(tuning, evaluator_class(target_quantile=IMPORTANCE_TOP_QUANTILE))


def _optuna_importances(trials, evaluator) -> dict[str, float]:
    import optuna
    from optuna.importance import get_param_importances

    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # no "new study created in memory" line
    try:
        copy = optuna.create_study(direction="maximize")
    finally:
        optuna.logging.set_verbosity(verbosity)
    copy.add_trials(trials)
    with warnings.catch_warnings():  # PED-ANOVA warns on values tried once; its column is a second opinion
        warnings.simplefilter("ignore", UserWarning)
        return get_param_importances(copy, evaluator=evaluator)


def normalised(values: Mapping[str, float]) -> dict[str, float]:
    """``values`` as shares summing to 1, largest first (equal shares when all are 0)."""
    total = sum(values.values())
    if total <= 0:
        return {name: 1.0 / len(values) for name in values}
    return dict(sorted(((n, v / total) for n, v in values.items()), key=lambda item: -item[1]))


def modelled_distributions(study, trials) -> dict:
    """The parameters the importance GP models: every one the ``trials`` have (name -> distribution),
    less the knobs the environment reported as never applied (``FROZEN_ATTR``). Those stay at their defaults
    whether or not a trial recorded them (the first run records them before the study knows), so as GP inputs
    they would only tell that first run apart from the rest."""
    from iobo.surrogate import common_distributions

    left_out = study.user_attrs.get(FROZEN_ATTR, {})
    return {n: d for n, d in common_distributions(trials).items() if n not in left_out}


def fit_surrogate(study):
    """The GP fitted to the study's measured runs (:func:`iobo.trials.measured_trials`, on one thread), or None
    with fewer than ``MIN_GP_TRIALS`` distinct configurations; pass it to :func:`rank_parameters` and
    :func:`robust_importance` to fit once.

    The fitted hyperparameters are kept on the study (system attr ``GP_FIT_ATTR``, with the trial numbers
    and inputs they were fitted on): on the same trials the next call conditions on them without refitting
    (the same posterior), on more trials it starts its fit from them.
    """
    import numpy as np

    from iobo import _compat
    from iobo.surrogate import Surrogate, TrialData, configuration_key

    measured = measured_trials(study)
    if len({configuration_key(t.params) for t in measured}) < MIN_GP_TRIALS:
        return None
    data = TrialData.from_trials(measured, modelled_distributions(study, measured))
    fitted_on = {"trials": sorted(t.number for t in data.usable), "inputs": list(data.encoding.names)}
    kept = _compat.study_system_attr(study, GP_FIT_ATTR) or {}
    warm = np.asarray(kept["theta"]) if kept.get("inputs") == fitted_on["inputs"] else None
    same = warm is not None and kept.get("trials") == fitted_on["trials"]
    with _one_thread():
        surrogate = Surrogate.from_data(data, warm, optimise=not same)
    if not same:
        _compat.set_study_system_attr(study, GP_FIT_ATTR, {**fitted_on, "theta": surrogate.fit.posterior.theta.tolist()})
    return surrogate


def rank_parameters(study, seed: int = 0, methods=METHODS, surrogate=None,
                    ped_anova: Mapping[str, float] | None = None) -> dict[str, dict[str, float]]:
    """Every view of ``methods`` that the study has enough trials for: method -> {parameter: importance}.

    surrogate: the study's GP if already fitted (:func:`fit_surrogate`);
    ped_anova: :func:`param_importances` of the study if already computed.
    fANOVA fits a random forest: the slowest view (seconds at 100 trials).
    Knobs the environment reported as never applied (study user attr
    ``FROZEN_ATTR``, e.g. striping off Lustre) are left out of every view,
    which is then renormalised: what the GP makes of them is noise.
    """
    tuning = tuning_trials(study)
    ranking: dict[str, dict[str, float]] = {}
    if len(tuning) >= MIN_IMPORTANCE_TRIALS:
        if "ped-anova" in methods:
            ranking["ped-anova"] = dict(ped_anova) if ped_anova is not None else param_importances(study)
        if "fanova" in methods:
            from optuna.importance import FanovaImportanceEvaluator

            ranking["fanova"] = _optuna_importances(tuning, FanovaImportanceEvaluator(seed=seed))
    surrogate = surrogate or fit_surrogate(study)
    if surrogate is not None and any(m.startswith("gp-") for m in methods):
        with _one_thread():
            ranking["gp-sensitivity"] = normalised(surrogate.main_effects(seed))
        ranking["gp-lengthscale"] = normalised(surrogate.inverse_lengthscales())
        ablation = ablation_view(surrogate, default_config(study.get_trials(deepcopy=False)))
        if ablation is not None:
            ranking["gp-ablation"] = ablation
    left_out = study.user_attrs.get(FROZEN_ATTR, {})
    kept = {m: {k: v for k, v in view.items() if k not in left_out} for m, view in ranking.items()}
    return {m: normalised(view) for m, view in kept.items() if view}


def ablation_view(surrogate, default: Mapping | None) -> dict[str, float] | None:
    """The ``gp-ablation`` view: ``surrogate``'s ablation gains from ``default`` to its incumbent, as shares;
    None without a default or when the incumbent gains nothing over it (nothing had to move)."""
    gains = surrogate.ablation_gains(default) if default is not None else {}
    return normalised(gains) if sum(gains.values()) > 0 else None


def consensus(ranking: Mapping[str, Mapping[str, float]]) -> list[str]:
    """Parameters ordered by their mean importance over the views, most important first."""
    if not ranking:
        raise ConfigError("no importance view to combine: the study needs at least "
                          f"{MIN_GP_TRIALS} distinct completed configurations; run more trials")
    names = {n for view in ranking.values() for n in view}
    mean = {n: sum(view.get(n, 0.0) for view in ranking.values()) / len(ranking) for n in names}
    return sorted(names, key=lambda n: (-mean[n], n))


def impact_order(rankings: list[Mapping[str, Mapping[str, float]]]) -> list[str]:
    """Parameters for impact-first tuning from earlier studies' rankings, the first to activate first.

    By the mean ``gp-ablation`` importance over the rankings that have one
    (what moving a parameter off its default gained), ties (parameters the
    earlier incumbents left at their defaults) in the :func:`consensus` order
    of every view; without any ablation view, that consensus order.
    """
    views = {f"{i}:{method}": view for i, ranking in enumerate(rankings) for method, view in ranking.items()}
    order = consensus(views)
    ablation = [ranking["gp-ablation"] for ranking in rankings if "gp-ablation" in ranking]
    if not ablation:
        return order
    gain = {n: sum(view.get(n, 0.0) for view in ablation) / len(ablation) for n in order}
    return sorted(order, key=lambda n: (-gain[n], order.index(n)))


def ranking_text(ranking: Mapping[str, Mapping[str, float]]) -> str:
    """A table: one parameter a line (consensus order), one column per view, importances in %."""
    if not ranking:
        return (f"no ranking yet: the GP views need {MIN_GP_TRIALS} distinct completed configurations, "
                f"PED-ANOVA and fANOVA {MIN_IMPORTANCE_TRIALS} completed tuning trials")
    methods = [m for m in METHODS if m in ranking]
    lines = [f"{'parameter':24s}" + "".join(f"{m:>16s}" for m in methods)]
    for name in consensus(ranking):
        lines.append(f"{name:24s}" + "".join(f"{100 * ranking[m].get(name, 0.0):15.1f}%" for m in methods))
    return "\n".join(lines)


def save_ranking(study, ranking: Mapping[str, Mapping[str, float]]) -> None:
    """Store ``ranking`` on the study: user attr ``importance`` and a grouped bar chart for optuna-dashboard
    (figure id ``FIGURE_ID``, plotly's JSON written directly; the study's note is left to the report)."""
    import json

    from iobo import _compat

    study.set_user_attr(USER_ATTR, {m: dict(v) for m, v in ranking.items()})
    robust = next((ranking[v] for v in ROBUST_VIEWS if v in ranking), None)
    order = list(robust) if robust else (consensus(ranking) if ranking else [])
    figure = {
        "data": [{"type": "bar", "name": m, "orientation": "h", "y": order,
                  "x": [100 * ranking[m].get(n, 0.0) for n in order]} for m in METHODS if m in ranking],
        "layout": {"title": {"text": "parameter impact (% of importance, per view)"}, "barmode": "group",
                   "yaxis": {"autorange": "reversed"}, "xaxis": {"title": {"text": "%"}}},
    }
    _compat.save_dashboard_figure(study, json.dumps(figure), FIGURE_ID)


def stored_rankings(storage, kernel: str, exclude: str | None = None) -> list[dict[str, dict[str, float]]]:
    """Rankings saved by earlier studies of ``kernel`` in ``storage`` (a URL or storage object)."""
    import optuna

    found = []
    for summary in optuna.get_all_study_summaries(storage, include_best_trial=False):
        attrs = summary.user_attrs
        if summary.study_name != exclude and attrs.get("kernel") == kernel and attrs.get(USER_ATTR):
            found.append(attrs[USER_ATTR])
    return found
