"""Trials through a real Slurm cluster (one node, started by the test): Parsl's SlurmProvider submits the worker
pool as a batch job started with srun; a cancelled job and an expired walltime become FAIL trials that say so,
and the study goes on in a new job."""

import os
import sys
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from experiments.harness.faults import write_launcher
from iobo.storage import open_storage

from support.processes import HUNG_RANK, wait_for_hung_ranks
from support.sizes import SMALL_VPIC

ROOT = Path(__file__).parents[2]
WORKFLOWS = ROOT / "workflows"


@pytest.fixture(scope="module")
def slurm():
    """A one-node Slurm cluster (support/slurm.py), stopped after the module."""
    from support.slurm import SlurmCluster, SlurmUnavailable

    try:
        cluster = SlurmCluster.start()
    except SlurmUnavailable as exc:
        pytest.skip(f"Slurm cannot start here: {exc}")
    yield cluster
    cluster.stop()


def site_config(tmp_path: Path, walltime: str) -> Path:
    """A copy of workflows/site_slurm.py for this cluster: partition `debug`, one node, the worker pool started
    with srun, short heartbeats (a lost pool is noticed in seconds), Parsl's `simple` strategy (a block that
    ended is replaced while trials wait). Inside the job, hydra starts its proxies as Slurm steps that may
    share the pool's CPUs (--overlap)."""
    template = (WORKFLOWS / "site_slurm.py").read_text()
    assert "SlurmProvider(" in template  # the copy follows the documented site config
    venv_bin = os.path.dirname(sys.executable)
    worker_init = (f"export PATH={venv_bin}:$PATH; export PYTHONPATH={ROOT}:{os.environ.get('PYTHONPATH', '')}; "
                   f"export HYDRA_LAUNCHER_EXTRA_ARGS=--overlap")
    path = tmp_path / "site_slurm_test.py"
    path.write_text(f'''
from parsl.config import Config
from parsl.executors import HighThroughputExecutor
from parsl.launchers import SrunLauncher
from parsl.providers import SlurmProvider

config = Config(
    executors=[
        HighThroughputExecutor(
            label="iobo_slurm",
            max_workers_per_node=1,
            cpu_affinity="none",
            heartbeat_period=2,
            heartbeat_threshold=8,
            provider=SlurmProvider(
                partition="debug",
                nodes_per_block=1,
                init_blocks=1,
                min_blocks=0,
                max_blocks=1,
                walltime="{walltime}",
                exclusive=False,
                launcher=SrunLauncher(),
                worker_init="{worker_init}",
                cmd_timeout=30,
            ),
        )
    ],
    run_dir="{tmp_path / 'runinfo'}",
    strategy="simple",
)
''')
    return path


def tune(storage, scratch, config, launcher, trials=4):
    return [sys.executable, "-m", "iobo.cli", "tune", "vpic", "--ranks", "2", "--trials", str(trials),
            "--storage", storage, "--study", "slurm", "--workdir", str(scratch), "--sampler", "tpe",
            "--no-warmup", "--confirm", "0",  # the first launch is the trial that must hang
            "--parsl-config", str(config), "--mpiexec", launcher, "--timeout", "600",
            "--option", f"particles={SMALL_VPIC['particles']}", "--option", f"steps={SMALL_VPIC['steps']}"]


def running_jobs(slurm) -> list[str]:
    return [job for job, state in slurm.squeue() if state == "RUNNING"]


def finish(proc, timeout_s=600) -> str:
    _, err = proc.communicate(timeout=timeout_s)
    assert proc.returncode == 0, err[-3000:]
    return err


@pytest.mark.usefixtures("no_leftover_processes")
def test_a_cancelled_job_fails_its_trial_and_the_study_goes_on(slurm, storage, scratch, tmp_path, no_leftover_processes):
    import subprocess

    hang = write_launcher(tmp_path / "hang", "hang", first=3)  # the first 3 trials hang until their job is cancelled
    proc = subprocess.Popen(tune(storage, scratch, site_config(tmp_path, "00:10:00"), hang, trials=7),
                            env=slurm.env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    cancelled = []
    for _ in range(3):  # each in its own batch job: the next starts once Parsl replaced the last
        wait_for_hung_ranks(no_leftover_processes)
        [job] = running_jobs(slurm)
        subprocess.run(["scancel", job], env=slurm.env(), check=True)
        cancelled.append(job)
        deadline = time.monotonic() + 60  # its ranks gone before the next trial's are looked for
        while any(HUNG_RANK in c for _, c in no_leftover_processes.sample().values()):
            assert time.monotonic() < deadline, f"the ranks of cancelled job {job} outlived it by 60 s"
            time.sleep(0.2)
    finish(proc)
    trials = optuna.load_study(study_name="slurm", storage=open_storage(storage)).get_trials()
    assert [t.state for t in trials[:3]] == [TrialState.FAIL] * 3  # all 3 default runs lost: no verdict on it
    assert all(t.user_attrs["role"] == "default" and t.user_attrs["lost"] for t in trials[:3])
    job, second, _ = cancelled
    later = trials[1].user_attrs["fail_reason"]  # names its own job, not the one the first loss already named
    assert f"batch job {second}: " in later and f"batch job {job}: " not in later, later
    reason = trials[0].user_attrs["fail_reason"]
    assert "worker running this trial was lost" in reason
    assert f"batch job {job}: " in reason and " CANCELLED AT " in reason
    # the scheduler's own line, for the job or (when the runner read the log before Slurm wrote that) its step
    assert f"*** JOB {job} ON " in reason or f"*** STEP {job}." in reason, reason
    assert "TIME LIMIT" not in reason
    left = list(Path(trials[0].user_attrs["workdir"]).glob(f"trial-{trials[0].user_attrs['run_tag']}-*"))
    assert left == [], left  # the lost run's directory is removed by the tuner (its worker never did)
    # the lost default runs were queued again and the study went on in the next batch job (before 5bd1f96 the
    # tuner stopped here: "the system default failed in all 3 of its runs, so there is no baseline")
    assert [t.state for t in trials[3:]] == [TrialState.COMPLETE] * 4
    assert [t.user_attrs["role"] for t in trials[3:6]] == ["default"] * 3
    assert len({j for j, _ in slurm.squeue()}) >= 4


@pytest.mark.usefixtures("no_leftover_processes")
def test_a_job_past_its_walltime_fails_its_trial_and_the_study_goes_on(slurm, storage, scratch, tmp_path,
                                                                        no_leftover_processes):
    import subprocess

    hang = write_launcher(tmp_path / "hang", "hang", first=1)  # the first trial hangs past the 1-minute walltime
    proc = subprocess.Popen(tune(storage, scratch, site_config(tmp_path, "00:01:00"), hang), env=slurm.env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_for_hung_ranks(no_leftover_processes)
    [job] = running_jobs(slurm)
    finish(proc)
    trials = optuna.load_study(study_name="slurm", storage=open_storage(storage)).get_trials()
    assert trials[0].state == TrialState.FAIL
    reason = trials[0].user_attrs["fail_reason"]
    assert f"batch job {job}: " in reason and f"*** JOB {job} ON " in reason and "DUE TO TIME LIMIT" in reason
    assert sum(t.state == TrialState.COMPLETE for t in trials[1:]) >= 2  # later jobs (1 minute each) ran the rest
    assert len(trials) == 4 and TrialState.RUNNING not in [t.state for t in trials]
