"""How far can any setting of a stop-rule family reach issue 31's item-3 targets?  A ceiling, fitted in hindsight.

Run from the repository root, on trajectories with branches (:mod:`experiments.stopping.trajectories`)::

    .venv/bin/python -m experiments.stopping.ceiling --runs T0-29.json --seeds 10-29 \\
        --out experiments/results/stopping-ceiling.txt

:mod:`experiments.stopping.joint` and :mod:`experiments.stopping.identified`
choose one setting on design seeds and score it on held-out ones.  This
script instead fits every setting of each rule family *in hindsight, on the
very seeds it scores*, for each problem (and N) separately, and scores it as
those modules do: a ceiling, not a result.  A family none of whose settings
meets a target here cannot meet it when its setting is chosen honestly.

The stop (parts 1 and 2 of item 3: >= 18 of 20 seeds stop with a
recommendation >= 85% of the best and none below 70%; the median over seeds
of RoTI / the seed's hindsight-best RoTI >= 80%, a seed below 85% counting
0; part 3 compares with a fixed budget and is left out).  Families:
``fixed`` (stop after B evaluations, B = 3 to the budget, the main
trajectory's recommendation); ``confident+pick``
(:class:`iobo.stopping.ConfidentStop` over :mod:`experiments.stopping.joint`'s
grid of probability x minimum trials, each followed by each of its final
picks: the GP's best few re-measured, the pick by median fresh run);
``confident+K`` (the settings the trajectories branch, each followed by at
most K evaluations of top-two re-measuring, as ``iobo tune --stop-rule
confident`` does, scored by :mod:`experiments.stopping.identified`).

``--production-runs N`` (N = 100 and 1000.  At N = 10 the best fixed
budget's median is already 1.000 on every problem of
:mod:`experiments.stopping.joint`'s reports, and a stop on the trajectory can
never total less than the seed's hindsight optimum, so "better than every
fixed budget" cannot be met there by any rule): per problem, total time
(tuning seconds + N production runs' I/O seconds at the recommendation) over
the seed's hindsight-optimal total, median <= 1.1 and worst seed <= 1.3.
Families: ``fixed``; ``gp`` (:class:`iobo.stopping.ProductionRuns`, the GP's
expected saving over N runs against a trial's cost, over minimum trials x
calibration); ``stake`` (the same rule with a minimum number of trials that
grows with the stake, s = N x the default's I/O seconds per run / a trial's
seconds, the trials the stake could pay for: 3 + ceil(a x log2(1 + s)) or 3 +
ceil(a x s)); ``gp+pick`` (the ``gp`` rule followed by a final pick, the
extra runs counted as tuning time: the issue allows re-measuring before the
stop).
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
from datetime import datetime, timezone

import numpy as np

from experiments.harness.runs import commit, seed_list, show_seeds, write_report
from experiments.stopping.identified import EXTRA_RUNS, outcome
from experiments.stopping.joint import (FLOOR, GRID_MIN, GRID_P, PICKS, PRODUCTION_MEDIAN, PRODUCTION_WORST,
                                        ROTI_TARGET, Seed, load, part_one, stop_point)
from experiments.stopping.trajectories import FIRE_RULES
from iobo.stopping import BASELINE_RUNS, ConfidentStop, FixedBudget, Progress, ProductionRuns

RUNS = (100, 1000)
GP_MIN = (4, 5, 6, 8, 10)
GP_CALIBRATION = (0.1, 0.25, 0.35, 0.5, 0.7, 1.0, 1.4, 2.0, 3.0)
STAKE_LAWS = (("log", (0.5, 0.75, 1.0, 1.25, 1.5, 2.0)), ("lin", (0.03, 0.05, 0.1, 0.15, 0.2, 0.3)))
STAKE_MIN = (4, 5)
STAKE_CALIBRATION = (0.25, 0.35, 0.5, 0.7, 1.0)
PICK_CALIBRATION = (0.25, 0.35, 0.5, 1.0)


class StakeMinimum(ProductionRuns):
    """:class:`iobo.stopping.ProductionRuns` that consults the GP only after 3 + ceil(a x f(s)) trials, s the
    trials the stake could pay for (N x the default's I/O seconds per run / a trial's seconds), f = log2(1 + s)
    (``law`` "log") or s ("lin")."""

    def __init__(self, runs: int, law: str, a: float, min_trials: int, calibration: float) -> None:
        super().__init__(runs, min_trials, calibration)
        self.law, self.a = law, a

    def minimum(self, progress: Progress) -> int:
        """Trials before the GP's saving is consulted: the larger of ``min_trials`` and 3 + ceil(a x f(s))."""
        stake = self.runs * progress.mb_per_run / progress.default_mb_per_s / (progress.minutes_per_trial * 60)
        return max(self.min_trials, BASELINE_RUNS + math.ceil(self.a * (math.log2(1 + stake) if self.law == "log"
                                                                         else stake)))

    def should_stop(self, progress: Progress) -> bool:
        """:class:`iobo.stopping.ProductionRuns`' answer, held back before :meth:`minimum` unless no trial can pay."""
        if not super().should_stop(progress):
            return False
        cannot_pay = self.runs * self.io_seconds(progress) < progress.minutes_per_trial * 60
        return cannot_pay or progress.trials >= self.minimum(progress)


