"""Contract suites that every iobo plug-in of a kind passes, for iobo's own tests and for users' plug-ins.

Each module holds a test class to subclass (pytest collects it from the
subclass), in the manner of ``optuna.testing``; they import pytest:

- :mod:`iobo.testing.kernels`: ``KernelContract`` for I/O kernels (every built-in kernel);
- :mod:`iobo.testing.samplers`: ``SamplerContract`` for Optuna samplers (every sampler of :mod:`iobo.samplers`).
"""
