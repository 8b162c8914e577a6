"""iobo.samplers.ImpactFirstSampler through Optuna's ask/tell interface, on small deterministic functions."""

import math

import optuna
import pytest

from iobo.errors import ConfigError
from iobo.cli import main
from iobo.samplers import ImpactFirstSampler
from iobo.samplers._impact_first import ACTIVE_ATTR, HELD_ATTR, IMPACT_FIRST, PHASE_ATTR, SCREENING
from iobo import kernels
from iobo.samplers.registry import make_sampler

from support.sizes import SMALL_VPIC

optuna.logging.set_verbosity(optuna.logging.WARNING)

# 8 parameters; only "stripes" and "buffer" move the bandwidth (chunk_size exists only when layout=chunked)
SPACE = {
    "stripes": (1, 2, 4, 8, 16, 32),
    "buffer": (1, 2, 4, 8, 16),
    "mode": ("independent", "collective"),
    "cb_write": ("automatic", "enable", "disable"),
    "sieve": (4, 64, 512),
    "meta": (2, 8, 32),
    "layout": ("contiguous", "chunked"),
}
CHUNKS = (1, 4, 16)
DEFAULT = {"stripes": 1, "buffer": 16, "mode": "independent", "cb_write": "automatic", "sieve": 64, "meta": 2,
           "layout": "contiguous"}


def suggest(trial) -> dict:
    config = {name: trial.suggest_categorical(name, values) for name, values in SPACE.items()}
    if config["layout"] == "chunked":
        config["chunk_size"] = trial.suggest_categorical("chunk_size", CHUNKS)
    return config


def two_that_matter(c) -> float:
    """MB/s with its optimum at 16 stripes and buffer 2, whatever the other six parameters."""
    return 1000.0 * math.exp(-((math.log2(c["stripes"]) - 4) ** 2) / 8 - ((math.log2(c["buffer"]) - 1) ** 2) / 4)


def run(sampler, n_trials, objective=two_that_matter, default=True):
    study = optuna.create_study(direction="maximize", sampler=sampler)
    if default:
        study.enqueue_trial(DEFAULT)
    for _ in range(n_trials):
        trial = study.ask()
        study.tell(trial, objective(suggest(trial)))
    return study


def impact_first_trials(study):
    return [t for t in study.trials if t.user_attrs.get(PHASE_ATTR) == IMPACT_FIRST]


def test_same_seed_same_suggestions_other_seed_different():
    def params(seed):
        return [t.params for t in run(ImpactFirstSampler(seed=seed, screening_trials=6, initial_active=2), 10).trials]

    assert params(3) == params(3)
    assert params(3) != params(4)


def test_ranks_the_two_parameters_that_matter_and_reaches_the_optimum():
    study = run(ImpactFirstSampler(seed=0, screening_trials=8, initial_active=2), 22)
    phases = [t.user_attrs.get(PHASE_ATTR) for t in study.trials]
    assert phases[0] is None  # the enqueued default run is not the sampler's choice
    assert phases[1:8] == [SCREENING] * 7 and set(phases[8:]) == {IMPACT_FIRST}
    assert set(impact_first_trials(study)[0].user_attrs[ACTIVE_ATTR]) == {"stripes", "buffer"}
    assert max(t.value for t in study.trials) == pytest.approx(1000.0)


def test_a_parameter_already_best_at_its_default_is_not_activated_first():
    def mode_matters_most(c) -> float:  # the default's "independent" is already the best mode, x20
        return two_that_matter(c) * (20.0 if c["mode"] == "independent" else 1.0)

    study = run(ImpactFirstSampler(seed=0, screening_trials=8, initial_active=2), 10, objective=mode_matters_most)
    assert set(impact_first_trials(study)[0].user_attrs[ACTIVE_ATTR]) == {"stripes", "buffer"}


