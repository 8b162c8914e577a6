"""Run a program once under the shim with its I/O traced (``iobo record``), and its trace as a kernel of ``iobo tune``.

- :func:`record`: the program, unchanged (the system default configuration),
  started on R ranks by iobo's MPI launcher in the current directory, with
  ``IOBO_PRELOAD_TRACE`` and a report prefix in a temporary directory; the
  raw trace read (:func:`iobo.replay.read_raw`) into a :class:`Trace` whose
  ``metadata`` holds the command, cwd, ranks, wall and I/O seconds and the
  program's I/O signature.
- :func:`kernel_spec`: a trace as a :class:`iobo.kernels.command.CommandSpec`
  running ``python -m iobo.replay.run TRACE --workdir {workdir}``, named
  ``<program>-kernel``, with the shim objective: everything ``iobo tune
  --command`` does works on it, and its configurations are the program's.
- :func:`program_spec`: the recorded program itself as a command (for the
  fidelity check, :mod:`iobo.replay.check`).
"""

from __future__ import annotations

import datetime
import os
import shlex
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iobo.errors import ConfigError, IoboWarning
from iobo.kernels.command import REPORT_PREFIX, CommandSpec
from iobo.replay._model import Trace

TRACE_PREFIX = "trace/raw"
"""Where, in the recording run's directory, the shim writes ``raw.<rank>.trace.jsonl``."""
RECORD_TIMEOUT_S = 86400.0
"""Default limit of a recording run, seconds (a day): a program computes as long as it does."""
CHECK_SUFFIX = ".check.json"


def command_template(argv: list[str]) -> str:
    """A command line as a template with no placeholder (its braces doubled)."""
    return shlex.join(argv).replace("{", "{{").replace("}", "}}")


@dataclass(frozen=True)
class ProgramRun(CommandSpec):
    """A command run as it is, under the shim: no ``{workdir}`` needed (it writes where it writes), its merged
    shim report in the outcome (``report``), and with ``trace`` its calls traced (``IOBO_PRELOAD_TRACE``, the raw
    files under the run's directory at :data:`TRACE_PREFIX`)."""

    trace: bool = False

    def check(self) -> None:
        with warnings.catch_warnings():  # a program run as recorded writes where it wrote: no {workdir} is expected
            warnings.simplefilter("ignore", IoboWarning)
            super().check()

    def prepare(self, trial_dir, config, options, job):
        launch = super().prepare(trial_dir, config, options, job)
        if self.trace:
            (trial_dir / TRACE_PREFIX).parent.mkdir(parents=True)
            launch.env["IOBO_PRELOAD_TRACE"] = str(trial_dir / TRACE_PREFIX)
        return launch

    def collect(self, stdout, stderr, trial_dir, wall_s, config) -> dict[str, Any]:
        from iobo.adapters import read_report

        outcome = super().collect(stdout, stderr, trial_dir, wall_s, config)
        outcome["report"] = read_report(trial_dir / REPORT_PREFIX)
        return outcome

    @classmethod
    def of(cls, spec: CommandSpec, trace: bool = False) -> "ProgramRun":
        return cls(spec.template, spec.knobs, spec.objective, spec.params, spec.cwd, spec.name, trace)


def record(argv: list[str], ranks: int, workdir: str | os.PathLike | None = None, launcher=None,
           timeout_s: float = RECORD_TIMEOUT_S) -> Trace:
    """Run ``argv`` once on ``ranks`` ranks (no launcher in it: :class:`CommandSpec`'s rule), unchanged, under the
    shim, in the current directory, and return its trace (``workdir``: the directory its paths are taken relative
    to, default the one it wrote into). A program that fails raises :class:`KernelError` with its error."""
    from iobo.launch import KernelJob, MpiexecLauncher, run_kernel
    from iobo.replay._raw import read_raw
    from iobo.replay.signature import signature

    if not argv:
        raise ConfigError("iobo record needs the program to run after --, e.g. iobo record --ranks 4 -- ./app -o out")
    spec = ProgramRun.of(CommandSpec(command_template(argv)), trace=True)
    with tempfile.TemporaryDirectory(prefix="iobo-record-") as scratch:
        job = KernelJob(kernel=spec, values=spec.space().default(), ranks=ranks, workdir=scratch,
                        launcher=launcher or MpiexecLauncher(), timeout_s=timeout_s, keep=True, tag="record")
        outcome = run_kernel(job)
        trace = read_raw(Path(outcome["workdir"]) / TRACE_PREFIX, workdir)
    report = outcome["report"]
    trace.metadata = {
        "command": list(argv), "cwd": spec.cwd, "ranks": ranks, "wall_s": round(outcome["wall_seconds"], 6),
        "io_s": round(report["phase_seconds"], 6), "program": spec.name,
        "recorded_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "signature": signature(report),
    }
    return trace


