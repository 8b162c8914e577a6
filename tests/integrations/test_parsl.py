"""Trials as Parsl apps on a real HighThroughputExecutor; site configs load."""

import time
from pathlib import Path

import parsl
import pytest
from parsl.providers import SlurmProvider

from iobo import ConfigError
from iobo.runners.parsl import SHUTDOWN_S, ParslRunner, load_config_file, loaded_dfk, local_config
from iobo.launch import KernelJob
from iobo.space import io_stack_space

from support.sizes import SMALL_VPIC

WORKFLOWS = Path(__file__).parents[2] / "workflows"


def test_a_kernel_job_runs_as_a_parsl_app(scratch):
    job = KernelJob(kernel="vpic", values=io_stack_space().default(), ranks=2, workdir=str(scratch),
                    options=SMALL_VPIC)
    with ParslRunner(local_config(1, str(scratch / "runinfo"))) as runner:
        result = runner.submit(job).result(timeout=120)
    assert result["mb_per_s"] > 0
    assert result["bytes"] == 2 * SMALL_VPIC["particles"] * 32 * SMALL_VPIC["steps"]
    assert loaded_dfk() is None  # the runner loaded the DFK, so it cleaned it up


def test_an_already_loaded_dfk_is_used_and_left_loaded(scratch):
    dfk = parsl.load(local_config(1, str(scratch / "runinfo")))
    try:
        job = KernelJob(kernel="vpic", values={}, ranks=1, workdir=str(scratch), options=SMALL_VPIC)
        with ParslRunner() as runner:
            assert runner.submit(job).result(timeout=120)["mb_per_s"] > 0
        assert loaded_dfk() is dfk
    finally:
        dfk.cleanup()
        parsl.clear()


@pytest.mark.usefixtures("no_leftover_processes")
def test_a_runner_whose_interchange_died_stops_within_its_bound_and_keeps_its_logs(scratch):
    """Parsl's shutdown waits forever for an interchange that died (a Ctrl-C at a terminal used to kill it):
    the runner ends the executor's processes itself after SHUTDOWN_S, and keeps Parsl's logs for a look."""
    job = KernelJob(kernel="vpic", values={}, ranks=1, workdir=str(scratch), options=SMALL_VPIC)
    runner = ParslRunner(run_dir=str(scratch / "runinfo"))
    with runner:
        assert runner.submit(job).result(timeout=120)["mb_per_s"] > 0  # the workers are connected
        interchange = loaded_dfk().executors["iobo_local"].interchange_proc
        interchange.kill()
        interchange.wait()
        left = time.monotonic()
    assert time.monotonic() - left < SHUTDOWN_S + 5
    assert loaded_dfk() is None
    assert runner.kept_logs == str(scratch / "runinfo" / "000") and Path(runner.kept_logs, "parsl.log").is_file()


def test_site_configs_load():
    slurm = load_config_file(str(WORKFLOWS / "site_slurm.py"))
    assert isinstance(slurm.executors[0].provider, SlurmProvider)
    local = load_config_file(str(WORKFLOWS / "site_local.py"))
    assert local.executors[0].label == "iobo_local"


def test_bad_site_config_is_rejected(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config_file(str(tmp_path / "missing.py"))
    bad = tmp_path / "bad.py"
    bad.write_text("config = 42\n")
    with pytest.raises(ConfigError, match=r"must define `config = parsl.config.Config\(...\)`; found int"):
        load_config_file(str(bad))
