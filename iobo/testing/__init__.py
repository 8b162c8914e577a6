"""Contract suites that every iobo plug-in of a kind passes (pytest classes, imported by tests only).

- :mod:`iobo.testing.samplers`: :class:`~iobo.testing.samplers.SamplerContract`
  for Optuna samplers (every sampler of :mod:`iobo.samplers`).
"""