def default_trace_path(argv: list[str]) -> Path:
    """``<program name>.trace.json`` in the current directory."""
    return Path(f"{CommandSpec(command_template(argv)).name}.trace.json")


def load_trace(path: str | os.PathLike) -> Trace:
    """A trace ``iobo record`` saved, with the metadata a kernel and its check need; :class:`ConfigError` else."""
    trace = Trace.load(path)
    missing = [key for key in ("command", "cwd", "ranks", "signature") if key not in trace.metadata]
    if missing:
        raise ConfigError(f"the trace {path} has no {', '.join(missing)} in its metadata (it was not saved by iobo "
                          f"record): record the program with iobo record --ranks N --out {path} -- PROGRAM ARGS")
    return trace


def check_ranks(trace: Trace, ranks: int, path: str | os.PathLike) -> None:
    """A replay runs on the trace's ranks: :class:`ConfigError` naming both counts and the fix otherwise."""
    if ranks != trace.ranks:
        raise ConfigError(f"the trace {path} was recorded on {trace.ranks} ranks and replays on that many; got "
                          f"--ranks {ranks}: use --ranks {trace.ranks}, or record again with --ranks {ranks} "
                          f"(iobo record --ranks {ranks} -- PROGRAM ARGS)")


def kernel_spec(trace_path: str | os.PathLike, steps: int | None = None, compute: str = "none",
                ranks: int | None = None, params: list[str] | None = None) -> CommandSpec:
    """The trace at ``trace_path`` as a kernel: ``<this python> -m iobo.replay.run TRACE --workdir {workdir}
    [--steps K] [--compute C]``, named ``<program>-kernel``, with the shim objective; ``ranks`` checked against
    the trace's (:func:`check_ranks`). A missing or malformed trace, a bad ``steps`` or ``compute`` raise
    :class:`ConfigError` here, before any job."""
    import argparse

    from iobo.replay.run import compute_factor

    path = Path(trace_path).resolve()
    trace = load_trace(path)
    if ranks is not None:
        check_ranks(trace, ranks, path)
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 1):
        raise ConfigError(f"steps (the repetitions replayed of each repeated block) must be an integer >= 1; got "
                          f"{steps!r}")
    if steps is not None and (mismatch := trace.steps_mismatch()):
        raise ConfigError(f"{path}: {mismatch}")
    try:
        compute_factor(compute)
    except argparse.ArgumentTypeError as exc:
        raise ConfigError(str(exc)) from None
    words = [sys.executable, "-m", "iobo.replay.run", str(path)]
    options = (["--steps", str(steps)] if steps is not None else []) + (
        ["--compute", compute] if compute != "none" else [])
    template = f"{command_template(words)} --workdir {{workdir}}" + (f" {command_template(options)}" if options
                                                                     else "")
    name = f"{trace.metadata.get('program') or Path(trace.program or 'program').name}-kernel"
    return CommandSpec(template, params=params, cwd=str(path.parent), name=name)


def program_spec(trace: Trace) -> CommandSpec:
    """The recorded program: its command line, run in its directory (no ``{workdir}``: it writes where it did)."""
    return CommandSpec(command_template(trace.metadata["command"]), cwd=trace.metadata["cwd"],
                       name=trace.metadata.get("program", ""))


def trace_digest(path: str | os.PathLike) -> str:
    """The SHA-256 of a trace file (a check belongs to one recording)."""
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def check_path(trace_path: str | os.PathLike) -> Path:
    """Where the fidelity check of a trace is stored: ``<trace>.check.json``."""
    return Path(f"{os.fspath(trace_path)}{CHECK_SUFFIX}")


def unchecked_reason(trace_path: str | os.PathLike) -> str | None:
    """Why a trace's kernel is not known faithful (no check, a failed one, one of another trace), or None."""
    import json

    path = check_path(trace_path)
    if not path.is_file():
        return f"it has never been checked against its program (no {path})"
    try:
        check = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return f"its check {path} cannot be read ({exc})"
    if check.get("trace_sha256") != trace_digest(trace_path):
        return f"its check {path} is of another recording (the trace changed since)"
    if not check.get("passed"):
        failed = "; ".join(check.get("failures", [])[:3])
        return f"it failed its check ({path}: {failed})"
    return None


def warn_if_unchecked(trace_path: str | os.PathLike) -> None:
    """An :class:`IoboWarning` when :func:`unchecked_reason` finds one."""
    reason = unchecked_reason(trace_path)
    if reason:
        warnings.warn(IoboWarning(
            f"the kernel of {trace_path} may not do its program's I/O: {reason}; run iobo check --trace "
            f"{trace_path} (it compares their I/O signatures and speedups)"), stacklevel=2)


__all__ = ["CHECK_SUFFIX", "TRACE_PREFIX", "ProgramRun", "check_path", "check_ranks", "command_template",
           "default_trace_path", "kernel_spec", "load_trace", "program_spec", "record", "trace_digest",
           "unchecked_reason",
           "warn_if_unchecked"]
