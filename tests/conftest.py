"""Shared fixtures: fast scratch space and small kernel sizes for real MPI runs."""

import os
import shutil
import subprocess
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


@pytest.fixture
def hanging_kernel(monkeypatch):
    """A registered kernel whose MPI job deadlocks (tests/support/hanging_vpic.py)."""
    from iobo import kernels
    from iobo.kernels import KernelSpec, vpic

    support = Path(__file__).parent / "support"
    monkeypatch.setenv("PYTHONPATH", f"{support}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    spec = KernelSpec(name="hanging", module="hanging_vpic", space=vpic.space, workload=vpic.workload,
                      options=dict(vpic.SPEC.options), check_options=vpic.check_options)
    with kernels.registered(spec):
        yield spec


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 1 MiB tmpfs mounted for the test (a file system that fills up: ENOSPC), unmounted after."""
    mount_point = tmp_path / "small-tmpfs"
    mount_point.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount_point)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    yield mount_point
    subprocess.run(["umount", "-l", str(mount_point)], check=False)
