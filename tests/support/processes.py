"""Which processes a test started, and a check that none of them is left.

:class:`ProcessRecorder` samples the descendants of a process (by default
the test process) in a background thread while the test runs, so it also
records processes that are later orphaned (a killed tuner's Parsl workers,
an ``mpiexec`` in a session of its own): they are re-parented to init and no
longer appear as descendants, but their pid and start time were recorded.
Some are never descendants (Parsl's ``LocalProvider`` starts its worker
pool in the background of a shell that exits at once): the recorder also
marks the test process's environment (``$IOBO_TEST_MARK``), which every
process started meanwhile inherits, and records the marked processes.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import uuid

import psutil


MARK_VARIABLE = "IOBO_TEST_MARK"

# a Python command line prefix that runs ``python ARGS`` with SIGINT at its default, as a shell starts a foreground
# job: an ignored SIGINT is inherited (under `nohup make test &`, pytest and every process it starts ignore Ctrl-C)
AS_FOREGROUND = [sys.executable, "-c", "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                 "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"]


def descendants(pid: int, mark: str | None = None) -> dict[int, tuple[float, str]]:
    """The live descendants of ``pid``, and the processes whose environment has ``$IOBO_TEST_MARK == mark``:
    pid -> (start time, command line)."""
    try:
        processes = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        processes = []
    if mark is not None:
        for process in psutil.process_iter():
            try:
                if process.pid != os.getpid() and process.environ().get(MARK_VARIABLE) == mark:
                    processes.append(process)
            except psutil.Error:
                continue
    found = {}
    for process in processes:
        try:
            found[process.pid] = (process.create_time(), " ".join(process.cmdline())[:300] or process.name())
        except psutil.NoSuchProcess:
            continue
    return found


def still_alive(recorded: dict[int, tuple[float, str]]) -> dict[int, tuple[float, str]]:
    """The recorded processes still alive (same pid and start time; zombies count as gone)."""
    alive = {}
    for pid, (started, command) in recorded.items():
        try:
            process = psutil.Process(pid)
            if abs(process.create_time() - started) < 0.01 and process.status() != psutil.STATUS_ZOMBIE:
                alive[pid] = (started, command)
        except psutil.NoSuchProcess:
            continue
    return alive


def assert_gone(recorded: dict[int, tuple[float, str]], timeout_s: float = 30.0) -> None:
    """Wait up to ``timeout_s`` for every recorded process to end; fail listing those that did not."""
    deadline = time.monotonic() + timeout_s
    while True:
        alive = still_alive(recorded)
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert not alive, f"{len(alive)} process(es) left after {timeout_s:g} s:\n" + "\n".join(
        f"  {pid}: {command}" for pid, (_, command) in sorted(alive.items()))


class ProcessRecorder:
    """Records, every ``interval_s``, the descendants of ``root`` (default: this process) not there at start."""

    def __init__(self, root: int | None = None, interval_s: float = 0.25) -> None:
        self.root = root or os.getpid()
        self.interval_s = interval_s
        self.mark = uuid.uuid4().hex
        self.before = descendants(self.root)
        self.recorded: dict[int, tuple[float, str]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval_s)

    def sample(self) -> dict[int, tuple[float, str]]:
        """Record the descendants now; returns them."""
        now = descendants(self.root, self.mark)
        for pid, entry in now.items():
            if self.before.get(pid, (None,))[0] != entry[0]:
                self.recorded[pid] = entry
        return now

    def __enter__(self) -> "ProcessRecorder":
        self._previous = os.environ.get(MARK_VARIABLE)
        os.environ[MARK_VARIABLE] = self.mark
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()
        if self._previous is None:
            os.environ.pop(MARK_VARIABLE, None)
        else:
            os.environ[MARK_VARIABLE] = self._previous


HUNG_RANK = "time.sleep(86400)"
"""What a rank of experiments.harness.faults' ``hang`` launcher runs: its command line holds this."""


def wait_for_hung_ranks(recorder: "ProcessRecorder", ranks: int = 2, timeout_s: float = 180.0,
                        poll_s: float = 0.5) -> dict[int, tuple[float, str]]:
    """Wait until ``ranks`` Python ranks of the ``hang`` launcher run among ``recorder``'s processes; its last
    sample. Raises AssertionError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = recorder.sample()
        if sum(c.startswith(sys.executable) and HUNG_RANK in c for _, c in found.values()) == ranks:
            return found
        time.sleep(poll_s)
    raise AssertionError(f"the hung run's {ranks} ranks did not start within {timeout_s} s")
