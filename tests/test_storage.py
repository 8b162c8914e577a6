"""Opening storages: several processes at once on a new PostgreSQL database (a real server)."""

import subprocess
import sys
import time

import pytest

OPEN_AT = """
import sys, time
start = float(sys.argv[2])
time.sleep(max(0.0, start - time.time()))  # all processes open the storage at the same moment
from iobo.storage import open_storage
open_storage(sys.argv[1])
"""


@pytest.mark.parametrize("storage", ["postgresql"], indirect=True)
def test_tuners_starting_at_once_on_a_new_database_all_open_it(storage):
    """Optuna creates its tables when a storage is first opened; processes doing so at the same moment collide
    in PostgreSQL's catalog (duplicate key in pg_type). Each must still open the storage: 2 of 3 soak tuners
    on PostgreSQL died at start with that IntegrityError."""
    start = time.time() + 8  # after the interpreters have started and imported optuna
    procs = [subprocess.Popen([sys.executable, "-c", OPEN_AT, storage, str(start)], stderr=subprocess.PIPE, text=True)
             for _ in range(6)]
    errors = [proc.communicate(timeout=120)[1] for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * 6, "\n".join(e[-500:] for e in errors if e)
