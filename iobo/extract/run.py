"""Run a command once on R ranks under the shim and return its outcome with the merged shim report
(``report``) and wall time (``wall_seconds``): the kernel's check run, and the program's for a comparison."""

from __future__ import annotations

import os
import tempfile


def run_once(template: str, ranks: int = 2, workdir: str | os.PathLike | None = None, launcher=None,
             timeout_s: float = 3600.0) -> dict:
    """Run ``template`` (``{workdir}`` for the run's own directory under ``workdir``, default a temporary one)
    with the system default configuration; a failed run raises :class:`iobo.errors.KernelError` with its
    command, exit code and output tails."""
    from iobo.kernels.command import CommandSpec
    from iobo.launch import KernelJob, MpiexecLauncher, run_kernel
    from iobo.replay.record import ProgramRun

    spec = ProgramRun.of(CommandSpec(template))
    with tempfile.TemporaryDirectory(prefix="iobo-extract-") as scratch:
        job = KernelJob(kernel=spec, values=spec.space().default(), ranks=ranks, workdir=str(workdir or scratch),
                        launcher=launcher or MpiexecLauncher(), timeout_s=timeout_s, tag="extract")
        return run_kernel(job)
