"""The one exception root of iobo and its few specialisations.

Every message states the rule that was broken, the value seen and the fix, so
that a user reading a failed job's log knows what to change without the source.
"""

from __future__ import annotations


class IoboError(Exception):
    """Root of every error iobo raises on purpose."""


class IoboWarning(UserWarning):
    """Not an error: a setting iobo accepts that will likely give results the user does not want (a command
    whose output path is not under ``{workdir}``); the message says why and the fix."""


class SpaceError(IoboError, ValueError):
    """A parameter, value or constraint of a search space is invalid."""


class ConfigError(IoboError, ValueError):
    """A configuration (tuner, kernel, site) is invalid; raised before launch."""


class Interrupted(KeyboardInterrupt):
    """Not an error: the tuner was stopped by a signal (SIGINT or SIGTERM); ``signum`` says which.

    A ``KeyboardInterrupt``, so every clean-up path that handles Ctrl-C
    handles it; the command line exits with ``128 + signum`` (130, 143), as
    a shell reports a process ended by that signal.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class JobEnded(IoboError):
    """A launched job ended without a result: the base of :class:`KernelError` and :class:`KernelPruned`.

    Carries what a user needs to debug the job, as Parsl's ``SubmitException``
    does: the command line, exit code, the tails of stdout and stderr, and the
    working directory.
    """

    def __init__(
        self,
        reason: str,
        *,
        command: list[str] | None = None,
        returncode: int | None = None,
        stdout_tail: str = "",
        stderr_tail: str = "",
        workdir: str | None = None,
    ) -> None:
        self.reason = reason
        self.command = command or []
        self.returncode = returncode
        self.stdout_tail = stdout_tail
        self.stderr_tail = stderr_tail
        self.workdir = workdir
        super().__init__(self._message())

    def _message(self) -> str:
        lines = [self.reason]
        if self.command:
            lines.append("command: " + " ".join(self.command))
        if self.returncode is not None:
            lines.append(f"exit code: {self.returncode}")
        if self.workdir:
            lines.append(f"workdir: {self.workdir}")
        if self.stderr_tail:
            lines.append("stderr tail:\n" + self.stderr_tail)
        return "\n".join(lines)

    def __reduce__(self):  # keep the fields when Parsl pickles the exception
        return (
            _rebuild_kernel_error,
            (self.reason, self.command, self.returncode, self.stdout_tail, self.stderr_tail, self.workdir,
             type(self)),
        )


class KernelError(JobEnded):
    """A launched I/O kernel failed: non-zero exit, timeout or unreadable result."""


class WorkerLost(KernelError):
    """The worker running a job was lost with its batch job (cancelled, past its walltime, its node gone): the
    run never cleaned up after itself, so whoever records the failure removes what it left."""


class KernelPruned(JobEnded):
    """A kernel run stopped early on purpose: its steps were slower than the other trials' (pruning).

    Not an error: the trial is told PRUNED, not FAIL.
    """


def _rebuild_kernel_error(reason, command, returncode, stdout_tail, stderr_tail, workdir, cls=KernelError):
    return cls(
        reason,
        command=command,
        returncode=returncode,
        stdout_tail=stdout_tail,
        stderr_tail=stderr_tail,
        workdir=workdir,
    )
