"""MPI-Tile-IO-like: dense 2-D tiles per rank, accessed non-contiguously through MPI-IO file views.

A 2-D array of ``tiles`` (``AxB``: A tiles across, B down; ``auto``: one per
rank) tiles, each ``tile`` (``XxY``: X elements across, Y down) elements of
``element_size`` bytes, is stored row-major in ONE shared file
``DIR/tile.dat``, one frame per step (frame f at byte f * frame size). Rank r
owns tiles r, r + R, ...; it sets an MPI subarray file view on each and
writes (or reads) the whole tile in one call: Y runs of X*element_size bytes,
a row of the array apart. ``transfer_mode=collective`` makes the calls
``MPI_File_write_all`` / ``read_all`` (collective buffering decides how the
runs reach the file); ``independent``: ``MPI_File_write`` / ``read`` (data
sieving may apply).

    mpiexec -n R python -m iobo.kernels.tile --out DIR [--tile 64x64] [--element-size 1024] [--tiles auto]
        [--steps 2] [--phases write|read|write+read] [--config FILE.json] [--repeats K] [--fsync] [--keep]
        [--verify]

``--phases write+read`` (default) reports TunIO's mixed objective; ``read``
writes the frames untimed first. Every element holds 8-byte words numbered by
their place in the file, so every word read is checked.

Bytes per rank and step: X*Y*element_size per tile owned; defaults 64x64
elements of 1 KiB = 4 MiB, fit for a 2-core machine. On a cluster, as the
HLRS thesis ran MPI-Tile-IO: ``--tile 256x256 --element-size 4096`` to
``16384`` (256 MiB to 1 GiB per rank and step).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from iobo import stack
from iobo.kernels import KernelSpec, inputs
from iobo.kernels.checks import Mismatches, global_index
from iobo.kernels.run import KernelRun, run_main
from iobo.kernels.timing import Phase
from iobo.space import Space, Workload

WORD = 8
"""Bytes per data word (uint64)."""
HDF5_ONLY = ("alignment_threshold", "alignment_interval", "meta_block_size", "sieve_buf_size", "mdc_initial_size",
             "layout", "chunk_size", "coll_metadata")
"""The HDF5 parameters, which an MPI-IO kernel has no use for (``transfer_mode`` it has)."""

OPTION_HELP = {
    "tile": "elements of one tile across and down, XxY (default 64x64)",
    "element_size": "bytes per element, a multiple of 8 (default 1024)",
    "tiles": "tiles across and down, AxB (a multiple of the ranks), or auto: one tile per rank (default)",
    "steps": "frames of the whole array, each one step (default 2)",
    "phases": "write, read (frames written untimed first) or write+read (default; TunIO's mixed objective)",
    "verify": "for --phases write: after timing, read the frames back and check every word (reads are always "
    "checked)",
}


def space() -> Space:
    """Collective or independent transfer, the MPI-IO write and read hints, and Lustre striping."""
    return inputs.stack_subspace(exclude=HDF5_ONLY, extra=inputs.READ_HINTS)


def tiles(ranks: int, options: Mapping[str, Any]) -> tuple[int, int]:
    """Tiles across and down for ``ranks``; raises ConfigError when the ranks cannot share them evenly."""
    return inputs.grid_for_ranks(options, "tiles", 2, ranks)


def workload(ranks: int, options: Mapping[str, Any]) -> Workload:
    """``ranks`` and the bytes of one frame of the array; raises ConfigError for tiles the ranks cannot share."""
    tile = inputs.parse_grid(options, "tile", 2)
    return Workload(ranks=ranks, dataset_bytes=math.prod(tiles(ranks, options)) * math.prod(tile)
                    * options["element_size"])


def check_options(options: Mapping[str, Any]) -> None:
    """tile: XxY >= 1; element_size >= 8, a multiple of 8; tiles: auto or AxB; steps >= 1; phases; common rules."""
    inputs.parse_grid(options, "tile", 2)
    if options["tiles"] != "auto":
        inputs.parse_grid(options, "tiles", 2)
    inputs.require_int_at_least(options, "element_size", WORD)
    inputs.require_multiple_of(options, "element_size", WORD, "whole 8-byte words")
    inputs.require_int_at_least(options, "steps", 1)
    inputs.require_choice(options, "phases", inputs.PHASES)
    inputs.check_common_options(options)


SPEC = KernelSpec(
    name="tile",
    module="iobo.kernels.tile",
    space=space,
    workload=workload,
    options={"tile": "64x64", "element_size": 1024, "tiles": "auto", "steps": 2, "phases": "write+read",
             "repeats": 1, "fsync": False, "keep": False, "verify": False},
    check_options=check_options,
    doc="MPI-Tile-IO-like: each rank writes and reads dense 2-D tiles of a shared array through MPI-IO "
    "subarray views (non-contiguous), collective or independent.",
)


@dataclass(frozen=True)
class Array:
    """The tiled array: tiles across and down, elements per tile across and down, words per element."""

    tiles: tuple[int, int]
    tile: tuple[int, int]
    words: int

    @property
    def shape(self) -> tuple[int, int, int]:
        """Rows, columns, words per element."""
        return self.tiles[1] * self.tile[1], self.tiles[0] * self.tile[0], self.words

    @property
    def frame_bytes(self) -> int:
        return math.prod(self.shape) * WORD

    def my_tiles(self, rank: int, ranks: int) -> list[tuple[int, int]]:
        """(first row, first column) of the tiles rank ``rank`` owns: tile numbers rank, rank + ranks..."""
        across, down = self.tiles
        return [((number // across) * self.tile[1], (number % across) * self.tile[0])
                for number in range(rank, across * down, ranks)]

    def words_of(self, corner: tuple[int, int], frame: int) -> np.ndarray:
        """The uint64 words of the tile at ``corner`` in ``frame``: their index in the file."""
        count = (self.tile[1], self.tile[0], self.words)
        index = global_index(self.shape, (*corner, 0), count)
        return (index + frame * math.prod(self.shape)).astype(np.uint64)


@dataclass
class TilePhase(Phase):
    """One timed repeat of writing (or reading) every frame: open, one step per frame, close."""

    comm: Any
    path: Path
    array: Array
    corners: list[tuple[int, int]]
    hints: Mapping[str, str]
    collective: bool
    write: bool
    fsync: bool = False
    got: list = field(default_factory=list)

    def filetype(self, corner: tuple[int, int]):
        """The file view of the tile at ``corner``: a committed byte subarray of one frame."""
        element_bytes = self.array.words * WORD
        rows, columns, _ = self.array.shape
        return stack.byte_subarray((rows, columns * element_bytes),
                                     (self.array.tile[1], self.array.tile[0] * element_bytes),
                                     (corner[0], corner[1] * element_bytes))

    def open(self):
        self.got = []
        return stack.mpi_open(self.comm, self.path, self.write, self.hints)

    def do_step(self, file, frame: int) -> None:
        from mpi4py import MPI

        for corner in self.corners:
            view = self.filetype(corner)
            file.Set_view(frame * self.array.frame_bytes, MPI.BYTE, view)
            view.Free()
            if self.write:
                call = file.Write_all if self.collective else file.Write
                call([self.array.words_of(corner, frame), MPI.BYTE])
            else:
                words = np.empty((self.array.tile[1], self.array.tile[0], self.array.words), dtype=np.uint64)
                (file.Read_all if self.collective else file.Read)([words, MPI.BYTE])
                self.got.append((corner, frame, words))

    def probe(self, file) -> tuple[dict[str, Any], dict[str, str]]:
        mode = "collective" if self.collective else "independent"
        return {"api": "mpiio", "transfer_mode": mode}, stack.mpi_file_hints(file)

    def close(self, file) -> None:
        if self.write and self.fsync:
            file.Sync()
        file.Close()

    def mismatches(self) -> Mismatches:
        """The words read against the words written there."""
        found = Mismatches()
        for corner, frame, words in self.got:
            found.compare(f"{self.path.name}:frame {frame} tile at {list(corner)}+", self.array.words_of(corner, frame),
                          words)
        return found


def main(argv: Sequence[str] | None = None) -> None:
    run = KernelRun.start(SPEC, argv, OPTION_HELP)
    options = run.options
    time_writes, time_reads = inputs.phases(options)
    array = Array(tiles(run.ranks, options), inputs.parse_grid(options, "tile", 2), options["element_size"] // WORD)
    steps = options["steps"]
    run.settle(file_per_process=False)
    path = Path(run.out) / "tile.dat"
    corners = array.my_tiles(run.rank, run.ranks)
    collective = run.apply.get("transfer_mode") == "collective"
    writes = TilePhase(run.comm, path, array, corners, run.hints, collective, write=True, fsync=options["fsync"])
    reads = TilePhase(run.comm, path, array, corners, run.hints, collective, write=False)
    run.own_files([path] if run.rank == 0 else [], [path])

    if time_writes:
        run.time_writes(writes, steps, array.frame_bytes)
    else:
        run.write_untimed(writes, steps)
    if time_reads:
        run.time_reads(reads, steps, array.frame_bytes)
    elif options["verify"]:
        run.read_untimed(reads, steps)
    run.confirm({})
    if time_reads or options["verify"]:
        run.verdict(reads.mismatches(), array.frame_bytes * steps // WORD, "read back")
    run.finish(tiles=list(array.tiles), tile=list(array.tile), element_size=options["element_size"])


if __name__ == "__main__":
    run_main(main)
