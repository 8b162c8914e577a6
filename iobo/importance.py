"""Which parameters matter for this workload: impact rankings of a study's parameters.

Five views of the completed tuning trials (default and search runs; the
re-measurements would count the best configuration again), each a dict
parameter -> importance summing to 1, most important first:

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

from collections.abc import Mapping

from iobo.errors import ConfigError
from iobo.trials import default_config, tuning_trials

# PED-ANOVA ranks parameters by how their values differ in the top 10% of
# trials; with 20 trials that top holds 2, the fewest it can compare.
IMPORTANCE_TOP_QUANTILE = 0.1
MIN_IMPORTANCE_TRIALS = 20
MIN_GP_TRIALS = 5  # the GP views need a few distinct configurations
METHODS = ("ped-anova", "fanova", "gp-sensitivity", "gp-lengthscale", "gp-ablation")
USER_ATTR = "importance"
FIGURE_ID = "impact_ranking"


def param_importances(study) -> dict[str, float] | None:
    """PED-ANOVA importance of each parameter for reaching the top 10% bandwidth (sums to 1).

    Computed on the completed tuning trials over the values the sampler
    proposed (the trials' params, before any constraint repair), most
    important first; None with fewer than ``MIN_IMPORTANCE_TRIALS`` of them.
    """
    from optuna.importance import PedAnovaImportanceEvaluator

    tuning = tuning_trials(study)
    if len(tuning) < MIN_IMPORTANCE_TRIALS:
        return None
    return _optuna_importances(tuning, PedAnovaImportanceEvaluator(target_quantile=IMPORTANCE_TOP_QUANTILE))


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
    return get_param_importances(copy, evaluator=evaluator)


def normalised(values: Mapping[str, float]) -> dict[str, float]:
    """``values`` as shares summing to 1, largest first (equal shares when all are 0)."""
    total = sum(values.values())
    if total <= 0:
        return {name: 1.0 / len(values) for name in values}
    return dict(sorted(((n, v / total) for n, v in values.items()), key=lambda item: -item[1]))


def rank_parameters(study, seed: int = 0) -> dict[str, dict[str, float]]:
    """Every view of ``METHODS`` that the study has enough trials for: method -> {parameter: importance}."""
    from optuna.importance import FanovaImportanceEvaluator

    from iobo.surrogate import Surrogate

    tuning = tuning_trials(study)
    ranking: dict[str, dict[str, float]] = {}
    if len(tuning) >= MIN_IMPORTANCE_TRIALS:
        ranking["ped-anova"] = param_importances(study)
        ranking["fanova"] = _optuna_importances(tuning, FanovaImportanceEvaluator(seed=seed))
    if len({tuple(sorted(map(repr, t.params.items()))) for t in tuning}) >= MIN_GP_TRIALS:
        surrogate = Surrogate.from_trials(tuning)
        ranking["gp-sensitivity"] = normalised(surrogate.main_effects(seed))
        ranking["gp-lengthscale"] = normalised(surrogate.inverse_lengthscales())
        ablation = ablation_view(surrogate, default_config(study.get_trials(deepcopy=False)))
        if ablation is not None:
            ranking["gp-ablation"] = ablation
    return ranking


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
    (figure id ``FIGURE_ID``; the study's note is left to the report)."""
    import plotly.graph_objects as go
    from optuna_dashboard import save_plotly_graph_object

    study.set_user_attr(USER_ATTR, {m: dict(v) for m, v in ranking.items()})
    order = consensus(ranking) if ranking else []
    figure = go.Figure(
        [go.Bar(name=m, x=[100 * ranking[m].get(n, 0.0) for n in order], y=order, orientation="h")
         for m in METHODS if m in ranking],
        layout={"title": "parameter impact (% of importance, per view)", "barmode": "group",
                "yaxis": {"autorange": "reversed"}, "xaxis": {"title": "%"}},
    )
    save_plotly_graph_object(study, figure, graph_object_id=FIGURE_ID)


def stored_rankings(storage, kernel: str, exclude: str | None = None) -> list[dict[str, dict[str, float]]]:
    """Rankings saved by earlier studies of ``kernel`` in ``storage`` (a URL or storage object)."""
    import optuna

    found = []
    for summary in optuna.get_all_study_summaries(storage, include_best_trial=False):
        attrs = summary.user_attrs
        if summary.study_name != exclude and attrs.get("kernel") == kernel and attrs.get(USER_ATTR):
            found.append(attrs[USER_ATTR])
    return found
