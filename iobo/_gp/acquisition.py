"""Log expected improvement, computed stably far into the tail, and its noise-aware form.

For a Gaussian posterior ``f(x) ~ N(mu, sigma^2)`` and an incumbent value
``best``, ``EI = sigma * h(z)`` with ``z = (mu - best) / sigma`` and
``h(z) = phi(z) + z * Phi(z)``.  Plain ``log(EI)`` underflows to ``-inf``
once ``z`` is a few units negative, leaving a flat acquisition landscape;
LogEI (Ament et al., NeurIPS 2023) evaluates ``log h`` without underflow.

For ``z < -1``: ``h(z) = phi(z) * (1 - |z| * sqrt(pi/2) * erfcx(|z|/sqrt 2))``
(Mills' ratio written with the scaled complementary error function), and the
bracket is computed as ``-expm1(w)`` from its logarithm ``w`` to keep
precision where it approaches 0.

With noisy runs, :func:`log_augmented_ei` adds the factor of augmented EI
(Huang et al. 2006), ``1 - sigma_noise / sqrt(sigma^2 + sigma_noise^2)``:
where the posterior is already as sure as one more noisy run could make it
(a well-measured configuration), a new run teaches little and is discounted.
"""

from __future__ import annotations

import math

import numpy as np
import torch

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_LOG_SQRT_PI_2 = 0.5 * math.log(math.pi / 2.0)


def log_h(z: torch.Tensor) -> torch.Tensor:
    """``log(phi(z) + z * Phi(z))`` for a float64 tensor ``z`` (any shape)."""
    upper = z > -1.0
    zu = torch.where(upper, z, torch.zeros_like(z))
    normal = torch.distributions.Normal(torch.zeros_like(z), torch.ones_like(z))
    h_upper = torch.log(torch.exp(normal.log_prob(zu)) + zu * normal.cdf(zu))
    a = torch.where(upper, torch.ones_like(z), -z)  # |z| on the tail branch
    w = torch.log(a) + _LOG_SQRT_PI_2 + torch.log(torch.special.erfcx(a / math.sqrt(2.0)))
    log1mexp = torch.where(w > -math.log(2.0), torch.log(-torch.expm1(w)), torch.log1p(-torch.exp(w)))
    h_tail = -0.5 * a.square() - _LOG_SQRT_2PI + log1mexp
    return torch.where(upper, h_upper, h_tail)


def log_expected_improvement(mean: np.ndarray, variance: np.ndarray, best: float) -> np.ndarray:
    """``log EI`` (``m``) of posterior means and variances (each ``m``) over ``best``."""
    mu = torch.as_tensor(mean, dtype=torch.float64)
    sigma = torch.as_tensor(variance, dtype=torch.float64).clamp_min(1e-18).sqrt()
    return (log_h((mu - best) / sigma) + torch.log(sigma)).numpy()


def log_augmented_ei(mean: np.ndarray, variance: np.ndarray, best: float, noise: float) -> np.ndarray:
    """``log EI + log(1 - sqrt(noise / (variance + noise)))`` (``m``); noise: one run's variance."""
    var = np.maximum(np.asarray(variance, dtype=np.float64), 1e-18)
    return log_expected_improvement(mean, var, best) + np.log1p(-np.sqrt(noise / (var + noise)))
