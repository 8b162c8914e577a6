"""VPIC-IO: the particle write of the VPIC plasma code, as h5bench and H5Tuner run it.

Every rank holds ``particles`` (N) particles of 8 float32 variables (x, y, z,
id1, id2, px, py, pz). Each timestep is a group ``Timestep_<i>`` with one 1-D
dataset per variable. By default all ranks write ONE shared file
``DIR/vpic.h5`` through HDF5's MPI-IO driver, rank r its contiguous slice
[r*N, (r+1)*N) of datasets of R*N elements; with ``files=per_process`` each
rank writes its own ``DIR/vpic.<rank>.h5`` (N-element datasets) through
HDF5's POSIX (sec2) driver.

    mpiexec -n R python -m iobo.kernels.vpic --out DIR [--particles N] [--steps T] [--flush-steps]
        [--config FILE.json] [--repeats K] [--fsync] [--keep] [--verify]

The values are float32-exact functions of (global particle index, variable,
step), see :func:`particle_values`, so every value can be checked. Each
step's data is made just before the step, untimed: 32 * N bytes of memory
per rank.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from iobo import stack
from iobo.config import IOConfig
from iobo.kernels import KernelSpec, files, inputs
from iobo.kernels.checks import Mismatches, exact_float32
from iobo.kernels.run import KernelRun, run_main
from iobo.kernels.timing import Phase
from iobo.space import Parameter, Space, Workload, io_stack_space

VARIABLES = ("x", "y", "z", "id1", "id2", "px", "py", "pz")
ITEMSIZE = 4
"""Bytes per value (float32)."""

FILES = Parameter("files", "app", ("shared", "per_process"), "shared", "", "one shared file or a file per rank")

OPTION_HELP = {
    "particles": "particles per rank (default 1048576 = 1 Mi, 32 MiB per rank and step)",
    "steps": "timesteps, each a group Timestep_<i> of 8 datasets (default 2)",
    "flush_steps": "make each timestep durable inside its timed step (H5Fflush, then fsync), as a "
    "checkpoint dump that must survive a crash is; each step's MB/s then measures the storage, "
    "not the page cache, so a pruner comparing steps compares what the run costs",
}


def space() -> Space:
    """The I/O-stack parameters plus the app-layer choice of one shared file or a file per rank."""
    stack_space = io_stack_space()
    return Space(stack_space.parameters + (FILES,), stack_space.constraints)


def workload(ranks: int, options: Mapping[str, Any]) -> Workload:
    """``ranks`` and the bytes of one shared-file dataset: ranks * particles * 4."""
    return Workload(ranks=ranks, dataset_bytes=ranks * options["particles"] * ITEMSIZE)


def check_options(options: Mapping[str, Any]) -> None:
    """particles >= 1, steps >= 1, flush_steps a switch, plus the common options' rules; raises ConfigError."""
    inputs.require_int_at_least(options, "particles", 1)
    inputs.require_int_at_least(options, "steps", 1)
    inputs.require_bool(options, "flush_steps")
    inputs.check_common_options(options)


SPEC = KernelSpec(
    name="vpic",
    module="iobo.kernels.vpic",
    space=space,
    workload=workload,
    options={"particles": 1048576, "steps": 2, "flush_steps": False, "repeats": 1, "fsync": False, "keep": False,
             "verify": False},
    check_options=check_options,
    doc="VPIC-IO: each rank writes N particles x 8 float32 variables per timestep into 1-D datasets "
    "of one shared HDF5 file (or a file per rank).",
)


def particle_values(variable: int, step: int, first: int, count: int) -> np.ndarray:
    """Values of ``VARIABLES[variable]`` at ``step`` for global particles [first, first + count).

    float32 integers (index * 8 + variable + step * 1000003) mod 2**24 (see
    :func:`iobo.kernels.checks.exact_float32`): exact, cheap, and different
    for neighbouring particles, variables and steps.
    """
    index = np.arange(first, first + count, dtype=np.int64)
    return exact_float32(index * len(VARIABLES) + variable, step)


@dataclass(frozen=True)
class FilePlan:
    """Where one rank writes.

    path: its HDF5 file; shared: one file for all ranks (mpio driver) rather
    than its own (sec2 driver); length: elements per dataset; offset: element
    where its slice starts; first: global index of its first particle.
    """

    path: Path
    shared: bool
    length: int
    offset: int
    first: int


def file_path(out: Path, shared: bool, rank: int) -> Path:
    """``out/vpic.h5`` for the shared file, ``out/vpic.<rank>.h5`` for a rank's own."""
    return out / "vpic.h5" if shared else out / f"vpic.{rank}.h5"


def output_files(out: Path, shared: bool, ranks: int) -> list[Path]:
    """Every file a run writes: the shared file, or one per rank."""
    return [file_path(out, shared, rank) for rank in range(1 if shared else ranks)]


def file_plan(out: Path, shared: bool, rank: int, ranks: int, particles: int) -> FilePlan:
    """Rank ``rank``'s file, dataset length and slice for ``particles`` per rank."""
    first = rank * particles
    if shared:
        return FilePlan(file_path(out, True, rank), True, ranks * particles, first, first)
    return FilePlan(file_path(out, False, rank), False, particles, 0, first)


