"""How far can any rule of a family reach ``--production-runs``' targets?  (issue 31, item 3)

Run from the repository root (trajectories: :mod:`experiments.stopping.trajectories`)::

    .venv/bin/python -m experiments.stopping.production_ceiling --runs T0-29.json,T30-59.json \\
        --seeds 10-29 --out experiments/results/production-ceiling.txt

The targets for ``--production-runs N`` (N = 100 and 1000 here.  At N = 10 the
best fixed budget's median is already 1.000 on every problem of
:mod:`experiments.stopping.joint`'s reports, and a stop on the trajectory
can never total less than the seed's hindsight optimum, so "better than
every fixed budget" cannot be met there by any rule): per problem, total time
(tuning seconds + N production runs' I/O seconds at the recommendation)
over the seed's hindsight-optimal total, median <= 1.1 and worst seed <= 1.3
(scored as :mod:`experiments.stopping.joint` scores them, on the same
trajectories).  :mod:`experiments.stopping.joint` chooses one setting on
design seeds and scores it on held-out ones.  This script instead fits every
setting of four rule families *in hindsight, on the very seeds it scores*,
for each problem and N separately: a ceiling, not a result.  A family none
of whose settings meets a target here cannot meet it when chosen honestly.

The families:

- ``fixed``: stop after B evaluations, B = 3 (the default's runs) to the budget;
- ``gp``: :class:`iobo.stopping.ProductionRuns` (the GP's expected saving over
  N runs against a trial's cost) over minimum trials x calibration;
- ``stake``: the same rule with a minimum number of trials that grows with the
  stake, s = N x the default's I/O seconds per run / a trial's seconds (the
  trials the stake could pay for): 3 + ceil(a x log2(1 + s)) or
  3 + ceil(a x s);
- ``gp+pick``: the ``gp`` rule followed by a final pick before the study stops
  (:func:`experiments.stopping.joint.final_pick`: the GP's best few measured
  configurations each re-measured, the pick by median fresh run, the extra
  runs counted as tuning time): the issue allows re-measuring before the stop.
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
from datetime import datetime, timezone

import numpy as np

from experiments.harness.runs import commit, write_report
from experiments.stopping.joint import PICKS, PRODUCTION_MEDIAN, PRODUCTION_WORST, Seed, load, stop_point
from iobo.stopping import BASELINE_RUNS, FixedBudget, Progress, ProductionRuns

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

    def should_stop(self, progress: Progress) -> bool:
        if progress.trials < BASELINE_RUNS:
            return False
        trial_s = progress.minutes_per_trial * 60
        if self.runs * self.io_seconds(progress) < trial_s:
            return True
        stake = self.runs * progress.mb_per_run / progress.default_mb_per_s / trial_s
        extra = math.ceil(self.a * (math.log2(1 + stake) if self.law == "log" else stake))
        if progress.trials < max(self.min_trials, BASELINE_RUNS + extra) or progress.time_gain_fraction is None:
            return False
        return self.counted_saving_s(progress) < trial_s


def settings(runs: int, budget: int):
    """(family, setting, rule, final pick) for every setting of the four families."""
    yield from (("fixed", f"B={b}", FixedBudget(b), (1, 1)) for b in range(BASELINE_RUNS, budget + 1))
    yield from (("gp", f"min={m} c={c}", ProductionRuns(runs, m, c), (1, 1)) for m in GP_MIN for c in GP_CALIBRATION)
    yield from (("stake", f"{law} a={a} min={m} c={c}", StakeMinimum(runs, law, a, m, c), (1, 1))
                for law, factors in STAKE_LAWS for a in factors for m in STAKE_MIN for c in STAKE_CALIBRATION)
    yield from (("gp+pick", f"min={m} c={c} pick {k}x{r}", ProductionRuns(runs, m, c), (k, r))
                for m in GP_MIN for c in PICK_CALIBRATION for k, r in PICKS[1:])


def ratios(runs_of_problem: list[dict], rule, runs: int, pick: tuple[int, int], plain: list[Seed],
           picked: dict) -> list[float]:
    """Per seed: total time at ``rule``'s stop (with ``pick``'s re-measuring) / the seed's hindsight-optimal total
    on its own trajectory (no re-measuring)."""
    if pick not in picked:
        picked[pick] = [Seed(r, pick) for r in runs_of_problem]
    return [picked[pick][i].total_s(stop_point(rule, r), runs) / plain[i].optimal_total_s(runs)
            for i, r in enumerate(runs_of_problem)]


def seed_set(text: str) -> set[int]:
    """``10-29`` or ``0-9,30-59`` as a set of seeds."""
    out: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", required=True, help="trajectory JSON files (comma-separated)")
    parser.add_argument("--seeds", required=True, help="the seeds scored, e.g. 10-29 or 0-9,30-59")
    parser.add_argument("--out", help="also write the report here")
    parser.add_argument("--note", default="", help="appended to the header (e.g. where trajectories were computed)")
    args = parser.parse_args(argv)
    chosen = seed_set(args.seeds)
    by_problem: dict[str, list[dict]] = {}
    for r in sorted(load(args.runs), key=lambda r: (r["problem"], r["seed"])):
        if r["seed"] in chosen:
            by_problem.setdefault(r["problem"], []).append(r)
    command = shlex.join(sys.argv[1:] if argv is None else argv)
    header = (f"# python -m experiments.stopping.production_ceiling {command}"
              f"   (commit {commit()}; {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC"
              f"{'; ' + args.note if args.note else ''})")
    out = [header, *(" ".join(p.split()) for p in __doc__.split("\n\n")[3:6]), ""]
    meets_all: dict[int, dict[tuple[str, str], int]] = {n: {} for n in RUNS}
    for name, runs_of_problem in by_problem.items():
        plain = [Seed(r) for r in runs_of_problem]
        picked: dict = {(1, 1): plain}
        seeds = [r["seed"] for r in runs_of_problem]
        out.append(f"## {name}: seeds {args.seeds} ({len(seeds)}), budget {plain[0].budget}")
        for runs in RUNS:
            rows = []
            for family, setting, rule, pick in settings(runs, plain[0].budget):
                values = ratios(runs_of_problem, rule, runs, pick, plain, picked)
                median, worst = float(np.median(values)), max(values)
                ok = median <= PRODUCTION_MEDIAN and worst <= PRODUCTION_WORST
                rows.append((family, setting, median, worst, ok))
                if ok:
                    meets_all[runs][(family, setting)] = meets_all[runs].get((family, setting), 0) + 1
            out.append(f"  N = {runs}:")
            for family in dict.fromkeys(r[0] for r in rows):
                mine = [r for r in rows if r[0] == family]
                low_worst = min(mine, key=lambda r: (r[3], r[2]))
                low_median = min(mine, key=lambda r: (r[2], r[3]))
                met = [r for r in mine if r[4]]
                out.append(f"    {family:8s} {len(mine):3d} settings: smallest worst {low_worst[3]:.3f} (median "
                           f"{low_worst[2]:.3f}; {low_worst[1]}); smallest median {low_median[2]:.3f} (worst "
                           f"{low_median[3]:.3f}; {low_median[1]}); meeting both: {len(met)}"
                           + (f", e.g. {met[0][1]}" if met else ""))
    out.append("")
    for runs in RUNS:
        full = [k for k, v in meets_all[runs].items() if v == len(by_problem)]
        out.append(f"one setting meeting both targets on all {len(by_problem)} problems at N = {runs}, fitted in "
                   f"hindsight: {len(full)}" + (f" ({'; '.join(f'{f} {s}' for f, s in full[:5])})" if full else ""))
    write_report(out, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
