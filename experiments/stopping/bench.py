"""Benchmark: study-level stop rules on the recorded tables, against the oracle stop.

Run from the repository root::

    .venv/bin/python -m experiments.stopping.bench --seeds 20 --budget 40

Per seed, iobo's GP sampler tunes a table for ``budget`` evaluations (the
first 3 are the system default, as the tuner does); each evaluation draws a
recorded repeat and costs :mod:`experiments.harness.cost`'s model (launch +
bytes / bandwidth).  After every evaluation a GP (:class:`iobo.surrogate.Surrogate`)
is fitted to the measurements and its expected improvement (MB/s) recorded.
The rules then replay the same trajectory and stop where they would have.

Scored on true values (a configuration's median): G(t) = best true value
among the configurations evaluated by t minus the default's true value,
RoTI(t) = G(t) / t.  The oracle stops at the peak of that RoTI.  Printed
per rule: median [IQR] over seeds of where it stopped, its RoTI as a
fraction of the oracle's, and the true bandwidth it stopped at as a
fraction of the table's best; then the worst seed.  The rules see only
measurements (noisy), never true values.  Also printed, as a reference and
not a rule anyone should use: stopping at the first search trial that beats
the measured default by 10%.  On tables where one knob carries most of the
gain it scores near the oracle's RoTI while stopping far below the best,
which shows what the RoTI target rewards.  Last, per table, the hindsight
bound for the two targets together: per seed, the highest RoTI among the
stops at >= 90% of the best (:func:`feasible_oracle_stop`); when its median
is below 95% of the oracle's, no rule can meet both targets on that table.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402

from experiments.harness import cost  # noqa: E402
from experiments.harness.optimizers import measurement_rng, suggest  # noqa: E402
from experiments.harness.runs import pool_map, quiet_worker  # noqa: E402
from iobo.measure import roti  # noqa: E402
from iobo.stopping import (  # noqa: E402
    ExpectedGainBelow,
    FixedBudget,
    MarginalRoTI,
    NoRecentGain,
    Progress,
    StopRule,
    oracle_stop,
)
from iobo.surrogate import Surrogate  # noqa: E402

DEFAULT_RUNS = 3
FIRST_GAIN_AT = 5  # evaluations before the first GP fit (the sampler's start-up is 5 distinct configs)


def trajectory(table: str, seed: int, budget: int) -> dict:
    """One tuning run: per evaluation its config, measured and true MB/s, cost and the GP's expected gain."""
    import optuna

    from iobo.samplers import GPSampler

    quiet_worker()
    problem, nbytes = cost.table_problem(table)
    rng = measurement_rng(seed)
    study = optuna.create_study(direction="maximize", sampler=GPSampler(seed=seed))
    for _ in range(DEFAULT_RUNS):
        study.enqueue_trial(problem.default)
    configs, measured, truths, minutes, gains, incumbents = [], [], [], [], [], []
    warm = None
    for n in range(1, budget + 1):
        trial = study.ask()
        config = suggest(trial, problem)
        value = problem.measure(config, rng)
        study.tell(trial, value)
        configs.append(config)
        measured.append(value)
        truths.append(problem.truth(config))
        minutes.append((minutes[-1] if minutes else 0.0) + cost.cost_minutes(nbytes, value))
        if n >= FIRST_GAIN_AT:
            surrogate = Surrogate.from_runs(problem.choices, configs, measured, problem.conditions, warm)
            warm = surrogate.fit.posterior.theta
            gains.append(surrogate.expected_gain_mb_per_s(seed))
            incumbents.append(surrogate.incumbent_mb_per_s)
        else:
            gains.append(None)
            incumbents.append(None)
    return {"table": table, "seed": seed, "measured": measured, "truths": truths, "minutes": minutes,
            "gains": gains, "incumbents": incumbents, "default_truth": problem.truth(problem.default), "best_truth": problem.best}


def stop_point(rule, run: dict) -> int:
    """Evaluations (1-based) after which ``rule`` stops; the budget if it never does."""
    default = float(np.median(run["measured"][:DEFAULT_RUNS]))
    for n in range(DEFAULT_RUNS + 1, len(run["minutes"]) + 1):
        progress = Progress(run["minutes"][:n], np.maximum.accumulate(run["measured"][:n]), default,
                            run["gains"][n - 1], run["incumbents"][n - 1])
        if rule.should_stop(progress):
            return n
    return len(run["minutes"])


class FirstGain(StopRule):
    """Reference only: stop at the first trial whose run beats the default by ``margin``."""

    def __init__(self, margin: float = 0.10) -> None:
        self.margin = margin

    def should_stop(self, progress: Progress) -> bool:
        return progress.best_mb_per_s[-1] > progress.default_mb_per_s * (1 + self.margin)


