"""Which parameters of a configuration can take effect in a run, and the values and hints to apply.

A changed parameter is skipped, with a reason, when the run cannot honour
it: writing a file per process goes through HDF5's POSIX (sec2) driver, so
MPI-IO hints, Lustre hints, collective transfer and collective metadata do
not apply; Lustre striping needs a Lustre file system, told from
/proc/mounts. What remains is applied (:func:`applicable`) and passed as
MPI-IO hints (:func:`requested_hints`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from iobo.adapters import COLLECTIVE_IO_MODES
from iobo.config import IOConfig

LUSTRE = "lustre"
MPI_ONLY_HDF5 = ("transfer_mode", "coll_metadata")
"""HDF5 parameters that exist only with the MPI-IO (mpio) driver."""


def _unescape_mount_path(text: str) -> str:
    """A mount point as /proc/mounts writes it (space as ``\\040``...) back to a path."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


def filesystem_type(path: Path) -> str:
    """Type of the file system holding ``path`` (``lustre``, ``tmpfs``, ``ext4``...).

    Read from /proc/mounts, taking the longest mount point that contains the
    path (the last one listed when a mount point is mounted over);
    ``unknown`` when /proc/mounts cannot be read.
    """
    target = os.path.realpath(path)
    best, fs_type = "", "unknown"
    try:
        with open("/proc/mounts") as mounts:
            lines = mounts.readlines()
    except OSError:
        return fs_type
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        mount_point = _unescape_mount_path(fields[1])
        inside = target == mount_point or target.startswith(mount_point.rstrip("/") + "/")
        if inside and len(mount_point) >= len(best):
            best, fs_type = mount_point, fields[2]
    return fs_type


OMPIO = "ompio"
OMPIO_HONOURED = ("cb_buffer_size",)
"""MPI-IO hints Open MPI's OMPIO acts on (/work/shared/MEASURED.md); the others of the mpiio layer are ROMIO's."""
OMPIO_REASON = ("Open MPI runs with its OMPIO component (OMPI_MCA_io={value}), which ignores ROMIO's hints "
                "(romio_*, cb_nodes, cb_config_list, ind_*) though MPI_File_get_info echoes them; OMPI_MCA_io=romio321 "
                "(or unset) selects ROMIO")
"""Why a ROMIO-only hint is frozen, or not applied, under OMPIO."""


def romio_only(space, mpi_io: str | None, ompi_io: str = "") -> dict[str, str]:
    """Parameters of ``space`` that only ROMIO acts on, when the run's MPI-IO component ``mpi_io``
    (:func:`iobo.shim.io_component`) is OMPIO: ``{name: reason}`` (``ompi_io``: the ``OMPI_MCA_io`` value that
    chose it, for the reason). Empty for ROMIO (every other MPI, Open MPI with ROMIO)."""
    if mpi_io != OMPIO:
        return {}
    reason = OMPIO_REASON.format(value=ompi_io or "?")
    return {p.name: reason for p in space
            if p.layer == "mpiio" and p.name not in OMPIO_HONOURED}


def environment_limits(space, fs_type: str, mpi_io: str | None = None, ompi_io: str = "") -> dict[str, str]:
    """Parameters of ``space`` that no configuration can make take effect on this file system and MPI-IO:
    ``{name: reason}``.

    Lustre's striping off Lustre; ROMIO's hints under Open MPI's OMPIO (``mpi_io``, :func:`romio_only`).
    Unlike :func:`not_applicable`, this does not depend on the configuration (a file per process also disables
    MPI-IO hints, but only for that configuration), so the tuner can freeze these knobs at their defaults for
    the rest of the study.
    """
    limits = romio_only(space, mpi_io, ompi_io)
    if fs_type != LUSTRE:
        limits.update({p.name: f"the output directory is on {fs_type}, not Lustre: striping hints have no effect"
                       for p in space if p.layer == "lustre"})
    return limits


DATASET_CREATION = ("layout", "chunk_size")
"""HDF5 parameters set when a dataset is created (``H5Dcreate``)."""
READ_HINTS = ("romio_cb_read", "romio_ds_read")
"""MPI-IO hints that act only on the program's MPI-IO reads."""
WRITE_HINTS = ("romio_cb_write", "romio_ds_write")
"""MPI-IO hints that act only on the program's MPI-IO writes."""
INERT_REASONS = {
    "hdf5_static": "HDF5 is linked statically into the program: the shim cannot set HDF5 settings",
    "no_hdf5_file": "the program opens no HDF5 file",
    "no_mpiio_file": "the program opens no file through MPI-IO",
    "no_mpio_driver": "HDF5 opens its files without MPI-IO (no MPI-IO driver)",
    "no_dataset": "the program creates no HDF5 dataset",
    "no_transfer": "the program makes no H5Dwrite or H5Dread call",
    "no_mpiio_read": "the program never reads through MPI-IO",
    "no_mpiio_write": "the program never writes through MPI-IO",
    "program_collective": "the program's writes are collective already (HDF5 reports it) and the shim only turns "
                          "independent transfers collective",
}
"""Why :func:`inert_knobs` finds a knob inert, by case (the texts are stored as the freeze's reasons)."""


