"""VORPAL-IO: the field dumps of the VORPAL plasma code, as H5Tuner ran them (3-D block-structured grid).

The global grid is a lattice of ``blocks`` (``AxBxC`` blocks along x, y, z;
``auto``: one block per rank, the ranks factored as evenly as MPI_Dims_create
does). Each block holds ``block`` (``NXxNYxNZ``) cells of ``components``
float32 values. Every timestep is a group ``Timestep_<i>`` of one 4-D dataset
``E`` of shape (A*NX, B*NY, C*NZ, components) in ONE shared file
``DIR/vorpal.h5``, written through HDF5's MPI-IO driver; rank r writes blocks
r, r + R, r + 2R... Each block is a hyperslab that is not contiguous in the
file (NY*NZ*components values per x-plane, A*... apart), which is what makes
collective buffering and data sieving matter.

    mpiexec -n R python -m iobo.kernels.vorpal --out DIR [--block 64x64x64] [--components 3]
        [--steps 2] [--blocks auto] [--config FILE.json] [--repeats K] [--fsync] [--keep] [--verify]

Bytes per rank and step: NX*NY*NZ*components*4 times blocks per rank
(defaults: 64x64x64 cells x 3 components = 3 MiB, fit for a 2-core
machine). H5Tuner's runs (SC13): ``--block 100x100x60 --components 3
--steps 20`` (7.2 MB per rank and step), on 64 to 4096 ranks.

Values are float32-exact functions of (global item index, step) (see
:func:`block_values`), so every value can be checked.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from iobo import stack
from iobo.kernels import KernelSpec, inputs
from iobo.kernels.checks import exact_float32, global_index
from iobo.kernels.run import KernelRun, run_main
from iobo.kernels.steps import DatasetPlan, Slab, StepFile, plan_values, reread
from iobo.space import Space, Workload, io_stack_space

ITEMSIZE = 4
"""Bytes per value (float32)."""
DATASET = "E"

OPTION_HELP = {
    "block": "cells of one block along x, y, z, written NXxNYxNZ (default 64x64x64: 3 MiB per rank and step with 3 components)",
    "components": "float32 values per cell (default 3: a vector field)",
    "steps": "timesteps, each a group Timestep_<i> with one 4-D dataset E (default 2)",
    "blocks": "blocks along x, y, z (AxBxC, a multiple of the ranks), or auto: one block per rank (default)",
}


def space() -> Space:
    """Every I/O-stack parameter: one shared file written through MPI-IO, chunked or contiguous."""
    return io_stack_space()


def grid(ranks: int, options: Mapping[str, Any]) -> tuple[int, int, int]:
    """Blocks along x, y, z for ``ranks``; raises ConfigError when they cannot be shared evenly by the ranks."""
    return inputs.grid_for_ranks(options, "blocks", 3, ranks)


def dataset_shape(blocks: Sequence[int], block: Sequence[int], components: int) -> tuple[int, ...]:
    """Shape of the global dataset: cells along x, y, z, then components."""
    return (*(count * cells for count, cells in zip(blocks, block)), components)


def workload(ranks: int, options: Mapping[str, Any]) -> Workload:
    """``ranks`` and the bytes of one timestep's dataset; raises ConfigError for a grid the ranks cannot share."""
    block = inputs.parse_grid(options, "block", 3)
    shape = dataset_shape(grid(ranks, options), block, options["components"])
    return Workload(ranks=ranks, dataset_bytes=math.prod(shape) * ITEMSIZE)


def check_options(options: Mapping[str, Any]) -> None:
    """block: three integers >= 1; components, steps >= 1; blocks: auto or AxBxC; common rules. Raises ConfigError."""
    inputs.parse_grid(options, "block", 3)
    if options["blocks"] != "auto":
        inputs.parse_grid(options, "blocks", 3)
    inputs.require_int_at_least(options, "components", 1)
    inputs.require_int_at_least(options, "steps", 1)
    inputs.check_common_options(options)


SPEC = KernelSpec(
    name="vorpal",
    module="iobo.kernels.vorpal",
    space=space,
    workload=workload,
    options={"block": "64x64x64", "components": 3, "steps": 2, "blocks": "auto",
             "repeats": 1, "fsync": False, "keep": False, "verify": False},
    check_options=check_options,
    doc="VORPAL-IO: each rank writes 3-D blocks of a block-structured grid (non-contiguous hyperslabs) "
    "of one shared 4-D dataset per timestep.",
)


def block_values(shape: Sequence[int], start: Sequence[int], count: Sequence[int], step: int) -> np.ndarray:
    """The values of the block at ``start`` of ``count`` items in the dataset of ``shape`` at ``step``."""
    return exact_float32(global_index(shape, start, count), step)


def my_blocks(rank: int, ranks: int, blocks: Sequence[int]) -> list[tuple[int, ...]]:
    """Lattice coordinates of the blocks rank ``rank`` writes: numbers rank, rank + ranks, ..."""
    return [tuple(int(i) for i in np.unravel_index(number, blocks)) for number in range(rank, math.prod(blocks), ranks)]


def step_plans(rank: int, ranks: int, blocks: Sequence[int], block: Sequence[int], components: int,
               steps: int) -> list[list[DatasetPlan]]:
    """Per step, the one dataset ``Timestep_<i>/E`` with this rank's blocks and their values."""
    shape = dataset_shape(blocks, block, components)
    count = (*block, components)
    starts = [(*(b * cells for b, cells in zip(coordinates, block)), 0) for coordinates in my_blocks(rank, ranks, blocks)]
    return [[DatasetPlan(f"Timestep_{step}/{DATASET}", shape, "<f4",
                         tuple(Slab(start, block_values(shape, start, count, step)) for start in starts))]
            for step in range(steps)]


def main(argv: Sequence[str] | None = None) -> None:
    run = KernelRun.start(SPEC, argv, OPTION_HELP)
    options = run.options
    blocks, block = grid(run.ranks, options), inputs.parse_grid(options, "block", 3)
    run.settle(file_per_process=False)
    path = Path(run.out) / "vorpal.h5"
    shape = dataset_shape(blocks, block, options["components"])
    chunks = stack.requested_chunks(run.apply, ITEMSIZE, shape)
    writer = StepFile(
        path, True, step_plans(run.rank, run.ranks, blocks, block, options["components"], options["steps"]),
        fapl=stack.file_access_plist(run.config, run.apply, run.comm, run.hints),
        dxpl=stack.dataset_transfer_plist(run.apply),
        dcpl=lambda plan: stack.chunked_create_plist(chunks),
        write=True, fsync=options["fsync"],
    )
    run.own_files([path] if run.rank == 0 else [], [path])

    run.time_writes(writer, options["steps"], math.prod(shape) * ITEMSIZE, label=None)
    run.confirm(stack.chunk_request(run.apply, chunks, ITEMSIZE))
    if options["verify"]:
        run.verdict(reread(writer, writer.fapl), run.ranks * plan_values(writer.steps), "written")
    run.finish(blocks=list(blocks), block=list(block))


if __name__ == "__main__":
    run_main(main)
