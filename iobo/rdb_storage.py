"""A database study storage (PostgreSQL, MySQL; SQLite through :mod:`iobo.sqlite_lock`) whose calls an
interrupt does not cut in half.

Every method of Optuna's ``RDBStorage`` (private ones too) runs inside
:class:`iobo.interrupts.interrupts_deferred`: a Ctrl-C or SIGTERM that comes
during a call acts when the call's transaction has ended. Before, one that
came between SQLite's ``BEGIN IMMEDIATE`` and the commit left the write lock
held by a connection nothing would close, and the tuner, telling its running
trials FAIL, waited out the busy timeout (120 s) on its own lock. Imported
only by :func:`iobo.storage.open_storage`: it loads Optuna and SQLAlchemy.
"""

from __future__ import annotations

import inspect
import types

import optuna

from iobo.interrupts import not_interrupted


class InterruptSafeRDBStorage(optuna.storages.RDBStorage):
    """``RDBStorage`` whose methods finish before a SIGINT or SIGTERM acts (see the module docstring)."""


def _instance_methods(cls: type) -> list[str]:
    """Methods of ``cls`` called on an instance, private ones too (Optuna's cache calls ``_get_trials``), but
    not special ones (``__init__``...), static or class methods."""
    return [name for name in dir(cls) if not name.startswith("__")
            and isinstance(inspect.getattr_static(cls, name), types.FunctionType)]


for _name in _instance_methods(optuna.storages.RDBStorage):
    setattr(InterruptSafeRDBStorage, _name, not_interrupted(getattr(optuna.storages.RDBStorage, _name)))
