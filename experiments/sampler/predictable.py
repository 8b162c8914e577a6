"""Check: could a sampler that learns a table's structure find S quickly at all?

Issue 31 holds the sampler to "median evaluations to S <= 10" on every table
whose configurations differ detectably (S: the configurations within one
standard error of the best median, :mod:`experiments.harness.truth`).  A
model-based sampler gets there fast only when S's configurations are
*predictable*: when what was measured elsewhere points at them before they
are measured.  "Differ detectably" (an ANOVA over the configurations) does
not say that: a table can have large effects and still owe S's place at the
top to an interaction of many parameters, or to its medians' own noise.

This asks the most a structure-learning sampler could know.  Each
configuration's ``log`` median is predicted from the *exact medians of every
other configuration* (leave-one-out), by a linear model of

- ``additive``: one effect per parameter value (inactive conditional
  parameters as a value of their own), and
- ``pairwise``: those plus one effect per pair of values of two parameters,

fitted by ridge least squares (``RIDGE``, to keep the pairwise model
determined); the leave-one-out predictions come from the hat matrix,
``e_i / (1 - h_ii)``.  Ordering the configurations other than the default by
these predictions, best first, the default measured first as in every
benchmark run, S is reached after ``1 + r`` evaluations, ``r`` the rank of
its highest-ranked member (1 when the default is in S).  No real sampler
knows this much: after 10 evaluations it has about 10 noisy runs, not 215
exact medians.  So where this ordering needs more than 10 evaluations, the
target rests on luck for any sampler that ranks by what the table's other
configurations show; where it needs few, structure could reach S and a
sampler that does not is at fault.  Beside it: blind sampling without
replacement, ``1 + N / (|S| + 1)`` expected evaluations (default first, not in
S), their median, its chance of finding S within 25, and the chance that 20
seeded runs of it show both figures (:func:`blind_meets_its_own_figures`:
where nothing can be learned, a target set at blind's figures is a coin
flip even for the best sampler).  Also printed: the
leave-one-out R^2 and, per S member, how far its median lies above its prediction in
standard errors of a log median (the table's; a member several standard
errors above what the rest predicts is unpredictable by any smooth model).
Where the leave-one-out R^2 is not above 0 the model predicts nothing and
its order is chance.

Usage: ``python -m experiments.sampler.predictable experiments/tables/*.csv [--out FILE]``
"""

from __future__ import annotations

import argparse
import itertools
import math
import shlex
import sys
from collections.abc import Sequence

import numpy as np

from experiments.harness import problems
from experiments.harness.runs import commit, write_report
from experiments.harness.truth import truth_of
from experiments.sampler.identifiable import blind_chance

RIDGE = 1e-3  # ridge penalty per column (log units squared), small against effects of 0.05-2
INACTIVE = "-"  # the value of a conditional parameter that is switched off
WITHIN = 25  # the "S within 25 evaluations"
TARGET = 10  # the "median evaluations to S <= 10"
RUNS = 20  # seeded runs per benchmark


def design(configs: Sequence[dict], names: Sequence[str], order: int) -> np.ndarray:
    """Indicator columns (``n x k``) of every value (``order`` 1) and also every pair of values of two
    parameters (``order`` 2), plus an intercept; an inactive parameter is the value ``INACTIVE``."""
    values = [[repr(c.get(n, INACTIVE)) for n in names] for c in configs]
    columns = [np.ones(len(configs))]
    for size in range(1, order + 1):
        for group in itertools.combinations(range(len(names)), size):
            keys = [tuple(v[j] for j in group) for v in values]
            for key in sorted(set(keys)):
                columns.append(np.array([k == key for k in keys], dtype=float))
    return np.column_stack(columns)


def leave_one_out(x: np.ndarray, y: np.ndarray, ridge: float = RIDGE) -> np.ndarray:
    """Ridge leave-one-out predictions (``n``) of ``y`` (``n``) from columns ``x`` (``n x k``)."""
    gram = x.T @ x + ridge * np.eye(x.shape[1])
    hat = x @ np.linalg.solve(gram, x.T)
    residual = y - hat @ y
    return y - residual / (1.0 - np.diag(hat))


def blind_expected(n: int, s: int, default_in_s: bool) -> float:
    """Expected evaluations to S for blind sampling without replacement: the default, then the other
    ``n - 1`` configurations in random order (``s`` of them in S)."""
    return 1.0 if default_in_s else 1.0 + n / (s + 1.0)


def blind_within(n: int, s: int, default_in_s: bool, budget: int = WITHIN) -> float:
    """Chance that blind sampling without replacement finds S within ``budget`` evaluations."""
    return 1.0 if default_in_s else blind_chance(n - 1, s, budget - 1)  # draws 2..budget from the n - 1 others


