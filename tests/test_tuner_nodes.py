"""The nodes a study's trials span: given (``Tuner(nodes=)``, ``iobo tune --nodes``) or learned from the hosts a
run's ranks ran on, and the space's node rule (``cb_nodes`` within what ``cb_config_list`` allows) following them.
Real MPI runs of the VPIC kernel on this one host, real ROMIO reading its hints back."""

import subprocess
import sys

import optuna
import pytest

from iobo import SpaceError
from iobo.tuner import Tuner
from support.sizes import SMALL_VPIC

ROMIO_LOWERS = {"cb_nodes": 2, "cb_config_list": "*:1", "romio_cb_write": "enable"}  # *:1 on one host: 1 aggregator
ROMIO_TAKES = {"cb_nodes": 2, "cb_config_list": "*:*", "romio_cb_write": "enable"}  # any rank may aggregate


def processor_name() -> str:
    """This host as MPI names it (``MPI_Get_processor_name``), asked in a process of its own."""
    return subprocess.run([sys.executable, "-c", "from mpi4py import MPI; print(MPI.Get_processor_name())"],
                          capture_output=True, text=True, check=True).stdout.strip()


def tuner(storage, scratch, trials, **settings):
    return Tuner(kernel="vpic", ranks=2, trials=trials, storage=storage, study="nodes", workdir=str(scratch),
                 kernel_options=SMALL_VPIC, sampler=optuna.samplers.RandomSampler(seed=0), warmup=False,
                 default_every=0, echo=None, **settings)


def test_a_kernel_study_learns_its_hosts_and_runs_no_cb_nodes_romio_would_lower(storage, scratch):
    first_tuner = tuner(storage, scratch, trials=3 + 1)
    study = first_tuner.run()
    first = study.trials[0]
    assert first.user_attrs["hosts"] == {processor_name(): [0, 1]}  # the kernel's own report of its ranks' hosts
    assert study.user_attrs["context"]["nodes"] == 1
    study.enqueue_trial({**first_tuner.space.default(), **ROMIO_LOWERS})  # the rest at the defaults
    study.enqueue_trial({**first_tuner.space.default(), **ROMIO_TAKES})
    resumed = tuner(storage, scratch, trials=3 + 1 + 2).run()  # a new tuner: it takes the hosts from the study
    lowered, taken = resumed.trials[-2:]
    assert lowered.user_attrs["config"]["cb_nodes"] == 1, lowered.user_attrs  # repaired before the run
    assert lowered.user_attrs["repaired"] == [
        "cb_nodes=2 exceeds the 1 aggregator(s) cb_config_list='*:1' allows for 2 ranks on 1 node(s) (ROMIO would "
        "lower it to 1); allowed: cb_nodes <= 1, or a cb_config_list with more aggregators per node ('*:*': up to 2)"]
    assert lowered.user_attrs["hints"]["cb_nodes"] == "1"  # ROMIO's own read-back (MPI_File_get_info)
    assert taken.user_attrs["config"]["cb_nodes"] == 2 and "repaired" not in taken.user_attrs
    assert taken.user_attrs["hints"]["cb_nodes"] == "2"  # *:* lets both ranks of the one host aggregate


def test_nodes_given_are_checked_against_the_ranks_before_any_run(storage, scratch):
    with pytest.raises(SpaceError, match=r"workload nodes \(3\) must not exceed ranks \(2\)"):
        tuner(storage, scratch, trials=4, nodes=3)
    assert not list(scratch.iterdir())  # nothing launched, nothing written


def test_nodes_given_that_the_runs_contradict_are_replaced_by_the_hosts_they_ran_on(storage, scratch):
    said = []
    study = Tuner(kernel="vpic", ranks=2, trials=4, storage=storage, study="told", workdir=str(scratch),
                  kernel_options=SMALL_VPIC, sampler=optuna.samplers.RandomSampler(seed=0), warmup=False,
                  default_every=0, echo=said.append, nodes=2).run()
    assert "the runs' ranks ran on 1 host(s), not the 2 node(s) given: the search follows the 1 host(s)" in said
    assert study.user_attrs["context"]["nodes"] == 1
