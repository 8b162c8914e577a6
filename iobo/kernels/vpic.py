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

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from iobo.config import IOConfig
from iobo.kernels import KernelSpec, _common
from iobo.space import Parameter, Space, Workload, io_stack_space

VARIABLES = ("x", "y", "z", "id1", "id2", "px", "py", "pz")
ITEMSIZE = 4
"""Bytes per value (float32)."""
VALUE_MODULUS = 2**24
"""float32 holds every integer below 2**24 exactly."""
STEP_STRIDE = 1_000_003
"""How far the values of one step are shifted from the previous step's."""

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
    stack = io_stack_space()
    return Space(stack.parameters + (FILES,), stack.constraints)


def workload(ranks: int, options: Mapping[str, Any]) -> Workload:
    """``ranks`` and the bytes of one shared-file dataset: ranks * particles * 4."""
    return Workload(ranks=ranks, dataset_bytes=ranks * options["particles"] * ITEMSIZE)


def check_options(options: Mapping[str, Any]) -> None:
    """particles >= 1, steps >= 1, flush_steps a switch, plus the common options' rules; raises ConfigError."""
    _common.require_int_at_least(options, "particles", 1)
    _common.require_int_at_least(options, "steps", 1)
    _common.require_bool(options, "flush_steps")
    _common.check_common_options(options)


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

    float32 integers (index * 8 + variable + step * 1000003) mod 2**24: exact,
    cheap, and different for neighbouring particles, variables and steps.
    """
    index = np.arange(first, first + count, dtype=np.int64)
    return ((index * len(VARIABLES) + variable + step * STEP_STRIDE) % VALUE_MODULUS).astype(np.float32)


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
class Writer:
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

    def create(self):
        return _common.create_file(self.plan.path, self.fapl)

    def prepare(self, step: int) -> None:
        """Make this rank's values of ``step`` (the previous step's are dropped)."""
        self.prepared.clear()
        self.prepared[step] = [particle_values(v, step, self.plan.first, self.particles)
                               for v in range(len(VARIABLES))]

    def write_step(self, file, step: int) -> None:
        group = file.create_group(f"Timestep_{step}")
        for name, values in zip(VARIABLES, self.prepared[step]):
            dataset = _common.create_dataset_1d(group, name, self.plan.length, self.dcpl)
            _common.write_slice_1d(dataset, values, self.plan.offset, self.dxpl)
        if self.flush_steps:
            file.flush()
            _common.fsync_file(self.plan.path)

    def write_all(self, file) -> None:
        """Prepare and write every step, untimed (a file for the read kernels)."""
        for step in range(self.steps):
            self.prepare(step)
            self.write_step(file, step)

    def probe(self, file) -> tuple[dict[str, Any], dict[str, str]]:
        """(HDF5 settings, MPI-IO hints) in effect, read from the open file."""
        dataset = file[f"Timestep_{self.steps - 1}/{VARIABLES[-1]}"].id
        hints = _common.effective_hints(file) if self.plan.shared else {}
        return _common.effective_hdf5(file, dataset, self.dxpl), hints

    def close(self, file) -> None:
        file.close()
        if self.fsync:
            _common.fsync_file(self.plan.path)


def make_writer(comm, plan: FilePlan, config: IOConfig, apply: Mapping[str, Any], hints: Mapping[str, str],
                particles: int, steps: int, fsync: bool, flush_steps: bool = False) -> Writer:
    """A :class:`Writer` for this rank, the config applied to the property lists."""
    return Writer(
        plan=plan,
        particles=particles,
        steps=steps,
        fapl=_common.file_access_plist(config, apply, comm if plan.shared else None, hints),
        dcpl=_common.dataset_create_plist(apply, plan.length, ITEMSIZE),
        dxpl=_common.dataset_transfer_plist(apply),
        fsync=fsync,
        flush_steps=flush_steps,
    )


def count_mismatches(plan: FilePlan, particles: int, steps: int, comm=None) -> tuple[int, str]:
    """Reopen ``plan.path`` read-only and compare this rank's slice of every dataset with :func:`particle_values`.

    comm: needed for the shared file (collective open). Returns (number of
    wrong values, description of the first one or "").
    """
    import h5py

    driver = {"driver": "mpio", "comm": comm} if plan.shared else {}
    wrong, first_wrong = 0, ""
    with h5py.File(plan.path, "r", **driver) as file:
        for step in range(steps):
            for variable, name in enumerate(VARIABLES):
                dataset = file[f"Timestep_{step}/{name}"]
                if dataset.shape != (plan.length,):
                    wrong += particles
                    first_wrong = first_wrong or f"{dataset.name} has shape {dataset.shape}, not ({plan.length},)"
                    continue
                read = dataset[plan.offset:plan.offset + particles]
                expected = particle_values(variable, step, plan.first, particles)
                bad = np.flatnonzero(read != expected)
                if bad.size and not first_wrong:
                    i = bad[0]
                    first_wrong = (f"{plan.path.name}:{dataset.name}[{plan.offset + i}]: "
                                   f"expected {expected[i]}, read {read[i]}")
                wrong += bad.size
    return wrong, first_wrong


def verify(comm, plan: FilePlan, particles: int, steps: int) -> tuple[bool, str]:
    """Check every value every rank wrote; (all correct, failure message for rank 0 to print)."""
    wrong, first_wrong = count_mismatches(plan, particles, steps, comm)
    total_wrong = comm.allreduce(wrong)
    described = [text for text in comm.allgather(first_wrong) if text]
    written = comm.size * particles * steps * len(VARIABLES)
    message = (f"vpic: verify failed: {total_wrong} of {written} values differ from what was written; "
               f"first: {described[0] if described else '?'}")
    return total_wrong == 0, message


def main(argv: Sequence[str] | None = None) -> None:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    args, config = _common.read_inputs(SPEC, comm, argv, OPTION_HELP)
    options = args.options
    particles, steps, shared = options["particles"], options["steps"], config["files"] == "shared"

    _common.prepare_output_dir(comm, args.out)
    fs_type = _common.filesystem_type(args.out)
    not_applied = _common.not_applicable(config, fs_type, file_per_process=not shared)
    apply = _common.applicable(config, not_applied)
    hints = _common.requested_hints(config, not_applied)
    plan = file_plan(args.out, shared, comm.rank, comm.size, particles)
    writer = make_writer(comm, plan, config, apply, hints, particles, steps, options["fsync"],
                         options["flush_steps"])
    my_files = [plan.path] if not shared or comm.rank == 0 else []
    step_bytes = comm.size * particles * len(VARIABLES) * ITEMSIZE

    timings = []
    for repeat in range(options["repeats"]):
        _common.remove_files(my_files)  # every repeat creates a new file (striping is set at creation)
        timing, (effective, effective_hints) = _common.timed_write(
            comm, steps, writer.create, writer.write_step, writer.probe, writer.close,
            _common.step_emitter(comm, repeat, step_bytes), prepare=writer.prepare,
        )
        timings.append(timing)

    not_applied |= _common.unconfirmed_settings(config, apply, effective, hints, effective_hints)
    verified, failure = verify(comm, plan, particles, steps) if options["verify"] else (None, "")
    comm.Barrier()
    if not options["keep"]:
        _common.remove_files(my_files)

    _common.emit(comm, _common.result_record(
        "vpic", comm.size, step_bytes * steps, timings,
        effective=effective, requested_hints=hints, hints=effective_hints, not_applied=not_applied,
        fs_type=fs_type, files=[str(path) for path in output_files(args.out, shared, comm.size)],
        kept=options["keep"], verified=verified, config=config.to_dict(),
    ))
    if verified is False:
        if comm.rank == 0:
            print(failure, file=sys.stderr, flush=True)
        sys.exit(1)


if __name__ == "__main__":
    _common.run_main(main)
