"""Parsl's MPI mode on this machine (an MPIExecutor whose nodes are localhost), and journal storage.

One MPIExecutor is loaded for the module (a Parsl start costs ~10 s here);
the runner and the tuner use it as a pipeline's own configuration.
"""

from pathlib import Path

import optuna
import parsl
import pytest
from optuna.trial import TrialState
from parsl.executors import MPIExecutor
from parsl.launchers import SimpleLauncher

from iobo import ConfigError
from iobo.runners.parsl import ParslRunner, load_config_file, local_mpi_config
from iobo.launch import KernelJob, MpiexecLauncher, ParslMPIPrefixLauncher
from iobo.minimize import revert
from iobo.storage import open_storage
from iobo.trials import FROZEN_ATTR, best_trial
from iobo.tuner import Tuner

from support.sizes import SMALL_VPIC

WORKFLOWS = Path(__file__).parents[2] / "workflows"


@pytest.fixture(scope="module")
def mpi_dfk(tmp_path_factory):
    dfk = parsl.load(local_mpi_config(1, str(tmp_path_factory.mktemp("runinfo"))))
    yield dfk
    dfk.cleanup()
    parsl.clear()


def test_a_trial_runs_on_two_ranks_through_parsls_mpi_prefix(mpi_dfk, scratch):
    job = KernelJob(kernel="vpic", values={}, ranks=2, workdir=str(scratch), options=SMALL_VPIC,
                    launcher=ParslMPIPrefixLauncher())
    with ParslRunner() as runner:
        result = runner.submit(job).result(timeout=120)
    assert result["result"]["ranks"] == 2
    assert result["command"][:7] == ["mpiexec", "-n", "2", "-ppn", "2", "-hosts", "localhost"]
    assert result["bytes"] == 2 * SMALL_VPIC["particles"] * 32 * SMALL_VPIC["steps"]


def test_a_launcher_without_nodes_is_refused_in_mpi_mode(mpi_dfk, scratch):
    job = KernelJob(kernel="vpic", values={}, ranks=1, workdir=str(scratch), options=SMALL_VPIC,
                    launcher=MpiexecLauncher())
    with ParslRunner() as runner:
        with pytest.raises(ConfigError, match="runs in MPI mode but the trial's launcher .* asks for no nodes"):
            runner.submit(job)


def test_the_launcher_runs_parsls_prefix_for_the_ranks_parsl_placed(monkeypatch):
    monkeypatch.setenv("PARSL_MPI_PREFIX", "mpiexec -n 2 -ppn 2 -hosts localhost")
    monkeypatch.setenv("PARSL_NUM_RANKS", "2")
    assert ParslMPIPrefixLauncher(executable="mpiexec.mpich").command(2, ["python"]) == [
        "mpiexec.mpich", "-n", "2", "-ppn", "2", "-hosts", "localhost", "python"]
    with pytest.raises(ConfigError, match="Parsl placed this task for 2 ranks but the run needs 4"):
        ParslMPIPrefixLauncher().command(4, ["python"])


def test_the_launcher_asks_parsl_for_its_nodes():
    assert ParslMPIPrefixLauncher(nodes=2).resource_specification(5) == {
        "num_nodes": 2, "ranks_per_node": 3, "num_ranks": 5}
    with pytest.raises(ConfigError, match="cannot span nodes=4; allowed: nodes <= ranks"):
        ParslMPIPrefixLauncher(nodes=4).check(2)
    with pytest.raises(ConfigError, match="nodes must be a positive integer; got 0"):
        ParslMPIPrefixLauncher(nodes=0)


def test_the_tuner_in_mpi_mode_with_a_journal_storage(mpi_dfk, scratch):
    storage = f"journal://{scratch / 'study.log'}"
    tuner = Tuner(kernel="vpic", ranks=2, trials=4, storage=storage, study="j", workdir=str(scratch),
                  kernel_options=SMALL_VPIC, sampler=optuna.samplers.RandomSampler(seed=0), echo=None,
                  launcher=ParslMPIPrefixLauncher())
    tuner.run()
    study = optuna.load_study(study_name="j", storage=open_storage(storage))
    trials = study.get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 4
    assert all(t.user_attrs["command"].startswith("mpiexec -n 2 -ppn 2 -hosts localhost ") for t in trials)
    # the recommendation (no walk-back, no confirmation): the best trial's configuration with the knobs recorded
    # as not applied (which vary from run to run: a cb_nodes ROMIO overrode) at their defaults
    best = best_trial(study)
    not_applied = [*best.user_attrs["not_applied"], *study.user_attrs.get(FROZEN_ATTR, {})]
    assert tuner.best_config().values == revert(tuner.space, tuner.workload, best.user_attrs["config"], not_applied)
    assert (scratch / "study.log").stat().st_size > 0


def test_a_journal_path_must_be_absolute():
    with pytest.raises(ConfigError, match="needs an absolute path; allowed: journal:///abs/path/file.log"):
        open_storage("journal://relative.log")


def test_the_mpi_site_configs_load(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the local one writes runinfo/localhost.nodes
    for site, launcher in (("site_slurm_mpi.py", "srun"), ("site_local_mpi.py", "mpiexec")):
        executor = load_config_file(str(WORKFLOWS / site)).executors[0]
        assert isinstance(executor, MPIExecutor) and executor.enable_mpi_mode
        assert executor.mpi_launcher == launcher and isinstance(executor.provider.launcher, SimpleLauncher)
    assert (tmp_path / "runinfo" / "localhost.nodes").read_text() == "localhost\n"
    assert "PBS_NODEFILE" in executor.provider.worker_init
