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
- ``production``: each call runs the app with the study's best configuration
  and returns the app's own future; nothing is recorded. With no completed
  trial (or no study) yet, the system default is used, and said once.

Bandwidth = bytes / seconds / 1e6. The app may return the bytes it wrote (an
int) or ``{"bytes": ..., "seconds": ...}`` (its own timing of the I/O, the
most accurate). Otherwise bytes are the sizes of the files it declares in
``outputs=[...]`` (Parsl's keyword; a bash app's return value is its exit
code, so it always declares them) and seconds the time Parsl's executor held
the task (from launch to result, so milliseconds of dispatch are included:
return your own seconds for I/O shorter than about a second).
"""

from __future__ import annotations

import inspect
import os
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from iobo import trials
from iobo.config import IOConfig
from iobo.errors import ConfigError, KernelError
from iobo.measure import bandwidth_mb_per_s
from iobo.space import Space, Workload, format_value, io_stack_space
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

    def __post_init__(self) -> None:
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
         echo: Callable[[str], None] | None = print) -> Callable[[Any], "TunedApp"]:
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
    finished trial goes (None: silent).
    """
    settings = TuneSettings(study, storage, space or io_stack_space(), workload or Workload(), mode, sampler,
                            seed, default_repeats, config_arg, echo)
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
            return self.app(*args, **kwargs, **{self.settings.config_arg: self.production_config()})
        trial, config = self._ask()
        try:
            app_future = self.app(*args, **kwargs, **{self.settings.config_arg: config})
        except BaseException as exc:
            self._tell_fail(trial, f"not submitted: {type(exc).__name__}: {exc}")
            raise
        done = TrialFuture(trial.number, app_future)
        app_future.add_done_callback(lambda future: self._finish(trial, future, kwargs, done))
        return done

    # -- production ----------------------------------------------------------------
    def production_config(self) -> IOConfig:
        """The study's best configuration (the system default while none completed), loaded once."""
        with self._lock:
            if self._production is None:
                self._production = self._load_best()
            return self._production

    def _load_best(self) -> IOConfig:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        space = self.settings.space
        try:
            best = trials.best_trial(optuna.load_study(study_name=self.study_name,
                                                       storage=open_storage(self.settings.storage)))
        except KeyError:
            best = None
        if best is None:
            self._say(f"{self.name}: study {self.study_name!r} has no completed trial yet: "
                      f"running with the system default configuration")
            return IOConfig.default(space)
        config = IOConfig(trials.config_of(best), space)
        changed = ", ".join(f"{name}={format_value(value, space[name].unit)}"
                            for name, value in config.changed().items())
        self._say(f"{self.name}: applying trial {best.number} of study {self.study_name!r} "
                  f"({best.value:,.0f} MB/s): {changed or 'the system default'}")
        return config

    # -- tuning --------------------------------------------------------------------
    def _ask(self):
        with self._lock:
            trial = self._open_study().ask()
            values = trials.record_suggestion(trial, self.settings.space, self.settings.workload)
        return trial, IOConfig(values, self.settings.space)

    def _open_study(self):
        """Create or load the study once; a loaded one must have been made for this task."""
        if self._study is not None:
            return self._study
        from iobo.samplers.registry import make_sampler

        study = trials.open_study(self.settings.storage, self.study_name,
                                  self.settings.sampler or make_sampler("gp", self.settings.seed),
                                  {"task": self.name}, self.settings.space.names)
        trials.enqueue_defaults(study, self.settings.space.default(), self.settings.default_repeats)
        self._study = study
        return study

    def _finish(self, trial, app_future: Future, kwargs: Mapping[str, Any], done: TrialFuture) -> None:
        """Tell the trial, then resolve ``done`` like the app's future (even if telling fails)."""
        error = app_future.exception()
        try:
            if error is not None:
                self._tell_fail(trial, f"{type(error).__name__}: {error}")
            else:
                self._tell_measured(trial, app_future, kwargs)
        finally:
            if error is not None:
                done.set_exception(error)
            else:
                done.set_result(app_future.result())

    def _tell_measured(self, trial, app_future: Future, kwargs: Mapping[str, Any]) -> None:
        try:
            nbytes, seconds, timed_by = measure(
                None if self._returns_exit_code else app_future.result(), kwargs.get("outputs", ()),
                getattr(app_future, "task_record", {}),
            )
        except KernelError as exc:
            self._tell_fail(trial, str(exc))
            return
        value = bandwidth_mb_per_s(nbytes, seconds)
        with self._lock:
            for key, attr in (("bytes", nbytes), ("seconds", seconds), ("timed_by", timed_by)):
                trial.set_user_attr(key, attr)
            self._study.tell(trial, value)
        self._say(f"{self.name}: trial {trial.number} [{trial.user_attrs['role']}] {value:,.1f} MB/s "
                  f"({nbytes} bytes in {seconds:.4f} s)")

    def _tell_fail(self, trial, reason: str) -> None:
        with self._lock:
            trial.set_user_attr("fail_reason", reason[:2000])
            self._study.tell(trial, state=trials.state("FAIL"))
        self._say(f"{self.name}: trial {trial.number} FAILED: {reason}")

    def _say(self, line: str) -> None:
        if self.settings.echo:
            self.settings.echo(line)


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
        seconds, timed_by = (returned - launched).total_seconds(), "iobo"
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

