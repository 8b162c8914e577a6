"""BD-CATS-IO: the read side of the BD-CATS clustering code, as h5bench runs it on VPIC-IO's output.

Reads the particle datasets of a shared VPIC-IO file (groups ``Timestep_<i>``
of 8 float32 1-D datasets x, y, z, id1, id2, px, py, pz) through HDF5's
MPI-IO driver, each rank its contiguous share [r*n, (r+1)*n) of every
dataset of ``steps`` timesteps, with n = dataset length / ranks:

- ``--pattern full``: the whole share;
- ``--pattern strided``: every ``stride``-th particle of the share (a strided hyperslab);
- ``--pattern subset``: the first n / ``stride`` particles of the share.

Without ``--input`` it first writes its input ``DIR/bdcats-input.h5`` with the
VPIC-IO writer, untimed (``particles`` per rank, ``steps`` timesteps; the
configuration's layout, chunking, alignment and striping apply to that
write); with ``--input FILE`` it reads a file ``iobo.kernels.vpic --keep``
wrote. A missing, truncated or foreign input fails on rank 0 before any
read, with exit code 2 and one line naming the file and what is wrong.
Every value read is compared with the VPIC-IO generator (a mismatch exits 1).

    mpiexec -n R python -m iobo.kernels.bdcats --out DIR [--input FILE] [--particles N] [--steps T]
        [--pattern full|strided|subset] [--stride S] [--config FILE.json] [--repeats K] [--keep]

Bytes read per rank and step: 32 * n (full), 32 * ceil(n / S) (strided),
32 * (n // S) (subset); defaults 1 Mi particles, full: 32 MiB per rank and
step, fit for a 2-core machine. On a cluster, as TunIO's BD-CATS runs:
VPIC-IO's 8 Mi particles per rank (256 MiB per rank and step) on hundreds
of nodes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iobo import stack
from iobo.config import IOConfig
from iobo.errors import ConfigError
from iobo.kernels import KernelSpec, inputs, vpic
from iobo.kernels.inputs import KernelArgs
from iobo.kernels.run import KernelRun, run_main
from iobo.kernels.steps import DatasetPlan, Slab, StepFile, plan_values
from iobo.kernels.timing import run_untimed
from iobo.space import Space, Workload

PATTERNS = ("full", "strided", "subset")
INPUT_LAYOUT = ("layout", "chunk_size", "alignment_threshold", "alignment_interval", "striping_factor",
                "striping_unit")
"""Parameters that act on the input file's creation, so only when this kernel writes it."""

OPTION_HELP = {
    "input": "a shared-file VPIC-IO output to read (vpic --keep); default: write one first, untimed",
    "particles": "particles per rank of the input written when --input is not given (default 1048576)",
    "steps": "timesteps to read, Timestep_0 on (default 2)",
    "pattern": "full: each rank's whole share; strided: every S-th particle; subset: the first 1/S (default full)",
    "stride": "S of the strided and subset patterns (default 4)",
    "repeats": "run the timed open + reads + close this many times in one process; default 1",
    "keep": "keep the input file this kernel wrote (default: remove it at the end)",
}


def space() -> Space:
    """The read-side parameters: HDF5 access and transfer, ROMIO read hints, and the input's layout and striping."""
    return inputs.stack_subspace(exclude=("romio_cb_write", "romio_ds_write", "meta_block_size"),
                                 extra=inputs.READ_HINTS)


def workload(ranks: int, options: Mapping[str, Any]) -> Workload:
    """``ranks`` and the bytes of one dataset of the input this kernel writes: ranks * particles * 4."""
    return Workload(ranks=ranks, dataset_bytes=ranks * options["particles"] * vpic.ITEMSIZE)


def check_options(options: Mapping[str, Any]) -> None:
    """particles, steps, stride, repeats >= 1; pattern one of PATTERNS; keep a switch. Raises ConfigError."""
    for name in ("particles", "steps", "stride", "repeats"):
        inputs.require_int_at_least(options, name, 1)
    inputs.require_choice(options, "pattern", PATTERNS)
    inputs.require_bool(options, "keep")


SPEC = KernelSpec(
    name="bdcats",
    module="iobo.kernels.bdcats",
    space=space,
    workload=workload,
    options={"input": "", "particles": 1048576, "steps": 2, "pattern": "full", "stride": 4, "repeats": 1,
             "keep": False},
    check_options=check_options,
    doc="BD-CATS-IO: each rank reads its share of VPIC-IO's particle datasets (whole, strided or a subset) "
    "from one shared HDF5 file.",
)


