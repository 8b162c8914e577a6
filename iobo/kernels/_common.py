"""Plumbing every iobo I/O kernel shares.

A kernel run goes: validate the command line and the ``IOConfig`` on rank 0
(exit code 2, before any I/O, when either is invalid); apply the configuration
through HDF5 property lists and MPI-IO hints; time open + writes + close as the
I/O literature does (barrier, per-rank elapsed time, maximum over ranks); read
back from the open file what took effect; print JSON lines on rank 0.

Units everywhere: sizes in bytes, times in seconds, bandwidth in MB/s =
bytes / seconds / 1e6 (decimal megabytes, as IOR and h5bench report them).

mpi4py and h5py are imported inside the functions that need them, so that a
kernel module (and its ``SPEC``) imports on a login node without MPI.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import json
import math
import os
import re
import statistics
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter, sleep
from typing import Any

from iobo.errors import ConfigError, IoboError, KernelError, SpaceError
from iobo.config import IOConfig
from iobo.kernels import KernelSpec
from iobo.space import Parameter, Space, Workload, io_stack_space

# -- command line ---------------------------------------------------------------

COMMON_OPTION_HELP = {
    "repeats": "run the timed open + writes + close this many times in one process (amortises the "
    "~2 s mpiexec and import start-up when benchmarking); default 1",
    "fsync": "fsync the output files before the timed section ends, so page-cache speed is not "
    "mistaken for storage speed",
    "keep": "keep the output files (default: remove them at the end)",
    "verify": "after timing, reopen the files and check every value written; a mismatch exits non-zero",
}


@dataclass(frozen=True)
class KernelArgs:
    """A kernel's validated command line.

    out: directory of the output files; config_path: the IOConfig JSON file,
    or ``None`` for the system default; options: the kernel's ``SPEC.options``
    with the values given on the command line.
    """

    out: Path
    config_path: Path | None
    options: dict[str, Any]


class _OneLineErrorParser(argparse.ArgumentParser):
    """An argument parser whose errors raise :class:`ConfigError` instead of printing usage."""

    def error(self, message: str):
        raise ConfigError(f"{message} (see --help)")


def flag(option: str) -> str:
    """The command-line flag of a kernel option: ``repeats`` -> ``--repeats``."""
    return "--" + option.replace("_", "-")


def parse_args(spec: KernelSpec, argv: Sequence[str] | None, option_help: Mapping[str, str]) -> KernelArgs:
    """Parse ``--out``, ``--config`` and one flag per option of ``spec``, then check the options.

    Boolean options are switches; the others take a value of their default's
    type. Raises :class:`ConfigError` (one line naming option, value and
    allowed range) for anything invalid.
    """
    parser = _OneLineErrorParser(prog=f"python -m {spec.module}", description=spec.doc, allow_abbrev=False)
    parser.add_argument("--out", type=Path, required=True, metavar="DIR",
                        help="directory of the output files (created if missing)")
    parser.add_argument("--config", type=Path, metavar="FILE.json",
                        help="an IOConfig JSON (as IOConfig.to_json() writes it); default: the system default")
    for name, default in spec.options.items():
        text = option_help.get(name) or COMMON_OPTION_HELP.get(name, "")
        if isinstance(default, bool):
            parser.add_argument(flag(name), dest=name, action="store_true", help=text)
        else:
            parser.add_argument(flag(name), dest=name, type=type(default), default=default,
                                metavar=name.upper(), help=text)
    namespace = parser.parse_args(argv)
    options = {name: getattr(namespace, name) for name in spec.options}
    spec.check_options(options)
    return KernelArgs(namespace.out, namespace.config, options)


def require_int_at_least(options: Mapping[str, Any], name: str, minimum: int) -> None:
    """Raise :class:`ConfigError` unless option ``name`` is an integer >= ``minimum``."""
    value = options[name]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"option {flag(name)}={value!r} is out of range; allowed: an integer >= {minimum}")


def require_bool(options: Mapping[str, Any], name: str) -> None:
    """Raise :class:`ConfigError` unless option ``name`` is ``True`` or ``False``."""
    value = options[name]
    if not isinstance(value, bool):
        raise ConfigError(f"option {flag(name)}={value!r} is not allowed; allowed: true or false (a switch)")


def require_choice(options: Mapping[str, Any], name: str, choices: Sequence[str]) -> None:
    """Raise :class:`ConfigError` unless option ``name`` is one of ``choices``."""
    if options[name] not in choices:
        raise ConfigError(f"option {flag(name)}={options[name]!r} is not allowed; allowed: {', '.join(choices)}")


def require_multiple_of(options: Mapping[str, Any], name: str, unit: int, what: str) -> None:
    """Raise :class:`ConfigError` unless option ``name`` is a multiple of ``unit`` (``what`` explains why)."""
    if options[name] % unit:
        raise ConfigError(f"option {flag(name)}={options[name]} is not a multiple of {unit}; allowed: "
                          f"multiples of {unit} ({what})")


PHASES = ("write", "read", "write+read")
"""What a read-and-write kernel times: ``read`` writes its input first, untimed."""


def phases(options: Mapping[str, Any]) -> tuple[bool, bool]:
    """(time the writes, time the reads) for option ``phases``."""
    return options["phases"] in ("write", "write+read"), options["phases"] in ("read", "write+read")


def parse_grid(options: Mapping[str, Any], name: str, dims: int) -> tuple[int, ...]:
    """Option ``name`` written ``AxB[xC]`` (``dims`` positive integers) as a tuple; raises :class:`ConfigError`."""
    text = options[name]
    parts = text.lower().split("x") if isinstance(text, str) else []
    if len(parts) != dims or not all(part.isdigit() and int(part) >= 1 for part in parts):
        example = "x".join(["4"] * dims)
        raise ConfigError(f"option {flag(name)}={text!r} is not allowed; allowed: {dims} integers >= 1 "
                          f"joined by 'x' (e.g. {example})")
    return tuple(int(part) for part in parts)


def balanced_grid(ranks: int, dims: int) -> tuple[int, ...]:
    """``dims`` factors of ``ranks``, as equal as possible, largest first (as MPI_Dims_create makes them)."""
    grid = [1] * dims
    factor, rest = 2, ranks
    factors = []
    while rest > 1:
        while rest % factor == 0:
            factors.append(factor)
            rest //= factor
        factor += 1
    for prime in sorted(factors, reverse=True):
        grid[grid.index(min(grid))] *= prime
    return tuple(sorted(grid, reverse=True))


def grid_for_ranks(options: Mapping[str, Any], name: str, dims: int, ranks: int) -> tuple[int, ...]:
    """Blocks along each axis from option ``name``: ``auto`` (one block per rank) or ``AxB[xC]``.

    Raises :class:`ConfigError` unless every rank gets the same number of blocks, at least one.
    """
    if options[name] == "auto":
        return balanced_grid(ranks, dims)
    grid = parse_grid(options, name, dims)
    blocks = math.prod(grid)
    if blocks < ranks or blocks % ranks:
        raise ConfigError(f"option {flag(name)}={options[name]} gives {blocks} block(s) for {ranks} ranks; "
                          f"allowed: a multiple of {ranks} blocks (every rank the same number, at least one), or auto")
    return grid


def check_common_options(options: Mapping[str, Any]) -> None:
    """The rules of the options every kernel has: repeats >= 1; fsync, keep, verify switches."""
    require_int_at_least(options, "repeats", 1)
    for name in ("fsync", "keep", "verify"):
        require_bool(options, name)


def load_config(path: Path | None, space: Space, workload: Workload) -> IOConfig:
    """The IOConfig in JSON file ``path``, strictly validated against ``space`` and ``workload``.

    ``None`` gives the system default. Raises :class:`ConfigError` or
    :class:`SpaceError` whose message starts with ``--config PATH``.
    """
    if path is None:
        return IOConfig.default(space)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(
            f"--config {path}: cannot be read ({exc.strerror}); give a JSON file written by IOConfig.to_json()"
        ) from exc
    try:
        return IOConfig.from_json(text, space, workload)
    except (ConfigError, SpaceError) as exc:
        raise type(exc)(f"--config {path}: {exc}") from exc


def _validate_on_this_rank(spec: KernelSpec, argv, ranks: int, option_help) -> tuple[KernelArgs, IOConfig] | int:
    """Parsed arguments and config, or the exit code after printing an error (2) or --help (0)."""
    try:
        args = parse_args(spec, argv, option_help)
        config = load_config(args.config_path, spec.space(), spec.workload(ranks, args.options))
    except IoboError as exc:
        print(f"{spec.name}: error: {exc}", file=sys.stderr, flush=True)
        return 2
    except SystemExit as exc:  # --help has printed its text
        return int(exc.code or 0)
    return args, config


def read_inputs(spec: KernelSpec, comm, argv: Sequence[str] | None = None,
                option_help: Mapping[str, str] | None = None) -> tuple[KernelArgs, IOConfig]:
    """Validate the command line and the config on rank 0 and share them with every rank.

    On invalid input rank 0 prints one line (``NAME: error: ...``) on stderr
    and every rank exits with code 2, before any file is created.
    """
    outcome = _validate_on_this_rank(spec, argv, comm.size, option_help or {}) if comm.rank == 0 else None
    outcome = comm.bcast(outcome, root=0)
    if isinstance(outcome, int):
        sys.exit(outcome)
    return outcome


# -- where the files go ---------------------------------------------------------

LUSTRE = "lustre"


def prepare_output_dir(comm, out: Path) -> None:
    """Create directory ``out`` (with parents) on rank 0 if missing; every rank waits for it."""
    if comm.rank == 0:
        out.mkdir(parents=True, exist_ok=True)
    comm.Barrier()


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


def remove_files(paths: Sequence[Path]) -> None:
    """Delete ``paths`` that exist."""
    for path in paths:
        Path(path).unlink(missing_ok=True)


def clear_files(comm, paths: Sequence[Path]) -> None:
    """Delete ``paths`` (this rank's files), then wait for every rank: no rank creates a file before the old one is gone."""
    remove_files(paths)
    comm.Barrier()


def release_files(comm, paths: Sequence[Path], keep: bool) -> None:
    """Wait until every rank is done with the files, then delete ``paths`` (this rank's) unless ``keep``."""
    comm.Barrier()
    if not keep:
        remove_files(paths)


def fsync_file(path: Path) -> None:
    """Flush ``path``'s written pages to storage (fsync works on the file, whichever descriptor wrote)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- which parameters can apply ---------------------------------------------------

MPI_ONLY_HDF5 = ("transfer_mode", "coll_metadata")
"""HDF5 parameters that exist only with the MPI-IO (mpio) driver."""


def not_applicable(config: IOConfig, fs_type: str, file_per_process: bool) -> dict[str, str]:
    """Changed parameters that cannot take effect in this run: ``{name: reason}``.

    File per process writes through HDF5's POSIX (sec2) driver, so MPI-IO
    hints, Lustre hints, collective transfer and collective metadata do not
    apply; Lustre striping needs a Lustre file system.
    """
    reasons = {}
    for name in config.changed():
        layer = config.space[name].layer
        if file_per_process and (layer in ("mpiio", "lustre") or name in MPI_ONLY_HDF5):
            reasons[name] = "file per process writes through HDF5's POSIX (sec2) driver, without MPI-IO"
        elif layer == "lustre" and fs_type != LUSTRE:
            reasons[name] = f"the output directory is on {fs_type}, not Lustre: striping hints have no effect"
    return reasons


READ_HINTS = (
    Parameter("romio_cb_read", "mpiio", ("automatic", "enable", "disable"), "automatic", "",
              "collective buffering for reads"),
    Parameter("romio_ds_read", "mpiio", ("automatic", "enable", "disable"), "automatic", "",
              "data sieving for independent reads"),
)
"""ROMIO's read-side hints, for the spaces of kernels that read."""


def stack_subspace(exclude: Sequence[str] = (), extra: Sequence[Parameter] = ()) -> Space:
    """:func:`io_stack_space` without the parameters named in ``exclude``, plus ``extra`` parameters."""
    stack = io_stack_space()
    kept = stack.select(name for name in stack.names if name not in exclude)
    return Space(kept.parameters + tuple(extra), stack.constraints)


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


# -- HDF5 calls h5py does not wrap (ctypes on the loaded libhdf5) --------------------

H5P_DEFAULT = 0
ACTUAL_IO_MODES = {0: "no_collective", 1: "chunk_independent", 2: "chunk_collective", 3: "chunk_mixed",
                   4: "contiguous_collective"}
"""H5D_mpio_actual_io_mode_t values (H5Ppublic.h) by name."""


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
    """The MPI library mpi4py has loaded, for C calls made around mpi4py (see :func:`byte_subarray`)."""
    from mpi4py import MPI  # noqa: F401  (loads libmpi)

    paths = loaded_libraries("libmpi")
    for path in paths:
        library = ctypes.CDLL(path)
        if hasattr(library, "MPI_Type_create_subarray"):
            return library
    raise KernelError(f"no loaded MPI library has MPI_Type_create_subarray (looked at {paths or 'none'})")


@functools.cache
def hdf5_library() -> ctypes.CDLL:
    """The libhdf5 h5py has loaded, found in /proc/self/maps, for calls h5py does not wrap.

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


# -- property lists ----------------------------------------------------------------


def mpi_info(hints: Mapping[str, str]):
    """A new ``MPI.Info`` holding ``hints``; the caller frees it."""
    from mpi4py import MPI

    info = MPI.Info.Create()
    for key, value in hints.items():
        info.Set(key, value)
    return info


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
    """The file access property list for the values in ``apply`` (see :func:`applicable`).

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


def chunked_create_plist(chunks: Sequence[int] | None):
    """A dataset creation property list: chunks of shape ``chunks``, or contiguous for ``None``."""
    from h5py import h5p

    dcpl = h5p.create(h5p.DATASET_CREATE)
    if chunks is not None:
        dcpl.set_chunk(tuple(chunks))
    return dcpl


def requested_chunks(apply: Mapping[str, Any], itemsize: int, shape: Sequence[int]) -> tuple[int, ...] | None:
    """The chunk shape for a dataset of ``shape``: ``chunk_size`` bytes by :func:`chunk_shape` when
    ``layout=chunked`` applies, else ``None`` (HDF5's default contiguous layout)."""
    return chunk_shape(apply["chunk_size"], itemsize, shape) if apply.get("layout") == "chunked" else None


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


# -- files and datasets ------------------------------------------------------------


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


# -- what took effect ----------------------------------------------------------------


def driver_name(fapl) -> str:
    """HDF5 file driver of ``fapl``: ``mpio``, ``sec2`` or ``other``."""
    from h5py import h5fd

    return {h5fd.MPIO: "mpio", h5fd.SEC2: "sec2"}.get(fapl.get_driver(), "other")


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


def mpi_file_hints(handle) -> dict[str, str]:
    """Every hint ``MPI_File_get_info`` reports on an open ``MPI.File``."""
    info = handle.Get_info()
    try:
        return dict(info.items())
    finally:
        info.Free()


# -- timing --------------------------------------------------------------------------


@dataclass(frozen=True)
class RepeatTiming:
    """Seconds of one timed repeat, each the maximum over ranks.

    open_seconds: file create; step_seconds: each step's writes;
    close_seconds: file close, plus fsync when asked; seconds: the whole
    open + writes + close of the slowest rank.
    """

    open_seconds: float
    step_seconds: list[float]
    close_seconds: float
    seconds: float


def max_over_ranks(comm, values: Sequence[float]) -> list[float]:
    """Element-wise maximum of ``values`` over the ranks of ``comm``."""
    import numpy as np
    from mpi4py import MPI

    local = np.asarray(values, dtype=np.float64)
    result = np.empty_like(local)
    comm.Allreduce(local, result, op=MPI.MAX)
    return result.tolist()


def timed_phase(comm, steps: int, open_file: Callable[[], Any], do_step: Callable[[Any, int], None],
                probe: Callable[[Any], Any], close: Callable[[Any], None],
                on_step: Callable[[int, float], None] | None = None,
                prepare: Callable[[int], None] | None = None) -> tuple[RepeatTiming, Any]:
    """Time one repeat of open (or create) + ``steps`` x do_step (writes or reads) + close, as the I/O literature does.

    ``comm.Barrier()``, then each rank times its own open, steps and close;
    the maxima over ranks are taken afterwards, outside the timed section.
    ``on_step(step, seconds)``, when given, is called on every rank right
    after each step with that step's time, max over ranks (an allreduce
    outside the timed segments, which also lines the ranks up between steps),
    so a step line can be printed while the job runs and a pruner can stop it.
    ``prepare(step)``, when given, runs before each step, untimed: the
    application's compute phase that makes the step's data.
    ``probe(file)`` runs on every rank between the last step and the close,
    untimed, to read what took effect; its result is returned.
    """
    comm.Barrier()
    start = perf_counter()
    file = open_file()
    open_seconds = perf_counter() - start
    step_seconds = []
    for step in range(steps):
        if prepare is not None:
            prepare(step)
        start = perf_counter()
        do_step(file, step)
        step_seconds.append(perf_counter() - start)
        if on_step is not None:
            on_step(step, max_over_ranks(comm, [step_seconds[-1]])[0])
    probed = probe(file)
    start = perf_counter()
    close(file)
    close_seconds = perf_counter() - start
    total = open_seconds + sum(step_seconds) + close_seconds
    maxima = max_over_ranks(comm, [open_seconds, *step_seconds, close_seconds, total])
    return RepeatTiming(maxima[0], maxima[1:-2], maxima[-2], maxima[-1]), probed


timed_write = timed_phase
"""The write phase's name for :func:`timed_phase` (create + write steps + close)."""


# -- HDF5 datasets written or read in steps -------------------------------------------


@dataclass(frozen=True)
class Slab:
    """One block of a dataset that this rank writes or reads.

    start: where the block starts; values: what it holds (written, or
    expected on reading), of the block's shape; stride: every stride-th item
    along each axis (``None``: contiguous block).
    """

    start: tuple[int, ...]
    values: Any
    stride: tuple[int, ...] | None = None


@dataclass(frozen=True)
class DatasetPlan:
    """One dataset of a step: its path in the file (``Timestep_0/E``), full shape, numpy dtype and this rank's slabs.

    Every rank has the same plans in the same order (dataset creation is
    collective) and the same number of slabs in each (so collective
    transfers match).
    """

    name: str
    shape: tuple[int, ...]
    dtype: str
    slabs: tuple[Slab, ...]

    @property
    def itemsize(self) -> int:
        import numpy as np

        return np.dtype(self.dtype).itemsize


def plan_values(steps: Sequence[Sequence[DatasetPlan]]) -> int:
    """Items in every slab of every step: this rank's share of the values."""
    return sum(slab.values.size for plans in steps for plan in plans for slab in plan.slabs)


@dataclass
class StepFile:
    """One rank's timed repeat over one HDF5 file whose datasets are written (or read) step by step.

    steps[i]: the datasets of step i; fapl, dxpl: access and transfer
    property lists; shared: one file for all ranks (mpio driver); write:
    create and write, else open and read, keeping what was read in ``got``
    (``got[step][plan][slab]``) to compare after the timing; dcpl (writes):
    ``DatasetPlan -> creation plist`` for new datasets; fsync: flush after
    writing.
    """

    path: Path
    shared: bool
    steps: Sequence[Sequence[DatasetPlan]]
    fapl: Any
    dxpl: Any
    write: bool
    dcpl: Callable[[DatasetPlan], Any] | None = None
    fsync: bool = False
    got: list = field(default_factory=list)

    def open(self):
        self.got = []
        return create_file(self.path, self.fapl) if self.write else open_file(self.path, self.fapl)

    def do_step(self, file, step: int) -> None:
        if self.write:
            for plan in self.steps[step]:
                parent = plan.name.rpartition("/")[0]
                group = file.require_group(parent) if parent else file
                dataset = create_dataset(group, plan.name.rpartition("/")[2], plan.shape, self.dcpl(plan), plan.dtype)
                for slab in plan.slabs:
                    write_hyperslab(dataset, slab.values, slab.start, self.dxpl)
        else:
            self.got.append([[read_hyperslab(file[plan.name].id, slab.start, slab.values.shape, self.dxpl, slab.stride)
                              for slab in plan.slabs] for plan in self.steps[step]])

    def probe(self, file) -> tuple[dict[str, Any], dict[str, str]]:
        """(HDF5 settings, MPI-IO hints) in effect, read from the open file and its last dataset."""
        dataset = file[self.steps[-1][-1].name].id
        return effective_hdf5(file, dataset, self.dxpl), effective_hints(file) if self.shared else {}

    def close(self, file) -> None:
        file.close()
        if self.write and self.fsync:
            fsync_file(self.path)

    def mismatches(self) -> Mismatches:
        """What was read (``got``) against the plans' values."""
        found = Mismatches()
        for plans, arrays in zip(self.steps, self.got):
            for plan, slabs in zip(plans, arrays):
                for slab, actual in zip(plan.slabs, slabs):
                    found.compare(f"{self.path.name}:{plan.name}{list(slab.start)}+", slab.values, actual)
        return found


def repeat_phase(comm, repeats: int, steps: int, phase, step_bytes: int, label: str | None = None,
                 first_step: int = 0, remove: Sequence[Path] = ()) -> tuple[list[RepeatTiming], Any]:
    """Time ``repeats`` repeats of ``phase`` (open, do_step, probe, close: a :class:`StepFile` or alike).

    Before each repeat the files in ``remove`` are deleted (a write creates
    them anew: striping is set at creation). Prints the step lines (``label``:
    their phase, numbered from ``first_step``). Returns the timings and the
    last repeat's probe.
    """
    timings, probed = [], None
    for repeat in range(repeats):
        remove_files(remove)
        timing, probed = timed_phase(comm, steps, phase.open, phase.do_step, phase.probe, phase.close,
                                     step_emitter(comm, repeat, step_bytes, label, first_step))
        timings.append(timing)
    return timings, probed


def run_untimed(phase, steps: int) -> None:
    """Run ``phase`` (open, ``steps`` x do_step, close) without timing: an input written, or data read back."""
    file = phase.open()
    for step in range(steps):
        phase.do_step(file, step)
    phase.close(file)


def reread(step_file: StepFile, fapl) -> Mismatches:
    """Read back every slab ``step_file`` wrote (untimed, through ``fapl``) and compare with what was written."""
    reader = StepFile(step_file.path, step_file.shared, step_file.steps, fapl, dataset_transfer_plist({}), write=False)
    run_untimed(reader, len(reader.steps))
    return reader.mismatches()


def verify_written(comm, kernel: str, step_file: StepFile, verify: bool) -> tuple[bool | None, str]:
    """``(None, "")`` unless ``verify``; else :func:`verdict` on every value ``step_file`` wrote, read back."""
    if not verify:
        return None, ""
    return verdict(comm, kernel, reread(step_file, step_file.fapl), comm.size * plan_values(step_file.steps), "written")


# -- MPI-IO files (kernels that bypass HDF5) ------------------------------------------


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


# -- values that can be checked --------------------------------------------------------

VALUE_MODULUS = 2**24
"""float32 holds every integer below 2**24 exactly."""
SALT_STRIDE = 1_000_003
"""How far the values of one salt (step, variable...) are shifted from the previous salt's."""


def global_index(shape: Sequence[int], start: Sequence[int], count: Sequence[int]):
    """Row-major index in a dataset of ``shape`` of every item of the block at ``start`` of ``count`` (int64 array)."""
    import numpy as np

    axes = [np.arange(first, first + n, dtype=np.int64) for first, n in zip(start, count)]
    index = np.zeros(tuple(count), dtype=np.int64)
    for axis, coordinates in enumerate(axes):
        stride = math.prod(shape[axis + 1:])
        index += coordinates.reshape([-1 if a == axis else 1 for a in range(len(count))]) * stride
    return index


def exact_float32(index, salt: int):
    """float32 integers ``(index + salt * 1000003) mod 2**24``: exact, and different for neighbours and salts."""
    import numpy as np

    return ((index + salt * SALT_STRIDE) % VALUE_MODULUS).astype(np.float32)


@dataclass
class Mismatches:
    """Values that differ from what was expected on this rank: how many, and the first described."""

    count: int = 0
    first: str = ""

    def compare(self, where: str, expected, actual) -> None:
        """Count the items of ``actual`` that differ from ``expected``; ``where`` names the data (file:dataset)."""
        import numpy as np

        if expected.shape != actual.shape:
            self.count += expected.size
            self.first = self.first or f"{where}: shape {actual.shape}, expected {expected.shape}"
            return
        bad = np.argwhere(expected != actual)
        if bad.size and not self.first:
            position = tuple(int(i) for i in bad[0])
            self.first = f"{where}{list(position)}: expected {expected[position]}, read {actual[position]}"
        self.count += len(bad)

    def merge(self, other: "Mismatches") -> None:
        """Add the mismatches found by another comparison."""
        self.count += other.count
        self.first = self.first or other.first


def verdict(comm, kernel: str, mismatches: Mismatches, checked: int, what: str) -> tuple[bool, str]:
    """(every rank's values all correct, failure message for rank 0); ``checked``: values compared over all ranks."""
    wrong = comm.allreduce(mismatches.count)
    described = [text for text in comm.allgather(mismatches.first) if text]
    message = (f"{kernel}: verify failed: {wrong} of {checked} values {what} differ from what was written; "
               f"first: {described[0] if described else '?'}")
    return wrong == 0, message


# -- output --------------------------------------------------------------------------


def mb_per_s(nbytes: int, seconds: float) -> float:
    """Bandwidth in MB/s: bytes / seconds / 1e6."""
    return nbytes / seconds / 1e6


def emit(comm, record: Mapping[str, Any]) -> None:
    """Print ``record`` as one JSON line on rank 0's stdout, flushed."""
    if comm.rank == 0:
        print(json.dumps(record), flush=True)


def step_emitter(comm, repeat: int, step_bytes: int, phase: str | None = None,
                 first_step: int = 0) -> Callable[[int, float], None]:
    """An ``on_step`` for :func:`timed_phase` printing ``{"event": "step", ...}`` as each step ends.

    step_bytes: bytes of one step over all ranks; phase (``write`` or
    ``read``), when given, is added to each line; steps are numbered from
    ``first_step``, so that a read phase after a write phase of T steps
    continues at T within the repeat.  Each line also carries ``elapsed_s``:
    rank 0's seconds from this emitter's making (just before the timed
    phase) to the step's end, untimed work between steps included, so what a
    run stopped after a step skips can be told from its step lines.
    """
    started = perf_counter()

    def emit_step(index: int, seconds: float) -> None:
        line = {"event": "step", "step": first_step + index, "repeat": repeat, "bytes": step_bytes,
                "seconds": seconds, "mb_per_s": mb_per_s(step_bytes, seconds),
                "elapsed_s": perf_counter() - started}
        emit(comm, line if phase is None else {**line, "phase": phase})

    return emit_step


def result_record(kernel: str, ranks: int, nbytes: int, timings: Sequence[RepeatTiming],
                  **fields: Any) -> dict[str, Any]:
    """The final ``{"event": "result", ...}`` record.

    nbytes: bytes written per repeat over all ranks; seconds, mb_per_s,
    open_seconds and close_seconds are medians over ``timings`` (one per
    repeat); ``fields`` (effective, hints, not_applied, files, ...) follow.
    """
    return {"event": "result", "kernel": kernel, "ranks": ranks, **phase_summary(nbytes, timings), **fields}


def phase_summary(nbytes: int, timings: Sequence[RepeatTiming]) -> dict[str, Any]:
    """Bytes, median seconds and MB/s, per-repeat MB/s, median open and close seconds of one phase."""
    rates = [mb_per_s(nbytes, t.seconds) for t in timings]
    return {
        "bytes": nbytes,
        "seconds": statistics.median(t.seconds for t in timings),
        "mb_per_s": statistics.median(rates),
        "repeats_mb_per_s": rates,
        "open_seconds": statistics.median(t.open_seconds for t in timings),
        "close_seconds": statistics.median(t.close_seconds for t in timings),
    }


def io_result_record(kernel: str, ranks: int, written: tuple[int, Sequence[RepeatTiming]] | None,
                     read: tuple[int, Sequence[RepeatTiming]] | None, **fields: Any) -> dict[str, Any]:
    """The final ``{"event": "result", ...}`` record of a kernel that writes, reads, or both.

    written, read: (bytes per repeat over all ranks, one timing per repeat), or
    ``None`` for a phase not run. ``mb_per_s``, what the tuner maximises, is the
    write bandwidth, the read bandwidth, or for both TunIO's objective
    ``(1 - a) * BW_read + a * BW_write`` with ``a`` = share of bytes written,
    computed per repeat, median over repeats. ``bytes`` = bytes moved per
    repeat; ``seconds`` = median of write + read seconds. Each phase's own
    figures are under ``write`` and ``read``.
    """
    from iobo.measure import mixed_objective

    phases_run = {name: phase for name, phase in (("write", written), ("read", read)) if phase is not None}
    repeats = len(next(iter(phases_run.values()))[1])
    rates = {name: [mb_per_s(nbytes, t.seconds) for t in timings] for name, (nbytes, timings) in phases_run.items()}
    bytes_written, bytes_read = (written or (0, ()))[0], (read or (0, ()))[0]
    if len(rates) == 2:
        objective = [mixed_objective(r, w, bytes_read, bytes_written) for r, w in zip(rates["read"], rates["write"])]
    else:
        objective = next(iter(rates.values()))
    seconds = [sum(timings[i].seconds for _, timings in phases_run.values()) for i in range(repeats)]
    return {
        "event": "result",
        "kernel": kernel,
        "ranks": ranks,
        "bytes": bytes_written + bytes_read,
        "bytes_written": bytes_written,
        "bytes_read": bytes_read,
        "seconds": statistics.median(seconds),
        "mb_per_s": statistics.median(objective),
        "repeats_mb_per_s": objective,
        "objective": "mixed" if len(rates) == 2 else next(iter(rates)),
        **{name: phase_summary(nbytes, timings) for name, (nbytes, timings) in phases_run.items()},
        **fields,
    }


def finish(comm, record: Mapping[str, Any], verified: bool | None, failure: str) -> None:
    """Print the result ``record``; then, when verification failed, print ``failure`` on stderr and exit 1."""
    emit(comm, record)
    if verified is False:
        if comm.rank == 0:
            print(failure, file=sys.stderr, flush=True)
        sys.exit(1)


# -- failure handling ------------------------------------------------------------------

ABORT_GRACE_SECONDS = 0.5
"""Pause between printing a traceback and MPI_Abort: mpiexec drops output still in transit when it
kills the job (seen with MPICH's hydra: the whole traceback lost in 1 run of 12 without it)."""


def run_main(main: Callable[[Sequence[str] | None], None], argv: Sequence[str] | None = None) -> None:
    """Run a kernel's ``main`` so that a failure on any rank ends the whole job.

    An exception prints its traceback on stderr and calls
    ``MPI.COMM_WORLD.Abort(1)``: the other ranks, waiting in a collective
    call, would otherwise hang forever. ``sys.exit`` passes through.
    """
    try:
        main(argv)
    except Exception:
        sys.stderr.write(traceback.format_exc())
        sys.stderr.flush()
        sleep(ABORT_GRACE_SECONDS)
        from mpi4py import MPI

        MPI.COMM_WORLD.Abort(1)
