"""``@iobo.tune``: the calls of a Parsl app that does I/O become trials of a study.

Stack it above ``@python_app`` or ``@bash_app``; the task takes the
configuration to apply as a keyword argument (``io_config`` by default) and
applies it with :mod:`iobo.hdf5`::

    @iobo.tune(study="output", storage="sqlite:///iobo.db",
               space=io_stack_space().select(["alignment_interval", "layout", "chunk_size"]))
    @python_app
    def write_output(path, data, io_config=None):
        import iobo.hdf5
        with iobo.hdf5.File(path, "w", io_config) as f:
            f.create_dataset("data", data=data, **iobo.hdf5.dataset_options(io_config, data.shape, data.dtype))
        return data.nbytes                                # bytes written

Two modes, chosen by ``mode=`` or else by the environment variable
``IOBO_MODE`` (``tune`` when neither is set), read at each call:

- ``tune``: each call asks the study for a configuration in this (the driver)
  process, submits the app with it and returns a :class:`TrialFuture`; when
  the app finishes, the trial is told its bandwidth (MB/s) and the future
  resolves to the app's own result. k calls in flight are k trials; only the
  driver touches the storage. The study's first ``default_repeats`` trials run
  the system default (the baseline). A failing app is a FAIL trial carrying
  the error text, and its future raises that error; other tasks go on.
- ``production``: each call runs the app with the study's recommended configuration
  and returns the app's own future; nothing is recorded. With no completed
  trial (or no study) yet, the system default is used, and said once.

A ``@bash_app``'s command line is run under the preload shim (adapters/):
iobo puts ``export`` lines in front of it, in both modes, on every call:
``LD_PRELOAD`` with the shim built for the MPI and HDF5 of the program the
command runs (the first that links them, past ``mpiexec``/``srun`` and their
options; a program linked to libraries no shim there is built for fails the
call, naming both), the configuration's ``IOBO_*`` variables, an
absolute ``ROMIO_HINTS`` file and, when tuning, ``IOBO_PRELOAD_REPORT``
(files under ``workdir``, which the driver and the workers must both
reach). The MPI programs the command starts (``mpiexec -n 4 ./app``) apply
the configuration without a change, and write the shim's report.

Bandwidth = bytes / seconds / 1e6, from the first of:

- for a bash app, the shim's accounting of the programs it ran (bytes over
  the slowest rank's seconds in I/O calls at any level, ``timed_by="shim"``),
  stored on the trial with what took effect (``not_applied``, ``effective``,
  ``hints``, ``io``);
- what the app returns: the bytes it wrote (an int) or ``{"bytes": ...,
  "seconds": ...}`` (its own timing of the I/O, ``timed_by="task"``);
- the sizes of the files it declares in ``outputs=[...]`` over the time
  Parsl's executor held the task (``timed_by="parsl"``: from launch to
  result, dispatch included; a bash app whose command started no program
  under the shim ends here).
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import shlex
import shutil
import threading
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iobo import trials
from iobo.adapters import run_measure
from iobo.config import IOConfig
from iobo.errors import ConfigError, KernelError
from iobo.measure import bandwidth_mb_per_s, format_mb_per_s
from iobo.shim import OMPI_IO_VARIABLE, command_program, io_component
from iobo.space import Space, Workload, format_value, io_stack_space
from iobo.stack import romio_only
from iobo.storage import DEFAULT_STORAGE, open_storage

MODE_ENV = "IOBO_MODE"
TUNE, PRODUCTION = "tune", "production"
MODES = (TUNE, PRODUCTION)


def _check_mode(mode: str, source: str) -> str:
    if mode not in MODES:
        raise ConfigError(f"{source}={mode!r} is not a mode; allowed: {', '.join(MODES)}")
    return mode


@dataclass(frozen=True)
class TuneSettings:
    """The arguments of :func:`tune`, checked when the decorator is applied."""

    study: str | None
    storage: Any
    space: Space
    workload: Workload
    mode: str | None
    sampler: Any
    seed: int
    default_repeats: int
    config_arg: str
    echo: Callable[[str], None] | None
    workdir: str = "iobo-work"

    def __post_init__(self) -> None:
        object.__setattr__(self, "workdir", os.path.abspath(self.workdir))
        if self.mode is not None:
            _check_mode(self.mode, "mode")
        if MODE_ENV in os.environ:
            _check_mode(os.environ[MODE_ENV], MODE_ENV)
        if not isinstance(self.space, Space):
            raise ConfigError(f"space must be an iobo.Space; got {type(self.space).__name__}: use io_stack_space()")
        if not isinstance(self.workload, Workload):
            raise ConfigError(f"workload must be an iobo.Workload; got {type(self.workload).__name__}")
        if isinstance(self.default_repeats, bool) or not isinstance(self.default_repeats, int) \
                or self.default_repeats < 1:
            raise ConfigError(f"default_repeats must be an integer >= 1 (the baseline); got {self.default_repeats!r}")
        if not self.config_arg.isidentifier():
            raise ConfigError(f"config_arg must be a keyword name; got {self.config_arg!r}")
        IOConfig.from_values(self.space.default(), self.space, self.workload)  # the baseline must be valid


def tune(*, study: str | None = None, storage: Any = DEFAULT_STORAGE, space: Space | None = None,
         workload: Workload | None = None, mode: str | None = None, sampler: Any = None, seed: int = 0,
         default_repeats: int = 1, config_arg: str = "io_config",
         echo: Callable[[str], None] | None = print, workdir: str = "iobo-work") -> Callable[[Any], "TunedApp"]:
    """Decorate a Parsl app so that its calls are trials (or run the best configuration).

    study: the study name (default: the task function's name); storage: an
    Optuna storage URL, ``journal:///abs/path.log`` or storage object (see
    :mod:`iobo.storage`); space: what to tune (default: the whole I/O stack;
    ``io_stack_space().select([...])`` for fewer knobs); workload: ranks and
    dataset bytes the constraints are checked against; mode: ``tune`` or
    ``production`` (default: ``$IOBO_MODE``, else ``tune``); sampler: an
    Optuna sampler (default: iobo's GP sampler seeded with ``seed``);
    default_repeats: system-default runs the study starts with; config_arg: the
    keyword the app receives the ``IOConfig`` in; echo: where one line per
    finished trial goes (None: silent); workdir: where a bash app's hints
    files and shim reports go (made absolute; the driver and the workers
    must both reach it).
    """
    settings = TuneSettings(study, storage, space or io_stack_space(), workload or Workload(), mode, sampler,
                            seed, default_repeats, config_arg, echo, workdir)
    return lambda app: TunedApp(app, settings)


class TrialFuture(Future):
    """Resolves to the app's result once its trial is told; ``trial_number`` and ``app_future`` as submitted."""

    def __init__(self, trial_number: int, app_future: Future) -> None:
        super().__init__()
        self.trial_number = trial_number
        self.app_future = app_future


class TunedApp:
    """A Parsl app whose calls are trials (tune mode) or run the best configuration (production)."""

    def __init__(self, app, settings: TuneSettings) -> None:
        from parsl.app.app import AppBase
        from parsl.app.bash import BashApp

        if not isinstance(app, AppBase):
            raise ConfigError(
                f"@iobo.tune decorates a Parsl app; got {type(app).__name__}: "
                f"stack it above @python_app or @bash_app"
            )
        parameters = inspect.signature(app.func).parameters
        takes_kwargs = any(p.kind == p.VAR_KEYWORD for p in parameters.values())
        if settings.config_arg not in parameters and not takes_kwargs:
            raise ConfigError(
                f"task {app.func.__name__!r} takes no {settings.config_arg!r} argument, which @iobo.tune passes "
                f"the configuration in: add `{settings.config_arg}=None` to its parameters"
            )
        self.app = app
        self.settings = settings
        self.name = app.func.__name__
        self.study_name = settings.study or self.name
        self._returns_exit_code = isinstance(app, BashApp)
        # what is submitted: a bash app's command line gets the shim's exports in front
        self._submitted = BashApp(
            _ShimmedCommand(app.func, settings.config_arg), data_flow_kernel=app.data_flow_kernel, cache=app.cache,
            executors=app.executors, ignore_for_cache=app.ignore_for_cache,
        ) if self._returns_exit_code else app
        self._lock = threading.Lock()
        self._study = None
        self._production: IOConfig | None = None

    @property
    def mode(self) -> str:
        """``tune`` or ``production``, from the argument, else ``$IOBO_MODE``, else ``tune``."""
        if self.settings.mode is not None:
            return self.settings.mode
        return _check_mode(os.environ.get(MODE_ENV, TUNE), MODE_ENV)

    def __call__(self, *args, **kwargs) -> Future:
        if self.settings.config_arg in kwargs:
            raise ConfigError(
                f"{self.name}() was given {self.settings.config_arg}=...; @iobo.tune passes it: drop the argument"
            )
        if self.mode == PRODUCTION:
            shim = self._shim_run("production", report=False)
            future = self._submit(args, kwargs, self.production_config(), shim)
            if shim is not None:
                future.add_done_callback(lambda _: shutil.rmtree(shim.directory, ignore_errors=True))
            return future
        trial, config = self._ask()
        shim = self._shim_run(f"trial{trial.number}", report=True)
        try:
            app_future = self._submit(args, kwargs, config, shim)
        except BaseException as exc:
            self._tell_fail(trial, f"not submitted: {type(exc).__name__}: {exc}")
            raise
        done = TrialFuture(trial.number, app_future)
        app_future.add_done_callback(lambda future: self._finish(trial, future, kwargs, done, config, shim))
        return done

    def _shim_run(self, tag: str, report: bool) -> "ShimRun | None":
        """For a bash app, the directory of one call's hints file (and shim report); None for a python app."""
        if not self._returns_exit_code:
            return None
        return ShimRun(os.path.join(self.settings.workdir, f"{self.name}-{tag}-{uuid.uuid4().hex[:8]}"), report)

    def _submit(self, args, kwargs, config: IOConfig, shim: "ShimRun | None") -> Future:
        extra = {self.settings.config_arg: config, **({SHIM_ARG: shim} if shim is not None else {})}
        return self._submitted(*args, **kwargs, **extra)

    # -- production ----------------------------------------------------------------
    def production_config(self) -> IOConfig:
        """The study's recommended configuration (:func:`iobo.minimize.recommended`; the system default while no trial
        completed), loaded once."""
        with self._lock:
            if self._production is None:
                self._production = self._load_best()
            return self._production

    def _load_best(self) -> IOConfig:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        space = self.settings.space
        try:
            study = optuna.load_study(study_name=self.study_name, storage=open_storage(self.settings.storage))
        except KeyError:
            study = None
        best = trials.best_trial(study) if study is not None else None
        if best is None:
            self._say(f"{self.name}: study {self.study_name!r} has no completed trial yet: "
                      f"running with the system default configuration")
            return IOConfig.default(space)
        from iobo.minimize import recommended

        values, source = recommended(study, space, self.settings.workload)
        config = IOConfig(values, space)
        changed = ", ".join(f"{name}={format_value(value, space[name].unit)}"
                            for name, value in config.changed().items())
        self._say(f"{self.name}: applying trial {best.number} of study {self.study_name!r} "
                  f"({format_mb_per_s(best.value)} MB/s; {source}): {changed or 'the system default'}")
        return config

    # -- tuning --------------------------------------------------------------------
    def _ask(self):
        with self._lock:
            trial = trials.ask_owned(self._open_study())
            values = trials.record_suggestion(trial, self.settings.space, self.settings.workload)
        return trial, IOConfig(values, self.settings.space)

    def _open_study(self):
        """Create or load the study once; a loaded one must have been made for this task."""
        if self._study is not None:
            return self._study
        from iobo.samplers.registry import make_sampler

        study = trials.open_study(self.settings.storage, self.study_name,
                                  self.settings.sampler or make_sampler("gp", self.settings.seed),
                                  {"task": self.name}, self.settings.space.names,
                                  {trials.SPACE_ATTR: self.settings.space.to_records()})
        trials.enqueue_defaults(study, self.settings.space.default(), self.settings.default_repeats)
        for trial in trials.fail_stale(study):  # an earlier driver was killed while its calls ran
            self._say(f"{self.name}: trial {trial.number} was left RUNNING by a dead driver "
                      f"({trial.user_attrs.get('owner') or 'unknown'}): marked FAIL")
        self._study = study
        return study

    def _finish(self, trial, app_future: Future, kwargs: Mapping[str, Any], done: TrialFuture, config: IOConfig,
                shim: "ShimRun | None") -> None:
        """Tell the trial, then resolve ``done`` like the app's future (even if telling fails)."""
        error = app_future.exception()
        try:
            if error is not None:
                self._tell_fail(trial, f"{type(error).__name__}: {error}")
            else:
                self._tell_measured(trial, app_future, kwargs, config, shim)
        finally:
            if shim is not None:
                shutil.rmtree(shim.directory, ignore_errors=True)
            if error is not None:
                done.set_exception(error)
            else:
                done.set_result(app_future.result())

    def _tell_measured(self, trial, app_future: Future, kwargs: Mapping[str, Any], config: IOConfig,
                       shim: "ShimRun | None") -> None:
        attrs: dict[str, Any] = {}
        report, no_report = shim.read() if shim is not None else (None, "")
        if report is not None:
            (nbytes, seconds), timed_by = run_measure(report), "shim"
            attrs = trials.shim_attrs(report, config.values)
            mpi_io, ompi_io = shim.mpi_io()
            ignored = {k: v for k, v in romio_only(config.space, mpi_io, ompi_io).items() if k in config.changed()}
            attrs.update(mpi_io=mpi_io, not_applied={**attrs["not_applied"], **ignored})  # OMPIO echoes them
        else:
            try:
                nbytes, seconds, timed_by = measure(
                    None if self._returns_exit_code else app_future.result(), kwargs.get("outputs", ()),
                    getattr(app_future, "task_record", {}),
                )
            except KernelError as exc:
                self._tell_fail(trial, str(exc) + (f"; {no_report}" if no_report else ""))
                return
            if no_report:
                attrs["shim_warnings"] = [no_report]
        value = bandwidth_mb_per_s(nbytes, seconds)
        with self._lock:
            for key, attr in (("bytes", nbytes), ("seconds", seconds), ("timed_by", timed_by), *attrs.items()):
                trial.set_user_attr(key, attr)
            self._study.tell(trial, value)
        self._say(f"{self.name}: trial {trial.number} [{trial.user_attrs['role']}] {format_mb_per_s(value)} MB/s "
                  f"({nbytes} bytes in {seconds:.4f} s)")

    def _tell_fail(self, trial, reason: str) -> None:
        with self._lock:
            trial.set_user_attr("fail_reason", reason[:2000])
            self._study.tell(trial, state=trials.state("FAIL"))
        self._say(f"{self.name}: trial {trial.number} FAILED: {reason}")

    def _say(self, line: str) -> None:
        if self.settings.echo:
            self.settings.echo(line)


MPI_IO_FILE = "mpi-io.json"
"""In a :class:`ShimRun`'s directory: the MPI-IO component the call's programs run with (written where it runs)."""
SHIM_ARG = "_iobo_shim"
"""The keyword a bash app's submitted function receives its :class:`ShimRun` in (removed before the app's own)."""


@dataclass(frozen=True)
class ShimRun:
    """Where one call of a bash app keeps its ROMIO hints file and, with ``report``, the shim's report."""

    directory: str
    report: bool

    @property
    def prefix(self) -> str:
        return os.path.join(self.directory, "io")

    def exports(self, config: IOConfig, program: str | os.PathLike | None = None) -> str:
        """The ``export`` lines that run what follows under the shim with ``config`` (where the app runs): the
        shim built for the MPI and HDF5 ``program`` is linked to, when it is named; :class:`ConfigError` when
        there is none (:func:`iobo.adapters.preload_library`)."""
        from iobo.adapters import preload_env

        Path(self.directory).mkdir(parents=True, exist_ok=True)
        hints = os.path.join(self.directory, "romio-hints")
        if config.mpi_hints():
            Path(hints).write_text(config.romio_hints_text())
        env = preload_env(config, hints, self.prefix if self.report else None, program)
        seen = {**os.environ, **env}  # what the command's programs see, for mpi_io()
        Path(self.directory, MPI_IO_FILE).write_text(json.dumps(
            {"mpi_io": io_component(env["LD_PRELOAD"].split(":")[0], seen), "ompi_io": seen.get(OMPI_IO_VARIABLE, "")}))
        return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items())

    def mpi_io(self) -> tuple[str | None, str]:
        """(the MPI-IO component the command's programs ran with, :func:`iobo.shim.io_component`; their
        ``OMPI_MCA_io``), as :meth:`exports` saw them where the app ran; (None, "") when it did not run."""
        try:
            seen = json.loads(Path(self.directory, MPI_IO_FILE).read_text())
        except (OSError, ValueError):
            return None, ""
        return seen.get("mpi_io"), seen.get("ompi_io", "")

    def read(self) -> tuple[dict | None, str]:
        """(the shim's report, None when there is none or it saw no I/O time; why not)."""
        from iobo.adapters import read_report

        try:
            report = read_report(self.prefix)
        except ConfigError as exc:
            return None, f"no shim report: the command started no program under the shim ({exc.args[0][:200]})"
        if run_measure(report)[1] <= 0:
            return None, "the shim's report shows no I/O time: the programs the command ran moved no data"
        return report, ""