def with_pick(seeds: list[Seed], pick: tuple[int, int], picked: dict) -> list[Seed]:
    """``seeds`` scored with the final ``pick`` (candidates, runs), built once per pick and kept in ``picked``."""
    if pick not in picked:
        picked[pick] = seeds if pick == (1, 1) else [Seed(s.run, pick) for s in seeds]
    return picked[pick]


def stop_settings(seeds: list[Seed], picked: dict):
    """(family, setting, per-seed fractions of the best, per-seed RoTI shares) for every setting of the stop
    families (parts 1 and 2); ``picked``: final pick -> the seeds scored with it (filled as needed)."""
    for b in range(BASELINE_RUNS, seeds[0].budget + 1):
        scores = np.array([s.score(b) for s in seeds])
        yield "fixed", f"B={b}", scores[:, 0], scores[:, 1]
    for pick in PICKS:
        for p in GRID_P:
            for m in GRID_MIN:
                rule = ConfidentStop(p, m)
                scores = np.array([s.score(stop_point(rule, s.run)) for s in with_pick(seeds, pick, picked)])
                yield "confident+pick", f"p={p} min={m} pick {pick[0]}x{pick[1]}", scores[:, 0], scores[:, 1]
    for p, m in FIRE_RULES:
        for k in EXTRA_RUNS:
            ends = [outcome(s, p, m, k) for s in seeds]
            yield ("confident+K", f"p={p} min={m} K={k}", np.array([e.fraction for e in ends]),
                   np.array([e.share(s) for e, s in zip(ends, seeds)]))


def stop_lines(seeds: list[Seed], picked: dict) -> list[str]:
    """Per stop family: how many settings meet part 1, the best part-2 median among them and overall, and
    how many meet both (``picked``: as :func:`with_pick`)."""
    rows = [(family, setting, part_one(fractions), int(np.sum(fractions >= FLOOR)), float(fractions.min()),
             float(np.median(shares))) for family, setting, fractions, shares in stop_settings(seeds, picked)]
    out = ["  the stop (parts 1 and 2):"]
    for family in dict.fromkeys(r[0] for r in rows):
        mine = [r for r in rows if r[0] == family]
        one = [r for r in mine if r[2]]
        most = max(mine, key=lambda r: (r[3], r[4]))
        best_two = max(mine, key=lambda r: r[5])
        both = [r for r in one if r[5] >= ROTI_TARGET]
        out.append(f"    {family:14s} {len(mine):3d} settings: most seeds >= 85% {most[3]} of {len(seeds)} (worst "
                   f"{most[4]:.1%}; {most[1]}); meeting part 1: {len(one)}"
                   + (f", the highest part-2 median among them {max(r[5] for r in one):.1%}" if one else "")
                   + f"; the highest part-2 median {best_two[5]:.1%} ({best_two[1]}); meeting both: {len(both)}"
                   + (f", e.g. {both[0][1]}" if both else ""))
    return out


