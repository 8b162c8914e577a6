"""Impact ranking recovers the parameters that matter in a synthetic study where they are known."""

import math

import numpy as np
import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import create_trial

from iobo.cli import main
from iobo.importance import (
    METHODS,
    consensus,
    fit_surrogate,
    impact_order,
    rank_parameters,
    robust_importance,
    save_ranking,
    stored_rankings,
)
from iobo.trials import FROZEN_ATTR

CHOICES = {
    "stripes": (1, 2, 4, 8, 16),          # strong: x8 across its range
    "cb_buffer_size": (1, 4, 16, 64),     # medium: x2
    "sieve": (1, 2, 4, 8),                # no effect
    "meta_block": ("a", "b", "c"),        # no effect
    "mdc": (1, 2, 4, 8),                  # no effect
}


def bandwidth(config: dict, rng: np.random.Generator) -> float:
    """Log-additive truth: only ``stripes`` and ``cb_buffer_size`` matter; 5% noise."""
    log_bw = math.log(100.0) + 0.52 * math.log2(config["stripes"]) + 0.17 * math.log2(config["cb_buffer_size"])
    return math.exp(log_bw + 0.05 * rng.standard_normal())


DEFAULT = {"stripes": 1, "cb_buffer_size": 1, "sieve": 1, "meta_block": "a", "mdc": 1}


def synthetic_study(storage=None, name="synthetic", trials=40, seed=0, default=DEFAULT):
    """A default run (``default``; None: none), then random search runs: ``trials`` in all."""
    rng = np.random.default_rng(seed)
    study = optuna.create_study(storage=storage, study_name=name, direction="maximize")
    study.set_user_attr("kernel", "vpic")
    distributions = {n: CategoricalDistribution(c) for n, c in CHOICES.items()}
    for i in range(trials):
        config = {n: c[rng.integers(len(c))] for n, c in CHOICES.items()}
        role = "default" if i == 0 and default is not None else "search"
        config = dict(default) if role == "default" else config
        study.add_trial(create_trial(params=config, distributions=distributions, value=bandwidth(config, rng),
                                     user_attrs={"role": role}))
    return study


def test_every_view_ranks_the_influential_parameters_first():
    ranking = rank_parameters(synthetic_study())
    assert set(ranking) == set(METHODS)
    for method, importances in ranking.items():
        assert sum(importances.values()) == pytest.approx(1.0), method
        assert list(importances)[0] == "stripes", (method, importances)
    assert consensus(ranking)[:2] == ["stripes", "cb_buffer_size"]
    # the GP's variance-based view puts almost all the variance on the two that matter
    gp = ranking["gp-sensitivity"]
    assert gp["stripes"] + gp["cb_buffer_size"] > 0.9


def test_ablation_ranks_only_what_must_leave_the_default():
    # the default already has the strongest parameter at its best value: only cb_buffer_size must move
    ranking = rank_parameters(synthetic_study(default={**DEFAULT, "stripes": 16}))
    assert list(ranking["gp-sensitivity"])[0] == "stripes"
    ablation = ranking["gp-ablation"]
    assert list(ablation)[0] == "cb_buffer_size" and ablation["cb_buffer_size"] > 0.8, ablation
    assert ablation["stripes"] < 0.05, ablation


def test_ablation_needs_a_default_run():
    assert "gp-ablation" not in rank_parameters(synthetic_study(default=None))


def test_few_trials_give_only_the_gp_views_then_none():
    assert set(rank_parameters(synthetic_study(trials=8))) == {"gp-sensitivity", "gp-lengthscale", "gp-ablation"}
    assert rank_parameters(synthetic_study(trials=3)) == {}


def test_ranking_is_deterministic_with_a_seed():
    assert rank_parameters(synthetic_study(), seed=1) == rank_parameters(synthetic_study(), seed=1)


