"""Shared fixtures: fast scratch space and small kernel sizes for real MPI runs."""

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from support.programs import hdf5_tools, library, programs  # noqa: F401 (fixtures: the shim, the C test programs)


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
