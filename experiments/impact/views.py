"""Benchmark: which importance view ignores the parameters that do nothing.

Run from the repository root::

    .venv/bin/python -m experiments.impact.views --seeds 10 --jobs 2

Each seed tunes the VPIC 3-pass table widened by the 4 HDF5 parameters that
make no difference there (:func:`experiments.harness.problems.widen`; checked
by :mod:`experiments.inert_check`) with iobo's GPSampler for ``--trials``
evaluations, then ranks the study as ``iobo importance`` does
(:func:`iobo.importance.rank_parameters`).  Printed per view: the share of
its importance that went to the inert parameters (median [IQR] over the
seeds) and how many of its top 3 were inert (mean): a view that ranks noise
scores high on both.

Impact-first tuning starts later studies from
:func:`iobo.importance.impact_order`: the ``gp-ablation`` view first (the
parameters that had to leave their defaults), ties in the consensus order
of all views.  Before that view existed, a prior from the GP main effects
alone, the view that scores best here, was tried and not kept
(experiments/results/impact-prior-main-effects.txt).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import optuna  # noqa: E402

from experiments.harness import TABLES_DIR, problems  # noqa: E402
from experiments.harness.optimizers import run_optuna  # noqa: E402
from experiments.harness.runs import pool_map, quiet_worker  # noqa: E402
from iobo.importance import METHODS, rank_parameters  # noqa: E402
from iobo.samplers import GPSampler  # noqa: E402

TABLE = TABLES_DIR / "vpic-tmpfs-3pass.csv"


def _task(args: tuple[int, int]) -> dict[str, dict[str, float]]:
    seed, trials = args
    quiet_worker("ERROR")
    warnings.filterwarnings("ignore")  # PED-ANOVA's few-trials-per-regime warnings
    problem = problems.widen(problems.load_table(TABLE))
    storage = optuna.storages.InMemoryStorage()
    run_optuna(problem, GPSampler(seed=seed), trials, seed, storage=storage, study_name="study")
    return rank_parameters(optuna.load_study(study_name="study", storage=storage), seed)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (the machine has 2 cores)")
    args = parser.parse_args(argv)

    inert = set(problems.INERT)
    share: dict[str, list[float]] = {m: [] for m in METHODS}
    in_top3: dict[str, list[int]] = {m: [] for m in METHODS}
    for ranking in pool_map(_task, [(seed, args.trials) for seed in range(args.seeds)], args.jobs):
        for method, view in ranking.items():
            share[method].append(sum(v for n, v in view.items() if n in inert))
            in_top3[method].append(sum(n in inert for n in sorted(view, key=lambda n: -view[n])[:3]))
    print(f"# {TABLE.stem} + {len(inert)} inert parameters ({', '.join(problems.INERT)}); "
          f"{args.trials} iobo-gp trials, {args.seeds} seeds")
    print(f"{'view':16}{'importance on inert, median [IQR]':>36}{'inert in top 3 (of 3)':>24}")
    for method in METHODS:
        q1, med, q3 = np.percentile(share[method], [25, 50, 75])
        print(f"{method:16}{f'{100 * med:.0f}% [{100 * q1:.0f}-{100 * q3:.0f}%]':>36}{np.mean(in_top3[method]):>24.2f}")


if __name__ == "__main__":
    main()