class _ShimmedCommand:
    """A bash app's function whose command line starts with :meth:`ShimRun.exports` for the program it runs
    (:func:`iobo.shim.command_program`: the first MPI or HDF5 program, past a launcher and its options), where
    the app runs; a program linked to another MPI or HDF5 than every shim there fails the call with the reason."""

    def __init__(self, func: Callable, config_arg: str) -> None:
        functools.update_wrapper(self, func)
        self.func = func
        self.config_arg = config_arg

    def __call__(self, *args, **kwargs):
        shim = kwargs.pop(SHIM_ARG, None)
        config = kwargs.get(self.config_arg)
        command = self.func(*args, **kwargs)
        if shim is None or config is None or not isinstance(command, str):
            return command
        return shim.exports(config, command_program(command)) + command


def measure(outcome: Any, outputs, task_record: Mapping[str, Any]) -> tuple[int, float, str]:
    """(bytes, seconds, who timed it) of one finished call; :class:`KernelError` when it cannot be measured.

    outcome: the app's result (``None`` for a bash app); outputs: the files
    the call declared; task_record: Parsl's record of the task (its launch
    and return times).
    """
    nbytes = seconds = None
    if isinstance(outcome, int) and not isinstance(outcome, bool):
        nbytes = outcome
    elif isinstance(outcome, Mapping):
        nbytes, seconds = outcome.get("bytes"), outcome.get("seconds")
    if nbytes is None:
        nbytes = _declared_bytes(outputs)
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 1:
        raise KernelError(f"bytes written must be a positive integer; the task reported {nbytes!r}")
    timed_by = "task"
    if seconds is None:
        launched, returned = task_record.get("try_time_launched"), task_record.get("try_time_returned")
        if launched is None or returned is None:
            raise KernelError("the task returned no seconds and Parsl recorded no launch/return time: "
                              "return {'bytes': ..., 'seconds': ...}")
        seconds, timed_by = (returned - launched).total_seconds(), "parsl"
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or seconds <= 0:
        raise KernelError(f"seconds must be a positive number; the task reported {seconds!r}")
    return nbytes, float(seconds), timed_by


def _declared_bytes(outputs) -> int:
    """Total size (bytes) of the files in ``outputs`` (Parsl ``File`` objects or paths)."""
    if not outputs:
        raise KernelError(
            "the task returned neither bytes nor {'bytes': ..., 'seconds': ...} and declared no outputs=[...]: "
            "return the bytes it wrote or pass its files as outputs"
        )
    total = 0
    for output in outputs:
        path = getattr(output, "filepath", output)
        try:
            total += os.path.getsize(path)
        except OSError as exc:
            raise KernelError(f"declared output {os.fspath(path)!r} cannot be measured: {exc.strerror}") from None
    return total

