"""Contract test suites that every plug-in of its kind passes, for iobo's own tests and for users' plug-ins.

Each module holds a test class to subclass (pytest collects it from the
subclass), in the manner of ``optuna.testing``; they import pytest.
"""
