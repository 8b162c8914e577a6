"""Launch one kernel run as an MPI job and turn its output into a result.

This is what a trial executes wherever it was placed (a Parsl worker on a
compute node, a Ray actor, or this process): let the job's spec write what
the run needs into the trial's directory (a kernel's configuration file; a
command's hints file and shim environment), start ``mpiexec -n R <argv>``
(``python -m <kernel> ...`` or the user's program), stream its output,
enforce a timeout, and return a plain dict (JSON-able, so any executor can
ship it back).  A failed run raises :class:`KernelError` with the command,
exit code and the tails of stdout and stderr.
"""

from __future__ import annotations

import abc
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iobo import kernels
from iobo.errors import ConfigError, KernelError, KernelPruned
from iobo.config import IOConfig

DEFAULT_MPIEXEC = os.environ.get("IOBO_MPIEXEC", "mpiexec.mpich")
TAIL_LINES = 40
DISK_FULL_MARKERS = ("No space left on device", "ENOSPC", "errno = 28")
"""What a kernel's output says when the file system under test is full (strerror, errno name, HDF5's errno)."""


class MPILauncher(abc.ABC):
    """Builds the command line that starts ``argv`` on ``ranks`` MPI ranks."""

    @abc.abstractmethod
    def command(self, ranks: int, argv: list[str]) -> list[str]: ...

    def check(self, ranks: int) -> None:
        """Raise :class:`ConfigError` before launch if the launcher cannot start ``ranks`` ranks here."""

    def resource_specification(self, ranks: int) -> dict[str, int]:
        """The ``parsl_resource_specification`` a Parsl app running this launcher needs (none by default)."""
        return {}


@dataclass(frozen=True)
class MpiexecLauncher(MPILauncher):
    """``mpiexec -n R [extra...] argv``; ``executable`` must be on PATH.

    Name the MPI flavour explicitly (``mpiexec.mpich``) when several are
    installed, so kernel, mpi4py and h5py agree on one MPI.
    """

    executable: str = DEFAULT_MPIEXEC
    extra_args: tuple[str, ...] = ()

    def command(self, ranks, argv):
        return [self.executable, "-n", str(ranks), *self.extra_args, *argv]

    def check(self, ranks):
        if shutil.which(self.executable) is None:
            raise ConfigError(
                f"MPI launcher {self.executable!r} is not on PATH; install MPICH "
                f"(apt-get install mpich) or name your launcher with --mpiexec / IOBO_MPIEXEC"
            )


