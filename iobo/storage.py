"""Where a study lives: an Optuna storage from a URL.

- ``sqlite:///path/iobo.db``: the embedded default, for tuner processes on
  one node (every transaction takes the file's lock when it begins:
  :mod:`iobo.sqlite_lock`; over NFS or Lustre SQLite locking is unreliable).
- ``postgresql://user@host:port/db`` (or ``mysql://...``): many tuners or
  workers on many nodes writing one study; needs the database driver
  (``psycopg2``, a dependency of iobo).
- ``journal:///abs/path/study.log``: Optuna's append-only journal file
  (``JournalStorage``), for many processes without a database server, on a
  file system they all mount (Optuna locks it with a symbolic link). Give an
  absolute path after ``journal://`` (three slashes in all).

Anything Optuna accepts as a storage URL works; a ``BaseStorage`` object is
passed through unchanged.  :func:`open_storage` checks a URL before anything
runs on it: a bad scheme, a file in a missing directory, a file that is not
a database or journal, an unreachable server each raise one
:class:`ConfigError` line naming the URL and the fix; commands that only read
a study pass ``must_exist=True`` so a mistyped file name is not created.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

from iobo.errors import ConfigError

JOURNAL_SCHEME = "journal://"
SQLITE_SCHEME = "sqlite:///"
SCHEMA_RACE_ATTEMPTS = 5
"""Tries to open a database whose tables several tuners starting at once are creating."""
DEFAULT_STORAGE = "sqlite:///iobo.db"
"""Where studies go when no storage is named: an SQLite file in the current directory."""


def open_storage(storage: Any, must_exist: bool = False):
    """The Optuna ``BaseStorage`` for a URL (see the module docstring) or a storage object.

    must_exist: the study file must already be there (commands that read a
    study: ``best``, ``report``...); otherwise a new file is created.
    Raises :class:`ConfigError` (one line) when the storage cannot be used.
    """
    import optuna

    if not isinstance(storage, str):
        return optuna.storages.get_storage(storage)
    path = _file_of(storage)
    if path is not None:
        _check_file(storage, path, must_exist)
    for attempt in range(SCHEMA_RACE_ATTEMPTS):
        try:
            if storage.startswith(JOURNAL_SCHEME):
                from optuna.storages.journal import JournalFileBackend

                opened = optuna.storages.JournalStorage(JournalFileBackend(str(path)))
            elif storage.startswith(SQLITE_SCHEME):
                from iobo.sqlite_lock import LockingSQLiteStorage

                opened = optuna.storages.get_storage(LockingSQLiteStorage(storage))
            else:  # a database server (PostgreSQL, MySQL): what Optuna would open, its calls not cut in half
                from iobo.rdb_storage import InterruptSafeRDBStorage

                opened = optuna.storages.get_storage(InterruptSafeRDBStorage(storage))
            opened.get_all_studies()  # reads the file / reaches the server now, not in the middle of a run
            return opened
        except Exception as exc:
            if _lost_schema_race(exc) and attempt + 1 < SCHEMA_RACE_ATTEMPTS:
                time.sleep(random.uniform(0.2, 1.0))  # another tuner is creating the tables: they will be there
                continue
            raise ConfigError(f"cannot open storage {storage}: {_why(storage, exc)}") from None


def _lost_schema_race(exc: Exception) -> bool:
    """True when opening a new database failed because another process was creating Optuna's tables at the
    same moment (PostgreSQL: a duplicate key in its catalog; MySQL: table already exists)."""
    text = str(exc)
    return type(exc).__name__ in ("IntegrityError", "ProgrammingError", "OperationalError") and (
        "duplicate key" in text or "already exists" in text)


def _file_of(url: str) -> Path | None:
    """The file behind an SQLite or journal URL (None for a server or an in-memory database)."""
    if url.startswith(JOURNAL_SCHEME):
        path = url[len(JOURNAL_SCHEME):]
        if not path.startswith("/"):
            raise ConfigError(f"journal storage {url!r} needs an absolute path; allowed: journal:///abs/path/file.log")
        return Path(path)
    if url.startswith(SQLITE_SCHEME) and url[len(SQLITE_SCHEME):] not in ("", ":memory:"):
        return Path(url[len(SQLITE_SCHEME):].split("?", 1)[0])
    return None


def _check_file(url: str, path: Path, must_exist: bool) -> None:
    if path.is_dir():
        raise ConfigError(f"storage {url} names a directory ({path}); name a file in it, e.g. {path}/iobo.db")
    if not path.parent.is_dir():
        raise ConfigError(f"storage {url}: directory {path.parent} does not exist; create it or choose another path")
    if must_exist and not path.exists():
        raise ConfigError(f"storage {url}: no such file {path}; check the path (this command reads a study, "
                          f"it does not create one)")


def _why(url: str, exc: Exception) -> str:
    """One line saying why ``url`` could not be opened, with the fix."""
    name = type(exc).__name__
    text = (str(exc).strip().splitlines() or [""])[0]
    if name == "NoSuchModuleError" or name == "ArgumentError":
        scheme = url.partition("://")[0]
        return (f"unknown storage scheme {scheme!r} ({text}); allowed: sqlite:///path/iobo.db, "
                f"postgresql://user@host:port/db, mysql://..., journal:///abs/path/study.log")
    if url.startswith(JOURNAL_SCHEME):
        return f"not a readable Optuna journal file ({name}: {text}); give another file or move this one away"
    if url.startswith("sqlite"):
        return f"not a usable SQLite study database ({text}); give another file or move this one away"
    return f"{name}: {text}; check the URL, that the server runs and that the database exists"
