"""Ctrl-C at a terminal: ``iobo tune`` runs on a pseudo-terminal that is its controlling terminal, so the byte
``\\x03`` typed there sends SIGINT to the terminal's whole foreground process group, as a user's Ctrl-C does
(not to iobo alone, as ``kill -INT`` does)."""

import os
import signal
import subprocess
import sys
import threading
import time

import optuna
import pytest
from optuna.trial import TrialState

from experiments.harness.faults import write_launcher
from support.processes import assert_gone
from support.sizes import SMALL_VPIC

CTRL_C = b"\x03"
EXIT_WITHIN_S = 10.0
# in the child, a session leader: make the pseudo-terminal on its stdin its controlling terminal, then be iobo,
# with SIGINT at its default as a shell starts a foreground job (an ignored SIGINT is inherited: under
# `nohup cmd &` pytest and every process it starts would ignore the Ctrl-C)
ON_A_TERMINAL = ("import fcntl, os, signal, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
                 "signal.signal(signal.SIGINT, signal.SIG_DFL); "
                 "os.execv(sys.executable, [sys.executable, '-m', 'iobo.cli', *sys.argv[1:]])")


class Terminal:
    """``iobo ARGS`` with a new pseudo-terminal as its controlling terminal and its stdin, stdout and stderr;
    ``typed`` writes keys to it, ``output`` is what it printed so far."""

    def __init__(self, args: list[str]) -> None:
        self._master, slave = os.openpty()
        self.proc = subprocess.Popen([sys.executable, "-c", ON_A_TERMINAL, *args], stdin=slave, stdout=slave,
                                     stderr=slave, start_new_session=True)
        os.close(slave)
        self._printed: list[bytes] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self._master, 4096)
            except OSError:  # EIO: every process holding the terminal has ended
                return
            if not chunk:
                return
            self._printed.append(chunk)

    @property
    def output(self) -> str:
        return b"".join(self._printed).decode(errors="replace").replace("\r\n", "\n")

    def type(self, keys: bytes) -> None:
        os.write(self._master, keys)

    def close(self) -> None:
        """Kill what is left of the terminal's session (a hung iobo) and release the terminal."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self._reader.join(timeout=5)
        os.close(self._master)


def _wait_for(recorder, what: str, timeout_s: float = 120.0) -> None:
    """Wait until a process the test started has ``what`` in its command line."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(what in command for _, command in recorder.sample().values()):
            return
        time.sleep(0.2)
    raise AssertionError(f"no process running {what!r} within {timeout_s:g} s")


def test_one_ctrl_c_at_a_terminal_ends_tune_with_130_and_leaves_no_process(storage, scratch, tmp_path,
                                                                          no_leftover_processes):
    # the first launch starts the MPI job with ranks that sleep: mpiexec, its proxy and the ranks are running
    # when the Ctrl-C comes, as in a trial that takes long
    hang = write_launcher(tmp_path / "hang", "hang", first=1)
    terminal = Terminal(["tune", "vpic", "--ranks", "2", "--trials", "6", "--storage", storage, "--study", "c",
                         "--workdir", str(scratch), "--sampler", "tpe", "--no-warmup", "--confirm", "0",
                         "--mpiexec", hang, "--option", f"particles={SMALL_VPIC['particles']}",
                         "--option", f"steps={SMALL_VPIC['steps']}"])
    try:
        _wait_for(no_leftover_processes, "time.sleep(86400)")  # the first trial's ranks
        assert any("interchange" in command for _, command in no_leftover_processes.sample().values())
        terminal.type(CTRL_C)
        typed = time.monotonic()
        try:
            code = terminal.proc.wait(timeout=EXIT_WITHIN_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"iobo tune did not exit within {EXIT_WITHIN_S:g} s of one Ctrl-C; it printed:\n"
                        f"{terminal.output[-3000:]}")
        took = time.monotonic() - typed
    finally:
        terminal.close()
    output = terminal.output
    assert code == 130, output
    assert took < EXIT_WITHIN_S
    assert "run the same command to resume" in output
    assert "Traceback" not in output, output  # no process of iobo's died of the Ctrl-C with a traceback
    assert_gone(no_leftover_processes.recorded, timeout_s=1)
    trials = optuna.load_study(study_name="c", storage=storage).get_trials()
    assert TrialState.RUNNING not in [t.state for t in trials]
    assert trials[0].state == TrialState.FAIL and "interrupted" in trials[0].user_attrs["fail_reason"], \
        trials[0].user_attrs
