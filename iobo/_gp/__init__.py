"""The maths behind :class:`iobo.samplers.GPSampler`, free of Optuna.

- :mod:`~iobo._gp.encoding`: finite, conditional spaces -> unit cube;
- :mod:`~iobo._gp.model`: the GPyTorch exact GP, its fit and posterior;
- :mod:`~iobo._gp.acquisition`: log expected improvement;
- :mod:`~iobo._gp.optim`: its maximisation over the discrete space;
- :mod:`~iobo._gp.design`: the space-filling start.

``model`` and ``acquisition`` import torch; import them lazily.
"""
