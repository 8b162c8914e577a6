"""The stop rule that tells its finalists apart before it stops, scored jointly per seed (issue 31, item 3).

Run from the repository root, on trajectories with branches (:mod:`experiments.stopping.trajectories`)::

    .venv/bin/python -m experiments.stopping.identified --design D.json --held-out H.json --out F

A study with ``--stop-rule confident`` stops when the GP is ``probability``
sure its recommendation is within 85% of the best, after ``min_trials``;
before it stops, it may re-measure its best measured configurations
(top-two sampling, :meth:`iobo.samplers.GPSampler.identify_now`) for at
most ``K`` more evaluations, or until the leader wins every posterior draw.
The trajectories hold, for every ConfidentStop setting of
:data:`experiments.stopping.trajectories.FIRE_RULES`, where it first says
stop and what the re-measuring branch gives after each extra evaluation.
Per seed, what is scored is the sampler's incumbent when the study ends,
by its true median, as :mod:`experiments.stopping.joint` does (the same
targets, floors, hindsight-best RoTI of the seed's main trajectory, and
fixed budgets from that trajectory); a rule that never says stop ends at
the budget with the main trajectory's recommendation.  Tuning minutes
include the extra evaluations.  ``K = 0`` is the rule without re-measuring.

The setting (probability, min_trials, K) is chosen on the design seeds only:
the most design problems meeting part 1, then the highest smallest median of
part 2.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np

from experiments.harness.runs import commit, write_report
from experiments.stopping.joint import (FIRST_STOP, FIXED_FACTOR, FLOOR, MIN_GOOD, ROTI_TARGET, Seed, by_problem, load,
                                        part_one, ratio_of_medians, seed_ranges, smallest_fixed_budget, with_interval)
from experiments.stopping.trajectories import BRANCH_RUNS, FIRE_RULES, rule_name

EXTRA_RUNS = (0, 3, 6, 10, BRANCH_RUNS)  # K: evaluations re-measuring finalists at most


@dataclass(frozen=True)
class Outcome:
    """Where a seed's study ends: ``stop`` (the evaluation the rule said stop after), ``extra`` (evaluations
    re-measuring after it), ``fraction`` (true median of the incumbent / the best), ``minutes`` of tuning."""

    stop: int
    extra: int
    fraction: float
    minutes: float

    def share(self, seed: Seed) -> float:
        """RoTI / the seed's hindsight-best RoTI, 0 below the floor."""
        if self.fraction < FLOOR or not seed.hindsight:
            return 0.0
        gain = self.fraction * seed.run["best_truth"] - seed.run["default_truth"]
        return gain / self.minutes / seed.hindsight


def outcome(seed: Seed, probability: float, min_trials: int, extra_runs: int) -> Outcome:
    """The end of ``seed``'s study under ConfidentStop(``probability``, ``min_trials``) with at most ``extra_runs``
    re-measuring evaluations."""
    run = seed.run
    n = run["fires"].get(rule_name(probability, min_trials))
    if n is None:
        return Outcome(seed.budget, 0, float(seed.fraction[-1]), float(run["minutes"][-1]))
    records = run["branches"][str(n)]
    k = next((i for i, r in enumerate(records) if not r["undecided"]), len(records) - 1)
    k = min(k, extra_runs)
    return Outcome(n, k, records[k]["truth"] / run["best_truth"], records[k]["minutes"])


def design(problems: dict[str, list[Seed]]) -> tuple[tuple[float, int, int], list[str]]:
    rows = []
    for p, m in FIRE_RULES:
        for k in EXTRA_RUNS:
            met, medians = 0, []
            for seeds in problems.values():
                ends = [outcome(s, p, m, k) for s in seeds]
                met += part_one([e.fraction for e in ends])
                medians.append(float(np.median([e.share(s) for e, s in zip(ends, seeds)])))
            rows.append((met, min(medians), (p, m, k), medians))
    met, worst, chosen, medians = max(rows, key=lambda r: (r[0], r[1]))
    table = [f"  probability {p}, min_trials {m}, K {k}: part 1 met on {n} of {len(problems)}; median RoTI / "
             f"hindsight-best " + ", ".join(f"{x:.1%}" for x in meds) for n, _, (p, m, k), meds in rows]
    some = next(iter(problems.values()))
    lines = [f"design (seeds {seed_ranges([s.run for s in some])} of {', '.join(problems)}): ConfidentStop "
             f"(probability, min_trials) {FIRE_RULES} x K {EXTRA_RUNS}; chosen: the most design problems meeting "
             f"part 1, then the highest smallest median of part 2: probability {chosen[0]}, min_trials "
             f"{chosen[1]}, K {chosen[2]} (part 1 met on {met} of {len(problems)}; medians "
             + ", ".join(f"{x:.1%}" for x in medians) + "); every setting:", *table]
    return chosen, lines


