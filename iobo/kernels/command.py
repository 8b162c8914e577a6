"""Tune a program iobo did not write: an external command as a kernel, run under the preload shim.

A :class:`CommandSpec` is a command template, the program's own knobs and
an objective::

    spec = CommandSpec("./app -o {workdir}/out.h5",
                       knobs=(Knob("files", (("shared", ""), ("per_process", "-F"))),))
    Tuner(kernel=spec, ranks=4).run()
    # the same: iobo tune --command './app -o {workdir}/out.h5' --knob files=shared:,per_process:-F --ranks 4

Each trial runs ``mpiexec -n R <command>`` in the directory the spec was
made in (``cwd``; relative paths in the command are taken from there), with
the shim preloaded (``LD_PRELOAD``), the trial's I/O-stack settings as
``IOBO_*`` variables, an absolute ``ROMIO_HINTS`` file and
``IOBO_PRELOAD_REPORT`` set to a fresh prefix in the trial's directory
(:func:`iobo.adapters.program_environment`). ``IOBO_*``, ``ROMIO_HINTS``
and the shim inherited from this process (a sourced export) are dropped, so
a trial runs exactly its configuration.

Template placeholders: ``{ranks}``, ``{workdir}`` (a fresh, empty directory
per trial, removed afterwards unless kept: where the program should write),
``{trial}`` (the trial's number, or ``warmup``) and ``{KNOB}`` for each
fragment knob; ``{{`` and ``}}`` are literal braces. The command is split
into words like a shell would (``shlex``), but not run by a shell.

Knobs (:class:`Knob`, parameters of the ``app`` layer): each value maps to
a fragment of the command (put at ``{KNOB}``, else appended at the end) or,
for an environment knob, to the value of a variable (``""``: unset). The
first value is the program's default, the baseline.

Objectives (:class:`Objective`), by preference: ``shim`` (the default: the
shim's accounting of the I/O calls, :func:`iobo.adapters.run_measure`: the
bytes the program moved at its topmost level, HDF5, else MPI-IO, else
POSIX, over the slowest rank's seconds in its I/O phases: opens, creates,
writes, reads, flushes, syncs and closes, so that what HDF5 does outside
``H5Dwrite``, fill values at ``H5Dcreate`` and chunk flushes at
``H5Dclose`` say, counts too: the figure a program that times its own
checkpoints prints);
``regex:PATTERN`` or ``json:PATH`` on the program's stdout (a bandwidth, in
``unit``); ``wall`` (bytes of the files left in ``{workdir}`` over the
job's wall time). Whatever the objective, the shim's report (what took
effect, the I/O counters) is stored on the trial when there is one.

A spec file (:func:`load_spec`, TOML or JSON) holds the same for long
command lines.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import string
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iobo.adapters import run_measure
from iobo.errors import ConfigError, IoboWarning, KernelError, SpaceError
from iobo.kernels import JobSpec, Launch
from iobo.kernels.inputs import READ_HINTS, stack_subspace
from iobo.shim import OMPI_IO_VARIABLE, io_component, is_launcher, program_word, resolve_program
from iobo.space import Parameter, Space, Workload
from iobo.stack import romio_only

PLACEHOLDERS = ("ranks", "workdir", "trial")
OBJECTIVES = ("shim", "regex", "json", "wall")
UNITS = {"MB/s": 1.0, "MiB/s": 1.048576, "GB/s": 1000.0, "GiB/s": 1073.741824, "KB/s": 0.001, "KiB/s": 0.001024}
"""Bandwidth units a regex or JSON objective may print, and their size in MB/s (MB = 10**6 bytes)."""
RESERVED_ENV = ("LD_PRELOAD", "ROMIO_HINTS")
REPORT_PREFIX = "report/io"
"""Where, in the trial's directory, the shim writes ``io.<rank>.json``."""
TAIL_CHARS = 4000


def stack_space(params: Sequence[str] | None = None) -> Space:
    """The I/O-stack parameters the shim applies (the stack and ROMIO's read hints), or those named in ``params``."""
    full = stack_subspace(extra=READ_HINTS)
    if params is None:
        return full
    unknown = [name for name in params if name not in full]
    if unknown or not params:
        raise ConfigError(f"params must name I/O-stack parameters the shim applies; got {list(params)!r}"
                          f"{f' (unknown: {unknown})' if unknown else ''}; allowed: {', '.join(full.names)}")
    return full.select(params)


