"""Applying a configuration to HDF5, MPI-IO and Lustre, and reading back what took effect.

The layer between an ``IOConfig`` and the libraries, used by the built-in
kernels, by :mod:`iobo.hdf5` (the face for a task's own I/O) and mirrored in
C by the preloaded shim (``adapters/``):

- :mod:`iobo.stack.applicability`: which parameters can take effect on this
  file system and file layout, the values to apply and the MPI-IO hints;
- :mod:`iobo.stack.hdf5`: property lists (file access, dataset creation,
  transfer), chunk shapes, files, datasets, hyperslab I/O, and the HDF5
  calls h5py does not wrap;
- :mod:`iobo.stack.mpiio`: ``MPI_Info`` from hints, MPI-IO open, subarray
  file views, the hints in effect (``MPI_File_get_info``);
- :mod:`iobo.stack.effect`: the settings read back from an open file and the
  requested ones it does not confirm;
- :mod:`iobo.stack.libraries`: the libmpi and libhdf5 the bindings loaded, for ctypes.

Importing it loads neither h5py nor mpi4py: each function imports what it needs.
"""

from iobo.stack.applicability import (
    INERT_REASONS,
    environment_limits,
    inert_knobs,
    LUSTRE,
    MPI_ONLY_HDF5,
    applicable,
    filesystem_type,
    not_applicable,
    requested_hints,
    romio_only,
)
from iobo.stack.effect import (
    chunk_request,
    effective_hdf5,
    effective_hints,
    unconfirmed,
    unconfirmed_settings,
)
from iobo.stack.hdf5 import (
    ACTUAL_IO_MODES,
    actual_io_mode,
    chunk_shape,
    chunked_create_plist,
    coll_metadata,
    create_dataset,
    create_dataset_1d,
    create_file,
    dataset_create_plist,
    dataset_transfer_plist,
    driver_name,
    file_access_plist,
    mpi_file_handle,
    open_file,
    read_hyperslab,
    requested_chunks,
    select,
    set_coll_metadata,
    set_mdc_initial_size,
    write_hyperslab,
    write_slice_1d,
)
from iobo.stack.mpiio import byte_subarray, mpi_file_hints, mpi_info, mpi_open

__all__ = [
    "environment_limits",
    "romio_only",
    "inert_knobs",
    "INERT_REASONS",
    "ACTUAL_IO_MODES",
    "LUSTRE",
    "MPI_ONLY_HDF5",
    "actual_io_mode",
    "applicable",
    "byte_subarray",
    "chunk_request",
    "chunk_shape",
    "chunked_create_plist",
    "coll_metadata",
    "create_dataset",
    "create_dataset_1d",
    "create_file",
    "dataset_create_plist",
    "dataset_transfer_plist",
    "driver_name",
    "effective_hdf5",
    "effective_hints",
    "file_access_plist",
    "filesystem_type",
    "mpi_file_handle",
    "mpi_file_hints",
    "mpi_info",
    "mpi_open",
    "not_applicable",
    "open_file",
    "read_hyperslab",
    "requested_chunks",
    "requested_hints",
    "select",
    "set_coll_metadata",
    "set_mdc_initial_size",
    "unconfirmed",
    "unconfirmed_settings",
    "write_hyperslab",
    "write_slice_1d",
]
