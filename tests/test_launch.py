"""Launching one kernel run as an MPI job: results, streaming, failures."""

import time

import pytest

from iobo import ConfigError, KernelError, SpaceError
from iobo.launch import KernelJob, MpiexecLauncher, ParslMPIPrefixLauncher, run_kernel

from support.sizes import SMALL_VPIC


def job(scratch, **kw):
    return KernelJob(**{"kernel": "vpic", "values": {}, "ranks": 2, "workdir": str(scratch),
                        "options": SMALL_VPIC, **kw})


def test_run_kernel_returns_the_result_and_streams_steps(scratch):
    steps = []
    result = run_kernel(job(scratch), on_step=steps.append)
    assert result["mb_per_s"] > 0 and result["seconds"] > 0
    assert [s["step"] for s in steps] == list(range(SMALL_VPIC["steps"]))
    assert result["step_mb_per_s"] == [s["mb_per_s"] for s in steps]
    assert result["command"][:3] == ["mpiexec.mpich", "-n", "2"]
    assert list(scratch.iterdir()) == []  # the trial directory is removed


def test_step_lines_arrive_while_the_job_runs(scratch):
    """Each step's line is printed when the step ends (so a pruner can stop a
    one-repeat trial mid-write): arrivals spread over the steps' I/O time."""
    arrivals, seconds = [], []

    def record(event):
        arrivals.append(time.monotonic())
        seconds.append(event["seconds"])

    run_kernel(job(scratch, options={"particles": 1 << 20, "steps": 12, "fsync": True}), on_step=record)
    assert len(arrivals) == 12
    assert arrivals[-1] - arrivals[0] >= 0.5 * sum(seconds[1:])


def test_keep_leaves_the_trial_directory_and_files(scratch):
    run_kernel(job(scratch, keep=True))
    (trial_dir,) = scratch.iterdir()
    assert (trial_dir / "config.json").exists()
    assert list((trial_dir / "out").glob("*.h5"))


@pytest.mark.usefixtures("no_leftover_processes")
def test_timeout_kills_the_job_and_says_so(scratch, hanging_kernel):
    started = time.monotonic()
    with pytest.raises(KernelError) as err:
        run_kernel(job(scratch, kernel=hanging_kernel, timeout_s=3))
    assert "timed out after 3 s and was killed" in str(err.value)
    assert time.monotonic() - started < 30  # killed, not waited for
    assert err.value.command[0] == "mpiexec.mpich"


def test_a_kernel_error_carries_exit_code_and_stderr(scratch):
    # MPICH's launcher refuses an unknown option: a real non-zero exit with stderr
    bad = MpiexecLauncher("mpiexec.mpich", ("--no-such-option",))
    with pytest.raises(KernelError) as err:
        run_kernel(job(scratch, launcher=bad))
    assert err.value.returncode != 0
    assert err.value.stderr_tail
    assert "exit code" in str(err.value)


def test_invalid_input_is_rejected_before_launch(scratch):
    with pytest.raises(SpaceError, match="unknown parameter"):
        run_kernel(job(scratch, values={"nope": 1}))
    with pytest.raises(ConfigError, match="unknown kernel"):
        run_kernel(job(scratch, kernel="nope"))
    with pytest.raises(ConfigError, match="ranks must be a positive integer"):
        run_kernel(job(scratch, ranks=0))
    with pytest.raises(ConfigError, match="not on PATH"):
        run_kernel(job(scratch, launcher=MpiexecLauncher("mpiexec.nosuch")))
    assert list(scratch.iterdir()) == []


def test_parsl_prefix_launcher_uses_the_prefix_parsl_sets(monkeypatch):
    launcher = ParslMPIPrefixLauncher()
    monkeypatch.delenv("PARSL_MPI_PREFIX", raising=False)
    with pytest.raises(ConfigError, match="PARSL_MPI_PREFIX is not set"):
        launcher.command(2, ["python"])
    monkeypatch.setenv("PARSL_MPI_PREFIX", "mpiexec -n 4 -ppn 2 -hosts a,b")
    assert launcher.command(4, ["python"]) == ["mpiexec", "-n", "4", "-ppn", "2", "-hosts", "a,b", "python"]
