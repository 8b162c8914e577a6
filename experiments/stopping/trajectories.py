"""Tuning trajectories for the joint stop-rule benchmark (issue 31, item 3): what a stop rule sees and
what was true, per evaluation.

One trajectory: iobo's GP sampler tunes a problem for ``budget`` evaluations
with the robust baseline of :mod:`experiments.stopping.bench` (the system
default at evaluations 1-3 and after every 10 search evaluations).  Each
evaluation costs :mod:`experiments.harness.cost`'s model (2 s launch +
bytes / measured bandwidth, ~2.1 s); a known-truth problem moves the VPIC
table's bytes.  After every evaluation from the 5th a GP
(:class:`iobo.surrogate.Surrogate`) is fitted to the measurements and these
are recorded: its expected gain (MB/s) and incumbent (MB/s), the true median
of the incumbent (what the study would recommend), the keys of the
:data:`TOP` measured configurations by posterior mean, the probability that the
incumbent is within 85% of the best (:func:`iobo.stopping.recommendation_probability`),
the older probability that any measured configuration is
(:func:`experiments.stopping.bench.found_probability`, tables only: it draws
over the whole space) and the expected saving of a run's I/O time
(:func:`iobo.stopping.expected_time_saving`; this one also after the 4th,
the first search evaluation, from a fit of its own, as
:class:`iobo.stopping.ProductionRuns` may stop there).  Before the 5th, the
recommendation is the configuration with the best measured run.

The sampler is iobo's as ``iobo tune --trials BUDGET`` makes it: it tells
its best few apart from :func:`iobo.samplers.registry.identify_from` of the
budget on.  And a study that stops early may first re-measure its finalists
(``iobo tune --stop-rule confident``, :class:`iobo.tuner.Tuner`): each
setting of :data:`FIRE_RULES` is asked after every evaluation, and where one
first says stop (evaluation ``n``), a *branch* copies the study and goes on
as the tuner does then (:meth:`iobo.samplers.GPSampler.identify_now`: top-two
re-measurements of the best measured configurations), up to
:data:`BRANCH_RUNS` more evaluations or until
:meth:`iobo.samplers.GPSampler.finalists_undecided` says the leader wins
every posterior draw.  Per branch evaluation ``k`` (0: at the stop) it
records the true median of the sampler's incumbent (what ``iobo best``
gives), the tuning minutes and whether the finalists were still undecided;
the main trajectory goes on unchanged (the branch draws its measurements
from a generator of its own).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from experiments.harness import cost, problems
from experiments.harness.optimizers import measurement_rng
from experiments.harness.runs import pool_map, quiet_worker
from experiments.stopping.bench import FIRST_GAIN_AT, evaluate, found_probability, is_default_run
from iobo.samplers.registry import identify_from
from iobo.stopping import BASELINE_RUNS, ConfidentStop, Progress, expected_time_saving, recommendation_probability
from iobo.surrogate import Surrogate

KNOWN_TRUTH_BYTES = cost.TABLES["vpic-tmpfs"][1]  # a known-truth problem's run moves the VPIC table's bytes
FIRST_SAVING_AT = BASELINE_RUNS + 1  # the expected saving (ProductionRuns) from the first search evaluation on
TOP = 8  # measured configurations recorded by the GP's posterior mean, best first (final picks re-measure them)
FIRE_RULES = tuple((p, m) for p in (0.5, 0.7, 0.9) for m in (10, 15))  # ConfidentStop(probability, min_trials) branched
BRANCH_RUNS = 15  # evaluations a branch re-measures finalists at most


def rule_name(probability: float, min_trials: int) -> str:
    """A :data:`FIRE_RULES` setting's key in a trajectory's ``fires``."""
    return f"{probability},{min_trials}"


def progress_at(run: dict, n: int) -> Progress:
    """What a rule sees after evaluation ``n``: measurements only (the baseline: the default runs' median)."""
    default = float(np.median([v for v, d in zip(run["measured"][:n], run["defaults"]) if d]))
    return Progress(run["minutes"][:n], list(np.maximum.accumulate(run["measured"][:n])), default,
                    run["gains"][n - 1], run["incumbents"][n - 1], run["p_recommended"][n - 1],
                    run["saving"][n - 1], run["mb_per_run"])


def key_of(problem: problems.Problem, config) -> str:
    """A configuration's key as a string (``repr`` of :func:`experiments.harness.problems.config_key`)."""
    return repr(problems.config_key(problem.grid.active(config)))


def problem_and_bytes(spec: str) -> tuple[problems.Problem, int]:
    """``table:NAME`` (a recorded table with its default and bytes) or ``synthetic:NAME`` (known truth)."""
    kind, _, name = spec.partition(":")
    if kind == "table":
        return cost.table_problem(name)
    if kind == "synthetic":
        return problems.synthetic(name), KNOWN_TRUTH_BYTES
    raise ValueError(f"a problem is table:NAME or synthetic:NAME; got {spec!r}")


def trajectory(spec: str, seed: int, budget: int) -> dict:
    """One tuning run of ``spec`` (see the module doc); lists are per evaluation, None before a GP fit;
    ``fires``: :func:`rule_name` -> the evaluation after which that rule first says stop (absent: never);
    ``branches``: that evaluation (str) -> the branch's records."""
    import optuna

    from iobo.samplers import GPSampler

    quiet_worker()
    problem, nbytes = problem_and_bytes(spec)
    rng = measurement_rng(seed)
    study = optuna.create_study(direction="maximize", sampler=GPSampler(seed=seed, identify_from=identify_from(budget)))
    space = problem.grid.configurations() if problem.repeats is not None else None
    run = {k: [] for k in ("keys", "defaults", "measured", "truths", "minutes", "gains", "incumbents",
                           "incumbent_truths", "top_keys", "p_recommended", "p_any", "saving")}
    run["mb_per_run"] = nbytes / 1e6
    fires: dict[str, int] = {}
    branches: dict[str, list[dict]] = {}
    configs = []
    warm = None
    for n in range(1, budget + 1):
        value, config = evaluate(study, problem, n, rng)
        configs.append(config)
        run["keys"].append(key_of(problem, config))
        run["defaults"].append(is_default_run(n))
        run["measured"].append(value)
        run["truths"].append(problem.truth(config))
        run["minutes"].append((run["minutes"][-1] if run["minutes"] else 0.0) + cost.cost_minutes(nbytes, value))
        if n >= FIRST_GAIN_AT:
            surrogate = Surrogate.from_runs(problem.choices, configs, run["measured"], problem.conditions, warm)
            warm = surrogate.fit.posterior.theta
            run["gains"].append(surrogate.expected_gain_mb_per_s(seed))
            run["incumbents"].append(surrogate.incumbent_mb_per_s)
            run["incumbent_truths"].append(problem.truth(surrogate.incumbent))
            order = np.argsort(-surrogate.fit.mean)[:TOP]
            run["top_keys"].append([key_of(problem, surrogate.encoding.to_config(surrogate.fit.rows[i]))
                                    for i in order])
            run["p_recommended"].append(recommendation_probability(surrogate, seed=seed))
            run["p_any"].append(found_probability(surrogate, space, seed=seed) if space is not None else None)
            run["saving"].append(expected_time_saving(surrogate, seed))
        else:
            for k in ("gains", "incumbents", "incumbent_truths", "top_keys", "p_recommended", "p_any"):
                run[k].append(None)
            first = n == FIRST_SAVING_AT  # a fit of its own: the later fits' warm start is unchanged
            run["saving"].append(expected_time_saving(Surrogate.from_runs(
                problem.choices, configs, run["measured"], problem.conditions), seed) if first else None)
        if n >= BASELINE_RUNS:
            for p, m in FIRE_RULES:
                if rule_name(p, m) not in fires and ConfidentStop(p, m).should_stop(progress_at(run, n)):
                    fires[rule_name(p, m)] = n
                    if str(n) not in branches:
                        branches[str(n)] = branch(study, problem, nbytes, seed, n, run["minutes"][-1], budget)
    return {"problem": spec, "seed": seed, **run, "fires": fires, "branches": branches,
            "default_truth": problem.truth(problem.default), "best_truth": problem.best}


def branch(study, problem: problems.Problem, nbytes: int, seed: int, n: int, minutes: float, budget: int) -> list[dict]:
    """After a stop rule said stop at evaluation ``n`` of ``study`` (``minutes`` of tuning): a copy of the study
    whose sampler re-measures finalists (see the module doc), at most :data:`BRANCH_RUNS` evaluations and not past
    ``budget``; per evaluation k = 0, 1, ...: ``truth`` (true MB/s of the incumbent), ``minutes``, ``undecided``."""
    import optuna

    from iobo.samplers import GPSampler

    sampler = GPSampler(seed=seed, identify_from=identify_from(budget))
    sampler.identify_now()
    copy = optuna.create_study(direction="maximize", sampler=sampler)
    copy.add_trials(study.get_trials(deepcopy=False))
    rng = np.random.default_rng([seed, n, 13])
    records = []
    for k in range(min(BRANCH_RUNS, budget - n) + 1):
        if k:
            value, _ = evaluate(copy, problem, n + k, rng)
            minutes += cost.cost_minutes(nbytes, value)
        params, _ = sampler.incumbent(copy)
        records.append({"truth": problem.truth(params), "minutes": minutes,
                        "undecided": sampler.finalists_undecided(copy)})
        if not records[-1]["undecided"]:
            break
    return records


def _task(args):
    return trajectory(*args)


def load(specs: list[str], seeds: range, budget: int, jobs: int, cache: Path | None) -> list[dict]:
    """The trajectories of ``specs`` x ``seeds``: those ``cache`` (JSON) holds, the rest computed (and the
    cache rewritten with them all)."""
    kept = {}
    if cache is not None and cache.exists():
        kept = {(r["problem"], r["seed"], len(r["minutes"])): r for r in json.loads(cache.read_text())}
    jobs_left = [(p, s, budget) for p in specs for s in seeds if (p, s, budget) not in kept]
    for run in pool_map(_task, jobs_left, jobs):
        kept[(run["problem"], run["seed"], len(run["minutes"]))] = run
        if cache is not None:
            cache.write_text(json.dumps(list(kept.values())))
    return [kept[(p, s, budget)] for p in specs for s in seeds]


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="compute the joint stop-rule benchmark's trajectories")
    parser.add_argument("--problems", default="table:vpic-tmpfs-3pass,table:ior-tmpfs-3pass,"
                        "synthetic:lustre4-cv15,synthetic:mpiio6-cv15")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--budget", type=int, default=40)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--runs", type=Path, required=True, help="JSON cache, extended as runs finish")
    args = parser.parse_args(argv)
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    load(args.problems.split(","), seeds, args.budget, args.jobs, args.runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
