"""Do iobo's picks survive a re-measurement?  Its picks at 50 evaluations and S, run again for real.

Issue 31 item 2 scores iobo's recommendation after 50 evaluations of a
recorded table by whether it is a member of S, the configurations whose
median of 5-6 recorded runs is within one standard error of the best median
(:mod:`experiments.harness.truth`).  On ``ior-tmpfs`` and ``vpic-tmpfs-1r``
the pick is in S on few seeds.  This asks what the user would ask: when the
picks and S are measured again, in new jobs on the same machine, is S
better than the picks?

1. **Picks.** iobo's GP sampler replays each table as the bench does
   (:func:`experiments.harness.optimizers.run_optuna`, same seeds, same
   measurement stream, ``--iobo`` as the bench's): per seed, its
   recommendation after ``--budget`` evaluations (the GP incumbent) and the
   configuration of its best single run (what ``iobo best`` gave before the
   GP's pick was recorded).
2. **Re-measurement.** The configurations to measure per table: S, every
   distinct pick, the ``--top`` best by recorded median, and the default.
   Each is measured in ``--passes`` jobs of ``--repeats`` runs, with the real
   kernel and the table's workload (:func:`experiments.harness.recording.measure`);
   every pass runs all tables' jobs in a new random order, so a slow spell of
   the machine falls on configurations of every kind.  The runs are written
   to ``--runs`` (CSV) and can be scored again with ``--score-only``.
3. **Score.** Per configuration, the re-measured median with its bootstrap
   95% interval (jobs resampled, then the runs within each).  Over the
   re-measured set, S is recomputed by the same rule (``R-S``: within one
   standard error of the best re-measured median; the set holds the recorded
   top, so its best is the best a re-measurement of the grid could find
   unless a configuration outside the set would top it).  Then, per table:
   how many of S are in R-S; seeds whose pick is in S and in R-S (Wilson
   intervals); the pick's re-measured median as a share of the best
   re-measured median (median over seeds, with its interval: it spans the
   seeds' picks, not the re-measurement's noise, which each configuration's
   own interval shows), split by
   whether the pick was in S; and how often a pick outside S re-measures at
   least as high as a member of S (their bootstrap medians against each
   other; 50% = as good as S); and the pick's re-measured median over the
   default's (median over seeds, with its interval).  ``--compare TABLE:OTHER`` also sets the
   re-measured configurations beside another recorded table of the same
   workload (the ``-quiet`` tables were recorded on a quiet machine, the
   others under load averages of 5-14 on the 2 cores, at the recordings' end).

Run from the repository root (80 seeds and two tables: the replays take about
4 minutes on 2 cores, then each job about 1 s, 48 configurations a pass; the
re-measurement wants a machine running nothing else)::

    .venv/bin/python -m experiments.sampler.pick_remeasure --seed-list 10-29,60-119 --jobs 2 \\
        --iobo '{"identify_from": 30}' --passes 5 --out experiments/results/sampler-pick-remeasure.txt
    # a second re-measurement of the same picks, then both scored as one
    .venv/bin/python -m experiments.sampler.pick_remeasure --reuse-picks --order-seed 100 --passes 8 \\
        --runs runs-2.csv --iobo '{"identify_from": 30}'
    .venv/bin/python -m experiments.sampler.pick_remeasure --score-only --runs runs.csv runs-2.csv ...
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core per replay
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import ast  # noqa: E402
import csv  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import shlex  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402

from experiments.harness import TABLES_DIR  # noqa: E402
from experiments.harness.problems import Problem, config_key, load_table  # noqa: E402
from experiments.harness.recording import SWEEPS, measure  # noqa: E402
from experiments.harness.runs import commit, pool_map, quiet_worker, seed_list, show_seeds, write_report  # noqa: E402
from experiments.harness.truth import (  # noqa: E402
    DRAWS,
    median_interval,
    one_standard_error,
    resampled_medians,
    truth_of,
)
from experiments.sampler.bench import show_share  # noqa: E402

TABLES = ("ior-tmpfs", "vpic-tmpfs-1r")  # the two tables where item 2's pick misses clearly (pooled 80 seeds)


def replay(args: tuple[str, int, int, dict]) -> tuple[str, int, dict, dict]:
    """One seed of iobo's GP on a table: ``(table, seed, pick at budget, best single run's configuration)``."""
    from experiments.harness.optimizers import run_optuna
    from iobo.samplers import GPSampler

    table, seed, budget, iobo = args
    quiet_worker()
    problem = load_table(TABLES_DIR / f"{table}.csv")
    sampler = GPSampler(seed=seed, **iobo)
    taken: dict[str, dict] = {}

    def recommend(study):
        taken["pick"], taken["best_run"] = sampler.incumbent(study)[0], dict(study.best_trial.params)
        return taken["pick"]

    run_optuna(problem, sampler, budget, seed, recommend=recommend, recommend_at=lambda n: False)
    return table, seed, problem.grid.active(taken["pick"]), problem.grid.active(taken["best_run"])


def sweep_of(table: str) -> dict:
    """The workload a table was recorded with (:data:`SWEEPS`), checked against its sidecar."""
    recorded = json.loads((TABLES_DIR / f"{table}.json").read_text())
    name = recorded.get("grid_of", recorded["table"])
    sweep = SWEEPS.get(name)
    if sweep is None or any(sweep[k] != recorded[k] for k in ("kernel", "ranks", "options", "workdir")):
        raise SystemExit(f"table {table!r}: no workload in experiments.harness.recording.SWEEPS matches its sidecar "
                         f"(looked for {name!r}); re-measuring it would measure something else")
    return sweep


def candidates(problem: Problem, picks: list[dict], top: int) -> dict[tuple, dict]:
    """key -> configuration of everything to re-measure: S, the picks, the ``top`` best recorded, the default."""
    truth = truth_of(problem)
    configs = {config_key(c): c for c in problem.grid.configurations()}
    order = sorted(range(len(truth.keys)), key=lambda i: -truth.medians[i])
    chosen = [truth.keys[i] for i in order[:top]] + sorted(truth.members)
    chosen += [config_key(c) for c in picks] + [default_key(problem)]
    return {k: configs[k] for k in dict.fromkeys(chosen)}


def remeasure(plan: dict[str, dict[tuple, dict]], passes: int, repeats: int, path: Path, seed: int) -> None:
    """Measure every (table, configuration) of ``plan`` in ``passes`` jobs of ``repeats`` runs, each pass in a new
    random order across tables; write the runs to ``path`` (CSV: table, pass, key (:func:`config_key`, as JSON),
    run, mb_per_s)."""
    jobs = [(table, key) for table, configs in plan.items() for key in configs]
    sweeps = {table: sweep_of(table) for table in plan}
    for sweep in sweeps.values():
        Path(sweep["workdir"]).mkdir(parents=True, exist_ok=True)
    started = time.time()
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["table", "pass", "key", "run", "mb_per_s"])
        done = 0
        for p in range(passes):
            order = list(jobs)
            random.Random(seed + p).shuffle(order)
            for table, key in order:
                config = plan[table][key]
                try:
                    runs = measure(sweeps[table], config, repeats)
                except Exception as exc:  # a failed job is left out; the others go on
                    print(f"FAILED {table} {config}: {exc}", file=sys.stderr)
                    runs = []
                for i, mb_per_s in enumerate(runs):
                    writer.writerow([table, p, json.dumps(key), i, f"{mb_per_s:.1f}"])
                handle.flush()
                done += 1
                print(f"[{done}/{len(jobs) * passes}, {time.time() - started:.0f} s] {table} pass {p}: "
                      f"{np.median(runs) if runs else float('nan'):8.0f} MB/s  {config}", file=sys.stderr, flush=True)


def read_runs(paths: list[Path]) -> dict[str, dict[tuple, list[np.ndarray]]]:
    """table -> key -> one array of MB/s per job (a pass of one file), from ``--runs`` CSVs."""
    jobs: dict[str, dict[tuple, dict[tuple[int, int], list[float]]]] = {}
    for number, path in enumerate(paths):
        with path.open(newline="") as handle:
            for row in csv.DictReader(handle):
                key = tuple(tuple(pair) for pair in json.loads(row["key"]))
                job = (number, int(row["pass"]))
                jobs.setdefault(row["table"], {}).setdefault(key, {}).setdefault(job, []).append(float(row["mb_per_s"]))
    return {table: {key: [np.array(runs) for _, runs in sorted(per_job.items())] for key, per_job in keys.items()}
            for table, keys in jobs.items()}


def default_key(problem: Problem) -> tuple:
    """The :func:`config_key` of the problem's system-default configuration."""
    return config_key(problem.grid.active(problem.default))