@dataclass(frozen=True)
class Knob:
    """A knob of the program: a parameter of the ``app`` layer.

    name: the parameter's name (and placeholder); choices: ``(value,
    fragment)`` pairs in order, the first the default: the fragment is what
    the value adds to the command, or with ``env`` the value the variable
    ``env`` gets (``""``: the variable is unset); doc: one line for the space.
    """

    name: str
    choices: tuple[tuple[str, str], ...]
    env: str | None = None
    doc: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "choices", tuple((str(v), str(f)) for v, f in self.choices))
        if not self.name.isidentifier():
            raise ConfigError(f"knob name {self.name!r} must be an identifier (letters, digits, _), as its "
                              f"placeholder {{{self.name}}} is")
        if self.name in PLACEHOLDERS:
            raise ConfigError(f"knob name {self.name!r} is taken by a placeholder ({', '.join(PLACEHOLDERS)}): "
                              f"rename the knob")
        if self.env is not None and (not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.env)
                                     or self.env.startswith("IOBO_") or self.env in RESERVED_ENV):
            raise ConfigError(f"knob {self.name!r}: env {self.env!r} must be a variable name, not IOBO_* nor "
                              f"{' or '.join(RESERVED_ENV)} (iobo sets those)")
        values = [value for value, _ in self.choices]
        if len(values) < 2 or len(set(values)) != len(values):
            raise ConfigError(f"knob {self.name!r} needs at least two different values; got {values!r}")
        for value, fragment in self.choices:
            if "{" in fragment or "}" in fragment:
                raise ConfigError(f"knob {self.name!r}: the fragment {fragment!r} of {value!r} has a brace; "
                                  f"fragments are literal text, without placeholders")

    @property
    def default(self) -> str:
        return self.choices[0][0]

    def parameter(self) -> Parameter:
        what = f"${self.env}" if self.env else "command fragment"
        doc = self.doc or f"{what}: " + ", ".join(f"{v}={f!r}" for v, f in self.choices)
        return Parameter(self.name, "app", tuple(v for v, _ in self.choices), self.default, "", doc)

    def fragment(self, value: str) -> str:
        return dict(self.choices)[value]

    @classmethod
    def parse(cls, text: str, env: bool = False) -> "Knob":
        """A knob from the command line: ``NAME=VALUE:FRAGMENT,VALUE:FRAGMENT...`` (a value without ``:`` is
        its own fragment); with ``env``, ``VARIABLE=VALUE,VALUE...`` (the knob is named after the variable)."""
        name, sep, body = text.partition("=")
        if not sep or not name or not body:
            form = "VARIABLE=VALUE,VALUE..." if env else "NAME=VALUE:FRAGMENT,VALUE:FRAGMENT..."
            raise ConfigError(f"a knob is written {form}; got {text!r}")
        if env:
            return cls(name, tuple((v, v) for v in body.split(",")), env=name)
        choices = []
        for item in body.split(","):
            value, colon, fragment = item.partition(":")
            choices.append((value, fragment if colon else value))
        return cls(name, tuple(choices))

    def to_attr(self) -> dict[str, Any]:
        return {"name": self.name, "choices": [list(c) for c in self.choices], "env": self.env, "doc": self.doc}

    @classmethod
    def from_attr(cls, attr: Mapping[str, Any]) -> "Knob":
        return cls(attr["name"], tuple(tuple(c) for c in attr["choices"]), attr.get("env"), attr.get("doc", ""))


