"""iobo: a Bayesian-optimization tuner for the HPC I/O stack.

An Optuna study whose trials are Parsl apps launching parallel-HDF5 I/O
kernels over MPI; the search space spans HDF5, MPI-IO (ROMIO) and Lustre.
``import iobo`` is light: Optuna, Parsl, torch and h5py load only when used.
"""

from iobo.errors import ConfigError, IoboError, KernelError, SpaceError

__all__ = [
    "ConfigError",
    "IOConfig",
    "IoboError",
    "KernelError",
    "Parameter",
    "Space",
    "SpaceError",
    "Tuner",
    "Workload",
    "hdf5",
    "io_stack_space",
    "tune",
]
__version__ = "0.1.0"


_LAZY = {"IOConfig": "iobo.config", "Parameter": "iobo.space", "Space": "iobo.space", "Workload": "iobo.space",
         "io_stack_space": "iobo.space"}  # loaded when first used: a replay kernel's ranks import only iobo.errors


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    if name == "Tuner":
        from iobo.tuner import Tuner

        return Tuner
    if name == "tune":
        from iobo.decorator import tune

        return tune
    if name == "hdf5":
        import importlib

        return importlib.import_module("iobo.hdf5")
    raise AttributeError(f"module 'iobo' has no attribute {name!r}")