def show_config(key: tuple, default: tuple) -> str:
    """A configuration as ``name=value`` for the parameters that differ from the ``default`` key (short)."""
    differs = set(key) - set(default)
    return " ".join(f"{n}={ast.literal_eval(v)}" for n, v in key if (n, v) in differs) or "(default)"


def score(table: str, picks: dict[int, tuple], best_runs: dict[int, tuple], runs: dict[tuple, list[np.ndarray]],
          top: int, budget: int) -> list[str]:
    """The report's lines for one table: picks and best_runs are seed -> configuration key after ``budget``
    evaluations; runs is key -> re-measured MB/s, one array per job."""
    problem = load_table(TABLES_DIR / f"{table}.csv")
    truth = truth_of(problem)
    recorded = dict(zip(truth.keys, truth.medians))
    by_recorded = sorted(truth.keys, key=lambda k: -recorded[k])
    rank = {k: r for r, k in enumerate(by_recorded, 1)}
    rng = np.random.default_rng(0)
    medians = {k: float(np.median(np.concatenate(v))) for k, v in runs.items()}
    keys = sorted(medians, key=lambda k: -medians[k])
    draws = {k: resampled_medians(runs[k], rng, DRAWS) for k in keys}
    _, se, threshold = one_standard_error(np.array([medians[k] for k in keys]),
                                          np.column_stack([draws[k] for k in keys]))
    best = medians[keys[0]]
    in_rs = {k: medians[k] >= threshold for k in keys}
    chosen_by = {k: sum(p == k for p in picks.values()) for k in keys}
    best_run_by = {k: sum(p == k for p in best_runs.values()) for k in keys}
    default = default_key(problem)
    jobs = sorted({len(g) for k in keys for g in runs[k]})
    lines = [f"\n## {table}: {len(keys)} configurations re-measured, {min(len(runs[k]) for k in keys)}-"
             f"{max(len(runs[k]) for k in keys)} jobs each of {'/'.join(map(str, jobs))} runs",
             f"recorded: {truth.describe()}",
             f"re-measured: R-S = {sum(in_rs.values())} of the {len(keys)} with median >= {threshold:,.0f} MB/s "
             f"({threshold / best:.1%} of the best re-measured median {best:,.0f}; standard error of a log median "
             f"{se:.3f}, jobs resampled, then the runs within each)",
             f"{'rank':>5} {'recorded MB/s':>14} {'S':>2} {'picked':>7} {'best run':>9} "
             f"{'re-measured MB/s [95%]':>26} {'share':>6} {'R-S':>4}  configuration (what differs from the default)"]
    for k in keys:
        _, low, high = median_interval(np.concatenate(runs[k]))
        marks = "S" if truth.in_s(recorded[k]) else ""
        lines.append(f"{rank[k]:>5} {recorded[k]:>14,.0f} {marks:>2} {chosen_by[k] or '':>7} {best_run_by[k] or '':>9} "
                     f"{f'{medians[k]:,.0f} [{low:,.0f}-{high:,.0f}]':>26} {medians[k] / best:>6.0%} "
                     f"{'R-S' if in_rs[k] else '':>4}  {show_config(k, default)}"
                     + ("  [default]" if k == default else ""))
    members = sorted(truth.members)
    kept = sum(in_rs[k] for k in members)
    top_keys = by_recorded[:top]
    lines.append(f"S re-measured: {kept} of its {len(members)} in R-S; the recorded top {top}: "
                 f"{sum(in_rs[k] for k in top_keys)} in R-S")
    seeds = sorted(picks)
    for label, chosen in (("iobo's pick (GP incumbent)", picks), ("best single run", best_runs)):
        in_s = [truth.in_s(recorded[chosen[s]]) for s in seeds]
        in_r = [in_rs[chosen[s]] for s in seeds]
        share = [medians[chosen[s]] / best for s in seeds]
        n = len(seeds)
        lines.append(f"{label} at {budget} evaluations, {n} seeds: in S {sum(in_s)}/{n} {show_share(sum(in_s), n)}; "
                     f"in R-S {sum(in_r)}/{n} {show_share(sum(in_r), n)}; re-measured share of the best "
                     f"{interval(share)}")
        for part, flag in (("in S", True), ("outside S", False)):
            sub = [x for x, f in zip(share, in_s) if f == flag]
            hits = sum(r for r, f in zip(in_r, in_s) if f == flag)
            if sub:
                lines.append(f"    picks {part}: {len(sub)} seeds; in R-S {hits}/{len(sub)} "
                             f"{show_share(hits, len(sub))}; re-measured share {interval(sub)}")
    over_default = [medians[picks[s]] / medians[default] for s in seeds]
    lines.append(f"the default re-measured at {medians[default] / best:.0%} of the best; iobo's pick over the default, "
                 f"re-measured medians: {ratio(over_default)} "
                 "(median over seeds; the interval spans the seeds' picks, not the re-measurement's noise)")
    member_share = [medians[k] / best for k in members]
    lines.append(f"S's members themselves: re-measured share of the best {', '.join(f'{s:.0%}' for s in member_share)}")
    outside = [picks[s] for s in seeds if not truth.in_s(recorded[picks[s]])]
    if outside and members:
        # how often a pick outside S re-measures at least as high as a member of S taken at random (bootstrap
        # medians against each other; 50% = as good as S)
        wins = [float(np.mean([np.mean(draws[k] >= draws[m]) for m in members])) for k in outside]
        lines.append(f"picks outside S against S's members: chance a resampled pick median is at least as high as a "
                     f"member's, median over those seeds {float(np.median(wins)):.0%} (quartiles "
                     f"{np.percentile(wins, 25):.0%}-{np.percentile(wins, 75):.0%}; 50% = as good as S)")
    return lines


