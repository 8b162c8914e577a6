"""How large the target set of each known-truth problem is, and what reaching it takes.

A known-truth problem (:func:`experiments.harness.problems.synthetic`) is a
product of independent factors, one per group of terms that share
parameters.  Its S (:mod:`experiments.harness.truth`) is every configuration
within 99% of the exact optimum.  For each problem this prints: the number of
configurations; per factor, its parameters, its configurations and how many
come within 99% and 95% of the factor's best; the size of S; the chance that
blind sampling (the default, then 99 distinct others) measures a member of S
within 100 evaluations (:func:`experiments.sampler.identifiable.blind_chance`);
and, for comparison, the set a recorded table's rule would give (within one
standard error of the best median, here of a median of ``--repeats`` runs
at the problem's noise: ``sqrt(pi / 2) * sigma / sqrt(repeats)`` in ``log``,
the large-sample standard error of a normal sample's median).

Usage: ``python -m experiments.sampler.known_truth_sets [--problems a,b] [--repeats 5] [--out FILE]``
"""

from __future__ import annotations

import argparse
import math
from itertools import product

import numpy as np

from experiments.harness.problems import SYNTHETIC, synthetic, term_groups
from experiments.harness.runs import commit, write_report
from experiments.harness.truth import KNOWN_LEVEL
from experiments.sampler.identifiable import blind_chance

PROBLEMS = "lustre4-cv15,mpiio6-cv15,chunked8-cv15,stack12-cv15"
BUDGET = 100


def set_size(factors: list[np.ndarray], level: float) -> int:
    """Configurations whose product of factor ratios (each factor's value / its best) is >= ``level``."""
    near = [np.log(f / f.max())[f / f.max() >= level] for f in factors]  # a member has every factor >= level
    return sum(1 for combo in product(*near) if sum(combo) >= math.log(level) - 1e-12)


def report(name: str, repeats: int) -> list[str]:
    spec = SYNTHETIC[name]
    problem = synthetic(name)
    groups = term_groups(spec["terms"], problem.choices, problem.conditions)
    factors = [values for _, values in groups]
    total = problem.grid.size()
    assert math.prod(len(f) for f in factors) == total, "factors do not tile the space"
    sigma = math.sqrt(math.log(1.0 + spec["cv"] ** 2))
    se_level = math.exp(-math.sqrt(math.pi / 2) * sigma / math.sqrt(repeats))
    lines = [f"## {name} ({problem.note}; {total:,} configurations; optimum {problem.best:,.0f} MB/s)"]
    for names, values in groups:
        ratio = values / values.max()
        lines.append(f"factor {', '.join(names)}: {len(values):,} configurations, {int((ratio >= 0.99).sum())} within "
                     f"99% of its best, {int((ratio >= 0.95).sum())} within 95%")
    s = set_size(factors, KNOWN_LEVEL)
    lines.append(f"S (within {KNOWN_LEVEL:.0%} of the optimum): {s:,} configurations, 1 in {total / s:,.0f}; blind "
                 f"sampling measures one within {BUDGET} evaluations with chance {blind_chance(total - 1, s, BUDGET - 1):.2g}")
    one_se = set_size(factors, se_level)
    lines.append(f"one standard error of a {repeats}-run median at CV {spec['cv']:.0%} ({se_level:.1%} of the optimum): "
                 f"{one_se:,} configurations, blind chance within {BUDGET} {blind_chance(total - 1, one_se, BUDGET - 1):.2g}")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", default=PROBLEMS, help=f"known-truth problems (default {PROBLEMS})")
    parser.add_argument("--repeats", type=int, default=5, help="runs per median for the one-standard-error set")
    parser.add_argument("--out", help="also write the report to this file")
    args = parser.parse_args(argv)
    lines = [f"# python -m experiments.sampler.known_truth_sets --problems {args.problems} --repeats {args.repeats}; "
             f"commit {commit()}", ""]
    for name in args.problems.split(","):
        lines += [*report(name, args.repeats), ""]
    write_report(lines, args.out)


if __name__ == "__main__":
    main()