def test_after_screening_only_active_parameters_vary():
    study = run(ImpactFirstSampler(seed=1, screening_trials=6, initial_active=2, patience=50), 16)
    staged = impact_first_trials(study)
    assert len(staged) == 10
    active, held = set(staged[0].user_attrs[ACTIVE_ATTR]), staged[0].user_attrs[HELD_ATTR]
    assert len(active) == 2 and not active & set(held)
    best_screened = max(study.trials[:6], key=lambda t: t.value).params
    assert all(held[n] == v for n, v in best_screened.items() if n not in active)
    for t in staged:
        assert set(t.user_attrs[ACTIVE_ATTR]) == active and t.user_attrs[HELD_ATTR] == held
        assert all(v == held[n] for n, v in t.params.items() if n not in active)
    assert len({tuple(t.params[n] for n in sorted(active)) for t in staged}) > 5


def test_prior_ranking_skips_screening_and_holds_the_default():
    sampler = ImpactFirstSampler(seed=2, prior_ranking=["buffer", "stripes", "mode"], initial_active=2)
    study = run(sampler, 6)
    assert [t.user_attrs.get(PHASE_ATTR) for t in study.trials[1:]] == [IMPACT_FIRST] * 5
    for t in study.trials[1:]:
        assert set(t.user_attrs[ACTIVE_ATTR]) == {"buffer", "stripes"}
        assert {n: v for n, v in t.params.items() if n not in ("buffer", "stripes")} == {
            n: v for n, v in DEFAULT.items() if n not in ("buffer", "stripes")}


def test_widens_after_patience_trials_without_a_new_best():
    def never_beats_the_default(c) -> float:
        return 2000.0 if c == DEFAULT else two_that_matter(c)

    study = run(ImpactFirstSampler(seed=3, screening_trials=5, initial_active=3, patience=3), 14,
                objective=never_beats_the_default)
    sizes = [len(t.user_attrs[ACTIVE_ATTR]) for t in impact_first_trials(study)]
    assert len(sizes) == 9
    assert sizes[:3] == [3, 3, 3]
    assert sizes[3] > 3 and sizes[3:6] == [sizes[3]] * 3
    assert sizes[6] > sizes[3] and sizes[6:] == [sizes[6]] * 3


def test_widens_when_every_configuration_of_the_active_parameters_was_measured():
    # seed 5: the screening ranks cb_write first (a parameter that does not matter, ranked from 6 runs) and has
    # measured all 3 of its values (seed 3 did so until 3-choice numbers became nominal and changed the ranking)
    study = run(ImpactFirstSampler(seed=5, screening_trials=5, initial_active=1, patience=50), 10)
    staged = impact_first_trials(study)
    keys = [tuple(sorted(t.params.items())) for t in study.trials]
    assert len(set(keys)) == len(keys)  # never a repeat
    screened = {t.params["cb_write"] for t in study.trials if t.user_attrs.get(PHASE_ATTR) != IMPACT_FIRST}
    assert screened == set(SPACE["cb_write"])
    # the top-ranked parameter (cb_write) had all 3 values screened already: the first stage took one more
    assert "cb_write" in staged[0].user_attrs[ACTIVE_ATTR] and len(staged[0].user_attrs[ACTIVE_ATTR]) == 2


def test_a_conditional_parameter_joins_with_its_parent():
    def chunks_matter(c) -> float:
        return {1: 500.0, 4: 2000.0, 16: 800.0}[c["chunk_size"]] if c["layout"] == "chunked" else 1000.0

    study = optuna.create_study(direction="maximize",
                                sampler=ImpactFirstSampler(seed=4, prior_ranking=["chunk_size"], initial_active=1))
    study.enqueue_trial(DEFAULT)
    study.enqueue_trial(DEFAULT | {"layout": "chunked", "chunk_size": 1})  # shows that chunk_size needs layout
    for _ in range(8):
        trial = study.ask()
        study.tell(trial, chunks_matter(suggest(trial)))
    staged = impact_first_trials(study)
    assert set(staged[0].user_attrs[ACTIVE_ATTR]) == {"chunk_size", "layout"}
    assert max(t.value for t in study.trials) == 2000.0
    # a contiguous trial was not asked for a chunk size
    assert all("chunk_size" not in t.params for t in staged if t.params["layout"] == "contiguous")


