"""Benchmark: in-trial pruning on REAL vpic kernel runs, an A/B per seed (companion of ``pruning.bench``).

Run from the repository root (about 35 min here with two pruner arms)::

    .venv/bin/python -m experiments.pruning.real --seeds 3 --trials 20 --pruners median,wilcoxon \
        | tee experiments/results/pruning-real.txt

For each seed, arm ``none`` tunes the vpic kernel with no pruner and each
pruner arm (``--pruners``, default median) tunes it again with that pruner:
same seeded ``RandomSampler`` (so the same configuration sequence, checked),
2 ranks, on the local disk with ``fsync``, over the parameters of the recorded
vpic table (files, layout + chunk size, transfer mode, alignment,
cb_buffer_size, romio_cb_write; :func:`experiments.harness.real_runs.run_arm`).
Every study starts with the tuner's 3 default runs, never pruned.  Progress
goes to stderr, the results to stdout.

Printed per seed: each trial's configuration, value (MB/s), bandwidth of
its first step (``s0``, MB/s: what the median pruner mostly decides on; the
steps write to the page cache, the fsync comes at the close, unless
``--flush-steps`` makes every step durable) and wall time
(s) in every arm, with the rank correlation of step 0 with the value in arm
``none``; then per arm the total trial wall time (Optuna's
datetime_start to datetime_complete, all trials), the wall time and the I/O
time (the kernel's timed section; a pruned trial: its reported steps) saved
against arm ``none``, the % of search trials pruned, and whether the arm
pruned the best configuration of arm ``none`` (its best search trial by
measured value; the default runs cannot be pruned).  After each pruned trial
the benchmark checks that the trial's directory is gone and no kernel
process of it is alive.  Then medians over seeds and one TARGET line per pruner.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from scipy.stats import spearmanr

from experiments.harness.real_runs import (
    NO_PRUNER,
    RANKS,
    SPACE,
    TARGET_SAVED_PCT,
    add_run_arguments,
    run_arm,
    seeds_of,
    setup_text,
    step_bytes,
    wall_s,
)
from iobo.pruning import PRUNERS
from iobo.trials import ROLE_SEARCH


def io_s(trial, particles: int) -> float:
    """Seconds of I/O: a finished run's timed section, a pruned run's reported steps (MB/s -> s)."""
    if trial.state.name == "COMPLETE":
        return trial.user_attrs["seconds"]
    return sum(step_bytes(particles) / (mb_per_s * 1e6) for mb_per_s in trial.intermediate_values.values())


def step0_mb_per_s(trial) -> float:
    """Bandwidth (MB/s) of the trial's first step, as the kernel printed it (nan if it had none)."""
    steps = trial.user_attrs.get("step_mb_per_s") or list(trial.intermediate_values.values())
    return steps[0] if steps else float("nan")


def cell(trial) -> str:
    """A trial's outcome, step 0's MB/s and wall time: ' 612 MB/s s0 1834  9.8 s' or 'PRUNED@3 s0  240  5.1 s'."""
    if trial.state.name == "COMPLETE":
        outcome = f"{trial.value:4.0f} MB/s"
    elif trial.state.name == "PRUNED":
        outcome = f"PRUNED@{len(trial.intermediate_values) - 1:<2d}"
    else:
        outcome = f"{trial.state.name:9s}"
    return f"{outcome} s0 {step0_mb_per_s(trial):5.0f} {wall_s(trial):5.1f} s"


def short_config(trial) -> str:
    """The parameters that differ from the system default, compactly."""
    default = SPACE.default()
    changed = {k: v for k, v in trial.user_attrs["config"].items() if k in SPACE and v != default.get(k)}
    return ",".join(f"{k}={v}" for k, v in changed.items()) or "default"


