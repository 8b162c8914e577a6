"""Built-in I/O kernels and the registry that finds kernels by name.

A kernel is a program run under ``mpiexec -n R python -m MODULE [options]``.
It reads an ``IOConfig`` (``--config FILE.json``), applies it through
:mod:`iobo.stack`, writes (or reads) through parallel HDF5 or MPI-IO, and
prints JSON lines on rank 0's stdout: one ``{"event": "step", ...}`` per
step and one final ``{"event": "result", ...}`` (see
:mod:`iobo.kernels.records`). Every built-in kernel's ``main`` follows one
skeleton, :class:`iobo.kernels.run.KernelRun`.

The built-in kernels (:data:`BUILTINS`) are always there; a user kernel is
added with :func:`register` and removed with :func:`unregister` (or for a
block of code with :func:`registered`). A user kernel named like a built-in
one is refused unless registered with ``replace=True``, which shadows that
built-in until the user kernel is unregistered.

What :func:`iobo.launch.run_kernel` launches is a :class:`JobSpec`: a
:class:`KernelSpec` (a Python module run on the ranks) or a
:class:`iobo.kernels.command.CommandSpec` (any program, run under the
preload shim).
"""

from __future__ import annotations

import abc
import contextlib
import importlib
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iobo.config import IOConfig
from iobo.errors import ConfigError
from iobo.space import Space, Workload


@dataclass(frozen=True)
class Launch:
    """How one run starts: ``argv`` (what the MPI launcher starts on every rank), its environment (None: this
    process's) and working directory (None: the trial's directory)."""

    argv: list[str]
    env: Mapping[str, str] | None = None
    cwd: str | None = None


class JobSpec(abc.ABC):
    """Something :func:`iobo.launch.run_kernel` launches on MPI ranks, and the study vocabulary for it.

    Besides the two methods below, a spec has ``name``, ``kind`` (``kernel``
    or ``command``, for messages), ``space()``, ``workload(ranks, options)``,
    ``resolve_options(given)``, ``check()`` (pre-launch checks of the
    program), ``identity(ranks, options)`` (the study attrs naming what is
    tuned, compared on resume) and ``description()`` (more study attrs, so
    that another process can rebuild the spec).
    """

    kind = "kernel"

    @abc.abstractmethod
    def prepare(self, trial_dir: Path, config: IOConfig, options: Mapping[str, Any], job) -> Launch:
        """Write what the run needs into ``trial_dir`` (made, empty) and return how to start it (``job``: the
        :class:`iobo.launch.KernelJob`, for ranks, tag and keep)."""

    @abc.abstractmethod
    def collect(self, stdout: Sequence[str], stderr: Sequence[str], trial_dir: Path, wall_s: float,
                config: IOConfig) -> dict[str, Any]:
        """The result of a run that exited 0: ``mb_per_s``, ``bytes``, ``seconds``, ``step_mb_per_s``,
        ``step_elapsed_s`` and ``result`` (the trial attrs' sources); :class:`KernelError` when it has none."""

    def check(self) -> None:
        """Raise :class:`ConfigError` before launch when the program cannot run here (nothing to check by default)."""


