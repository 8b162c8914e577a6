"""What extending an undecided confirmation buys and costs: simulated confirmations scored by iobo's own rule.

``iobo confirm`` runs its planned pairs; while the 95% bootstrap interval of the speedup
(:func:`iobo.measure.speedup_interval`) is undecided (:func:`iobo.minimize.confirmation_verdict`: it holds 1 and
reaches outside ``NO_EFFECT_BAND``), it runs ``repeats`` more pairs at a time, up to ``CONFIRM_AT_MOST`` times
``repeats`` (``Tuner._settle_undecided``). Each look is a new chance for the interval to exclude 1 by luck, so the
rate of false gains rises above the fixed confirmation's; and a real gain is shown more often. This script
measures both, from the project root::

    .venv/bin/python -m experiments.confirm_extension --reps 400 --out experiments/results/confirm-extension.txt

Runs are drawn as ``exp(N(0, s))`` MB/s (``s``: run-to-run standard deviation of log MB/s; 0.06 is a quiet tmpfs,
0.3 and 0.6 loaded machines, /work/shared/MEASURED.md) times the true speedup for the configuration's runs; the
``tails`` model also makes one run in ten 2-4x slower, as a loaded machine does. For each true speedup, the share
of confirmations ending in each verdict, fixed (``repeats`` pairs) and extended, with a 95% Wilson interval on
the extended gain share, and the mean pairs run.
"""

from __future__ import annotations

import argparse

import numpy as np

from experiments.harness.runs import commit, write_report
from experiments.harness.truth import share_interval
from iobo.measure import speedup_interval
from iobo.minimize import GAIN, NO_EFFECT, SLOWER, UNDECIDED, confirmation_verdict
from iobo.tuner import CONFIRM_AT_MOST

VERDICTS = (GAIN, NO_EFFECT, SLOWER, UNDECIDED)


def runs(rng, n: int, speedup: float, noise_sd_log: float, tails: bool) -> np.ndarray:
    """``n`` simulated runs (MB/s) of a configuration ``speedup`` times the default's median."""
    values = speedup * np.exp(rng.normal(0.0, noise_sd_log, n))
    if tails:
        slow = rng.random(n) < 0.1
        values[slow] /= rng.uniform(2.0, 4.0, slow.sum())
    return values


def confirm(rng, speedup: float, noise_sd_log: float, tails: bool, repeats: int, extend: bool) -> tuple[str, int]:
    """One confirmation's verdict and pairs: ``repeats`` pairs, then (``extend``) ``repeats`` more at a time while
    undecided, up to ``CONFIRM_AT_MOST * repeats``."""
    at_most = CONFIRM_AT_MOST * repeats
    default, best = np.empty(0), np.empty(0)
    while True:
        default = np.concatenate([default, runs(rng, repeats, 1.0, noise_sd_log, tails)])
        best = np.concatenate([best, runs(rng, repeats, speedup, noise_sd_log, tails)])
        verdict = confirmation_verdict(speedup_interval(default, best))
        if not extend or verdict != UNDECIDED or best.size >= at_most:
            return verdict, best.size


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=400, help="confirmations simulated per cell")
    parser.add_argument("--repeats", type=int, default=5, help="pairs asked for (iobo tune --confirm's default)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    lines = [f"# experiments/confirm_extension.py at commit {commit()}: --reps {args.reps} --repeats {args.repeats} "
             f"--seed {args.seed}",
             f"# fixed: {args.repeats} pairs; extended: +{args.repeats} at a time while undecided, at most "
             f"{CONFIRM_AT_MOST * args.repeats} pairs. Shares of confirmations (%) ending gain / no effect / slower / "
             f"undecided; the extended gain share with its 95% Wilson interval; mean pairs run.",
             f"{'noise':>11} {'true':>5} | {'fixed g/ne/s/u':>17} | {'extended g/ne/s/u':>17} "
             f"{'gain 95% CI':>13} {'pairs':>5}"]
    for tails in (False, True):
        for noise in (0.06, 0.3, 0.6):
            for speedup in (1.0, 1.05, 1.3, 1.6):
                shares = {}
                for extend in (False, True):
                    done = [confirm(rng, speedup, noise, tails, args.repeats, extend) for _ in range(args.reps)]
                    counts = {v: sum(d == v for d, _ in done) for v in VERDICTS}
                    shares[extend] = (counts, float(np.mean([p for _, p in done])))
                fixed, (extended, pairs) = shares[False][0], shares[True]
                low, high = share_interval(extended[GAIN], args.reps)
                pct = lambda c: "/".join(f"{100 * c[v] / args.reps:.0f}" for v in VERDICTS)  # noqa: E731
                lines.append(f"{noise:>5.2f}{' tails' if tails else '':>6} {speedup:>5.2f} | {pct(fixed):>17} | "
                             f"{pct(extended):>17} {f'[{100 * low:.0f}-{100 * high:.0f}]':>13} {pairs:>5.1f}")
    write_report(lines, args.out)


if __name__ == "__main__":
    main()
