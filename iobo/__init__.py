"""iobo: a Bayesian-optimization tuner for the HPC I/O stack.

An Optuna study whose trials are Parsl apps launching parallel-HDF5 I/O
kernels over MPI; the search space spans HDF5, MPI-IO (ROMIO) and Lustre.
``import iobo`` is light: Optuna, Parsl, torch and h5py load only when used.
"""

from iobo.errors import ConfigError, IoboError, KernelError, SpaceError
from iobo.config import IOConfig
from iobo.space import Parameter, Space, Workload, io_stack_space

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


def __getattr__(name: str):
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
