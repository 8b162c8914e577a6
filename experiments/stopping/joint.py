"""Stop rules scored jointly per seed against true medians (issue 31, item 3).

Run from the repository root (trajectories: :mod:`experiments.stopping.trajectories`)::

    .venv/bin/python -m experiments.stopping.joint --design /tmp/h31s/tables-0-9.json,/tmp/h31s/synth-0-9.json \\
        --held-out /tmp/h31s/tables-10-29.json,/tmp/h31s/synth-10-29.json --out experiments/results/stopping-truth.txt

What is scored, per seed, is the configuration the study would recommend
at the stop (the GP's incumbent; before the first fit, the best measured
run's configuration), by its true median
(:mod:`experiments.harness.truth`: a table's per-configuration median, a
known-truth problem's exact value), as a fraction of the best true median.
RoTI(n) = (true median of the recommendation after n evaluations - the
default's) / tuning minutes (each evaluation ~2.1 s: 2 s launch + bytes /
measured bandwidth).  The hindsight-best stop of a seed: the n with the
highest RoTI among those whose recommendation is >= 85% of the best.  The
targets, per problem on held-out seeds 10-29:

1. >= 18 of 20 seeds stop with a recommendation >= 85% of the best, none below 70%;
2. median over seeds of RoTI / hindsight-best RoTI >= 80%, a seed below 85% counting 0;
3. that median >= 1.1x the same median of the smallest fixed budget meeting part 1 on seeds 0-9
   (9 of 10 at >= 85%, none below 70%).

Every median carries a bootstrap 95% interval over seeds (a ratio of medians: paired resampling).

``--production-runs``: the rule :class:`iobo.stopping.ProductionRuns` for N production runs is scored
by total time = tuning seconds + N x the I/O seconds of one run at the recommendation (bytes / its true
median bandwidth; the rest of a production run is the same whatever is recommended and would only
dilute the ratio towards 1), against the hindsight-optimal stop of the seed (the n minimising that
total) and against every fixed budget 3..budget (every study runs the default 3 times first; no stop comes earlier).  Targets: median ratio <= 1.1, worst <= 1.3, median
below every fixed budget's median.

Rule design used seeds 0-9 only (``--design``): :class:`iobo.stopping.ConfidentStop`'s probability
and minimum trials are the setting meeting part 1 on every design problem with the highest smallest
median of part 2 (the grid and the choice are printed).  :class:`iobo.stopping.ProductionRuns`'
calibration and minimum trials are chosen on ``--production-design`` (more design seeds: its scores
are ratios per seed, noisy over 10), never on the held-out seeds.
"""

from __future__ import annotations

import argparse
import ast
import functools
import json
import shlex
import sys
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from experiments.harness.cost import cost_minutes
from experiments.harness.runs import commit, show_seeds, write_report
from experiments.harness.truth import median_interval, truth_of
from experiments.stopping.trajectories import problem_and_bytes, progress_at
from iobo.stopping import (BASELINE_RUNS, PRODUCTION_MIN_TRIALS, SAVING_CALIBRATION, ConfidentStop, ProductionRuns,
                           StopRule)

FIRST_STOP = BASELINE_RUNS  # no study stops before the default's 3 runs (--default-repeats >= 3)
FLOOR = 0.85  # a seed's recommendation at the stop must be >= 85% of the best ...
HARD_FLOOR = 0.70  # ... on 18 of 20 seeds, and never below 70%
MIN_GOOD = 0.9  # 18 of 20 (9 of 10 on the design seeds)
ROTI_TARGET = 0.80  # median RoTI / hindsight-best RoTI
FIXED_FACTOR = 1.1  # ... and >= 1.1x the smallest fixed budget meeting part 1 on the design seeds
PRODUCTION = (10, 100, 1000)
PRODUCTION_MEDIAN, PRODUCTION_WORST = 1.1, 1.3
PICKS = ((1, 1), (2, 2), (3, 2), (3, 3), (4, 3))  # final picks tried: candidates x fresh runs (1 x 1: none)
GRID_P = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
GRID_MIN = (5, 6, 8, 10, 12, 15)
GRID_CALIBRATION = (0.25, 0.35, 0.5, 0.7, 1.0, 1.4, 2.0)  # ProductionRuns: the GP's expected saving x this
GRID_PRODUCTION_MIN = (4, 5, 6)


