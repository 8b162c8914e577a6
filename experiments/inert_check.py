"""Check that parameters are inert on a recorded table's workload: paired real runs.

The wide benchmark problems (:func:`experiments.harness.problems.widen`)
are a recorded table plus HDF5 parameters that MEASURED.md found
"within noise" here (metadata block, sieve buffer, metadata cache size,
collective metadata).  This script tests that claim on the table's own
kernel and options instead of taking it on trust (from the project root)::

    .venv/bin/python -m experiments.inert_check --pairs 40 --passes 3   # ~3 min, run alone
    .venv/bin/python -m experiments.inert_check --from experiments/results/vpic-tmpfs-inert-check.csv

Each pair is a random configuration of the table's grid run twice: with the
extra parameters at their defaults (``base``) and at random values of their
ranges (``wide``).  All runs of a pass go in one random order, so load
drifts hit both arms alike.  Printed: the wide/base ratio of each pair's
median MB/s against what noise alone gives, the base against itself (even
against odd repeats, which share jobs; and one job against another, which
is noisier than a median of three), a Wilcoxon signed-rank test of the log
ratios, and a least-squares fit of the log ratio on each extra parameter
(change in % per doubling, or on when boolean) with its standard error.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import time
from pathlib import Path

import numpy as np
from scipy.stats import wilcoxon

from experiments.harness import RESULTS_DIR
from experiments.harness.recording import SWEEPS, columns, configurations, machine, measure, write_sidecar
from iobo.space import io_stack_space

EXTRA = ("meta_block_size", "sieve_buf_size", "mdc_initial_size", "coll_metadata")


def pairs(table: dict, count: int, seed: int) -> list[tuple[dict, dict]]:
    """``count`` (base, wide) configurations: a random grid point, then with random extras."""
    rng = random.Random(seed)
    space = io_stack_space()
    grid = configurations(table["grid"])
    out = []
    for _ in range(count):
        base = {**rng.choice(grid), **{n: space[n].default for n in EXTRA}}
        wide = {**base, **{n: rng.choice(space[n].values) for n in EXTRA}}
        out.append((base, wide))
    return out


def record(table: dict, chosen: list[tuple[dict, dict]], passes: int, repeats: int, seed: int, path: Path) -> None:
    """Run every pair's two arms ``passes`` times, each pass in its own random order; write CSV rows."""
    names = columns(table["grid"]) + list(EXTRA)
    jobs = [(i, arm) for i in range(len(chosen)) for arm in ("base", "wide")]
    Path(table["workdir"]).mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["pair", "arm", *names, "repeat", "mb_per_s"])
        for sweep in range(passes):
            random.Random(seed + 1 + sweep).shuffle(jobs)
            for k, (i, arm) in enumerate(jobs):
                values = chosen[i][0 if arm == "base" else 1]
                runs = measure(table, values, repeats)
                for repeat, mb_per_s in enumerate(runs, start=sweep * repeats):
                    writer.writerow([i, arm] + [values.get(n, "") for n in names] + [repeat, f"{mb_per_s:.1f}"])
                handle.flush()
                print(f"[pass {sweep + 1}/{passes} {k + 1}/{len(jobs)}] {arm:4} pair {i:2}: "
                      f"{np.median(runs):7.0f} MB/s", flush=True)


def _load(path: Path) -> tuple[dict[tuple[int, str], list[tuple[int, float]]], list[dict[str, str]]]:
    """(pair, arm) -> [(repeat, MB/s)], and each pair's extra values (as CSV text), from a :func:`record` CSV."""
    runs: dict[tuple[int, str], list[tuple[int, float]]] = {}
    extras: dict[int, dict[str, str]] = {}
    with path.open(newline="") as handle:
        for line in csv.DictReader(handle):
            key = (int(line["pair"]), line["arm"])
            runs.setdefault(key, []).append((int(line["repeat"]), float(line["mb_per_s"])))
            if line["arm"] == "wide":
                extras[key[0]] = {n: line[n] for n in EXTRA}
    return runs, [extras[i] for i in range(len(extras))]


