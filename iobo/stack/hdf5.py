"""HDF5: the property lists a configuration sets, files and datasets made with them, hyperslab I/O,
and the calls h5py does not wrap (ctypes on the libhdf5 h5py loaded).

Sizes are in bytes. h5py and numpy are imported inside the functions, so this
module imports on a login node without them.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from iobo.config import IOConfig
from iobo.errors import KernelError
from iobo.stack.libraries import hdf5_library
from iobo.stack.mpiio import mpi_info

H5P_DEFAULT = 0
ACTUAL_IO_MODES = {0: "no_collective", 1: "chunk_independent", 2: "chunk_collective", 3: "chunk_mixed",
                   4: "contiguous_collective"}
"""H5D_mpio_actual_io_mode_t values (H5Ppublic.h) by name."""

# -- calls h5py does not wrap ---------------------------------------------------------


def _h5call(function: str, *args) -> None:
    """Call HDF5 C ``function``; raise :class:`KernelError` when it returns a negative herr_t."""
    status = getattr(hdf5_library(), function)(*args)
    if status < 0:
        raise KernelError(f"{function} failed (herr_t {status})")


def set_coll_metadata(fapl, enabled: bool) -> None:
    """H5Pset_all_coll_metadata_ops and H5Pset_coll_metadata_write on file access plist ``fapl``."""
    for function in ("H5Pset_all_coll_metadata_ops", "H5Pset_coll_metadata_write"):
        _h5call(function, ctypes.c_int64(fapl.id), ctypes.c_bool(enabled))


def coll_metadata(fapl) -> dict[str, bool]:
    """Collective metadata reads (``coll_metadata_ops``) and writes (``coll_metadata_write``) of ``fapl``."""
    out = {}
    for key, function in (("coll_metadata_ops", "H5Pget_all_coll_metadata_ops"),
                          ("coll_metadata_write", "H5Pget_coll_metadata_write")):
        flag_value = ctypes.c_bool()
        _h5call(function, ctypes.c_int64(fapl.id), ctypes.byref(flag_value))
        out[key] = flag_value.value
    return out


def actual_io_mode(dxpl) -> str:
    """How the last write with transfer plist ``dxpl`` was done (H5Pget_mpio_actual_io_mode), by name."""
    mode = ctypes.c_int()
    _h5call("H5Pget_mpio_actual_io_mode", ctypes.c_int64(dxpl.id), ctypes.byref(mode))
    return ACTUAL_IO_MODES.get(mode.value, f"unknown ({mode.value})")


def mpi_file_handle(file_id) -> int:
    """The ``MPI_File`` under an HDF5 file opened with the mpio driver.

    H5Fget_vfd_handle gives a pointer to the driver's ``MPI_File``. (h5py's
    ``FileID.get_vfd_handle`` reads that pointer as a C int, truncating it.)
    """
    pointer = ctypes.c_void_p()
    _h5call("H5Fget_vfd_handle", ctypes.c_int64(file_id.id), ctypes.c_int64(H5P_DEFAULT), ctypes.byref(pointer))
    return ctypes.c_void_p.from_address(pointer.value).value


def driver_name(fapl) -> str:
    """HDF5 file driver of ``fapl``: ``mpio``, ``sec2`` or ``other``."""
    from h5py import h5fd

    return {h5fd.MPIO: "mpio", h5fd.SEC2: "sec2"}.get(fapl.get_driver(), "other")


# -- property lists --------------------------------------------------------------------


def set_mdc_initial_size(fapl, size: int) -> None:
    """Metadata cache initial size (bytes), widening min_size and max_size to keep min <= initial <= max."""
    config = fapl.get_mdc_config()
    config.set_initial_size = True
    config.initial_size = size
    config.min_size = min(config.min_size, size)
    config.max_size = max(config.max_size, size)
    fapl.set_mdc_config(config)


def file_access_plist(config: IOConfig, apply: Mapping[str, Any], comm=None,
                      hints: Mapping[str, str] | None = None):
    """The file access property list for the values in ``apply`` (see :func:`iobo.stack.applicable`).

    comm: an MPI communicator selects the mpio driver with ``hints`` as its
    MPI_Info (one shared file); ``None`` keeps HDF5's POSIX sec2 driver.
    Alignment takes both threshold and interval from ``config`` when either is
    applied.
    """
    from h5py import h5p

    fapl = h5p.create(h5p.FILE_ACCESS)
    if comm is not None:
        info = mpi_info(hints or {})
        fapl.set_fapl_mpio(comm, info)  # HDF5 keeps a duplicate
        info.Free()
    if "alignment_threshold" in apply or "alignment_interval" in apply:
        fapl.set_alignment(config["alignment_threshold"], config["alignment_interval"])
    if "meta_block_size" in apply:
        fapl.set_meta_block_size(apply["meta_block_size"])
    if "sieve_buf_size" in apply:
        fapl.set_sieve_buf_size(apply["sieve_buf_size"])
    if "mdc_initial_size" in apply:
        set_mdc_initial_size(fapl, apply["mdc_initial_size"])
    if "coll_metadata" in apply:
        set_coll_metadata(fapl, apply["coll_metadata"])
    return fapl


def chunk_shape(chunk_bytes: int, itemsize: int, shape: Sequence[int]) -> tuple[int, ...]:
    """A chunk of at most ``chunk_bytes`` bytes (at least one item) for a dataset of ``shape``.

    Filled in C (row-major) order: whole trailing dimensions while they fit,
    then as much of the next dimension as fits, 1 along the leading ones. For
    a 1-D dataset: ``min(chunk_bytes // itemsize, length)`` items.
    """
    budget = max(1, chunk_bytes // itemsize)  # items still to place
    chunk = [1] * len(shape)
    for axis in reversed(range(len(shape))):
        chunk[axis] = max(1, min(shape[axis], budget))
        if chunk[axis] < shape[axis]:
            break
        budget //= shape[axis]
    return tuple(chunk)


def requested_chunks(apply: Mapping[str, Any], itemsize: int, shape: Sequence[int]) -> tuple[int, ...] | None:
    """The chunk shape for a dataset of ``shape``: ``chunk_size`` bytes by :func:`chunk_shape` when
    ``layout=chunked`` applies, else ``None`` (HDF5's default contiguous layout)."""
    return chunk_shape(apply["chunk_size"], itemsize, shape) if apply.get("layout") == "chunked" else None


def chunked_create_plist(chunks: Sequence[int] | None):
    """A dataset creation property list: chunks of shape ``chunks``, or contiguous for ``None``."""
    from h5py import h5p

    dcpl = h5p.create(h5p.DATASET_CREATE)
    if chunks is not None:
        dcpl.set_chunk(tuple(chunks))
    return dcpl


def dataset_create_plist(apply: Mapping[str, Any], length: int, itemsize: int):
    """The dataset creation property list of a 1-D dataset of ``length`` items of ``itemsize`` bytes.

    ``layout=chunked`` sets chunks of ``chunk_size`` bytes, never larger
    than the dataset; otherwise HDF5's default contiguous layout.
    """
    return chunked_create_plist(requested_chunks(apply, itemsize, (length,)))


def dataset_transfer_plist(apply: Mapping[str, Any]):
    """The dataset transfer property list: collective MPI-IO when ``transfer_mode=collective`` applies."""
    from h5py import h5fd, h5p

    dxpl = h5p.create(h5p.DATASET_XFER)
    if apply.get("transfer_mode") == "collective":
        dxpl.set_dxpl_mpio(h5fd.MPIO_COLLECTIVE)
    return dxpl


# -- files and datasets ----------------------------------------------------------------


def create_file(path: Path, fapl):
    """Create (or truncate) HDF5 file ``path`` with access plist ``fapl``.

    Returns an ``h5py.File``: its ``close()`` closes every object still open
    in the file first, which the mpio driver requires.
    """
    import h5py
    from h5py import h5f

    return h5py.File(h5f.create(os.fsencode(path), h5f.ACC_TRUNC, fapl=fapl))


def open_file(path: Path, fapl):
    """Open existing HDF5 file ``path`` read-only with access plist ``fapl``; an ``h5py.File`` (see :func:`create_file`)."""
    import h5py
    from h5py import h5f

    return h5py.File(h5f.open(os.fsencode(path), h5f.ACC_RDONLY, fapl=fapl))


def create_dataset(group, name: str, shape: Sequence[int], dcpl, dtype: str = "<f4"):
    """A new dataset of ``shape`` and numpy ``dtype`` (little-endian float32 by default) in ``group``; its DatasetID."""
    import numpy as np
    from h5py import h5d, h5s, h5t

    file_type = h5t.py_create(np.dtype(dtype))
    return h5d.create(group.id, name.encode(), file_type, h5s.create_simple(tuple(shape)), dcpl=dcpl)


def create_dataset_1d(group, name: str, length: int, dcpl):
    """A new 1-D little-endian float32 dataset of ``length`` elements in ``group``; its low-level DatasetID."""
    return create_dataset(group, name, (length,), dcpl)


def select(dataset_id, start: Sequence[int], count: Sequence[int], stride: Sequence[int] | None = None):
    """The dataset's file dataspace with the hyperslab ``start``, ``count`` (and ``stride``) selected."""
    file_space = dataset_id.get_space()
    file_space.select_hyperslab(tuple(start), tuple(count), tuple(stride) if stride else None)
    return file_space


def write_hyperslab(dataset_id, values, start: Sequence[int], dxpl) -> None:
    """Write N-D array ``values`` into the block of the dataset that starts at ``start``."""
    from h5py import h5s

    file_space = select(dataset_id, start, values.shape)
    dataset_id.write(h5s.create_simple(values.shape), file_space, values, dxpl=dxpl)


def write_slice_1d(dataset_id, values, start: int, dxpl) -> None:
    """Write array ``values`` into elements [start, start + len(values)) of a 1-D dataset."""
    write_hyperslab(dataset_id, values, (start,), dxpl)


def read_hyperslab(dataset_id, start: Sequence[int], count: Sequence[int], dxpl,
                   stride: Sequence[int] | None = None):
    """Read the hyperslab ``start``, ``count`` (every ``stride``-th item) of a dataset into a new array of shape ``count``."""
    import numpy as np
    from h5py import h5s

    values = np.empty(tuple(count), dtype=dataset_id.dtype)
    dataset_id.read(h5s.create_simple(values.shape), select(dataset_id, start, count, stride), values, dxpl=dxpl)
    return values

