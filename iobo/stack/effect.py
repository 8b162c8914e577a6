"""What took effect: the HDF5 settings and MPI-IO hints read back from an open file, and the
requested values the libraries do not show in effect.

A library may ignore or change what it was asked (ROMIO lowers ``cb_nodes``
to what ``cb_config_list`` allows; HDF5 falls back to independent I/O), so a
run reports what the open file says, and names each requested value it does
not confirm. Sizes are in bytes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from iobo.config import IOConfig
from iobo.stack.hdf5 import actual_io_mode, coll_metadata, driver_name, mpi_file_handle
from iobo.stack.mpiio import mpi_file_hints


def effective_hdf5(file, dataset_id, dxpl) -> dict[str, Any]:
    """HDF5 settings in effect, read from the open file, one of its datasets and the transfer plist.

    Keys are the parameter names (same units: bytes) plus ``driver``,
    ``actual_io_mode`` (what the last write did, H5Pget_mpio_actual_io_mode)
    and the two halves of ``coll_metadata``. ``transfer_mode`` is
    ``collective`` only when HDF5 really did collective I/O.
    """
    from h5py import h5d

    fapl = file.id.get_access_plist()
    threshold, interval = fapl.get_alignment()
    dcpl = dataset_id.get_create_plist()
    chunked = dcpl.get_layout() == h5d.CHUNKED
    io_mode = actual_io_mode(dxpl)
    collective_md = coll_metadata(fapl)
    return {
        "driver": driver_name(fapl),
        "alignment_threshold": threshold,
        "alignment_interval": interval,
        "meta_block_size": fapl.get_meta_block_size(),
        "sieve_buf_size": fapl.get_sieve_buf_size(),
        "mdc_initial_size": fapl.get_mdc_config().initial_size,
        "layout": "chunked" if chunked else "contiguous",
        "chunk_size": math.prod(dcpl.get_chunk()) * dataset_id.get_type().get_size() if chunked else None,
        "chunk_shape": list(dcpl.get_chunk()) if chunked else None,
        "transfer_mode": "independent" if io_mode == "no_collective" else "collective",
        "actual_io_mode": io_mode,
        "coll_metadata": all(collective_md.values()),
        **collective_md,
    }


def effective_hints(file) -> dict[str, str]:
    """MPI-IO hints in effect on an HDF5 file open with the mpio driver (``MPI_File_get_info``).

    ROMIO reports every hint it uses, its own defaults included
    (``cb_buffer_size``, ``cb_nodes``, ``romio_aggregator_list``, ...).
    """
    from mpi4py import MPI

    return mpi_file_hints(MPI.File.fromhandle(mpi_file_handle(file.id)))  # borrowed: HDF5 closes the file


def unconfirmed(requested: Mapping[str, Any], effective: Mapping[str, Any]) -> dict[str, str]:
    """Requested values that the library reports differently, or not at all: ``{name: reason}``."""
    reasons = {}
    for name, value in requested.items():
        if name not in effective:
            reasons[name] = f"requested {value!r}, but the library does not report {name}: it ignored it"
        elif effective[name] != value:
            reasons[name] = f"requested {value!r}, but {effective[name]!r} is in effect"
    return reasons


def chunk_request(apply: Mapping[str, Any], chunks: Sequence[int] | None, itemsize: int) -> dict[str, Any]:
    """``apply`` with ``chunk_size`` as the bytes of the ``chunks`` shape HDF5 was given.

    An N-D chunk holds whole items along each axis, so it may fall short of
    ``chunk_size``; compare this, not ``apply``, with what took effect.
    """
    if chunks is None or "chunk_size" not in apply:
        return dict(apply)
    return {**apply, "chunk_size": math.prod(chunks) * itemsize}


def unconfirmed_settings(config: IOConfig, apply: Mapping[str, Any], effective: Mapping[str, Any],
                         hints: Mapping[str, str], effective_hints: Mapping[str, str]) -> dict[str, str]:
    """Applied HDF5 values and MPI-IO hints that the open file does not show in effect: ``{name: reason}``.

    effective: from :func:`effective_hdf5`; effective_hints: from :func:`effective_hints`.
    """
    requested_hdf5 = {name: value for name, value in apply.items() if config.space[name].layer == "hdf5"}
    return unconfirmed(requested_hdf5, effective) | unconfirmed(hints, effective_hints)