def _effects(extras: list[dict[str, str]], log_ratio: np.ndarray) -> list[tuple[str, float, float, float]]:
    """Least-squares fit of ``log_ratio`` on each extra parameter's change from its default:
    ``(name, coefficient, standard error, log2 span of its range)``, per doubling (booleans: per switch)."""
    space = io_stack_space()
    changes = []
    for name in EXTRA:
        default = space[name].default
        if isinstance(default, bool):
            changes.append([float(e[name] == "True") - float(default) for e in extras])
        else:
            changes.append([np.log2(float(e[name]) / default) for e in extras])
    design = np.column_stack(changes + [np.ones(len(extras))])
    coef, *_ = np.linalg.lstsq(design, log_ratio, rcond=None)
    resid = log_ratio - design @ coef
    sigma2 = resid @ resid / max(len(extras) - design.shape[1], 1)
    se = np.sqrt(np.diag(sigma2 * np.linalg.inv(design.T @ design)))
    spans = [1.0 if isinstance(space[n].default, bool) else np.log2(max(space[n].values) / min(space[n].values))
             for n in EXTRA]
    return [(n, coef[k], se[k], spans[k]) for k, n in enumerate(EXTRA)]


def analyse(path: Path) -> None:
    """Print the paired comparison of ``path`` (a CSV written by :func:`record`)."""
    runs, extras = _load(path)
    count = len(extras)
    median = lambda runs_: float(np.median([v for _, v in runs_]))  # noqa: E731
    ratio = np.array([median(runs[(i, "wide")]) / median(runs[(i, "base")]) for i in range(count)])
    per_job = json.loads(path.with_suffix(".json").read_text())["repeats_per_job"]
    noise = {  # the base against itself, two ways: what noise alone gives
        "base / base, same jobs": lambda rs: median([x for x in rs if x[0] % 2 == 0])
        / median([x for x in rs if x[0] % 2 == 1]),
        "base / base, job 1 / job 2": lambda rs: median([x for x in rs if x[0] // per_job == 0])
        / median([x for x in rs if x[0] // per_job == 1]),
    }
    rows = {"wide / base": ratio}
    rows.update({label: np.array([fn(runs[(i, "base")]) for i in range(count)]) for label, fn in noise.items()})
    print(f"{count} pairs, {len(runs[(0, 'base')])} runs per arm ({path})")
    print(f"{'':28}{'p10':>8}{'p25':>8}{'median':>8}{'p75':>8}{'p90':>8}{'|log| median':>14}")
    for label, values in rows.items():
        quantiles = np.percentile(values, [10, 25, 50, 75, 90])
        print(f"{label:28}" + "".join(f"{v:8.3f}" for v in quantiles) + f"{np.median(np.abs(np.log(values))):14.3f}")
    print(f"Wilcoxon signed-rank, log(wide/base) = 0: p = {wilcoxon(np.log(ratio)).pvalue:.2f}")
    print("fit of log(wide/base): effect per doubling (per switch for booleans), % +- SE, and over the range")
    for name, coef, se, span in _effects(extras, np.log(ratio)):
        print(f"  {name:18} {100 * np.expm1(coef):+6.2f}% +- {100 * se:.2f}"
              f"   over the range: {100 * np.expm1(coef * span):+6.1f}%")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--table", choices=sorted(SWEEPS), default="vpic-tmpfs")
    parser.add_argument("--pairs", type=int, default=30)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=2, help="timed runs per job")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--from", dest="source", type=Path, help="analyse a recorded CSV, run nothing")
    args = parser.parse_args()
    if args.source:
        analyse(args.source)
        return
    table = SWEEPS[args.table]
    path = RESULTS_DIR / f"{args.table}-inert-check.csv"
    started = time.time()
    record(table, pairs(table, args.pairs, args.seed), args.passes, args.repeats, args.seed, path)
    meta = {"table": path.stem, "grid_of": args.table, "extra": list(EXTRA), "kernel": table["kernel"],
            "ranks": table["ranks"], "options": table["options"], "workdir": table["workdir"],
            "pairs": args.pairs, "passes": args.passes, "repeats_per_job": args.repeats, "seed": args.seed,
            "machine": machine(), "wall_seconds": round(time.time() - started, 1)}
    write_sidecar(path, meta)
    analyse(path)


if __name__ == "__main__":
    main()
