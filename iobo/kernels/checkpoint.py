"""Checkpoint/restart: FLASH-IO- and HACC-IO-like checkpoint files of many variables per rank, and the restart read.

Every rank holds ``variables`` float64 variables of ``variable_bytes`` bytes
each. Each of ``checkpoints`` checkpoints is a new HDF5 file with one 1-D
dataset per variable (``var00``, ``var01``...): by default ONE shared file
``DIR/chk_<i>.h5`` through HDF5's MPI-IO driver, rank r writing its slice of
every dataset; with ``files=per_process`` one file per rank
``DIR/chk_<i>.<rank>.h5`` through HDF5's POSIX (sec2) driver. A checkpoint
is timed whole: create + writes + close (+ fsync). The restart reads the
last checkpoint back the same way (open + reads + close) and checks every
value.

    mpiexec -n R python -m iobo.kernels.checkpoint --out DIR [--variables 24] [--variable-bytes 131072]
        [--checkpoints 2] [--phases write|read|write+read] [--config FILE.json] [--repeats K]
        [--fsync] [--keep] [--verify]

``--phases write+read`` (default) reports TunIO's mixed objective; ``read``
writes the checkpoints untimed first and times the restart only.

Bytes per rank and checkpoint: variables * variable_bytes; defaults 24 x
128 KiB = 3 MiB, fit for a 2-core machine. On a cluster: FLASH-IO (Sedov,
24 variables, 80 blocks of 8x8x8 cells per rank, double): ``--variables 24
--variable-bytes 327680``; HACC-IO (9 variables per particle, e.g. 4 Mi
particles per rank): ``--variables 9 --variable-bytes 33554432`` (as float64).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iobo import stack
from iobo.kernels import KernelSpec, inputs, vpic
from iobo.kernels.checks import Mismatches, exact_float32, global_index
from iobo.kernels.run import KernelRun, run_main
from iobo.kernels.steps import DatasetPlan, Slab, StepFile, plan_values, reread
from iobo.kernels.timing import Phase
from iobo.space import Space, Workload

ITEMSIZE = 8
"""Bytes per value (float64, as FLASH writes)."""

OPTION_HELP = {
    "variables": "variables per rank, one dataset each (default 24, as FLASH-IO)",
    "variable_bytes": "bytes of one variable on one rank, a multiple of 8 (default 131072 = 128 KiB)",
    "checkpoints": "checkpoint files written, each timed as one step (default 2)",
    "phases": "write: the checkpoints; read: the restart read of the last one (checkpoints written untimed); "
    "write+read (default): both, scored by TunIO's mixed objective",
    "verify": "for --phases write: after timing, reopen the checkpoints and check every value (reads are "
    "always checked)",
}


def space() -> Space:
    """The I/O-stack parameters, ROMIO's read hints and the choice of one shared file or a file per rank."""
    return inputs.stack_subspace(extra=(vpic.FILES, *inputs.READ_HINTS))


def workload(ranks: int, options: Mapping[str, Any]) -> Workload:
    """``ranks`` and the bytes of one shared-file dataset: ranks * variable_bytes."""
    return Workload(ranks=ranks, dataset_bytes=ranks * options["variable_bytes"])


def check_options(options: Mapping[str, Any]) -> None:
    """variables, checkpoints >= 1; variable_bytes >= 8, a multiple of 8; phases one of PHASES; common rules."""
    inputs.require_int_at_least(options, "variables", 1)
    inputs.require_int_at_least(options, "variable_bytes", ITEMSIZE)
    inputs.require_multiple_of(options, "variable_bytes", ITEMSIZE, "whole float64 values")
    inputs.require_int_at_least(options, "checkpoints", 1)
    inputs.require_choice(options, "phases", inputs.PHASES)
    inputs.check_common_options(options)


SPEC = KernelSpec(
    name="checkpoint",
    module="iobo.kernels.checkpoint",
    space=space,
    workload=workload,
    options={"variables": 24, "variable_bytes": 131072, "checkpoints": 2, "phases": "write+read",
             "repeats": 1, "fsync": False, "keep": False, "verify": False},
    check_options=check_options,
    doc="FLASH-IO/HACC-IO-like checkpoint: each rank writes many float64 variables to checkpoint files "
    "(shared or per process), then the restart reads the last one back.",
)


