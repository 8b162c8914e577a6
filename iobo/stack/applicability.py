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


def environment_limits(space, fs_type: str) -> dict[str, str]:
    """Parameters of ``space`` that no configuration can make take effect on this file system: ``{name: reason}``.

    Lustre's striping off Lustre. Unlike :func:`not_applicable`, this does not
    depend on the configuration (a file per process also disables MPI-IO
    hints, but only for that configuration), so the tuner can freeze these
    knobs at their defaults for the rest of the study.
    """
    if fs_type == LUSTRE:
        return {}
    return {p.name: f"the output directory is on {fs_type}, not Lustre: striping hints have no effect"
            for p in space if p.layer == "lustre"}


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
