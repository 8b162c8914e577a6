"""An SQLite study storage that several tuner processes can share: every transaction takes the write lock when it
begins.

Python's sqlite3 starts a transaction only at its first write, so two
processes could both read a queued (WAITING) trial and both mark it RUNNING
in Optuna's pop (``Study._pop_waiting_trial_id``): two tuners ran one
enqueued trial and the second's ``tell`` failed ("Cannot tell a COMPLETE
trial"). With ``BEGIN IMMEDIATE`` that read and that write are one locked
step (SQLAlchemy's pysqlite recipe: the driver's own transaction handling
off, ours on SQLAlchemy's ``begin`` event). Its calls finish before an
interrupt acts (:mod:`iobo.rdb_storage`). Imported only by
:func:`iobo.storage.open_storage`: it loads Optuna and SQLAlchemy.
"""

from __future__ import annotations

import sqlalchemy

from iobo.rdb_storage import InterruptSafeRDBStorage

BUSY_TIMEOUT_S = 120
"""How long a process waits for another's transaction before SQLite raises "database is locked"."""


class LockingSQLiteStorage(InterruptSafeRDBStorage):
    """``RDBStorage`` on ``sqlite:///path`` with ``BEGIN IMMEDIATE`` transactions (see the module docstring)."""

    def __init__(self, url: str):
        super().__init__(url, engine_kwargs={"connect_args": {"isolation_level": None, "timeout": BUSY_TIMEOUT_S}})
        self._lock_on_begin()

    def __setstate__(self, state) -> None:
        super().__setstate__(state)  # builds a new engine: the listener goes on it again
        self._lock_on_begin()

    def _lock_on_begin(self) -> None:
        sqlalchemy.event.listen(self.engine, "begin", lambda connection: connection.exec_driver_sql("BEGIN IMMEDIATE"))