@dataclass(frozen=True)
class KernelSpec(JobSpec):
    """How to launch a kernel and what it can tune.

    module: run as ``python -m module``; options: default kernel options
    (``--name value`` flags); space: the kernel's default search space;
    workload: ``(ranks, options) -> Workload`` for pre-launch checks;
    check_options: raises ``ConfigError`` for invalid options (None: no rules).
    A spec is shipped to wherever a trial runs, so its callables must be
    module-level functions (picklable), not lambdas.
    """

    name: str
    module: str
    space: Callable[[], Space]
    workload: Callable[[int, Mapping[str, Any]], Workload]
    options: Mapping[str, Any] = field(default_factory=dict)
    check_options: Callable[[Mapping[str, Any]], None] = None
    doc: str = ""

    def resolve_options(self, given: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Defaults overlaid with ``given``; unknown names and bad values raise ``ConfigError``."""
        given = dict(given or {})
        unknown = sorted(set(given) - set(self.options))
        if unknown:
            raise ConfigError(
                f"kernel {self.name!r} has no option(s) {unknown}; its options: {', '.join(sorted(self.options))}"
            )
        out = {**self.options, **given}
        if self.check_options is not None:
            self.check_options(out)
        return out

    def argv(self, options: Mapping[str, Any]) -> list[str]:
        """Command-line flags for the kernel's options."""
        args: list[str] = []
        for name, value in options.items():
            flag = "--" + name.replace("_", "-")
            if isinstance(value, bool):
                if value:
                    args.append(flag)
            else:
                args += [flag, str(value)]
        return args

    def prepare(self, trial_dir, config, options, job) -> Launch:
        """``python -m module --out DIR --config FILE.json [options]``, the configuration written to the file."""
        out_dir = trial_dir / "out"
        out_dir.mkdir()
        config_path = trial_dir / "config.json"
        config_path.write_text(config.to_json())
        argv = [sys.executable, "-m", self.module, "--out", str(out_dir), "--config", str(config_path)]
        return Launch(argv + self.argv({**options, "keep": job.keep or options.get("keep", False)}))

    def collect(self, stdout, stderr, trial_dir, wall_s, config) -> dict[str, Any]:
        """The kernel's own JSON result line and step lines (:meth:`iobo.measure.Measurement.from_lines`)."""
        from iobo.measure import Measurement

        measurement = Measurement.from_lines(stdout)
        return {
            "mb_per_s": measurement.mb_per_s,
            "bytes": measurement.bytes,
            "seconds": measurement.seconds,
            "step_mb_per_s": measurement.step_mb_per_s(),
            "step_elapsed_s": measurement.step_elapsed_s(),
            "result": dict(measurement.result),
        }

    def identity(self, ranks: int, options: Mapping[str, Any]) -> dict[str, Any]:
        """Study attrs naming what is tuned: the kernel's name, the ranks and the options."""
        return {"kernel": self.name, "ranks": ranks, "kernel_options": dict(options)}

    def description(self) -> dict[str, Any]:
        """Study attrs from which another process rebuilds a kernel that is not built in (:func:`rebuild`):
        the import paths of its module and functions; nothing for a built-in kernel."""
        if self.name in BUILTINS and get(self.name) is self:
            return {}
        return {KERNEL_SPEC_ATTR: {
            "name": self.name, "module": self.module, "options": dict(self.options), "doc": self.doc,
            **{role: _import_path(fn) for role, fn in (("space", self.space), ("workload", self.workload),
                                                       ("check_options", self.check_options))},
        }}


KERNEL_SPEC_ATTR = "kernel_spec"
"""Study attr describing a kernel that is not built in (:meth:`KernelSpec.description`)."""


def _import_path(fn: Callable | None) -> str | None:
    """``module:qualname`` of a module-level function (None for None)."""
    if fn is None:
        return None
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', repr(fn))}"


def _imported(path: str) -> Callable:
    module_name, _, qualname = path.partition(":")
    if module_name == "__main__" or "<" in qualname:
        raise ConfigError(f"{path} is defined in a script or a function, which another process cannot import: "
                          f"define it at the top level of an importable module")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"module {module_name!r} is not importable here ({exc}): put it on PYTHONPATH") from None
    for part in qualname.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise ConfigError(f"{path} no longer exists in module {module_name!r}")
    return target


def rebuild(name: str, description: Mapping[str, Any] | None) -> KernelSpec:
    """The kernel ``name`` of a study: registered or built in here, else rebuilt from the study's
    :data:`KERNEL_SPEC_ATTR` ``description``; :class:`ConfigError` saying in one line what is missing."""
    if name in names():
        return get(name)
    if not description:
        raise ConfigError(f"kernel {name!r} is not registered in this process and the study does not describe it "
                          f"(made before iobo recorded kernels): register it (iobo.kernels.register) first")
    try:
        return KernelSpec(
            name=name, module=description["module"], space=_imported(description["space"]),
            workload=_imported(description["workload"]), options=dict(description.get("options", {})),
            check_options=_imported(description["check_options"]) if description.get("check_options") else None,
            doc=description.get("doc", ""),
        )
    except ConfigError as exc:
        raise ConfigError(f"kernel {name!r} (registered in another process) cannot be rebuilt here: {exc}; "
                          f"or register it (iobo.kernels.register) first") from None