@dataclass(frozen=True)
class ParslMPIPrefixLauncher(MPILauncher):
    """Uses ``$PARSL_MPI_PREFIX``, which Parsl's MPI mode sets per task.

    Parsl's MPI mode (``parsl.executors.MPIExecutor``, an HTEX with
    ``enable_mpi_mode``) gives each task the nodes its
    ``parsl_resource_specification`` asks for and composes the prefix
    (``mpiexec -n R -ppn P -hosts ...``, or ``srun``/``aprun``) from them;
    :meth:`resource_specification` is that request, and ``ParslRunner``
    submits every trial with it.

    nodes: nodes each run spans (ranks are spread ``ceil(ranks / nodes)``
    per node); executable: replaces the prefix's first word, to name the MPI
    flavour when several are installed (``mpiexec.mpich``); ``None`` keeps
    Parsl's.
    """

    nodes: int = 1
    executable: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.nodes, bool) or not isinstance(self.nodes, int) or self.nodes < 1:
            raise ConfigError(f"ParslMPIPrefixLauncher nodes must be a positive integer; got {self.nodes!r}")

    def check(self, ranks):
        if ranks < self.nodes:
            raise ConfigError(
                f"a run of {ranks} rank(s) cannot span nodes={self.nodes}; allowed: nodes <= ranks: "
                f"ask for more ranks or fewer nodes"
            )

    def resource_specification(self, ranks):
        return {"num_nodes": self.nodes, "ranks_per_node": -(-ranks // self.nodes), "num_ranks": ranks}

    def command(self, ranks, argv):
        prefix = os.environ.get("PARSL_MPI_PREFIX")
        if not prefix:
            raise ConfigError(
                "PARSL_MPI_PREFIX is not set: this launcher runs only inside a task of a Parsl executor in MPI "
                "mode (MPIExecutor) submitted with a parsl_resource_specification; use MpiexecLauncher elsewhere"
            )
        placed = os.environ.get("PARSL_NUM_RANKS")
        if placed is not None and placed != str(ranks):
            raise ConfigError(
                f"Parsl placed this task for {placed} ranks but the run needs {ranks}: submit it with "
                f"parsl_resource_specification=launcher.resource_specification({ranks})"
            )
        words = prefix.split()
        if self.executable:
            words[0] = self.executable
        return [*words, *argv]


@dataclass(frozen=True)
class KernelJob:
    """Everything one kernel run needs, picklable for any executor.

    kernel: a registered name or the spec itself (a ``KernelSpec``: ship it
    when the kernel was registered in this process only, workers elsewhere
    have their own registry; or a ``CommandSpec``); values: the
    configuration (parameter -> value); options: kernel options;
    workdir: where the trial's directory is made (the file system under test);
    timeout_s: wall-clock limit of the MPI job in seconds; keep: keep files;
    on_step: called where the job runs with each step event, returns True to
    stop the run (a picklable :class:`iobo.pruning.StepReporter`).
    """

    kernel: str | kernels.JobSpec
    values: Mapping[str, Any]
    ranks: int
    workdir: str
    options: Mapping[str, Any] = field(default_factory=dict)
    launcher: MPILauncher = field(default_factory=MpiexecLauncher)
    timeout_s: float = 600.0
    keep: bool = False
    tag: str = ""
    on_step: Callable[[dict], bool | None] | None = None

    def validate(self) -> IOConfig:
        """Every pre-launch check: kernel name, options, configuration, launcher."""
        if not isinstance(self.ranks, int) or self.ranks < 1:
            raise ConfigError(f"ranks must be a positive integer; got {self.ranks!r}")
        if self.timeout_s <= 0:
            raise ConfigError(f"timeout_s must be positive seconds; got {self.timeout_s!r}")
        spec = kernels.get(self.kernel)
        options = spec.resolve_options(self.options)
        config = IOConfig.from_values(self.values, spec.space(), spec.workload(self.ranks, options))
        spec.check()
        self.launcher.check(self.ranks)
        return config


def run_kernel(job: KernelJob, on_step: Callable[[dict], bool | None] | None = None) -> dict[str, Any]:
    """Run ``job`` and return its result dict; raise :class:`KernelError` if it failed.

    on_step, if given, is called with each step event as the kernel prints it
    (for intermediate values), after ``job.on_step``; when either returns
    True the MPI job is killed, its files removed, and :class:`KernelPruned` raised.
    The dict: what the spec's ``collect`` returns (``mb_per_s``, ``bytes``,
    ``seconds``, ``step_mb_per_s``, ``step_elapsed_s``, ``result``), plus
    ``wall_seconds``, ``command`` and, when the files are kept (the job's
    ``keep`` or the option ``keep``), ``workdir`` (the trial's directory).
    """
    config = job.validate()
    spec = kernels.get(job.kernel)
    what = f"{spec.kind} {spec.name!r}"
    options = spec.resolve_options(job.options)
    keep = job.keep or options.get("keep", False)
    trial_dir = (Path(job.workdir) / f"{_run_dir_prefix(job.tag)}{uuid.uuid4().hex[:8]}").resolve()
    try:
        trial_dir.mkdir(parents=True)
    except OSError as exc:
        raise KernelError(f"cannot prepare the run's directory {trial_dir}: {exc.strerror}"
                          f"{_disk_full_note([str(exc)], job.workdir)}", workdir=str(trial_dir)) from None
    try:
        launch = spec.prepare(trial_dir, config, options, job)
        command = job.launcher.command(job.ranks, launch.argv)
        started = time.monotonic()
        callbacks = [f for f in (job.on_step, on_step) if f is not None]
        step = (lambda event: any([bool(f(event)) for f in callbacks])) if callbacks else None
        lines, stderr, code, timed_out, pruned_after = _run(command, launch.cwd or trial_dir, job.timeout_s, step,
                                                            launch.env)
        wall_s = time.monotonic() - started
        ended = {"command": command, "returncode": code, "stdout_tail": _tail(lines), "workdir": str(trial_dir)}
        if pruned_after is not None:
            raise KernelPruned(f"{what} was pruned after {pruned_after} step(s) ({wall_s:.1f} s): slower than "
                               f"the other trials at the same step", **ended)
        if timed_out:
            raise KernelError(f"{what} timed out after {job.timeout_s:g} s and was killed", **ended,
                              stderr_tail=_tail(stderr))
        if code != 0:
            said = program_error(lines, stderr)
            last = next((line.strip() for line in reversed(stderr) if line.strip() and not _noise(line)), "")
            raise KernelError(f"{what} exited with code {code}{_disk_full_note(lines + stderr, job.workdir)}"
                              + (f"; the program said: {said[:300]}" if said else "")
                              + (f"; stderr ends: {last[:300]}" if last and last != said else ""),
                              **ended, stderr_tail=_tail(stderr))
        try:
            outcome = spec.collect(lines, stderr, trial_dir, wall_s, config)
        except KernelError as exc:
            raise KernelError(exc.reason, **ended, stderr_tail=_tail(stderr)) from None
    finally:
        if not keep:
            shutil.rmtree(trial_dir, ignore_errors=True)
    return {**outcome, "wall_seconds": wall_s, "command": command, "workdir": str(trial_dir) if keep else None}


def prepare_workdir(workdir: str | os.PathLike) -> Path:
    """Create ``workdir`` (its parent must exist) and check that files can be written there.

    Raises :class:`ConfigError` (one line) when the directory is under a
    missing directory or a file, or is not writable: before any job starts.
    """
    path = Path(workdir)
    ancestor = path.parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if ancestor != path.parent:
        raise ConfigError(f"workdir {path}: its parent directory {path.parent} does not exist; "
                          f"create it first or choose another --workdir")
    if not ancestor.is_dir():
        raise ConfigError(f"workdir {path} is under {ancestor}, which is a file, not a directory; "
                          f"choose another --workdir")
    if path.exists() and not path.is_dir():
        raise ConfigError(f"workdir {path} is a file, not a directory; choose another --workdir")
    try:
        path.mkdir(exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise ConfigError(f"workdir {path} is not writable ({exc.strerror}); "
                          f"fix its permissions or choose another --workdir") from None
    return path


def remove_run_dirs(workdir: str | os.PathLike, tag: str) -> int:
    """Remove the directories of the runs tagged ``tag`` in ``workdir`` (left by a killed job); returns how many."""
    found = list(Path(workdir).glob(f"{_run_dir_prefix(tag)}*"))
    for path in found:
        shutil.rmtree(path, ignore_errors=True)
    return len(found)


def _run_dir_prefix(tag: str) -> str:
    """The start of the name of a run's directory (``trial-<tag>-<random>``)."""
    return f"trial-{tag or 'run'}-"


def _disk_full_note(lines: list[str], workdir: str) -> str:
    """``": no space left on device at <workdir> (ENOSPC)..."`` when the job's output says so, else ``""``."""
    if any(marker in line for line in lines for marker in DISK_FULL_MARKERS):
        return f": no space left on device at {workdir} (ENOSPC); free space there or choose another --workdir"
    return ""


ERROR_LINE = re.compile(r"(?i:^\W*(error|fatal|abort(ed|ing)?|cannot|can't|could not|unable|failed|failure)\b)|"
                        r"(?i:^[\w.-]+:\s*(error|fatal|cannot|can't|could not|unable)\b)|\bERROR\b|\b[Ee]rror:|"
                        r"(?i:\bfailed\W*$)")
"""A line in which a program states its own error (IOR: ``ERROR: block size must be a multiple of ...``)."""
NOISE = re.compile(r"^\s*(HDF5-DIAG|#\d{3}:|major:|minor:|iobo_preload:|=+$|BAD TERMINATION|PID \d|RUNNING AT|EXIT CODE|"
                   r"CLEANING UP|YOUR APPLICATION|This typically|Please see|application called MPI_Abort|Abort\(\d+\) on node)")
"""Lines that are not the program's words: HDF5's error stack, the shim's, mpiexec's banner on a bad exit."""


def _noise(line: str) -> bool:
    return bool(NOISE.match(line))


def program_error(stdout: Sequence[str], stderr: Sequence[str]) -> str:
    """The first line in which the program states its error, from stderr, else stdout ("" when none does).

    Programs print their errors on either stream (IOR prints ``ERROR: ...`` on stdout); HDF5's error stack,
    the shim's warnings and mpiexec's banner are skipped: they say where a call failed, not why.
    """
    for stream in (stderr, stdout):
        for line in stream:
            text = line.strip()
            if text and not _noise(text) and ERROR_LINE.search(text):
                return text
    return ""


def _tail(lines: list[str]) -> str:
    return "\n".join(line.rstrip("\n") for line in lines[-TAIL_LINES:])


def _step_event(line: str) -> dict | None:
    """The step event a stdout line carries, or None."""
    if not line.startswith("{"):
        return None
    try:
        event = json.loads(line)
    except json.JSONDecodeError:
        return None
    return event if isinstance(event, dict) and event.get("event") == "step" else None


def _die_with_parent() -> None:
    """In the child: get SIGTERM if the launching process dies (Linux prctl)."""
    os.setsid()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


_RUNNING: set[subprocess.Popen] = set()  # MPI jobs started by this process and not yet reaped
_RUNNING_LOCK = threading.Lock()


def kill_running_jobs() -> int:
    """Kill every MPI job this process started that still runs (its whole process group); returns how many.

    For runners whose jobs are started by threads of this process
    (:class:`iobo.runners.local.LocalRunner`): an interrupt of the main thread
    does not reach them.
    """
    with _RUNNING_LOCK:
        running = list(_RUNNING)
    for proc in running:
        _kill_group(proc)
    return len(running)


def _run(command, cwd, timeout_s, on_step, env=None):
    """Start ``command`` in its own process group (environment ``env``, None: this process's); return (stdout
    lines, stderr lines, code, timed_out, pruned_after).

    pruned_after: ``None``, or the number of steps reported when ``on_step``
    returned True and the job was killed (steps the kernel printed while
    dying are in the lines, not in this count).
    """
    try:
        proc = subprocess.Popen(
            command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
            preexec_fn=_die_with_parent, env=None if env is None else dict(env),
        )
    except FileNotFoundError as exc:
        raise ConfigError(f"cannot start {command[0]!r}: {exc}; is it installed and on PATH?") from None
    with _RUNNING_LOCK:
        _RUNNING.add(proc)
    try:
        return _follow(proc, timeout_s, on_step)
    finally:
        with _RUNNING_LOCK:
            _RUNNING.discard(proc)


def _follow(proc: subprocess.Popen, timeout_s, on_step):
    """Read ``proc``'s output until it ends (see :func:`_run`)."""
    stdout: list[str] = []
    stderr: list[str] = []
    pruned_after: int | None = None  # set once, by the stdout reader
    steps = 0

    def pump_stdout():
        nonlocal steps, pruned_after
        for line in proc.stdout:
            stdout.append(line)
            event = _step_event(line) if on_step and pruned_after is None else None
            if event is not None:
                steps += 1
                try:
                    stop = on_step(event)
                except Exception as exc:  # a failing callback must not lose the run
                    stderr.append(f"iobo: step callback failed: {exc!r}\n")
                    continue
                if stop:
                    pruned_after = steps
                    _kill_group(proc)

    def pump_stderr():
        for line in proc.stderr:
            stderr.append(line)
            del stderr[:-200]

    stdout_reader = threading.Thread(target=pump_stdout, daemon=True)
    readers = [stdout_reader, threading.Thread(target=pump_stderr, daemon=True)]
    for reader in readers:
        reader.start()
    timed_out = False
    deadline = time.monotonic() + timeout_s
    try:
        # the job's end closes its output: waiting on the reader sees it at once, where Popen.wait(timeout)
        # polls and sleeps up to 50 ms between looks (a tenth of a 0.25 s replay run); a job whose orphans
        # keep the pipe open is looked at every second
        while proc.poll() is None and stdout_reader.is_alive() and time.monotonic() < deadline:
            stdout_reader.join(timeout=min(1.0, max(0.0, deadline - time.monotonic())))
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
    except BaseException:  # KeyboardInterrupt: do not leave the MPI job running
        _kill_group(proc)
        raise
    for reader in readers:
        reader.join(timeout=5)
    return stdout, stderr, proc.returncode, timed_out, pruned_after


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGTERM the job's process group, SIGKILL after 5 s."""
    for sig, grace in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue
