"""``iobo`` command line: one module per command (``iobo.cli.<command>``), each with ``add_parser`` and ``run``.

Every study command takes ``--storage URL`` (any Optuna storage; default
``sqlite:///iobo.db``) and ``--study NAME`` (optional when the storage holds
one study).  Errors iobo raises on purpose print one message and exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from iobo.errors import Interrupted, IoboError

COMMANDS = ("tune", "confirm", "minimize", "best", "export", "run", "report", "importance", "space", "kernels",
            "characterize",
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
    130 interrupted by Ctrl-C, 143 stopped by SIGTERM)."""
    args = parser().parse_args(argv)
    try:
        return _module(args.command).run(args)
    except IoboError as exc:
        print(f"iobo: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        print("iobo: interrupted; finished trials are kept, run the same command to resume", file=sys.stderr)
        return exc.exit_code if isinstance(exc, Interrupted) else 130
