"""Apply an ``IOConfig`` to a task's own I/O.

A task tuned with :func:`iobo.tune` receives the configuration to use (a
trial's, or the study's best in production) as a keyword argument and
applies it here:

- :func:`File` opens an ``h5py.File`` with the configuration's file access
  settings (alignment, metadata block, sieve buffer, metadata cache,
  collective metadata) and, given an MPI communicator, HDF5's mpio driver
  with the MPI-IO and Lustre hints as its ``MPI_Info``;
- :func:`dataset_options` gives ``create_dataset`` its layout (``chunks``);
- :func:`transfer` makes a dataset's reads and writes collective when the
  configuration asks for it;
- :func:`shell_exports` writes a ``ROMIO_HINTS`` file and returns the
  ``export`` lines that carry the configuration to a program a bash app
  starts (ROMIO reads the file at ``MPI_File_open``).

The built-in kernels apply a configuration through the same layer
(:mod:`iobo.stack`). As there, a parameter that cannot take effect
is skipped: MPI-IO hints, collective transfer and collective metadata without
a communicator (POSIX driver), striping off Lustre. Sizes are in bytes.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import h5py  # at import, not in File: a task timing its own open must not time this import
import numpy as np
from h5py import h5f

from iobo import stack
from iobo.config import IOConfig
from iobo.errors import ConfigError

MODES = ("r", "r+", "w", "w-", "x", "a")
"""Open modes, as h5py spells them: read, read/write, create (truncate), create (fail if it exists), append."""


def File(path, mode: str = "r", config: IOConfig | None = None, comm=None):
    """An ``h5py.File`` opened with ``config``'s file access settings (default: the system default).

    comm: an mpi4py communicator opens the file with HDF5's mpio driver on
    every rank of ``comm`` (collectively) with the configuration's MPI-IO and
    Lustre hints; ``None`` uses the POSIX (sec2) driver.
    """
    if mode not in MODES:
        raise ConfigError(f"HDF5 open mode {mode!r} is not allowed; allowed: {', '.join(MODES)}")
    config = config if config is not None else IOConfig.default()
    fs_type = stack.filesystem_type(Path(path).resolve().parent)
    skipped = stack.not_applicable(config, fs_type, file_per_process=comm is None)
    fapl = stack.file_access_plist(config, stack.applicable(config, skipped), comm,
                                   stack.requested_hints(config, skipped))
    if mode == "a":
        mode = "r+" if Path(path).exists() else "w-"
    name = os.fsencode(path)
    if mode in ("r", "r+"):
        file_id = h5f.open(name, h5f.ACC_RDONLY if mode == "r" else h5f.ACC_RDWR, fapl=fapl)
    else:
        file_id = h5f.create(name, h5f.ACC_TRUNC if mode == "w" else h5f.ACC_EXCL, fapl=fapl)
    return h5py.File(file_id)


def dataset_options(config: IOConfig, shape, dtype) -> dict:
    """Keyword arguments of ``create_dataset`` for ``config``'s layout.

    ``layout=chunked``: ``chunks`` of at most ``chunk_size`` bytes, filled in
    row-major order (a 1-D dataset: ``chunk_size`` bytes of items), never
    larger than the dataset. Contiguous layout, or a scalar dataset: nothing
    (HDF5's default).
    """
    shape = tuple(shape)
    chunks = stack.requested_chunks(config.values, np.dtype(dtype).itemsize, shape) if shape else None
    return {} if chunks is None else {"chunks": chunks}


def transfer(dataset, config: IOConfig):
    """Context manager for ``dataset``'s reads and writes with ``config``'s transfer mode.

    Collective MPI-IO (h5py's ``dataset.collective``) when
    ``transfer_mode=collective`` and the file uses the mpio driver; every
    rank of the file's communicator must then take part in each access.
    Otherwise nothing changes (independent I/O).
    """
    if config.values.get("transfer_mode") == "collective" and dataset.file.driver == "mpio":
        return dataset.collective
    return contextlib.nullcontext()


def shell_exports(config: IOConfig, hints_path) -> str:
    """``export`` lines carrying ``config`` to a program started from a shell (a bash app).

    Writes the ROMIO hints file at ``hints_path`` when the configuration has
    MPI-IO or Lustre hints, and returns ``export ROMIO_HINTS=...`` plus the
    ``IOBO_*`` variables of :meth:`IOConfig.env` (empty for the default).
    """
    if config.mpi_hints():
        Path(hints_path).write_text(config.romio_hints_text())
    return config.env_text(str(hints_path))
