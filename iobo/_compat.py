"""Every use of another library's private API, in one place, with the version it was checked on.

When one of these libraries changes, this is the only file to read. Each
function says what public API is missing and why iobo needs the private one.
Checked on: optuna 5.0.0, optuna-dashboard 0.21.0, ray 2.60.0.
"""

from __future__ import annotations

import math
import os
from typing import Any

DASHBOARD_FIGURE_PREFIX = "dashboard:plot_data:"
DASHBOARD_ATTR_CHARS = 2045


def trial_id(trial) -> int:
    """Optuna's storage id of a ``FrozenTrial`` or ``Trial`` (``_trial_id``; optuna 5.0.0).

    Optuna exposes only the per-study ``number``; the storage API (and
    optuna-dashboard's notes, and a worker reporting steps from another
    process) is keyed by the storage-wide id.
    """
    return trial._trial_id


def set_frozen_trial_attr(study, trial, key: str, value: Any) -> None:
    """Set a user attr of a RUNNING trial through the study's storage (``study._storage``; optuna 5.0.0).

    ``optuna.Trial(study, id)`` would call the sampler's ``before_trial``;
    writing through the storage does not, which is what clean-up paths and
    samplers recording their own bookkeeping need.
    """
    study._storage.set_trial_user_attr(trial_id(trial), key, value)


def set_trial_system_attr(study, trial, key: str, value: Any) -> None:
    """Set a system attr of a trial through the study's storage (``study._storage``; optuna 5.0.0): a sampler's
    own bookkeeping, which Optuna's public ``Trial`` API does not let a sampler write during ``sample_relative``."""
    study._storage.set_trial_system_attr(trial_id(trial), key, value)


def set_study_system_attr(study, key: str, value: Any) -> None:
    """Set a system attr of a study (``study._storage``, ``study._study_id``; optuna 5.0.0): iobo's own cache,
    kept out of the user attrs the dashboard lists; Optuna 5's ``Study`` has no system attrs API."""
    study._storage.set_study_system_attr(study._study_id, key, value)


def study_system_attr(study, key: str) -> Any:
    """A system attr of a study, or None (read as :func:`set_study_system_attr` writes it)."""
    return study_system_attrs(study).get(key)


def study_system_attrs(study) -> dict[str, Any]:
    """Every system attr of a study (iobo's caches and optuna-dashboard's figures and notes)."""
    return study._storage.get_study_system_attrs(study._study_id)


def in_memory_copy(study):
    """A copy of a loaded study in an ``InMemoryStorage``: the same trials (and trial numbers), user attrs and
    system attrs. ``optuna.copy_study`` does this from a storage, which it wants as a URL (iobo's ``journal://``
    is not one Optuna knows) or as the study's storage object, which a loaded ``Study`` keeps private."""
    import optuna

    memory = optuna.storages.InMemoryStorage()
    optuna.copy_study(from_study_name=study.study_name, from_storage=study._storage, to_storage=memory)
    return optuna.load_study(study_name=study.study_name, storage=memory)


def import_ped_anova_without_scikit_learn():
    """Optuna's ``PedAnovaImportanceEvaluator``, imported without loading scikit-learn.

    Importing ``optuna.importance`` imports its fANOVA and MDI evaluators, whose
    modules import scikit-learn at once (1.5-2 s of CPU) inside Optuna's private
    ``try_import``, which records a failed import instead of raising it;
    PED-ANOVA needs only numpy. With scikit-learn blocked for the import
    (``None`` in ``sys.modules``), fANOVA and MDI then say scikit-learn is
    missing, in this process: for a process that computes PED-ANOVA only
    (``iobo importance``'s forked worker). When ``optuna.importance`` or
    scikit-learn is already loaded, nothing is blocked.
    """
    import sys

    if "optuna.importance" in sys.modules or "sklearn" in sys.modules:
        from optuna.importance import PedAnovaImportanceEvaluator

        return PedAnovaImportanceEvaluator
    sys.modules["sklearn"] = None
    try:
        from optuna.importance import PedAnovaImportanceEvaluator
    finally:
        del sys.modules["sklearn"]
    return PedAnovaImportanceEvaluator


def save_dashboard_note(study_or_trial, body: str) -> None:
    """optuna-dashboard's ``save_note`` (0.21.0), loaded from its module file alone: importing the package
    ``optuna_dashboard`` first loads its web app and, through it, scikit-learn and torch (about 4 s here), which
    a tuner paid at its first trial's note, and a Ctrl-C during the first trial waited for. The note module
    itself needs only Optuna. When the package is loaded already, its own function is used."""
    import importlib.util
    import sys

    if "optuna_dashboard" in sys.modules:
        from optuna_dashboard import save_note

        return save_note(study_or_trial, body)
    name = "iobo._optuna_dashboard_note"
    module = sys.modules.get(name)
    if module is None:
        package = importlib.util.find_spec("optuna_dashboard")
        if package is None or not package.submodule_search_locations:
            raise ImportError("optuna-dashboard is not installed: pip install optuna-dashboard")
        path = os.path.join(next(iter(package.submodule_search_locations)), "_note.py")
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    module.save_note(study_or_trial, body)


def trial_handle(study, trial):
    """An ``optuna.Trial`` for a finished ``FrozenTrial`` (optuna-dashboard's ``save_note`` wants one)."""
    import optuna

    return optuna.Trial(study, trial_id(trial))


def optuna_search_trial(search, ray_trial_id: str):
    """The ``optuna.Trial`` Ray's ``OptunaSearch`` made for a Ray trial (``_ot_trials``; ray 2.60.0).

    Ray keeps the mapping private; iobo records its attrs (config, outcome)
    on that trial so the study reads like one the tuner ran.
    """
    return search._ot_trials[ray_trial_id]


def save_dashboard_figure(study, figure_json: str, figure_id: str) -> None:
    """Store a plotly figure (its JSON text) on ``study`` for optuna-dashboard, as its public
    ``save_plotly_graph_object`` stores it (optuna-dashboard 0.21.0): study system attrs
    ``dashboard:plot_data:<figure_id>:<i>``, 2,045 characters each, and a longer earlier figure's leftover
    chunks blanked. Written here because importing ``optuna_dashboard`` loads its web app and, through it,
    scikit-learn, torch, gpytorch and botorch (2-4 s): ``iobo importance`` would wait for them to store
    one bar chart. tests/test_importance.py reads the figure back with optuna-dashboard's own reader."""
    prefix = f"{DASHBOARD_FIGURE_PREFIX}{figure_id}:"
    chunks = [figure_json[i * DASHBOARD_ATTR_CHARS:(i + 1) * DASHBOARD_ATTR_CHARS]
              for i in range(math.ceil(len(figure_json) / DASHBOARD_ATTR_CHARS))]
    for i, chunk in enumerate(chunks):
        set_study_system_attr(study, f"{prefix}{i}", chunk)
    earlier = [k for k in study_system_attrs(study) if k.startswith(prefix)]
    for i in range(len(chunks), len(earlier)):
        set_study_system_attr(study, f"{prefix}{i}", "")