def recommended(run: dict, n: int) -> float:
    """True median (MB/s) of what the study recommends after evaluation ``n`` (1-based), re-measuring nothing."""
    if run["incumbent_truths"][n - 1] is not None:
        return run["incumbent_truths"][n - 1]
    measured = run["measured"][:n]
    return run["truths"][int(np.argmax(measured))]


@functools.cache
def _problem(spec: str):
    return problem_and_bytes(spec)[0]


def _config(key: str) -> dict:
    return {name: ast.literal_eval(value) for name, value in ast.literal_eval(key)}


def final_pick(run: dict, n: int, candidates: int, runs: int) -> tuple[float, float]:
    """Re-measure before stopping after evaluation ``n``: the ``candidates`` measured configurations with
    the best GP posterior means (before the first fit: those of the best measured runs), each measured ``runs`` times afresh (draws of the same
    noise, seeded by the seed and ``n``); the pick is the one with the highest median fresh run (the runs
    that made a configuration a candidate are left out: chosen for being high, they are biased high).
    Returns (the pick's true median MB/s, the minutes the extra runs cost).  candidates=1, runs=1: the
    incumbent as it is, no extra run."""
    if candidates == 1 and runs == 1:
        return recommended(run, n), 0.0
    problem = _problem(run["problem"])
    keys, measured = run["keys"][:n], run["measured"][:n]
    seen: dict[str, list[float]] = {}
    for k, v in zip(keys, measured):
        seen.setdefault(k, []).append(v)
    if run["top_keys"][n - 1] is not None:
        chosen = run["top_keys"][n - 1][:candidates]
    else:  # before the first fit: the configurations of the best measured runs
        chosen = sorted(seen, key=lambda k: -max(seen[k]))[:candidates]
    rng = np.random.default_rng([run["seed"], n, 11])
    extra = 0.0
    fresh: dict[str, list[float]] = {k: [] for k in chosen}
    for k in chosen:
        while len(fresh[k]) < runs:
            value = problem.measure(_config(k), rng)
            fresh[k].append(value)
            extra += cost_minutes(run["mb_per_run"] * 1e6, value)
    pick = max(chosen, key=lambda k: float(np.median(fresh[k])))
    return problem.truth(_config(pick)), extra


def stop_point(rule: StopRule, run: dict) -> int:
    """Evaluations after which ``rule`` stops (asked after every evaluation from the baseline's 3 default
    runs on); the budget if it never does."""
    budget = len(run["minutes"])
    return next((n for n in range(FIRST_STOP, budget + 1) if rule.should_stop(progress_at(run, n))), budget)


class Seed:
    """One trajectory's truth per stop, with :func:`final_pick` (``pick``: (candidates, runs)): the
    recommendation's fraction of the best, RoTI, and the hindsight-best RoTI (tuning minutes include the
    re-measuring)."""

    def __init__(self, run: dict, pick: tuple[int, int] = (1, 1)) -> None:
        self.run = run
        self.budget = len(run["minutes"])
        picks = [final_pick(run, n, *pick) for n in range(1, self.budget + 1)]
        self.minutes = np.array(run["minutes"]) + np.array([extra for _, extra in picks])
        self.truth = np.array([t for t, _ in picks])
        self.fraction = self.truth / run["best_truth"]
        self.roti = (self.truth - run["default_truth"]) / self.minutes
        ok = self.fraction >= FLOOR
        ok[:FIRST_STOP - 1] = False
        self.hindsight = float(self.roti[ok].max()) if ok.any() else None

    def score(self, n: int) -> tuple[float, float, float]:
        """(recommendation / best, RoTI / hindsight-best RoTI (0 below the floor), RoTI MB/s per minute)."""
        f = self.fraction[n - 1]
        share = self.roti[n - 1] / self.hindsight if f >= FLOOR and self.hindsight else 0.0
        return float(f), float(share), float(self.roti[n - 1])

    def total_s(self, n: int, runs: int) -> float:
        """Tuning seconds to evaluation ``n`` + ``runs`` production runs' I/O seconds at the recommendation."""
        return self.minutes[n - 1] * 60 + runs * self.run["mb_per_run"] / self.truth[n - 1]

    def optimal_total_s(self, runs: int) -> float:
        return min(self.total_s(n, runs) for n in range(FIRST_STOP, self.budget + 1))


def part_one(fractions, good_share: float = MIN_GOOD) -> bool:
    """>= 90% of seeds at >= 85% of the best and none below 70%."""
    fractions = np.asarray(fractions)
    return bool(np.mean(fractions >= FLOOR) >= good_share - 1e-9 and fractions.min() >= HARD_FLOOR)


