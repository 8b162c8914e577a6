"""Measurements and the metrics the literature reports.

Units: bytes, seconds, and MB/s with MB = 10**6 bytes (as IOR and the
H5Tuner/TunIO papers report). Tuning time for RoTI is in minutes.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from iobo.errors import KernelError

MB = 1_000_000
INTERVAL_MIN_RUNS = 5
"""Runs of each configuration a speedup's interval (:func:`bootstrap_speedup`) needs. With fewer, its 95% interval
excludes 1 far more often than 5% of the time when both sides are the same configuration (one run each: always);
``tests/test_measure.py`` shows it."""


def format_mb_per_s(value: float) -> str:
    """A bandwidth (or a rate of it) for people: thousands separated from 100 up, 3 significant digits below
    (a program that writes 128 bytes measures 0.00213 MB/s, not 0)."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def bandwidth_mb_per_s(nbytes: int, seconds: float) -> float:
    """Bytes moved over seconds (open + transfer + close, max over ranks), in MB/s."""
    if seconds <= 0:
        raise KernelError(f"a bandwidth needs a positive duration; got {seconds!r} s for {nbytes} bytes: "
                          f"the run's timing is broken (check that the kernel times open + transfer + close)")
    return nbytes / seconds / MB


def mixed_objective(read_mb_per_s: float, write_mb_per_s: float, bytes_read: int, bytes_written: int) -> float:
    """TunIO's objective ``(1 - a) * BW_read + a * BW_write``, ``a`` = share of bytes written."""
    moved = bytes_read + bytes_written
    if moved <= 0:
        raise KernelError("a mixed objective needs some bytes moved; the run reported 0 bytes read and written")
    a = bytes_written / moved
    return (1 - a) * read_mb_per_s + a * write_mb_per_s


def roti(best_mb_per_s: float, default_mb_per_s: float, tuning_minutes: float) -> float:
    """Return on tuning investment: MB/s gained over the default per minute of tuning."""
    if tuning_minutes <= 0:
        return 0.0
    return (best_mb_per_s - default_mb_per_s) / tuning_minutes


@dataclass(frozen=True)
class Spread:
    """Median and spread of repeated measurements (MB/s)."""

    values: tuple[float, ...]

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def low(self) -> float:
        return min(self.values)

    @property
    def high(self) -> float:
        return max(self.values)

    @property
    def cv(self) -> float:
        """Coefficient of variation (stdev / mean); 0 for fewer than two values."""
        if self.n < 2:
            return 0.0
        return statistics.stdev(self.values) / statistics.fmean(self.values)

    def describe(self, unit: str = "MB/s") -> str:
        return (
            f"{format_mb_per_s(self.median)} {unit} median of {self.n} "
            f"(min {format_mb_per_s(self.low)}, max {format_mb_per_s(self.high)}, CV {100 * self.cv:.0f}%)"
        )


@dataclass(frozen=True)
class Measurement:
    """What one kernel run reported: its final JSON result and its step lines."""

    mb_per_s: float
    bytes: int
    seconds: float
    steps: tuple[Mapping[str, Any], ...] = ()
    result: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_lines(cls, lines: Sequence[str]) -> "Measurement":
        """Parse a kernel's stdout: JSON step lines and one final result line."""
        import json

        steps, result = [], None
        for line in lines:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if event.get("event") == "step":
                steps.append(event)
            elif event.get("event") == "result":
                result = event
        if result is None:
            raise KernelError("the kernel printed no final result line ({\"event\": \"result\", ...})")
        for key in ("mb_per_s", "bytes", "seconds"):
            if key not in result:
                raise KernelError(f"the kernel's result line lacks {key!r}: {result}")
        return cls(float(result["mb_per_s"]), int(result["bytes"]), float(result["seconds"]), tuple(steps), result)

    def step_mb_per_s(self) -> list[float]:
        return [float(s["mb_per_s"]) for s in self.steps]

    def step_elapsed_s(self) -> list[float]:
        """Seconds from the start of the kernel's phase to each step's end (untimed work included);
        empty when the kernel's step lines do not carry ``elapsed_s``."""
        return [float(s["elapsed_s"]) for s in self.steps if "elapsed_s" in s]


def raw_write_mb_per_s(directory: str, mib: int = 256) -> float:
    """Sequential write bandwidth of the storage under ``directory`` (MB/s).

    ``dd`` of ``mib`` MiB from /dev/zero with ``conv=fdatasync``, so the time
    includes flushing to the device (on tmpfs the flush is free).
    """
    import os
    import re
    import subprocess
    import tempfile

    fd, path = tempfile.mkstemp(prefix="iobo-dd-", dir=directory)
    os.close(fd)
    try:
        done = subprocess.run(
            ["dd", "if=/dev/zero", f"of={path}", "bs=1M", f"count={mib}", "conv=fdatasync"],
            capture_output=True, text=True, check=False,
        )
    finally:
        os.unlink(path)
    match = re.search(r"^(\d+) bytes .* copied, ([\d.]+) s", done.stderr, re.MULTILINE)
    if done.returncode != 0 or not match:
        raise KernelError("dd failed to measure the raw write bandwidth", stderr_tail=done.stderr[-2000:])
    return bandwidth_mb_per_s(int(match.group(1)), float(match.group(2)))