def production_settings(runs: int, budget: int):
    """(family, setting, rule, final pick) for every setting of the ``--production-runs`` families."""
    yield from (("fixed", f"B={b}", FixedBudget(b), (1, 1)) for b in range(BASELINE_RUNS, budget + 1))
    yield from (("gp", f"min={m} c={c}", ProductionRuns(runs, m, c), (1, 1)) for m in GP_MIN for c in GP_CALIBRATION)
    yield from (("stake", f"{law} a={a} min={m} c={c}", StakeMinimum(runs, law, a, m, c), (1, 1))
                for law, factors in STAKE_LAWS for a in factors for m in STAKE_MIN for c in STAKE_CALIBRATION)
    yield from (("gp+pick", f"min={m} c={c} pick {k}x{r}", ProductionRuns(runs, m, c), (k, r))
                for m in GP_MIN for c in PICK_CALIBRATION for k, r in PICKS[1:])


def production_lines(seeds: list[Seed], picked: dict, met: dict) -> list[str]:
    """Per N and family: the smallest worst seed, the smallest median and how many settings meet both targets;
    ``met`` counts, per (N, family, setting), the problems where it meets both (``picked``: as :func:`with_pick`)."""
    out = []
    for runs in RUNS:
        rows = []
        for family, setting, rule, pick in production_settings(runs, seeds[0].budget):
            values = [p.total_s(stop_point(rule, s.run), runs) / s.optimal_total_s(runs)
                      for p, s in zip(with_pick(seeds, pick, picked), seeds)]
            median, worst = float(np.median(values)), max(values)
            ok = median <= PRODUCTION_MEDIAN and worst <= PRODUCTION_WORST
            rows.append((family, setting, median, worst, ok))
            met[(runs, family, setting)] = met.get((runs, family, setting), 0) + ok
        out.append(f"  --production-runs {runs}:")
        for family in dict.fromkeys(r[0] for r in rows):
            mine = [r for r in rows if r[0] == family]
            low_worst = min(mine, key=lambda r: (r[3], r[2]))
            low_median = min(mine, key=lambda r: (r[2], r[3]))
            both = [r for r in mine if r[4]]
            out.append(f"    {family:8s} {len(mine):3d} settings: smallest worst {low_worst[3]:.3f} (median "
                       f"{low_worst[2]:.3f}; {low_worst[1]}); smallest median {low_median[2]:.3f} (worst "
                       f"{low_median[3]:.3f}; {low_median[1]}); meeting both: {len(both)}"
                       + (f", e.g. {both[0][1]}" if both else ""))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", required=True, help="trajectory JSON files (comma-separated)")
    parser.add_argument("--seeds", required=True, type=seed_list, help="the seeds scored, e.g. 10-29 or 0-9,30-59")
    parser.add_argument("--out", help="also write the report here")
    parser.add_argument("--note", default="", help="appended to the header (e.g. where trajectories were computed)")
    args = parser.parse_args(argv)
    chosen = set(args.seeds)
    problems: dict[str, list[Seed]] = {}
    for r in sorted(load(args.runs), key=lambda r: (r["problem"], r["seed"])):
        if r["seed"] in chosen:
            problems.setdefault(r["problem"], []).append(Seed(r))
    command = shlex.join(sys.argv[1:] if argv is None else argv)
    header = (f"# python -m experiments.stopping.ceiling {command}   (commit {commit()}; "
              f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC{'; ' + args.note if args.note else ''})")
    out = [header, *(" ".join(p.split()) for p in __doc__.split("\n\n")[3:6])]
    met: dict = {}
    for name, seeds in problems.items():
        out.append(f"\n## {name}: seeds {show_seeds(sorted(chosen))} ({len(seeds)}), budget {seeds[0].budget}")
        picked: dict = {}
        out += stop_lines(seeds, picked) + production_lines(seeds, picked, met)
    out.append("")
    for runs in RUNS:
        full = [f"{family} {setting}" for (n, family, setting), count in met.items()
                if n == runs and count == len(problems)]
        out.append(f"one --production-runs {runs} setting meeting both targets on all {len(problems)} problems, "
                   f"fitted in hindsight: {len(full)}" + (f" ({'; '.join(full[:5])})" if full else ""))
    write_report(out, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
