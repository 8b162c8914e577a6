"""The skeleton every kernel's ``main`` follows, and the failure handling around it.

A run goes, on every rank: read the inputs (command line and configuration,
validated on rank 0: exit code 2 before any I/O when invalid) and make the
output directory (:meth:`KernelRun.start`); decide which parameters apply
here and so the MPI-IO hints (:meth:`KernelRun.settle`); time the write
and/or read phases, each repeated ``--repeats`` times, printing a line per
step (:meth:`KernelRun.time_writes`, :meth:`KernelRun.time_reads`); name the
requested settings the open file did not confirm (:meth:`KernelRun.confirm`);
check the values (:meth:`KernelRun.verdict`); remove the files unless
``--keep`` and print the result (:meth:`KernelRun.finish`).

    def main(argv=None):
        run = KernelRun.start(SPEC, argv, OPTION_HELP)
        run.settle(file_per_process=False)
        writer = ...  # a Phase, built with run.apply and run.hints
        run.own_files([path] if run.rank == 0 else [], [path])
        run.time_writes(writer, steps, step_bytes, label=None)
        run.confirm(run.apply)
        run.finish()

    if __name__ == "__main__":
        run_main(main)
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from time import sleep
from typing import Any

from iobo import stack
from iobo.config import IOConfig
from iobo.kernels import KernelSpec, checks, files
from iobo.kernels.inputs import InputCheck, KernelArgs, read_inputs
from iobo.kernels.records import PhaseRun, emit, result_record, step_emitter
from iobo.kernels.timing import Phase, RepeatTiming, run_untimed, timed_phase

ABORT_GRACE_SECONDS = 0.5
"""Pause between printing a traceback and MPI_Abort: mpiexec drops output still in transit when it
kills the job (seen with MPICH's hydra: the whole traceback lost in 1 run of 12 without it)."""


def repeat_phase(comm, repeats: int, steps: int, phase: Phase, step_bytes: int, label: str | None = None,
                 first_step: int = 0, remove: Sequence[Path] = ()) -> tuple[list[RepeatTiming], Any]:
    """Time ``repeats`` repeats of ``phase``; returns the timings and the last repeat's probe.

    Before each repeat the files in ``remove`` are deleted (a write creates
    them anew: striping is set at creation). Prints the step lines (``label``:
    their phase, numbered from ``first_step``).
    """
    timings, probed = [], None
    for repeat in range(repeats):
        files.remove_files(remove)
        timing, probed = timed_phase(comm, steps, phase, step_emitter(comm, repeat, step_bytes, label, first_step))
        timings.append(timing)
    return timings, probed


@dataclass
class KernelRun:
    """One kernel run on this rank: its inputs, what applies, the phases timed, what took effect, the verdict.

    comm: ``MPI.COMM_WORLD``; checked: what the kernel's input check
    returned (see :func:`iobo.kernels.inputs.read_inputs`). The fields below
    it are filled as the run goes: fs_type, not_applied (``{name:
    reason}``), apply (values to apply), hints (MPI-IO hints to pass) by
    :meth:`settle`; my_files (this rank's files, removed before each timed
    write and at the end unless kept), all_files (every file of the run, as
    reported) and kept by :meth:`own_files`; written, read, effective,
    effective_hints by the phases; verified and failure by :meth:`verdict`.
    """

    spec: KernelSpec
    comm: Any
    args: KernelArgs
    config: IOConfig
    checked: Any = None
    fs_type: str = "unknown"
    not_applied: dict[str, str] = field(default_factory=dict)
    apply: dict[str, Any] = field(default_factory=dict)
    hints: dict[str, str] = field(default_factory=dict)
    my_files: list[Path] = field(default_factory=list)
    all_files: list[str] = field(default_factory=list)
    kept: bool = False
    written: PhaseRun | None = None
    read: PhaseRun | None = None
    write_steps: int = 0
    effective: dict[str, Any] = field(default_factory=dict)
    effective_hints: dict[str, str] = field(default_factory=dict)
    verified: bool | None = None
    failure: str = ""

    @classmethod
    def start(cls, spec: KernelSpec, argv: Sequence[str] | None = None, option_help: Mapping[str, str] | None = None,
              check: InputCheck | None = None) -> "KernelRun":
        """Read and check the inputs on ``MPI.COMM_WORLD`` (exit 2 when invalid), then make the output directory."""
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
        args, config, checked = read_inputs(spec, comm, argv, option_help, check)
        files.prepare_output_dir(comm, args.out)
        return cls(spec, comm, args, config, checked, kept=bool(args.options.get("keep", False)))

    @property
    def options(self) -> dict[str, Any]:
        return self.args.options

    @property
    def out(self) -> Path:
        """The output directory."""
        return self.args.out

    @property
    def rank(self) -> int:
        return self.comm.rank

    @property
    def ranks(self) -> int:
        return self.comm.size

    def settle(self, file_per_process: bool, where: Path | None = None, extra: Mapping[str, str] | None = None) -> None:
        """Decide what applies: the parameters that cannot take effect, the values to apply, the hints.

        where: the directory whose file system counts (default: the output
        directory); extra: the kernel's own ``{name: reason}``, added to
        (and overriding) :func:`iobo.stack.not_applicable`'s.
        """
        self.fs_type = stack.filesystem_type(where if where is not None else self.out)
        self.not_applied = stack.not_applicable(self.config, self.fs_type, file_per_process) | dict(extra or {})
        self.apply = stack.applicable(self.config, self.not_applied)
        self.hints = stack.requested_hints(self.config, self.not_applied)

    def own_files(self, mine: Sequence[Path], every: Sequence[Path]) -> None:
        """This rank's files (removed before each timed write, and at the end unless kept) and every file of the run."""
        self.my_files = list(mine)
        self.all_files = [str(path) for path in every]

    def time_writes(self, phase: Phase, steps: int, step_bytes: int, label: str | None = "write") -> None:
        """Time the write phase (``steps`` steps of ``step_bytes`` bytes over all ranks), each repeat on new files."""
        timings, probed = repeat_phase(self.comm, self.options["repeats"], steps, phase, step_bytes, label,
                                       remove=self.my_files)
        self.written, self.write_steps = (step_bytes * steps, timings), steps
        self.effective, self.effective_hints = probed

    def write_untimed(self, phase: Phase, steps: int) -> None:
        """Write the files once without timing (the input of a timed read), old files cleared first."""
        files.clear_files(self.comm, self.my_files)
        run_untimed(phase, steps)

    def time_reads(self, phase: Phase, steps: int, step_bytes: int, label: str | None = "read") -> None:
        """Time the read phase; its steps are numbered after the timed write steps."""
        timings, probed = repeat_phase(self.comm, self.options["repeats"], steps, phase, step_bytes, label,
                                       first_step=self.write_steps)
        self.read = (step_bytes * steps, timings)
        self.effective, self.effective_hints = probed

    def read_untimed(self, phase: Phase, steps: int) -> None:
        """Read every rank's data back without timing (to verify a write), once all ranks have written."""
        self.comm.Barrier()
        run_untimed(phase, steps)

    def confirm(self, requested_hdf5: Mapping[str, Any]) -> None:
        """Add to ``not_applied`` the requested HDF5 values and hints that the open file did not show in effect."""
        self.not_applied |= stack.unconfirmed_settings(self.config, requested_hdf5, self.effective, self.hints,
                                                       self.effective_hints)

    def verdict(self, mismatches: checks.Mismatches, checked: int, what: str) -> None:
        """Record whether every rank's values were right (``checked`` values compared over all ranks)."""
        self.verified, self.failure = checks.verdict(self.comm, self.spec.name, mismatches, checked, what)

    def hosts(self) -> dict[str, list[int]]:
        """Per host (``MPI.Get_processor_name``), the ranks that ran on it; the same on every rank."""
        from mpi4py import MPI

        hosts: dict[str, list[int]] = {}
        for rank, host in enumerate(self.comm.allgather(MPI.Get_processor_name())):
            hosts.setdefault(host, []).append(rank)
        return dict(sorted(hosts.items()))

    def finish(self, **fields: Any) -> None:
        """Remove the files unless kept, print the result (``fields`` first); exit 1 when the check failed."""
        files.release_files(self.comm, self.my_files, self.kept)
        emit(self.comm, result_record(
            self.spec.name, self.ranks, self.written, self.read, **fields,
            effective=self.effective, requested_hints=self.hints, hints=self.effective_hints,
            not_applied=self.not_applied, fs_type=self.fs_type, files=self.all_files, kept=self.kept,
            verified=self.verified, config=self.config.to_dict(), hosts=self.hosts(),
        ))
        if self.verified is False:
            if self.rank == 0:
                print(self.failure, file=sys.stderr, flush=True)
            sys.exit(1)


def run_main(main: Callable[[Sequence[str] | None], None], argv: Sequence[str] | None = None) -> None:
    """Run a kernel's ``main`` so that a failure on any rank ends the whole job.

    An exception prints its traceback on stderr and calls
    ``MPI.COMM_WORLD.Abort(1)``: the other ranks, waiting in a collective
    call, would otherwise hang forever. ``sys.exit`` passes through.
    """
    try:
        main(argv)
    except Exception:
        sys.stderr.write(traceback.format_exc())
        sys.stderr.flush()
        sleep(ABORT_GRACE_SECONDS)
        from mpi4py import MPI

        MPI.COMM_WORLD.Abort(1)
