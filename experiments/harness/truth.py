"""What can be known of a problem's truth: the one home every benchmark scores against.

A recorded table's "best" is the configuration whose median of 5-6 noisy
repeats came out highest, often by luck (issue 31).  So a benchmark scores a
run against the set S of configurations that cannot be told from the best:

- each configuration's median (MB/s) and the bootstrap standard error of
  the ``log`` of that median (its repeats resampled, :data:`DRAWS` draws);
- the table's standard error: the median of those over the configurations
  (one configuration's error, from 5 repeats, is itself too noisy to use);
- S: the configurations whose median is within one standard error of the
  best median, ``median >= best * exp(-se)`` (vpic-tmpfs-3pass: >= 90% of
  the best, 11 of 216 configurations);
- whether the configurations differ detectably at all: a one-way ANOVA
  of ``log(MB/s)`` over the configurations, ``p < ALPHA`` (ior-tmpfs-1r:
  p = 0.10, so its S is luck and it gets the weaker target "no worse than
  blind sampling");
- how often S holds the best when every configuration's repeats are
  resampled (``held``), for the reader: the share of the "best" that S's
  one standard error does not cover.

A model with known truth (a synthetic problem) needs none of this: its S is
the configurations within :data:`KNOWN_LEVEL` of the exact optimum.

:func:`median_interval` gives the bootstrap 95% interval of any reported
median (a configuration's MB/s, a benchmark's median evaluations over seeds).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from experiments.harness.problems import Problem

DRAWS = 2000  # bootstrap resamples
LEVEL = 0.95  # of a bootstrap interval
KNOWN_LEVEL = 0.99  # a known-truth problem's S: within 99% of its exact optimum
ALPHA = 0.05  # a table's configurations differ detectably when the ANOVA of log(MB/s) over them has p below this


@dataclass(frozen=True)
class Truth:
    """A problem's truth as far as it can be known.

    keys: configuration keys (:func:`experiments.harness.problems.config_key`),
    in table order (empty for a known-truth problem); medians: their median
    MB/s; log_se: the bootstrap standard error of each ``log`` median;
    se: the table's standard error of a ``log`` median (0 for known truth);
    best: the best median (MB/s); threshold: S's lowest median (MB/s),
    ``best * exp(-se)`` (``KNOWN_LEVEL * best`` for known truth); held:
    share of resamples whose best configuration is in S (1 for known truth);
    p_differ: the ANOVA's p-value (0 for known truth).
    """

    name: str
    keys: tuple[tuple, ...]
    medians: np.ndarray
    log_se: np.ndarray
    se: float
    best: float
    threshold: float
    held: float
    p_differ: float
    known: bool

    def in_s(self, true_mb_per_s: float) -> bool:
        """Whether a configuration whose true (median) MB/s is this is a member of S."""
        return true_mb_per_s >= self.threshold

    @property
    def members(self) -> frozenset[tuple]:
        """Keys of S's configurations (a table's; empty for known truth, whose S is by value)."""
        return frozenset(k for k, m in zip(self.keys, self.medians) if self.in_s(m))

    @property
    def detectable(self) -> bool:
        """The configurations differ beyond their repeats (ANOVA ``p < ALPHA``; always, for known truth)."""
        return self.p_differ < ALPHA

    def describe(self) -> str:
        """One line: S's size and threshold, the standard error, how often S holds the best."""
        if self.known:
            return f"known truth: S = within {KNOWN_LEVEL:.0%} of the exact optimum {self.best:,.0f} MB/s"
        return (f"S = {len(self.members)} of {len(self.keys)} configurations with median >= {self.threshold:,.0f} MB/s "
                f"({self.threshold / self.best:.1%} of the best median {self.best:,.0f}; standard error of a log "
                f"median {self.se:.3f}); S holds the best in {self.held:.0%} of resamples; ANOVA p = "
                f"{self.p_differ:.2g}: configurations {'differ' if self.detectable else 'do NOT differ'} detectably")


def truth_of(problem: Problem, seed: int = 0, draws: int = DRAWS) -> Truth:
    """The :class:`Truth` of a recorded table (``problem.repeats``), else of a model with known truth."""
    if problem.repeats is None:
        return Truth(problem.name, (), np.array([problem.best]), np.zeros(1), 0.0, problem.best,
                     KNOWN_LEVEL * problem.best, 1.0, 0.0, True)
    rng = np.random.default_rng(seed)
    keys = tuple(problem.repeats)
    runs = [np.asarray(problem.repeats[k], dtype=float) for k in keys]
    medians = np.array([float(np.median(r)) for r in runs])
    resampled = np.column_stack([np.median(rng.choice(r, (draws, len(r))), axis=1) for r in runs])  # draws x configs
    log_se = np.std(np.log(resampled), axis=0)
    se = float(np.median(log_se))
    best = float(medians.max())
    threshold = best * math.exp(-se)
    in_s = medians >= threshold
    held = float(np.mean(in_s[np.argmax(resampled, axis=1)]))
    p_differ = float(stats.f_oneway(*[np.log(r) for r in runs]).pvalue)
    return Truth(problem.name, keys, medians, log_se, se, best, threshold, held, p_differ, False)


def median_interval(values: Sequence[float], seed: int = 0, draws: int = DRAWS, level: float = LEVEL
                    ) -> tuple[float, float, float]:
    """``(median, low, high)``: the median of ``values`` and its bootstrap ``level`` percentile interval."""
    values = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    medians = np.median(rng.choice(values, (draws, len(values))), axis=1)
    low, high = np.percentile(medians, [50 * (1 - level), 50 * (1 + level)])
    return float(np.median(values)), float(low), float(high)

