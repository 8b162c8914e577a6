"""``iobo`` command line: one module per command (``iobo.cli.<command>``), each with ``add_parser`` and ``run``.

Every study command takes ``--storage URL`` (any Optuna storage; default
``sqlite:///iobo.db``) and ``--study NAME`` (optional when the storage holds
one study).  Errors iobo raises on purpose print one message and exit 2.
The ``iobo`` program is :func:`console`; :func:`main` runs one command in-process.
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import os
import signal
import sys
import warnings

from iobo.errors import Interrupted, IoboError, IoboWarning

COMMANDS = ("tune", "confirm", "minimize", "best", "export", "run", "record", "check", "extract", "report",
            "importance", "space", "kernels", "characterize", "shim",
            "dashboard")
"""The commands, in the order ``iobo --help`` lists them; each is the module ``iobo.cli.<name>``."""


def _module(command: str):
    return importlib.import_module(f"iobo.cli.{command}")


def parser() -> argparse.ArgumentParser:
    """The ``iobo`` argument parser: a subcommand per entry of ``COMMANDS``."""
    top = argparse.ArgumentParser(prog="iobo", description="Bayesian-optimization tuner for the HPC I/O stack")
    sub = top.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        _module(command).add_parser(sub)
    return top


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns the exit code (0 done, 1 nothing measured, 2 an error iobo explains,
    130 interrupted by Ctrl-C, 143 stopped by SIGTERM; the program, :func:`console`, exits 141 when the reader
    of its output left, as ``iobo best | head -3`` does)."""
    args = parser().parse_args(argv)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            return _module(args.command).run(args)
    except IoboError as exc:
        print(f"iobo: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        print("iobo: interrupted; finished trials are kept, run the same command to resume", file=sys.stderr)
        return exc.exit_code if isinstance(exc, Interrupted) else 130


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """iobo's own warnings as one line, ``iobo: warning: ...``; others as Python prints them."""
    if issubclass(category, IoboWarning):
        print(f"iobo: warning: {message}", file=sys.stderr)
    else:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def console() -> None:
    """The ``iobo`` program (``[project.scripts]``, ``python -m iobo.cli``): :func:`main`, then a quick exit.

    Once torch is loaded, the interpreter's last step (freeing every module,
    then libtorch's static destructors) takes 0.3-1 s after the command's work is
    done (``experiments/results/importance-time.txt``). Everything before that step
    runs as usual: non-daemon threads are joined, every exit handler runs (Parsl's
    cleanup, multiprocessing's, logging's flush), stdout and stderr are flushed;
    then the process ends with the command's exit code without the teardown.
    """
    exit_code = [1]  # an uncaught exception's status
    atexit.register(_exit_without_teardown, exit_code)  # registered first, so it runs after every other handler
    try:
        exit_code[0] = main()
    except SystemExit as exc:  # argparse: --help (0), a usage error (2)
        exit_code[0] = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        raise
    except BrokenPipeError:
        exit_code[0] = _reader_gone()
    sys.exit(exit_code[0])


def _reader_gone() -> int:
    """The reader of stdout closed the pipe (``iobo best | head -3``): the rest of the output goes to /dev/null,
    without a traceback; returns the exit code of a program SIGPIPE ended, 141 (128 + 13)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + signal.SIGPIPE


def _exit_without_teardown(exit_code: list[int]) -> None:
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # the reader left before the last of the output was written
        exit_code[0] = _reader_gone()
    sys.stderr.flush()
    os._exit(exit_code[0])
