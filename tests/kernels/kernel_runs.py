"""Helpers shared by the kernel tests: running a kernel under MPI (from test_vpic) and checking a rejection."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from test_vpic import KernelRun, assert_ok, run_kernel_cli

__all__ = ["KernelRun", "assert_ok", "assert_rejected", "module_dir", "run_kernel_cli"]


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
