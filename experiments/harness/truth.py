"""What can be known of a problem's truth: the one home every benchmark scores against.

A recorded table's "best" is the configuration whose median of 5-6 noisy
repeats came out highest, often by luck (issue 31).  So a benchmark scores a
run against the set S of configurations that cannot be told from the best:

- each configuration's median (MB/s) and the bootstrap standard error of
  the ``log`` of that median (:data:`DRAWS` draws).  Runs of one job (one
  process of :mod:`experiments.sweep`) share its moment on the machine, so
  where a configuration was measured in several jobs the jobs are
  resampled, then the runs within each; where in one job only, the runs
  cannot show how much they share, and the job-to-job spread of a table
  of the same workload recorded in several passes
  (``Problem.companion``, :func:`between_job_sd`) is added to each
  resampled median (vpic-tmpfs, one job of 5 runs per configuration: its
  two best configurations rank 68th and 74th of 216 in vpic-tmpfs-3pass,
  whose typical configuration spreads 0.17 in ``log`` MB/s from job to job
  and 0.09 within a job; ``experiments/results/truth-jobs.txt``);
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

from experiments.harness.problems import Problem, load_table

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
    p_differ: the ANOVA's p-value (0 for known truth); error_basis: what
    the standard errors resample, in words (empty for known truth).
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
    error_basis: str = ""

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
                f"median {self.se:.3f}, {self.error_basis}); S holds the best in {self.held:.0%} of resamples; "
                f"ANOVA p = {self.p_differ:.2g}: configurations "
                f"{'differ' if self.detectable else 'do NOT differ'} detectably")


def truth_of(problem: Problem, seed: int = 0, draws: int = DRAWS) -> Truth:
    """The :class:`Truth` of a recorded table (``problem.repeats``), else of a model with known truth."""
    if problem.repeats is None:
        return Truth(problem.name, (), np.array([problem.best]), np.zeros(1), 0.0, problem.best,
                     KNOWN_LEVEL * problem.best, 1.0, 0.0, True)
    rng = np.random.default_rng(seed)
    keys = tuple(problem.repeats)
    runs = [np.asarray(problem.repeats[k], dtype=float) for k in keys]
    groups = [problem.runs_by_job(k) for k in keys]
    medians = np.array([float(np.median(r)) for r in runs])
    if all(len(g) == len(r) for g, r in zip(groups, runs)):  # every run its own job: resample the runs
        resampled = np.column_stack([np.median(rng.choice(r, (draws, len(r))), axis=1) for r in runs])
        basis = "runs resampled, each its own job" if problem.jobs else "runs resampled (jobs not recorded)"
    else:
        borrowed = between_job_sd(load_table(problem.companion)) if problem.companion else None
        resampled = np.column_stack([resampled_medians(g, rng, draws, borrowed or 0.0) for g in groups])
        if all(len(g) > 1 for g in groups):
            basis = "jobs resampled, then the runs within each"
        elif borrowed is not None:
            basis = (f"one job per configuration: runs resampled, plus a job-to-job spread of {borrowed:.3f} in log "
                     f"MB/s from {problem.companion.stem}")
        else:
            basis = "one job per configuration and no multi-pass table to tell its spread: runs resampled only"
    log_se, se, threshold = one_standard_error(medians, resampled)
    best = float(medians.max())
    in_s = medians >= threshold
    held = float(np.mean(in_s[np.argmax(resampled, axis=1)]))
    p_differ = float(stats.f_oneway(*[np.log(r) for r in runs]).pvalue)
    return Truth(problem.name, keys, medians, log_se, se, best, threshold, held, p_differ, False, basis)


def one_standard_error(medians: np.ndarray, resampled: np.ndarray) -> tuple[np.ndarray, float, float]:
    """S's rule for configurations' ``medians`` (MB/s, one per configuration) and their bootstrap ``resampled``
    medians (draws x configurations): ``(log_se, se, threshold)``, each configuration's standard error of its
    ``log`` median, the set's (their median) and S's lowest median, ``best * exp(-se)`` (MB/s)."""
    log_se = np.std(np.log(resampled), axis=0)
    se = float(np.median(log_se))
    return log_se, se, float(medians.max()) * math.exp(-se)


def resampled_medians(groups: list[np.ndarray], rng: np.random.Generator, draws: int,
                      job_sd: float = 0.0) -> np.ndarray:
    """``draws`` bootstrap medians of one configuration's runs (MB/s), one array per job
    (:meth:`Problem.runs_by_job`): its jobs resampled, then the runs within each job; with one job, ``job_sd`` (of
    ``log`` MB/s between jobs, from elsewhere) is added to each median as a log-normal factor."""
    widest = max(len(g) for g in groups)
    picked = np.full((draws, len(groups), widest), np.nan)
    choice = rng.integers(len(groups), size=(draws, len(groups)))
    for k, group in enumerate(groups):
        chosen = choice == k  # draws x positions
        picked[chosen, :len(group)] = group[rng.integers(len(group), size=(int(chosen.sum()), len(group)))]
    medians = np.nanmedian(picked.reshape(draws, -1), axis=1)
    if len(groups) == 1 and job_sd:
        medians = medians * np.exp(job_sd * rng.standard_normal(draws))
    return medians


def job_spreads(problem: Problem) -> tuple[np.ndarray, np.ndarray]:
    """Per configuration of a table measured in at least 2 jobs of at least 2 runs each: (within-job, between-job)
    standard deviations of ``log`` MB/s, the latter the one-way random-effects estimate ((between-job mean square
    - within-job mean square) / runs per job, clipped at 0); empty where no configuration has such jobs (runs of
    one job cannot be told from the job's own spread)."""
    within, between = [], []
    for key in problem.repeats:
        groups = [np.log(runs) for runs in problem.runs_by_job(key)]
        if len(groups) < 2 or min(len(g) for g in groups) < 2:
            continue
        size = float(np.mean([len(g) for g in groups]))
        spread = float(np.mean([g.var(ddof=1) for g in groups]))
        within.append(math.sqrt(spread))
        between.append(math.sqrt(max(0.0, (size * float(np.var([g.mean() for g in groups], ddof=1)) - spread) / size)))
    return np.array(within), np.array(between)


def between_job_sd(problem: Problem) -> float | None:
    """The typical spread of ``log`` MB/s between jobs of one configuration: the median over configurations of
    :func:`job_spreads`' between-job estimate; None when the table has no configuration to tell it."""
    _, between = job_spreads(problem)
    return float(np.median(between)) if len(between) else None


def median_interval(values: Sequence[float], seed: int = 0, draws: int = DRAWS, level: float = LEVEL
                    ) -> tuple[float, float, float]:
    """``(median, low, high)``: the median of ``values`` and its bootstrap ``level`` percentile interval."""
    values = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    medians = np.median(rng.choice(values, (draws, len(values))), axis=1)
    low, high = np.percentile(medians, [50 * (1 - level), 50 * (1 + level)])
    return float(np.median(values)), float(low), float(high)


def share_interval(hits: int, runs: int) -> tuple[float, float]:
    """The 95% Wilson score interval ``(low, high)`` of a share ``hits / runs`` (runs >= 1)."""
    z, share = 1.96, hits / runs
    centre = share + z * z / (2 * runs)
    half = z * math.sqrt(share * (1 - share) / runs + z * z / (4 * runs * runs))
    return max(0.0, (centre - half) / (1 + z * z / runs)), min(1.0, (centre + half) / (1 + z * z / runs))
