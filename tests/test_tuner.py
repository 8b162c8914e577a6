"""The tuning loop on the real stack: MPI ranks, parallel HDF5, Parsl, SQLite."""

import math
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from iobo import ConfigError, kernels
from iobo.kernels import KernelSpec, vpic
from iobo.measure import INTERVAL_MIN_RUNS, Spread, planned_pairs
from iobo.minimize import MINIMAL_ATTR, UNDECIDED, Confirmation, Minimal, Step, confirmation_of, recommended
from iobo.report import build_report
from iobo.trials import (CONFIRM_PLAN_ATTR, INCUMBENT_ATTR, ROLE_CONFIRM_BEST, ROLE_CONFIRM_DEFAULT, ROLE_DEFAULT,
                         ROLE_SEARCH, baseline, best_trial)
from iobo.stopping import ProductionRuns
from iobo.tuner import (CONFIRM_AT_MOST, CONFIRM_EXTRA_SECONDS, Tuner, checking_plan, confirm_plan, confirmation_round,
                         within_pairs)

from experiments.harness.faults import write_launcher
from support.processes import AS_FOREGROUND
from support.sizes import SMALL_VPIC

SUPPORT = Path(__file__).parent / "support"


def tpe(seed=0):
    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=2)


@pytest.mark.all_storages
def test_short_study_stores_complete_trials_with_their_attrs(storage, scratch):
    tuner = Tuner(kernel="vpic", ranks=2, trials=5, storage=storage, study="s", workdir=str(scratch),
                  kernel_options=SMALL_VPIC, sampler=tpe(), echo=None)
    study = tuner.run()
    trials = study.get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 5
    assert [t.user_attrs["role"] for t in trials[:3]] == [ROLE_DEFAULT] * 3
    assert all(t.user_attrs["config"] == trials[0].user_attrs["config"] for t in trials[:3])  # the default, 3 times
    first = trials[0]
    assert first.value > 0
    assert first.user_attrs["bytes"] == 2 * SMALL_VPIC["particles"] * 8 * 4 * SMALL_VPIC["steps"]
    assert len(first.user_attrs["step_mb_per_s"]) == SMALL_VPIC["steps"]
    assert len(first.user_attrs["step_elapsed_s"]) == SMALL_VPIC["steps"]
    for key in ("config", "effective", "hints", "wall_seconds", "command", "not_applied"):
        assert key in first.user_attrs, key
    assert "cb_buffer_size" in first.user_attrs["hints"]  # ROMIO reports its hints in effect
    assert study.metric_names == ["bandwidth (MB/s)"]
    assert not list(scratch.glob("trial-*"))  # trial directories are cleaned up
    assert INCUMBENT_ATTR not in study.user_attrs  # TPE has no posterior: the best single run stays the incumbent


def test_the_gp_samplers_pick_is_recorded_after_the_search_and_is_the_incumbent(storage, scratch):
    tuner = Tuner(kernel="vpic", ranks=2, trials=7, storage=storage, study="g", workdir=str(scratch),
                  kernel_options=SMALL_VPIC, echo=None)
    study = tuner.run()
    picked = study.user_attrs[INCUMBENT_ATTR]
    assert picked["search_trials"] == 4 and picked["mb_per_s"] > 0
    assert best_trial(study).params == picked["params"]
    assert best_trial(study).user_attrs["role"] == (ROLE_DEFAULT if picked["params"] == study.trials[0].params
                                                    else ROLE_SEARCH)


