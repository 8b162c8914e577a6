"""Benchmark: warm start from earlier studies in other contexts, leave one context out (issue 19).

Each kernel was recorded at several contexts on a common 72-configuration
grid (:data:`experiments.harness.recording.VPIC_CONTEXT_GRID`,
``IOR_CONTEXT_GRID``), in *families* (:data:`CONTEXTS`) of contexts recorded
under the same conditions:

- ``vpic``, ``ior`` (recorded while other jobs loaded the 2 cores): VPIC-IO
  at 2 ranks on tmpfs (the 3-pass table, filtered to the grid), 1 rank on
  tmpfs and 2 ranks on the local disk with fsync; IOR at 2 and 1 rank(s)
  with 256 KiB accesses and 2 ranks with 16 KiB accesses.  A context left
  out has a value of a feature (ranks, file system, access size) that no
  other context of its family has;
- ``vpic-quiet``, ``ior-quiet`` (issue 31: recorded one after another on an
  otherwise idle machine): the same three contexts and a fourth, 1 rank on
  the disk (VPIC) or 1 rank with 16 KiB accesses (IOR), so that every value
  of every feature is held by two contexts.

For each context left out (the *target*) and each seed:

- ``iobo-gp cold``: iobo's GP sampler from scratch (3 default runs, then a
  hypercube of 5, then the GP);
- ``optuna-gp cold``: Optuna's GPSampler from scratch (same 3 default runs);
- ``iobo-gp warm``: the earlier studies are the cold iobo studies of the
  *other* contexts at the same seed (30 search trials each, with their
  contexts recorded as the tuner records them); :func:`iobo.transfer.fit_transfer`
  fits the contextual GP to them, its 3 best-predicted configurations run
  right after the 3 default runs, and the GP sampler takes it as its prior
  mean (``GPSampler(prior_mean=...)``, weight re-estimated at each fit);
- ``warm, queue only``: the same 3 configurations first, then the cold
  sampler (no prior mean): what the prior mean adds.

A measurement draws one recorded repeat of the configuration (the machine's
own noise); the truth is the median of its repeats.  Printed per target
(median [IQR] over seeds; evaluations count search trials after the
default runs, ``>B``: not within the budget): % of the best at trial 1 (the
first trial after the default runs), the best % within 5 trials,
evaluations to 90/95/99% of the best; for the warm start the predicted and
measured speedup of its first trial and the prior mean's weight at the end.

The adversarial case: warm start from ONE context whose optimum differs
from the target's (:data:`ADVERSARIAL`), against the cold start, in
evaluations to 95%.  Run from the project root (CPU-heavy: under nice)::

    nice -n 19 .venv/bin/python -m experiments.warmstart.bench --seeds 20 --budget 30 --jobs 2
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core per run: fair to every optimizer
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import csv  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass, replace  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import optuna  # noqa: E402

from experiments.harness import TABLES_DIR  # noqa: E402
from experiments.harness.optimizers import measurement_rng, suggest  # noqa: E402
from experiments.harness.problems import Problem, load_table, parse_cell  # noqa: E402
from experiments.harness.recording import IOR_CONTEXT_GRID, VPIC_CONTEXT_GRID, columns, configurations  # noqa: E402
from experiments.harness.runs import (  # noqa: E402
    LEVELS,
    commit,
    evaluations_to,
    median_iqr,
    pool_map,
    quiet_worker,
    write_report,
)
from iobo import kernels, trials  # noqa: E402
from iobo.context import CONTEXT_ATTR, Context, kernel_context  # noqa: E402
from iobo.errors import SpaceError  # noqa: E402
from iobo.samplers import GPSampler  # noqa: E402
from iobo.samplers.registry import WARM_STARTUP_TRIALS  # noqa: E402
from iobo.space import MiB, Space, Workload  # noqa: E402
from iobo.stack import filesystem_type  # noqa: E402
from iobo.surrogate import PRIOR_WEIGHT_ATTR  # noqa: E402
from iobo.transfer import TransferModel, fit_transfer  # noqa: E402

CONTEXTS = {  # family -> its contexts (recorded tables); the family's kernel is each table's own
    "vpic": ("vpic-tmpfs-3pass", "vpic-tmpfs-1r", "vpic-disk"),
    "ior": ("ior-tmpfs-3pass", "ior-tmpfs-small", "ior-tmpfs-1r"),
    "vpic-quiet": ("vpic-tmpfs-2r-quiet", "vpic-tmpfs-1r-quiet", "vpic-disk-quiet", "vpic-disk-1r-quiet"),
    "ior-quiet": ("ior-tmpfs-2r-quiet", "ior-tmpfs-small-quiet", "ior-tmpfs-1r-quiet", "ior-tmpfs-small-1r-quiet"),
}
GRIDS = {"vpic": VPIC_CONTEXT_GRID, "ior": IOR_CONTEXT_GRID}
LEFT_OUT = {"vpic": {"cb_buffer_size": 16 * MiB}, "ior": {"romio_ds_write": "automatic"}}
"""Parameters of the 3-pass tables the context grids leave out, at the value the grids keep."""
ADVERSARIAL = {"vpic": ("vpic-tmpfs-1r", "vpic-disk"), "ior": ("ior-tmpfs-small", "ior-tmpfs-3pass"),
               "vpic-quiet": ("vpic-tmpfs-2r-quiet", "vpic-disk-quiet"),
               "ior-quiet": ("ior-tmpfs-2r-quiet", "ior-tmpfs-small-1r-quiet")}
"""family -> (the one earlier context, the target): of the recorded pairs, the source whose optimum is among the
worst in the target.  VPIC: the 1-rank optimum (collective, 4 MiB alignment, collective buffering enabled) is at
54% of the disk context's best (independent, no alignment); IOR: the 16 KiB-access optimum (1 MiB collective
buffer, independent) is at 55% of the 256 KiB-access best (16 MiB buffer, collective).  The quiet families:
the pair whose source optimum is worst in the target, 61% (VPIC: 2 ranks on tmpfs to 2 ranks on disk) and 76%
(IOR: 2 ranks with 256 KiB accesses to 1 rank with 16 KiB)."""
DEFAULT_RUNS = 3  # default runs before the search, as the tuner does (the baseline)
TRANSFERRED = 3  # configurations the warm start queues (iobo tune's default)
METHODS = ("iobo-gp cold", "optuna-gp cold", "iobo-gp warm", "warm, queue only")


@dataclass(frozen=True)
class Target:
    """A recorded context: its problem on the common grid, context, workload and space."""

    table: str
    problem: Problem
    context: Context
    workload: Workload
    space: Space


@functools.cache
def target(table: str) -> Target:
    """The table filtered to its kernel's context grid (each configuration's repeats kept as recorded)."""
    meta = json.loads((TABLES_DIR / f"{table}.json").read_text())
    kernel = meta["kernel"]
    grid, fixed = GRIDS[kernel], LEFT_OUT[kernel]
    names = columns(grid)
    wanted = {_key(c) for c in configurations(grid)}
    out = Path(tempfile.mkdtemp(prefix="iobo-warmstart-")) / f"{table}.csv"
    with (TABLES_DIR / f"{table}.csv").open(newline="") as f, out.open("w", newline="") as g:
        reader, writer = csv.DictReader(f), csv.writer(g)
        writer.writerow([*names, "repeat", "mb_per_s"])
        for row in reader:
            if any(n in row and row[n] != str(v) for n, v in fixed.items()):
                continue
            config = {n: parse_cell(row[n]) for n in names if row[n] != ""}
            if _key(config) in wanted:
                writer.writerow([row[n] for n in names] + [row["repeat"], row["mb_per_s"]])
    default = {n: v for n, v in meta["default"].items() if n in names}
    jobs = {k: meta[k] for k in ("repeats", "passes") if k in meta}  # which runs shared a job (truth's errors)
    out.with_suffix(".json").write_text(json.dumps({"default": default, **jobs}))
    spec = kernels.get(kernel)
    options = spec.resolve_options(meta["options"])
    context = replace(kernel_context(kernel, meta["ranks"], options), fs_type=filesystem_type(Path(meta["workdir"])))
    return Target(table, load_table(out), context, spec.workload(meta["ranks"], options), spec.space().select(names))


def _key(config: dict) -> tuple:
    return tuple(sorted((n, repr(v)) for n, v in config.items()))


# -- one tuning run --------------------------------------------------------------------------
def tune(t: Target, sampler, seed: int, budget: int, queued=()) -> tuple[optuna.Study, list[float]]:
    """3 default runs, then ``queued`` ``(values, attrs)``, then ``sampler``: ``budget`` search trials
    on ``t``'s table; the study (as an earlier study: roles and context recorded) and the true MB/s of
    each search trial."""
    study = optuna.create_study(direction="maximize", sampler=sampler)
    study.set_user_attr("kernel", t.context.kernel)
    study.set_user_attr("ranks", t.context.ranks)
    study.set_user_attr("kernel_options", t.context.kernel_options)
    study.set_user_attr(CONTEXT_ATTR, t.context.to_attr())
    for _ in range(DEFAULT_RUNS):
        study.enqueue_trial(t.problem.default, user_attrs={"role": trials.ROLE_DEFAULT})
    for values, attrs in queued:
        study.enqueue_trial(values, user_attrs={"role": trials.ROLE_SEARCH, **attrs})
    rng = measurement_rng(seed)
    truths = []
    for n in range(DEFAULT_RUNS + budget):
        trial = study.ask()
        config = suggest(trial, t.problem)
        if "role" not in trial.user_attrs:
            trial.set_user_attr("role", trials.ROLE_SEARCH)
        study.tell(trial, t.problem.measure(config, rng))
        if n >= DEFAULT_RUNS:
            truths.append(t.problem.truth(config))
    return study, truths


def warm(t: Target, earlier, seed: int, budget: int, prior: bool) -> dict:
    """A warm-started run of ``t`` from the ``earlier`` studies: its truths, the transferred trials'
    predicted and measured speedups, and the prior mean's last weight."""
    model: TransferModel = fit_transfer(earlier, t.context, t.space)
    queued = []
    for proposed in model.propose(t.workload, TRANSFERRED):
        values = {n: v for n, v in proposed.values.items() if n in t.problem.choices}
        try:
            t.problem.grid.indices(values)
        except SpaceError:  # repaired off the recorded grid: not measurable here
            continue
        queued.append((values, proposed.trial_attrs()))
    sampler = (GPSampler(seed=seed, prior_mean=model, n_startup_trials=WARM_STARTUP_TRIALS) if prior
               else GPSampler(seed=seed))
    study, truths = tune(t, sampler, seed, budget, queued)
    done = trials.tuning_trials(study)
    base = trials.baseline(done).median
    transferred = [(x.user_attrs["predicted_speedup"], x.value / base) for x in done
                   if "predicted_speedup" in x.user_attrs]
    weights = [x.system_attrs[PRIOR_WEIGHT_ATTR] for x in study.trials if PRIOR_WEIGHT_ATTR in x.system_attrs]
    return {"truths": truths, "transferred": transferred, "weight": weights[-1] if weights else None,
            "weights": weights}


