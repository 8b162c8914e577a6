"""Soak with node faults: one study on the 3-node test cluster while a driver crashes nodes, cancels jobs, cuts
links and kills the tuner, at seeded random times.

Run from the repository root, as root (it starts its own cluster, ``iobos``: tests/support/cluster.py)::

    .venv/bin/python -m experiments.cluster_soak --trials 50 --seed 0

The study: VPIC-IO as a ``--command`` on 3 ranks (as experiments/cluster_nodes.py), TPE, through
workflows/site_cluster.py with 2 nodes per trial and 1 trial in flight, so a trial spans 2 of the 3 nodes and
a node that is down leaves 2 for the next blocks. Faults (``--faults``, shuffled by ``--seed``), each fired
``--gap`` seconds (uniform in [0.5, 1.5] x) after the previous one ended, once the running trial's ranks run:

- ``crash``: every process of one of the running block's nodes killed (``Cluster.crash_node``: slurmd, the
  job's steps, its ranks), its slurmd started again ``--down-s`` seconds later;
- ``scancel``: the running block's Slurm job cancelled;
- ``link``: one of the running block's nodes cut off (``ip -n <ctl> link set v-nodeN down``) for ``--link-s``
  seconds, then back up;
- ``lose``: one of the running block's nodes crashed as by ``crash`` and left down until the study is done (its
  slurmd started again only then): Slurm marks it down and the later blocks must use the two other nodes;
- ``kill9``: the tuner killed with SIGKILL, and started again at once with the same command (it resumes the
  study: the trial it ran is failed as stale).

A tuner that exits before the study holds its trials (not killed by the driver) is started again and counted.

Printed: the fault table (each fault, when, the trial(s) it hit, their recorded state and fail reason), then
trials lost (neither COMPLETE nor FAIL/PRUNED with a reason), left RUNNING, processes left on any node
(``Cluster.job_processes``, 60 s after the tuner ended) and on the login host (processes carrying this soak's
mark), jobs left RUNNING in squeue, leftover trial directories: targets 0.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from experiments.cluster_nodes import ROOT, program, tune_argv
from experiments.soak import MARK_VARIABLE, marked_processes
from support.cluster import Cluster  # noqa: E402  (experiments.cluster_nodes put tests/ on the path)

RANK_MARK = "iobo.kernels.vpic"  # in a rank's command line


@dataclass
class Fault:
    kind: str
    at_s: float  # since the soak started
    target: str = ""  # the node or job it hit
    trials: list[int] = field(default_factory=list)  # trials RUNNING in the study then
    note: str = ""


class Soak:
    def __init__(self, cluster: Cluster, args, base: Path) -> None:
        self.cluster, self.args, self.base = cluster, args, base
        self.storage = f"sqlite:///{base / 'iobo.db'}"
        self.work = cluster.base / "work" / "soak"
        self.work.mkdir(parents=True)
        self.mark = uuid.uuid4().hex
        self.env = {**cluster.env(), MARK_VARIABLE: self.mark, "PYTHONUNBUFFERED": "1",
                    "IOBO_CLUSTER_NODES_PER_TRIAL": "2", "IOBO_CLUSTER_IN_FLIGHT": "1"}
        self.argv = cluster.command(tune_argv(program(args.particles), self.storage, "soak", args.trials,
                                              self.work, args.seed, sampler="tpe",
                                              extra=("--timeout", str(args.timeout))))
        self.log = base / "tuner.log"
        self.tuner: subprocess.Popen | None = None
        self.starts = 0
        self.error_exits: list[int] = []
        self.lost: list[tuple[str, float]] = []  # (node, unix time) of each node lost for good
        self.started = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self.started

    def start_tuner(self) -> None:
        with self.log.open("a") as out:
            out.write(f"\n=== start {self.starts} at +{self.now():.0f} s\n")
            out.flush()
            self.tuner = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, env=self.env,
                                          cwd=self.base)
        self.starts += 1

    def tuner_running(self) -> bool:
        return self.tuner is not None and self.tuner.poll() is None

    def states(self) -> dict[int, str]:
        """trial number -> state, read from the SQLite file directly, read-only (an Optuna storage opened here
        while the tuner creates the schema would race it); empty before the study exists."""
        import sqlite3

        path = self.base / "iobo.db"
        if not path.exists():
            return {}
        try:
            with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)) as db:
                return dict(db.execute("SELECT t.number, t.state FROM trials t JOIN studies s USING (study_id) "
                                       "WHERE s.study_name = 'soak'").fetchall())
        except sqlite3.Error:
            return {}

    def running_trials(self) -> list[int]:
        return sorted(n for n, state in self.states().items() if state == "RUNNING")

    def finished(self) -> int:
        return sum(1 for state in self.states().values() if state in ("COMPLETE", "FAIL", "PRUNED"))

    def running_blocks(self) -> dict[str, list[str]]:
        """job id -> its nodes, of the Slurm jobs RUNNING now (a job of a crashed node may still be listed
        beside the block that replaced it)."""
        done = self.cluster.run(["squeue", "-h", "-t", "RUNNING", "-o", "%i %N"], timeout_s=20, check=False)
        blocks = {}
        for line in done.stdout.splitlines():
            job, nodelist = line.split()
            blocks[job] = self.cluster.run(["scontrol", "show", "hostnames", nodelist], timeout_s=20).stdout.split()
        return blocks

    def wait_for_ranks(self, timeout_s: float = 60) -> tuple[str, list[str]] | None:
        """Wait until a trial's ranks run on the nodes; (job, nodes) of the block they run in, or None."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.tuner_running():
            ranks = {h for h, found in self.cluster.job_processes().items() if any(RANK_MARK in c for _, c in found)}
            if ranks:
                for job, hosts in self.running_blocks().items():
                    if ranks <= set(hosts):
                        return job, hosts
            time.sleep(0.2)
        return None

    def keep_tuner(self) -> None:
        """Start the tuner again when it exited on its own before the study was done."""
        if not self.tuner_running() and self.finished() < self.args.trials:
            self.error_exits.append(self.tuner.returncode)
            self.start_tuner()

    def sleep(self, seconds: float) -> None:
        """Sleep ``seconds``, restarting a tuner that exits meanwhile."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(min(1.0, end - time.monotonic()))
            self.keep_tuner()

    def fire(self, kind: str, rng: random.Random) -> Fault | None:
        block = self.wait_for_ranks()
        if block is None:
            return None
        job, hosts = block
        fault = Fault(kind, self.now(), trials=self.running_trials())
        node = rng.choice(hosts)
        if kind == "crash":
            pids = self.cluster.crash_node(node)
            fault.target, fault.note = node, f"{len(pids)} processes killed, slurmd back after {self.args.down_s:g} s"
            self.sleep(self.args.down_s)
            self.cluster.start_node(node)
        elif kind == "scancel":
            self.cluster.run(["scancel", job], timeout_s=20)
            fault.target = f"job {job} ({','.join(hosts)})"
        elif kind == "link":
            veth = f"v-{node}"
            subprocess.run(["ip", "-n", self.cluster.netns("ctl"), "link", "set", veth, "down"], check=True)
            fault.target = node
            self.sleep(self.args.link_s)
            subprocess.run(["ip", "-n", self.cluster.netns("ctl"), "link", "set", veth, "up"], check=True)
            fault.note = f"link down {self.args.link_s:g} s; node states then: {self.cluster.node_states()}"
        elif kind == "lose":
            pids = self.cluster.crash_node(node)
            self.lost.append((node, time.time()))
            fault.target, fault.note = node, f"{len(pids)} processes killed, left down until the study is done"
        elif kind == "kill9":
            self.tuner.send_signal(signal.SIGKILL)
            self.tuner.wait()
            fault.target = f"tuner pid {self.tuner.pid}"
            self.start_tuner()
        return fault

    def run(self) -> list[Fault]:
        rng = random.Random(self.args.seed)
        kinds = self.args.faults.split(",")
        rng.shuffle(kinds)
        faults: list[Fault] = []
        deadline = self.args.minutes * 60
        self.start_tuner()
        for kind in kinds:
            self.sleep(self.args.gap * rng.uniform(0.5, 1.5))
            if self.now() > deadline or self.finished() >= self.args.trials:
                faults.append(Fault(kind, self.now(), note="not fired: the study was done or out of time"))
                continue
            fault = None
            for _ in range(3):  # up to 3 minutes for a trial whose ranks run (after a fault, blocks restart)
                fault = self.fire(kind, rng)
                if fault is not None:
                    break
                self.keep_tuner()
            faults.append(fault or Fault(kind, self.now(), note="not fired: no trial's ranks ran within 3 x 60 s"))
        while self.now() < deadline and (self.tuner_running() or self.finished() < self.args.trials):
            self.sleep(2)
        for node, _ in self.lost:  # back, so that its slurmd ends what was left of the lost blocks
            self.cluster.start_node(node)
        if self.tuner_running():
            self.tuner.send_signal(signal.SIGTERM)
            self.tuner.wait(timeout=120)
            faults.append(Fault("deadline", self.now(), note=f"tuner stopped with SIGTERM after {self.args.minutes} min"))
        return faults


def fault_table(faults: list[Fault], study) -> list[str]:
    by_number = {t.number: t for t in study.trials}
    lines = [f"  {'fault':9s} {'at':>7s}  {'target':22s} trial  state     recorded fail reason"]
    for f in faults:
        hit = f.trials or [None]
        for i, number in enumerate(hit):
            t = by_number.get(number)
            state = t.state.name if t else "-"
            reason = ((t.user_attrs.get("fail_reason") or "") if t else "").replace("\n", " ")
            head = f"  {f.kind:9s} {f.at_s:6.0f}s  {f.target[:22]:22s}" if i == 0 else " " * 41
            lines.append(f"{head} {'' if number is None else number:>5}  {state:9s} {reason[:150]}")
        if f.note:
            lines.append(f"  {'':41s} ({f.note})")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=50, help="finished trials the study should hold")
    parser.add_argument("--faults", default="crash,scancel,link,kill9,crash,scancel",
                        help="kinds of fault, each fired once, in a seeded random order")
    parser.add_argument("--gap", type=float, default=30.0, help="mean seconds between the end of a fault and the next")
    parser.add_argument("--down-s", type=float, default=5.0, help="seconds a crashed node stays down")
    parser.add_argument("--link-s", type=float, default=60.0, help="seconds a cut link stays down")
    parser.add_argument("--timeout", type=float, default=90.0, help="per-trial limit (s)")
    parser.add_argument("--particles", type=int, default=65536)
    parser.add_argument("--minutes", type=float, default=18.0, help="hard limit on the soak")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cluster", default="iobos", help="the test cluster's name (its own namespaces)")
    parser.add_argument("--out", default=str(ROOT / "experiments/results/cluster-soak.txt"))
    args = parser.parse_args(argv)
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    lines: list[str] = []

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    say(f"# python -m experiments.cluster_soak {' '.join(argv if argv is not None else sys.argv[1:])}")
    say(f"# {time.strftime('%Y-%m-%d %H:%M')} on the shared 2-core machine, load average {os.getloadavg()[0]:.1f} "
        f"at start")
    say(f"cluster soak: VPIC-IO --command on 3 ranks over 2 of 3 nodes per trial, 1 in flight, TPE, "
        f"{args.trials} trials, per-trial timeout {args.timeout:g} s; faults {args.faults} "
        f"(seed {args.seed}, ~{args.gap:g} s apart)")
    cluster = Cluster(args.cluster, 3)
    cluster.down(check=False)
    cluster.up()
    base = Path(tempfile.mkdtemp(prefix="iobo-cluster-soak-"))
    try:
        soak = Soak(cluster, args, base)
        faults = soak.run()
        elapsed_s = soak.now()
        deadline = time.monotonic() + 60  # the blocks end with the tuner (Parsl cancels them; heartbeats)
        while any(cluster.job_processes().values()) and time.monotonic() < deadline:
            time.sleep(1)
        on_nodes = {h: p for h, p in cluster.job_processes().items() if p}
        on_login = marked_processes(soak.mark, time.time() - elapsed_s - 60)
        jobs = [line for line in cluster.run(["squeue", "-h", "-t", "RUNNING", "-o", "%i %T %N"]).stdout.splitlines()
                if line.strip()]
        history = cluster.run(["squeue", "-h", "-t", "all", "-o", "%i %T %N %r"]).stdout.splitlines()
        study = optuna.load_study(study_name="soak", storage=soak.storage)
        every = study.trials
        state = Counter(t.state.name for t in every)
        reasons = {t.number: (t.user_attrs.get("fail_reason") or "") for t in every}
        lost = [t.number for t in every if t.state.name in ("FAIL", "PRUNED") and not reasons[t.number]]
        leftovers = list(soak.work.glob("trial-*"))
        say(f"\n{elapsed_s / 60:.1f} min, {soak.starts} tuner starts ({sum(1 for f in faults if f.kind == 'kill9' and f.target)} "
            f"after kill -9, {len(soak.error_exits)} after the tuner exited on its own: codes {soak.error_exits})")
        say("fault table:")
        for line in fault_table(faults, study):
            say(line)
        say(f"\n  trials                  {len(every):5d}   ({', '.join(f'{k} {v}' for k, v in sorted(state.items()))})")
        say(f"  lost                    {len(lost):5d}   (target 0) {lost or ''}")
        say(f"  left RUNNING            {state.get('RUNNING', 0):5d}   (target 0)")
        say(f"  processes on the nodes  {sum(map(len, on_nodes.values())):5d}   (target 0) {on_nodes or ''}")
        say(f"  processes on the login  {len(on_login):5d}   (target 0) {[d for _, d in on_login] or ''}")
        say(f"  jobs RUNNING in squeue  {len(jobs):5d}   (target 0) {jobs or ''}")
        say(f"  leftover trial dirs     {len(leftovers):5d}   (target 0) {[p.name for p in leftovers] or ''}")
        causes = Counter(reasons[t.number].splitlines()[0][:90] if reasons[t.number] else "(no reason)"
                         for t in every if t.state.name == "FAIL")
        say("  failures: " + ("; ".join(f"{n} x {c}" for c, n in causes.most_common()) or "none"))
        say(f"  Slurm jobs (blocks) squeue still lists (it forgets after MinJobAge, 10 min): {len(history)}: "
            + ", ".join(sorted({line.split()[1] for line in history})))
        for node, when in soak.lost:  # where the trials started after a node was lost ran (the shim's hosts)
            later = [t for t in every if t.state.name == "COMPLETE" and t.user_attrs.get("started_unix", 0) > when]
            on_lost = [t.number for t in later if node in ((t.user_attrs.get("io") or {}).get("hosts") or {})]
            say(f"  after {node} was lost: {len(later)} trials completed, {len(on_lost)} of them with a rank on "
                f"{node} (target 0) {on_lost or ''}; their hosts: "
                f"{sorted({h for t in later for h in ((t.user_attrs.get('io') or {}).get('hosts') or {})})}")
        say(f"  node states at the end: {cluster.node_states()}")
    finally:
        cluster.down(check=False)
        say(f"cluster down, left: {cluster.leftovers() or 'nothing'}; load average {os.getloadavg()[0]:.1f} at the end; "
            f"study and tuner log in {base}")
        Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