@dataclass(frozen=True)
class Objective:
    """What a trial's value is (MB/s, maximised).

    kind: ``shim`` (the shim's I/O accounting), ``regex`` (``pattern``: a
    regular expression on stdout; its first group, else the match, of the
    last match is the value), ``json`` (``pattern``: a dotted path, list
    indices as numbers, into the last JSON line on stdout that has it) or
    ``wall`` (bytes of the files left in ``{workdir}`` over the wall time);
    unit: the unit of a regex or JSON value (one of ``UNITS``).
    """

    kind: str = "shim"
    pattern: str = ""
    unit: str = "MB/s"

    def __post_init__(self) -> None:
        if self.kind not in OBJECTIVES:
            raise ConfigError(f"objective {self.kind!r} is unknown; allowed: shim, wall, regex:PATTERN, json:PATH")
        if self.unit not in UNITS:
            raise ConfigError(f"objective unit {self.unit!r} is unknown; allowed: {', '.join(UNITS)}")
        if self.kind in ("regex", "json") and not self.pattern:
            raise ConfigError(f"a {self.kind} objective needs a {'pattern' if self.kind == 'regex' else 'path'}: "
                              f"write {self.kind}:{'PATTERN' if self.kind == 'regex' else 'PATH'}")
        if self.kind == "regex":
            try:
                groups = re.compile(self.pattern).groups
            except re.error as exc:
                raise ConfigError(f"the objective regex {self.pattern!r} does not compile: {exc}") from None
            if groups > 1:
                raise ConfigError(f"the objective regex {self.pattern!r} has {groups} groups; allowed: at most one, "
                                  f"around the number (use (?:...) for the others)")

    @classmethod
    def parse(cls, text: str, unit: str = "MB/s") -> "Objective":
        """``shim``, ``wall``, ``regex:PATTERN`` or ``json:PATH``."""
        kind, colon, pattern = text.partition(":")
        if kind in ("shim", "wall") and colon:
            raise ConfigError(f"objective {kind!r} takes no argument; got {text!r}")
        return cls(kind, pattern, unit)

    def describe(self) -> str:
        if self.kind == "shim":
            return "the shim's I/O accounting (bytes over the slowest rank's seconds in its I/O phases)"
        if self.kind == "wall":
            return "bytes of the files left in {workdir} over the job's wall time"
        return f"{self.kind} {self.pattern!r} on stdout, in {self.unit}"

    def measure(self, stdout: Sequence[str], report: Mapping[str, Any] | None, no_report: str, workdir: Path,
                wall_s: float) -> tuple[float, int, float]:
        """(MB/s, bytes, seconds) of one run; :class:`KernelError` with the reason, and the last line the program
        printed, when the run does not show it (a program that quits early usually says why there)."""
        try:
            return self._measure(stdout, report, no_report, workdir, wall_s)
        except KernelError as exc:
            said = next((line.strip() for line in reversed(stdout) if line.strip()), "")
            ends = f"its output ends: {said[:200]!r}" if said else "it printed nothing"
            raise KernelError(f"{exc.reason}; {ends}") from None

    def _measure(self, stdout: Sequence[str], report: Mapping[str, Any] | None, no_report: str, workdir: Path,
                 wall_s: float) -> tuple[float, int, float]:
        moved, shim_seconds = run_measure(report) if report else (0, 0.0)
        if self.kind == "shim":
            if report is None:
                raise KernelError(f"no I/O accounting: {no_report}; or choose --objective regex:, json: or wall")
            if not moved or shim_seconds <= 0:
                raise KernelError("the shim saw no I/O by the program (no HDF5, MPI-IO or POSIX read or write it "
                                  "intercepts): choose --objective regex:, json: or wall")
            return moved / shim_seconds / 1e6, moved, shim_seconds
        if self.kind == "wall":
            left = sum(p.stat().st_size for p in workdir.rglob("*") if p.is_file() and not p.is_symlink())
            if not left:
                raise KernelError("the program left no file in {workdir}: the wall objective counts the bytes of "
                                  "what it writes there; put its output in {workdir}")
            return left / wall_s / 1e6, left, wall_s
        value = self._printed(stdout)
        if value <= 0:
            raise KernelError(f"the objective {self.describe()} read {value}; a bandwidth must be positive")
        return value * UNITS[self.unit], moved, shim_seconds

    def _printed(self, stdout: Sequence[str]) -> float:
        if self.kind == "regex":
            matches = list(re.finditer(self.pattern, "".join(stdout), re.MULTILINE))
            if not matches:
                raise KernelError(f"the program's output has no match for the objective regex {self.pattern!r}")
            text = matches[-1].group(1 if matches[-1].re.groups else 0)
            try:
                return float(text)
            except (TypeError, ValueError):
                raise KernelError(f"the objective regex {self.pattern!r} matched {text!r}, not a number") from None
        for line in reversed(stdout):
            line = line.strip()
            if not line.startswith(("{", "[")):
                continue
            try:
                found: Any = json.loads(line)
            except json.JSONDecodeError:
                continue
            for part in self.pattern.split("."):
                if isinstance(found, Mapping):
                    found = found.get(part)
                elif isinstance(found, list) and part.isdigit() and int(part) < len(found):
                    found = found[int(part)]
                else:
                    found = None
            if isinstance(found, (int, float)) and not isinstance(found, bool):
                return float(found)
        raise KernelError(f"no JSON line on the program's stdout has a number at {self.pattern!r}")

    def to_attr(self) -> dict[str, Any]:
        return {"kind": self.kind, "pattern": self.pattern, "unit": self.unit}

    @classmethod
    def from_attr(cls, attr: Mapping[str, Any]) -> "Objective":
        return cls(attr["kind"], attr.get("pattern", ""), attr.get("unit", "MB/s"))