def blind_median(n: int, s: int, default_in_s: bool) -> int:
    """Median evaluations to S for blind sampling without replacement: the fewest ``k`` it finds S
    within with chance at least one half."""
    return next(k for k in range(1, n + 1) if blind_within(n, s, default_in_s, k) >= 0.5)


def blind_meets_its_own_figures(n: int, s: int, default_in_s: bool, runs: int = RUNS, draws: int = 20_000,
                                seed: int = 0) -> float:
    """Chance that ``runs`` seeded runs of blind sampling without replacement show its own expected figures:
    a median over the runs of at most :func:`blind_median` evaluations to S, and at least
    ``floor(runs x`` :func:`blind_within` ``)`` runs finding S within ``WITHIN`` (ior-tmpfs-1r's "no worse
    than blind" target, median <= 13 and >= 16 of 20, is these figures).  Monte Carlo over ``draws``
    benchmarks, each run's evaluations to S drawn from their exact distribution."""
    if default_in_s:
        return 1.0
    cdf = np.array([blind_within(n, s, False, k) for k in range(1, n + 1)])
    evaluations = 1 + np.searchsorted(cdf, np.random.default_rng(seed).random((draws, runs)), side="left")
    median_ok = np.median(evaluations, axis=1) <= blind_median(n, s, False)
    within_ok = (evaluations <= WITHIN).sum(axis=1) >= math.floor(runs * blind_within(n, s, False))
    return float(np.mean(median_ok & within_ok))


def report(path: str) -> list[str]:
    """The lines for one table."""
    problem = problems.load_table(path)
    truth = truth_of(problem)
    configs = list(problem.grid.configurations())
    key_of = problems.config_key
    medians = np.array([problem.truth(c) for c in configs])
    y = np.log(medians)
    in_s = np.array([truth.in_s(m) for m in medians])
    default = key_of(problem.grid.active(problem.default))
    is_default = np.array([key_of(c) == default for c in configs])
    n, s = len(configs), int(in_s.sum())
    default_in_s = bool(in_s[is_default].any())
    lines = [f"## {problem.name}: {truth.describe()}",
             f"blind sampling: {blind_expected(n, s, default_in_s):.1f} evaluations to S expected, median "
             f"{blind_median(n, s, default_in_s)}; "
             f"S within {WITHIN} with chance {blind_within(n, s, default_in_s):.2f}; {RUNS} seeded runs of it show "
             f"both figures (median <= {blind_median(n, s, default_in_s)}, >= "
             f"{math.floor(RUNS * blind_within(n, s, default_in_s))} of {RUNS} within {WITHIN}) with chance "
             f"{blind_meets_its_own_figures(n, s, default_in_s):.2f}"]
    names = list(problem.choices)
    for label, order in (("additive", 1), ("pairwise", 2)):
        x = design(configs, names, order)
        predicted = leave_one_out(x, y)
        r2 = 1.0 - np.var(y - predicted) / np.var(y)
        others = np.flatnonzero(~is_default)
        ranked = others[np.argsort(-predicted[others], kind="stable")]
        ranks = {int(i): r + 1 for r, i in enumerate(ranked)}
        member_ranks = sorted(ranks[int(i)] for i in np.flatnonzero(in_s & ~is_default))
        evaluations = 1 if default_in_s else 1 + member_ranks[0]
        above = sorted(((y[i] - predicted[i]) / truth.se for i in np.flatnonzero(in_s)), reverse=True)
        if r2 <= 0:
            verdict = "no structure: the order is chance"
        else:
            verdict = "structure could reach S" if evaluations <= TARGET else "beyond what structure shows"
        lines.append(f"{label:9} leave-one-out R^2 {r2:.2f}; {x.shape[1]} columns; S members ranked "
                     f"{member_ranks} of {len(others)}: S after {evaluations} evaluations ({verdict}, "
                     f"target <= {TARGET}); "
                     f"S medians above their prediction by {', '.join(f'{a:+.1f}' for a in above)} SE")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tables", nargs="+", help="recorded sweeps (CSV)")
    parser.add_argument("--out", help="also write the report to this file, headed by the command line and commit")
    args = parser.parse_args(argv)
    command = "python -m experiments.sampler.predictable " + shlex.join(argv if argv is not None else sys.argv[1:])
    lines = [f"# {command}; commit {commit()}", ""]
    for path in args.tables:
        lines += report(path) + [""]
    write_report(lines, args.out)


if __name__ == "__main__":
    main()