@dataclass(frozen=True)
class Writer(Phase):
    """The phases of one timed VPIC-IO repeat, with the configuration's property lists.

    particles, steps: this rank's particles and the timesteps; fapl, dcpl,
    dxpl: file access, dataset creation and transfer property lists; fsync:
    flush the file to storage before the close counts as done; flush_steps:
    flush it to storage at the end of every step (H5Fflush, collective on a
    shared file, then fsync).  A step's values are made by :meth:`prepare`,
    untimed, just before the step is written (the simulation's compute phase
    between two dumps): one step in memory, and a run stopped early (pruned)
    skips the later steps' making too.
    """

    plan: FilePlan
    particles: int
    steps: int
    fapl: Any
    dcpl: Any
    dxpl: Any
    fsync: bool
    flush_steps: bool = False
    prepared: dict[int, list[np.ndarray]] = field(default_factory=dict, repr=False)

    def open(self):
        return stack.create_file(self.plan.path, self.fapl)

    def prepare(self, step: int) -> None:
        """Make this rank's values of ``step`` (the previous step's are dropped)."""
        self.prepared.clear()
        self.prepared[step] = [particle_values(v, step, self.plan.first, self.particles)
                               for v in range(len(VARIABLES))]

    def do_step(self, file, step: int) -> None:
        """Write ``step``'s group of datasets, this rank's slice of each."""
        group = file.create_group(f"Timestep_{step}")
        for name, values in zip(VARIABLES, self.prepared[step]):
            dataset = stack.create_dataset_1d(group, name, self.plan.length, self.dcpl)
            stack.write_slice_1d(dataset, values, self.plan.offset, self.dxpl)
        if self.flush_steps:
            file.flush()
            files.fsync_file(self.plan.path)

    def probe(self, file) -> tuple[dict[str, Any], dict[str, str]]:
        """(HDF5 settings, MPI-IO hints) in effect, read from the open file."""
        dataset = file[f"Timestep_{self.steps - 1}/{VARIABLES[-1]}"].id
        hints = stack.effective_hints(file) if self.plan.shared else {}
        return stack.effective_hdf5(file, dataset, self.dxpl), hints

    def close(self, file) -> None:
        file.close()
        if self.fsync:
            files.fsync_file(self.plan.path)


def make_writer(comm, plan: FilePlan, config: IOConfig, apply: Mapping[str, Any], hints: Mapping[str, str],
                particles: int, steps: int, fsync: bool, flush_steps: bool = False) -> Writer:
    """A :class:`Writer` for this rank, the config applied to the property lists."""
    return Writer(
        plan=plan,
        particles=particles,
        steps=steps,
        fapl=stack.file_access_plist(config, apply, comm if plan.shared else None, hints),
        dcpl=stack.dataset_create_plist(apply, plan.length, ITEMSIZE),
        dxpl=stack.dataset_transfer_plist(apply),
        fsync=fsync,
        flush_steps=flush_steps,
    )


def mismatches(plan: FilePlan, particles: int, steps: int, comm=None) -> Mismatches:
    """Reopen ``plan.path`` read-only and compare this rank's slice of every dataset with :func:`particle_values`.

    comm: needed for the shared file (collective open).
    """
    import h5py

    driver = {"driver": "mpio", "comm": comm} if plan.shared else {}
    found = Mismatches()
    with h5py.File(plan.path, "r", **driver) as file:
        for step in range(steps):
            for variable, name in enumerate(VARIABLES):
                dataset = file[f"Timestep_{step}/{name}"]
                if dataset.shape != (plan.length,):
                    found.merge(Mismatches(particles, f"{plan.path.name}:{dataset.name} has shape {dataset.shape}, "
                                                      f"not ({plan.length},)"))
                    continue
                found.compare(f"{plan.path.name}:{dataset.name}[{plan.offset}]+",
                              particle_values(variable, step, plan.first, particles),
                              dataset[plan.offset:plan.offset + particles])
    return found


def main(argv: Sequence[str] | None = None) -> None:
    run = KernelRun.start(SPEC, argv, OPTION_HELP)
    options = run.options
    particles, steps, shared = options["particles"], options["steps"], run.config["files"] == "shared"
    run.settle(file_per_process=not shared)
    plan = file_plan(run.out, shared, run.rank, run.ranks, particles)
    writer = make_writer(run.comm, plan, run.config, run.apply, run.hints, particles, steps, options["fsync"],
                         options["flush_steps"])
    run.own_files([plan.path] if not shared or run.rank == 0 else [], output_files(run.out, shared, run.ranks))
    step_bytes = run.ranks * particles * len(VARIABLES) * ITEMSIZE

    run.time_writes(writer, steps, step_bytes, label=None)
    run.confirm(run.apply)
    if options["verify"]:
        run.verdict(mismatches(plan, particles, steps, run.comm), run.ranks * particles * steps * len(VARIABLES),
                    "written")
    run.finish()


if __name__ == "__main__":
    run_main(main)
