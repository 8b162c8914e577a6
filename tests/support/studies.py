"""Studies of known trials in a real Optuna storage: what a study concludes, without running its trials.

The study is the one ``iobo tune vpic --ranks 2`` makes (its attrs, its space), so every command, ``confirm``
included, works on it; the trials are added with the values, roles and attrs a test needs.
"""

import datetime as dt

from optuna.trial import FrozenTrial, TrialState

from iobo.runners.local import LocalRunner
from iobo.trials import ROLE_CONFIRM_BEST, ROLE_CONFIRM_DEFAULT, ROLE_DEFAULT
from iobo.tuner import Tuner

from support.sizes import SMALL_VPIC

T0 = dt.datetime(2026, 1, 1, 12, 0, 0)


def vpic_tuner(storage, workdir, study="s") -> Tuner:
    """The tuner of a 2-rank VPIC-IO study of ``SMALL_VPIC`` writing in ``workdir`` (local runner, silent)."""
    return Tuner(kernel="vpic", ranks=2, storage=storage, study=study, workdir=str(workdir),
                 kernel_options=SMALL_VPIC, runner=LocalRunner(), echo=None, warmup=False)


def add(study, value, role, minute, changes=None, state=TrialState.COMPLETE, start=None, **attrs):
    """A trial of the system default with ``changes`` that ran from ``start`` (default: minute - 1) to ``minute``
    minutes after T0; ``attrs``: more user attrs (``workdir``, ``not_applied``...)."""
    config = {**vpic_space().default(), **(changes or {})}
    begin = minute - 1 if start is None else start
    study.add_trial(FrozenTrial(
        number=0, trial_id=0, state=state, value=value if state == TrialState.COMPLETE else None,
        datetime_start=T0 + dt.timedelta(minutes=begin), datetime_complete=T0 + dt.timedelta(minutes=minute),
        params={}, distributions={}, user_attrs={"role": role, "config": config, **attrs}, system_attrs={},
        intermediate_values={},
    ))


def confirmed(study, pairs, changes, first_minute=100):
    """A confirmation of ``changes``: (default MB/s, configuration MB/s) per interleaved pair."""
    for minute, (default, best) in enumerate(pairs, start=first_minute):
        add(study, default, ROLE_CONFIRM_DEFAULT, minute)
        add(study, best, ROLE_CONFIRM_BEST, minute, changes)


def defaults(study, values=(100.0, 110.0, 90.0), **attrs):
    """The study's default runs, one a minute from minute 1."""
    for minute, value in enumerate(values, start=1):
        add(study, value, ROLE_DEFAULT, minute, **attrs)


def vpic_space():
    from iobo import kernels

    return kernels.get("vpic").space()
