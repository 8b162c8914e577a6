"""What a kernel takes: its command line, the rules of its options, its search space and its IOConfig.

Validated on rank 0 before any I/O; invalid input prints one line
(``NAME: error: ...``) on stderr and every rank exits with code 2.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iobo.config import IOConfig
from iobo.errors import ConfigError, IoboError, SpaceError
from iobo.kernels import KernelSpec
from iobo.space import Parameter, Space, Workload, io_stack_space

COMMON_OPTION_HELP = {
    "repeats": "run the timed open + writes + close this many times in one process (amortises the "
    "~2 s mpiexec and import start-up when benchmarking); default 1",
    "fsync": "fsync the output files before the timed section ends, so page-cache speed is not "
    "mistaken for storage speed",
    "keep": "keep the output files (default: remove them at the end)",
    "verify": "after timing, reopen the files and check every value written; a mismatch exits non-zero",
}


@dataclass(frozen=True)
class KernelArgs:
    """A kernel's validated command line.

    out: directory of the output files; config_path: the IOConfig JSON file,
    or ``None`` for the system default; options: the kernel's ``SPEC.options``
    with the values given on the command line.
    """

    out: Path
    config_path: Path | None
    options: dict[str, Any]


class _OneLineErrorParser(argparse.ArgumentParser):
    """An argument parser whose errors raise :class:`ConfigError` instead of printing usage."""

    def error(self, message: str):
        raise ConfigError(f"{message} (see --help)")


def flag(option: str) -> str:
    """The command-line flag of a kernel option: ``repeats`` -> ``--repeats``."""
    return "--" + option.replace("_", "-")


def parse_args(spec: KernelSpec, argv: Sequence[str] | None, option_help: Mapping[str, str]) -> KernelArgs:
    """Parse ``--out``, ``--config`` and one flag per option of ``spec``, then check the options.

    Boolean options are switches; the others take a value of their default's
    type. Raises :class:`ConfigError` (one line naming option, value and
    allowed range) for anything invalid.
    """
    parser = _OneLineErrorParser(prog=f"python -m {spec.module}", description=spec.doc, allow_abbrev=False)
    parser.add_argument("--out", type=Path, required=True, metavar="DIR",
                        help="directory of the output files (created if missing)")
    parser.add_argument("--config", type=Path, metavar="FILE.json",
                        help="an IOConfig JSON (as IOConfig.to_json() writes it); default: the system default")
    for name, default in spec.options.items():
        text = option_help.get(name) or COMMON_OPTION_HELP.get(name, "")
        if isinstance(default, bool):
            parser.add_argument(flag(name), dest=name, action="store_true", help=text)
        else:
            parser.add_argument(flag(name), dest=name, type=type(default), default=default,
                                metavar=name.upper(), help=text)
    namespace = parser.parse_args(argv)
    options = {name: getattr(namespace, name) for name in spec.options}
    if spec.check_options is not None:
        spec.check_options(options)
    return KernelArgs(namespace.out, namespace.config, options)


# -- rules of options ------------------------------------------------------------------


def require_int_at_least(options: Mapping[str, Any], name: str, minimum: int) -> None:
    """Raise :class:`ConfigError` unless option ``name`` is an integer >= ``minimum``."""
    value = options[name]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"option {flag(name)}={value!r} is out of range; allowed: an integer >= {minimum}")


def require_bool(options: Mapping[str, Any], name: str) -> None:
    """Raise :class:`ConfigError` unless option ``name`` is ``True`` or ``False``."""
    value = options[name]
    if not isinstance(value, bool):
        raise ConfigError(f"option {flag(name)}={value!r} is not allowed; allowed: true or false (a switch)")


def require_choice(options: Mapping[str, Any], name: str, choices: Sequence[str]) -> None:
    """Raise :class:`ConfigError` unless option ``name`` is one of ``choices``."""
    if options[name] not in choices:
        raise ConfigError(f"option {flag(name)}={options[name]!r} is not allowed; allowed: {', '.join(choices)}")


def require_multiple_of(options: Mapping[str, Any], name: str, unit: int, what: str) -> None:
    """Raise :class:`ConfigError` unless option ``name`` is a multiple of ``unit`` (``what`` explains why)."""
    if options[name] % unit:
        raise ConfigError(f"option {flag(name)}={options[name]} is not a multiple of {unit}; allowed: "
                          f"multiples of {unit} ({what})")


def check_common_options(options: Mapping[str, Any]) -> None:
    """The rules of the options every kernel has: repeats >= 1; fsync, keep, verify switches."""
    require_int_at_least(options, "repeats", 1)
    for name in ("fsync", "keep", "verify"):
        require_bool(options, name)


PHASES = ("write", "read", "write+read")
"""What a read-and-write kernel times: ``read`` writes its input first, untimed."""


def phases(options: Mapping[str, Any]) -> tuple[bool, bool]:
    """(time the writes, time the reads) for option ``phases``."""
    return options["phases"] in ("write", "write+read"), options["phases"] in ("read", "write+read")


def parse_grid(options: Mapping[str, Any], name: str, dims: int) -> tuple[int, ...]:
    """Option ``name`` written ``AxB[xC]`` (``dims`` positive integers) as a tuple; raises :class:`ConfigError`."""
    text = options[name]
    parts = text.lower().split("x") if isinstance(text, str) else []
    if len(parts) != dims or not all(part.isdigit() and int(part) >= 1 for part in parts):
        example = "x".join(["4"] * dims)
        raise ConfigError(f"option {flag(name)}={text!r} is not allowed; allowed: {dims} integers >= 1 "
                          f"joined by 'x' (e.g. {example})")
    return tuple(int(part) for part in parts)


def balanced_grid(ranks: int, dims: int) -> tuple[int, ...]:
    """``dims`` factors of ``ranks``, as equal as possible, largest first (as MPI_Dims_create makes them)."""
    grid = [1] * dims
    factor, rest = 2, ranks
    factors = []
    while rest > 1:
        while rest % factor == 0:
            factors.append(factor)
            rest //= factor
        factor += 1
    for prime in sorted(factors, reverse=True):
        grid[grid.index(min(grid))] *= prime
    return tuple(sorted(grid, reverse=True))


def grid_for_ranks(options: Mapping[str, Any], name: str, dims: int, ranks: int) -> tuple[int, ...]:
    """Blocks along each axis from option ``name``: ``auto`` (one block per rank) or ``AxB[xC]``.

    Raises :class:`ConfigError` unless every rank gets the same number of blocks, at least one.
    """
    if options[name] == "auto":
        return balanced_grid(ranks, dims)
    grid = parse_grid(options, name, dims)
    blocks = math.prod(grid)
    if blocks < ranks or blocks % ranks:
        raise ConfigError(f"option {flag(name)}={options[name]} gives {blocks} block(s) for {ranks} ranks; "
                          f"allowed: a multiple of {ranks} blocks (every rank the same number, at least one), or auto")
    return grid


# -- search spaces ---------------------------------------------------------------------

READ_HINTS = (
    Parameter("romio_cb_read", "mpiio", ("automatic", "enable", "disable"), "automatic", "",
              "collective buffering for reads"),
    Parameter("romio_ds_read", "mpiio", ("automatic", "enable", "disable"), "automatic", "",
              "data sieving for independent reads"),
)
"""ROMIO's read-side hints, for the spaces of kernels that read."""


