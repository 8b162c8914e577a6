"""MPI-IO: hints as an ``MPI_Info``, opening a file with them, subarray file views, and the hints in effect.

mpi4py is imported inside the functions, so this module imports without MPI.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from iobo.errors import KernelError
from iobo.stack.libraries import mpi_library


def mpi_info(hints: Mapping[str, str]):
    """A new ``MPI.Info`` holding ``hints`` (key -> string value); the caller frees it."""
    from mpi4py import MPI

    info = MPI.Info.Create()
    for key, value in hints.items():
        info.Set(key, value)
    return info


def mpi_open(comm, path: Path, write: bool, hints: Mapping[str, str]):
    """Open ``path`` with MPI-IO on ``comm`` (created, not truncated, when ``write``; else read-only) with ``hints``."""
    from mpi4py import MPI

    mode = MPI.MODE_CREATE | MPI.MODE_WRONLY if write else MPI.MODE_RDONLY
    info = mpi_info(hints)
    try:
        return MPI.File.Open(comm, os.fspath(path), mode, info)
    finally:
        info.Free()


def byte_subarray(sizes: Sequence[int], subsizes: Sequence[int], starts: Sequence[int]):
    """A committed MPI datatype: the block ``subsizes`` at ``starts`` of a C-order byte array of ``sizes``.

    Built with the C call ``MPI_Type_create_subarray`` through ctypes: mpi4py 4
    builds derived datatypes with MPI-4's large-count calls, whose file views
    ROMIO in MPICH 4.0.2 cannot flatten ("Out of memory in file
    adio/common/flatten.c", seen for subarray, hvector and hindexed types).
    The caller frees it.
    """
    from mpi4py import MPI

    handle_type = ctypes.c_uint32 if MPI._sizeof(MPI.Datatype) == 4 else ctypes.c_void_p
    ints = ctypes.c_int * len(sizes)
    new = handle_type()
    status = mpi_library().MPI_Type_create_subarray(
        len(sizes), ints(*sizes), ints(*subsizes), ints(*starts), MPI.ORDER_C, handle_type(MPI.BYTE.handle),
        ctypes.byref(new))
    if status != 0:
        raise KernelError(f"MPI_Type_create_subarray failed (error {status}) for sizes {list(sizes)}, "
                          f"subsizes {list(subsizes)}, starts {list(starts)}")
    datatype = MPI.Datatype.fromhandle(new.value)
    datatype.Commit()
    return datatype


def mpi_file_hints(handle) -> dict[str, str]:
    """Every hint ``MPI_File_get_info`` reports on an open ``MPI.File``.

    ROMIO reports every hint it uses, its own defaults included
    (``cb_buffer_size``, ``cb_nodes``, ``romio_aggregator_list``, ...), and
    the values it settled on (``cb_nodes`` lowered to what ``cb_config_list``
    allows), so this is what took effect, not what was asked.
    """
    info = handle.Get_info()
    try:
        return dict(info.items())
    finally:
        info.Free()
