"""The study's vocabulary: trial roles and attrs, the best and the tuning trials, the RoTI curve.

Every layer that reads a study (the tuner, the decorator, importance,
stopping, the report, the dashboard, the CLI) speaks of its trials through
this module, so that "a default run", "the best configuration" or "the
trials the budget counts" mean one thing everywhere.

Roles (user attr ``role``):

- ``default``: a run of the system default, the baseline;
- ``search``: a configuration proposed by the sampler (the role of any
  trial that was not enqueued with another);
- ``confirm-default`` / ``confirm-best``: interleaved re-measurements made
  after the search (``Tuner.confirm``);
- ``surplus``: a trial asked by one of several tuners sharing a study after
  another had asked the last one the target allows; told FAIL unrun.

Default and search runs are the *tuning* trials: what the budget counts,
what importance and the GP see, what the RoTI curve is made of.
Bandwidths are MB/s (10^6 bytes per second), maximised.
"""

from __future__ import annotations

import os
import socket
import time
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

from iobo import _compat
from iobo.errors import ConfigError
from iobo.measure import roti
from iobo.storage import open_storage

METRIC_NAME = "bandwidth (MB/s)"
ROLE_DEFAULT, ROLE_SEARCH = "default", "search"
ROLE_CONFIRM_DEFAULT, ROLE_CONFIRM_BEST = "confirm-default", "confirm-best"
ROLE_SURPLUS = "surplus"
TUNING_ROLES = (ROLE_DEFAULT, ROLE_SEARCH)
IDENTITY_KEYS = ("kernel", "ranks", "kernel_options", "task", "command")
"""Study attrs that say what a study tunes (a kernel at a scale, a decorated task, a command)."""


def state(name: str):
    """Optuna's ``TrialState[name]`` (imported lazily: ``import iobo`` stays light)."""
    from optuna.trial import TrialState

    return TrialState[name]


def role(trial) -> str:
    """The trial's role; a trial enqueued without one is a search trial."""
    return trial.user_attrs.get("role", ROLE_SEARCH)


def is_tuning(trial) -> bool:
    """True for default and search runs (not re-measurements)."""
    return role(trial) in TUNING_ROLES


def tuning_trials(study) -> list:
    """Completed default and search trials, in trial order."""
    return [t for t in study.get_trials(deepcopy=False, states=(state("COMPLETE"),)) if is_tuning(t)]


def values_of(trials: Iterable, wanted_role: str) -> tuple[float, ...]:
    """Bandwidths (MB/s) of the completed trials of ``wanted_role``, in trial order."""
    return tuple(t.value for t in trials if t.state == state("COMPLETE") and t.user_attrs.get("role") == wanted_role)


def best_trial(study):
    """The completed trial with the highest bandwidth, or None."""
    complete = study.get_trials(deepcopy=False, states=(state("COMPLETE"),))
    return max(complete, key=lambda t: t.value) if complete else None


def count_finished(study) -> int:
    """Finished (COMPLETE, FAIL or PRUNED) default and search trials: what a trial budget counts."""
    finished = (state("COMPLETE"), state("FAIL"), state("PRUNED"))
    return sum(1 for t in study.get_trials(deepcopy=False, states=finished) if is_tuning(t))


def count_asked(study, before: int | None = None) -> int:
    """Default and search trials asked so far (RUNNING or finished; WAITING ones are only queued).

    What several tuners sharing a study compare with its target: a RUNNING
    trial finishes one way or another (a dead tuner's is told FAIL as
    stale), so it already counts.  before: count only trials numbered below
    it (Optuna numbers trials in the order they are created, in every storage).
    """
    asked = [t for t in study.get_trials(deepcopy=False) if t.state != state("WAITING") and is_tuning(t)]
    return sum(1 for t in asked if before is None or t.number < before)


def tell_surplus(study, trial, target: int) -> None:
    """Tell FAIL, unrun, a trial asked after the study's ``target`` was reached by other tuners' trials."""
    trial.set_user_attr("role", ROLE_SURPLUS)
    trial.set_user_attr("fail_reason", f"surplus: the study already had its {target} trials when this one was "
                                       f"asked (another tuner asked the last one first); not run")
    study.tell(trial, state=state("FAIL"))


def default_config(trials) -> dict | None:
    """The system default's parameters: the first default-role run's, else those the first enqueued
    trial was given (``fixed_params``, as ``study.enqueue_trial`` stores them); None with neither."""
    for t in trials:
        if t.user_attrs.get("role") == ROLE_DEFAULT:
            return dict(t.params)
    return next((dict(t.system_attrs["fixed_params"]) for t in trials if "fixed_params" in t.system_attrs), None)


def config_of(trial) -> dict[str, Any]:
    """The configuration a trial ran: its ``config`` attr (after constraint repair), else its params."""
    return dict(trial.user_attrs.get("config", trial.params))


