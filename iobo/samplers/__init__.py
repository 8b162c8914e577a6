"""Optuna samplers for I/O tuning, and for any objective.

:class:`GPSampler` is Bayesian optimisation with a GPyTorch Gaussian process
(the maths lives in :mod:`iobo._gp`) over every parameter of a study, of any
Optuna distribution; torch is imported only when it first fits.
:class:`ImpactFirstSampler` wraps a sampler (by default a ``GPSampler``) to
tune the highest-impact parameters first and widen the active set as the
tuning stalls.  Both pass the contract of :mod:`iobo.testing.samplers`.
"""

from iobo.samplers._gp import GPSampler
from iobo.samplers._impact_first import ImpactFirstSampler

__all__ = ["GPSampler", "ImpactFirstSampler"]
