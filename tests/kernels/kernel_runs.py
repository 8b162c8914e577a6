"""Helpers shared by the kernel tests: running a kernel under real MPI (from iobo.testing.kernels) and
a directory for the runs several tests of a module share."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from iobo.testing.kernels import RANKS, KernelOutput, assert_ok, assert_rejected, run_kernel_cli

__all__ = ["RANKS", "KernelOutput", "assert_ok", "assert_rejected", "module_dir", "run_kernel_cli"]


@pytest.fixture(scope="module")
def module_dir():
    """One directory on tmpfs (when there is one) for the runs several tests of a module share."""
    path = Path(tempfile.mkdtemp(prefix="iobo-test-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    yield path
    shutil.rmtree(path, ignore_errors=True)