def _task(args: tuple[str, int, int]) -> tuple[str, int, dict]:
    """Every method on every context of ``family`` at ``seed``, and the adversarial case."""
    family, seed, budget = args
    quiet_worker("ERROR")
    started = time.process_time()
    tables = CONTEXTS[family]
    targets = {name: target(name) for name in tables}
    cold = {name: tune(t, GPSampler(seed=seed), seed, budget) for name, t in targets.items()}
    out: dict = {}
    for name, t in targets.items():
        earlier = [cold[other][0] for other in tables if other != name]
        out[name] = {
            "iobo-gp cold": {"truths": cold[name][1]},
            "optuna-gp cold": {"truths": tune(t, optuna.samplers.GPSampler(seed=seed), seed, budget)[1]},
            "iobo-gp warm": warm(t, earlier, seed, budget, prior=True),
            "warm, queue only": warm(t, earlier, seed, budget, prior=False),
        }
    source, goal = ADVERSARIAL[family]
    out["adversarial"] = {"source": source, "target": goal,
                          "warm": warm(targets[goal], [cold[source][0]], seed, budget, prior=True)}
    out["cpu_s"] = time.process_time() - started
    return family, seed, out


# -- the report ------------------------------------------------------------------------------------
def shares(truths: list[float], best: float) -> tuple[float, float]:
    """% of the best at trial 1 and the best % within 5 trials."""
    return 100 * truths[0] / best, 100 * max(truths[:5]) / best


