"""Optuna samplers for I/O tuning.

:class:`GPSampler` is Bayesian optimisation with a GPyTorch Gaussian process
(the maths lives in :mod:`iobo._gp`); torch is imported only when it first fits.
:class:`ImpactFirstSampler` wraps a sampler (by default a ``GPSampler``) to
tune the highest-impact parameters first and widen the active set as the
tuning stalls.
"""

from iobo.samplers._gp import GPSampler
from iobo.samplers._impact_first import ImpactFirstSampler

__all__ = ["GPSampler", "ImpactFirstSampler"]
