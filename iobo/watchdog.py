"""A watchdog process that ends what a tuner started when the tuner dies, even by ``kill -9``.

A tuner starts processes that do not die with it: Parsl's interchange and
worker pool (its own process group), the ``bash`` wrappers of the pool,
and per trial ``mpiexec``, ``hydra_pmi_proxy`` and the kernel's ranks (their
own session, so a timeout can kill the job's group).  ``PR_SET_PDEATHSIG``
covers only the processes iobo starts itself, and only for the thread that
started them; a ``SIGKILL`` gives the tuner no chance to clean up.

:func:`guard` starts ``python -m iobo.watchdog PID START TAG``: a small process
in a session of its own (a Ctrl-C or a kill of the tuner's process group
does not reach it) that records the tuner's descendants every
``INTERVAL_S`` seconds.  Not every process the tuner starts stays its
descendant: Parsl's ``LocalProvider`` starts the worker pool in the
background of a shell that exits at once, so the pool (and every trial's
``mpiexec`` under it) is re-parented to init.  So the guard also marks
its process: ``$IOBO_WATCHDOG_TAG`` (a random tag) is inherited by every
process started from then on, whatever its parent.  When the tuner is gone,
the watchdog sends SIGTERM to every recorded or marked process still alive
(and to their own descendants), then SIGKILL after ``GRACE_S`` seconds,
and exits.  When the tuner leaves the ``with guard():`` block (its runner has
stopped what it started by then), the watchdog ends the marked processes
still alive (SIGUSR1: e.g. a Parsl block that started while Parsl was
shutting down, which Parsl then never cancels) and exits: what the block
started does not outlive it, unless the block used processes that must
(``Guarded.end_on_exit = False``: a Parsl DataFlowKernel the caller loaded).

A recorded process is identified by pid and start time, so a pid reused by
an unrelated process is never signalled.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

TAG_VARIABLE = "IOBO_WATCHDOG_TAG"
"""The environment variable that marks the processes a guarded tuner started."""
INTERVAL_S = 0.5
"""Seconds between two looks at the tuner's process tree."""
GRACE_S = 3.0
"""Seconds between SIGTERM and SIGKILL for the processes a dead tuner left."""
_LEAVING: list[int] = []  # in the watchdog: set by SIGUSR1, the guarded block has ended


class Guarded:
    """What :func:`guard` yields: ``end_on_exit`` (default True) says whether leaving the block ends the
    marked processes still alive; set it False when the block used processes started before it that must
    outlive it (e.g. a Parsl DataFlowKernel the caller loaded, whose new blocks carry the mark)."""

    def __init__(self, process: subprocess.Popen | None) -> None:
        self.process = process
        self.end_on_exit = True


@contextlib.contextmanager
def guard() -> Iterator[Guarded]:
    """Within the block, a watchdog ends this process's descendants if this process dies.

    Yields a :class:`Guarded` (its ``process`` is None where psutil is missing: nothing is guarded).
    """
    try:
        import psutil
    except ImportError:  # psutil comes with Parsl; without it there is nothing to watch with
        yield Guarded(None)
        return
    me = psutil.Process()
    tag = f"{me.pid}-{uuid.uuid4().hex}"
    before = os.environ.get(TAG_VARIABLE)
    watchdog = subprocess.Popen(
        [sys.executable, "-m", "iobo.watchdog", str(me.pid), repr(me.create_time()), tag],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    watchdog.stdout.readline()  # "watching": its signal handlers are set (empty if it failed to start)
    watchdog.stdout.close()
    os.environ[TAG_VARIABLE] = tag
    guarded = Guarded(watchdog)
    try:
        yield guarded
    finally:
        if before is None:
            os.environ.pop(TAG_VARIABLE, None)
        else:
            os.environ[TAG_VARIABLE] = before
        # SIGUSR1: end what is left of the marked processes, then exit; SIGTERM: exit, touching nothing
        watchdog.send_signal(signal.SIGUSR1 if guarded.end_on_exit else signal.SIGTERM)
        try:
            watchdog.wait(timeout=4 * GRACE_S + 10)
        except subprocess.TimeoutExpired:
            watchdog.kill()
            watchdog.wait()


def watch(pid: int, started: float, tag: str, interval_s: float = INTERVAL_S, grace_s: float = GRACE_S) -> int:
    """Record the descendants of process ``pid`` (started at ``started``) until it dies, then end them
    and every process marked with ``tag``; on SIGUSR1 (the guard's normal exit) end only the marked ones.

    Returns how many processes were signalled. Runs in the watchdog process.
    """
    import psutil

    try:
        tuner = psutil.Process(pid)
        if abs(tuner.create_time() - started) > 0.01:
            return 0
    except psutil.NoSuchProcess:
        return 0
    me = os.getpid()
    known: dict[int, float] = {}  # pid -> start time
    while not _LEAVING:
        try:
            if not tuner.is_running() or tuner.status() == psutil.STATUS_ZOMBIE:
                break
            found = tuner.children(recursive=True)
        except psutil.NoSuchProcess:
            break
        for process in found + _descendants(_still_known(known)):
            if process.pid != me:
                with contextlib.suppress(psutil.NoSuchProcess):
                    known[process.pid] = process.create_time()
        known = {p.pid: p.create_time() for p in _still_known(known)}
        time.sleep(interval_s)
    if _LEAVING:  # the tuner is alive and done: only what it started inside the guard goes
        known = {}
    left = {p.pid: p for p in _still_known(known) + marked(tag)}
    for process in _descendants(list(left.values())):
        left.setdefault(process.pid, process)
    left.pop(me, None)
    return _end(list(left.values()), grace_s)


def marked(tag: str) -> list:
    """The live processes whose environment carries ``tag`` (see the module docstring)."""
    import psutil

    found = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if process.environ().get(TAG_VARIABLE) == tag:
                found.append(process)
    return found


def _still_known(known: dict[int, float]) -> list:
    """The recorded processes still alive with the same start time."""
    import psutil

    alive = []
    for pid, started in known.items():
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            process = psutil.Process(pid)
            if abs(process.create_time() - started) < 0.01:
                alive.append(process)
    return alive


def _descendants(processes: list) -> list:
    import psutil

    found = []
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            found += process.children(recursive=True)
    return found


def _end(processes: list, grace_s: float) -> int:
    """SIGTERM ``processes``, SIGKILL those still alive after ``grace_s``; returns how many were signalled."""
    import psutil

    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.send_signal(signal.SIGTERM)
    _, alive = psutil.wait_procs(processes, timeout=grace_s)
    for process in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    psutil.wait_procs(alive, timeout=grace_s)
    return len(processes)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))  # stopped from outside: touch nothing
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGUSR1, lambda signum, frame: _LEAVING.append(signum))
    print("watching", flush=True)
    sys.stdout.close()
    watch(int(sys.argv[1]), float(sys.argv[2]), sys.argv[3])
