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
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from iobo.errors import ConfigError
from iobo.space import Space, Workload


@dataclass(frozen=True)
class KernelSpec:
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


def get(name: "str | KernelSpec") -> KernelSpec:
    """The kernel called ``name``: a user kernel, else a built-in one (a spec is returned as it is)."""
    if isinstance(name, KernelSpec):
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
    """The search space a study was tuned over: its kernel's, else the I/O stack's parameters it names
    (a decorated task's study records them in its ``space`` attr)."""
    from iobo.space import io_stack_space

    attrs = study.user_attrs
    if "kernel" in attrs:
        if attrs["kernel"] in names():
            return get(attrs["kernel"]).space()
        raise ConfigError(f"study {study.study_name!r} tuned kernel {attrs['kernel']!r}, which is not registered in "
                          f"this process; register it (iobo.kernels.register) before reading the study")
    stack = io_stack_space()
    wanted = [n for n in attrs.get("space", []) if n in stack.names]
    if not wanted:
        raise ConfigError(f"study {study.study_name!r} records no kernel and no parameter of the I/O stack "
                          f"(user attr 'space'); it was not made by iobo")
    return stack.select(wanted)


def study_workload(study) -> Workload | None:
    """The workload a kernel study ran (ranks and options from its attrs), or None for other studies."""
    attrs = study.user_attrs
    if attrs.get("kernel") not in names():
        return None
    spec = get(attrs["kernel"])
    return spec.workload(attrs["ranks"], spec.resolve_options(attrs.get("kernel_options", {})))
