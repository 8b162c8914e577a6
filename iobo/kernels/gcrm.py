"""GCRM-IO: the history writes of the Global Cloud Resolving Model, as H5Tuner ran them (geodesic mesh).

The mesh is semi-structured: a geodesic grid of hexagonal cells, each rank
owning ``cells`` of them together with their ~3 edges and ~2 corners per
cell, every one with ``levels`` vertical levels (25 in GCRM). Each timestep
is a group ``Timestep_<i>`` of 2-D float32 datasets (mesh entities x levels)
in ONE shared file ``DIR/gcrm.h5``, written through HDF5's MPI-IO driver:
cell-centred ``pressure`` and ``temperature`` (R*cells rows), edge
``wind`` (3*R*cells rows) and corner ``vorticity`` (2*R*cells rows). Rank r
writes its own range of rows of each.

HDF5 chunking is the knob that decides GCRM-IO's speed, so the chunk
*shape* is tuned: ``chunk_size`` (bytes per chunk) and ``chunk_levels``
(levels per chunk, at most ``levels``); a chunk is ``chunk_size / (4 *
chunk_levels)`` rows by ``chunk_levels`` levels, cut to the dataset.

    mpiexec -n R python -m iobo.kernels.gcrm --out DIR [--cells 4096] [--levels 25] [--steps 2]
        [--config FILE.json] [--repeats K] [--fsync] [--keep] [--verify]

Bytes per rank and step: cells * levels * 4 * 7 (2 cell + 3 edge + 2 corner
rows per cell); defaults 4096 cells x 25 levels = 2.7 MiB, fit for a 2-core
machine. Suggested on a cluster (GCRM's 25 levels, a few MB to tens of MB
per rank and step): ``--cells 65536 --levels 25 --steps 10`` (43.75 MiB per
rank and step).

Values are float32-exact functions of (global item index, step, variable)
(see :func:`variable_values`), so every value can be checked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from iobo import stack
from iobo.kernels import KernelSpec, inputs
from iobo.kernels.checks import exact_float32, global_index
from iobo.kernels.run import KernelRun, run_main
from iobo.kernels.steps import DatasetPlan, Slab, StepFile, plan_values, reread
from iobo.space import Parameter, Space, Workload, io_stack_space

ITEMSIZE = 4
"""Bytes per value (float32)."""
VARIABLES = (("pressure", 1), ("temperature", 1), ("wind", 3), ("vorticity", 2))
"""(name, rows per cell): cell-centred, edge and corner variables of the geodesic mesh."""
ROWS_PER_CELL = sum(rows for _, rows in VARIABLES)

CHUNK_LEVELS = Parameter("chunk_levels", "hdf5", (1, 5, 25), 25, "count",
                         "vertical levels per HDF5 chunk (cut to --levels); the rest of chunk_size is cells",
                         ("layout", "chunked"))

OPTION_HELP = {
    "cells": "mesh cells per rank (default 4096); each also brings 3 edges and 2 corners",
    "levels": "vertical levels of every variable (default 25, as GCRM)",
    "steps": "timesteps, each a group Timestep_<i> of 4 datasets (default 2)",
}


def space() -> Space:
    """Every I/O-stack parameter (one shared file through MPI-IO) plus the chunk's levels, for the chunk shape."""
    stack_space = io_stack_space()
    return Space(stack_space.parameters + (CHUNK_LEVELS,), stack_space.constraints)


def workload(ranks: int, options: Mapping[str, Any]) -> Workload:
    """``ranks`` and the bytes of the largest dataset (the edges'): ranks * cells * 3 * levels * 4."""
    rows = ranks * options["cells"] * max(rows for _, rows in VARIABLES)
    return Workload(ranks=ranks, dataset_bytes=rows * options["levels"] * ITEMSIZE)


def check_options(options: Mapping[str, Any]) -> None:
    """cells, levels, steps >= 1, plus the common options' rules; raises ConfigError."""
    for name in ("cells", "levels", "steps"):
        inputs.require_int_at_least(options, name, 1)
    inputs.check_common_options(options)


SPEC = KernelSpec(
    name="gcrm",
    module="iobo.kernels.gcrm",
    space=space,
    workload=workload,
    options={"cells": 4096, "levels": 25, "steps": 2, "repeats": 1, "fsync": False, "keep": False, "verify": False},
    check_options=check_options,
    doc="GCRM-IO: each rank writes its cells, edges and corners x vertical levels of a geodesic mesh "
    "into 2-D datasets of one shared file; the chunk shape is tuned.",
)


def chunks(apply: Mapping[str, Any], shape: Sequence[int]) -> tuple[int, int] | None:
    """The chunk shape (rows, levels) for a dataset of ``shape``, or ``None`` when not chunked.

    ``chunk_levels`` levels (at most the dataset's), and as many rows as fill
    ``chunk_size`` bytes (at least one, at most the dataset's).
    """
    if apply.get("layout") != "chunked":
        return None
    rows, levels = shape
    chunk_levels = min(apply["chunk_levels"], levels)
    return max(1, min(rows, apply["chunk_size"] // (ITEMSIZE * chunk_levels))), chunk_levels


def variable_values(shape: Sequence[int], first_row: int, rows: int, step: int, variable: int):
    """Values of rows [first_row, first_row + rows) of ``VARIABLES[variable]`` at ``step``."""
    index = global_index(shape, (first_row, 0), (rows, shape[1]))
    return exact_float32(index, step * len(VARIABLES) + variable)


def step_plans(rank: int, ranks: int, cells: int, levels: int, steps: int) -> list[list[DatasetPlan]]:
    """Per step, the four datasets of ``Timestep_<i>`` with this rank's rows and their values."""
    plans = []
    for step in range(steps):
        datasets = []
        for variable, (name, per_cell) in enumerate(VARIABLES):
            rows = cells * per_cell
            shape = (ranks * rows, levels)
            slab = Slab((rank * rows, 0), variable_values(shape, rank * rows, rows, step, variable))
            datasets.append(DatasetPlan(f"Timestep_{step}/{name}", shape, "<f4", (slab,)))
        plans.append(datasets)
    return plans


def main(argv: Sequence[str] | None = None) -> None:
    run = KernelRun.start(SPEC, argv, OPTION_HELP)
    options = run.options
    cells, levels, steps = options["cells"], options["levels"], options["steps"]
    run.settle(file_per_process=False)
    apply = run.apply
    path = Path(run.out) / "gcrm.h5"
    writer = StepFile(
        path, True, step_plans(run.rank, run.ranks, cells, levels, steps),
        fapl=stack.file_access_plist(run.config, apply, run.comm, run.hints),
        dxpl=stack.dataset_transfer_plist(apply),
        dcpl=lambda plan: stack.chunked_create_plist(chunks(apply, plan.shape)),
        write=True, fsync=options["fsync"],
    )
    run.own_files([path] if run.rank == 0 else [], [path])

    run.time_writes(writer, steps, run.ranks * cells * ROWS_PER_CELL * levels * ITEMSIZE, label=None)
    probed_chunks = chunks(apply, writer.steps[-1][-1].shape)  # the dataset probe() looked at
    run.effective["chunk_levels"] = run.effective["chunk_shape"][1] if run.effective["chunk_shape"] else None
    requested = stack.chunk_request(apply, probed_chunks, ITEMSIZE)
    if probed_chunks:
        requested["chunk_levels"] = probed_chunks[1]
    run.confirm(requested)
    if options["verify"]:
        run.verdict(reread(writer, writer.fapl), run.ranks * plan_values(writer.steps), "written")
    run.finish()


if __name__ == "__main__":
    run_main(main)
