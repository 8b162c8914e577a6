"""Sampler benchmark: iobo's GP against random, a GA, TPE and Optuna's GP (``python -m experiments.sampler.bench``)."""