def compare(table: str, other: str, runs: dict[tuple, list[np.ndarray]]) -> list[str]:
    """Lines setting ``table``'s re-measured configurations beside another recorded table of the same workload and
    grid (``other``, e.g. one recorded on a quiet machine): the rank correlation of the medians and, per
    configuration, both shares of their best and membership of ``other``'s S."""
    problem = load_table(TABLES_DIR / f"{other}.csv")
    truth = truth_of(problem)
    recorded = dict(zip(truth.keys, truth.medians))
    every = {k: float(np.median(np.concatenate(v))) for k, v in runs.items()}
    best = max(every.values())
    medians = {k: m for k, m in every.items() if k in recorded}
    keys = sorted(medians, key=lambda k: -medians[k])
    default = default_key(problem)
    rho = stats.spearmanr([recorded[k] for k in keys], [medians[k] for k in keys])[0]
    lines = [f"\n## {table} re-measured, beside {other} ({truth.describe()})",
             f"{len(keys)} configurations in both; rank correlation of the re-measured and {other}'s medians {rho:.2f}",
             f"{'re-measured share':>18} {other + ' share':>24} {'S':>2}  configuration"]
    for k in keys:
        member = "S" if truth.in_s(recorded[k]) else ""
        lines.append(f"{medians[k] / best:>18.0%} {recorded[k] / truth.best:>24.0%} {member:>2}  "
                     f"{show_config(k, default)}")
    members = [k for k in keys if truth.in_s(recorded[k])]
    lines.append(f"{other}'s S among them: {len(members)}, re-measured at "
                 f"{', '.join(f'{medians[k] / best:.0%}' for k in members) or '-'} of the best re-measured")
    return lines


