"""The optimizers compared, each run on a :class:`~experiments.harness.problems.Problem` for a budget.

Every run starts with the system default configuration (the tuner's
baseline), then lets the optimizer choose.  Optuna samplers share one
ask/tell loop; the H5Evolve-like GA runs its own DEAP loop over the same
measurements; blind sampling without replacement (``blind``: the default,
then distinct configurations in a seeded random order) is the baseline a
sampler must beat.  A run returns a :class:`Run`: the true value of every
evaluated configuration, the optimizer's own pick of the best (its
*recommendation*) after every evaluation, and CPU seconds per suggestion.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import optuna

from experiments.harness.problems import Problem
from iobo.samplers import GPSampler

CHECKPOINTS = (10, 20, 50)


@dataclass
class Run:
    """truths: true MB/s of each evaluated configuration, in order;
    recommended: evaluation count (every one) -> true MB/s of the optimizer's pick;
    best_run: evaluation count (every one) -> true MB/s of the configuration of the best
    single run so far (what ``iobo best`` recommends, :func:`iobo.trials.best_trial`);
    cpu: CPU seconds the optimizer spent choosing each configuration."""

    truths: list[float] = field(default_factory=list)
    recommended: dict[int, float] = field(default_factory=dict)
    best_run: dict[int, float] = field(default_factory=dict)
    cpu: list[float] = field(default_factory=list)


def measurement_rng(seed: int) -> np.random.Generator:
    """The generator a run of ``seed`` draws its measurements from (which recorded repeat, how much noise)."""
    return np.random.default_rng([seed, 7])


def suggest(trial: optuna.Trial, problem: Problem) -> dict[str, Any]:
    """Ask for every active parameter (parents before the parameters they switch on)."""
    config: dict[str, Any] = {}
    ordered = sorted(problem.choices, key=lambda n: n in problem.conditions)
    for name in ordered:
        if name in problem.conditions:  # (parent, activating value or tuple of activating values)
            parent, on = problem.conditions[name]
            values = on if isinstance(on, tuple) else (on,)
            if parent not in config or not any(type(config[parent]) is type(v) and config[parent] == v for v in values):
                continue
        config[name] = trial.suggest_categorical(name, problem.choices[name])
    return config


def run_optuna(problem: Problem, sampler: optuna.samplers.BaseSampler, budget: int, seed: int,
               recommend: Callable[[optuna.Study], dict] | None = None, storage=None,
               study_name: str | None = None, recommend_at: Callable[[int], bool] | None = None) -> Run:
    """Ask/tell loop; ``recommend(study)`` gives the pick (default: best measured run), after the
    evaluations ``recommend_at(n)`` says (default: every one); storage, study_name: where the study is
    kept (default: a new in-memory study)."""
    rng = measurement_rng(seed)
    study = optuna.create_study(direction="maximize", sampler=sampler, storage=storage, study_name=study_name)
    study.enqueue_trial(problem.default)
    run = Run()
    for n in range(1, budget + 1):
        start = time.process_time()
        trial = study.ask()
        config = suggest(trial, problem)
        run.cpu.append(time.process_time() - start)
        study.tell(trial, problem.measure(config, rng))
        run.truths.append(problem.truth(config))
        run.best_run[n] = problem.truth(study.best_trial.params)
        if recommend is None:
            run.recommended[n] = run.best_run[n]
        elif recommend_at is None or recommend_at(n) or n == budget:
            run.recommended[n] = problem.truth(recommend(study))
    return run


BLIND_ENUMERATE = 100_000  # grids up to this size are shuffled whole; larger ones drawn from with rejection


def run_blind(problem: Problem, budget: int, seed: int) -> Run:
    """Blind sampling without replacement: the default, then distinct configurations in a seeded random order
    (uniform over a grid of at most ``BLIND_ENUMERATE`` configurations; a larger one: each parameter's index
    drawn uniformly, repeats skipped); after the whole grid, it starts over.  The pick: the best measured run."""
    rng = measurement_rng(seed)
    order = np.random.default_rng([seed, 11])
    grid = problem.grid
    key = lambda config: tuple(grid.indices(config))  # noqa: E731
    seen = {key(problem.default)}
    if grid.size() <= BLIND_ENUMERATE:
        rest = [c for c in grid.configurations() if key(c) not in seen]
        rest = [rest[i] for i in order.permutation(len(rest))]
        draw = lambda n: rest[(n - 2) % len(rest)]  # noqa: E731  (n >= 2: the default was first)
    else:
        sizes = [len(grid.choices[n]) for n in grid.names]

        def draw(n: int) -> dict:
            for _ in range(1000):
                config = grid.from_indices([order.integers(m) for m in sizes])
                if key(config) not in seen:
                    break
            seen.add(key(config))
            return config
    run, best = Run(), (-np.inf, 0, None)
    for n in range(1, budget + 1):
        start = time.process_time()
        config = dict(problem.default) if n == 1 else draw(n)
        run.cpu.append(time.process_time() - start)
        value = problem.measure(config, rng)
        run.truths.append(problem.truth(config))
        best = max(best, (value, n, config), key=lambda b: b[0])
        run.recommended[n] = run.best_run[n] = problem.truth(best[-1])
    return run


def run_ga(problem: Problem, budget: int, seed: int) -> Run:
    """H5Evolve-like GA (DEAP): population 15, integer genes (one choice index per
    parameter), elitism (the best survives), tournament selection (size 3),
    two-point crossover (p = 0.5), uniform integer mutation of each gene
    with p = 0.15.  Fitness is the measured MB/s; unchanged individuals keep
    theirs (not re-measured), as in H5Evolve."""
    from deap import base, tools

    rng = measurement_rng(seed)
    random.seed(seed)  # DEAP's operators draw from the random module
    py_random = random
    grid = problem.grid
    sizes = [len(grid.choices[n]) for n in grid.names]
    run = Run()
    best: list[tuple[float, dict]] = []

    def evaluate(genes: list[int]) -> float:
        config = grid.from_indices(genes)
        value = problem.measure(config, rng)
        run.truths.append(problem.truth(config))
        best.append((value, config))
        run.recommended[len(run.truths)] = problem.truth(max(best, key=lambda b: b[0])[1])
        run.best_run[len(run.truths)] = run.recommended[len(run.truths)]
        return value

    class Fitness(base.Fitness):
        weights = (1.0,)

    class Individual(list):
        def __init__(self, genes):
            super().__init__(genes)
            self.fitness = Fitness()

    default = grid.indices(problem.default)
    first = [int(g) if g >= 0 else py_random.randrange(m) for g, m in zip(default, sizes)]
    population = [Individual(first)] + [Individual([py_random.randrange(m) for m in sizes]) for _ in range(14)]

    def clock(step: Callable[[], Any]) -> Any:
        start = time.process_time()
        out = step()
        run.cpu.append(time.process_time() - start)
        return out

    while len(run.truths) < budget:
        for ind in population:
            if not ind.fitness.valid and len(run.truths) < budget:
                ind.fitness.values = (evaluate(list(ind)),)
        population = [ind for ind in population if ind.fitness.valid]

        def breed():
            elite = tools.selBest(population, 1)
            chosen = [Individual(list(i)) for i in tools.selTournament(population, 14, tournsize=3)]
            for a, b in zip(chosen[::2], chosen[1::2]):
                if py_random.random() < 0.5:
                    tools.cxTwoPoint(a, b)
            for ind in chosen:
                tools.mutUniformInt(ind, low=[0] * len(sizes), up=[m - 1 for m in sizes], indpb=0.15)
            kept = [Individual(list(e)) for e in elite]
            for k, e in zip(kept, elite):
                k.fitness.values = e.fitness.values
            return kept + chosen

        population = clock(breed)
    return run


def optimizers(budget: int, iobo: dict | None = None, recommend_at: Callable[[int], bool] | None = None
               ) -> dict[str, Callable[[Problem, int], Run]]:
    """name -> (problem, seed) -> Run; iobo: keyword arguments of iobo's GPSampler (``iobo-gp``;
    ``iobo-gp-remeasure`` adds ``incumbent_runs=2``); recommend_at: evaluation counts after which
    iobo's pick (its GP incumbent, a fit) is taken (default: every one)."""
    return {
        "random": lambda p, s: run_optuna(p, optuna.samplers.RandomSampler(seed=s), budget, s),
        "blind": lambda p, s: run_blind(p, budget, s),
        "ga": lambda p, s: run_ga(p, budget, s),
        "tpe": lambda p, s: run_optuna(
            p, optuna.samplers.TPESampler(seed=s, multivariate=True, group=True), budget, s),
        "optuna-gp": lambda p, s: run_optuna(p, optuna.samplers.GPSampler(seed=s), budget, s),
        "iobo-gp": lambda p, s: _run_iobo(p, budget, s, iobo or {}, recommend_at),
        "iobo-gp-remeasure": lambda p, s: _run_iobo(p, budget, s, {"incumbent_runs": 2, **(iobo or {})}, recommend_at),
    }


def _run_iobo(problem: Problem, budget: int, seed: int, kwargs: dict, recommend_at=None) -> Run:
    sampler = GPSampler(seed=seed, **kwargs)
    return run_optuna(problem, sampler, budget, seed, recommend=lambda study: sampler.incumbent(study)[0],
                      recommend_at=recommend_at)
