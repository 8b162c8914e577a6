"""Metrics: bandwidth, TunIO's mixed objective, RoTI, spread, result parsing."""

import json

import pytest

from iobo import KernelError
from iobo.measure import Measurement, Spread, bandwidth_mb_per_s, mixed_objective, raw_write_mb_per_s, roti


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