def test_a_failing_configuration_is_told_fail_and_the_study_goes_on(storage, scratch, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", f"{SUPPORT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    faulty = KernelSpec(name="faulty", module="faulty_vpic", space=vpic.space, workload=vpic.workload,
                        options=dict(vpic.SPEC.options), check_options=vpic.check_options)
    with kernels.registered(faulty):
        tuner = Tuner(kernel="faulty", ranks=2, trials=6, storage=storage, study="f", workdir=str(scratch),
                      kernel_options=SMALL_VPIC, sampler=tpe(), echo=None)
        study = tuner.open_study()
        study.enqueue_trial({**tuner.space.default(), "romio_ds_write": "disable"})
        tuner.run()
    trials = study.get_trials()
    assert len(trials) == 6
    failed = [t for t in trials if t.state == TrialState.FAIL]
    assert len(failed) == 1 and failed[0].params["romio_ds_write"] == "disable"
    assert "injected failure" in failed[0].user_attrs["stderr_tail"]
    assert failed[0].user_attrs["returncode"] != 0
    assert sum(t.state == TrialState.COMPLETE for t in trials) == 5


@pytest.mark.usefixtures("no_leftover_processes")
def test_a_trial_that_hangs_times_out_as_fail(storage, scratch, hanging_kernel):
    tuner = Tuner(kernel="hanging", ranks=2, trials=4, storage=storage, study="t", workdir=str(scratch),
                  kernel_options=SMALL_VPIC, sampler=tpe(), timeout_s=2, echo=None)
    study = tuner.run()
    trials = study.get_trials()
    # the study went on after each hang, until the 3 default runs had all failed: no baseline, no search
    assert [t.state for t in trials] == [TrialState.FAIL] * 3
    assert "timed out after 2 s" in trials[0].user_attrs["fail_reason"]


HANG_ON_ONE_CONFIGURATION = """
# The real VPIC-IO kernel, except that romio_ds_write=disable deadlocks: rank 0 waits in a barrier the others
# never reach (a job stuck on a lost message), as tests/support/hanging_vpic.py does for every configuration.
import json
import sys
import time

from mpi4py import MPI

from iobo.kernels import vpic
from iobo.kernels.run import run_main

if __name__ == "__main__":
    with open(sys.argv[sys.argv.index("--config") + 1]) as handle:
        hang = json.load(handle).get("romio_ds_write") == "disable"
    if hang and MPI.COMM_WORLD.Get_rank() == 0:
        MPI.COMM_WORLD.Barrier()
    elif hang:
        time.sleep(3600)
    run_main(vpic.main)
"""


@pytest.mark.usefixtures("no_leftover_processes")
def test_a_search_trial_that_hangs_is_told_fail_with_its_reason_and_the_search_goes_on(storage, scratch, tmp_path,
                                                                                        monkeypatch):
    """After the default runs, the first search trial deadlocks: it is killed at its time limit, recorded FAIL
    with the reason, and the search trials after it complete."""
    (tmp_path / "hang_on_ds_write_vpic.py").write_text(HANG_ON_ONE_CONFIGURATION)
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    spec = KernelSpec(name="hang-on-one", module="hang_on_ds_write_vpic", space=vpic.space, workload=vpic.workload,
                      options=dict(vpic.SPEC.options), check_options=vpic.check_options)
    with kernels.registered(spec):
        tuner = Tuner(kernel="hang-on-one", ranks=2, trials=6, storage=storage, study="h", workdir=str(scratch),
                      kernel_options=SMALL_VPIC, sampler=tpe(), timeout_s=20, echo=None, warmup=False)
        study = tuner.open_study()
        tuner.enqueue_defaults(study)  # the defaults first, so the hang is a search trial with a baseline
        study.enqueue_trial({**tuner.space.default(), "romio_ds_write": "disable"})
        tuner.run()
    trials = study.get_trials()
    (hung,) = [t for t in trials if t.state == TrialState.FAIL]
    assert hung.user_attrs["role"] == ROLE_SEARCH and hung.params["romio_ds_write"] == "disable"
    assert "timed out after 20 s" in hung.user_attrs["fail_reason"]
    later = [t for t in trials if t.number > hung.number and t.user_attrs.get("role") == ROLE_SEARCH]
    assert len(later) >= 2 and all(t.state == TrialState.COMPLETE for t in later)
    assert len(trials) == 6 and sum(t.state == TrialState.COMPLETE for t in trials) == 5


def _tune_cli(storage, scratch, trials):
    return [*AS_FOREGROUND, "-m", "iobo.cli", "tune", "vpic", "--ranks", "2", "--trials", str(trials),
            "--storage", storage, "--study", "r", "--workdir", str(scratch), "--sampler", "tpe", "--confirm", "0", "--no-warmup",
            "--option", f"particles={SMALL_VPIC['particles']}", "--option", f"steps={SMALL_VPIC['steps']}"]


def _wait_for_complete(storage, n, timeout_s=120):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            study = optuna.load_study(study_name="r", storage=storage)
            if sum(t.state == TrialState.COMPLETE for t in study.get_trials()) >= n:
                return study
        except KeyError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"no {n} complete trials within {timeout_s} s")


@pytest.mark.usefixtures("no_leftover_processes")
def test_a_killed_tuner_resumes(storage, scratch):
    proc = subprocess.Popen(_tune_cli(storage, scratch, 7), start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for_complete(storage, 3)
    os.killpg(proc.pid, signal.SIGKILL)  # the tuner and its Parsl workers die at once
    proc.wait()
    done = subprocess.run(_tune_cli(storage, scratch, 7), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    trials = optuna.load_study(study_name="r", storage=storage).get_trials()
    states = [t.state for t in trials]
    assert TrialState.RUNNING not in states
    finished = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.FAIL)]
    assert len(finished) >= 7
    stale = [t for t in trials if "stale" in t.user_attrs.get("fail_reason", "")]
    assert len(stale) <= 1  # at most the one trial that was running when killed
    assert sum(t.state == TrialState.COMPLETE for t in trials) >= 6


@pytest.mark.usefixtures("no_leftover_processes")
def test_ctrl_c_leaves_the_study_consistent(storage, scratch):
    proc = subprocess.Popen(_tune_cli(storage, scratch, 30), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    _wait_for_complete(storage, 2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "run the same command to resume" in err
    trials = optuna.load_study(study_name="r", storage=storage).get_trials()
    assert TrialState.RUNNING not in [t.state for t in trials]
    assert sum(t.state == TrialState.COMPLETE for t in trials) >= 2


@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        ({"kernel": "nope"}, "unknown kernel 'nope'; known kernels: .*vpic"),
        ({"ranks": 0}, "ranks must be a positive integer; got 0"),
        ({"trials": 3}, "leaves no search trial"),
        ({"kernel_options": {"particles": 0}}, "particles"),
        ({"kernel_options": {"bogus": 1}}, r"kernel 'vpic' has no option\(s\) \['bogus'\]"),
        ({"default_repeats": 1}, "default_repeats must be >= 3"),
        ({"walk_back_budget_s": -1}, r"walk_back_budget_s must be a number of seconds >= 0 \(.*\); got -1$"),
        ({"walk_back_budget_s": float("nan")}, r"walk_back_budget_s must be a number of seconds >= 0 .*; got nan"),
    ],
)
def test_invalid_tuner_settings_are_rejected_before_launch(storage, scratch, kwargs, pattern):
    with pytest.raises(ConfigError, match=pattern):
        Tuner(storage=storage, workdir=str(scratch), echo=None, **kwargs)
    assert not list(scratch.glob("trial-*"))


def test_missing_mpiexec_is_a_clear_error(storage, scratch):
    from iobo.launch import MpiexecLauncher

    with pytest.raises(ConfigError, match="'mpiexec.nosuch' is not on PATH; install MPICH"):
        Tuner(storage=storage, workdir=str(scratch), launcher=MpiexecLauncher("mpiexec.nosuch"), echo=None)


def test_a_study_made_for_another_workload_is_not_mixed(storage, scratch):
    Tuner(storage=storage, study="x", workdir=str(scratch), ranks=2, echo=None).open_study()
    with pytest.raises(ConfigError, match="study 'x' was made for .*use another study name"):
        Tuner(storage=storage, study="x", workdir=str(scratch), ranks=1, echo=None).open_study()


class InterruptingSampler(optuna.samplers.TPESampler):
    """Sends this process SIGINT from inside ``study.ask()`` of the first search trial, where a Ctrl-C can
    land: the trial is already stored RUNNING, and the tuner does not know its number yet."""

    sent = False

    def before_trial(self, study, trial):
        super().before_trial(study, trial)
        if trial.number == 3 and not self.sent:
            self.sent = True
            os.kill(os.getpid(), signal.SIGINT)


@pytest.mark.usefixtures("no_leftover_processes")
def test_ctrl_c_inside_ask_leaves_no_running_trial(storage, scratch, sigint_handler):
    tuner = Tuner(kernel="vpic", ranks=2, trials=6, storage=storage, study="a", workdir=str(scratch),
                  kernel_options=SMALL_VPIC, sampler=InterruptingSampler(seed=0, n_startup_trials=2), echo=None)
    with pytest.raises(KeyboardInterrupt):
        tuner.run()
    trials = optuna.load_study(study_name="a", storage=storage).get_trials()
    assert len(trials) == 4
    assert TrialState.RUNNING not in [t.state for t in trials]
    assert trials[3].state == TrialState.FAIL and "interrupted" in trials[3].user_attrs["fail_reason"]


@pytest.mark.parametrize("sigint_handler", [signal.SIG_IGN], indirect=True)
def test_a_tuner_that_ignores_sigint_is_not_stopped_by_one(storage, scratch, sigint_handler):
    """Started under ``nohup`` or as a background job, the tuner ignores SIGINT everywhere, also inside
    ``study.ask()`` (which used to catch it there and stop)."""
    tuner = Tuner(kernel="vpic", ranks=2, trials=6, storage=storage, study="i", workdir=str(scratch),
                  kernel_options=SMALL_VPIC, sampler=InterruptingSampler(seed=0, n_startup_trials=2), echo=None)
    tuner.run()
    trials = optuna.load_study(study_name="i", storage=storage).get_trials()
    assert tuner.sampler.sent
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 6


@pytest.mark.usefixtures("no_leftover_processes")
def test_a_stop_rule_waits_while_too_few_trials_completed(storage, scratch, tmp_path, capsys):
    """Only the first launch succeeds: the GP cannot be fitted, so the rule cannot judge; tuning goes on
    to --trials and no trial is left RUNNING (it used to abort with a ConfigError, one trial in flight)."""
    from iobo.cli import main

    flaky = write_launcher(tmp_path / "flaky", "flaky")
    code = main(["tune", "vpic", "--storage", storage, "--study", "g", "--workdir", str(scratch), "--trials", "12",
                 "--stop-rule", "expected-gain", "--in-flight", "2", "--mpiexec", flaky, "--runner", "local",
                 "--sampler", "tpe", "--option", f"particles={SMALL_VPIC['particles']}",
                 "--option", f"steps={SMALL_VPIC['steps']}", "--no-warmup", "--confirm", "0"])  # the one good launch
    err = capsys.readouterr().err
    assert code == 0, err
    trials = optuna.load_study(study_name="g", storage=storage).get_trials()
    assert len(trials) == 12
    assert [t.state for t in trials].count(TrialState.COMPLETE) == 1
    assert [t.state for t in trials].count(TrialState.FAIL) == 11
    assert all("exited with code 1" in t.user_attrs["fail_reason"] for t in trials if t.state == TrialState.FAIL)


def _wait_for_run_dir(workdir: Path, timeout_s=120) -> Path:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = list(workdir.glob("trial-*"))
        if found:
            return found[0]
        time.sleep(0.2)
    raise AssertionError(f"no trial started in {workdir} within {timeout_s} s")


@pytest.mark.usefixtures("no_leftover_processes")
def test_sigterm_exits_143_and_removes_the_interrupted_trials_files(storage, scratch, tmp_path):
    slow = write_launcher(tmp_path / "slow", "slow", seconds=60)
    proc = subprocess.Popen([*_tune_cli(storage, scratch, 6), "--mpiexec", slow], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    run_dir = _wait_for_run_dir(scratch)
    assert (run_dir / "config.json").exists()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    trials = optuna.load_study(study_name="r", storage=storage).get_trials()
    assert [t.state for t in trials if t.state != TrialState.WAITING] == [TrialState.FAIL]
    assert "interrupted" in trials[0].user_attrs["fail_reason"]
    assert not list(scratch.glob("trial-*"))


@pytest.mark.usefixtures("no_leftover_processes")
@pytest.mark.parametrize("storage", ["journal", "postgresql"], indirect=True)
def test_three_tuners_on_one_study_stop_at_exactly_its_target(storage, scratch):
    """Three tuner processes, one study, one workdir: the target is re-counted before each ask (RUNNING trials
    included), so together they leave exactly --trials tuning trials, each finished, none RUNNING."""
    from iobo.storage import open_storage
    from iobo.trials import is_tuning

    target = 9
    procs = [subprocess.Popen([*_tune_cli(storage, scratch, target), "--runner", "local", "--seed", str(seed)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for seed in range(3)]
    errors = [proc.communicate(timeout=600)[1] for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0, 0], errors
    trials = optuna.load_study(study_name="r", storage=open_storage(storage)).get_trials()
    tuning = [t for t in trials if is_tuning(t)]
    assert len(tuning) == target
    assert all(t.state in (TrialState.COMPLETE, TrialState.FAIL) for t in trials)
    assert sum(t.state == TrialState.COMPLETE for t in tuning) == target
    assert len({t.user_attrs["owner"] for t in tuning}) >= 2  # they shared the work (a late starter may find none)
    surplus = [t for t in trials if not is_tuning(t)]
    assert all(t.user_attrs["fail_reason"].startswith("surplus") for t in surplus)
    assert not list(scratch.glob("trial-*"))


def _wait_for_processes(recorder, wanted: dict[str, str], timeout_s=120) -> dict:
    """Wait until the processes the test started include one for each ``wanted`` label (matched in its command
    line); returns them all (a support.processes.ProcessRecorder sample)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = recorder.sample()
        if all(any(part in command for _, command in found.values()) for part in wanted.values()):
            return found
        time.sleep(0.2)
    raise AssertionError(f"not all of {sorted(wanted)} started under the tuner within {timeout_s} s: {found}")


def test_kill_9_of_the_tuner_leaves_no_process_and_the_resume_cleans_up(storage, scratch, tmp_path,
                                                                          no_leftover_processes):
    """SIGKILL gives the tuner no chance to clean up: its watchdog (iobo.watchdog) ends the Parsl interchange,
    the worker pool and its bash wrapper, mpiexec, hydra_pmi_proxy and the ranks; the resume fails the trial
    as stale and removes its run directory."""
    from support.processes import assert_gone

    hang = write_launcher(tmp_path / "hang", "hang")  # the ranks sleep: the MPI job runs until killed
    proc = subprocess.Popen([*_tune_cli(storage, scratch, 5), "--mpiexec", hang], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    tree = _wait_for_processes(no_leftover_processes, {
        "interchange": "HTEX interchange", "worker pool": "process_worker_pool.py", "mpiexec": "mpiexec.mpich",
        "proxy": "hydra_pmi_proxy", "rank": "time.sleep(86400)"})
    tree.pop(proc.pid, None)
    ranks = [c for _, c in tree.values() if c.startswith(sys.executable) and "time.sleep(86400)" in c]
    assert len(ranks) == 2
    assert list(scratch.glob("trial-*"))
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert_gone(tree, timeout_s=20)
    assert list(scratch.glob("trial-*"))  # the dead trial's files: the resume removes them

    done = subprocess.run(_tune_cli(storage, scratch, 5), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    trials = optuna.load_study(study_name="r", storage=storage).get_trials()
    assert "stale" in trials[0].user_attrs["fail_reason"]
    assert [t.state for t in trials[1:]] == [TrialState.COMPLETE] * 4
    assert not list(scratch.glob("trial-*"))


STALL_INSIDE_THE_FIRST_ASK = """
import json
import sys
import time
from pathlib import Path

import optuna

from iobo.tuner import Tuner


class StallingSampler(optuna.samplers.TPESampler):
    def before_trial(self, study, trial):  # ask() has stored the RUNNING trial; its owner is not written yet
        super().before_trial(study, trial)
        Path(sys.argv[3]).touch()
        time.sleep(3600)


storage, workdir, marker, options = sys.argv[1:5]
Tuner(kernel="vpic", ranks=2, trials=5, storage=storage, study="r", workdir=workdir,
      kernel_options=json.loads(options), sampler=StallingSampler(seed=0), echo=None, warmup=False).run()
"""


@pytest.mark.usefixtures("no_leftover_processes")
def test_a_tuner_killed_inside_ask_leaves_a_trial_the_resume_fails_at_once(storage, scratch, tmp_path):
    """SIGKILL while ``study.ask()`` samples: the stored RUNNING trial has no owner yet. No live tuner is asking,
    so the resume fails it as stale at once (not only after UNOWNED_AFTER_S) and runs the study to its end."""
    import json

    marker = tmp_path / "inside-ask"
    proc = subprocess.Popen([sys.executable, "-c", STALL_INSIDE_THE_FIRST_ASK, storage, str(scratch), str(marker),
                             json.dumps(SMALL_VPIC)], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "the tuner never reached its first ask"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    (left,) = optuna.load_study(study_name="r", storage=storage).get_trials(states=(TrialState.RUNNING,))
    assert left.number == 0 and "owner" not in left.user_attrs

    done = subprocess.run(_tune_cli(storage, scratch, 5), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    trials = optuna.load_study(study_name="r", storage=storage).get_trials()
    assert trials[0].state == TrialState.FAIL and "stale" in trials[0].user_attrs["fail_reason"]
    assert [t.state for t in trials[1:]] == [TrialState.COMPLETE] * 4


def test_confirm_runs_the_pairs_planned_from_the_default_runs_noise_and_the_walk_backs_gain(storage, scratch):
    """Real runs: the walk-back measured only 1.05x (a minimal configuration set by hand), the default runs'
    noise (2-8% here, by the machine's load) plans the pairs run, between the minimum and the ceiling, 4 x 2; an
    expected gain of 0.1% cannot be resolved within the ceiling and plans the ceiling. A planned confirmation
    runs INTERVAL_MIN_RUNS (5) pairs at least whatever was asked: fewer give no interval."""
    tuner = Tuner(kernel="vpic", ranks=2, trials=4, storage=storage, study="plan", workdir=str(scratch),
                  kernel_options=SMALL_VPIC, sampler=tpe(), echo=None, warmup=False)
    study = tuner.run()
    best = best_trial(study)
    retest = Step(("files",), 1.05, (1.01, 1.09), True, (105.0, 106.0), (100.0, 101.0), retest=True)
    study.set_user_attr(MINIMAL_ATTR, Minimal(best.number, {"files": "per_process"}, [retest]).to_attr())
    defaults = baseline(study.get_trials()).runs.values
    assert len(defaults) >= 3
    tuner.confirm(2)  # the minimal configuration made: confirmed, no walk-back
    plan = study.user_attrs[CONFIRM_PLAN_ATTR]
    assert plan["expected_speedup"] == pytest.approx(1.05) and plan["default_runs"] == len(defaults)
    assert plan["noise_sd_log"] == pytest.approx(statistics.stdev(math.log(v) for v in defaults))
    at_least = max(2, INTERVAL_MIN_RUNS)  # the 5-pair minimum of a planned confirmation, not the 2 asked for
    pairs = planned_pairs(plan["noise_sd_log"], 1.05, at_least, CONFIRM_AT_MOST * 2)
    assert plan.get("planned", plan["pairs"]) == pairs and at_least <= pairs <= CONFIRM_AT_MOST * 2 == 8
    # an undecided confirmation grew by rounds of the 2 pairs asked for, up to 8; undecided at its end only when
    # that limit stopped it
    confirmation = confirmation_of(study, tuner.space, {**tuner.space.default(), "files": "per_process"})
    assert confirmation.pairs == plan["pairs"] == pairs + plan.get("extended", 0) <= plan["at_most"] == 8
    assert (confirmation.verdict == UNDECIDED) == bool(plan.get("stopped")), plan
    assert confirm_plan(study, 1.001, 2)["pairs"] == CONFIRM_AT_MOST * 2  # the ceiling, not more
    assert f"at least {INTERVAL_MIN_RUNS}, at most {CONFIRM_AT_MOST * 2}" in plan["why"]
    # a huge expected gain plans fewer pairs than the minimum (whatever the noise of a loaded machine: 0.70 in
    # log MB/s seen here plans 1): the minimum it is, 5, not the 2 asked for
    assert planned_pairs(plan["noise_sd_log"], 1000.0, 1, 100) < INTERVAL_MIN_RUNS
    assert confirm_plan(study, 1000.0, 2)["pairs"] == INTERVAL_MIN_RUNS == 5
    roles = [t.user_attrs["role"] for t in study.get_trials() if t.state == TrialState.COMPLETE]
    assert roles.count(ROLE_CONFIRM_DEFAULT) == roles.count(ROLE_CONFIRM_BEST) == plan["pairs"]
    assert "planned: 1.05x measured by the walk-back" in plan["why"]
    report = build_report(study)
    assert f"confirmation:            {plan['pairs']} interleaved pairs ({plan['why']})" in report.text()
    assert report.to_dict()["confirm_plan"] == plan


def confirmation(pairs):
    """A :class:`Confirmation` of files=per_process from (default MB/s, per_process MB/s) pairs."""
    return Confirmation({"files": "per_process"}, Spread(tuple(d for d, _ in pairs)),
                        Spread(tuple(b for _, b in pairs)), 0)


UNDECIDED_PAIRS = [(80.0, 120.0), (120.0, 85.0), (100.0, 105.0), (90.0, 95.0), (110.0, 100.0)]


def test_an_undecided_confirmation_runs_rounds_of_the_pairs_asked_for_until_its_limits():
    """Issue 31: an undecided confirmation measures on, `repeats` pairs a round, until the plan's at_most pairs or
    CONFIRM_EXTRA_SECONDS; a decided one, or one without an interval, stops; what stopped it is said."""
    undecided = confirmation(UNDECIDED_PAIRS)
    assert undecided.verdict == UNDECIDED
    assert confirmation_round(undecided, 5, 20, 5, 0.0) == (5, "")
    assert confirmation_round(undecided, 17, 20, 5, 0.0) == (3, "")  # the last round fills up to at_most
    assert confirmation_round(undecided, 20, 20, 5, 0.0) == (0, "the limit of 20 pairs")
    assert confirmation_round(undecided, 5, 20, 5, CONFIRM_EXTRA_SECONDS) == (
        0, f"the limit of {CONFIRM_EXTRA_SECONDS:g} s of extra pairs")
    gain = confirmation([(100.0, 180.0), (104.0, 190.0), (97.0, 170.0), (101.0, 185.0), (99.0, 178.0)])
    no_effect = confirmation([(100.0 + d, 100.0 - d) for d in (0.5, -0.5, 1.0, -1.0, 0.0, 0.5, -0.5)])
    slower = confirmation([(100.0, 80.0 + d) for d in (0.0, 1.0, 2.0, -1.0, -2.0)])
    few = confirmation(UNDECIDED_PAIRS[:3])  # no interval under INTERVAL_MIN_RUNS pairs
    for decided in (gain, no_effect, slower, few, None):
        assert confirmation_round(decided, 5, 20, 5, 0.0) == (0, "")


def test_confirm_without_a_measured_gain_runs_the_pairs_asked_for(storage, scratch):
    tuner = Tuner(kernel="vpic", ranks=2, trials=4, storage=storage, study="asked", workdir=str(scratch),
                  kernel_options=SMALL_VPIC, sampler=tpe(), echo=None, warmup=False)
    study = tuner.run()
    # a minimal configuration set by hand, with no test measured (whichever trial is the incumbent)
    study.set_user_attr(MINIMAL_ATTR, Minimal(best_trial(study).number, {"files": "per_process"}).to_attr())
    tuner.confirm(2)  # the minimal configuration made: confirmed, no walk-back
    assert study.user_attrs[CONFIRM_PLAN_ATTR]["pairs"] == 2 and study.user_attrs[CONFIRM_PLAN_ATTR]["why"] == "as asked"
    roles = [t.user_attrs["role"] for t in study.get_trials() if t.state == TrialState.COMPLETE]
    assert roles.count(ROLE_CONFIRM_DEFAULT) == roles.count(ROLE_CONFIRM_BEST) == 2


def test_confirm_runs_nothing_when_the_recommendation_is_the_system_default(storage, scratch):
    """Real runs; the walk-back kept no change (a minimal configuration set by hand), so there is no speedup to
    re-measure: no run, the plan says why, the report says to keep the default."""
    said = []
    tuner = Tuner(kernel="vpic", ranks=2, trials=4, storage=storage, study="keep", workdir=str(scratch),
                  kernel_options=SMALL_VPIC, sampler=tpe(), echo=said.append, warmup=False)
    study = tuner.run()
    study.set_user_attr(MINIMAL_ATTR, Minimal(best_trial(study).number, {}).to_attr())
    before = len(study.get_trials())
    tuner.confirm(5)
    assert len(study.get_trials()) == before
    assert study.user_attrs[CONFIRM_PLAN_ATTR]["pairs"] == 0
    assert "is the system default: no speedup to confirm, keep the default" in said[-1]
    report = build_report(study)
    assert report.keeps_default and report.speedup is None
    assert "none: the recommended configuration is the system default" in report.text()


@pytest.mark.usefixtures("no_leftover_processes")
@pytest.mark.parametrize("storage", ["sqlite", "journal"], indirect=True)
def test_two_tuners_on_one_study_run_one_walk_back_and_confirmation_and_report_it_alike(storage, scratch,
                                                                                         monkeypatch):
    """Two tuner processes share a study to its end (search, walk-back, confirmation): one holds the study's phase
    lease and runs the walk-back and the confirmation, the other waits and reports that conclusion; the study holds
    exactly one walk-back's and one confirmation's runs."""
    monkeypatch.syspath_prepend(str(SUPPORT))
    monkeypatch.setenv("PYTHONPATH", f"{SUPPORT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    import conclude

    conclude.prepare(storage, "two", str(scratch))
    procs = [subprocess.Popen([sys.executable, str(SUPPORT / "conclude.py"), storage, "two", str(scratch), str(seed)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for seed in (1, 2)]
    outs = [proc.communicate(timeout=900) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], [err for _, err in outs]
    from iobo.storage import open_storage

    study = optuna.load_study(study_name="two", storage=open_storage(storage))
    trials = study.get_trials()
    assert all(t.state == TrialState.COMPLETE for t in trials), \
        [(t.number, t.state.name, t.user_attrs.get("role"), t.user_attrs.get("owner"), t.user_attrs.get("fail_reason"))
         for t in trials] + [outs]
    walk = [t for t in trials if t.user_attrs["role"] == "minimize"]
    confirmation = [t for t in trials if t.user_attrs["role"] in (ROLE_CONFIRM_DEFAULT, ROLE_CONFIRM_BEST)]
    assert walk and len({t.user_attrs["owner"] for t in walk + confirmation}) == 1
    minimal = Minimal.from_attr(study.user_attrs[MINIMAL_ATTR])
    assert minimal.changes == {"files": "per_process"}
    tests = [(t.user_attrs["minimize_step"], t.user_attrs["pair"], t.user_attrs["arm"]) for t in walk]
    assert len(tests) == len(set(tests)) and {step for step, _, _ in tests} == set(range(len(minimal.steps)))
    assert len(confirmation) == 2 * study.user_attrs[CONFIRM_PLAN_ATTR]["pairs"]
    for out, _ in outs:
        assert minimal.describe() in out
    assert outs[0][0].split("REPORT\n", 1)[1] == outs[1][0].split("REPORT\n", 1)[1]
    waited = [out for out, _ in outs if "ran in another tuner" in out]
    assert len(waited) == 1 and "minimizing trial" not in waited[0] and "re-measuring" not in waited[0]


# -- the walk-back's budget and what the tuner says of undecided changes (issue 31, item 5) ----------------------

def test_a_walk_back_budget_that_is_not_seconds_stops_iobo_tune_before_anything_runs(storage, scratch, capsys):
    from iobo.cli import main

    code = main(["tune", "vpic", "--ranks", "2", "--trials", "4", "--storage", storage, "--study", "b",
                 "--workdir", str(scratch), "--walk-back-budget", "-5"])
    assert code == 2
    assert capsys.readouterr().err.startswith("iobo: error: --walk-back-budget must be a number of seconds >= 0 (")
    assert not list(scratch.iterdir()) and optuna.get_all_study_names(storage) == []


def _study_with_one_faster_trial(storage, scratch, said, trial_attrs=None, **kwargs):
    """A VPIC study of 3 default runs and a faster search trial (trial 3) that changes files and meta_block_size,
    each with ``trial_attrs``, with a tuner whose lines go to ``said`` (a real local runner: what it measures
    runs)."""
    from iobo.runners.local import LocalRunner

    from support.studies import add, defaults

    tuner = Tuner(kernel="vpic", ranks=2, storage=storage, study="walk", workdir=str(scratch),
                  kernel_options=SMALL_VPIC, runner=LocalRunner(), echo=said.append, warmup=False, **kwargs)
    study = tuner.open_study()
    defaults(study, **(trial_attrs or {}))
    add(study, 150.0, ROLE_SEARCH, 4, {"files": "per_process", "meta_block_size": 32768}, **(trial_attrs or {}))
    return tuner, study


def test_a_walk_back_with_no_budget_left_gives_each_test_its_first_pairs_and_says_how_it_measures(storage, scratch):
    """Real runs: with walk_back_budget_s=0 every test of the walk-back (trial 3's two changes) runs its first 3
    pairs and no more; the progress line says how a test measures: 3 pairs first, 3 more at a time while
    undecided, up to 20 pairs and 300 s, while the walk-back's budget lasts."""
    said = []
    tuner, study = _study_with_one_faster_trial(storage, scratch, said, walk_back_budget_s=0)
    minimal = tuner.minimize()
    assert ("minimizing trial 3's configuration: which of its changes matter (3 interleaved pairs per test; an "
            "undecided test gets 3 more at a time, up to 20 pairs and 300 s of extra pairs, while the walk-back's "
            "budget of 0 s lasts)") in said
    assert minimal.steps and all(len(step.with_mb_per_s) <= 3 for step in minimal.steps)
    walk = [t for t in study.get_trials() if t.user_attrs.get("role") == "minimize"]
    assert {t.user_attrs["pair"] for t in walk} <= {0, 1, 2}  # no test measured a 4th pair
    assert minimal.budget_s == 0 and minimal.ended_by_budget == any(s.verdict == "undecided" for s in minimal.steps)
    assert Minimal.from_attr(study.user_attrs[MINIMAL_ATTR]) == minimal


def _staked_study(storage, scratch, said, runs):
    """:func:`_study_with_one_faster_trial` of 1-minute trials moving 100 MB each, whose tuner has the stop rule
    of ``--production-runs runs``: at the default's 100 MB/s, a stake of ``runs`` seconds of I/O."""
    return _study_with_one_faster_trial(storage, scratch, said, {"bytes": 100e6}, stop_rule=ProductionRuns(runs))


def test_a_stake_below_the_confirmations_first_pairs_re_measures_nothing_and_says_so(storage, scratch):
    """Issue 31, item 3: with --production-runs 100, 100 production runs of 1 s of I/O at the default are not
    worth the confirmation's first 5 pairs of 60 s runs (600 s): nothing runs, the plan and the report say why,
    and no speedup is claimed."""
    said = []
    tuner, study = _staked_study(storage, scratch, said, 100)
    before = len(study.get_trials())
    tuner.confirm(5)
    assert len(study.get_trials()) == before
    why = ("the stake, 100.0 s of the production runs' I/O at the default, is below the cost of the confirmation's "
           "first 5 pairs (600.0 s at 60.0 s a run): nothing re-measured, so no speedup is claimed (`iobo confirm` "
           "re-measures anyway)")
    assert study.user_attrs[CONFIRM_PLAN_ATTR] == {"pairs": 0, "why": why}
    assert f"stop rule ProductionRuns: {why}" in said
    report = build_report(study)
    assert report.speedup is None and f"not measured: {why}" in report.text()
    # `iobo confirm` (a tuner of the study without the stop rule) re-measures anyway, as the line says
    Tuner(kernel="vpic", ranks=2, storage=storage, study="walk", workdir=str(scratch), kernel_options=SMALL_VPIC,
          runner=tuner.runner, echo=None, warmup=False).confirm(5, minimize=False)
    roles = [t.user_attrs.get("role") for t in study.get_trials()]
    assert roles.count(ROLE_CONFIRM_DEFAULT) == roles.count(ROLE_CONFIRM_BEST) >= 5


def test_a_stake_that_pays_the_confirmation_but_not_the_walk_back_confirms_the_whole_configuration(storage, scratch):
    """Real runs: a stake of 700 s pays the confirmation's first 5 pairs (600 s) and leaves 100 s, below the
    walk-back's first 3 pairs for each of trial 3's 2 changes (720 s): no walk-back, the whole configuration
    re-measured in 5 pairs, and an undecided confirmation may not grow past them (at most 5, not 20)."""
    said = []
    tuner, study = _staked_study(storage, scratch, said, 700)
    tuner.confirm(5)
    roles = [t.user_attrs.get("role") for t in study.get_trials()]
    assert "minimize" not in roles and MINIMAL_ATTR not in study.user_attrs
    assert roles.count(ROLE_CONFIRM_DEFAULT) == roles.count(ROLE_CONFIRM_BEST) == 5
    plan = study.user_attrs[CONFIRM_PLAN_ATTR]
    assert plan["pairs"] == plan["at_most"] == 5  # undecided or not: the stake pays for no more
    assert plan["why"].startswith("as asked; at most 5 pairs, what the stake pays for")
    best = [t for t in study.get_trials() if t.user_attrs.get("role") == ROLE_CONFIRM_BEST][0]
    assert best.user_attrs["config"]["meta_block_size"] == 32768 and best.user_attrs["config"]["files"] == "per_process"
    assert any("leaves 100.0 s, below the walk-back's first 3 pairs for each of 2 change(s) (720.0 s)" in line
               for line in said)


def test_the_checking_plan_spends_the_stake_on_the_confirmation_first_then_the_walk_back():
    """checking_plan at 2 s a run, 5 confirmation pairs (20 s) and 3 walk-back pairs for each of 2 changes (24 s)."""
    free = checking_plan(math.inf, 2.0, 5, 3, 2, 900.0)
    assert free == {"confirm": True, "walk_back": True, "walk_back_budget_s": 900.0, "why": ""}
    assert not checking_plan(19.9, 2.0, 5, 3, 2, 900.0)["confirm"]
    assert checking_plan(43.9, 2.0, 5, 3, 2, 900.0)["walk_back"] is False  # 23.9 s left < 24 s
    bounded = checking_plan(100.0, 2.0, 5, 3, 2, 900.0)
    assert bounded["walk_back"] and bounded["walk_back_budget_s"] == 80.0  # the rest after the first pairs
    assert checking_plan(1e6, 2.0, 5, 3, 2, 900.0)["walk_back_budget_s"] == 900.0  # never more than asked
    assert bounded["why"] == ("the stake, 100.0 s of the production runs' I/O at the default, bounds the walk-back's "
                              "budget to 80.0 s and the confirmation's pairs to what it pays for")
    no_walk_back = checking_plan(30.0, 2.0, 5, 3, 0, 900.0)  # --no-minimize, or walked back before
    assert no_walk_back["confirm"] and not no_walk_back["walk_back"]
    assert no_walk_back["why"].endswith("default, bounds the confirmation's pairs to what it pays for")
    plan = {"pairs": 8, "at_most": 20, "why": "planned"}
    assert within_pairs(plan, 30) is plan
    assert within_pairs(plan, 6) == {"pairs": 6, "at_most": 6,
                                     "why": "planned; at most 6 pairs, what the stake pays for"}


def test_keeping_the_default_for_want_of_evidence_names_the_undecided_knobs(storage, scratch):
    """The walk-back left files undecided (reverted: 1.42x, 0.92x-2.18x after 20 pairs) and kept nothing: confirm
    has nothing to re-measure, and its line says the default is kept because no change was shown to help, naming
    files, its value and the pairs that would settle it, as the recommendation line does."""
    said = []
    tuner, study = _study_with_one_faster_trial(storage, scratch, said)
    with_runs = (1500.0, 900.0, 1300.0, 2100.0, 700.0) * 4
    without_runs = (1000.0, 1100.0, 800.0, 1200.0, 1000.0) * 4
    step = Step(("files",), 1.42, (0.92, 2.18), False, with_runs, without_runs,
                stopped="measuring stopped: the walk-back's budget of 900 s was spent")
    minimal = Minimal(3, {}, [step], budget_s=900.0, ended_by_budget=True)
    study.set_user_attr(MINIMAL_ATTR, minimal.to_attr())
    before = len(study.get_trials())
    tuner.confirm(5)
    assert len(study.get_trials()) == before  # nothing to re-measure
    undecided = minimal.undecided_text({"files": "per_process"})
    assert undecided.startswith("files=per_process: 1.42x, 95% CI 0.92x-2.18x after 20 pairs, about ")
    assert said[-1] == ("the minimal configuration of trial 3 is the system default: no speedup to confirm, keep the "
                        f"default: no change was shown to help; undecided: {undecided} (the walk-back's budget of "
                        "900 s was spent, so undecided tests measured no more pairs)")
    assert f"undecided: {undecided}" in recommended(study, tuner.space)[1]  # the recommendation line's words
    report = build_report(study)  # the report says the budget ended the measuring
    assert (f"walk-back:               {minimal.conclusion()}" in report.text().splitlines()
            and minimal.conclusion().endswith("(the walk-back's budget of 900 s was spent, so undecided tests "
                                              "measured no more pairs)"))
    walk = report.to_dict()["walk_back"]
    assert walk["budget_s"] == 900.0 and walk["ended_by_budget"] and walk["undecided"] == [["files"]]
