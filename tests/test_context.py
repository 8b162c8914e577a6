"""A study's context: recorded by the tuner from the kernel and its first run, read back for any study."""

import datetime as dt

import optuna
from optuna.distributions import CategoricalDistribution
from optuna.trial import FrozenTrial, TrialState

from iobo import kernels
from iobo.context import CONTEXT_ATTR, Context, kernel_context, record_context, study_context
from iobo.tuner import Tuner

from support.sizes import SMALL_VPIC


def test_kernel_context_from_the_kernel_options():
    vpic = kernel_context("vpic", 4, {"particles": 1024})
    assert (vpic.kernel, vpic.ranks, vpic.nodes) == ("vpic", 4, 1)
    assert vpic.access_bytes == 1024 * 4  # each rank writes its 1024 float32 particles of a variable in one call
    assert vpic.file_layout == "shared" and vpic.bytes_per_rank is None and vpic.fs_type is None
    ior = kernel_context("ior", 2, {"transfer_size": 65536, "block_size": 262144})
    assert ior.access_bytes == 65536
    checkpoint = kernel_context("checkpoint", 2, {"variable_bytes": 4096})
    assert checkpoint.access_bytes == 4096
    assert kernel_context("vpic", 2, {}).kernel_options == kernels.get("vpic").resolve_options({})


def test_the_tuner_records_the_context_with_the_first_runs_measurements(storage, scratch):
    tuner = Tuner(kernel="vpic", ranks=2, trials=4, storage=storage, study="ctx", workdir=str(scratch),
                  kernel_options=SMALL_VPIC, sampler=optuna.samplers.RandomSampler(seed=0), echo=None,
                  warmup=False, characterization={"source": "darshan", "rules": ["misaligned"]})
    study = tuner.run()
    first = study.trials[0]
    stored = Context.from_attr(study.user_attrs[CONTEXT_ATTR])
    assert stored.bytes_per_rank == first.user_attrs["bytes"] // 2
    assert stored.bytes_per_rank == SMALL_VPIC["particles"] * 4 * 8 * SMALL_VPIC["steps"]  # 8 float32 per step
    assert stored.fs_type == first.user_attrs["fs_type"] == "tmpfs"
    assert stored.access_bytes == SMALL_VPIC["particles"] * 4
    assert stored.characterization == {"source": "darshan", "rules": ["misaligned"]}
    assert study_context(study) == stored
    assert "vpic on 2 rank(s)" in stored.describe() and "on tmpfs" in stored.describe()

    # resuming without a characterisation keeps the recorded one and the measurements
    record_context(study, kernel_context("vpic", 2, SMALL_VPIC))
    assert study_context(study) == stored


def test_a_study_without_a_stored_context_gets_one_from_its_attrs_and_first_trial(storage):
    study = optuna.create_study(storage=storage, study_name="old", direction="maximize")
    study.set_user_attr("kernel", "vpic")
    study.set_user_attr("ranks", 2)
    study.set_user_attr("kernel_options", {"particles": 2048})
    now = dt.datetime(2026, 1, 1)
    study.add_trial(FrozenTrial(
        number=0, trial_id=0, state=TrialState.COMPLETE, value=100.0, datetime_start=now, datetime_complete=now,
        params={"files": "shared"}, distributions={"files": CategoricalDistribution(("shared", "per_process"))},
        user_attrs={"role": "default", "bytes": 262144, "fs_type": "ext4"}, system_attrs={}, intermediate_values={}))
    context = study_context(study)
    assert (context.kernel, context.ranks, context.access_bytes) == ("vpic", 2, 2048 * 4)
    assert (context.bytes_per_rank, context.fs_type) == (131072, "ext4")
    task = optuna.create_study(storage=storage, study_name="task", direction="maximize")
    task.set_user_attr("task", "write_step")
    assert study_context(task).task == "write_step"
    assert study_context(optuna.create_study(storage=storage, study_name="bare")) is None


def test_the_nodes_are_the_hosts_the_first_runs_ranks_ran_on(storage):
    """A run whose shim report names 3 hosts (a trial across 3 nodes) makes the context's nodes 3; one without
    hosts (a kernel the shim did not measure) leaves the 1 assumed before any run."""
    now = dt.datetime(2026, 1, 1)
    for name, hosts, nodes in (("across", {"node1": {}, "node2": {}, "node3": {}}, 3), ("unknown", None, 1)):
        study = optuna.create_study(storage=storage, study_name=name, direction="maximize")
        record_context(study, kernel_context("vpic", 3, {"particles": 2048}))
        io = {"hosts": hosts} if hosts else {}
        study.add_trial(FrozenTrial(
            number=0, trial_id=0, state=TrialState.COMPLETE, value=100.0, datetime_start=now, datetime_complete=now,
            params={"files": "shared"}, distributions={"files": CategoricalDistribution(("shared", "per_process"))},
            user_attrs={"role": "default", "bytes": 3 * 2048, "fs_type": "tmpfs", "io": io}, system_attrs={},
            intermediate_values={}))
        context = study_context(study)
        assert (context.nodes, context.fs_type) == (nodes, "tmpfs"), name
        assert f"({nodes} node(s))" in context.describe()