def test_saved_ranking_is_found_by_later_studies_and_printed_by_the_cli(storage, capsys):
    first = synthetic_study(storage, "first")
    save_ranking(first, rank_parameters(first))
    synthetic_study(storage, "second", trials=2)
    found = stored_rankings(storage, "vpic", exclude="second")
    assert len(found) == 1 and consensus(found[0])[0] == "stripes"
    assert stored_rankings(storage, "ior") == []

    assert main(["importance", "--storage", storage, "--study", "first"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:2] == ["parameter", "gp-ablation"]  # the robust view first, PED-ANOVA second
    assert lines[1].split()[0] == "stripes"
    parts = lines[1].split()
    share, low, high = float(parts[1]), float(parts[2]), float(parts[4])
    assert low <= share <= high  # with its 10-90% range over refits
    assert main(["importance", "--storage", storage, "--study", "first", "--all-views"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert ["parameter", *METHODS] in [line.split() for line in lines]


def test_robust_importance_leaves_out_knobs_that_cannot_apply(storage):
    study = synthetic_study(storage, "frozen")
    study.set_user_attr(FROZEN_ATTR, {"stripes": "not Lustre"})
    importance = robust_importance(study)
    assert "stripes" not in importance.share and importance.left_out == ("stripes",)
    assert sum(importance.share.values()) == pytest.approx(1.0)
    assert importance.top == "cb_buffer_size"


def test_every_stored_view_leaves_out_knobs_that_cannot_apply(storage):
    """The ranking ``iobo importance`` stores (and draws on the dashboard) has no view that ranks a knob the
    environment reported as not applied, even one the GP would credit."""
    study = synthetic_study(storage, "frozen-views")
    assert all(list(view)[0] == "stripes" for view in rank_parameters(study).values())  # it would lead every view
    study.set_user_attr(FROZEN_ATTR, {"stripes": "not Lustre"})
    ranking = rank_parameters(study)
    assert set(ranking) == set(METHODS)
    for method, view in ranking.items():
        assert "stripes" not in view and sum(view.values()) == pytest.approx(1.0), method
    assert ranking["gp-ablation"] and list(ranking["gp-ablation"])[0] == "cb_buffer_size"


def test_the_gp_does_not_model_a_frozen_knob_that_only_the_first_run_recorded(storage):
    """The first run of a study records a knob before the study knows it cannot apply; every later run leaves it
    out. As a GP input it would only tell that run from the rest, so the importance GP does not model it."""
    study = synthetic_study(storage, "first-run-only")
    first = study.trials[0]
    study.add_trial(create_trial(
        params={**first.params, "striping_unit": None},
        distributions={**first.distributions, "striping_unit": CategoricalDistribution((None, 1 << 20))},
        value=first.value, user_attrs={"role": "default"}))
    assert "striping_unit" in fit_surrogate(study).encoding.names  # modelled while nothing says it cannot apply
    study.set_user_attr(FROZEN_ATTR, {"striping_unit": "not Lustre"})
    assert "striping_unit" not in fit_surrogate(study).encoding.names
    assert "striping_unit" not in robust_importance(study).share


def test_the_walk_back_runs_tell_apart_knobs_the_search_moved_together(storage):
    """The search changed ``files`` and ``align`` together (a GP near its incumbent does); only ``files`` acts
    (1.6x). The walk-back's runs change one at a time, and the GP views model them: ``files`` leads."""
    rng = np.random.default_rng(3)
    choices = {"files": ("shared", "per_process"), "align": (1, 16), "sieve": (1, 2, 4)}
    distributions = {n: CategoricalDistribution(c) for n, c in choices.items()}
    study = optuna.create_study(storage=storage, study_name="confounded", direction="maximize")

    def run(config, role):
        value = (1600.0 if config["files"] == "per_process" else 1000.0) * math.exp(0.1 * rng.standard_normal())
        study.add_trial(create_trial(params=config, distributions=distributions, value=value,
                                     user_attrs={"role": role}))

    for _ in range(3):
        run({"files": "shared", "align": 1, "sieve": 1}, "default")
    for i in range(20):  # files and align always moved together
        moved = i % 3 != 0
        run({"files": "per_process" if moved else "shared", "align": 16 if moved else 1,
             "sieve": int(rng.choice(choices["sieve"]))}, "search")
    searched = robust_importance(study)
    assert set(list(searched.share)[:2]) == {"files", "align"}  # the search alone cannot tell them apart
    for _ in range(6):  # the walk-back: files reverted, then align reverted
        run({"files": "shared", "align": 16, "sieve": 1}, "minimize")
        run({"files": "per_process", "align": 1, "sieve": 1}, "minimize")
        run({"files": "per_process", "align": 16, "sieve": 1}, "minimize")
    importance = robust_importance(study)
    assert importance.top == "files" and importance.share["files"] > 0.8, importance.share
    assert "files" in rank_parameters(study, methods=("gp-ablation",))["gp-ablation"]


def test_impact_order_activates_what_left_the_default_first_then_the_consensus():
    earlier = {"gp-ablation": {"a": 0.9, "b": 0.1, "c": 0.0, "d": 0.0},
               "gp-sensitivity": {"d": 0.5, "a": 0.3, "c": 0.15, "b": 0.05}}
    assert impact_order([earlier]) == ["a", "b", "d", "c"]
    without = {"gp-sensitivity": earlier["gp-sensitivity"]}
    assert impact_order([without]) == ["d", "a", "c", "b"]
    # the ablation gains are averaged over the earlier studies that have them
    other = {"gp-ablation": {"a": 0.0, "b": 0.0, "c": 1.0, "d": 0.0}}
    assert impact_order([earlier, other, without])[:2] == ["c", "a"]


def test_the_importance_range_holds_its_point_estimate_and_draws_as_a_png(storage, tmp_path):
    from iobo import plots

    importance = robust_importance(synthetic_study(storage, "range"))
    assert all(importance.low[n] <= importance.share[n] <= importance.high[n] for n in importance.share)
    path = plots.save_png(plots.importance_chart(importance), tmp_path / "importance.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_fitted_gp_is_kept_on_the_study_and_reused_only_on_the_same_trials(storage):
    from iobo import _compat
    from iobo.importance import GP_FIT_ATTR, fit_surrogate

    study = synthetic_study(storage, "kept", trials=30)
    assert _compat.study_system_attr(study, GP_FIT_ATTR) is None
    first = fit_surrogate(study)
    kept = _compat.study_system_attr(study, GP_FIT_ATTR)
    assert kept["trials"] == list(range(30)) and kept["theta"] == first.fit.posterior.theta.tolist()

    again = fit_surrogate(optuna.load_study(study_name="kept", storage=storage))  # another process's view
    assert np.array_equal(again.fit.posterior.theta, first.fit.posterior.theta)
    assert np.allclose(again.log_posterior(again.measured)[0], first.log_posterior(first.measured)[0])

    more = optuna.load_study(study_name="kept", storage=storage)
    rng = np.random.default_rng(1)
    for _ in range(5):  # 5 more search runs
        config = {n: c[rng.integers(len(c))] for n, c in CHOICES.items()}
        more.add_trial(create_trial(params=config, value=bandwidth(config, rng), user_attrs={"role": "search"},
                                    distributions={n: CategoricalDistribution(c) for n, c in CHOICES.items()}))
    refit = fit_surrogate(more)
    assert _compat.study_system_attr(more, GP_FIT_ATTR)["trials"] == list(range(35))
    assert not np.array_equal(refit.fit.posterior.theta, first.fit.posterior.theta)  # fitted again, from the kept one


def test_the_stored_ranking_figure_is_read_back_by_optuna_dashboard(storage):
    """save_ranking writes the figure without importing optuna_dashboard; the dashboard's own reader finds it,
    the robust view's order on the bars, and a shorter figure saved again leaves no stale text behind."""
    import json

    from optuna_dashboard._custom_plot_data import get_plotly_graph_objects

    from iobo import _compat
    from iobo.importance import FIGURE_ID

    study = synthetic_study(storage, "figure")
    ranking = rank_parameters(study)
    save_ranking(study, ranking)
    attrs = study._storage.get_study_system_attrs(study._study_id)
    figure = json.loads(get_plotly_graph_objects(attrs)[FIGURE_ID])
    assert [bars["name"] for bars in figure["data"]] == [m for m in METHODS if m in ranking]
    assert all(bars["y"] == list(ranking["gp-ablation"]) for bars in figure["data"])
    assert figure["data"][0]["y"][0] == "stripes"
    long = json.dumps({"data": [], "layout": {"title": {"text": "x" * (3 * _compat.DASHBOARD_ATTR_CHARS)}}})
    _compat.save_dashboard_figure(study, long, FIGURE_ID)  # four chunks
    attrs = study._storage.get_study_system_attrs(study._study_id)
    assert get_plotly_graph_objects(attrs)[FIGURE_ID] == long
    save_ranking(study, {"gp-ablation": {"stripes": 1.0}})  # one chunk
    attrs = study._storage.get_study_system_attrs(study._study_id)
    assert json.loads(get_plotly_graph_objects(attrs)[FIGURE_ID])["data"][0]["x"] == [100.0]