@dataclass(frozen=True)
class CommandSpec(JobSpec):
    """A program to tune: a command template, its knobs, the objective, the I/O-stack parameters tuned.

    template: the program and its arguments (placeholders: see the module);
    knobs: the program's own :class:`Knob` s; objective: an
    :class:`Objective`; params: the I/O-stack parameters tuned (None: all the
    shim applies); cwd: where the command runs (default: this process's
    working directory, made absolute); name: for study names and messages
    (default: the program's file name). Everything is checked here, before
    any job starts.
    """

    template: str
    knobs: tuple[Knob, ...] = ()
    objective: Objective = field(default_factory=Objective)
    params: tuple[str, ...] | None = None
    cwd: str = ""
    name: str = ""

    kind = "command"

    def __post_init__(self) -> None:
        object.__setattr__(self, "knobs", tuple(self.knobs))
        object.__setattr__(self, "params", None if self.params is None else tuple(self.params))
        object.__setattr__(self, "cwd", os.path.abspath(self.cwd or os.getcwd()))
        if not isinstance(self.template, str) or not self.template.strip():
            raise ConfigError(f"the command template is empty ({self.template!r}): give the program and its "
                              f"arguments, e.g. './app -o {{workdir}}/out.h5'")
        names = [knob.name for knob in self.knobs]
        stack = stack_space(self.params)
        clashes = sorted({n for n in names if names.count(n) > 1} | (set(names) & set(stack.names)))
        if clashes:
            raise ConfigError(f"knob names must be unique and not name an I/O-stack parameter; repeated or taken: "
                              f"{clashes}")
        fields = self._fields()
        env_knobs = {k.name for k in self.knobs if k.env}
        allowed = set(PLACEHOLDERS) | (set(names) - env_knobs)
        unknown = [f for f in fields if f not in allowed]
        if unknown:
            hint = f" ({', '.join(sorted(set(unknown) & env_knobs))} set environment variables)" \
                if set(unknown) & env_knobs else ""
            raise ConfigError(
                f"the command template uses {', '.join('{' + f + '}' for f in unknown)}, which is not a placeholder"
                f"{hint}; allowed: {', '.join('{' + p + '}' for p in sorted(allowed))}; write {{{{ and }}}} for "
                f"literal braces"
            )
        argv, _ = self.render(self.space().default(), Path(self.cwd), "0", 1)
        program = program_word(argv)
        if is_launcher(program):
            raise ConfigError(f"the command starts with the MPI launcher {program!r}; iobo starts the program on "
                              f"--ranks ranks itself: give the program and its arguments only")
        if not self.name:
            object.__setattr__(self, "name", Path(program).name)

    def _fields(self) -> list[str]:
        """The placeholders the template names; :class:`ConfigError` for a malformed one."""
        try:
            parsed = list(string.Formatter().parse(self.template))
        except ValueError as exc:
            raise ConfigError(f"the command template {self.template!r} is malformed ({exc}); write {{{{ and }}}} "
                              f"for literal braces") from None
        fields = []
        for _, name, format_spec, conversion in parsed:
            if name is None:
                continue
            if not name.isidentifier() or format_spec or conversion:
                shown = "{" + name + (f"!{conversion}" if conversion else "") + (f":{format_spec}" if format_spec
                                                                                 else "") + "}"
                raise ConfigError(f"the command template's {shown} is not a placeholder; allowed: "
                                  f"{', '.join('{' + p + '}' for p in PLACEHOLDERS)} and {{KNOB}}, plain names")
            fields.append(name)
        return fields

    # -- what is tuned -----------------------------------------------------------
    def space(self) -> Space:
        """The I/O-stack parameters tuned, then the knobs (the ``app`` layer)."""
        stack = stack_space(self.params)
        try:
            return Space(stack.parameters + tuple(k.parameter() for k in self.knobs), stack.constraints)
        except SpaceError as exc:
            raise ConfigError(f"the knobs do not make a valid space: {exc}") from None

    def workload(self, ranks: int, options: Mapping[str, Any]) -> Workload:
        """Only the ranks: iobo does not know the program's dataset sizes (the shim never makes a chunk larger
        than its dataset)."""
        return Workload(ranks=ranks)

    def resolve_options(self, given: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """One option, ``keep`` (keep each trial's directory: its ``{workdir}``, hints file and shim report)."""
        given = dict(given or {})
        unknown = sorted(set(given) - {"keep"})
        if unknown:
            raise ConfigError(f"a command takes no option {unknown}, only keep=true; put the program's own options "
                              f"in the command, or make them knobs")
        keep = given.get("keep", False)
        if not isinstance(keep, bool):
            raise ConfigError(f"option keep must be true or false; got {keep!r}")
        return {"keep": keep}

    def identity(self, ranks: int, options: Mapping[str, Any]) -> dict[str, Any]:
        return {"command": self.to_attr(), "ranks": ranks}

    def description(self) -> dict[str, Any]:
        return {}

    # -- running it --------------------------------------------------------------
    def render(self, values: Mapping[str, Any], workdir: Path, trial: str, ranks: int
               ) -> tuple[list[str], dict[str, str | None]]:
        """(argv, environment knobs) for a configuration's ``values``: the template filled in, the fragments of
        knobs without a placeholder appended; each environment knob's variable -> value (None: unset it)."""
        fields = set(self._fields())
        filled = {"ranks": str(ranks), "workdir": shlex.quote(str(workdir)), "trial": shlex.quote(trial)}
        env: dict[str, str | None] = {}
        tail = []
        for knob in self.knobs:
            value = values.get(knob.name, knob.default)
            if knob.env:
                env[knob.env] = knob.fragment(value) or None
            elif knob.name in fields:
                filled[knob.name] = knob.fragment(value)
            else:
                tail.append(knob.fragment(value))
        text = " ".join([self.template.format_map(filled), *tail])
        try:
            argv = shlex.split(text)
        except ValueError as exc:
            raise ConfigError(f"the command {text!r} cannot be split into words ({exc}): check its quotes") from None
        if not argv:
            raise ConfigError(f"the command template {self.template!r} gives no program to run")
        return argv, env

    def program_path(self, argv: Sequence[str]) -> Path | None:
        """The executable a rendered command line runs (:func:`iobo.shim.program_word`; relative to the command's
        directory, or found on PATH); None when there is none."""
        return resolve_program(program_word(argv), self.cwd)

    def check(self) -> None:
        """The program exists here, the working directory exists, a shim is built for the MPI and HDF5 the
        program is linked to (:func:`iobo.adapters.preload_library`)."""
        from iobo.adapters import preload_library

        if not Path(self.cwd).is_dir():
            raise ConfigError(f"the command's working directory {self.cwd} does not exist here; run from a "
                              f"machine that has it, or make the spec again where the program is")
        argv = self.render(self.space().default(), Path(self.cwd), "0", 1)[0]
        path = self.program_path(argv)
        if path is None:
            program = program_word(argv)
            raise ConfigError(f"the program {program!r} of the command is not an executable file (looked "
                              f"{'in ' + self.cwd if '/' in program else 'on PATH'}): build it or fix the command")
        preload_library(path)
        if "workdir" not in self._fields():
            warnings.warn(IoboWarning(
                f"the command {self.template!r} has no {{workdir}}: every trial writes where the program chooses "
                f"(relative paths from {self.cwd}), so trials overwrite one another's files, leave them behind, and "
                f"the file system is the one the program writes to, not --workdir's; put the output path under "
                f"{{workdir}} (a fresh directory per trial), e.g. -o {{workdir}}/out.h5"), stacklevel=2)

    def mpi_io(self) -> tuple[str | None, str]:
        """(the MPI-IO component the program runs with here under its shim, :func:`iobo.shim.io_component`;
        the ``OMPI_MCA_io`` of this environment, "" when unset)."""
        from iobo.adapters import preload_library

        path = self.program_path(self.render(self.space().default(), Path(self.cwd), "0", 1)[0])
        return io_component(preload_library(path)), os.environ.get(OMPI_IO_VARIABLE, "")

    def prepare(self, trial_dir, config, options, job) -> Launch:
        """``{workdir}`` made, the hints file written, the shim environment with a report prefix, the knobs."""
        from iobo.adapters import program_environment

        workdir = trial_dir / "work"
        workdir.mkdir()
        (trial_dir / REPORT_PREFIX).parent.mkdir(parents=True)
        argv, knobs = self.render(config.values, workdir, job.tag or "run", job.ranks)
        env = program_environment(config, trial_dir / "romio-hints", trial_dir / REPORT_PREFIX,
                                  program=self.program_path(argv))
        for variable, value in knobs.items():
            if value is None:
                env.pop(variable, None)
            else:
                env[variable] = value
        return Launch(argv, env, self.cwd)

    def collect(self, stdout, stderr, trial_dir, wall_s, config) -> dict[str, Any]:
        """The objective's value; the shim's report (what took effect, the counters) when the program wrote one."""
        from iobo import adapters, trials

        workdir = trial_dir / "work"
        try:
            report, no_report = adapters.read_report(trial_dir / REPORT_PREFIX), ""
        except ConfigError as exc:
            report, no_report = None, (f"the program wrote no shim report (it did not reach MPI_Finalize or exit "
                                       f"with the shim loaded, or is linked statically with MPI): {exc}")
        mb_per_s, nbytes, seconds = self.objective.measure(stdout, report, no_report, workdir, wall_s)
        result: dict[str, Any] = trials.shim_attrs(report, config.values) if report else {
            "shim_warnings": [no_report]}
        mpi_io, ompi_io = self.mpi_io()
        ignored = {k: v for k, v in romio_only(config.space, mpi_io, ompi_io).items() if k in config.changed()}
        if ignored:  # OMPIO echoes the hints it ignores: the shim read them back "in effect"
            result["not_applied"] = {**result.get("not_applied", {}), **ignored}
        result.update({
            "requested_hints": config.mpi_hints(),
            "fs_type": file_system_written(report, workdir),
            "mpi_io": mpi_io,
            "ompi_io": ompi_io,
            "measured_by": self.objective.describe(),
            "stdout_tail": "".join(stdout)[-TAIL_CHARS:],
        })
        return {"mb_per_s": mb_per_s, "bytes": nbytes, "seconds": seconds, "step_mb_per_s": [],
                "step_elapsed_s": [], "result": result}

    # -- stored on the study -----------------------------------------------------
    def to_attr(self) -> dict[str, Any]:
        """JSON-able, for the study (``command`` attr): :meth:`from_attr` rebuilds the spec in any process."""
        return {"template": self.template, "knobs": [k.to_attr() for k in self.knobs],
                "objective": self.objective.to_attr(), "params": None if self.params is None else list(self.params),
                "cwd": self.cwd, "name": self.name}

    @classmethod
    def from_attr(cls, attr: Mapping[str, Any]) -> "CommandSpec":
        try:
            return cls(attr["template"], tuple(Knob.from_attr(k) for k in attr.get("knobs", ())),
                       Objective.from_attr(attr.get("objective", {"kind": "shim"})), attr.get("params"),
                       attr.get("cwd", ""), attr.get("name", ""))
        except (KeyError, TypeError) as exc:
            raise ConfigError(f"the study's command attr is not one iobo wrote ({exc!r}): {str(attr)[:200]}") from None

    def knob_args(self, values: Mapping[str, Any]) -> tuple[list[str], dict[str, str | None], dict[str, str]]:
        """The knobs of ``values`` set away from their defaults, for a production command: (the words to append,
        of the knobs the template appends; variable -> value of the environment knobs (None: unset); knob ->
        fragment of the knobs the template places at ``{KNOB}``, which only the program's user can place)."""
        words: list[str] = []
        env: dict[str, str | None] = {}
        placed: dict[str, str] = {}
        fields = set(self._fields())
        for knob in self.knobs:
            value = values.get(knob.name, knob.default)
            if value == knob.default:
                continue
            if knob.env:
                env[knob.env] = knob.fragment(value) or None
            elif knob.name in fields:
                placed[knob.name] = knob.fragment(value)
            else:
                words += shlex.split(knob.fragment(value))
        return words, env, placed

    def env_text(self, config, hints_path: str) -> str:
        """``iobo export --format env`` of a configuration of this command: the I/O stack's ``export`` lines
        (:meth:`IOConfig.env_text`, without the knobs), then :meth:`knob_args` as shell lines: ``export``/``unset``
        of the environment knobs, a comment with the words to add to the command."""
        from iobo.config import IOConfig

        stack = config.space.select([p.name for p in config.space if p.layer != "app"])
        text = IOConfig({k: v for k, v in config.values.items() if k in stack}, stack).env_text(hints_path)
        words, env, placed = self.knob_args(config.values)
        lines = [f"export {k}={shlex.quote(v)}" if v is not None else f"unset {k}" for k, v in env.items()]
        if words:
            lines.append(f"# add to the end of the command: {shlex.join(words)}  (iobo run -- PROGRAM ARGS adds it)")
        lines += [f"# put {fragment!r} where the command template has {{{name}}}: {self.template}"
                  for name, fragment in placed.items()]
        return text + "".join(line + "\n" for line in lines)


def load_spec(path: str | os.PathLike, **overrides: Any) -> CommandSpec:
    """A :class:`CommandSpec` from a TOML (``.toml``) or JSON file; ``overrides`` (not None) replace its fields.

    Keys: ``command`` (the template), ``name``, ``params`` (list of
    I/O-stack parameters), ``objective`` (``"shim"``, ``"wall"``,
    ``{regex = "...", unit = "MiB/s"}`` or ``{json = "a.b"}``) and
    ``knobs``, a table per knob: ``fragments = {value = "fragment", ...}``
    or ``env = "VARIABLE"`` with ``values = [...]`` (or ``{value =
    "variable's value"}``), and an optional ``doc``. Relative paths in the
    command are taken from the file's directory.
    """
    import tomllib

    path = Path(path)
    try:
        text = path.read_text()
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"the command spec {path} must be a readable TOML or JSON file: {exc}") from None
    known = {"command", "name", "params", "objective", "knobs"}
    if not isinstance(data, dict) or "command" not in data or set(data) - known:
        others = ", ".join(sorted(known - {"command"}))
        raise ConfigError(f"the command spec {path} needs `command` and may have {others}; got keys {sorted(data) if isinstance(data, dict) else type(data).__name__}")
    knobs = []
    for name, body in (data.get("knobs") or {}).items():
        if not isinstance(body, dict) or ("fragments" in body) == ("env" in body):
            raise ConfigError(f"knob {name!r} in {path} needs either `fragments = {{value = \"fragment\"}}` or "
                              f"`env = \"VARIABLE\"` with `values`; got {body!r}")
        if "fragments" in body:
            if not isinstance(body["fragments"], dict):
                raise ConfigError(f"knob {name!r} in {path}: fragments must be a table value -> fragment")
            choices = tuple(body["fragments"].items())
        else:
            values = body.get("values")
            choices = tuple(values.items()) if isinstance(values, dict) else tuple((v, v) for v in values or ())
        knobs.append(Knob(name, choices, body.get("env"), body.get("doc", "")))
    objective = data.get("objective", "shim")
    if isinstance(objective, dict):
        kinds = [k for k in ("regex", "json") if k in objective]
        if len(kinds) != 1 or set(objective) - {"regex", "json", "unit"}:
            raise ConfigError(f"objective in {path} must be \"shim\", \"wall\", {{regex = ..., unit = ...}} or "
                              f"{{json = ..., unit = ...}}; got {objective!r}")
        objective = Objective(kinds[0], objective[kinds[0]], objective.get("unit", "MB/s"))
    else:
        objective = Objective.parse(str(objective))
    fields = {"template": data["command"], "knobs": tuple(knobs), "objective": objective,
              "params": data.get("params"), "cwd": str(path.resolve().parent), "name": data.get("name", "")}
    fields.update({k: v for k, v in overrides.items() if v is not None})
    return CommandSpec(**fields)


def file_system_written(report: Mapping[str, Any] | None, workdir: Path) -> str:
    """The type of the file system the program's files are on, as the shim saw them opened (statfs at each HDF5
    and MPI-IO open): ``lustre`` when any was on Lustre (its striping can act), else the type most were on; a
    type the shim did not know is looked up by the file's path here. ``workdir``'s when the shim saw no file
    (no report, or POSIX I/O only)."""
    from collections import Counter

    from iobo.stack import filesystem_type

    found: Counter[str] = Counter()
    for files in (report["effective"]["files"].values() if report else ()):
        for entry in files.values():
            fs_type = entry.get("fs_type") or "unknown"
            if fs_type.startswith("unknown") and entry.get("path"):
                fs_type = filesystem_type(Path(entry["path"]).parent)
            found[fs_type] += 1
    if not found:
        return filesystem_type(workdir)
    return "lustre" if "lustre" in found else found.most_common(1)[0][0]
