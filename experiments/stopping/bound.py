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
   reached 85% of the best did not even raise the measured best; how sure
   the GP was that 85% had been reached, at forbidden stops and where the
   windows open;
2. whether any rule monotone in what it observes meets the target: one
   that stops in a state stops in every state showing at least as much
   evidence of saturation, over the signals: evaluations, evaluations
   since the measured best last rose, measured best / baseline, RoTI now /
   RoTI two evaluations ago (lower: more evidence), and with the GP: its
   expected gain / incumbent (lower) and its posterior probability that a
   configuration within 85% of the best was measured
   (:func:`experiments.stopping.bench.found_probability`).  An exact
   search (:func:`monotone_stops`) over all such rules, their stop regions
   fitted to the reported seeds in hindsight: when none meets the target,
   no rule of the class can; with ``--fit-seeds``, the rule fitted on other
   seeds applied to the reported ones;
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


def monotone_stops(seeds: list[Seed], gp: bool, max_nodes: int = 5_000_000) -> list[int] | None | str:
    """Per seed the stop of a rule monotone in :meth:`Seed.signals` that meets the target on ``seeds``
    (its stop region fitted to them, in hindsight); None when no such rule exists; "undecided" when
    the exact search gave up after ``max_nodes`` nodes.

    Such a rule is its stop region U, a set closed upwards (a state with at
    least as much evidence as one in U is in U); a seed stops at its first
    state in U, else at the budget.  U can be taken to be generated by the
    stops themselves, so the search assigns each seed a stop such that no
    other seed's stop makes it enter U earlier, no seed enters U at a
    forbidden evaluation, and the median reaches the target.
    """
    budget = seeds[0].budget
    start = seeds[0].evals.start
    signals = [np.array([s.signals(n, gp) for n in s.evals]) for s in seeds]
    first = np.array([s.first or budget + 1 for s in seeds])

    def entry(x: np.ndarray) -> np.ndarray:  # per seed: its first evaluation in the up-set of x
        hits = [np.all(f >= x, axis=1) for f in signals]
        return np.array([start + int(np.argmax(h)) if h.any() else budget + 1 for h in hits])

    options = []  # per seed: (stop, RoTI / hindsight-best, entry of every seed into the stop's up-set)
    for i, s in enumerate(seeds):
        mine = [(n, s.scores[n][1], entry(signals[i][n - start])) for n in s.evals if n not in s.forbidden]
        options.append(sorted([o for o in mine if np.all(o[2] >= first)], key=lambda o: -o[1]))
    need = len(seeds) // 2
    nodes = 0

    def search(i: int, stops: list[tuple[int, float]], limit: np.ndarray) -> list[int] | None:
        nonlocal nodes
        nodes += 1
        if nodes > max_nodes:
            raise TimeoutError
        reachable = sum(r >= TARGET_ROTI for _, r in stops) + sum(
            any(n <= limit[j] and r >= TARGET_ROTI for n, r, _ in options[j]) for j in range(i, len(seeds)))
        if reachable < need:
            return None
        if i == len(seeds):
            return [n for n, _ in stops] if np.median([r for _, r in stops]) >= TARGET_ROTI else None
        for n, r, enters in options[i]:
            tighter = np.minimum(limit, enters)
            if n <= limit[i] and all(tighter[j] >= stops[j][0] for j in range(i)):
                found = search(i + 1, stops + [(n, r)], tighter)
                if found:
                    return found
        if limit[i] > budget:  # never in U: stops at the budget
            return search(i + 1, stops + [(budget, seeds[i].scores[budget][1])], limit)
        return None

    try:
        return search(0, [], np.full(len(seeds), budget + 1))
    except TimeoutError:
        return "undecided"


def stop_region(seeds: list[Seed], stops: list[int], gp: bool) -> np.ndarray:
    """The stop region of a :func:`monotone_stops` rule: the signals at its stops before the budget (the
    region is every state with at least as much evidence as one of them)."""
    return np.array([s.signals(n, gp) for s, n in zip(seeds, stops) if n < s.budget])


def stop_in_region(seed: Seed, region: np.ndarray, gp: bool) -> int:
    """Where a seed stops under the rule of stop region ``region`` (its first state in it, else the budget)."""
    inside = (n for n in seed.evals if len(region) and np.any(np.all(seed.signals(n, gp) >= region, axis=1)))
    return next(inside, seed.budget)


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
    parser.add_argument("--fit-seeds", type=int, default=0, help="also fit the monotone rule on this many seeds "
                        "from --fit-first-seed and apply it to the reported ones (a held-out test of the class)")
    parser.add_argument("--fit-first-seed", type=int, default=0)
    parser.add_argument("--fit-runs", type=Path, help="trajectory cache of the fit seeds")
    args = parser.parse_args(argv)
    tables = args.tables.split(",")
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    runs = load_runs(tables, seeds, args.budget, args.workers, args.runs)
    fit = range(args.fit_first_seed, args.fit_first_seed + args.fit_seeds)
    fit_runs = load_runs(tables, fit, args.budget, args.workers, args.fit_runs) if args.fit_seeds else []
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
            stops = monotone_stops(mine, gp)
            what = f"monotone rules on the measured curve{' and the GP' if gp else ''}:"
            if stops is None:
                print(f"{what} none meets the target (exact search): out of reach")
            elif stops == "undecided":
                print(f"{what} undecided (the exact search gave up)")
            else:
                scores = np.array([s.scores[n] for s, n in zip(mine, stops)])
                print(f"{what} one meets it with its stop region fitted to these seeds in hindsight (median "
                      f"{np.median(scores[:, 1]):.1%}, worst {scores[:, 2].min():.1%}): not excluded")
            if fit_runs:
                fitted = [Seed(r) for r in fit_runs if r["table"] == table]
                fit_stops = monotone_stops(fitted, gp)
                if isinstance(fit_stops, list):
                    region = stop_region(fitted, fit_stops, gp)
                    scores = np.array([s.scores[stop_in_region(s, region, gp)] for s in mine])
                    print(f"  the monotone rule fitted on seeds {fit.start}-{fit.stop - 1} (where it meets the target)"
                          f" applied here: median {np.median(scores[:, 1]):.1%}, worst {scores[:, 2].min():.1%}")
                else:
                    verdict = "none meets the target" if fit_stops is None else "undecided"
                    print(f"  on seeds {fit.start}-{fit.stop - 1}: {verdict}")
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