def roti_curve(trials, default_mb_per_s: float | None) -> list[tuple[float, float, float]]:
    """(minutes, best so far MB/s, RoTI MB/s per minute) after each tuning trial.

    Minutes count from the start of the first tuning trial to each trial's
    completion; failures before the first completed run add no point.
    """
    tuning = [t for t in trials if is_tuning(t) and t.datetime_start is not None and t.datetime_complete is not None]
    if not tuning or default_mb_per_s is None:
        return []
    start = min(t.datetime_start for t in tuning)
    best = None
    curve = []
    for t in sorted(tuning, key=lambda t: t.datetime_complete):
        if t.state == state("COMPLETE"):
            best = t.value if best is None else max(best, t.value)
        if best is None:
            continue
        minutes = (t.datetime_complete - start).total_seconds() / 60
        curve.append((minutes, best, roti(best, default_mb_per_s, minutes)))
    return curve


# -- opening a study and writing to its trials ------------------------------------------


def open_study(storage, name: str, sampler, made_for: Mapping[str, Any], space_names: Iterable[str]):
    """Create or load the maximising study ``name``; a loaded one must have been made for ``made_for``.

    made_for: the study attrs that identify what is tuned (some of
    ``IDENTITY_KEYS``: kernel, ranks and options; or the decorated task),
    written on a new study and compared with a loaded one's; space_names: the
    tuned parameters, recorded once.
    """
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(storage=open_storage(storage), study_name=name, direction="maximize",
                                sampler=sampler, load_if_exists=True)
    stored = {k: study.user_attrs[k] for k in IDENTITY_KEYS if k in study.user_attrs}
    if stored and stored != dict(made_for):
        raise ConfigError(
            f"study {name!r} was made for {stored}; this run asks for {dict(made_for)}: "
            f"use another study name (--study, study=), or the settings the study was made for"
        )
    if not stored:
        for key, value in made_for.items():
            study.set_user_attr(key, value)
        study.set_user_attr("space", list(space_names))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names([METRIC_NAME])
    return study


def enqueue_defaults(study, default: Mapping[str, Any], repeats: int) -> int:
    """Queue system-default runs until the study holds ``repeats`` of them (completed or waiting).

    Returns how many were queued.
    """
    have = sum(1 for t in study.get_trials(deepcopy=False, states=(state("COMPLETE"), state("WAITING")))
               if t.user_attrs.get("role") == ROLE_DEFAULT)
    for _ in range(repeats - have):
        study.enqueue_trial(dict(default), user_attrs={"role": ROLE_DEFAULT})
    return max(0, repeats - have)


def owner() -> str:
    """``host:pid`` of this process: who started a trial (for clean-up after a crash)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def record_suggestion(trial, space, workload) -> dict[str, Any]:
    """Ask ``trial`` for an assignment of ``space`` (constraints repaired) and record it on the trial.

    Attrs: owner (host:pid, first, so a resumed study can tell whose trial it
    is), role (``search`` unless enqueued with one), config, repaired (what
    the constraints changed, if anything), started_unix.
    """
    trial.set_user_attr("owner", owner())
    trial_role = role(trial)
    values, repaired = space.suggest(trial, workload)
    trial.set_user_attr("role", trial_role)
    trial.set_user_attr("config", values)
    if repaired:
        trial.set_user_attr("repaired", repaired)
    trial.set_user_attr("started_unix", time.time())
    return values


def outcome_attrs(outcome: Mapping[str, Any]) -> dict[str, Any]:
    """The trial attrs of a finished kernel run (a :func:`iobo.launch.run_kernel` result)."""
    result = outcome["result"]
    return {
        "bytes": outcome["bytes"],
        "seconds": outcome["seconds"],
        "step_mb_per_s": outcome["step_mb_per_s"],
        "step_elapsed_s": [round(s, 4) for s in outcome["step_elapsed_s"]],
        "wall_seconds": round(outcome["wall_seconds"], 3),
        "effective": result.get("effective", {}),
        "hints": result.get("hints", {}),
        "requested_hints": result.get("requested_hints", {}),
        "not_applied": result.get("not_applied", {}),
        "fs_type": result.get("fs_type"),
        "command": " ".join(outcome["command"]),
    }


def tell_failed(study, trial, reason: str) -> None:
    """Tell ``trial`` (a RUNNING ``FrozenTrial``) FAIL with ``reason`` as its ``fail_reason`` attr.

    The attr goes through the storage: an ``optuna.Trial`` would call the
    sampler's ``before_trial`` first, which has no business in clean-up.
    """
    _compat.set_frozen_trial_attr(study, trial, "fail_reason", reason)
    study.tell(trial.number, state=state("FAIL"))
