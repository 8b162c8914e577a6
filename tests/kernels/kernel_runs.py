"""Helpers shared by the kernel tests: running a kernel under real MPI and checking its exit."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

__all__ = ["RANKS", "KernelRun", "assert_ok", "assert_rejected", "module_dir", "run_kernel_cli"]

MPIEXEC = "mpiexec.mpich"
RANKS = 2


@dataclass(frozen=True)
class KernelRun:
    """What one kernel launch printed and returned."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def lines(self) -> list[dict[str, Any]]:
        """Every stdout line, parsed as JSON."""
        return [json.loads(line) for line in self.stdout.splitlines()]

    @property
    def steps(self) -> list[dict[str, Any]]:
        return [line for line in self.lines if line["event"] == "step"]

    @property
    def result(self) -> dict[str, Any]:
        """The final line, which must be the result."""
        last = self.lines[-1]
        assert last["event"] == "result", f"last stdout line is not the result: {last}"
        return last


def run_kernel_cli(module: str, out: Path, *flags: str, config: Mapping[str, Any] | None = None,
                   ranks: int = RANKS, timeout: float = 120) -> KernelRun:
    """Run ``mpiexec.mpich -n ranks python -m module --out out [--config FILE] flags``.

    ``config`` is written as JSON beside ``out`` (not in it, so ``out`` holds
    only what the kernel wrote).
    """
    assert shutil.which(MPIEXEC), f"{MPIEXEC} not found: install MPICH (make setup)"
    command = [MPIEXEC, "-n", str(ranks), sys.executable, "-m", module, "--out", str(out), *flags]
    if config is not None:
        config_file = out.parent / f"{out.name}.config.json"
        config_file.write_text(json.dumps(config))
        command += ["--config", str(config_file)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    return KernelRun(done.returncode, done.stdout, done.stderr)


def assert_ok(run: KernelRun) -> None:
    assert run.returncode == 0, f"exit {run.returncode}\nstderr:\n{run.stderr}"


def assert_rejected(run: KernelRun, out: Path, fragments: list[str]) -> None:
    """Exit code 2, one stderr line holding every fragment, nothing on stdout, no output directory made."""
    assert run.returncode == 2, f"exit {run.returncode}\nstderr:\n{run.stderr}"
    assert all(fragment in run.stderr for fragment in fragments), run.stderr
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert run.stdout == "" and not out.exists()


@pytest.fixture(scope="module")
def module_dir():
    """One directory on tmpfs (when there is one) for the runs several tests of a module share."""
    path = Path(tempfile.mkdtemp(prefix="iobo-test-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    yield path
    shutil.rmtree(path, ignore_errors=True)