def stack_subspace(exclude: Sequence[str] = (), extra: Sequence[Parameter] = ()) -> Space:
    """:func:`io_stack_space` without the parameters named in ``exclude``, plus ``extra`` parameters."""
    stack = io_stack_space()
    kept = stack.select(name for name in stack.names if name not in exclude)
    return Space(kept.parameters + tuple(extra), stack.constraints)


# -- the configuration, and all inputs on every rank ------------------------------------


def load_config(path: Path | None, space: Space, workload: Workload) -> IOConfig:
    """The IOConfig in JSON file ``path``, strictly validated against ``space`` and ``workload``.

    ``None`` gives the system default. Raises :class:`ConfigError` or
    :class:`SpaceError` whose message starts with ``--config PATH``.
    """
    if path is None:
        return IOConfig.default(space)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(
            f"--config {path}: cannot be read ({exc.strerror}); give a JSON file written by IOConfig.to_json()"
        ) from exc
    try:
        return IOConfig.from_json(text, space, workload)
    except (ConfigError, SpaceError) as exc:
        raise type(exc)(f"--config {path}: {exc}") from exc


InputCheck = Callable[[KernelArgs, int], Any]
"""A kernel's further check of its inputs on rank 0, ``(args, ranks) -> result`` (an input file's
length...); raises :class:`ConfigError` for bad input."""


def _validate_on_this_rank(spec: KernelSpec, argv, ranks: int, option_help,
                           check: InputCheck | None) -> tuple[KernelArgs, IOConfig, Any] | int:
    """Parsed arguments, config and the check's result, or the exit code after printing an error (2) or --help (0)."""
    try:
        args = parse_args(spec, argv, option_help)
        config = load_config(args.config_path, spec.space(), spec.workload(ranks, args.options))
        checked = check(args, ranks) if check is not None else None
    except IoboError as exc:
        print(f"{spec.name}: error: {exc}", file=sys.stderr, flush=True)
        return 2
    except SystemExit as exc:  # --help has printed its text
        return int(exc.code or 0)
    return args, config, checked


def read_inputs(spec: KernelSpec, comm, argv: Sequence[str] | None = None,
                option_help: Mapping[str, str] | None = None,
                check: InputCheck | None = None) -> tuple[KernelArgs, IOConfig, Any]:
    """Validate the command line, the config and ``check`` on rank 0 and share them with every rank.

    Returns (arguments, configuration, what ``check`` returned or ``None``).
    On invalid input rank 0 prints one line (``NAME: error: ...``) on stderr
    and every rank exits with code 2, before any file is created.
    """
    outcome = _validate_on_this_rank(spec, argv, comm.size, option_help or {}, check) if comm.rank == 0 else None
    outcome = comm.bcast(outcome, root=0)
    if isinstance(outcome, int):
        sys.exit(outcome)
    return outcome
