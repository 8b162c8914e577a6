"""Shared fixtures: fast scratch space and small kernel sizes for real MPI runs."""

import os
import shutil
import tempfile
from pathlib import Path

import pytest


@pytest.fixture
def scratch():
    """A fresh directory on tmpfs (the least noisy storage here), removed afterwards."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    path = Path(tempfile.mkdtemp(prefix="iobo-test-", dir=base))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def storage(tmp_path):
    """A real Optuna SQLite storage file."""
    return f"sqlite:///{tmp_path / 'study.db'}"
