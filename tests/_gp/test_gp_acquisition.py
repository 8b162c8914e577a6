"""Log expected improvement: exact where plain EI is representable, finite far beyond."""

import math

import numpy as np
import pytest
import torch
from scipy.stats import norm

from iobo._gp.acquisition import log_augmented_ei, log_expected_improvement, log_h


def test_log_h_matches_the_closed_form_where_it_is_representable():
    z = np.linspace(-8, 5, 131)
    expected = np.log(norm.pdf(z) + z * norm.cdf(z))
    assert log_h(torch.as_tensor(z)).numpy() == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_log_h_stays_finite_and_increasing_deep_in_the_tail():
    z = torch.linspace(-1000.0, -1.0, 2000, dtype=torch.float64)
    values = log_h(z)
    assert torch.isfinite(values).all()
    assert (values.diff() > 0).all()
    # asymptotically h(z) ~ phi(z) / z^2
    assert float(values[0]) == pytest.approx(-0.5 * 1000.0**2 - 0.5 * math.log(2 * math.pi) - 2 * math.log(1000.0), rel=1e-6)


def test_log_ei_scales_with_sigma_and_grows_with_the_mean():
    mean = np.array([0.0, 0.5, 1.0])
    out = log_expected_improvement(mean, np.full(3, 0.25), best=1.0)
    assert (np.diff(out) > 0).all()
    assert out[2] == pytest.approx(math.log(0.5 * norm.pdf(0.0)))


def test_augmented_ei_discounts_what_noise_would_hide():
    mean, best, noise = np.zeros(2), 0.0, 0.1
    plain = log_expected_improvement(mean, np.array([0.01, 1.0]), best)
    augmented = log_augmented_ei(mean, np.array([0.01, 1.0]), best, noise)
    assert (augmented < plain).all()
    assert plain[1] - augmented[1] < plain[0] - augmented[0]  # the well-measured point loses more
