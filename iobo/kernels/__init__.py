"""Built-in I/O kernels and the registry that finds them by name.

A kernel is a program run under ``mpiexec -n R python -m MODULE [options]``.
It reads an ``IOConfig`` (``--config FILE.json``), applies it, writes (or
reads) through parallel HDF5, and prints JSON lines on rank 0's stdout:
one ``{"event": "step", ...}`` per timestep and one final
``{"event": "result", ...}`` (see :mod:`iobo.kernels.records`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
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


_REGISTRY: dict[str, KernelSpec] = {}


def register(spec: KernelSpec) -> KernelSpec:
    """Add a kernel to the registry (a user kernel may replace a built-in one)."""
    _REGISTRY[spec.name] = spec
    return spec


def get(name: "str | KernelSpec") -> KernelSpec:
    """The registered kernel called ``name`` (a spec is returned as it is)."""
    if isinstance(name, KernelSpec):
        return name
    _load_builtins()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ConfigError(f"unknown kernel {name!r}; known kernels: {', '.join(sorted(_REGISTRY))}") from None


def names() -> list[str]:
    _load_builtins()
    return sorted(_REGISTRY)


def _load_builtins() -> None:
    if "vpic" not in _REGISTRY:
        from iobo.kernels import bdcats, checkpoint, gcrm, ior, tile, vorpal, vpic

        for module in (vpic, vorpal, gcrm, bdcats, checkpoint, ior, tile):
            register(module.SPEC)
