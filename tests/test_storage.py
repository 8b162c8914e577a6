"""Storages shared by several processes: opening a new PostgreSQL database at once (a real server), popping one
study's queued trials at once (SQLite file, journal file, PostgreSQL)."""

import subprocess
import sys
import time

import optuna
import pytest

from iobo.storage import open_storage

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


ASK_AT = """
import sys, time
import optuna
from iobo.storage import open_storage
storage = open_storage(sys.argv[1])
study = optuna.load_study(study_name="queue", storage=storage)
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))  # all processes ask at the same moment
print(" ".join(str(study.ask().number) for _ in range(int(sys.argv[3]))))
"""


@pytest.mark.parametrize("storage", ["sqlite", "journal", "postgresql"], indirect=True)
def test_processes_asking_at_once_never_pop_the_same_queued_trial(storage):
    """Tuners sharing a study pop its queued (WAITING) trials: each must be given to one process only. On SQLite
    two processes both read one WAITING trial and both marked it RUNNING (sqlite3 begins a transaction at its
    first write), so two tuners ran it and the second's tell failed: "Cannot tell a COMPLETE trial"."""
    queued, processes, asks = 60, 3, 30
    study = optuna.create_study(study_name="queue", storage=open_storage(storage))
    for x in range(queued):
        study.enqueue_trial({"x": x}, skip_if_exists=False)
    start = time.time() + 8  # after the interpreters have started and imported optuna
    procs = [subprocess.Popen([sys.executable, "-c", ASK_AT, storage, str(start), str(asks)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(processes)]
    outs = [proc.communicate(timeout=300) for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * processes, "\n".join(err[-500:] for _, err in outs)
    asked = [int(number) for out, _ in outs for number in out.split()]
    assert len(asked) == processes * asks
    twice = sorted({n for n in asked if asked.count(n) > 1})
    assert not twice, f"trials given to more than one process: {twice}"
    assert set(range(queued)) <= set(asked)  # every queued trial was popped (the rest are new trials)
