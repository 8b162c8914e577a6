"""Storages shared by several processes: opening a new PostgreSQL database at once (a real server), popping one
study's queued trials at once (SQLite file, journal file, PostgreSQL)."""

import os
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


def test_a_ctrl_c_during_storage_calls_acts_after_the_call_and_leaves_no_lock(tmp_path, monkeypatch, sigint_handler):
    """SIGINT from another thread at a seeded random moment while this one asks, tells and reads trials, 80
    times: after each KeyboardInterrupt the next write must not wait on SQLite's write lock. Before storage calls
    deferred interrupts, one that came inside a transaction left the lock held by a connection only the
    traceback referenced, and the next write waited the whole busy timeout (120 s; 3 s here) and then failed:
    about 1 interrupt in 8 here, so all 80 passing on that code has a chance near 1e-5."""
    import random
    import signal
    import threading

    import iobo.sqlite_lock

    monkeypatch.setattr(iobo.sqlite_lock, "BUSY_TIMEOUT_S", 3)
    draw = random.Random(0)
    came, waited = [], []
    for attempt in range(80):
        storage = open_storage(f"sqlite:///{tmp_path / f'study-{attempt}.db'}")
        study = optuna.create_study(storage=storage, study_name="s")
        sender = threading.Timer(draw.uniform(0.001, 0.05), os.kill, (os.getpid(), signal.SIGINT))
        try:
            sender.start()
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                trial = study.ask()
                trial.set_user_attr("a", 1)
                study.tell(trial, 1.0)
                study.get_trials(deepcopy=False)
            continue  # Python printed and dropped it: it came inside a __del__ or weakref callback
        except KeyboardInterrupt:
            came.append(attempt)
        sender.join()
        start = time.monotonic()
        try:
            study.tell(study.ask(), 2.0)
        except optuna.exceptions.StorageInternalError:
            pass
        if time.monotonic() - start > 1.0:
            waited.append(attempt)
    assert len(came) >= 60, f"only {len(came)} of 80 interrupts reached the loop"
    assert not waited, f"the write after the interrupt waited on a lock in attempts {waited}"
