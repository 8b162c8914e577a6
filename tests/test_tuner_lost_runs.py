"""Runs lost to the machinery (a tuner killed while its default run ran; a lost Parsl worker) are no verdict on the
system default: they do not stop the study for want of a baseline. Real tuner processes, real MPI runs."""

import os
import signal
import subprocess
import sys

import optuna
import pytest
from optuna.trial import TrialState

from experiments.harness.faults import write_launcher
from iobo.trials import LOST_ATTR, ROLE_DEFAULT
from support.processes import assert_gone, wait_for_hung_ranks
from support.sizes import SMALL_VPIC


def tune_argv(storage, scratch, trials, *extra):
    return [sys.executable, "-m", "iobo.cli", "tune", "vpic", "--ranks", "2", "--trials", str(trials),
            "--storage", storage, "--study", "lost", "--workdir", str(scratch), "--sampler", "tpe", "--confirm", "0",
            "--no-warmup", "--option", f"particles={SMALL_VPIC['particles']}",
            "--option", f"steps={SMALL_VPIC['steps']}", *extra]


def kill_during_a_run(recorder, argv, timeout_s=120) -> None:
    """Start the tuner, wait for its run's 2 ranks (they sleep: a hang launcher), kill -9 it, wait for its
    processes to go (its watchdog ends the run)."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        found = wait_for_hung_ranks(recorder, timeout_s=timeout_s, poll_s=0.2)
    except AssertionError:
        proc.kill()
        raise
    found.pop(proc.pid, None)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert_gone(found, timeout_s=30)


@pytest.mark.usefixtures("no_leftover_processes")
def test_default_runs_lost_with_their_tuner_do_not_stop_the_study(storage, scratch, tmp_path, no_leftover_processes):
    hang = write_launcher(tmp_path / "hang", "hang")  # every run's ranks sleep until the tuner is killed
    for _ in range(3):  # three default runs lost, each with the tuner that ran it
        kill_during_a_run(no_leftover_processes, tune_argv(storage, scratch, 5, "--mpiexec", hang))
    done = subprocess.run(tune_argv(storage, scratch, 5 + 3), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "no baseline" not in done.stdout + done.stderr
    trials = optuna.load_study(study_name="lost", storage=storage).get_trials()
    lost = [t for t in trials if t.state == TrialState.FAIL]
    assert len(lost) == 3 and all(t.user_attrs["role"] == ROLE_DEFAULT and t.user_attrs[LOST_ATTR] for t in lost)
    assert all("stale: its tuner" in t.user_attrs["fail_reason"] for t in lost)
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(complete) == 5 and sum(t.user_attrs["role"] == ROLE_DEFAULT for t in complete) == 3