def report(name: str, seeds: list[Seed], fit: list[Seed] | None, p: float, m: int, k: int) -> list[str]:
    ends = [outcome(s, p, m, k) for s in seeds]
    fractions = np.array([e.fraction for e in ends])
    shares = np.array([e.share(s) for e, s in zip(ends, seeds)])
    one, two = part_one(fractions), float(np.median(shares)) >= ROTI_TARGET
    out = [f"\n## {name}: seeds {seeds[0].run['seed']}-{seeds[-1].run['seed']}, budget {seeds[0].budget}; default "
           f"{seeds[0].run['default_truth']:.0f} MB/s, best {seeds[0].run['best_truth']:.0f} MB/s (true medians)",
           f"ConfidentStop({p}, {m}), then at most {k} re-measuring evaluations: says stop at "
           f"{with_interval([e.stop for e in ends], fmt='{:.1f}')}, re-measures "
           f"{with_interval([e.extra for e in ends], fmt='{:.1f}')} more, minutes "
           f"{with_interval([e.minutes for e in ends], fmt='{:.2f}')}; "
           f"{sum(e.stop == s.budget and rule_name(p, m) not in s.run['fires'] for e, s in zip(ends, seeds))} "
           f"seeds never said stop",
           f"  part 1 {'MET' if one else 'MISSED'}: {int(np.sum(fractions >= FLOOR))} of {len(seeds)} >= 85% of the "
           f"best (needs >= {int(np.ceil(MIN_GOOD * len(seeds)))}), worst {fractions.min():.1%} (needs >= 70%); "
           f"recommendation {with_interval(fractions)} of the best",
           f"  part 2 {'MET' if two else 'MISSED'}: median RoTI / hindsight-best {with_interval(shares)} (needs >= 80%)"]
    budget_b = smallest_fixed_budget(fit) if fit else None
    three = False
    if budget_b is None:
        out.append("  part 3 UNDEFINED: no fixed budget meets part 1 on the design seeds within the budget")
    else:
        fixed = np.array([s.score(budget_b) for s in seeds])
        r, lo, hi = ratio_of_medians(shares, fixed[:, 1])
        three = r >= FIXED_FACTOR
        out.append(f"  part 3 {'MET' if three else 'MISSED'}: smallest fixed budget meeting part 1 on the design "
                   f"seeds: {budget_b}; here {int(np.sum(fixed[:, 0] >= FLOOR))} of {len(seeds)} >= 85%, worst "
                   f"{fixed[:, 0].min():.1%}, median RoTI / hindsight-best {with_interval(fixed[:, 1])}; ratio of "
                   f"medians {r:.2f}x [95% CI {lo:.2f}-{hi:.2f}] (needs >= {FIXED_FACTOR}x)")
    out.append(f"  jointly: {'MET' if one and two and three else 'MISSED'}")
    best_fixed = max(range(3, seeds[0].budget + 1), key=lambda b: sum(s.fraction[b - 1] >= FLOOR for s in seeds))
    out.append(f"  for reference: the main trajectory's recommendation is >= 85% of the best on at most "
               f"{sum(s.fraction[best_fixed - 1] >= FLOOR for s in seeds)} of {len(seeds)} seeds at any fixed "
               f"budget (at {best_fixed})")
    reachable, needed = sum(ever_good(s) for s in seeds), int(np.ceil(MIN_GOOD * len(seeds)))
    out.append(f"  ceiling for any stop rule on these trajectories: {reachable} of {len(seeds)} seeds recommend >= 85% "
               f"of the best at some evaluation {FIRST_STOP}-{seeds[0].budget} or after a recorded re-measuring "
               f"branch; part 1 (needs {needed}) is {'within' if reachable >= needed else 'OUT OF'} reach of stopping "
               f"alone")
    return out


def ever_good(seed: Seed) -> bool:
    """Whether some stop of ``seed`` recommends >= 85% of the best: the main trajectory at an evaluation from
    the first allowed stop on, or any evaluation of a recorded re-measuring branch (a clairvoyant rule's reach)."""
    if np.any(seed.fraction[FIRST_STOP - 1:] >= FLOOR):
        return True
    best = seed.run["best_truth"]
    return any(r["truth"] / best >= FLOOR for records in seed.run["branches"].values() for r in records)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--design", required=True, help="trajectory JSON files of the design seeds (comma-separated)")
    parser.add_argument("--held-out", required=True, help="trajectory JSON files of the held-out seeds")
    parser.add_argument("--out", help="also write the report here")
    parser.add_argument("--note", default="", help="appended to the header")
    args = parser.parse_args(argv)
    fit, test = by_problem(load(args.design)), by_problem(load(args.held_out))
    (p, m, k), lines = design(fit)
    header = (f"# python -m experiments.stopping.identified {shlex.join(sys.argv[1:] if argv is None else argv)}   "
              f"(commit {commit()}; {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC"
              f"{'; ' + args.note if args.note else ''})")
    out = [header, " ".join(__doc__.split("\n\n")[2].split()), *lines]
    for name, seeds in test.items():
        out += report(name, seeds, fit.get(name), p, m, k)
    write_report(out, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
