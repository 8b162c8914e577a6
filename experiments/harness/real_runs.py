"""Real vpic tuning studies, with or without a pruner: what the live and replayed pruning benchmarks share.

A study (:func:`run_arm`) tunes the vpic kernel with iobo's :class:`~iobo.tuner.Tuner`:
:data:`RANKS` ranks, a seeded ``RandomSampler`` over the parameters of the
recorded vpic table (:data:`SPACE`), the tuner's 3 default runs first,
steps written to the local disk with ``fsync`` (the options of
:func:`add_run_arguments`).  After each pruned trial a
:class:`PrunedCleanupCheck` looks for files or kernel processes it left.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from experiments.harness import cost
from iobo.kernels import vpic
from iobo.tuner import Tuner, TunerCallback

RANKS = 2
NO_PRUNER = "none"  # the arm tuned without a pruner
TARGET_SAVED_PCT = 30.0  # target: at least this % of the trials' wall time saved, the best never pruned
SPACE = vpic.space().select(cost.TABLES["vpic-tmpfs"][0])  # chunk_size comes along with layout


class PrunedCleanupCheck(TunerCallback):
    """After each PRUNED trial: are its directory and its kernel processes gone? Collects what is not."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.checked = 0
        self.leftovers: list[str] = []

    def trial_finished(self, study, trial, running):
        if trial.state.name != "PRUNED":
            return
        self.checked += 1
        prefix = f"trial-{trial.number}-"
        files = [str(p) for p in self.workdir.glob(f"{prefix}*")]
        pids = subprocess.run(["pgrep", "-f", f"iobo\\.kernels.*{self.workdir}/{prefix}"],
                              capture_output=True, text=True).stdout.split()
        if files or pids:
            self.leftovers.append(f"trial {trial.number}: files {files}, kernel pids {pids}")


def step_bytes(particles: int) -> int:
    """Bytes one vpic step writes over all ranks: ``particles`` per rank x 8 float32 variables."""
    return RANKS * particles * len(vpic.VARIABLES) * vpic.ITEMSIZE


def wall_s(trial) -> float:
    """Seconds from the trial's start (ask) to its end (tell), as Optuna recorded them."""
    return (trial.datetime_complete - trial.datetime_start).total_seconds()


def run_arm(pruner: str, seed: int, args, base: Path) -> tuple[list, PrunedCleanupCheck]:
    """Tune with ``pruner`` (or none); returns (the study's trials, the cleanup check)."""
    import optuna

    workdir = base / f"seed{seed}-{pruner}"
    check = PrunedCleanupCheck(workdir)
    tuner = Tuner(
        kernel="vpic", ranks=RANKS, trials=args.trials, storage=f"sqlite:///{base / 'studies.db'}",
        study=f"seed{seed}-{pruner}", workdir=str(workdir),
        kernel_options={"particles": args.particles, "steps": args.steps, "fsync": True,
                        "flush_steps": args.flush_steps}, space=SPACE,
        sampler=optuna.samplers.RandomSampler(seed=seed), pruner=None if pruner == NO_PRUNER else pruner,
        timeout_s=args.timeout, echo=lambda line: print(f"[seed {seed} {pruner}] {line}", file=sys.stderr),
        callbacks=[check],
    )
    return tuner.run().get_trials(), check


def setup_text(args) -> str:
    """How each kernel run writes: '8 steps of 128 MiB, fsync at the close' (or 'at each step')."""
    return (f"{args.steps} steps of {step_bytes(args.particles) / 2**20:.0f} MiB, fsync "
            f"{'at each step (--flush-steps)' if args.flush_steps else 'at the close'}")


def seeds_of(args) -> range:
    """The seeds to run: --first-seed onwards, --seeds of them."""
    return range(args.first_seed, args.first_seed + args.seeds)


def add_run_arguments(parser: argparse.ArgumentParser, seeds: int) -> None:
    """The options of the tuning runs (what :func:`run_arm` reads)."""
    parser.add_argument("--seeds", type=int, default=seeds)
    parser.add_argument("--first-seed", type=int, default=0,
                        help="seeds first-seed .. first-seed + seeds - 1 (each seed its own configurations)")
    parser.add_argument("--trials", type=int, default=20, help="trials per study, the 3 default runs included")
    parser.add_argument("--steps", type=int, default=8, help="timesteps per kernel run (one write each)")
    parser.add_argument("--particles", type=int, default=2 * 2**20,
                        help="particles per rank: 32 bytes each per step (default 2 Mi: 128 MiB per step on 2 ranks)")
    parser.add_argument("--flush-steps", action="store_true",
                        help="each step made durable inside its timed step (the vpic kernel's --flush-steps): "
                        "step MB/s then measure the disk; default: the steps write to the page cache, one fsync "
                        "at the close")
    parser.add_argument("--timeout", type=float, default=180.0, help="per-trial limit in seconds")
    parser.add_argument("--workdir", default="/var/tmp/iobo-pruning-real",
                        help="where the kernels write (a local disk, not tmpfs); a fresh directory inside it is "
                        "removed at the end")