@dataclass(frozen=True)
class Share:
    """This rank's part of every dataset: the first particle, how many, and which of them are read."""

    first: int
    count: int
    pattern: str
    stride: int

    def slab(self, variable: int, step: int) -> Slab:
        """The slab read from ``VARIABLES[variable]`` at ``step``, with the values it must hold."""
        values = vpic.particle_values(variable, step, self.first, self.count)
        if self.pattern == "strided":
            return Slab((self.first,), values[::self.stride], (self.stride,))
        if self.pattern == "subset":
            return Slab((self.first,), values[:self.count // self.stride])
        return Slab((self.first,), values)


def step_plans(share: Share, length: int, steps: int) -> list[list[DatasetPlan]]:
    """Per step, the 8 particle datasets with this rank's slab of each."""
    return [[DatasetPlan(f"Timestep_{step}/{name}", (length,), "<f4", (share.slab(variable, step),))
             for variable, name in enumerate(vpic.VARIABLES)] for step in range(steps)]


def check_input(path: Path, steps: int, ranks: int, stride: int, pattern: str) -> int:
    """The length of the particle datasets of input ``path``; raises ConfigError naming what is wrong.

    Opened serially (rank 0): the file must exist and be a complete HDF5
    file (HDF5 refuses a truncated one) with ``steps`` timesteps of the 8
    VPIC-IO float32 1-D datasets, all of one length that ``ranks`` divide.
    """
    import h5py
    import numpy as np

    where = f"option --input={path}"
    if not path.is_file():
        raise ConfigError(f"{where}: no such file; allowed: a shared-file VPIC-IO output (vpic --keep), "
                          "or no --input to write one")
    try:
        file = h5py.File(path, "r")
    except OSError as exc:
        raise ConfigError(f"{where}: not a complete HDF5 file ({exc}); allowed: a VPIC-IO output "
                          "written to the end") from None
    with file:
        lengths = set()
        for step in range(steps):
            for name in vpic.VARIABLES:
                dataset = file.get(f"Timestep_{step}/{name}")
                if not isinstance(dataset, h5py.Dataset) or dataset.ndim != 1 or dataset.dtype != np.float32:
                    raise ConfigError(f"{where}: has no 1-D float32 dataset Timestep_{step}/{name}; allowed: a "
                                      f"VPIC-IO output with at least --steps={steps} timesteps")
                lengths.add(dataset.shape[0])
    length = lengths.pop()
    if lengths or length % ranks or length // ranks < (stride if pattern == "subset" else 1):
        raise ConfigError(f"{where}: datasets of {sorted(lengths | {length})} particles cannot be shared by "
                          f"{ranks} ranks; allowed: one length, a multiple of the ranks (at least --stride per "
                          "rank for the subset pattern)")
    return length


def input_length(args: KernelArgs, ranks: int) -> int | None:
    """The checked length of the datasets of ``--input`` (see :func:`check_input`), or ``None`` without ``--input``.

    Run on rank 0 by :meth:`KernelRun.start`: a bad input exits 2 on every rank before any file is made.
    """
    options = args.options
    if not options["input"]:
        return None
    return check_input(Path(options["input"]), options["steps"], ranks, options["stride"], options["pattern"])


def write_input(comm, path: Path, config: IOConfig, apply, hints, particles: int, steps: int) -> None:
    """Write the VPIC-IO file the reads will read, untimed, with the configuration applied."""
    plan = vpic.FilePlan(path, True, comm.size * particles, comm.rank * particles, comm.rank * particles)
    run_untimed(vpic.make_writer(comm, plan, config, apply, hints, particles, steps, fsync=False), steps)


def input_reasons(config: IOConfig, given_input: bool) -> dict[str, str]:
    """The parameters that act on the input's creation, when ``--input`` was written beforehand: ``{name: reason}``."""
    if not given_input:
        return {}
    return {name: "the --input file was written beforehand: its layout and striping are fixed"
            for name in config.changed() if name in INPUT_LAYOUT}


def main(argv: Sequence[str] | None = None) -> None:
    run = KernelRun.start(SPEC, argv, OPTION_HELP, check=input_length)
    options, config = run.options, run.config
    steps, given_input = options["steps"], bool(options["input"])
    length = run.checked if given_input else run.ranks * options["particles"]
    path = Path(options["input"]) if given_input else Path(run.out) / "bdcats-input.h5"
    run.settle(file_per_process=False, where=path.parent, extra=input_reasons(config, given_input))
    if not given_input:
        write_input(run.comm, path, config, run.apply, run.hints, options["particles"], steps)

    share = Share(run.rank * (length // run.ranks), length // run.ranks, options["pattern"], options["stride"])
    reader = StepFile(
        path, True, step_plans(share, length, steps),
        fapl=stack.file_access_plist(config, run.apply, run.comm, run.hints),
        dxpl=stack.dataset_transfer_plist(run.apply), write=False,
    )
    run.own_files([path] if not given_input and run.rank == 0 else [], [path])
    run.kept = given_input or options["keep"]
    values_read = run.comm.allreduce(plan_values(reader.steps))
    run.time_reads(reader, steps, values_read // steps * vpic.ITEMSIZE)
    run.confirm(run.apply)
    run.verdict(reader.mismatches(), values_read, "read")
    run.finish(input=str(path), input_written=not given_input, pattern=options["pattern"],
               particles_per_rank=share.count)


if __name__ == "__main__":
    run_main(main)
