"""``iobo importance`` on real storage: what it computes on the worker's in-memory copy lands on the real study."""

import json
import math
import subprocess
import sys

import numpy as np
import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import create_trial
from optuna_dashboard._custom_plot_data import get_plotly_graph_objects

from iobo import _compat
from iobo.cli import main
from iobo.importance import FIGURE_ID, GP_FIT_ATTR, USER_ATTR, param_importances
from iobo.storage import open_storage


def two_knob_study(storage, name, trials=30, seed=0):
    """A default run, then random runs: only ``stripes`` (x8 over its range) matters, ``sieve`` is noise."""
    rng = np.random.default_rng(seed)
    choices = {"stripes": (1, 2, 4, 8, 16), "sieve": (1, 2, 4, 8)}
    study = optuna.create_study(storage=open_storage(storage), study_name=name, direction="maximize")
    for i in range(trials):
        config = {n: c[0] if i == 0 else c[rng.integers(len(c))] for n, c in choices.items()}
        value = 100.0 * config["stripes"] ** 0.75 * math.exp(0.05 * rng.standard_normal())
        study.add_trial(create_trial(params=config, value=value, user_attrs={"role": "default" if i == 0 else "search"},
                                     distributions={n: CategoricalDistribution(c) for n, c in choices.items()}))
    return study


def test_the_ranking_the_kept_fit_and_the_figure_reach_the_real_study(storage, capsys):
    two_knob_study(storage, "real")
    assert main(["importance", "--storage", storage, "--study", "real"]) == 0
    printed = capsys.readouterr().out.splitlines()
    study = optuna.load_study(study_name="real", storage=open_storage(storage))
    assert len(study.trials) == 30  # the copy's trials were not added back
    ranking = study.user_attrs[USER_ATTR]
    assert list(ranking["gp-ablation"])[0] == "stripes" == printed[1].split()[0]
    kept = _compat.study_system_attr(study, GP_FIT_ATTR)
    assert kept["trials"] == list(range(30))
    figure = json.loads(get_plotly_graph_objects(_compat.study_system_attrs(study))[FIGURE_ID])
    assert figure["data"][0]["y"] == list(ranking["gp-ablation"])

    assert main(["importance", "--storage", storage, "--study", "real"]) == 0  # conditions on the kept fit
    assert capsys.readouterr().out.splitlines() == printed
    again = optuna.load_study(study_name="real", storage=open_storage(storage))
    assert _compat.study_system_attr(again, GP_FIT_ATTR) == kept


def test_the_worker_computes_ped_anova_without_scikit_learn_and_the_same_as_with_it(tmp_path):
    """The worker's evaluator is imported with scikit-learn blocked (1.5-2 s of CPU saved on the command's
    critical path); its PED-ANOVA is Optuna's, value for value."""
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    study = two_knob_study(storage, "real")
    probe = (
        "import json, sys\n"
        "import optuna\n"
        "from iobo import _compat\n"
        "from iobo.importance import param_importances\n"
        "study = optuna.load_study(study_name='real', storage=sys.argv[1])\n"
        "values = param_importances(study, _compat.import_ped_anova_without_scikit_learn())\n"
        "print(json.dumps({'sklearn_loaded': any(m.split('.')[0] == 'sklearn' for m in sys.modules), 'values': values}))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe, storage], check=True, capture_output=True, text=True).stdout
    worker = json.loads(out)
    assert worker["sklearn_loaded"] is False
    assert worker["values"] == pytest.approx(param_importances(study))
    assert list(worker["values"])[0] == "stripes"
