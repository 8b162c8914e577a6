"""Metrics: bandwidth, TunIO's mixed objective, RoTI, spread, result parsing."""

import json

import numpy as np
import pytest

from iobo import KernelError
from iobo.measure import (INTERVAL_MIN_RUNS, Measurement, Spread, bandwidth_mb_per_s, bootstrap_speedup,
                          confirmable_speedup, format_mb_per_s, mixed_objective, planned_pairs, raw_write_mb_per_s,
                          roti)


def test_bandwidth_is_decimal_megabytes_per_second():
    assert bandwidth_mb_per_s(2_000_000, 0.5) == 4.0
    with pytest.raises(KernelError, match="a bandwidth needs a positive duration"):
        bandwidth_mb_per_s(1, 0)


def test_mixed_objective_weights_by_bytes_written():
    # a = 3/4 of the bytes were written
    assert mixed_objective(read_mb_per_s=100, write_mb_per_s=200, bytes_read=1, bytes_written=3) == 175


def test_roti_is_gain_per_minute():
    assert roti(best_mb_per_s=300, default_mb_per_s=100, tuning_minutes=4) == 50
    assert roti(300, 100, 0) == 0


def test_bandwidths_keep_three_significant_digits_below_100_mb_per_s():
    assert [format_mb_per_s(v) for v in (2042.4, 100.0, 99.96, 12.345, 0.0021345, 0.0)] == [
        "2,042", "100", "100", "12.3", "0.00213", "0"]
    assert Spread((0.0021, 0.0023, 0.0022)).describe() == "0.0022 MB/s median of 3 (min 0.0021, max 0.0023, CV 5%)"


def null_exclusion_rate(runs: int, cases: int = 300, seed: int = 1) -> float:
    """How often the 95% interval of :func:`bootstrap_speedup` excludes 1 when both sides draw from one log-normal
    distribution (20% CV): seeded."""
    rng = np.random.default_rng(seed)
    excluded = 0
    for _ in range(cases):
        default, best = np.exp(0.2 * rng.standard_normal((2, runs)))
        low, high = bootstrap_speedup(default, best, resamples=500, seed=int(rng.integers(1 << 30)))
        excluded += not low <= 1.0 <= high
    return excluded / cases


def test_the_interval_holds_its_level_from_interval_min_runs_and_not_below():
    assert null_exclusion_rate(INTERVAL_MIN_RUNS, cases=1000) <= 0.06
    assert null_exclusion_rate(INTERVAL_MIN_RUNS + 4, cases=1000) <= 0.06
    assert null_exclusion_rate(2) >= 0.2  # two runs a side: a "speedup" of nothing about a third of the time
    assert null_exclusion_rate(1) == 1.0  # one run a side: the interval is a point


def test_spread():
    s = Spread((1.0, 2.0, 3.0, 10.0))
    assert s.median == 2.5 and s.low == 1.0 and s.high == 10.0
    assert s.cv == pytest.approx(1.0206, abs=1e-3)
    assert "median of 4" in s.describe()
    assert Spread((5.0,)).cv == 0


def test_measurement_parses_step_and_result_lines():
    lines = [
        "some MPI banner\n",
        json.dumps({"event": "step", "step": 0, "bytes": 10, "seconds": 1.0, "mb_per_s": 1e-5}) + "\n",
        json.dumps({"event": "result", "bytes": 10, "seconds": 2.0, "mb_per_s": 5e-6}) + "\n",
    ]
    m = Measurement.from_lines(lines)
    assert (m.bytes, m.seconds, m.step_mb_per_s()) == (10, 2.0, [1e-5])
    with pytest.raises(KernelError, match="no final result line"):
        Measurement.from_lines(lines[:2])
    with pytest.raises(KernelError, match="lacks 'seconds'"):
        Measurement.from_lines([json.dumps({"event": "result", "bytes": 1, "mb_per_s": 1})])


def test_raw_write_bandwidth_of_real_storage(scratch):
    assert raw_write_mb_per_s(str(scratch), mib=16) > 0
    assert list(scratch.iterdir()) == []  # the dd file is removed


def test_planned_pairs_grow_with_the_noise_and_shrink_with_the_gain_within_their_bounds():
    assert planned_pairs(0.23, 1.39, 5, 20) == 13  # pi (z.975 + z.8)^2 (0.23 / log 1.39)^2 = 12.1
    assert planned_pairs(0.13, 1.39, 5, 20) == 5  # 3.9: the floor
    assert planned_pairs(0.30, 1.10, 5, 20) == 20  # 69: the ceiling
    assert planned_pairs(0.23, 1.0, 5, 20) == planned_pairs(0.0, 1.5, 5, 20) == 5  # no gain, no noise: as asked


@pytest.mark.parametrize("noise_sd_log, pairs", [(0.23, 13), (0.068, 5), (0.30, 20)])
def test_the_confirmable_speedup_is_the_one_those_pairs_are_planned_for(noise_sd_log, pairs):
    """:func:`confirmable_speedup` inverts :func:`planned_pairs`: the speedup a confirmation of n pairs shows
    with 80% power is planned n pairs; a speedup 1% below it needs more."""
    speedup = confirmable_speedup(noise_sd_log, pairs)
    assert planned_pairs(noise_sd_log, speedup * 1.0001, 1, 10_000) == pairs
    assert planned_pairs(noise_sd_log, 1 + (speedup - 1) * 0.99, 1, 10_000) > pairs
    assert confirmable_speedup(noise_sd_log, 4 * pairs) < speedup and confirmable_speedup(0.0, pairs) == 1.0
    assert confirmable_speedup(0.068, 5) == pytest.approx(1.16, abs=0.005)  # the CaNS kernel's run-to-run noise
    with pytest.raises(KernelError, match="a confirmation has at least 1 pair of runs; got pairs=0"):
        confirmable_speedup(noise_sd_log, 0)


@pytest.mark.parametrize("noise_sd_log, speedup", [(0.23, 1.39), (0.30, 1.25), (0.20, 1.30)])
def test_at_the_planned_pairs_the_bootstrap_interval_excludes_1_with_the_planned_power(noise_sd_log, speedup):
    """Simulated log-normal runs (seeded): the interval of :func:`bootstrap_speedup` lies above 1 in >= 75% of
    confirmations at the planned size (80% planned), and in clearly fewer at half of it."""
    rng = np.random.default_rng(0)

    def power(pairs, confirmations=200):
        above = 0
        for _ in range(confirmations):
            default = np.exp(noise_sd_log * rng.standard_normal(pairs))
            best = speedup * np.exp(noise_sd_log * rng.standard_normal(pairs))
            above += bootstrap_speedup(default, best, resamples=500, seed=int(rng.integers(1 << 30)))[0] > 1.0
        return above / confirmations

    pairs = planned_pairs(noise_sd_log, speedup, 2, 100)
    assert power(pairs) >= 0.75
    assert power(max(2, pairs // 2)) < power(pairs) - 0.1
