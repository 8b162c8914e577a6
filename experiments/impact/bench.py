"""Benchmark: impact-first tuning against tuning the full space at once.

Run from the repository root::

    .venv/bin/python -m experiments.impact.bench --seeds 20 --jobs 1
    .venv/bin/python -m experiments.impact.bench --seeds 3 --problems chunked8   # a quick look

Three optimizers per problem and seed, each starting with the system default
(:func:`experiments.harness.optimizers.run_optuna`'s ask/tell loop, the same
measurements):

- ``iobo-gp``: iobo's GPSampler over the full space;
- ``impact-first``: ``ImpactFirstSampler(seed=seed)``, ranking from its own
  screening (10 distinct configurations, the default run included);
- ``impact-first+prior``: an earlier full-space iobo-gp study of the same
  problem (another seed, same budget) is ranked (``iobo importance``:
  PED-ANOVA, fANOVA, GP views) and saved in the storage, and the new study
  takes its prior ranking from there (``iobo.samplers.registry.make_sampler("impact-first", ...)``,
  what ``iobo tune --sampler impact-first`` does): no screening.

Printed per problem, over the seeds: median [IQR] of the evaluations until a
configuration within 90/95/99% of the best true value has been measured
(">B": not within the budget B); the % of the best true value found after
20 evaluations and after the budget; minutes until 95%: the I/O time of the
runs so far (bytes per run / the configuration's true MB/s), then that plus
the optimizer's CPU time per suggestion ("never": not within the budget).
Bytes per run: from the tables' kernel options (JSON sidecar; IOR's mixed
write+read objective is taken as bytes moved / objective MB/s); for the
synthetic problems an assumed VPIC-IO-like dump of 32 GiB (128 ranks x 8 Mi
particles x 32 bytes).  Then a TARGET line per space of >= 8 parameters:
impact-first needs fewer evaluations to 95% than iobo-gp.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core per run: fair to every optimizer
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import optuna  # noqa: E402

from experiments.harness import TABLES_DIR, problems  # noqa: E402
from experiments.harness.optimizers import Run, optimizers, run_optuna  # noqa: E402
from experiments.harness.runs import (  # noqa: E402
    LEVELS,
    evaluations_to,
    median_iqr,
    pool_map,
    problem_of,
    quiet_worker,
)
from iobo.importance import rank_parameters, save_ranking  # noqa: E402
from iobo.kernels import vpic  # noqa: E402
from iobo.samplers import GPSampler, ImpactFirstSampler  # noqa: E402
from iobo.samplers.registry import make_sampler  # noqa: E402

VARIANTS = ("iobo-gp", "impact-first", "impact-first+prior")
PRIOR_SEED = 1000  # the earlier study of seed s runs with seed PRIOR_SEED + s
SYNTHETIC_BYTES = 128 * 8 * 2**20 * 32  # assumed bytes per run of a synthetic problem (32 GiB)


def spec_of(name: str) -> str:
    """``table:PATH`` for a recorded table of experiments/tables, ``wide:PATH`` for one named
    ``TABLE+inert`` (the table plus the parameters of problems.INERT), else ``synthetic:NAME``."""
    table, wide, _ = name.partition("+inert")
    path = TABLES_DIR / f"{table}.csv"
    return f"{'wide' if wide else 'table'}:{path}" if path.exists() else f"synthetic:{name}"


def bytes_per_run(spec: str) -> tuple[int, str]:
    """Bytes one run moves, and how that was found."""
    kind, _, path = spec.partition(":")
    if kind == "synthetic":
        return SYNTHETIC_BYTES, "32 GiB a run (assumed)"
    sidecar = json.loads(Path(path).with_suffix(".json").read_text())
    options, ranks = sidecar["options"], sidecar["ranks"]
    if sidecar["kernel"] == "vpic":
        n = ranks * options["particles"] * len(vpic.VARIABLES) * vpic.ITEMSIZE * options["steps"]
        return n, (f"{n / 1e6:.0f} MB a run ({ranks} ranks x {options['particles']} particles x "
                   f"{len(vpic.VARIABLES)} x {vpic.ITEMSIZE} B x {options['steps']} steps)")
    phases = options["phases"].split("+")
    n = ranks * options["segments"] * options["block_size"] * len(phases)
    return n, (f"{n / 1e6:.0f} MB a run ({ranks} ranks x {options['segments']} x {options['block_size']} B, "
               f"{'+'.join(phases)})")


def run_prior(problem: problems.Problem, budget: int, seed: int) -> Run:
    """impact-first+prior: rank an earlier full-space study (seed PRIOR_SEED + seed) kept in the same storage,
    then tune with the prior ranking found there."""
    storage = optuna.storages.InMemoryStorage()
    run_optuna(problem, GPSampler(seed=PRIOR_SEED + seed), budget, PRIOR_SEED + seed, storage=storage,
               study_name="earlier")
    earlier = optuna.load_study(study_name="earlier", storage=storage)
    earlier.set_user_attr("kernel", problem.name)
    save_ranking(earlier, rank_parameters(earlier, seed))
    sampler = make_sampler("impact-first", seed, storage=storage, kernel=problem.name, study="this")
    return run_optuna(problem, sampler, budget, seed, storage=storage, study_name="this")


def _task(args: tuple[str, str, int, int]) -> tuple[str, str, int, Run]:
    spec, variant, seed, budget = args
    quiet_worker()
    problem = problem_of(spec)
    if variant == "iobo-gp":
        run = optimizers(budget)["iobo-gp"](problem, seed)
    elif variant == "impact-first":
        run = run_optuna(problem, ImpactFirstSampler(seed=seed), budget, seed)
    else:
        run = run_prior(problem, budget, seed)
    return spec, variant, seed, run


def minutes_to(run: Run, target: float, nbytes: int, with_cpu: bool) -> float:
    """Minutes of I/O (``nbytes`` at each configuration's true MB/s), plus the optimizer's CPU time
    when ``with_cpu``, until a configuration reaching ``target`` MB/s was measured; inf if none did."""
    seconds = 0.0
    for value, cpu in zip(run.truths, run.cpu):
        seconds += nbytes / (value * 1e6) + (cpu if with_cpu else 0.0)
        if value >= target:
            return seconds / 60
    return float("inf")


def _minutes_text(values: list[float]) -> str:
    q1, med, q3 = np.percentile(values, [25, 50, 75], method="inverted_cdf")
    show = lambda v: f"{v:.3g}" if np.isfinite(v) else "never"  # noqa: E731
    return f"{show(med)} [{show(q1)}-{show(q3)}]"


def report(spec: str, runs: dict[str, list[Run]], budget: int) -> dict[str, float]:
    """Print one problem's table; return variant -> median evaluations to 95%."""
    problem = problem_of(spec)
    nbytes, how = bytes_per_run(spec)
    print(f"\n## {problem.name} ({problem.note}; {problem.grid.size():,} configurations; "
          f"best {problem.best:.0f} MB/s, default {problem.truth(problem.default):.0f} MB/s; {how})")
    head = "".join(f"{f'to {int(level * 100)}%':>17}" for level in LEVELS)
    found = [c for c in (20, budget) if c <= budget]
    head += "".join(f"{f'found@{c}':>10}" for c in found)
    print(f"{'optimizer':20}{head}{'min to 95% (I/O)':>24}{'(I/O + CPU)':>24}")
    medians = {}
    for name, rs in runs.items():
        line = f"{name:20}"
        for level in LEVELS:
            counts = [evaluations_to(r.truths, level * problem.best, budget) for r in rs]
            line += f"{median_iqr(counts, budget):>17}"
            if level == 0.95:
                medians[name] = float(np.median(counts))
        for c in found:
            line += f"{np.median([100 * max(r.truths[:c]) / problem.best for r in rs]):>9.1f}%"
        for with_cpu in (False, True):
            line += f"{_minutes_text([minutes_to(r, 0.95 * problem.best, nbytes, with_cpu) for r in rs]):>24}"
        print(line)
    return medians


def check_targets(medians: dict[str, dict[str, float]], budget: int) -> None:
    print("\n## Target: impact-first reaches 95% of the best in fewer evaluations than iobo-gp "
          "on spaces of >= 8 parameters (median evaluations)")
    show = lambda v: f">{budget}" if v > budget else f"{v:g}"  # noqa: E731
    for spec, med in medians.items():
        problem = problem_of(spec)
        if len(problem.choices) < 8:
            continue
        full = med["iobo-gp"]
        for variant in ("impact-first", "impact-first+prior"):
            mine = med[variant]
            met = mine <= budget and mine < full
            ratio = "n/a (neither within the budget)" if mine > budget and full > budget else (
                f"{'<=' if full > budget else ''}{mine / min(full, budget + 1):.2f}x the evaluations")
            print(f"TARGET {problem.name} ({len(problem.choices)} params) {variant}: {show(mine)} vs iobo-gp "
                  f"{show(full)}: {'MET' if met else 'MISSED'}, {ratio}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--budget", type=int, default=50)
    parser.add_argument("--problems", default="chunked8,stack12,vpic-tmpfs-3pass,ior-tmpfs-3pass,"
                        "vpic-tmpfs-3pass+inert",
                        help="synthetic problems or tables of experiments/tables (TABLE+inert: plus problems.INERT), "
                        "comma-separated")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (the machine has 2 cores)")
    args = parser.parse_args(argv)

    specs = [spec_of(name) for name in args.problems.split(",") if name]
    print(f"# {len(VARIANTS)} optimizers x {args.seeds} seeds, budget {args.budget} evaluations, default first")
    start = time.time()
    tasks = [(spec, variant, seed, args.budget) for spec in specs for variant in VARIANTS for seed in range(args.seeds)]
    results = {spec: {variant: [None] * args.seeds for variant in VARIANTS} for spec in specs}
    for spec, variant, seed, run in pool_map(_task, tasks, args.jobs):
        results[spec][variant][seed] = run
    medians = {spec: report(spec, results[spec], args.budget) for spec in specs}
    check_targets(medians, args.budget)
    print(f"\n(wall time {time.time() - start:.0f} s)")


if __name__ == "__main__":
    main()
