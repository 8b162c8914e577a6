"""Soak benchmark: several tuners on one study under faults, on a journal file and on PostgreSQL.

Run from the repository root (as root: the disk-full episode mounts a tmpfs)::

    .venv/bin/python -m experiments.soak --tuners 3 --trials 100 --minutes 30 \\
        | tee experiments/results/soak.txt

Per storage back end (``--storages journal,postgresql``), ``--tuners``
``iobo tune`` processes share one study whose target is ``tuners x trials``
tuning trials (each re-counts the study before each ask, so together they
stop at the target). Trials are real 2-rank VPIC-IO runs through the
default Parsl runner. While they run:

- every ~``--kill-every`` seconds (uniform in [0.5, 1.5] x) a random tuner is
  killed with SIGKILL and restarted at once with the same command (its
  watchdog ends its Parsl workers and MPI jobs; the restart fails its
  running trials as stale and removes their files);
- from 1/3 to 1/2 of the expected run, every tuner is stopped with SIGTERM
  and restarted on a 20 MB tmpfs workdir (``mount -t tmpfs -o size=20m``),
  where concurrent 16.8 MB trials run out of space (ENOSPC), then moved back
  the same way;
- the MPI launcher is a wrapper that, with ``--hang`` probability, starts
  ranks that sleep forever instead of the kernel: the ``--timeout`` kills
  the job.

Printed per back end: trials asked (every non-waiting trial), told by the
tuner that ran them, stale (told FAIL by a restart because their tuner was
killed), surplus (asked after the target was reached by another tuner and
not run), lost (a result a tuner printed that is not COMPLETE in the study,
or an asked trial in no state above; target 0), left RUNNING at the end
(target 0), orphan processes (a process the soak started still alive 30 s
after the last tuner exited; target 0), leftover run directories (target
0), tuner runs that ended on an ``iobo: error`` (target 0), configurations measured twice because a crash interrupted the first
measurement (a search trial whose parameters equal those of an earlier
stale trial), failures by cause, and throughput: finished tuning trials per
minute, against one tuner alone on the same back end without faults
(``--baseline-trials``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from experiments.harness.faults import write_launcher
from experiments.harness.postgres import PostgresServer

PARTICLES, STEPS = 131072, 2  # 2 ranks x 131072 x 32 B x 2 steps = 16.8 MB per trial
MARK_VARIABLE = "IOBO_SOAK_MARK"
RESULT_LINE = re.compile(r"^trial +(\d+) \[[a-z-]+\] +[\d,]+ MB/s", re.M)


@dataclass
class TunerProcess:
    """One ``iobo tune`` process slot: restarted in place, its output appended to one log."""

    index: int
    argv: list[str]
    log: Path
    proc: subprocess.Popen | None = None
    starts: int = 0

    def start(self, workdir: Path, env: dict) -> None:
        argv = [*self.argv, "--workdir", str(workdir), "--seed", str(self.index * 1000 + self.starts)]
        with self.log.open("a") as out:
            out.write(f"\n=== start {self.starts} workdir {workdir}\n")
            out.flush()
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        self.starts += 1

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig: int) -> None:
        if self.running():
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@dataclass
class Events:
    kills: int = 0
    sigterms: int = 0
    disk_full_s: float = 0.0
    notes: list[str] = field(default_factory=list)


def marked_processes(mark: str, since: float) -> list[tuple]:
    """(process, description) of the live processes carrying ``mark`` (started by this soak)."""
    import psutil

    found = []
    for process in psutil.process_iter():
        try:
            if (process.pid != os.getpid() and process.environ().get(MARK_VARIABLE) == mark
                    and process.status() != psutil.STATUS_ZOMBIE):
                age = process.create_time() - since
                found.append((process, f"{process.pid} (parent {process.ppid()}, started at +{age:.0f} s): "
                                       f"{' '.join(process.cmdline())[:160]}"))
        except psutil.Error:
            continue
    return found


def tune_argv(storage: str, study: str, target: int, launcher: str, timeout_s: float) -> list[str]:
    return [sys.executable, "-m", "iobo.cli", "tune", "vpic", "--ranks", "2", "--trials", str(target),
            "--storage", storage, "--study", study, "--sampler", "tpe", "--timeout", str(timeout_s),
            "--mpiexec", launcher, "--option", f"particles={PARTICLES}", "--option", f"steps={STEPS}"]


def baseline(storage: str, trials: int, workdir: Path, env: dict) -> float:
    """Finished tuning trials per minute of one tuner alone, no faults."""
    argv = tune_argv(storage, "baseline", trials, "mpiexec.mpich", 120) + ["--workdir", str(workdir)]
    started = time.monotonic()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=True)
    return trials / ((time.monotonic() - started) / 60)


def soak(kind: str, storage: str, args, base: Path) -> dict:
    """One soak on ``storage``; returns its measures."""
    mark = uuid.uuid4().hex
    env = {**os.environ, MARK_VARIABLE: mark, "PYTHONUNBUFFERED": "1"}
    work = base / "work"
    work.mkdir()
    full = base / "full"
    full.mkdir()
    hang = write_launcher(base / "launcher", "hang", probability=args.hang)
    target = args.tuners * args.trials
    slots = [TunerProcess(i, tune_argv(storage, "soak", target, hang, args.timeout), base / f"tuner-{i}.log")
             for i in range(args.tuners)]
    rng = random.Random(args.seed)
    events = Events()
    started = time.monotonic()
    for slot in slots:
        slot.start(work, env)
    expected_s = args.expected_minutes * 60
    next_kill = started + args.kill_every * rng.uniform(0.5, 1.5)
    episode = (started + expected_s / 3, started + expected_s / 2)
    workdir, mounted_at = work, None
    deadline = started + args.minutes * 60
    while any(slot.running() for slot in slots) and time.monotonic() < deadline:
        time.sleep(1)
        now = time.monotonic()
        if mounted_at is None and workdir is work and episode[0] <= now < episode[1]:
            mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(full)],
                                     capture_output=True, text=True)
            if mounted.returncode != 0:
                events.notes.append(f"disk-full episode skipped: mount failed: {mounted.stderr.strip()}")
                episode = (0, 0)
                continue
            mounted_at, workdir = now, full
            events.sigterms += _restart_all(slots, workdir, env)
        elif mounted_at is not None and now >= episode[1]:
            workdir = work
            events.sigterms += _restart_all(slots, workdir, env)
            subprocess.run(["umount", "-l", str(full)], check=False)
            events.disk_full_s += now - mounted_at
            mounted_at = None
        if now >= next_kill:
            live = [slot for slot in slots if slot.running()]
            if live:
                victim = rng.choice(live)
                victim.proc.send_signal(signal.SIGKILL)
                victim.proc.wait()
                events.kills += 1
                victim.start(workdir, env)
            next_kill = now + args.kill_every * rng.uniform(0.5, 1.5)
    for slot in slots:  # past --minutes: stop what still runs (reported as such)
        if slot.running():
            events.notes.append(f"tuner {slot.index} still running after {args.minutes} min: stopped with SIGTERM")
            slot.stop(signal.SIGTERM)
    if mounted_at is not None:
        events.disk_full_s += time.monotonic() - mounted_at
    elapsed_s = time.monotonic() - started
    time.sleep(30)  # the watchdogs' grace, then anything the soak started must be gone
    orphans = marked_processes(mark, time.time() - (time.monotonic() - started))
    if orphans:  # keep the tuners' logs to see where they came from
        for slot in slots:
            shutil.copy(slot.log, Path(args.keep_logs) / f"{kind}-{slot.log.name}")
    leftovers = [p for d in (work, full) for p in d.glob("trial-*")]
    subprocess.run(["umount", "-l", str(full)], capture_output=True, check=False)
    measures = measure(storage, slots, target)
    measures.update(kind=kind, elapsed_s=elapsed_s, events=events, orphans=orphans, leftovers=len(leftovers))
    if args.baseline_trials:
        measures["baseline_per_min"] = baseline(storage, args.baseline_trials, base / "baseline", env)
    for process, _ in orphans:  # reported (with their description), then not left behind
        with contextlib.suppress(Exception):
            process.kill()
    return measures


def _restart_all(slots, workdir: Path, env: dict) -> int:
    """SIGTERM every running tuner (exit 143, its trials FAIL 'interrupted') and start it on ``workdir``."""
    stopped = 0
    for slot in slots:
        if slot.running():
            slot.stop(signal.SIGTERM)
            stopped += 1
            slot.start(workdir, env)
    return stopped


def measure(storage: str, slots, target: int) -> dict:
    import optuna

    from iobo import trials as vocabulary
    from iobo.storage import open_storage

    study = optuna.load_study(study_name="soak", storage=open_storage(storage, must_exist=True))
    every = [t for t in study.get_trials(deepcopy=False) if t.state.name != "WAITING"]
    state = Counter(t.state.name for t in every)
    reason = {t.number: t.user_attrs.get("fail_reason", "") for t in every}
    stale = {t.number for t in every if reason[t.number].startswith("stale")}
    surplus = {t.number for t in every if vocabulary.role(t) == vocabulary.ROLE_SURPLUS}
    told = {t.number for t in every if t.state.is_finished()} - stale - surplus
    printed, errors = set(), []
    for slot in slots:
        text = slot.log.read_text()
        printed |= {int(n) for n in RESULT_LINE.findall(text)}
        errors += [line for line in text.splitlines() if line.startswith("iobo: error:")]
    complete = {t.number for t in every if t.state.name == "COMPLETE"}
    unaccounted = {t.number for t in every} - told - stale - surplus - {t.number for t in every if t.state.name == "RUNNING"}
    lost = (printed - complete) | unaccounted
    crashed = [t for t in every if t.number in stale and t.params]
    recrashed = sum(1 for t in every if vocabulary.role(t) == vocabulary.ROLE_SEARCH and t.number not in stale
                    and any(c.params == t.params and c.number < t.number for c in crashed))
    failures = Counter(_cause(reason[t.number]) for t in every if t.state.name == "FAIL")
    tuning = [t for t in every if vocabulary.is_tuning(t)]
    return dict(asked=len(every), told=len(told), stale=len(stale), surplus=len(surplus), lost=len(lost),
                running=state.get("RUNNING", 0), tuning=len(tuning), target=target, complete=len(complete),
                recrashed=recrashed, failures=failures, starts=sum(slot.starts for slot in slots), errors=errors)


def _cause(reason: str) -> str:
    for key, label in (("ENOSPC", "disk full (ENOSPC)"), ("timed out", "hang: timed out"), ("stale", "stale (tuner killed)"),
                       ("interrupted", "interrupted (SIGTERM restart)"), ("surplus", "surplus")):
        if key in reason:
            return label
    return (reason.splitlines() or ["?"])[0][:60]


def report(m: dict, tuners: int) -> str:
    events = m["events"]
    minutes = m["elapsed_s"] / 60
    rate = m["tuning"] / minutes if minutes else 0.0
    lines = [
        f"== {m['kind']}: {tuners} tuners, target {m['target']} tuning trials, {minutes:.1f} min, "
        f"{events.kills} kill -9 + restart, {events.sigterms} SIGTERM + restart, "
        f"disk full for {events.disk_full_s:.0f} s, {m['starts']} tuner starts",
        f"  trials asked            {m['asked']:5d}   (tuning {m['tuning']}, target {m['target']})",
        f"  told by their tuner     {m['told']:5d}   (complete {m['complete']})",
        f"  stale (tuner killed)    {m['stale']:5d}",
        f"  surplus (not run)       {m['surplus']:5d}",
        f"  lost                    {m['lost']:5d}   (target 0)",
        f"  left RUNNING at the end {m['running']:5d}   (target 0)",
        f"  orphan processes        {len(m['orphans']):5d}   (target 0)",
        f"  leftover run dirs       {m['leftovers']:5d}   (target 0)",
        f"  tuner exits on an error {len(m['errors']):5d}   (target 0)",
        f"  configs re-measured after a crash {m['recrashed']:3d}",
        "  failures: " + (", ".join(f"{cause} {n}" for cause, n in m["failures"].most_common()) or "none"),
        f"  throughput              {rate:5.1f} tuning trials/min",
    ]
    if "baseline_per_min" in m:
        lines.append(f"  one tuner, no faults    {m['baseline_per_min']:5.1f} trials/min  -> "
                     f"{rate / m['baseline_per_min']:.2f}x with {tuners} tuners and faults")
    lines += [f"  orphan: {description}" for _, description in m["orphans"]]
    lines += [f"  error: {line[:200]}" for line in m["errors"]]
    lines += [f"  note: {note}" for note in events.notes]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--storages", default="journal,postgresql")
    parser.add_argument("--tuners", type=int, default=3)
    parser.add_argument("--trials", type=int, default=100, help="trials per tuner: the study's target is tuners x this")
    parser.add_argument("--kill-every", type=float, default=60.0, help="mean seconds between two kill -9")
    parser.add_argument("--hang", type=float, default=0.03, help="probability that a trial hangs")
    parser.add_argument("--timeout", type=float, default=20.0, help="per-trial limit (s): ends hanging trials")
    parser.add_argument("--expected-minutes", type=float, default=15.0,
                        help="expected length of one soak: places the disk-full episode (1/3 to 1/2 of it)")
    parser.add_argument("--minutes", type=float, default=40.0, help="hard limit per back end")
    parser.add_argument("--baseline-trials", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep-logs", default=tempfile.gettempdir(),
                        help="where the tuners' logs are copied when orphans are found")
    args = parser.parse_args(argv)
    print(f"soak: {args.tuners} tuners x {args.trials} trials, kill -9 every ~{args.kill_every:g} s, "
          f"hang probability {args.hang:g}, timeout {args.timeout:g} s, VPIC-IO 2 ranks "
          f"{PARTICLES} particles x {STEPS} steps (16.8 MB per trial), Parsl runner", flush=True)
    for kind in args.storages.split(","):
        base = Path(tempfile.mkdtemp(prefix=f"iobo-soak-{kind}-", dir="/dev/shm"))
        server = None
        try:
            if kind == "journal":
                storage = f"journal://{base / 'soak.log'}"
            else:
                server = PostgresServer.start()
                storage = server.new_database()
            print(report(soak(kind, storage, args, base), args.tuners), flush=True)
        finally:
            if server is not None:
                server.stop()
            subprocess.run(["umount", "-l", str(base / "full")], capture_output=True, check=False)
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
