"""What several commands share: storage/study arguments, loading a study, its space and best configuration."""

from __future__ import annotations

import argparse
import contextlib
import json

from iobo.errors import ConfigError
from iobo.storage import DEFAULT_STORAGE


def kernel_option(text: str) -> tuple[str, object]:
    """``name=value`` with value parsed as JSON when it is JSON (``particles=1024``)."""
    name, sep, raw = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return name.replace("-", "_"), value


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    value = non_negative_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1; got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """An argument that counts something (0 allowed): rejected while parsing, before anything runs."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def add_storage_args(parser) -> None:
    parser.add_argument("--storage", default=DEFAULT_STORAGE, help="Optuna storage URL (default: %(default)s)")
    parser.add_argument("--study", help="study name (default: the only study in the storage)")


DEFAULT_WORKDIR = "iobo-work"
"""``--workdir`` of ``iobo tune`` when not given; a command that runs more trials of a study uses the study's."""


def add_run_args(parser, workdir: str | None = DEFAULT_WORKDIR) -> None:
    """Where and how trials run: shared by ``tune``, ``minimize`` and ``confirm`` (``workdir`` None: the
    study's own, :func:`run_workdir`)."""
    from iobo.runners import RUNNERS

    parser.add_argument("--workdir", default=workdir,
                        help="directory on the file system under test (default: "
                             + (f"{workdir})" if workdir else "the one the study's trials ran in; another must be "
                                                              "on the same type of file system)"))
    parser.add_argument("--mpiexec", default=None, help="MPI launcher (default: mpiexec.mpich or $IOBO_MPIEXEC)")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="per-trial limit in seconds (default: %(default)g)")
    parser.add_argument("--runner", choices=RUNNERS, default="parsl",
                        help="where trials run: Parsl apps (default) or threads of this process (local)")
    parser.add_argument("--parsl-config", help="Python file defining a Parsl `config` (e.g. workflows/site_slurm.py)")


def launcher(name: str | None):
    from iobo.launch import MpiexecLauncher

    return MpiexecLauncher(name) if name else MpiexecLauncher()


def runner(args, max_workers: int = 1):
    """The runner ``--runner``/``--parsl-config`` ask for, or None for the tuner's default (Parsl)."""
    from iobo.runners import make_runner

    if args.runner == "parsl" and not args.parsl_config:
        return None
    config = None
    if args.parsl_config:
        from iobo.runners.parsl import load_config_file

        config = load_config_file(args.parsl_config)
    return make_runner(args.runner, max_workers, config, f"{args.workdir}/runinfo")


def load_study(storage: str, name: str | None):
    """The study ``name`` in ``storage`` (the only one there when ``name`` is None)."""
    import optuna

    from iobo.storage import open_storage

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url, storage = storage, open_storage(storage, must_exist=True)
    names = [s.study_name for s in optuna.get_all_study_summaries(storage, include_best_trial=False)]
    if name is None:
        if len(names) != 1:
            raise ConfigError(
                f"storage {url} holds {len(names)} studies ({', '.join(names) or 'none'}); name one with --study"
            )
        name = names[0]
    elif name not in names:
        raise ConfigError(f"study {name!r} is not in {url}; studies there: {', '.join(names) or 'none'}")
    return optuna.load_study(study_name=name, storage=storage)


def study_space(study):
    """The search space a study was tuned over (:func:`iobo.kernels.study_space`)."""
    from iobo import kernels

    return kernels.study_space(study)