def one_seed(seed: int, args, base: Path, pruners: list[str]) -> dict[str, dict]:
    """Run every arm of ``seed``; print its trial table and summary; return per pruner arm its figures."""
    arms = {name: run_arm(name, seed, args, base) for name in (NO_PRUNER, *pruners)}
    base_trials = arms[NO_PRUNER][0]
    same = all([t.params for t in trials] == [t.params for t in base_trials] for trials, _ in arms.values())
    search = [t for t in base_trials if t.user_attrs["role"] == ROLE_SEARCH and t.state.name == "COMPLETE"]
    best = max(search, key=lambda t: t.value)

    print(f"\n== seed {seed}: same configuration sequence in every arm: {'yes' if same else 'NO'}")
    print(f"{'#':>3s}  " + "  ".join(f"{name:>27s}" for name in arms) + "  configuration")
    for number, trial in enumerate(base_trials):
        print(f"{number:3d}  " + "  ".join(f"{cell(trials[number]):>27s}" for trials, _ in arms.values())
              + f"  {short_config(trial)}")
    finished = [t for t in base_trials if t.state.name == "COMPLETE"]
    step0_rho = spearmanr([step0_mb_per_s(t) for t in finished], [t.value for t in finished]).statistic
    print(f"arm none: rank correlation of step 0's MB/s with the trial's value (open + steps + close with fsync): "
          f"{step0_rho:.2f}")
    total_base, io_base = (sum(f(t) for t in base_trials) for f in (wall_s, lambda t: io_s(t, args.particles)))
    print(f"arm none: {total_base:.0f} s of trials, best search trial #{best.number} {best.value:.0f} MB/s "
          f"({short_config(best)})")
    figures = {}
    for name in pruners:
        trials, check = arms[name]
        pruned = [t for t in trials if t.state.name == "PRUNED"]
        figures[name] = {
            "total_s": sum(wall_s(t) for t in trials),
            "saved_pct": 100 * (1 - sum(wall_s(t) for t in trials) / total_base),
            "io_saved_pct": 100 * (1 - sum(io_s(t, args.particles) for t in trials) / io_base),
            "pruned_pct": 100 * len(pruned) / sum(t.user_attrs["role"] == ROLE_SEARCH for t in trials),
            "pruned_best": trials[best.number].state.name == "PRUNED",
            "same": same,
            "leftovers": check.leftovers,
        }
        f = figures[name]
        print(f"arm {name}: {f['total_s']:.0f} s of trials; wall time saved {f['saved_pct']:.1f}%, I/O time saved "
              f"{f['io_saved_pct']:.1f}%; search trials pruned {f['pruned_pct']:.0f}%; pruned the eventual best "
              f"(#{best.number}): {'yes' if f['pruned_best'] else 'no'}; pruned trials checked for files and "
              f"kernel processes: {check.checked}, leftovers: {'; '.join(check.leftovers) or 'none'}")
    return figures


def main(argv=None) -> int:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_run_arguments(parser, seeds=3)
    parser.add_argument("--pruners", default="median", help=f"comma-separated, of {', '.join(PRUNERS)}")
    args = parser.parse_args(argv)
    pruners = args.pruners.split(",")
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="run-", dir=args.workdir))
    print(f"vpic, {RANKS} ranks, {setup_text(args)}, in {base}; "
          f"RandomSampler over {', '.join(SPACE.names)}; {args.trials} trials per arm incl. 3 default runs "
          f"(never pruned); {args.seeds} seed(s); arms: {NO_PRUNER}, {', '.join(pruners)}")
    try:
        runs = [one_seed(seed, args, base, pruners) for seed in seeds_of(args)]
        left = sorted(str(p.relative_to(base)) for p in base.glob("*/trial-*"))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"\ntrial directories left in the workdirs after all arms: {', '.join(left) or 'none'}")
    print(f"{'pruner':9s} {'median over seeds: wall saved %':>31s} {'I/O saved %':>12s} {'trials pruned %':>16s} "
          f"{'seeds pruning the best':>23s}")
    for name in pruners:
        median = lambda key: statistics.median(run[name][key] for run in runs)  # noqa: E731
        pruned_best = sum(run[name]["pruned_best"] for run in runs)
        print(f"{name:9s} {median('saved_pct'):31.1f} {median('io_saved_pct'):12.1f} {median('pruned_pct'):16.0f} "
              f"{pruned_best:>16d} of {len(runs)}")
    for name in pruners:
        saved = statistics.median(run[name]["saved_pct"] for run in runs)
        pruned_best = sum(run[name]["pruned_best"] for run in runs)
        clean = not left and not any(run[name]["leftovers"] for run in runs)
        met = saved >= TARGET_SAVED_PCT and pruned_best == 0
        print(f"TARGET ({name}): wall time saved >= {TARGET_SAVED_PCT:.0f}% and the best never pruned: "
              f"{'MET' if met else 'MISSED'} (saved {saved:.1f}% median over {len(runs)} seeds; best pruned in "
              f"{pruned_best} of {len(runs)}; same configurations in every arm: "
              f"{'yes' if all(run[name]['same'] for run in runs) else 'NO'}; pruned trials left files or "
              f"processes: {'no' if clean else 'YES'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
