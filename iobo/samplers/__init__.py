"""Optuna samplers for I/O tuning.

:class:`GPSampler` is Bayesian optimisation with a GPyTorch Gaussian process
(the maths lives in :mod:`iobo._gp`); torch is imported only when it first fits.
"""

from iobo.samplers._gp import GPSampler

__all__ = ["GPSampler"]
