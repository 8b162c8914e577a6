"""Benchmark: k trials in flight against one at a time, on the recorded tables, with a simulated clock.

Run from the repository root::

    .venv/bin/python -m experiments.sampler.batch --tables vpic-tmpfs-3pass ior-tmpfs-3pass \\
        --wide-tables vpic-tmpfs-3pass --in-flight 1 2 4 8 --seeds 20

A run keeps ``k`` trials in flight: it asks ``k`` configurations, then
repeatedly tells the one that finishes first and asks the next, until the
budget of evaluations has been asked and every one has finished.  The
sampler sees the others as RUNNING trials (iobo's GP conditions on them as
fantasies at the configurations it proposed).  Each evaluation draws one
recorded repeat of its configuration (as :mod:`experiments.sampler.bench`)
and lasts what the table's cost model says for that run
(:func:`experiments.harness.cost.cost_minutes`: launch + bytes moved /
the run's measured bandwidth).  The clock assumes each run takes its
recorded time whatever else runs: ``k`` parallel runs on separate nodes,
not sharing one I/O path.  The samplers' own CPU time (tens of ms per
suggestion) is not on the clock.

Printed per table and optimizer, for each ``k``: median [IQR] of the
evaluations (in the order they finished) until a configuration within
95/99% of the best true value has been measured, the runs that reached 99%,
and the median simulated wall time (s) until 95% and its ratio to ``k = 1``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core per run: fair to every optimizer
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import functools  # noqa: E402
import heapq  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402

import numpy as np  # noqa: E402
import optuna  # noqa: E402

from experiments.harness import cost, problems  # noqa: E402
from experiments.harness.optimizers import measurement_rng, suggest  # noqa: E402
from experiments.harness.runs import evaluations_to, median_iqr, pool_map, quiet_worker  # noqa: E402
from iobo.samplers import GPSampler  # noqa: E402

LEVELS = (0.95, 0.99)


@dataclass
class FlightRun:
    """truths: true MB/s of each evaluated configuration, in the order the runs finished;
    finished_s: the simulated clock (s) when each finished."""

    truths: list[float] = field(default_factory=list)
    finished_s: list[float] = field(default_factory=list)

    def seconds_to(self, target: float) -> float:
        """Simulated seconds until a configuration reaching ``target`` finished (``inf``: none did)."""
        return next((s for s, v in zip(self.finished_s, self.truths) if v >= target), float("inf"))


@functools.cache
def table_of(name: str, wide: bool) -> tuple[problems.Problem, int]:
    """(problem, bytes moved per evaluation) of a recorded table, plus ``problems.INERT`` when ``wide``."""
    problem, nbytes = cost.table_problem(name)
    return (problems.widen(problem) if wide else problem), nbytes


def run_in_flight(problem: problems.Problem, nbytes: int, sampler: optuna.samplers.BaseSampler,
                  budget: int, seed: int, k: int) -> FlightRun:
    """``budget`` evaluations of ``problem`` with ``k`` in flight, the system default first."""
    rng = measurement_rng(seed)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    study.enqueue_trial(problem.default)
    flying: list[tuple[float, int, optuna.Trial, float, float]] = []  # (finish s, trial number, trial, value, truth)
    run, now, asked = FlightRun(), 0.0, 0
    while asked < budget or flying:
        while asked < budget and len(flying) < k:
            trial = study.ask()
            config = suggest(trial, problem)
            value = problem.measure(config, rng)
            finish = now + 60 * cost.cost_minutes(nbytes, value)
            heapq.heappush(flying, (finish, trial.number, trial, value, problem.truth(config)))
            asked += 1
        now, _, trial, value, truth = heapq.heappop(flying)
        study.tell(trial, value)
        run.truths.append(truth)
        run.finished_s.append(now)
    return run


def _sampler(name: str, seed: int) -> optuna.samplers.BaseSampler:
    return GPSampler(seed=seed) if name == "iobo-gp" else optuna.samplers.GPSampler(seed=seed)


def _task(args: tuple[str, bool, str, int, int, int]):
    table, wide, optimizer, k, seed, budget = args
    quiet_worker("ERROR")
    problem, nbytes = table_of(table, wide)
    return args, run_in_flight(problem, nbytes, _sampler(optimizer, seed), budget, seed, k)


NOT_REACHED_S = 1e9  # stands for "never" in medians of seconds (a quantile between it and a time is "never" too)


def seconds(values: list[float]) -> list[float]:
    """Seconds to a level, ``inf`` (never) as :data:`NOT_REACHED_S` so that percentiles are defined."""
    return [min(v, NOT_REACHED_S) for v in values]


def show_s(value: float) -> str:
    return "never" if value >= 1e6 else f"{value:.0f}"


def report(problem: problems.Problem, runs: dict[tuple[str, int], list[FlightRun]], budget: int) -> None:
    print(f"\n## {problem.name} ({problem.note}; best {problem.best:.0f} MB/s)")
    print(f"{'optimizer':12}{'k':>3}{'evals to 95%':>17}{'evals to 99%':>18}{'99% in':>8}"
          f"{'wall s to 95%':>20}{'vs k=1':>8}{'wall s to 99%':>15}")
    for (name, k), rs in runs.items():
        walls = {level: seconds([r.seconds_to(level * problem.best) for r in rs]) for level in LEVELS}
        counts = {level: [evaluations_to(r.truths, level * problem.best, budget) for r in rs] for level in LEVELS}
        reached = sum(c <= budget for c in counts[0.99])
        q1, med, q3 = np.percentile(walls[0.95], [25, 50, 75])
        base = [r.seconds_to(0.95 * problem.best) for r in runs.get((name, 1), [])]
        base_med = float(np.median(seconds(base))) if base else NOT_REACHED_S
        ratio = f"{med / base_med:.2f}" if max(med, base_med) < 1e6 else "-"
        print(f"{name:12}{k:>3}{median_iqr(counts[0.95], budget):>17}{median_iqr(counts[0.99], budget):>18}"
              f"{f'{reached}/{len(rs)}':>8}{f'{show_s(med)} [{show_s(q1)}-{show_s(q3)}]':>20}{ratio:>8}"
              f"{show_s(float(np.median(walls[0.99]))):>15}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", nargs="*", default=["vpic-tmpfs-3pass", "ior-tmpfs-3pass"],
                        help="recorded tables by name (experiments/tables/NAME.csv, with a cost model in harness.cost)")
    parser.add_argument("--wide-tables", nargs="*", default=["vpic-tmpfs-3pass"],
                        help="tables plus the parameters of problems.INERT")
    parser.add_argument("--in-flight", nargs="+", type=int, default=[1, 2, 4, 8])
    parser.add_argument("--optimizers", default="iobo-gp", help="iobo-gp and/or optuna-gp, comma-separated")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--budget", type=int, default=50)
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (the machine has 2 cores)")
    args = parser.parse_args(argv)

    seeds = range(args.first_seed, args.first_seed + args.seeds)
    names = args.optimizers.split(",")
    tables = [(t, False) for t in args.tables] + [(t, True) for t in args.wide_tables]
    print(f"# {','.join(names)} x seeds {seeds.start}-{seeds.stop - 1}, budget {args.budget} evaluations, "
          f"default first, k = {args.in_flight} in flight")
    start = time.time()
    tasks = [(t, wide, name, k, seed, args.budget) for t, wide in tables for name in names
             for k in args.in_flight for seed in seeds]
    results: dict[tuple, dict[tuple[str, int], list]] = {
        table: {(name, k): [None] * len(seeds) for name in names for k in args.in_flight} for table in tables}
    for (t, wide, name, k, seed, _), run in pool_map(_task, tasks, args.jobs):
        results[(t, wide)][(name, k)][seed - seeds.start] = run
    for (t, wide), runs in results.items():
        report(table_of(t, wide)[0], runs, args.budget)
    print(f"\n(wall time {time.time() - start:.0f} s)")


if __name__ == "__main__":
    main()
