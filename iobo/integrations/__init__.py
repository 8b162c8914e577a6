"""Glue to the tools iobo runs with: Parsl, optuna-dashboard (and later Ray, Darshan).

Each module imports its tool lazily so ``import iobo`` stays light.
"""
