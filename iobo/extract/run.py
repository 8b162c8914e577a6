"""Run a command once on R ranks under the shim and return its outcome with the merged shim report
(``report``) and wall time (``wall_seconds``): the kernel's check run, and the program's for a comparison. A
kernel with reduced loops (:mod:`iobo.extract.loops`) also gives its gate counts (``loops``: ``{file.c:LINE:
{"gate", "executed", "kept"}}``) and the factor reached / run (``scale``; 1 without); :func:`run_scaled` runs it
again, once per gate, to estimate the program's signature (:func:`iobo.extract.scaling.extrapolate`)."""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager


@contextmanager
def _variables(**values):
    """``os.environ`` with ``values`` set (None: left as is) for the block (the run's environment is this
    process's), then as before."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update({name: value for name, value in values.items() if value is not None})
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run_once(template, ranks: int = 2, workdir: str | os.PathLike | None = None, launcher=None,
             timeout_s: float = 3600.0, gate: tuple[int, int] | None = None) -> dict:
    """Run ``template`` (a command template, ``{workdir}`` for the run's own directory under ``workdir``, default
    a temporary one; or a :class:`iobo.kernels.command.CommandSpec`, its directory and name kept) with the system
    default configuration (``gate``: (N, k), a kernel's gate N keeps 1 in k of its runs for this run); a failed
    run raises :class:`iobo.errors.KernelError` with its command, exit code and output tails."""
    from iobo.extract.helper import COUNTS_VARIABLE, GATE_VARIABLE
    from iobo.extract.scaling import read_counts, scale
    from iobo.kernels.command import CommandSpec
    from iobo.launch import KernelJob, MpiexecLauncher, run_kernel
    from iobo.replay.record import ProgramRun

    spec = ProgramRun.of(template if isinstance(template, CommandSpec) else CommandSpec(template))
    with tempfile.TemporaryDirectory(prefix="iobo-extract-") as scratch:
        counts_dir = os.path.join(scratch, "loops")
        os.mkdir(counts_dir)
        job = KernelJob(kernel=spec, values=spec.space().default(), ranks=ranks, workdir=str(workdir or scratch),
                        launcher=launcher or MpiexecLauncher(), timeout_s=timeout_s, tag="extract")
        with _variables(**{COUNTS_VARIABLE: counts_dir, GATE_VARIABLE: None if gate is None else "%d:%d" % gate}):
            outcome = run_kernel(job)
        loops = read_counts(counts_dir)
        return {**outcome, "loops": loops, "scale": scale(loops)}


def run_scaled(template, ranks: int = 2, workdir: str | os.PathLike | None = None, launcher=None,
               timeout_s: float = 3600.0) -> dict:
    """:func:`run_once`, with ``signature`` (the run's I/O signature), ``estimate`` (the program's: the same when
    nothing was skipped; else from one more run per gate that skipped runs, that gate alone running its first
    time only, or every time when that is as many: :func:`iobo.extract.scaling.extrapolate`) and ``how`` (the
    estimate's method, in words)."""
    from iobo.extract.scaling import FIRST_ONLY, extrapolate
    from iobo.replay.signature import signature

    outcome = run_once(template, ranks, workdir, launcher, timeout_s)
    found = signature(outcome["report"])
    if outcome["scale"] == 1.0:
        return {**outcome, "signature": found, "estimate": found, "how": "nothing was skipped: the counts as run"}
    apart = {}
    for where, count in outcome["loops"].items():
        if count["executed"] == count["kept"]:
            continue
        other = run_once(template, ranks, workdir, launcher, timeout_s, gate=(count["gate"], FIRST_ONLY))
        if other["loops"].get(where, {}).get("kept") == count["kept"]:  # first only is as many: every run
            other = run_once(template, ranks, workdir, launcher, timeout_s, gate=(count["gate"], 1))
        apart[where] = (signature(other["report"]), other["loops"])
    estimate, how = extrapolate(found, outcome["loops"], apart)
    return {**outcome, "signature": found, "estimate": estimate, "how": how}
