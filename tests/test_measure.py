"""Metrics: bandwidth, TunIO's mixed objective, RoTI, spread, result parsing."""

import json

import numpy as np
import pytest

from iobo import KernelError
from iobo.measure import (Measurement, Spread, bandwidth_mb_per_s, bootstrap_speedup, mixed_objective, planned_pairs,
                          raw_write_mb_per_s, roti)


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