def checkpoint_path(out: Path, checkpoint: int, shared: bool, rank: int) -> Path:
    """``out/chk_<i>.h5`` (shared) or ``out/chk_<i>.<rank>.h5`` (a rank's own)."""
    return out / (f"chk_{checkpoint}.h5" if shared else f"chk_{checkpoint}.{rank}.h5")


def checkpoint_plans(rank: int, ranks: int, shared: bool, variables: int, count: int,
                     checkpoint: int) -> list[DatasetPlan]:
    """The datasets of one checkpoint file with this rank's slice of each (``count`` values per variable)."""
    length, offset = (ranks * count, rank * count) if shared else (count, 0)
    plans = []
    for variable in range(variables):
        index = global_index((ranks * count,), (rank * count,), (count,))
        values = exact_float32(index, checkpoint * variables + variable).astype("<f8")
        plans.append(DatasetPlan(f"var{variable:02d}", (length,), "<f8", (Slab((offset,), values),)))
    return plans


@dataclass
class CheckpointWrites(Phase):
    """The write phase: one step per checkpoint, each a whole file (create + writes + close).

    files[i]: checkpoint i as a :class:`iobo.kernels.steps.StepFile` of one step; the
    HDF5 settings and hints in effect are read from the last one before it
    closes.
    """

    files: Sequence[StepFile]
    probed: Any = None

    def open(self) -> None:
        return None

    def do_step(self, _, checkpoint: int) -> None:
        step_file = self.files[checkpoint]
        file = step_file.open()
        step_file.do_step(file, 0)
        if checkpoint == len(self.files) - 1:
            self.probed = step_file.probe(file)
        step_file.close(file)

    def probe(self, _) -> Any:
        return self.probed

    def close(self, _) -> None:
        return None


def main(argv: Sequence[str] | None = None) -> None:
    run = KernelRun.start(SPEC, argv, OPTION_HELP)
    options = run.options
    shared, (time_writes, time_reads) = run.config["files"] == "shared", inputs.phases(options)
    variables, checkpoints, count = options["variables"], options["checkpoints"], options["variable_bytes"] // ITEMSIZE
    run.settle(file_per_process=not shared)
    fapl = stack.file_access_plist(run.config, run.apply, run.comm if shared else None, run.hints)
    dxpl = stack.dataset_transfer_plist(run.apply)
    paths = [checkpoint_path(Path(run.out), i, shared, run.rank) for i in range(checkpoints)]
    writes = CheckpointWrites([
        StepFile(path, shared, [checkpoint_plans(run.rank, run.ranks, shared, variables, count, i)], fapl, dxpl,
                 dcpl=lambda plan: stack.dataset_create_plist(run.apply, plan.shape[0], ITEMSIZE),
                 write=True, fsync=options["fsync"])
        for i, path in enumerate(paths)])
    restart = StepFile(paths[-1], shared, writes.files[-1].steps, fapl, dxpl, write=False)
    run.own_files(paths if not shared or run.rank == 0 else [],
                  [checkpoint_path(Path(run.out), i, shared, rank)
                   for i in range(checkpoints) for rank in range(1 if shared else run.ranks)])
    checkpoint_bytes = run.ranks * variables * count * ITEMSIZE

    if time_writes:
        run.time_writes(writes, checkpoints, checkpoint_bytes)
    else:
        run.write_untimed(writes, checkpoints)
    if time_reads:
        run.time_reads(restart, 1, checkpoint_bytes)
    run.confirm(run.apply)
    if time_reads:
        run.verdict(restart.mismatches(), run.ranks * plan_values(restart.steps), "read at restart")
    elif options["verify"]:
        found = Mismatches()
        for step_file in writes.files:
            found.merge(reread(step_file, fapl))
        run.verdict(found, run.ranks * variables * count * checkpoints, "written")
    run.finish()


if __name__ == "__main__":
    run_main(main)
