"""Steps a Ctrl-C or SIGTERM must not cut in half.

A signal's Python handler runs between two bytecodes of the main thread,
wherever that is: inside ``study.ask()`` after the RUNNING trial is stored and
before its number is known, or inside a storage transaction that holds
SQLite's write lock. An interrupt there leaves the lock held by a connection
only the exception's traceback still references, and the tuner's own
clean-up (telling its running trials FAIL) then waits on it for the whole busy
timeout. :class:`interrupts_deferred` holds SIGINT and SIGTERM back for the
length of such a step and delivers the first one to its own handler as soon
as the step is done.
"""

from __future__ import annotations

import functools
import signal
import threading
from collections.abc import Callable
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class interrupts_deferred:
    """Within the block, SIGINT and SIGTERM are recorded instead of handled; on leaving it, the handlers that
    were in place are restored and the first signal recorded is raised again (``signal.raise_signal``), so it
    acts as it would have: KeyboardInterrupt, the tuner's :class:`iobo.errors.Interrupted`, or the end of the
    process. Blocks nest. A signal the process ignores (SIGINT under ``nohup`` or in a shell's background
    job) stays ignored. Outside the main thread, where Python runs no signal handler, it does nothing."""

    def __enter__(self) -> interrupts_deferred:
        self._caught: list[int] = []
        self._previous: dict[int, Any] = {}
        if threading.current_thread() is not threading.main_thread():
            return self
        for signum in SIGNALS:
            if signal.getsignal(signum) != signal.SIG_IGN:
                self._previous[signum] = signal.signal(signum, self._record)
        return self

    def _record(self, signum: int, frame) -> None:
        self._caught.append(signum)

    def __exit__(self, *exc) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}
        if self._caught:
            signum, self._caught = self._caught[0], []
            signal.raise_signal(signum)


def not_interrupted(method: Callable) -> Callable:
    """``method`` run inside :class:`interrupts_deferred` (for a method whose every call must finish)."""

    @functools.wraps(method)
    def call(*args, **kwargs):
        with interrupts_deferred():
            return method(*args, **kwargs)

    return call