def smallest_fixed_budget(seeds: list[Seed]) -> int | None:
    """The smallest fixed budget meeting part 1 on ``seeds`` (None: none within the budget)."""
    return next((b for b in range(FIRST_STOP, seeds[0].budget + 1) if part_one([s.fraction[b - 1] for s in seeds])), None)


def with_interval(values, seed: int = 0, fmt: str = "{:.1%}") -> str:
    med, low, high = median_interval(values, seed=seed)
    return f"{fmt.format(med)} [95% CI {fmt.format(low)}-{fmt.format(high)}]"


def ratio_of_medians(a, b, draws: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """median(a) / median(b) with a paired bootstrap 95% interval over seeds."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(len(a), size=(draws, len(a)))
    num, den = np.median(a[idx], axis=1), np.median(b[idx], axis=1)
    ratios = np.where(den > 0, num / np.where(den > 0, den, 1), np.inf)
    return float(np.median(a) / np.median(b)) if np.median(b) > 0 else float("inf"), *np.percentile(ratios, [2.5, 97.5])


def load(paths: str) -> list[dict]:
    return [r for p in paths.split(",") if p for r in json.loads(Path(p).read_text())]


def by_problem(runs: list[dict], pick: tuple[int, int] = (1, 1)) -> dict[str, list[Seed]]:
    out: dict[str, list[Seed]] = {}
    for r in sorted(runs, key=lambda r: (r["problem"], r["seed"])):
        out.setdefault(r["problem"], []).append(Seed(r, pick))
    return out


def design(runs: list[dict]) -> tuple[tuple[int, int], float, int, list[str]]:
    """The final pick (candidates, runs) and ConfidentStop's (probability, min_trials) chosen on the design
    seeds: the most design problems meeting part 1, then the highest smallest median of part 2."""
    rows = []
    for pick in PICKS:
        problems = by_problem(runs, pick)
        for p in GRID_P:
            for m in GRID_MIN:
                rule = ConfidentStop(p, m)
                met, medians = 0, []
                for seeds in problems.values():
                    scores = np.array([s.score(stop_point(rule, s.run)) for s in seeds])
                    met += part_one(scores[:, 0])
                    medians.append(float(np.median(scores[:, 1])))
                rows.append((met, min(medians), pick, p, m, medians))
    met, worst, pick, p, m, medians = max(rows, key=lambda r: (r[0], r[1]))
    names = list(by_problem(runs).keys())
    lines = [f"design (seeds {seed_ranges(runs)} of {', '.join(names)}): final pick (candidates x fresh runs) {PICKS} x "
             f"ConfidentStop probability {GRID_P} x min_trials {GRID_MIN} ({len(rows)} settings); chosen: the most "
             f"design problems meeting part 1, then the highest smallest median of part 2: pick {pick[0]} x "
             f"{pick[1]}, probability {p}, min_trials {m}: part 1 met on {met} of {len(names)} design problems; "
             f"median RoTI / hindsight-best " + ", ".join(f"{x:.1%}" for x in medians)]
    return pick, p, m, lines


def production_ratios(seeds: list[Seed], rule: StopRule, runs: int) -> tuple[list[int], list[float]]:
    """Per seed: where ``rule`` stops, and total time (tuning + ``runs`` production runs) / the hindsight-optimal."""
    stops = [stop_point(rule, s.run) for s in seeds]
    return stops, [s.total_s(n, runs) / s.optimal_total_s(runs) for s, n in zip(seeds, stops)]


def production_design(runs: list[dict]) -> tuple[float, int, list[str]]:
    """ProductionRuns' (calibration, min_trials) chosen on the design seeds: the smallest largest median of
    total time / hindsight-optimal over the design problems and N in :data:`PRODUCTION`, then the smallest
    largest worst seed."""
    problems = by_problem(runs)
    rows = []
    for c in GRID_CALIBRATION:
        for m in GRID_PRODUCTION_MIN:
            ratios = [production_ratios(seeds, ProductionRuns(n, m, c), n)[1]
                      for seeds in problems.values() for n in PRODUCTION]
            rows.append((max(float(np.median(r)) for r in ratios), max(max(r) for r in ratios), c, m))
    median, worst, c, m = min(rows)
    lines = [f"--production-runs design (seeds {seed_ranges(runs)} of {', '.join(problems)}): calibration of "
             f"the GP's expected saving {GRID_CALIBRATION} x min_trials {GRID_PRODUCTION_MIN} "
             f"({len(rows)} settings); chosen: the smallest largest median of total time / hindsight-optimal over "
             f"the problems and N = {', '.join(map(str, PRODUCTION))}, then the smallest worst: calibration {c}, "
             f"min_trials {m}: largest median {median:.3f}, worst {worst:.3f} (iobo ships calibration "
             f"{SAVING_CALIBRATION}, min_trials {PRODUCTION_MIN_TRIALS})"]
    return c, m, lines


def seed_ranges(runs: list[dict]) -> str:
    """The seeds of ``runs`` as ranges, e.g. 0-9, 30-59."""
    return show_seeds(sorted({r["seed"] for r in runs}))


def calibration_lines(problems: dict[str, list[Seed]]) -> list[str]:
    """How sure the GP was at stops below 85% (per seed, the highest), old signal and new."""
    lines = []
    for name, seeds in problems.items():
        new, old, hit, said = [], [], [], []
        for s in seeds:
            bad = [n for n in range(5, s.budget + 1) if s.fraction[n - 1] < FLOOR]
            if bad:
                new.append(max(s.run["p_recommended"][n - 1] for n in bad))
                if s.run["p_any"][bad[0] - 1] is not None:
                    old.append(max(s.run["p_any"][n - 1] for n in bad))
            for n in range(5, s.budget + 1):
                said.append(s.run["p_recommended"][n - 1])
                hit.append(s.fraction[n - 1] >= FLOOR)
        said, hit = np.array(said), np.array(hit)
        bins = [(0, 0.3), (0.3, 0.5), (0.5, 0.7), (0.7, 0.9), (0.9, 1.01)]
        rel = "; ".join(f"said {lo:.1f}-{min(hi, 1):.1f}: {hit[(said >= lo) & (said < hi)].mean():.0%} of "
                        f"{((said >= lo) & (said < hi)).sum()}" for lo, hi in bins if ((said >= lo) & (said < hi)).any())
        lines.append(f"  {name}: highest probability at a stop below 85%, median over seeds: recommendation "
                     f"{np.median(new) if new else float('nan'):.2f} (>= 0.9 on {sum(p >= 0.9 for p in new)} seeds)"
                     + (f", any measured (the old signal) {np.median(old):.2f} (>= 0.9 on {sum(p >= 0.9 for p in old)})"
                        if old else "") + f"; reliability (all evaluations >= 5): {rel}")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--design", required=True, help="trajectory JSON files of seeds 0-9 (comma-separated)")
    parser.add_argument("--production-design", help="trajectory JSON files for --production-runs' design "
                        "(default: --design's); never the held-out seeds")
    parser.add_argument("--held-out", required=True, help="trajectory JSON files of seeds 10-29")
    parser.add_argument("--out", help="also write the report here")
    parser.add_argument("--note", default="", help="appended to the header (e.g. where trajectories were computed)")
    args = parser.parse_args(argv)
    design_runs, test_runs = load(args.design), load(args.held_out)
    pick, p, m, lines = design(design_runs)
    calibration, production_min, production_lines = production_design(load(args.production_design or args.design))
    lines += production_lines
    fit, test = by_problem(design_runs, pick), by_problem(test_runs, pick)
    plain = by_problem(test_runs)  # no re-measuring: the production-runs scoring and the calibration
    rule = ConfidentStop(p, m)
    header = (f"# python -m experiments.stopping.joint {shlex.join(sys.argv[1:] if argv is None else argv)}   "
              f"(commit {commit()}; {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC{'; ' + args.note if args.note else ''})")
    paragraphs = [" ".join(part.split()) for part in __doc__.split("\n\n")]
    out = [header, *paragraphs[3:7], *lines, ""]
    out.append("the GP's probability that its recommendation is within 85% of the best (the miscalibration fix):")
    out += calibration_lines(plain)
    for name, seeds in test.items():
        budget_b = smallest_fixed_budget(fit[name]) if name in fit else None
        stops = [stop_point(rule, s.run) for s in seeds]
        scores = np.array([s.score(n) for s, n in zip(seeds, stops)])
        good = int(np.sum(scores[:, 0] >= FLOOR))
        one = part_one(scores[:, 0])
        two = float(np.median(scores[:, 1])) >= ROTI_TARGET
        out.append(f"\n## {name}: seeds {seeds[0].run['seed']}-{seeds[-1].run['seed']}, budget {seeds[0].budget}; "
                   f"default {seeds[0].run['default_truth']:.0f} MB/s, best {seeds[0].run['best_truth']:.0f} MB/s "
                   f"(true medians)")
        counts = {b: int(sum(s.fraction[b - 1] >= FLOOR for s in seeds)) for b in range(FIRST_STOP, seeds[0].budget + 1)}
        most = max(counts, key=counts.get)
        out.append(f"what the recommendation allows any stop rule: seeds >= 85% of the best at a fixed budget: at most "
                   f"{counts[most]} of {len(seeds)} (at {most} evaluations; {counts[seeds[0].budget]} at "
                   f"{seeds[0].budget}); seeds with no stop at >= 85% at all: {sum(s.hindsight is None for s in seeds)}")
        known = truth_of(_problem(name))
        in_s = int(np.sum(scores[:, 0] * seeds[0].run["best_truth"] >= known.threshold))
        out.append(f"truth: {known.describe()}; 85% of the best is {'inside' if FLOOR * known.best >= known.threshold else 'outside'}"
                   f" S; recommendations at the stop in S: {in_s} of {len(seeds)}")
        out.append(f"ConfidentStop(probability={p}, min_trials={m}) with a final pick of {pick[0]} x {pick[1]} fresh "
                   f"runs: stops at evaluation {with_interval(stops, fmt='{:.1f}')}, "
                   f"minutes {with_interval([seeds[i].run['minutes'][n - 1] for i, n in enumerate(stops)], fmt='{:.2f}')}")
        out.append(f"  part 1 {'MET' if one else 'MISSED'}: {good} of {len(seeds)} seeds >= 85% of the best (needs "
                   f">= {int(np.ceil(MIN_GOOD * len(seeds)))}), worst {scores[:, 0].min():.1%} (needs >= 70%); "
                   f"recommendation {with_interval(scores[:, 0])} of the best")
        out.append(f"  part 2 {'MET' if two else 'MISSED'}: median RoTI / hindsight-best {with_interval(scores[:, 1])} "
                   f"(needs >= 80%)")
        if budget_b is None:
            out.append(f"  part 3 UNDEFINED: {'no fixed budget meets part 1 on seeds 0-9 within the budget' if name in fit else 'no design seeds'}")
        else:
            fixed = np.array([s.score(budget_b) for s in seeds])
            r, lo, hi = ratio_of_medians(scores[:, 1], fixed[:, 1])
            out.append(f"  part 3 {'MET' if r >= FIXED_FACTOR else 'MISSED'}: smallest fixed budget meeting part 1 on "
                       f"seeds 0-9: {budget_b}; here it has {int(np.sum(fixed[:, 0] >= FLOOR))} of {len(seeds)} "
                       f">= 85%, worst {fixed[:, 0].min():.1%}, median RoTI / hindsight-best {with_interval(fixed[:, 1])}; "
                       f"ratio of medians {r:.2f}x [95% CI {lo:.2f}-{hi:.2f}] (needs >= {FIXED_FACTOR}x)")
        out.append(f"  jointly: {'MET' if one and two and budget_b is not None and r >= FIXED_FACTOR else 'MISSED'}")
        for runs in PRODUCTION:
            seeds = plain[name]
            stops_n, ratios = production_ratios(seeds, ProductionRuns(runs, production_min, calibration), runs)
            fixed_medians = {b: float(np.median([s.total_s(b, runs) / s.optimal_total_s(runs) for s in seeds]))
                             for b in range(FIRST_STOP, seeds[0].budget + 1)}
            best_b = min(fixed_medians, key=fixed_medians.get)
            med = float(np.median(ratios))
            met = med <= PRODUCTION_MEDIAN and max(ratios) <= PRODUCTION_WORST
            beats = med < fixed_medians[best_b]
            ties = med <= fixed_medians[best_b]
            out.append(f"  --production-runs {runs}: stops at {with_interval(stops_n, fmt='{:.1f}')}; total time / "
                       f"hindsight-optimal {with_interval(ratios, fmt='{:.3f}')}, worst {max(ratios):.3f} "
                       f"({'MET' if met else 'MISSED'}: median <= {PRODUCTION_MEDIAN}, worst <= {PRODUCTION_WORST}); "
                       f"best fixed budget {best_b} median {fixed_medians[best_b]:.3f}: "
                       f"{'better than every fixed budget' if beats else 'ties the best fixed budget' if ties else 'NOT better than every fixed budget'}")
    write_report(out, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
