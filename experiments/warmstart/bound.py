"""What trial 1 of a warm start can reach when it only follows the evidence (issue 19's 90% target).

For each context left out (as :mod:`experiments.warmstart.bench` does) this
gives the earlier contexts' *whole* tables to the bound (far more than the
warm start ever sees: it gets 30 noisy runs of each), and asks which
configurations of the common grid an evidence-following first trial can
propose.  A configuration is *dominated* when another one is better by at
least ``--margin`` (default 10%, about one run's noise) in every earlier
context: the earlier data say it is worse wherever they were measured, and
nothing in them ranks it first at the new context.  In the families of
three contexts the held-out one takes a value of a feature (ranks, bytes
per call, file system) that no earlier context has; the quiet families'
fourth context gives every value two contexts (:data:`experiments.warmstart.bench.CONTEXTS`).
The bound is the best % of the target's best among the configurations
that are not dominated: no evidence-following method's first trial does
better, whatever its model.

Printed per target: the undominated configurations (their % of each earlier
context's best and of the target's best), the bound, and what the target
needs (>= 90%).  Run from the project root (seconds)::

    .venv/bin/python -m experiments.warmstart.bound

``--margin se`` (issue 31): each earlier context's margin is its table's
standard error of a log median (:mod:`experiments.harness.truth`: a
configuration dominates another when its median is higher by a factor
``exp(se)`` in every earlier context), the target is the held-out table's
S (within one standard error of its best median), and the bound gets a
bootstrap 95% interval: every table's repeats resampled (``--draws``), the
medians and the bound recomputed.
"""

from __future__ import annotations

import argparse
import os
import sys

import math

import numpy as np

from experiments.harness.problems import config_key
from experiments.harness.runs import commit, write_report
from experiments.harness.truth import LEVEL, truth_of
from experiments.warmstart.bench import CONTEXTS, target

TARGET_PCT = 90.0


def undominated(ratios: dict[tuple, list[float]], margin: float) -> list[tuple]:
    """Keys of ``ratios`` (configuration -> its share of the best in each earlier context) that no other key
    beats by a factor ``1 + margin`` in every earlier context."""
    return [k for k, mine in ratios.items()
            if not any(all(o >= m * (1 + margin) for o, m in zip(other, mine)) for other in ratios.values())]


def bound_lines(family: str, margin: float) -> tuple[list[str], list[tuple[str, float]]]:
    """The report of one family's contexts and ``[(target, bound %)]``."""
    lines, bounds = [], []
    tables = CONTEXTS[family]
    problems = {name: target(name).problem for name in tables}
    grid = list(problems[tables[0]].grid.configurations())
    for goal in tables:
        earlier = [name for name in tables if name != goal]
        ratios = {_key(c): [problems[n].truth(c) / problems[n].best for n in earlier] for c in grid}
        by_key = {_key(c): c for c in grid}
        goal_pct = {k: 100 * problems[goal].truth(c) / problems[goal].best for k, c in by_key.items()}
        free = sorted(undominated(ratios, margin), key=lambda k: -goal_pct[k])
        bound = goal_pct[free[0]]
        bounds.append((goal, bound))
        lines.append(f"\n## {goal} left out; earlier: {', '.join(earlier)}")
        lines.append(f"{'configuration':<100}" + "".join(f"{n[:18]:>20}" for n in earlier) + f"{goal[:18]:>20}")
        for k in free:
            lines.append(f"{_short(by_key[k]):<100}" + "".join(f"{100 * r:>19.0f}%" for r in ratios[k])
                         + f"{goal_pct[k]:>19.0f}%")
        above = [k for k in by_key if goal_pct[k] >= TARGET_PCT]
        for k in above:
            if k not in free:
                beaten = max(ratios, key=lambda o: min(a / b for a, b in zip(ratios[o], ratios[k])))
                lines.append(f"  {_short(by_key[k])} ({goal_pct[k]:.0f}% here) is dominated: earlier "
                             f"{', '.join(f'{100 * r:.0f}%' for r in ratios[k])} of their best, against "
                             f"{', '.join(f'{100 * r:.0f}%' for r in ratios[beaten])} for {_short(by_key[beaten])}")
        verdict = "reachable" if bound >= TARGET_PCT else "OUT OF REACH"
        lines.append(f"bound at trial 1: {bound:.0f}% of the best ({len(free)} undominated of {len(grid)}); "
                     f"the target {TARGET_PCT:.0f}%: {verdict}")
    return lines, bounds