def bootstrap_speedup(
    default_mb_per_s, best_mb_per_s, level: float = 0.95, resamples: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of median(best) / median(default).

    Both samples are resampled with replacement ``resamples`` times (seeded,
    so the interval is reproducible). Its level holds from ``INTERVAL_MIN_RUNS`` runs of each.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    default = np.asarray(default_mb_per_s, dtype=float)
    best = np.asarray(best_mb_per_s, dtype=float)
    ratios = (
        np.median(rng.choice(best, (resamples, best.size)), axis=1)
        / np.median(rng.choice(default, (resamples, default.size)), axis=1)
    )
    tail = (1 - level) / 2
    low, high = np.quantile(ratios, [tail, 1 - tail])
    return float(low), float(high)


def speedup_interval(default_mb_per_s, best_mb_per_s, level: float = 0.95, resamples: int = 2000,
                     seed: int = 0) -> tuple[float, float] | None:
    """:func:`bootstrap_speedup` of a confirmation's runs; None when either side has fewer than
    ``INTERVAL_MIN_RUNS`` runs (too few for an interval: no speedup is claimed from them)."""
    if min(len(default_mb_per_s), len(best_mb_per_s)) < INTERVAL_MIN_RUNS:
        return None
    return bootstrap_speedup(default_mb_per_s, best_mb_per_s, level, resamples, seed)


def pooled_noise_sd_log(*samples: Sequence[float]) -> float:
    """The run-to-run standard deviation of ``log(MB/s)`` pooled over ``samples`` (each the runs of one
    configuration, positive): the root of the within-sample variances weighted by their degrees of freedom;
    0.0 with no sample of 2 runs."""
    import math

    logs = [[math.log(v) for v in sample] for sample in samples if len(sample) >= 2]
    freedom = sum(len(sample) - 1 for sample in logs)
    if not freedom:
        return 0.0
    return math.sqrt(sum(statistics.variance(sample) * (len(sample) - 1) for sample in logs) / freedom)


def planned_pairs(noise_sd_log: float, expected_speedup: float, at_least: int, at_most: int,
                  level: float = 0.95, power: float = 0.8) -> int:
    """Interleaved (default, best) pairs a confirmation needs so that the ``level`` interval of
    :func:`bootstrap_speedup` excludes 1 with probability ``power`` when the true speedup is ``expected_speedup``.

    noise_sd_log: standard deviation of ``log(MB/s)`` between runs of one configuration (0.2: about 20% CV).
    The log of a median of n runs varies as ``(pi / 2) s^2 / n`` (normal runs), the log ratio of two such
    medians as ``pi s^2 / n``; n solves ``(z_level + z_power) sqrt(pi s^2 / n) = log(expected_speedup)``.
    Clamped to ``[at_least, at_most]``; ``at_least`` when no gain is expected or no noise was measured.
    """
    import math

    if expected_speedup <= 1.0 or noise_sd_log <= 0.0:
        return at_least
    needed = math.ceil(math.pi * (_z_sum(level, power) * noise_sd_log / math.log(expected_speedup)) ** 2)
    return max(at_least, min(at_most, needed))


def confirmable_speedup(noise_sd_log: float, pairs: int, level: float = 0.95, power: float = 0.8) -> float:
    """The smallest speedup a confirmation of ``pairs`` interleaved (default, best) pairs shows with probability
    ``power`` (its ``level`` interval of :func:`bootstrap_speedup` excluding 1): :func:`planned_pairs` solved for the
    speedup, ``exp((z_level + z_power) sqrt(pi s^2 / pairs))``. noise_sd_log: ``s``, the standard deviation of
    ``log(MB/s)`` between runs of one configuration; 1.0 with no noise."""
    import math

    if isinstance(pairs, bool) or not isinstance(pairs, int) or pairs < 1:
        raise KernelError(f"a confirmation has at least 1 pair of runs; got pairs={pairs!r}")
    return math.exp(_z_sum(level, power) * math.sqrt(math.pi * max(noise_sd_log, 0.0) ** 2 / pairs))


def _z_sum(level: float, power: float) -> float:
    """``z_level + z_power``: the normal quantiles of a two-sided ``level`` interval and of ``power``."""
    z = statistics.NormalDist()
    return z.inv_cdf(0.5 + level / 2) + z.inv_cdf(power)


def paired_ratio(with_mb_per_s, without_mb_per_s, level: float = 0.95) -> tuple[float, tuple[float, float]]:
    """Geometric mean of the pairwise ratios with_i / without_i and its t interval (log scale).

    For interleaved pairs: a drift of the machine between pairs cancels in
    each ratio. Needs >= 2 pairs of positive values.
    """
    import math

    from scipy.stats import t

    logs = [math.log(w / wo) for w, wo in zip(with_mb_per_s, without_mb_per_s)]
    if len(logs) < 2:
        raise KernelError(f"a paired ratio needs at least 2 pairs of runs; got {len(logs)}")
    mean = statistics.fmean(logs)
    half = t.ppf(0.5 + level / 2, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), (math.exp(mean - half), math.exp(mean + half))
