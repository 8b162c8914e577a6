"""A kernel's output files: the directory made, old files cleared, files flushed and removed at the end."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path


def prepare_output_dir(comm, out: Path) -> None:
    """Create directory ``out`` (with parents) on rank 0 if missing; every rank waits for it."""
    if comm.rank == 0:
        out.mkdir(parents=True, exist_ok=True)
    comm.Barrier()


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
