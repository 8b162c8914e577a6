"""Why no stop rule meets issue 16's target on the recorded tables: the evidence, per table.

Run from the repository root (after or instead of the bench; ``--runs`` shares its trajectories)::

    .venv/bin/python -m experiments.stopping.bound --seeds 20 --runs /tmp/stopping-runs.json

The target (see :mod:`experiments.stopping.bench`): the median over seeds
of RoTI / hindsight-best RoTI >= 95%, and every seed stopping at >= 85% of
the best.  On one seed, the stops meeting both parts form its *window*:
the evaluations n with true best so far >= 85% of the table's best and
RoTI(n) >= 95% of the hindsight-best RoTI.  The median needs at least half
the seeds stopped inside their windows, and the worst seed no seed stopped
before its first evaluation at >= 85% (a *forbidden* stop).  Printed:

1. the windows: how many are a single evaluation (the rule must stop on
   exactly that evaluation), and how often the evaluation that first
   reached 85% of the best did not even raise the measured best;
2. a bound for every rule monotone in what it observes (one that stops in
   a state stops in every state showing at least as much evidence of
   saturation), over the signals: evaluations, evaluations since the
   measured best last rose, measured best / baseline, RoTI now / RoTI two
   evaluations ago (lower: more evidence), and with ``GP``: the GP's
   expected gain / incumbent (lower) and its posterior probability that a
   configuration within 85% of the best was measured
   (:func:`experiments.stopping.bench.found_probability`).  A window stop
   that a forbidden stop (any seed's) shows at least as much evidence
   against cannot be taken; nor one that an earlier stop of a chosen seed
   does.  Printed: the largest set of seeds a monotone rule can stop in
   their windows together (an exact search); below half the seeds, no such
   rule meets the median part without breaking the worst-seed part; and
   how sure the GP was, at forbidden stops, that 85% was reached;
3. the frontier of 884 rules (evaluation floors x RoTI past peak / new
   measured best / flat curve x GP thresholds) with settings chosen *on the
   reported seeds themselves* (optimistic): the best median among rules
   keeping every seed >= 85%, and the best worst seed among rules whose
   median reaches 95%; and the five rules with the least summed relative
   shortfall from the target's two parts over the tables (on seeds 0-9:
   how the bench's candidate rule is chosen).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np

from experiments.stopping.bench import DEFAULT_RUNS, TARGET_ROTI, TARGET_WORST_BW, load_runs, progress_at, score
from iobo.measure import roti
from iobo.stopping import RoTIPastPeak


class Seed:
    """One trajectory with what the bound needs: per evaluation (1-based) its score and observed signals."""

    def __init__(self, run: dict) -> None:
        self.run = run
        self.budget = len(run["minutes"])
        self.evals = range(DEFAULT_RUNS + 1, self.budget + 1)
        self.scores = {n: score(run, n) for n in range(1, self.budget + 1)}
        self.progress = {n: progress_at(run, n) for n in range(1, self.budget + 1)}
        best = np.maximum.accumulate(run["measured"])
        self.raised = [n == 1 or best[n - 1] > best[n - 2] for n in range(1, self.budget + 1)]
        self.forbidden = [n for n in self.evals if self.scores[n][2] < TARGET_WORST_BW]
        self.window = [n for n in self.evals
                       if self.scores[n][2] >= TARGET_WORST_BW and self.scores[n][1] >= TARGET_ROTI]
        self.first = next((n for n in range(1, self.budget + 1) if self.scores[n][2] >= TARGET_WORST_BW), None)

    def signals(self, n: int, gp: bool) -> np.ndarray:
        """Observed evidence of saturation after evaluation ``n``, larger = more (see the module doc)."""
        p = self.progress[n]
        since = n - max(k for k in range(1, n + 1) if self.raised[k - 1])
        before = roti(p.best_mb_per_s[-3], p.default_mb_per_s, p.minutes[-3])
        falling = -p.roti / before if before > 0 and p.roti > 0 else -np.inf  # no gain: no evidence
        out = [n, since, p.best_mb_per_s[-1] / p.default_mb_per_s, falling]
        if gp:
            gain, incumbent, found = self.run["gains"][n - 1], self.run["incumbents"][n - 1], self.run["found"][n - 1]
            out += [-np.inf, -np.inf] if gain is None else [-gain / incumbent, found]
        return np.array(out)


def largest_window_set(seeds: list[Seed], gp: bool) -> list[int]:
    """The most seeds a rule monotone in :meth:`Seed.signals` can stop inside their windows together
    without stopping any seed at a forbidden evaluation (exact search)."""
    forbidden = np.array([s.signals(n, gp) for s in seeds for n in s.forbidden])
    dominated = lambda f, states: len(states) > 0 and bool(np.any(np.all(states >= f, axis=1)))  # noqa: E731
    options = {}
    for s in seeds:
        fine = [f for f in (s.signals(n, gp) for n in s.window) if not dominated(f, forbidden)]
        if fine:
            before = [s.signals(n, gp) for n in s.evals if s.first is not None and s.first <= n < min(s.window)]
            options[s.run["seed"]] = (fine, np.array(before))
    order = list(options)
    best: list[int] = []

    def search(i: int, chosen: list[tuple[int, np.ndarray]]) -> None:
        nonlocal best
        if len(chosen) + len(order) - i <= len(best):
            return
        if i == len(order):
            best = [seed for seed, _ in chosen]
            return
        seed = order[i]
        for f in options[seed][0]:
            trial = chosen + [(seed, f)]
            if not any(dominated(g, options[other][1]) for _, g in trial for other, _ in trial):
                search(i + 1, trial)
        search(i + 1, chosen)

    search(0, [])
    return best


def rule_family() -> dict:
    """name -> (seed, n) -> stop?: evaluation floor x curve test x GP threshold."""
    curve = {
        "any": lambda s, n: True,
        "RoTI past peak": lambda s, n: RoTIPastPeak(2, 1).should_stop(s.progress[n]),
        "new measured best": lambda s, n: s.raised[n - 1],
        "best flat for 3": lambda s, n: not any(s.raised[n - 3:n]),
    }
    gp = {"-": lambda s, n: True}
    for t in (0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95):
        gp[f"found >= {t}"] = lambda s, n, t=t: s.run["found"][n - 1] is not None and s.run["found"][n - 1] >= t
    for t in (0.01, 0.02, 0.03, 0.05, 0.1):
        gp[f"gain <= {t:.0%}"] = lambda s, n, t=t: (s.run["gains"][n - 1] is not None
                                                   and s.run["gains"][n - 1] <= t * s.run["incumbents"][n - 1])
    family = {}
    for (cn, c), (gn, g), floor in itertools.product(curve.items(), gp.items(), range(4, 21)):
        family[f"n >= {floor}, {cn}, {gn}"] = lambda s, n, c=c, g=g, floor=floor: n >= floor and c(s, n) and g(s, n)
    return family


def family_scores(seeds: list[Seed]) -> dict[str, tuple[float, float]]:
    """rule name -> (median RoTI / hindsight-best, worst BW / best) of every :func:`rule_family` rule."""
    out = {}
    for name, rule in rule_family().items():
        stops = [next((n for n in s.evals if rule(s, n)), s.budget) for s in seeds]
        scores = np.array([s.scores[n] for s, n in zip(seeds, stops)])
        out[name] = (float(np.median(scores[:, 1])), float(scores[:, 2].min()))
    return out


def shortfall(median: float, worst: float) -> float:
    """Relative shortfall from the target's two parts, summed (0 when both are met)."""
    return max(0.0, 1 - median / TARGET_ROTI) + max(0.0, 1 - worst / TARGET_WORST_BW)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--first-seed", type=int, default=10)
    parser.add_argument("--budget", type=int, default=40)
    parser.add_argument("--tables", default="vpic-tmpfs-3pass,ior-tmpfs-3pass")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--runs", type=Path, help="the bench's trajectory cache (JSON), read or written")
    args = parser.parse_args(argv)
    tables = args.tables.split(",")
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    runs = load_runs(tables, seeds, args.budget, args.workers, args.runs)
    need = len(seeds) // 2
    family = {}
    print(f"seeds {seeds.start}-{seeds.stop - 1}; budget {args.budget}; the median part needs >= {need} of "
          f"{len(seeds)} seeds stopped inside their windows (RoTI >= {TARGET_ROTI:.0%} of the hindsight-best at "
          f">= {TARGET_WORST_BW:.0%} of the best)")
    for table in tables:
        mine = [Seed(r) for r in runs if r["table"] == table]
        widths = [len(s.window) for s in mine]
        hidden = sum(1 for s in mine if s.first is not None and not s.raised[s.first - 1])
        print(f"\n## {table}")
        print(f"windows: width {np.median(widths):.0f} evaluations on median; {widths.count(1)} of {len(mine)} "
              f"are a single evaluation; first evaluation at >= 85% of the best: "
              f"{np.median([s.first for s in mine]):.0f} [{min(s.first for s in mine)}-{max(s.first for s in mine)}];"
              f" on {hidden} of {len(mine)} seeds it did not raise the measured best")
        sure = [max((s.run["found"][n - 1] or 0.0) for n in s.forbidden) for s in mine if s.forbidden]
        at_window = [s.run["found"][min(s.window) - 1] or 0.0 for s in mine if s.window]
        print(f"the GP's probability that a configuration within 85% of the best was measured: highest at a "
              f"forbidden stop {np.median(sure):.2f} on median over seeds (>= 0.9 on {sum(p >= 0.9 for p in sure)} "
              f"seeds), at the first window stop {np.median(at_window):.2f} on median")
        for gp in (False, True):
            chosen = largest_window_set(mine, gp)
            print(f"monotone rules on the measured curve{' and the GP' if gp else ''}: at most {len(chosen)} seeds "
                  f"in their windows together (seeds {chosen or '-'}): "
                  f"{'the target is out of reach' if len(chosen) < need else 'not excluded by this bound'}")
        family[table] = family_scores(mine)
        rows = [(m, w, name) for name, (m, w) in family[table].items()]
        safe = max((r for r in rows if r[1] >= TARGET_WORST_BW), default=None)
        sharp = max((r for r in rows if r[0] >= TARGET_ROTI), key=lambda r: r[1], default=None)
        print(f"rule family ({len(rows)} rules), settings fitted on these seeds: every seed >= 85%: best median "
              f"{f'{safe[0]:.1%} ({safe[2]})' if safe else 'none'}; median >= 95%: best worst seed "
              f"{f'{sharp[1]:.1%} ({sharp[2]})' if sharp else 'none'}")
    total = {name: sum(shortfall(*family[t][name]) for t in tables) for name in family[tables[0]]}
    ranked = sorted(total, key=total.get)
    print(f"\nleast summed shortfall from the target over the tables (how the candidate is chosen on seeds 0-9):")
    for name in ranked[:5]:
        print(f"  {total[name]:.3f}  {name}: " + "; ".join(
            f"{t} median {family[t][name][0]:.1%}, worst {family[t][name][1]:.1%}" for t in tables))
    return 0


if __name__ == "__main__":
    sys.exit(main())