def true_progress(run: dict) -> Progress:
    """The trajectory scored on true values (what the oracle and the fractions use)."""
    return Progress(run["minutes"], np.maximum.accumulate(run["truths"]), run["default_truth"])


def score(run: dict, n: int) -> tuple[float, float, float]:
    """(RoTI at n / oracle RoTI, true best at n / table best, minutes at n)."""
    truth = true_progress(run)
    at = lambda k: roti(truth.best_mb_per_s[k - 1], truth.default_mb_per_s, truth.minutes[k - 1])  # noqa: E731
    return at(n) / at(oracle_stop(truth)), truth.best_mb_per_s[n - 1] / run["best_truth"], truth.minutes[n - 1]


def feasible_oracle_stop(run: dict, floor: float = 0.9) -> int:
    """In hindsight, the stop with the highest RoTI among those at >= ``floor`` of the table's best
    (true values); the budget when none is.  No rule that never stops below ``floor`` can do better."""
    truth = true_progress(run)
    ok = [n for n in range(1, len(run["minutes"]) + 1) if truth.best_mb_per_s[n - 1] >= floor * run["best_truth"]]
    if not ok:
        return len(run["minutes"])
    return max(ok, key=lambda n: roti(truth.best_mb_per_s[n - 1], truth.default_mb_per_s, truth.minutes[n - 1]))


def _task(args):
    return trajectory(*args)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--budget", type=int, default=40, help="evaluations per run, default runs included")
    parser.add_argument("--tables", default="vpic-tmpfs-3pass,ior-tmpfs-3pass")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    tables = args.tables.split(",")
    jobs = [(t, s, args.budget) for t in tables for s in range(args.seeds)]
    runs = list(pool_map(_task, jobs, args.workers))
    rules = {
        f"fixed budget ({args.budget})": FixedBudget(args.budget),
        "no 5% gain in 5 (TunIO heuristic)": NoRecentGain(5, 0.05),
        "marginal RoTI (GP EI/cost <= RoTI)": MarginalRoTI(),
        "expected gain < 2% (GP EI/incumbent)": ExpectedGainBelow(),
        "reference: first 10% gain (reckless)": FirstGain(),
    }
    print(f"cost model: {cost.LAUNCH_S:g} s launch + bytes / measured bandwidth per evaluation; "
          f"{DEFAULT_RUNS} default runs first; {args.seeds} seeds; budget {args.budget} evaluations")
    for table in tables:
        mine = [r for r in runs if r["table"] == table]
        oracle = [oracle_stop(true_progress(r)) for r in mine]
        print(f"\n## {table}: default {mine[0]['default_truth']:.0f} MB/s, best {mine[0]['best_truth']:.0f} MB/s "
              f"(true medians); oracle stop at evaluation {_mq(oracle)}, "
              f"oracle bandwidth {_mq([score(r, o)[1] * 100 for r, o in zip(mine, oracle)])} % of best")
        print(f"{'rule':38s} {'stopped at (evals)':>20s} {'minutes':>16s} {'RoTI % of oracle':>22s} "
              f"{'BW % of best':>20s} {'worst RoTI%':>11s} {'worst BW%':>9s}")
        for name, rule in rules.items():
            stops = [stop_point(rule, r) for r in mine]
            scores = np.array([score(r, n) for r, n in zip(mine, stops)])
            print(f"{name:38s} {_mq(stops):>20s} {_mq(scores[:, 2]):>16s} {_mq(scores[:, 0] * 100):>22s} "
                  f"{_mq(scores[:, 1] * 100):>20s} {scores[:, 0].min() * 100:11.1f} {scores[:, 1].min() * 100:9.1f}")
        bound = np.array([score(r, feasible_oracle_stop(r))[0] for r in mine]) * 100
        print(f"{'hindsight: best stop at >= 90% of best':38s} {'':>20s} {'':>16s} {_mq(bound):>22s}")
        print(f"TARGETS ({table}): RoTI >= 95% of the oracle's on median AND never below 90% of the best: "
              f"{'feasible' if np.median(bound) >= 95 else 'INFEASIBLE'} here: the best any rule that never stops "
              f"below 90% of the best could reach is {np.median(bound):.1f}% of the oracle's RoTI on median "
              f"(hindsight, per seed)")
    return 0


def _mq(values) -> str:
    """Median [IQR] of ``values``."""
    q1, med, q3 = np.percentile(values, [25, 50, 75])
    return f"{med:.1f} [{q1:.1f}-{q3:.1f}]"


if __name__ == "__main__":
    sys.exit(main())