def chosen_config(study, full: bool = False):
    """(best trial, the :class:`iobo.minimize.Recommendation`, its :class:`iobo.config.IOConfig`): the study's
    recommendation (:func:`iobo.minimize.recommendation`), or with ``full`` the best trial's whole configuration
    without the knobs recorded as not applied (:func:`iobo.minimize.proposed`)."""
    from iobo import kernels, trials
    from iobo.config import IOConfig
    from iobo.minimize import Recommendation, confirmation_of, proposed, recommendation

    space = study_space(study)
    best = trials.best_trial(study)
    if best is None:
        raise ConfigError(f"study {study.study_name!r} has no completed trial yet; run `iobo tune` first")
    workload = kernels.study_workload(study)
    if full:
        values, how = proposed(study, space, workload, minimal=False)
        chosen = Recommendation(values, f"{how} (--full)", values, confirmation_of(study, space, values))
    else:
        chosen = recommendation(study, space, workload)
    return best, chosen, IOConfig(chosen.values, space)


def study_spec(study):
    """The spec that re-runs a study's trials (its kernel or command); :class:`ConfigError` saying in one line
    what is missing (a decorated task's study is re-run by its own pipeline)."""
    from iobo import kernels
    from iobo.kernels.command import CommandSpec

    attrs = study.user_attrs
    if "command" in attrs:
        return CommandSpec.from_attr(attrs["command"])
    if "kernel" in attrs:
        return kernels.rebuild(attrs["kernel"], attrs.get(kernels.KERNEL_SPEC_ATTR))
    if "task" in attrs:
        raise ConfigError(f"study {study.study_name!r} was tuned by @iobo.tune on task {attrs['task']!r}: only your "
                          f"pipeline can run it again (mode='production' applies the best configuration)")
    raise ConfigError(f"study {study.study_name!r} records no kernel, command or task: it was not made by iobo")


def study_workdir(study) -> str | None:
    """The directory the study's trials ran in (the ``workdir`` attr of its latest tuning trial that records
    one, else of any trial), or None when none records one."""
    from iobo import trials

    every = sorted(study.get_trials(deepcopy=False), key=lambda t: t.number, reverse=True)
    for trial in [t for t in every if trials.is_tuning(t)] + every:
        if trial.user_attrs.get("workdir"):
            return trial.user_attrs["workdir"]
    return None


def run_workdir(study, asked: str | None) -> str:
    """Where a command that runs more trials of ``study`` (minimize, confirm) runs them: ``asked`` (``--workdir``),
    else the study's own (:func:`study_workdir`; ``DEFAULT_WORKDIR`` when it records none). Runs on another type
    of file system would not compare with the study's: ``asked`` on one is refused, before anything runs."""
    from pathlib import Path

    from iobo.stack import filesystem_type

    recorded = study_workdir(study)
    if asked is None:
        return recorded or DEFAULT_WORKDIR
    if recorded is not None:
        here, there = filesystem_type(Path(asked)), filesystem_type(Path(recorded))
        if here != there:
            raise ConfigError(f"--workdir {asked} is on {here}, but the trials of study {study.study_name!r} ran in "
                              f"{recorded}, on {there}: runs on another file system do not compare with them; leave "
                              f"--workdir out (the study's own is used) or give a directory on {there}")
    return asked


@contextlib.contextmanager
def workdir_left_only_if_used(workdir: str):
    """Within the block, a ``workdir`` that did not exist before is removed again when nothing was written
    there (a command with nothing to run creates nothing)."""
    from pathlib import Path

    path = Path(workdir)
    existed = path.exists()
    try:
        yield
    finally:
        if not existed and path.is_dir() and not any(path.iterdir()):
            path.rmdir()


def tuner_for(study, args):
    """A :class:`iobo.tuner.Tuner` on an existing study of a kernel or a command, with this command's run
    arguments and the study's own space (``args.workdir``: see :func:`run_workdir`)."""
    from iobo.progress import console_watchers
    from iobo.tuner import Tuner

    attrs = study.user_attrs
    spec = study_spec(study)
    return Tuner(kernel=spec, ranks=attrs["ranks"], kernel_options=attrs.get("kernel_options", {}),
                 space=study_space(study), storage=args.storage, study=study.study_name, workdir=args.workdir,
                 launcher=launcher(args.mpiexec), timeout_s=args.timeout, runner=runner(args), **console_watchers())