def inert_knobs(space, io: Mapping[str, Any]) -> dict[str, str]:
    """Parameters of ``space`` (HDF5, MPI-IO and Lustre layers) that found no call to act on in a program run under
    the preload shim: ``{name: reason}`` (a text of :data:`INERT_REASONS`).

    io: the run's accounting (the ``io`` trial attr of :func:`iobo.trials.shim_attrs`: per level the files
    opened and the read and write calls, ``datasets_created``, ``hdf5_linked``). Settings at their defaults are
    not requested from the shim, so a run of the default says nothing about them being applied; what it does
    say is which calls exist: a read hint needs an MPI-IO read (``MPI_File_read*``), any MPI-IO or striping
    hint an ``MPI_File_open``, an HDF5 file setting an ``H5Fcreate``/``H5Fopen``, a layout an ``H5Dcreate``,
    a transfer mode an ``H5Dwrite``/``H5Dread`` on a file opened through MPI-IO. No setting of the stack makes
    the program make a call it does not make, so these knobs cannot matter for this program; the program's own
    knobs (``app`` layer) might, and are never inert.
    """
    levels = io["levels"]

    def calls(level: str, direction: str) -> int:
        return levels[level][direction]["calls"]

    no_hdf5 = INERT_REASONS["hdf5_static" if io.get("hdf5_linked") == "static" else "no_hdf5_file"]
    mpiio_files = levels["mpiio"]["files_opened"]
    reasons: dict[str, str] = {}
    for p in space:
        reason = None
        if p.layer == "hdf5":
            if not levels["hdf5"]["files_opened"]:
                reason = no_hdf5
            elif p.name in MPI_ONLY_HDF5 and not mpiio_files:
                reason = INERT_REASONS["no_mpio_driver"]
            elif p.name in DATASET_CREATION and io.get("datasets_created") == 0:
                reason = INERT_REASONS["no_dataset"]
            elif p.name == "transfer_mode" and not calls("hdf5", "write") + calls("hdf5", "read"):
                reason = INERT_REASONS["no_transfer"]
            elif p.name == "transfer_mode" and io.get("write_modes") and \
                    set(io["write_modes"]) <= set(COLLECTIVE_IO_MODES):
                reason = INERT_REASONS["program_collective"]
        elif p.layer in ("mpiio", LUSTRE):
            if not mpiio_files:
                reason = INERT_REASONS["no_mpiio_file"]
            elif p.name in READ_HINTS and not calls("mpiio", "read"):
                reason = INERT_REASONS["no_mpiio_read"]
            elif p.name in WRITE_HINTS and not calls("mpiio", "write"):
                reason = INERT_REASONS["no_mpiio_write"]
        if reason:
            reasons[p.name] = reason
    return reasons


def not_applicable(config: IOConfig, fs_type: str, file_per_process: bool) -> dict[str, str]:
    """Changed parameters that cannot take effect in this run: ``{name: reason}``.

    fs_type: the output's file system (:func:`filesystem_type`);
    file_per_process: each rank writes its own file through HDF5's POSIX
    (sec2) driver, without MPI-IO.
    """
    reasons = {}
    for name in config.changed():
        layer = config.space[name].layer
        if file_per_process and (layer in ("mpiio", "lustre") or name in MPI_ONLY_HDF5):
            reasons[name] = "file per process writes through HDF5's POSIX (sec2) driver, without MPI-IO"
        elif layer == "lustre" and fs_type != LUSTRE:
            reasons[name] = f"the output directory is on {fs_type}, not Lustre: striping hints have no effect"
    return reasons


def applicable(config: IOConfig, reasons: Mapping[str, str]) -> dict[str, Any]:
    """The values to apply: ``config.changed()`` minus ``reasons``, plus the children of applied parents.

    A conditional parameter (``chunk_size`` under ``layout=chunked``) comes
    with its parent even at its default value, since it takes part once the
    parent is set.
    """
    values = {name: value for name, value in config.changed().items() if name not in reasons}
    for p in config.space:
        if p.active_if is not None and p.active_if[0] in values and p.name in config.values:
            values[p.name] = config[p.name]
    return values


def requested_hints(config: IOConfig, reasons: Mapping[str, str]) -> dict[str, str]:
    """MPI-IO hints (``MPI_Info`` key -> string) to pass: ``config.mpi_hints()`` minus ``reasons``."""
    return {key: value for key, value in config.mpi_hints().items() if key not in reasons}
