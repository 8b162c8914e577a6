"""IOR-like: the configurable synthetic benchmark (block, transfer and segments; POSIX, MPI-IO or HDF5).

Each rank moves ``segments`` x ``block_size`` bytes in transfers of
``transfer_size`` bytes. In one shared file (``files=shared``, a tuned
parameter) segment s of rank r is the block at byte s*R*B + r*B, as IOR lays
it out; with ``files=per_process`` each rank has its own file, segment s at
s*B. ``--random`` shuffles the order of the transfers within each segment
(IOR's ``-z``); otherwise they are sequential. One step per segment.

- ``--api posix``: ``pwrite``/``pread`` on ``DIR/ior.dat`` (or ``ior.dat.<rank>``); no hints apply.
- ``--api mpiio``: ``MPI_File_write_at[_all]`` / ``read_at[_all]`` with the MPI-IO and Lustre hints;
  ``transfer_mode=collective`` selects the ``_all`` (collective) calls.
- ``--api hdf5``: one 1-D uint64 dataset ``data`` in ``DIR/ior.h5`` (or ``ior.h5.<rank>``), a hyperslab
  per transfer, with the whole HDF5 + MPI-IO + Lustre configuration.

    mpiexec -n R python -m iobo.kernels.ior --out DIR [--api posix|mpiio|hdf5] [--block-size 4194304]
        [--transfer-size 1048576] [--segments 2] [--phases write|read|write+read] [--random]
        [--config FILE.json] [--repeats K] [--fsync] [--keep] [--verify]

``--phases write+read`` (default) reports TunIO's mixed objective; ``read``
writes the file untimed first. The data are 8-byte words numbered by their
place in the shared layout, so every word read is checked.

Bytes per rank: segments * block_size each way; defaults 2 x 4 MiB = 8 MiB
in 1 MiB transfers, fit for a 2-core machine. On a cluster, as SmartIO's
runs: ``--api hdf5 --block-size 134217728 --transfer-size 4194304`` (128 MiB
blocks in 4 MiB transfers, shared file, collective) on 256 to 1024 ranks;
as the HLRS thesis: transfer sizes from KiB to tens of MiB per group.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from iobo import stack
from iobo.config import IOConfig
from iobo.kernels import KernelSpec, files, inputs, vpic
from iobo.kernels.checks import Mismatches
from iobo.kernels.run import KernelRun, run_main
from iobo.kernels.timing import Phase
from iobo.space import Space, Workload

APIS = ("posix", "mpiio", "hdf5")
WORD = 8
"""Bytes per data word (uint64)."""
DATASET = "data"

OPTION_HELP = {
    "api": "posix, mpiio or hdf5 (default mpiio)",
    "block_size": "bytes of one segment's block per rank, a multiple of the transfer size (default 4 MiB)",
    "transfer_size": "bytes per write or read call, a multiple of 8 (default 1 MiB)",
    "segments": "blocks per rank, each one step (default 2)",
    "phases": "write, read (file written untimed first) or write+read (default; TunIO's mixed objective)",
    "random": "shuffle the transfers within each segment (IOR -z) instead of sequential offsets",
    "verify": "for --phases write: after timing, read the file back and check every word (reads are always checked)",
}


def space() -> Space:
    """Every I/O-stack parameter, ROMIO's read hints and the choice of one shared file or a file per rank.

    Which apply depends on ``--api``: the result's ``not_applied`` names the
    ones that did not (all but ``files`` for posix; the HDF5 ones for mpiio).
    """
    return inputs.stack_subspace(extra=(vpic.FILES, *inputs.READ_HINTS))


def workload(ranks: int, options: Mapping[str, Any]) -> Workload:
    """``ranks`` and the bytes of the shared-file dataset: ranks * segments * block_size."""
    return Workload(ranks=ranks, dataset_bytes=ranks * options["segments"] * options["block_size"])


def check_options(options: Mapping[str, Any]) -> None:
    """api one of APIS; transfer_size >= 8, a multiple of 8; block_size a multiple of it; segments >= 1; phases."""
    inputs.require_choice(options, "api", APIS)
    inputs.require_int_at_least(options, "transfer_size", WORD)
    inputs.require_multiple_of(options, "transfer_size", WORD, "whole 8-byte words")
    inputs.require_int_at_least(options, "block_size", options["transfer_size"])
    inputs.require_multiple_of(options, "block_size", options["transfer_size"], "whole transfers per block")
    inputs.require_int_at_least(options, "segments", 1)
    inputs.require_choice(options, "phases", inputs.PHASES)
    inputs.require_bool(options, "random")
    inputs.check_common_options(options)


SPEC = KernelSpec(
    name="ior",
    module="iobo.kernels.ior",
    space=space,
    workload=workload,
    options={"api": "mpiio", "block_size": 4194304, "transfer_size": 1048576, "segments": 2, "phases": "write+read",
             "random": False, "repeats": 1, "fsync": False, "keep": False, "verify": False},
    check_options=check_options,
    doc="IOR-like: blocks of transfers per rank and segment, POSIX / MPI-IO / HDF5, shared file or file per "
    "process, sequential or random, write and/or read.",
)


def api_reasons(config: IOConfig, api: str) -> dict[str, str]:
    """Changed parameters that ``api`` cannot apply (beyond the file system's and layout's): ``{name: reason}``."""
    reasons = {}
    for name in config.changed():
        if api == "posix" and name != "files":
            reasons[name] = "api=posix writes with pwrite: no HDF5, MPI-IO hints or collective transfer"
        elif api == "mpiio" and config.space[name].layer == "hdf5" and name != "transfer_mode":
            reasons[name] = "api=mpiio does not go through HDF5"
    return reasons


@dataclass(frozen=True)
class Layout:
    """Where this rank's transfers go: byte offsets of (segment, transfer) in its file, and their words."""

    rank: int
    ranks: int
    shared: bool
    block_size: int
    transfer_size: int
    segments: int
    random: bool

    @property
    def transfers(self) -> int:
        """Transfers per segment."""
        return self.block_size // self.transfer_size

    @property
    def file_bytes(self) -> int:
        return self.segments * self.block_size * (self.ranks if self.shared else 1)

    def offset(self, segment: int, transfer: int) -> int:
        """Byte offset in this rank's file (IOR's layout)."""
        block = segment * self.ranks + self.rank if self.shared else segment
        return block * self.block_size + transfer * self.transfer_size

    def order(self, segment: int) -> list[int]:
        """The transfers of ``segment`` in the order they are made: sequential, or shuffled (seeded)."""
        if not self.random:
            return list(range(self.transfers))
        return [int(t) for t in np.random.default_rng([self.rank, segment]).permutation(self.transfers)]

    def words(self, segment: int, transfer: int) -> np.ndarray:
        """The uint64 words of one transfer: their place in the shared layout (unique over ranks and files)."""
        first = ((segment * self.ranks + self.rank) * self.block_size + transfer * self.transfer_size) // WORD
        return np.arange(first, first + self.transfer_size // WORD, dtype=np.uint64)


class PosixFile:
    """One rank's file through POSIX ``pwrite``/``pread``."""

    api = "posix"

    def __init__(self, path: Path, comm, apply, hints, config, layout: Layout):
        self.path = path

    def open(self, write: bool):
        return os.open(self.path, os.O_CREAT | os.O_WRONLY if write else os.O_RDONLY, 0o644)

    def write(self, fd, offset: int, words: np.ndarray) -> None:
        os.pwrite(fd, words.tobytes(), offset)

    def read(self, fd, offset: int, count: int) -> np.ndarray:
        return np.frombuffer(os.pread(fd, count * WORD, offset), dtype=np.uint64)

    def probe(self, fd) -> tuple[dict[str, Any], dict[str, str]]:
        return {"api": self.api}, {}

    def close(self, fd, fsync: bool) -> None:
        if fsync:
            os.fsync(fd)
        os.close(fd)


class MpiioFile:
    """The file through MPI-IO: on all ranks (shared) or this rank alone, collective or independent calls."""

    api = "mpiio"

    def __init__(self, path: Path, comm, apply, hints, config, layout: Layout):
        from mpi4py import MPI

        self.path, self.hints = path, hints
        self.comm = comm if layout.shared else MPI.COMM_SELF
        self.collective = apply.get("transfer_mode") == "collective"

    def open(self, write: bool):
        return stack.mpi_open(self.comm, self.path, write, self.hints)

    def write(self, handle, offset: int, words: np.ndarray) -> None:
        (handle.Write_at_all if self.collective else handle.Write_at)(offset, words)

    def read(self, handle, offset: int, count: int) -> np.ndarray:
        words = np.empty(count, dtype=np.uint64)
        (handle.Read_at_all if self.collective else handle.Read_at)(offset, words)
        return words

    def probe(self, handle) -> tuple[dict[str, Any], dict[str, str]]:
        mode = "collective" if self.collective else "independent"
        return {"api": self.api, "transfer_mode": mode}, stack.mpi_file_hints(handle)

    def close(self, handle, fsync: bool) -> None:
        if fsync:
            handle.Sync()
        handle.Close()


class Hdf5File:
    """One 1-D uint64 dataset through HDF5: mpio driver for the shared file, sec2 for a rank's own."""

    api = "hdf5"

    def __init__(self, path: Path, comm, apply, hints, config, layout: Layout):
        self.path, self.shared, self.length = path, layout.shared, layout.file_bytes // WORD
        self.fapl = stack.file_access_plist(config, apply, comm if layout.shared else None, hints)
        self.dcpl = stack.dataset_create_plist(apply, self.length, WORD)
        self.dxpl = stack.dataset_transfer_plist(apply)

    def open(self, write: bool):
        if not write:
            return stack.open_file(self.path, self.fapl)
        file = stack.create_file(self.path, self.fapl)
        stack.create_dataset(file, DATASET, (self.length,), self.dcpl, "<u8")
        return file

    def write(self, file, offset: int, words: np.ndarray) -> None:
        stack.write_hyperslab(file[DATASET].id, words, (offset // WORD,), self.dxpl)

    def read(self, file, offset: int, count: int) -> np.ndarray:
        return stack.read_hyperslab(file[DATASET].id, (offset // WORD,), (count,), self.dxpl)

    def probe(self, file) -> tuple[dict[str, Any], dict[str, str]]:
        effective = stack.effective_hdf5(file, file[DATASET].id, self.dxpl)
        return {"api": self.api, **effective}, stack.effective_hints(file) if self.shared else {}

    def close(self, file, fsync: bool) -> None:
        file.close()
        if fsync:
            files.fsync_file(self.path)


BACKENDS = {"posix": PosixFile, "mpiio": MpiioFile, "hdf5": Hdf5File}


@dataclass
class IorPhase(Phase):
    """One timed repeat of the write or the read phase: open, one step per segment, close.

    Reads keep the words they got in ``got`` (segment, transfer, words), to
    compare after the timing (see :meth:`mismatches`).
    """

    backend: Any
    layout: Layout
    write: bool
    fsync: bool = False
    got: list = field(default_factory=list)

    def open(self):
        self.got = []
        return self.backend.open(self.write)

    def do_step(self, handle, segment: int) -> None:
        for transfer in self.layout.order(segment):
            offset = self.layout.offset(segment, transfer)
            if self.write:
                self.backend.write(handle, offset, self.layout.words(segment, transfer))
            else:
                self.got.append((segment, transfer, self.backend.read(handle, offset, self.layout.transfer_size // WORD)))

    def probe(self, handle):
        return self.backend.probe(handle)

    def close(self, handle) -> None:
        self.backend.close(handle, self.fsync and self.write)

    def mismatches(self) -> Mismatches:
        """The words read against the words written there."""
        found = Mismatches()
        for segment, transfer, words in self.got:
            where = f"{self.backend.path.name}@{self.layout.offset(segment, transfer)}+word"
            found.compare(where, self.layout.words(segment, transfer), words)
        return found


def file_path(out: Path, api: str, shared: bool, rank: int) -> Path:
    """``out/ior.dat`` or ``out/ior.h5`` (shared), with ``.<rank>`` for a rank's own file."""
    name = "ior.h5" if api == "hdf5" else "ior.dat"
    return out / (name if shared else f"{name}.{rank}")


def main(argv: Sequence[str] | None = None) -> None:
    run = KernelRun.start(SPEC, argv, OPTION_HELP)
    options = run.options
    api, shared, (time_writes, time_reads) = options["api"], run.config["files"] == "shared", inputs.phases(options)
    segments = options["segments"]
    layout = Layout(run.rank, run.ranks, shared, options["block_size"], options["transfer_size"], segments,
                    options["random"])
    run.settle(file_per_process=not shared and api == "hdf5", extra=api_reasons(run.config, api))
    path = file_path(Path(run.out), api, shared, run.rank)
    backend = BACKENDS[api](path, run.comm, run.apply, run.hints, run.config, layout)
    writes = IorPhase(backend, layout, write=True, fsync=options["fsync"])
    reads = IorPhase(backend, layout, write=False)
    run.own_files([path] if not shared or run.rank == 0 else [],
                  [file_path(Path(run.out), api, shared, rank) for rank in range(1 if shared else run.ranks)])
    segment_bytes = run.ranks * options["block_size"]

    if time_writes:
        run.time_writes(writes, segments, segment_bytes)
    else:
        run.write_untimed(writes, segments)
    if time_reads:
        run.time_reads(reads, segments, segment_bytes)
    elif options["verify"]:
        run.read_untimed(reads, segments)
    run.confirm(run.apply if api == "hdf5" else {})
    if time_reads or options["verify"]:
        run.verdict(reads.mismatches(), segment_bytes * segments // WORD, "read back")
    run.finish(api=api, random=options["random"])


if __name__ == "__main__":
    run_main(main)
