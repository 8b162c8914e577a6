"""Benchmark: do a study's conclusions survive a separate re-measurement? (issue 16's checks)

Run from the repository root::

    .venv/bin/python -m experiments.conclusions --studies 10 --trials 20

Each study is a demo-sized real tuning run (VPIC-IO, 2 MPI ranks, tmpfs, the
local runner): warm-up, 3 default runs, the GP search with interleaved
default runs, then ``Tuner.confirm`` (the minimal configuration, then the
default and that configuration re-measured ``--confirm`` times each,
interleaved). Afterwards, apart from the study, a separate interleaved A/B
per kept knob: the minimal configuration with and without that knob,
``--pairs`` pairs, the paired t interval on the log ratios
(:func:`iobo.measure.paired_ratio`); the knob is confirmed when its interval
lies above 1. Printed per study and in total:

- the minimal configuration and which of its knobs the A/B confirms
  (target: all of them, in every study);
- the confirmed speedup (median ratio of the re-measurement, 95% bootstrap
  interval) against the tuning-time estimate (best single run over the
  baseline median), which the winner's curse inflates;
- the baseline's drift (start vs later default runs).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from iobo.measure import paired_ratio
from iobo.report import build_report
from iobo.runners.local import LocalRunner
from iobo.tuner import Tuner

OPTIONS = {"particles": 1 << 18, "steps": 2}
ROLE_AB = "ab-check"  # the separate A/B runs: not tuning, not re-measurement


def one_study(seed: int, trials: int, confirm: int, pairs: int, storage: str, workdir: Path) -> dict:
    tuner = Tuner(kernel="vpic", ranks=2, trials=trials, storage=storage, study=f"conclusions-{seed}",
                  workdir=str(workdir), kernel_options=OPTIONS, seed=seed, runner=LocalRunner(), echo=None,
                  timeout_s=120)
    started = time.monotonic()
    study = tuner.run()
    tuner.confirm(confirm)
    report = build_report(study)
    minutes = (time.monotonic() - started) / 60
    default = tuner.space.default()
    minimal = {**default, **report.best_config}
    checks = {}
    for knob in report.best_config:
        without = {**minimal, knob: default[knob]} if knob in default else dict(minimal)
        runs = []
        for pair in range(pairs):
            arms = [(minimal, {"role": ROLE_AB, "arm": "with"}), (without, {"role": ROLE_AB, "arm": "without"})]
            runs += arms if pair % 2 == 0 else arms[::-1]
        measured = tuner.measure(study, runs)
        with_values = [t.value for t in measured if t.user_attrs["arm"] == "with" and t.value is not None]
        without_values = [t.value for t in measured if t.user_attrs["arm"] == "without" and t.value is not None]
        ratio, (low, high) = paired_ratio(with_values, without_values)
        checks[knob] = (ratio, low, high, low > 1.0)
    interval = report.speedup_interval()
    return {
        "seed": seed, "minutes": minutes, "minimal": dict(report.best_config), "checks": checks,
        "speedup": 1.0 if report.keeps_default else report.speedup, "interval": interval,
        "keeps_default": report.keeps_default,
        "estimate": report.best_value / report.default.median if report.best_value and report.default else None,
        "drift": report.baseline.drift if report.baseline else None,
        "steps": [s.describe() for s in report.minimal.steps] if report.minimal else [],
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--studies", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--trials", type=int, default=20, help="tuning trials per study (default runs included)")
    parser.add_argument("--confirm", type=int, default=5, help="re-measurements of default and minimal")
    parser.add_argument("--pairs", type=int, default=5, help="interleaved pairs of the separate A/B per knob")
    parser.add_argument("--workdir", default="/dev/shm" if Path("/dev/shm").is_dir() else None)
    args = parser.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="iobo-conclusions-", dir=args.workdir))
    storage = f"sqlite:///{base / 'studies.db'}"
    print(f"{args.studies} studies of VPIC-IO (2 ranks, {OPTIONS}), {args.trials} tuning trials, confirm "
          f"{args.confirm}, A/B {args.pairs} pairs per kept knob; workdir {base}", flush=True)
    results = []
    try:
        for seed in range(args.first_seed, args.first_seed + args.studies):
            r = one_study(seed, args.trials, args.confirm, args.pairs, storage, base / f"s{seed}")
            results.append(r)
            checks = ", ".join(f"{k} {ratio:.2f}x [{low:.2f}-{high:.2f}] {'confirmed' if ok else 'NOT confirmed'}"
                               for k, (ratio, low, high, ok) in r["checks"].items()) or "(nothing kept)"
            interval = f"[{r['interval'][0]:.2f}-{r['interval'][1]:.2f}]" if r["interval"] else "[-]"
            confirmed = ("none re-measured: keeps the default" if r["keeps_default"]
                         else f"{r['speedup']:.2f}x {interval}")
            print(f"seed {seed:2d}: minimal {r['minimal'] or '{}'}; A/B: {checks}; confirm speedup "
                  f"{confirmed} vs tuning estimate {r['estimate']:.2f}x; baseline drift "
                  f"{100 * (r['drift'] or 0):+.0f}%; {r['minutes']:.1f} min", flush=True)
            for step in r["steps"]:
                print(f"          {step}")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    all_confirmed = sum(1 for r in results if all(ok for *_, ok in r["checks"].values()))
    print(f"\nstudies whose every minimal knob the separate A/B confirms: {all_confirmed} of {len(results)} "
          f"(target: all)")
    speedups = [r["speedup"] for r in results]  # 1.0 for a study that keeps the default
    estimates = [r["estimate"] for r in results]
    print(f"confirm speedup: median {statistics.median(speedups):.2f}x (range {min(speedups):.2f}-"
          f"{max(speedups):.2f}); tuning-time estimate (best run / baseline): median "
          f"{statistics.median(estimates):.2f}x (range {min(estimates):.2f}-{max(estimates):.2f}); "
          f"estimate / confirmed: median {statistics.median(e / s for e, s in zip(estimates, speedups)):.2f}")
    holds_one = sum(1 for r in results if r["interval"] and r["interval"][0] <= 1.0)
    print(f"confirm intervals that hold 1 (reported as undecided, or as no effect when inside 0.95x-1.05x): "
          f"{holds_one} of {len(results)}")


if __name__ == "__main__":
    main()