def _bound(goal: str, earlier: list[str], medians: dict[str, dict], keys: list[tuple], margins: dict[str, float]
           ) -> tuple[float, list[tuple]]:
    """The best share of ``goal``'s best median among the configurations (``keys``) no other beats by a factor
    ``exp(margins[n])`` in every earlier context ``n``, and those configurations; ``medians``: table -> key ->
    median MB/s."""
    best = {n: max(medians[n].values()) for n in (*earlier, goal)}
    logs = np.array([[math.log(medians[n][k] / best[n]) for n in earlier] for k in keys])  # configs x earlier
    need = np.array([margins[n] for n in earlier])
    beaten = np.array([np.any(np.all(logs >= row + need, axis=1)) for row in logs])
    free = [k for k, b in zip(keys, beaten) if not b]
    return max(medians[goal][k] / best[goal] for k in free), free


def se_bound_lines(family: str, draws: int, seed: int = 0) -> tuple[list[str], list[tuple[str, float, float, float,
                                                                                          float, float]]]:
    """The bound at a margin of one standard error per earlier context, with its bootstrap interval:
    ``[(target, bound, low, high, S threshold share, share of draws reaching S)]``."""
    tables = CONTEXTS[family]
    problems = {name: target(name).problem for name in tables}
    truths = {name: truth_of(p) for name, p in problems.items()}
    keys = [config_key(problems[tables[0]].grid.active(c)) for c in problems[tables[0]].grid.configurations()]
    medians = {n: dict(zip(truths[n].keys, truths[n].medians)) for n in tables}
    margins = {n: truths[n].se for n in tables}
    rng = np.random.default_rng(seed)
    lines, out = [], []
    for goal in tables:
        earlier = [n for n in tables if n != goal]
        bound, free = _bound(goal, earlier, medians, keys, margins)
        resampled = []
        for _ in range(draws):
            drawn = {n: {k: float(np.median(rng.choice(r, len(r)))) for k, r in problems[n].repeats.items()}
                     for n in tables}
            resampled.append(_bound(goal, earlier, drawn, keys, margins)[0])
        low, high = np.percentile(resampled, [50 * (1 - LEVEL), 50 * (1 + LEVEL)])
        need = math.exp(-truths[goal].se)
        reach = float(np.mean(np.array(resampled) >= need))
        out.append((goal, bound, float(low), float(high), need, reach))
        lines.append(f"\n## {goal} left out; earlier: {', '.join(earlier)} (margins: one standard error, "
                     + ", ".join(f"{n} {math.exp(margins[n]) - 1:.0%}" for n in earlier) + ")")
        lines.append(f"bound at trial 1: {bound:.0%} of the best median [{LEVEL:.0%} interval {low:.0%}-{high:.0%}] "
                     f"({len(free)} undominated of {len(keys)}); S starts at {need:.0%}: "
                     f"{'reachable' if bound >= need else 'OUT OF REACH'} (in {reach:.0%} of {draws} resamples)")
    return lines, out


def _key(config: dict) -> tuple:
    return tuple(sorted((n, repr(v)) for n, v in config.items()))


def _short(config: dict) -> str:
    return ", ".join(f"{n}={v}" for n, v in config.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--margin", default="0.10",
                        help="a configuration better by this fraction in every earlier context dominates; 'se': "
                             "by one standard error of each earlier table's log medians, with intervals")
    parser.add_argument("--draws", type=int, default=200, help="bootstrap resamples for --margin se")
    parser.add_argument("--out", help="write the report here too")
    args = parser.parse_args()
    if args.margin == "se":
        lines = [f"# python -m experiments.warmstart.bound {' '.join(sys.argv[1:])}; commit {commit()}; "
                 f"load average {os.getloadavg()[0]:.1f}; truths: medians of the recorded repeats "
                 f"(experiments.harness.truth); margin: one standard error per earlier context"]
        summary = []
        for family in CONTEXTS:
            more, bounds = se_bound_lines(family, args.draws)
            lines += more
            summary += bounds
        lines.append("\n## summary: the best first trial an evidence-following warm start can propose, against S "
                     "(within one standard error of the best median)")
        lines += [f"{name:<20}{b:5.0%} [{lo:.0%}-{hi:.0%}]  S from {need:.0%}: "
                  f"{'reachable' if b >= need else 'OUT OF REACH'} ({reach:.0%} of resamples)"
                  for name, b, lo, hi, need, reach in summary]
        write_report(lines, args.out)
        return
    args.margin = float(args.margin)
    lines = [f"# python -m experiments.warmstart.bound {' '.join(sys.argv[1:])}; commit {commit()}; "
             f"load average {os.getloadavg()[0]:.1f}; truths: medians of the recorded repeats; margin "
             f"{100 * args.margin:.0f}%"]
    summary = []
    for family in CONTEXTS:
        more, bounds = bound_lines(family, args.margin)
        lines += more
        summary += bounds
    lines.append(f"\n## summary: the best first trial an evidence-following warm start can propose "
                 f"(target >= {TARGET_PCT:.0f}%)")
    lines += [f"{name:<20}{b:5.0f}%  {'reachable' if b >= TARGET_PCT else 'OUT OF REACH'}" for name, b in summary]
    write_report(lines, args.out)


if __name__ == "__main__":
    main()
