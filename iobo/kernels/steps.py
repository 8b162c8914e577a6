"""HDF5 files whose datasets are written (or read) step by step, with the values each rank must hold."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iobo import stack
from iobo.kernels import files
from iobo.kernels.checks import Mismatches
from iobo.kernels.timing import Phase, run_untimed


@dataclass(frozen=True)
class Slab:
    """One block of a dataset that this rank writes or reads.

    start: where the block starts; values: what it holds (written, or
    expected on reading), of the block's shape; stride: every stride-th item
    along each axis (``None``: contiguous block).
    """

    start: tuple[int, ...]
    values: Any
    stride: tuple[int, ...] | None = None


@dataclass(frozen=True)
class DatasetPlan:
    """One dataset of a step: its path in the file (``Timestep_0/E``), full shape, numpy dtype and this rank's slabs.

    Every rank has the same plans in the same order (dataset creation is
    collective) and the same number of slabs in each (so collective
    transfers match).
    """

    name: str
    shape: tuple[int, ...]
    dtype: str
    slabs: tuple[Slab, ...]

    @property
    def itemsize(self) -> int:
        """Bytes per item."""
        import numpy as np

        return np.dtype(self.dtype).itemsize


def plan_values(steps: Sequence[Sequence[DatasetPlan]]) -> int:
    """Items in every slab of every step: this rank's share of the values."""
    return sum(slab.values.size for plans in steps for plan in plans for slab in plan.slabs)


@dataclass
class StepFile(Phase):
    """One rank's timed repeat over one HDF5 file whose datasets are written (or read) step by step.

    steps[i]: the datasets of step i; fapl, dxpl: access and transfer
    property lists; shared: one file for all ranks (mpio driver); write:
    create and write, else open and read, keeping what was read in ``got``
    (``got[step][plan][slab]``) to compare after the timing; dcpl (writes):
    ``DatasetPlan -> creation plist`` for new datasets; fsync: flush after
    writing.
    """

    path: Path
    shared: bool
    steps: Sequence[Sequence[DatasetPlan]]
    fapl: Any
    dxpl: Any
    write: bool
    dcpl: Callable[[DatasetPlan], Any] | None = None
    fsync: bool = False
    got: list = field(default_factory=list)

    def open(self):
        self.got = []
        return stack.create_file(self.path, self.fapl) if self.write else stack.open_file(self.path, self.fapl)

    def do_step(self, file, step: int) -> None:
        if self.write:
            for plan in self.steps[step]:
                parent = plan.name.rpartition("/")[0]
                group = file.require_group(parent) if parent else file
                dataset = stack.create_dataset(group, plan.name.rpartition("/")[2], plan.shape, self.dcpl(plan),
                                            plan.dtype)
                for slab in plan.slabs:
                    stack.write_hyperslab(dataset, slab.values, slab.start, self.dxpl)
        else:
            self.got.append([[stack.read_hyperslab(file[plan.name].id, slab.start, slab.values.shape, self.dxpl,
                                                slab.stride)
                              for slab in plan.slabs] for plan in self.steps[step]])

    def probe(self, file) -> tuple[dict[str, Any], dict[str, str]]:
        """(HDF5 settings, MPI-IO hints) in effect, read from the open file and its last dataset."""
        dataset = file[self.steps[-1][-1].name].id
        return stack.effective_hdf5(file, dataset, self.dxpl), stack.effective_hints(file) if self.shared else {}

    def close(self, file) -> None:
        file.close()
        if self.write and self.fsync:
            files.fsync_file(self.path)

    def mismatches(self) -> Mismatches:
        """What was read (``got``) against the plans' values."""
        found = Mismatches()
        for plans, arrays in zip(self.steps, self.got):
            for plan, slabs in zip(plans, arrays):
                for slab, actual in zip(plan.slabs, slabs):
                    found.compare(f"{self.path.name}:{plan.name}{list(slab.start)}+", slab.values, actual)
        return found


def reread(step_file: StepFile, fapl) -> Mismatches:
    """Read back every slab ``step_file`` wrote (untimed, through ``fapl``) and compare with what was written."""
    reader = StepFile(step_file.path, step_file.shared, step_file.steps, fapl, stack.dataset_transfer_plist({}),
                      write=False)
    run_untimed(reader, len(reader.steps))
    return reader.mismatches()
