"""Where a study lives: an Optuna storage from a URL.

- ``sqlite:///path/iobo.db``: the embedded default, for one tuner process on
  one node (SQLite locks the whole file; over NFS or Lustre it is unreliable).
- ``postgresql://user@host/db`` (or ``mysql://...``): many tuners or workers on
  many nodes writing one study; needs the database driver (``psycopg2``).
- ``journal:///abs/path/study.log``: Optuna's append-only journal file
  (``JournalStorage``), for many processes without a database server, on a
  file system they all mount (Optuna locks it with a symbolic link). Give an
  absolute path after ``journal://`` (three slashes in all).

Anything Optuna accepts as a storage URL works; a ``BaseStorage`` object is
passed through unchanged.
"""

from __future__ import annotations

from typing import Any

from iobo.errors import ConfigError

JOURNAL_SCHEME = "journal://"
DEFAULT_STORAGE = "sqlite:///iobo.db"
"""Where studies go when no storage is named: an SQLite file in the current directory."""


def open_storage(storage: Any):
    """The Optuna ``BaseStorage`` for a URL (see the module docstring) or a storage object."""
    import optuna

    if not isinstance(storage, str):
        return optuna.storages.get_storage(storage)
    if storage.startswith(JOURNAL_SCHEME):
        from optuna.storages.journal import JournalFileBackend

        path = storage[len(JOURNAL_SCHEME):]
        if not path.startswith("/"):
            raise ConfigError(
                f"journal storage {storage!r} needs an absolute path; allowed: journal:///abs/path/file.log"
            )
        return optuna.storages.JournalStorage(JournalFileBackend(path))
    return optuna.storages.get_storage(storage)
