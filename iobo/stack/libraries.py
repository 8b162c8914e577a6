"""The C libraries mpi4py and h5py have loaded, opened with ctypes for the calls they do not wrap.

Both are found in ``/proc/self/maps`` rather than by name, so that the ctypes
calls reach the very libmpi and libhdf5 the Python bindings use (a second
copy of either library would have its own state).
"""

from __future__ import annotations

import ctypes
import functools

from iobo.errors import KernelError


def loaded_libraries(name: str) -> list[str]:
    """Paths of the shared libraries loaded in this process whose path contains ``name``, from /proc/self/maps."""
    paths = []
    with open("/proc/self/maps") as maps:
        for line in maps:  # address perms offset device inode [path]
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and name in fields[5] and fields[5].strip() not in paths:
                paths.append(fields[5].strip())
    return paths


@functools.cache
def mpi_library() -> ctypes.CDLL:
    """The MPI library mpi4py has loaded (see :func:`iobo.stack.mpiio.byte_subarray` for why it is called directly)."""
    from mpi4py import MPI  # noqa: F401  (loads libmpi)

    paths = loaded_libraries("libmpi")
    for path in paths:
        library = ctypes.CDLL(path)
        if hasattr(library, "MPI_Type_create_subarray"):
            return library
    raise KernelError(f"no loaded MPI library has MPI_Type_create_subarray (looked at {paths or 'none'}); "
                      "build mpi4py against the system MPI (CC=mpicc.mpich, see the Makefile)")


@functools.cache
def hdf5_library() -> ctypes.CDLL:
    """The libhdf5 h5py has loaded, for calls h5py does not wrap.

    Raises :class:`KernelError` when no loaded libhdf5 has the parallel API
    (h5py built without ``HDF5_MPI=ON``).
    """
    import h5py  # noqa: F401  (loads libhdf5)

    paths = loaded_libraries("libhdf5")
    for path in paths:
        library = ctypes.CDLL(path)
        if hasattr(library, "H5Pset_coll_metadata_write"):
            return library
    raise KernelError(
        f"no loaded libhdf5 has the parallel API (looked at {list(paths) or 'none'}); "
        "build h5py against a parallel HDF5 (HDF5_MPI=ON, see the Makefile)"
    )