def pct(values) -> str:
    q1, med, q3 = np.percentile(values, [25, 50, 75])
    return f"{med:.0f} [{q1:.0f}-{q3:.0f}]"


def report(results: dict, budget: int) -> list[str]:
    lines = []
    met = []
    for family, tables in CONTEXTS.items():
        runs = [r for (k, _), r in sorted(results.items()) if k == family]
        if not runs:
            continue
        for name in tables:
            t = target(name)
            p = t.problem
            best, default = p.best, p.truth(p.default)
            optimum = max(p.grid.configurations(), key=p.truth)
            lines.append(f"\n## {name}: {t.context.describe()}")
            lines.append(f"{p.note}; best {best:,.0f} MB/s ({best / default:.2f}x the default "
                         f"{default:,.0f} MB/s) at {optimum}")
            lines.append(f"{'method':<18}{'@trial 1 %':>16}{'best of 5 %':>16}"
                         + "".join(f"{f'to {int(l * 100)}%':>16}" for l in LEVELS) + f"{'w at end':>10}")
            for method in METHODS:
                truths = [r[name][method]["truths"] for r in runs]
                first, five = zip(*(shares(x, best) for x in truths))
                counts = [median_iqr([evaluations_to(x, l * best, budget) for x in truths], budget) for l in LEVELS]
                weights = [r[name][method].get("weight") for r in runs]
                weights = [w for w in weights if w is not None]
                w = f"{np.median(weights):.2f}" if weights else "-"
                lines.append(f"{method:<18}{pct(first):>16}{pct(five):>16}" + "".join(f"{c:>16}" for c in counts)
                             + f"{w:>10}")
                if method == "iobo-gp warm":
                    met.append((name, float(np.median(first)), float(np.median(five))))
            firsts = [r[name]["iobo-gp warm"]["transferred"][0] for r in runs if r[name]["iobo-gp warm"]["transferred"]]
            if firsts:
                predicted, measured = zip(*firsts)
                lines.append(f"warm start's first trial: predicted {np.median(predicted):.2f}x, measured "
                             f"{np.median(measured):.2f}x over the default (medians over seeds); the best is "
                             f"{best / default:.2f}x")
        source, goal = ADVERSARIAL[family]
        lines.append(f"\n## adversarial ({family}): warm start of {goal} from {source} only")
        p = target(goal).problem
        src = target(source).problem
        opt_src = max(src.grid.configurations(), key=src.truth)
        lines.append(f"{source}'s optimum {opt_src} is at {100 * p.truth(opt_src) / p.best:.0f}% of {goal}'s best")
        adv = [r["adversarial"]["warm"]["truths"] for r in runs]
        cold = [r[goal]["iobo-gp cold"]["truths"] for r in runs]
        for label, truths in (("iobo-gp cold", cold), ("warm from " + source, adv)):
            first, five = zip(*(shares(x, p.best) for x in truths))
            counts = [median_iqr([evaluations_to(x, l * p.best, budget) for x in truths], budget) for l in LEVELS]
            lines.append(f"{label:<28}{pct(first):>14}{pct(five):>14}" + "".join(f"{c:>16}" for c in counts))
        loss = [evaluations_to(a, 0.95 * p.best, budget) - evaluations_to(c, 0.95 * p.best, budget)
                for a, c in zip(adv, cold)]
        weights = [r["adversarial"]["warm"]["weight"] for r in runs if r["adversarial"]["warm"]["weight"] is not None]
        lines.append(f"loss against the cold start in evaluations to 95% (warm - cold, per seed): median "
                     f"{np.median(loss):+.1f}, IQR [{np.percentile(loss, 25):+.1f} to {np.percentile(loss, 75):+.1f}], "
                     f"worst {max(loss):+d}; prior weight at end: median {np.median(weights):.2f}")
    lines.append("\n## targets (iobo-gp warm, median over seeds): >= 90% of the best at trial 1, >= 95% within 5")
    for name, first, five in met:
        lines.append(f"{name:<20} trial 1: {first:5.1f}% {'met' if first >= 90 else 'MISSED'}; "
                     f"within 5: {five:5.1f}% {'met' if five >= 95 else 'MISSED'}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--budget", type=int, default=30, help="search trials after the default runs")
    parser.add_argument("--families", nargs="+", default=list(CONTEXTS), choices=list(CONTEXTS))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", help="write the report here too (first line: command, commit, load)")
    args = parser.parse_args()
    started = time.time()
    tasks = [(f, s, args.budget) for f in args.families for s in range(args.seeds)]
    results = {}
    for family, seed, out in pool_map(_task, tasks, args.jobs):
        results[(family, seed)] = out
        print(f"done {family} seed {seed} ({out['cpu_s']:.0f} CPU s)", file=sys.stderr, flush=True)
    head = (f"# {' '.join(['python -m experiments.warmstart.bench', *sys.argv[1:]])}; commit {commit()}; "
            f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())} at the end; "
            f"{time.time() - started:.0f} s wall")
    write_report([head, *report(results, args.budget)], args.out)


if __name__ == "__main__":
    main()
