"""How often even an oracle's pick is in S after 50 evaluations, and which statistic ranks a table's best.

Issue 31 item 2 asks that the recommendation at 50 evaluations be a member
of S (:mod:`experiments.harness.truth`: the configurations whose median of
5-6 recorded runs is within one standard error of the best median) in the
median run.  A sampler must find S among 72-216 configurations and then
tell its members from the configurations just below, with runs drawn from
the same 5-6 recorded repeats the medians come from.  This prints, per
recorded table:

- S's size, and the median-best configuration's rank by the other ways of
  summarising its runs: the geometric mean (what a GP of ``log`` MB/s with
  Gaussian noise estimates) and the harmonic mean (the one that sets the
  mean time of a run); and how many of the top ``|S|`` by geometric mean
  are in S;
- an *oracle* that is told the K best configurations by median (K = |S| + 1,
  |S| + 2, |S| + 5: S and 1, 2 or 5 others) and spends the whole budget of
  50 evaluations on them, drawing runs as the benchmark does
  (:func:`experiments.harness.problems.load_table`: a recorded repeat at
  random), evenly (``uniform``) or by successive halving (``halving``), and
  picks by the mean of ``log`` runs or by their median: the share of
  ``--reps`` repetitions whose pick is in S (binomial standard error at
  most 0.5 / sqrt(reps)).

The oracle knows more than any sampler (which configurations to compare)
and is a reference, not a bound over every possible algorithm: a sampler
that must also search cannot be expected to beat it with the same
estimator.

Usage: ``python -m experiments.sampler.identification_bound [--tables T.csv ...] [--budget 50] [--reps 4000] [--out F]``
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

import numpy as np

from experiments.harness.problems import load_table
from experiments.harness.runs import commit, write_report
from experiments.harness.truth import truth_of

TABLES = [f"experiments/tables/{name}.csv" for name in (
    "ior-tmpfs-1r", "ior-tmpfs-3pass", "ior-tmpfs-small", "ior-tmpfs",
    "vpic-disk", "vpic-tmpfs-1r", "vpic-tmpfs-3pass", "vpic-tmpfs")]
ESTIMATORS: dict[str, Callable[[np.ndarray], float]] = {
    "log-mean": lambda runs: float(np.mean(np.log(runs))),
    "median": lambda runs: float(np.median(runs)),
}


def uniform(rng: np.random.Generator, candidates: list[np.ndarray], budget: int, estimate) -> int:
    """Index of the candidate with the best estimate after ``budget // K`` random repeats of each."""
    each = max(1, budget // len(candidates))
    return int(np.argmax([estimate(rng.choice(c, each)) for c in candidates]))


def halving(rng: np.random.Generator, candidates: list[np.ndarray], budget: int, estimate) -> int:
    """Successive halving: ``ceil(log2 K)`` rounds of equal budget; each round measures the survivors
    evenly (their earlier runs kept) and keeps the better half by ``estimate``."""
    alive = list(range(len(candidates)))
    runs: dict[int, list[float]] = {i: [] for i in alive}
    rounds = max(1, math.ceil(math.log2(len(alive))))
    for _ in range(rounds):
        each = max(1, budget // (rounds * len(alive)))
        for i in alive:
            runs[i].extend(rng.choice(candidates[i], each))
        alive = sorted(alive, key=lambda i: -estimate(np.asarray(runs[i])))[:max(1, (len(alive) + 1) // 2)]
    return alive[0]


def rank_of(values: np.ndarray, index: int) -> int:
    """1-based rank of ``values[index]`` (largest first)."""
    return int(np.sum(values > values[index])) + 1


def report(path: str, budget: int, reps: int, level: float | None = None) -> list[str]:
    """The lines of one table; ``level``: the target set is every configuration whose median is >= ``level`` x
    the best median (the stop rule's floor, 0.85) instead of S."""
    problem = load_table(path)
    truth = truth_of(problem)
    keys = list(truth.keys)
    runs = [np.asarray(problem.repeats[k], dtype=float) for k in keys]
    if level is None:
        in_s = np.array([truth.in_s(m) for m in truth.medians])
        target = "S"
    else:
        in_s = np.asarray(truth.medians) >= level * float(np.max(truth.medians))
        target = f"A{level:.0%}"
    geometric = np.array([math.exp(np.mean(np.log(r))) for r in runs])
    harmonic = np.array([len(r) / np.sum(1.0 / r) for r in runs])
    best = int(np.argmax(truth.medians))
    size = int(in_s.sum())
    top_gm = np.argsort(-geometric)[:size]
    floor = truth.threshold if level is None else level * float(np.max(truth.medians))
    lines = [f"## {problem.name} ({len(keys)} configurations): {target} = {size} with median >= {floor:,.0f} MB/s",
             f"median-best {truth.medians[best]:,.0f} MB/s: geometric mean {geometric[best]:,.0f} (rank "
             f"{rank_of(geometric, best)}), harmonic mean {harmonic[best]:,.0f} (rank {rank_of(harmonic, best)}); "
             f"of the top {size} by geometric mean, {int(in_s[top_gm].sum())} are in {target}"]
    order = np.argsort(-truth.medians)
    for extra in (1, 2, 5):
        k = size + extra
        candidates = [runs[i] for i in order[:k]]
        cells = []
        for name, estimate in ESTIMATORS.items():
            for rule in (uniform, halving):
                rng = np.random.default_rng(0)
                hits = sum(bool(in_s[order[rule(rng, candidates, budget, estimate)]]) for _ in range(reps))
                cells.append(f"{name} {rule.__name__} {hits / reps:.2f}")
        lines.append(f"oracle told the top {k} ({target} + {extra}), {budget} evaluations: pick in {target}: "
                     + ", ".join(cells))
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", nargs="*", default=TABLES)
    parser.add_argument("--budget", type=int, default=50)
    parser.add_argument("--reps", type=int, default=4000)
    parser.add_argument("--level", type=float, help="score against the configurations >= LEVEL x the best median "
                        "(e.g. 0.85, the stop rule's floor) instead of S")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    lines = [f"# python -m experiments.sampler.identification_bound --budget {args.budget} --reps {args.reps}"
             f"{f' --level {args.level}' if args.level else ''}; commit {commit()}"]
    for path in args.tables:
        lines += [""] + report(path, args.budget, args.reps, args.level)
    write_report(lines, args.out)


if __name__ == "__main__":
    main()