def ratio(values: list[float]) -> str:
    median, low, high = median_interval(values)
    return f"{median:.2f}x [{low:.2f}-{high:.2f}x]"


def interval(values: list[float]) -> str:
    median, low, high = median_interval(values)
    return f"{median:.0%} [{low:.0%}-{high:.0%}]"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", nargs="*", default=list(TABLES),
                        help="recorded tables (names in experiments/tables)")
    parser.add_argument("--seed-list", type=seed_list, default=seed_list("10-29,60-119"))
    parser.add_argument("--budget", type=int, default=50)
    parser.add_argument("--iobo", type=json.loads, default={}, help="GPSampler arguments, JSON, as the bench's")
    parser.add_argument("--top", type=int, default=10, help="also re-measure the recorded top N")
    parser.add_argument("--passes", type=int, default=4, help="jobs per configuration, each pass in a new order")
    parser.add_argument("--repeats", type=int, default=3, help="runs per job")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes for the replays")
    parser.add_argument("--runs", nargs="+", default=["/tmp/pick-remeasure-runs.csv"],
                        help="CSV of the re-measured runs: the first is written; all are scored, pooled")
    parser.add_argument("--picks", default="/tmp/pick-remeasure-picks.json", help="JSON of the replays' picks")
    parser.add_argument("--reuse-picks", action="store_true", help="take the picks from --picks (no replays)")
    parser.add_argument("--order-seed", type=int, default=0, help="seed of the passes' random orders")
    parser.add_argument("--score-only", action="store_true", help="score --picks and --runs written before")
    parser.add_argument("--compare", nargs="*", default=[], metavar="TABLE:OTHER",
                        help="also set TABLE's re-measured configurations beside the recorded table OTHER")
    parser.add_argument("--note", default="", help="a line for the report's head (how --runs were measured)")
    parser.add_argument("--out", help="also write the report here")
    args = parser.parse_args(argv)
    started = time.time()
    head = (f"# python -m experiments.sampler.pick_remeasure {shlex.join(argv if argv is not None else sys.argv[1:])}"
            f"; commit {commit()}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
            + (f"\n# {args.note}" if args.note else ""))
    if not args.score_only:
        for table in args.tables:
            sweep_of(table)  # before any replay: a table with no matching workload cannot be re-measured
    if not (args.score_only or args.reuse_picks):
        tasks = [(t, s, args.budget, args.iobo) for t in args.tables for s in args.seed_list]
        found: dict[str, dict[str, list]] = {t: {} for t in args.tables}
        for table, seed, pick, best_run in pool_map(replay, tasks, args.jobs):
            found[table][str(seed)] = [sorted(pick.items()), sorted(best_run.items())]
        Path(args.picks).write_text(json.dumps(found))
        print(f"replays done in {time.time() - started:.0f} s", file=sys.stderr)
    found = json.loads(Path(args.picks).read_text())
    if not args.score_only:
        plan = {}
        for table in args.tables:
            problem = load_table(TABLES_DIR / f"{table}.csv")
            chosen = [dict(p) for pair in found[table].values() for p in pair]
            plan[table] = candidates(problem, chosen, args.top)
        load_before = os.getloadavg()
        remeasure(plan, args.passes, args.repeats, Path(args.runs[0]), seed=args.order_seed)
        head += f"; load average before the re-measurement {load_before[0]:.1f}, after {os.getloadavg()[0]:.1f}"
    runs = read_runs([Path(r) for r in args.runs])
    lines = [head, f"# seeds {show_seeds(args.seed_list)}, budget {args.budget}, GPSampler {args.iobo}; runs from "
                   f"{', '.join(args.runs)}" + ("" if args.score_only else
                                                 f" ({args.passes} passes x {args.repeats} runs per configuration)")]
    for table in args.tables:
        picks = {int(s): config_key(dict(pair[0])) for s, pair in found[table].items()}
        best_runs = {int(s): config_key(dict(pair[1])) for s, pair in found[table].items()}
        lines += score(table, picks, best_runs, runs[table], args.top, args.budget)
    for pair in args.compare:
        table, _, other = pair.partition(":")
        lines += compare(table, other, runs[table])
    lines.append(f"\n(wall time {time.time() - started:.0f} s)")
    write_report(lines, args.out)


if __name__ == "__main__":
    main()