BUILTINS = ("vpic", "vorpal", "gcrm", "bdcats", "checkpoint", "ior", "tile")
"""The built-in kernels: each is the module ``iobo.kernels.<name>``, whose ``SPEC`` describes it."""

_USER_KERNELS: dict[str, KernelSpec] = {}


def register(spec: KernelSpec, replace: bool = False) -> KernelSpec:
    """Add a user kernel; returns ``spec``.

    A name already taken (by a built-in or another user kernel) raises
    :class:`ConfigError` unless ``replace``: then ``spec`` is used for that
    name until :func:`unregister` (a shadowed built-in comes back).
    """
    if not replace and (spec.name in BUILTINS or spec.name in _USER_KERNELS):
        kind = "built-in" if spec.name in BUILTINS else "registered"
        raise ConfigError(f"kernel name {spec.name!r} is already taken by a {kind} kernel; give your kernel "
                          f"another name, or register(spec, replace=True) to use it in place of that one")
    _USER_KERNELS[spec.name] = spec
    return spec


def unregister(name: str) -> KernelSpec:
    """Remove the user kernel ``name`` (a built-in it shadowed comes back); returns its spec."""
    try:
        return _USER_KERNELS.pop(name)
    except KeyError:
        what = "a built-in kernel, which cannot be removed" if name in BUILTINS else "not registered"
        raise ConfigError(f"cannot unregister kernel {name!r}: it is {what}; registered user kernels: "
                          f"{', '.join(sorted(_USER_KERNELS)) or 'none'}") from None


@contextlib.contextmanager
def registered(spec: KernelSpec, replace: bool = False) -> Iterator[KernelSpec]:
    """``with registered(spec):`` the user kernel ``spec`` is registered inside the block only."""
    register(spec, replace)
    try:
        yield spec
    finally:
        unregister(spec.name)


def get(name: "str | JobSpec") -> JobSpec:
    """The kernel called ``name``: a user kernel, else a built-in one (a spec is returned as it is)."""
    if isinstance(name, JobSpec):
        return name
    if name in _USER_KERNELS:
        return _USER_KERNELS[name]
    if name in BUILTINS:
        return importlib.import_module(f"iobo.kernels.{name}").SPEC
    raise ConfigError(f"unknown kernel {name!r}; known kernels: {', '.join(names())}")


def names() -> list[str]:
    """Every kernel name, built-in and user, sorted."""
    return sorted(set(BUILTINS) | set(_USER_KERNELS))


def study_space(study) -> Space:
    """The search space a study was tuned over: the one it records, else its kernel's (rebuilt when it was
    registered in another process), else the I/O stack's parameters it names (studies made before iobo recorded
    spaces). :class:`ConfigError` in one line when none of these is there."""
    from iobo import trials
    from iobo.space import io_stack_space

    stored = trials.stored_space(study)
    if stored is not None:
        return stored
    attrs = study.user_attrs
    if "kernel" in attrs:
        return rebuild(attrs["kernel"], attrs.get(KERNEL_SPEC_ATTR)).space()
    stack = io_stack_space()
    wanted = [n for n in attrs.get("space", []) if n in stack.names]
    if not wanted:
        raise ConfigError(f"study {study.study_name!r} records no space, kernel or I/O-stack parameter "
                          f"(user attrs {sorted(attrs)}); it was not made by iobo")
    return stack.select(wanted)


def study_workload(study) -> Workload | None:
    """The workload a kernel study ran (ranks and options from its attrs), or None for other studies."""
    attrs = study.user_attrs
    if "kernel" not in attrs:
        return None
    try:
        spec = rebuild(attrs["kernel"], attrs.get(KERNEL_SPEC_ATTR))
    except ConfigError:
        return None
    return spec.workload(attrs["ranks"], spec.resolve_options(attrs.get("kernel_options", {})))