def test_prior_from_rankings_stored_by_earlier_studies_of_the_kernel(storage):
    earlier = optuna.create_study(storage=storage, study_name="earlier")
    earlier.set_user_attr("kernel", "vpic")
    earlier.set_user_attr("importance", {"ped-anova": {"meta": 0.7, "sieve": 0.2, "mode": 0.1},
                                         "gp-sensitivity": {"meta": 0.5, "sieve": 0.4, "mode": 0.1}})

    def first_choice(kernel, name):
        study = optuna.create_study(storage=storage, study_name=name, direction="maximize",
                                    sampler=make_sampler("impact-first", 0, storage=storage, kernel=kernel, study=name))
        study.enqueue_trial(DEFAULT)
        for _ in range(2):
            trial = study.ask()
            study.tell(trial, two_that_matter(suggest(trial)))
        return study.trials[1].user_attrs

    attrs = first_choice("vpic", "new")
    assert attrs[PHASE_ATTR] == IMPACT_FIRST and set(attrs[ACTIVE_ATTR]) == {"meta", "sieve", "mode"}
    assert first_choice("ior", "other")[PHASE_ATTR] == SCREENING  # no ranking stored for this kernel


def test_cli_tunes_impact_first_from_a_ranking_stored_in_the_storage(storage, scratch, capsys):
    earlier = optuna.create_study(storage=storage, study_name="earlier")
    earlier.set_user_attr("kernel", "vpic")
    earlier.set_user_attr("importance",
                          {"gp-sensitivity": {"files": 0.6, "cb_buffer_size": 0.3, "romio_cb_write": 0.1}})
    code = main(["tune", "vpic", "--ranks", "2", "--trials", "5", "--storage", storage, "--study", "new",
                 "--workdir", str(scratch), "--sampler", "impact-first", "--confirm", "0",
                 "--option", f"particles={SMALL_VPIC['particles']}", "--option", "steps=2"])
    assert code == 0, capsys.readouterr().err
    search = optuna.load_study(study_name="new", storage=storage).trials[3:]
    default = kernels.get("vpic").space().default()
    for t in search:
        assert t.user_attrs[PHASE_ATTR] == IMPACT_FIRST
        assert set(t.user_attrs[ACTIVE_ATTR]) == {"files", "cb_buffer_size", "romio_cb_write"}
        assert {n: v for n, v in t.params.items() if n not in t.user_attrs[ACTIVE_ATTR]} == {
            n: default[n] for n in t.params if n not in t.user_attrs[ACTIVE_ATTR]}


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"seed": -1}, ["seed", "-1", ">= 0"]),
        ({"screening_trials": 2}, ["screening_trials", "2", ">= 5"]),
        ({"initial_active": 0}, ["initial_active", "0", ">= 1"]),
        ({"patience": "5"}, ["patience", "'5'", "integer"]),
        ({"widen_by": True}, ["widen_by", "True", "integer"]),
        ({"prior_ranking": []}, ["prior_ranking", "[]", "most important first"]),
        ({"prior_ranking": ["a", "a"]}, ["prior_ranking", "distinct", "['a', 'a']"]),
        ({"prior_ranking": {"a": -1.0}}, ["prior_ranking", "-1.0", ">= 0"]),
        ({"base": "gp"}, ["base", "'gp'", "GPSampler"]),
    ],
)
def test_invalid_arguments_say_what_is_allowed(kwargs, words):
    with pytest.raises(ConfigError) as error:
        ImpactFirstSampler(**kwargs)
    for word in words:
        assert word in str(error.value)


def test_a_multi_objective_study_is_refused():
    study = optuna.create_study(directions=["maximize", "minimize"], sampler=ImpactFirstSampler(seed=0, prior_ranking=["buffer"]))
    with pytest.raises(ConfigError, match="one objective"):
        suggest(study.ask())
