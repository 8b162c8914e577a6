"""Benchmark: median and Wilcoxon pruning on the recorded tables, steps EMULATED from repeats.

Run from the repository root::

    .venv/bin/python -m experiments.pruning.bench --seeds 20 --trials 40

The tables hold final values only.  A trial here is a kernel run of 5 steps
whose per-step bandwidths are the configuration's 5 recorded repeats in a
random order (emulated steps, not recorded ones); its value is their median.
Configurations are drawn at random (uniformly from the table, after 3
default runs, which are never pruned).  Each step is reported to a real
Optuna study with the pruner (:mod:`iobo.pruning`); a pruned trial stops
after that step.  Cost model (:mod:`experiments.harness.cost`): 2 s launch
per trial plus each run step's bytes / its bandwidth.

Printed per table and pruner, over seeds: % of I/O time (the steps) and of
total time (launch included) saved against running every step, % of trials
pruned, and in how many seeds a pruned configuration was the best of its
run (its true median at least the best true median of the run's configurations).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from experiments.harness import cost
from iobo.pruning import PRUNERS, make_pruner

STEPS = 5
DEFAULT_RUNS = 3


def one_run(table: str, pruner: str, seed: int, trials: int) -> dict:
    import optuna

    problem, nbytes = cost.table_problem(table)
    step_bytes = nbytes / STEPS
    rng = np.random.default_rng([seed, 11])
    configs = problem.grid.configurations()
    study = optuna.create_study(direction="maximize", pruner=make_pruner(pruner))
    io_full = io_run = launches = 0.0
    pruned_truths, truths = [], []
    for n in range(trials):
        config = problem.default if n < DEFAULT_RUNS else configs[rng.integers(len(configs))]
        steps = [problem.measure(config, rng) for _ in range(STEPS)]  # repeats drawn at random: emulated steps
        trial = study.ask()
        launches += cost.LAUNCH_S
        io_full += sum(step_bytes / (v * 1e6) for v in steps)
        truths.append(problem.truth(config))
        for k, value in enumerate(steps):
            io_run += step_bytes / (value * 1e6)
            trial.report(value, k)
            if n >= DEFAULT_RUNS and trial.should_prune():
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                pruned_truths.append(problem.truth(config))
                break
        else:
            study.tell(trial, float(np.median(steps)))
    return {"io_saved": 1 - io_run / io_full, "total_saved": (io_full - io_run) / (io_full + launches),
            "pruned": len(pruned_truths) / (trials - DEFAULT_RUNS),
            "pruned_best": bool(pruned_truths) and max(pruned_truths) >= max(truths)}


def main(argv=None) -> int:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--tables", default="vpic-tmpfs,ior-tmpfs")
    args = parser.parse_args(argv)
    print(f"steps emulated from the recorded repeats ({STEPS} per trial); random configurations; "
          f"{args.trials} trials incl. {DEFAULT_RUNS} default runs; {args.seeds} seeds")
    print(f"{'table':12s} {'pruner':9s} {'I/O time saved %':>18s} {'total time saved %':>20s} "
          f"{'trials pruned %':>17s} {'seeds pruning the run-best':>27s}")
    for table in args.tables.split(","):
        for pruner in PRUNERS:
            runs = [one_run(table, pruner, s, args.trials) for s in range(args.seeds)]
            pct = lambda key: np.median([100 * r[key] for r in runs])  # noqa: E731
            print(f"{table:12s} {pruner:9s} {pct('io_saved'):18.1f} {pct('total_saved'):20.1f} "
                  f"{pct('pruned'):17.1f} {sum(r['pruned_best'] for r in runs):>20d} of {args.seeds}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
