"""Shared fixtures: fast scratch space and small kernel sizes for real MPI runs."""

import os
import signal
import shutil
import subprocess
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


STORAGES = ("sqlite", "journal", "postgresql")
"""The storage back ends a test can run on: an SQLite file, an Optuna journal file, a real PostgreSQL server."""


def pytest_configure(config):
    config.addinivalue_line("markers", "all_storages: run the test on every storage back end (STORAGES), "
                                       "whatever IOBO_TEST_STORAGES says")


def pytest_generate_tests(metafunc):
    """Tests taking ``storage`` run on the back ends in $IOBO_TEST_STORAGES (default: sqlite); tests marked
    ``all_storages`` on all of them (a representative subset, so the suite stays short)."""
    if "storage" not in metafunc.fixturenames:
        return
    if any("storage" in str(marker.args[0]) for marker in metafunc.definition.iter_markers("parametrize")):
        return  # the test names its back ends itself
    chosen = [name.strip() for name in os.environ.get("IOBO_TEST_STORAGES", "sqlite").split(",") if name.strip()]
    unknown = sorted(set(chosen) - set(STORAGES))
    if unknown:
        raise pytest.UsageError(f"IOBO_TEST_STORAGES names unknown back ends {unknown}; allowed: {', '.join(STORAGES)}")
    if metafunc.definition.get_closest_marker("all_storages"):
        chosen = list(STORAGES)
    metafunc.parametrize("storage", chosen, indirect=True)


@pytest.fixture
def storage(request, tmp_path):
    """A real Optuna storage URL, fresh for the test: an SQLite file, a journal file or a PostgreSQL database."""
    kind = getattr(request, "param", "sqlite")
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'study.db'}"
    if kind == "journal":
        return f"journal://{tmp_path / 'study.log'}"
    return request.getfixturevalue("postgres_server").new_database()


@pytest.fixture(scope="session")
def postgres_server():
    """A throw-away PostgreSQL cluster for the test session (experiments/harness/postgres.py), stopped after."""
    from experiments.harness.postgres import PostgresServer, PostgresUnavailable

    try:
        server = PostgresServer.start()
    except PostgresUnavailable as exc:
        pytest.skip(f"PostgreSQL cannot start here: {exc}")
    yield server
    server.stop()


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


@pytest.fixture
def no_leftover_processes(request):
    """Fails the test if a process it started (mpiexec, hydra_pmi_proxy, kernel ranks, Parsl interchange and
    workers...) is still alive 30 s after it ended; yields the recorder (support/processes.py).

    The test's storage is set up first: a session's PostgreSQL server lives on, and is not the test's."""
    from support.processes import ProcessRecorder, assert_gone

    if "storage" in request.fixturenames:
        request.getfixturevalue("storage")

    with ProcessRecorder() as recorder:
        yield recorder
    assert_gone(recorder.recorded, timeout_s=30)


@pytest.fixture
def sigint_handler(request):
    """SIGINT's handler in this process for the test: ``request.param`` when parametrized indirectly (SIG_IGN: a
    run under ``nohup`` or in the background), else ``default_int_handler`` (a Ctrl-C at a terminal raises
    KeyboardInterrupt), whatever launched pytest; the previous one restored after."""
    previous = signal.signal(signal.SIGINT, getattr(request, "param", signal.default_int_handler))
    yield
    signal.signal(signal.SIGINT, previous)
