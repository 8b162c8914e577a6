"""A real 3-node Slurm cluster on this machine (tests/support/cluster.py: network namespaces node1..node3, a
slurmd each, slurmctld beside them): MPI jobs and iobo's trials span its nodes, and it stops leaving nothing.

Skipped, saying why, where network namespaces (or Slurm, munge, root) are not available."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import optuna
import psutil
import pytest
from optuna.trial import TrialState

from iobo.pruning import REPORTED_FROM_ATTR
from iobo.report import build_report
from support.cluster import Cluster, ClusterUnavailable
from support.processes import assert_gone

ROOT = Path(__file__).parents[2]
NODES = {"node1", "node2", "node3"}

WHERE = '''\
"""Each rank writes its 1 MiB block of one shared file collectively; rank 0 prints every rank's host and the
hints ROMIO applied (MPI_File_get_info). With a second argument, a file: when it exists, the run removes it and
every rank sleeps 10 minutes (the trial to crash a node under); a third, seconds to compute (sleep) first."""
import json, os, socket, sys, time

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
hang = len(sys.argv) > 2 and os.path.exists(sys.argv[2])
comm.Barrier()
started = time.time()  # the same clock on every node: one kernel
if hang and comm.rank == 0:
    os.remove(sys.argv[2])
if hang:
    time.sleep(600)
time.sleep(float(sys.argv[3]) if len(sys.argv) > 3 else 0.0)  # computation: lets trials in flight overlap
block = np.full(1 << 20, comm.rank, dtype=np.uint8)
fh = MPI.File.Open(comm, sys.argv[1], MPI.MODE_CREATE | MPI.MODE_WRONLY)
fh.Write_at_all(comm.rank * block.nbytes, block)
info = fh.Get_info()
hints = {key: info.Get(key) for key in ("cb_nodes", "cb_config_list", "romio_aggregator_list")}
fh.Close()
hosts = comm.gather(socket.gethostname())
if comm.rank == 0:
    print(json.dumps({"hosts": hosts, "hints": hints, "ran": [started, time.time()]}))
'''


@pytest.fixture(scope="module")
def cluster():
    """The cluster ``iobot`` (its own namespaces, beside a user's ``make cluster-up`` one), stopped after the
    module; the stop fails the module's last test if anything of it is left."""
    try:
        Cluster("iobot", 3).down()  # one a killed test run left: its jobs and queue are not this module's
        started = Cluster("iobot", 3).up()
    except ClusterUnavailable as exc:
        pytest.skip(f"the multi-node test cluster cannot start here: {exc}")
    yield started
    started.down()
    assert started.leftovers() == {}


def on_login(cluster, argv, timeout_s=120, cwd="/tmp"):
    """Run ``argv`` on the cluster's login host, in ``cwd``; its stdout (fails the test if it fails)."""
    done = subprocess.run(cluster.command(argv), capture_output=True, text=True, timeout=timeout_s,
                          env=cluster.env(), cwd=cwd)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_each_node_has_its_own_hostname_and_address(cluster):
    assert cluster.node_states() == {"node1": "idle", "node2": "idle", "node3": "idle"}
    out = on_login(cluster, ["srun", "-N3", "-n3", "-l", "sh", "-c", "echo $(hostname) $(ip -4 -o addr show eth0)"])
    seen = {line.split()[1]: line.split()[5] for line in out.splitlines()}
    assert seen == {"node1": "10.77.0.11/24", "node2": "10.77.0.12/24", "node3": "10.77.0.13/24"}


def test_an_mpich_job_of_three_ranks_spans_three_nodes(cluster, tmp_path):
    program = tmp_path / "where.py"
    program.write_text(WHERE)
    out = on_login(cluster, ["salloc", "-N3", "-n3", "mpiexec.mpich", "-launcher", "slurm", "-n", "3",
                             sys.executable, str(program), str(cluster.base / "work" / "where.dat")])
    report = json.loads(out.strip().splitlines()[-1])
    assert sorted(report["hosts"]) == sorted(NODES)  # rank r's host, from gethostname in the rank
    # ROMIO's default cb_config_list *:1 is one aggregator per host: 3 hosts, 3 aggregators (on one host: 1)
    assert report["hints"] == {"cb_nodes": "3", "cb_config_list": "*:1", "romio_aggregator_list": "0 1 2 "}


def tune_across_nodes(cluster, tmp_path, trials, *program_args):
    """The argv of ``iobo tune --command WHERE`` on 3 ranks through workflows/site_cluster.py, its study
    ``cluster`` in ``tmp_path``/iobo.db, its workdir in the cluster's shared directory."""
    program = tmp_path / "where.py"
    program.write_text(WHERE)
    workdir = cluster.base / "work" / tmp_path.name
    workdir.mkdir()
    command = " ".join([sys.executable, str(program), "{workdir}/out.dat", *program_args])
    return [sys.executable, "-m", "iobo.cli", "tune", "--command", command, "--ranks", "3", "--trials", str(trials),
            "--no-warmup", "--confirm", "0", "--sampler", "tpe", "--seed", "1",
            "--parsl-config", str(ROOT / "workflows/site_cluster.py"), "--workdir", str(workdir),
            "--storage", f"sqlite:///{tmp_path / 'iobo.db'}", "--study", "cluster"]


@pytest.mark.usefixtures("no_leftover_processes")
def test_trials_run_across_nodes_through_parsls_slurm_provider(cluster, tmp_path):
    storage = f"sqlite:///{tmp_path / 'iobo.db'}"
    on_login(cluster, tune_across_nodes(cluster, tmp_path, 4), timeout_s=300, cwd=tmp_path)  # Parsl's runinfo there
    study = optuna.load_study(study_name="cluster", storage=storage)
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 4
    assert study.user_attrs["context"]["nodes"] == 3  # recorded from the first run's hosts
    for trial in study.trials:
        report = json.loads(trial.user_attrs["stdout_tail"].strip().splitlines()[-1])
        assert sorted(report["hosts"]) == sorted(NODES), trial.number  # each trial: one rank per node
        per_host = trial.user_attrs["io"]["hosts"]  # the shim's own account: each rank's gethostname, its bytes
        assert sorted(per_host) == sorted(NODES), per_host
        assert all(len(h["ranks"]) == 1 and h["bytes_written"] > 0 for h in per_host.values()), per_host
        # the shim read back the hints in effect: with one aggregator per host, as many as the hosts asked
        hints = trial.user_attrs["hints"]
        if hints["cb_config_list"] == "*:1":
            assert int(hints["cb_nodes"]) == (trial.params.get("cb_nodes") or 3), trial.params
    jobs = on_login(cluster, ["squeue", "-h", "-t", "all", "-o", "%i %T %N"]).splitlines()
    assert jobs and all(line.split()[1] != "RUNNING" for line in jobs), jobs  # the block ended with the tuner
    assert any(line.endswith("node[1-3]") for line in jobs), jobs  # a job held all three nodes
    nodes = build_report(study).nodes  # the report's per-node line: ranks, bytes and aggregators of each host
    assert nodes.startswith("3 hosts: node1 rank 0 (wrote 1.0 MB"), nodes


SIX_RANKS = '''\
"""VPIC-IO on 6 ranks over the cluster's 3 nodes, told nodes=3; after the default runs, two configurations ROMIO
would treat differently on one host: cb_nodes=2 under '*:1' (one aggregator per host), cb_nodes=4 under '*:1'
(above the 3 the hosts allow: repaired), cb_nodes=4 under '*:2' (6 allowed); one random search trial between."""
import sys

import optuna

from iobo.runners.parsl import load_config_file
from iobo.tuner import Tuner

storage, workdir, site = sys.argv[1:4]


def tuner(trials):  # a Parsl Config is loaded once: each tuner its own
    return Tuner(kernel="vpic", ranks=6, trials=trials, storage=storage, study="vpic6", workdir=workdir, nodes=3,
                 kernel_options={"particles": 65536, "steps": 1}, warmup=False, default_every=0,
                 sampler=optuna.samplers.RandomSampler(seed=0), parsl_config=load_config_file(site))


first = tuner(4)
study = first.run()
for asked in ({"cb_nodes": 2, "cb_config_list": "*:1"}, {"cb_nodes": 4, "cb_config_list": "*:1"},
              {"cb_nodes": 4, "cb_config_list": "*:2"}):
    study.enqueue_trial({**first.space.default(), "romio_cb_write": "enable", **asked})
tuner(7).run()
'''


@pytest.mark.usefixtures("no_leftover_processes")
def test_a_kernel_study_across_nodes_keeps_cb_nodes_within_what_its_hosts_allow(cluster, tmp_path):
    """A built-in kernel on 6 ranks over 3 nodes: its own report names each rank's host, the context records 3
    nodes, and ``cb_nodes`` is what it is on 3 hosts: 2 under ``*:1`` runs with 2 aggregators (on one host ROMIO
    would lower it to 1), 4 under ``*:1`` is repaired to 2 before the run (3 hosts, one aggregator each), 4 under
    ``*:2`` runs with 4; each by ROMIO's own read-back (``MPI_File_get_info``)."""
    storage = f"sqlite:///{tmp_path / 'iobo.db'}"
    workdir = cluster.base / "work" / tmp_path.name
    workdir.mkdir()
    script = tmp_path / "six_ranks.py"
    script.write_text(SIX_RANKS)
    on_login(cluster, [sys.executable, str(script), storage, str(workdir), str(ROOT / "workflows/site_cluster.py")],
             timeout_s=600, cwd=tmp_path)
    study = optuna.load_study(study_name="vpic6", storage=storage)
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 7
    assert study.user_attrs["context"]["nodes"] == 3
    for trial in study.trials:
        hosts = trial.user_attrs["hosts"]  # the kernel's MPI_Get_processor_name on each rank
        assert sorted(hosts) == sorted(NODES) and sorted(len(r) for r in hosts.values()) == [2, 2, 2], hosts
    two, four_on_one_each, four_on_two_each = study.trials[4:]
    read_back = [int(t.user_attrs["hints"]["cb_nodes"]) for t in study.trials[4:]]
    assert [t.user_attrs["config"]["cb_nodes"] for t in study.trials[4:]] == [2, 2, 4]
    assert read_back == [2, 2, 4], read_back
    assert four_on_one_each.user_attrs["repaired"] == [
        "cb_nodes=4 exceeds the 3 aggregator(s) cb_config_list='*:1' allows for 6 ranks on 3 node(s) (ROMIO would "
        "lower it to 3); allowed: cb_nodes <= 3, or a cb_config_list with more aggregators per node ('*:*': up "
        "to 6)"]
    assert "repaired" not in two.user_attrs and "repaired" not in four_on_two_each.user_attrs
    aggregators = four_on_two_each.user_attrs["hints"]["romio_aggregator_list"].split()
    assert len(aggregators) == 4, aggregators


@pytest.mark.usefixtures("no_leftover_processes")
def test_a_journal_on_the_shared_directory_is_reached_from_every_node(cluster, tmp_path):
    """Three trials at once, one node each (a Parsl block per node): each trial's worker, on its own node, opens
    the study's journal in the cluster's shared directory and reports every step's bandwidth there for the
    median pruner; the tuner on the login host reads them back."""
    workdir = cluster.base / "work" / tmp_path.name
    workdir.mkdir()
    storage = f"journal:///{workdir / 'study.log'}"
    done = subprocess.run(cluster.command([
        sys.executable, "-m", "iobo.cli", "tune", "vpic", "--ranks", "2", "--trials", "9", "--in-flight", "3",
        "--option", "particles=65536", "--option", "steps=3", "--prune", "median", "--no-warmup", "--confirm", "0",
        "--sampler", "random", "--seed", "2", "--parsl-config", str(ROOT / "workflows/site_cluster.py"),
        "--workdir", str(workdir), "--storage", storage, "--study", "journal"]), capture_output=True, text=True,
        timeout=600, cwd=tmp_path, env={**cluster.env(), "IOBO_CLUSTER_NODES_PER_TRIAL": "1",
                                        "IOBO_CLUSTER_IN_FLIGHT": "3"})
    assert done.returncode == 0, done.stderr[-3000:]
    from iobo.storage import open_storage

    trials = optuna.load_study(study_name="journal", storage=open_storage(storage)).trials
    assert len(trials) == 9 and all(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in trials), \
        [(t.number, t.state, t.user_attrs.get("fail_reason")) for t in trials]
    ran_on = set()
    for trial in trials:
        assert trial.intermediate_values, trial.number  # written by the worker on the trial's node
        if trial.state == TrialState.COMPLETE:
            assert len(trial.intermediate_values) == 3 and len(trial.user_attrs["hosts"]) == 1, trial.number
            ran_on |= set(trial.user_attrs["hosts"])
            assert trial.user_attrs[REPORTED_FROM_ATTR] in trial.user_attrs["hosts"], trial.number
    # every node's worker reached the journal (pruned trials too: a node may complete none of the 9)
    assert {t.user_attrs[REPORTED_FROM_ATTR] for t in trials} == NODES, [t.user_attrs for t in trials]
    assert ran_on <= NODES, ran_on


@pytest.mark.usefixtures("no_leftover_processes")
def test_a_cancelled_multi_node_block_fails_its_trial_and_the_study_goes_on_in_a_new_block(cluster, tmp_path):
    """``scancel`` of the 3-node block while a trial's ranks run on its nodes: the trial FAILs naming the batch
    job and Slurm's CANCELLED, the next trials run in a new 3-node block, nothing is left on any node."""
    hang = cluster.base / "work" / f"{tmp_path.name}.hang"
    hang.touch()
    proc = subprocess.Popen(cluster.command(tune_across_nodes(cluster, tmp_path, 4, str(hang))), cwd=tmp_path,
                            env=cluster.env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while hang.exists() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not hang.exists(), "the first trial did not start within 120 s"
        [block] = [line.split()[0] for line in on_login(cluster, ["squeue", "-h", "-t", "RUNNING", "-o", "%i %N"])
                   .splitlines() if line.endswith("node[1-3]")]
        on_login(cluster, ["scancel", block])
        _, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode == 0, err[-3000:]
    trials = optuna.load_study(study_name="cluster", storage=f"sqlite:///{tmp_path / 'iobo.db'}").trials
    reason = trials[0].user_attrs["fail_reason"]
    assert trials[0].state == TrialState.FAIL and "Parsl worker running this trial was lost" in reason, reason
    assert f"batch job {block}: " in reason and " CANCELLED AT " in reason, reason  # Slurm's notice, from the block
    assert [t.state for t in trials[1:]] == [TrialState.COMPLETE] * 3
    for trial in trials[1:]:
        assert sorted(json.loads(trial.user_attrs["stdout_tail"].strip().splitlines()[-1])["hosts"]) == sorted(NODES)
    assert not list((cluster.base / "work" / tmp_path.name).glob("trial-*"))  # the lost run's files removed too
    deadline = time.monotonic() + 60
    while any(cluster.job_processes().values()) and time.monotonic() < deadline:
        time.sleep(1)
    assert not any(cluster.job_processes().values()), cluster.job_processes()


def completed(storage, study="cluster"):
    """How many trials of ``study`` are COMPLETE now (0 before the study exists)."""
    try:
        return sum(t.state == TrialState.COMPLETE for t in optuna.load_study(study_name=study, storage=storage).trials)
    except KeyError:
        return 0


@pytest.mark.usefixtures("no_leftover_processes")
@pytest.mark.parametrize("fault", ["crash", "link cut"])
def test_a_node_lost_for_good_fails_its_trial_and_the_later_trials_run_on_the_other_nodes(cluster, tmp_path, fault):
    """Trials of 3 ranks on 2 of the 3 nodes; during a search trial the block's lead node (where Parsl's worker
    pool and mpiexec run) crashes or loses its link, and stays lost: that trial FAILs with the reason, Slurm marks
    the node down and requeues the block, and the study's later trials run on the two other nodes. Once the node
    is back, nothing of the study is left on it or elsewhere."""
    storage = f"sqlite:///{tmp_path / 'iobo.db'}"
    hang = cluster.base / "work" / f"{tmp_path.name}.hang"
    argv = tune_across_nodes(cluster, tmp_path, 3 + 5, str(hang))
    proc = subprocess.Popen(cluster.command(argv), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**cluster.env(), "IOBO_CLUSTER_NODES_PER_TRIAL": "2"})
    victim = None
    try:
        deadline = time.monotonic() + 180
        while completed(storage) < 3 and time.monotonic() < deadline:  # the default runs: the baseline stands
            time.sleep(0.5)
        hang.touch()  # the next run to start sleeps: a search trial
        while hang.exists() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not hang.exists(), "no search trial started within 180 s"
        time.sleep(1)
        running = cluster.job_processes()
        victim = next(h for h, found in running.items() if any("process_worker_pool" in c for _, c in found))
        assert any("where.py" in c for _, c in running[victim]), running
        if fault == "crash":
            cluster.crash_node(victim)
        else:
            cluster.cut_link(victim)
        out, err = proc.communicate(timeout=420)
    finally:
        proc.kill()
        if victim and fault == "crash":
            cluster.start_node(victim)
        elif victim:
            cluster.restore_link(victim)
    assert proc.returncode == 0, err[-3000:]
    trials = optuna.load_study(study_name="cluster", storage=storage).trials
    lost = next(t for t in trials if t.state == TrialState.FAIL)
    assert lost.number >= 3 and lost.user_attrs["role"] == "search", lost.number
    assert "Parsl worker running this trial was lost" in lost.user_attrs["fail_reason"], lost.user_attrs["fail_reason"]
    later = [t for t in trials if t.number > lost.number and t.state == TrialState.COMPLETE]
    assert len(later) >= 3, [(t.number, t.state, t.user_attrs.get("fail_reason")) for t in trials]
    others = NODES - {victim}
    for trial in later:  # the later trials: on the two other nodes
        assert set(json.loads(trial.user_attrs["stdout_tail"].strip().splitlines()[-1])["hosts"]) == others, trial.number
        assert set(trial.user_attrs["io"]["hosts"]) == others
    cluster.wait_idle(timeout_s=120)  # the node is back in service (ReturnToService=2)
    deadline = time.monotonic() + 60  # its slurmd, back in touch, ends what was left of the lost block
    while any(cluster.job_processes().values()) and time.monotonic() < deadline:
        time.sleep(1)
    assert not any(cluster.job_processes().values()), cluster.job_processes()
    jobs = on_login(cluster, ["squeue", "-h", "-o", "%i %T %N"]).splitlines()
    assert not jobs, jobs


@pytest.mark.usefixtures("no_leftover_processes")
def test_a_tuner_killed_during_a_multi_node_trial_leaves_no_process_on_any_node(cluster, tmp_path):
    hang = cluster.base / "work" / f"{tmp_path.name}.hang"
    hang.touch()  # the first trial's ranks sleep on node1..3 when the tuner is killed
    argv = tune_across_nodes(cluster, tmp_path, 4, str(hang))
    tuner = subprocess.Popen(cluster.command(argv), cwd=tmp_path, env=cluster.env(), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while hang.exists() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not hang.exists(), "the first trial did not start within 120 s"
        time.sleep(1)
        ranks = {h: [c for _, c in found if "where.py" in c] for h, found in cluster.job_processes().items()}
        assert all(ranks.values()), ranks  # a rank on every node
    finally:
        tuner.kill()  # kill -9: nothing of the tuner's runs its clean-up
        tuner.wait()
    deadline = time.monotonic() + 60  # Parsl's worker pool notices the lost interchange (heartbeats of 2 s x 8)
    while any(cluster.job_processes().values()) and time.monotonic() < deadline:
        time.sleep(1)
    assert not any(cluster.job_processes().values()), cluster.job_processes()
    on_login(cluster, argv, timeout_s=300, cwd=tmp_path)  # resumed
    trials = optuna.load_study(study_name="cluster", storage=f"sqlite:///{tmp_path / 'iobo.db'}").trials
    assert trials[0].state == TrialState.FAIL and "died while it ran" in trials[0].user_attrs["fail_reason"]
    assert [t.state for t in trials[1:]] == [TrialState.COMPLETE] * 3
    assert not list((cluster.base / "work" / tmp_path.name).glob("trial-*"))  # the killed trial's files too
    assert not any(cluster.job_processes().values()), cluster.job_processes()


@pytest.mark.usefixtures("no_leftover_processes")
def test_trials_in_flight_run_on_disjoint_nodes(tmp_path):
    four = Cluster("iobof", 4)  # two trials of 2 nodes at once
    try:
        four.down()
        four.up()
    except ClusterUnavailable as exc:
        pytest.skip(f"the multi-node test cluster cannot start here: {exc}")
    try:
        argv = tune_across_nodes(four, tmp_path, 5, str(tmp_path / "never"), "4")  # runs of 4 s: two at once
        argv[argv.index("--ranks") + 1] = "2"
        done = subprocess.run(four.command([*argv, "--in-flight", "2"]), capture_output=True, text=True,
                              timeout=300, cwd=tmp_path, env={**four.env(), "IOBO_CLUSTER_NODES_PER_TRIAL": "2",
                                                              "IOBO_CLUSTER_IN_FLIGHT": "2"})
        assert done.returncode == 0, done.stderr[-3000:]
        blocks = [line.split()[1] for line in four.run(["squeue", "-h", "-t", "all", "-o", "%i %N"]).stdout.splitlines()]
    finally:
        four.down()
    trials = optuna.load_study(study_name="cluster", storage=f"sqlite:///{tmp_path / 'iobo.db'}").trials
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 5
    printed = {t.number: json.loads(t.user_attrs["stdout_tail"].strip().splitlines()[-1]) for t in trials}
    hosts = {number: set(out["hosts"]) for number, out in printed.items()}
    assert all(len(h) == 2 for h in hosts.values()), hosts  # each trial: its 2 ranks on 2 nodes
    ran = {number: out["ran"] for number, out in printed.items()}  # when its program ran (not asked, told)
    overlapping = [(a, b) for a in trials for b in trials if a.number < b.number
                   and ran[a.number][0] < ran[b.number][1] and ran[b.number][0] < ran[a.number][1]]
    assert overlapping, "no two trials ran at once"
    assert all(not hosts[a.number] & hosts[b.number] for a, b in overlapping), (hosts, ran, blocks)
    assert {"node[1-2]", "node[3-4]"} <= set(blocks), blocks  # exclusive blocks of 2 nodes


def test_up_is_idempotent_and_down_leaves_nothing():
    other = Cluster("iobod", 2)
    try:
        other.up()
    except ClusterUnavailable as exc:
        pytest.skip(f"the multi-node test cluster cannot start here: {exc}")
    try:
        controller = (other.base / "run" / "slurmctld.pid").read_text()
        assert other.up() is other and (other.base / "run" / "slurmctld.pid").read_text() == controller
        daemons = {pid: (psutil.Process(pid).create_time(), psutil.Process(pid).name()) for pid in other.pids()}
        assert sorted(name for _, name in daemons.values()) == ["munged", "slurmctld", "slurmd", "slurmd", "slurmscriptd"]
    finally:
        other.down()
    assert other.leftovers() == {}
    assert_gone(daemons, timeout_s=5)
    assert not other.base.exists() and not any(Path("/etc/netns", f"iobod-{h}").exists()
                                               for h in ("ctl", "node1", "node2"))
    assert not [ns for ns in os.listdir("/run/netns") if ns.startswith("iobod-")]
