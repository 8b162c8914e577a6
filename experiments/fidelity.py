"""Does iobo's figure for a program equal the program's own? Run it under the shim, read both off the same runs.

For each configuration given (``--config NAME=JSON``, iobo parameter values;
``{}`` is the system default), interleaved round by round, the command runs
once as a trial of ``iobo tune --command`` would (``iobo.launch.run_kernel``
on a :class:`iobo.kernels.command.CommandSpec`: ``mpiexec``, the shim, a fresh
``{workdir}``), and two figures are read off that one run:

- the program's own bandwidth: ``--program-regex`` on its stdout, in ``--unit``
  (the spec's objective, so iobo parses it exactly as ``--objective regex:`` does);
- iobo's: the shim's report of the run, bytes over the slowest rank's I/O
  phases (``iobo.adapters.run_measure``, the default objective); and, to show
  what the measure replaced, the bytes over the seconds inside the top level's
  reads and writes (``io_seconds``).

Printed per configuration: the medians of both figures and of their per-run
ratio (iobo / program) with a percentile-bootstrap 95% interval of that
median (seeded), and the range. A third-party program is built outside the
repository; ``--source`` records where it came from (repository and commit)::

    .venv/bin/python -m experiments.fidelity \\
        --command '/tmp/ior-src/src/ior -a HDF5 -w -b 16m -t 1m -s 4 -o {workdir}/ior.h5' \\
        --program-regex '^write\\s+([0-9.]+)' --unit MiB/s --ranks 2 --repeats 8 \\
        --config contiguous='{}' --config chunked='{"layout": "chunked", "chunk_size": 65536}' \\
        --source 'github.com/hpc/ior 5fcf0ba995fd92164d50e344597e2d8203298c08' \\
        --out experiments/results/fidelity-ior.txt
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

from experiments.harness.recording import machine
from iobo.errors import JobEnded
from iobo.kernels.command import UNITS, CommandSpec, Objective
from iobo.launch import KernelJob, run_kernel


def one_run(spec: CommandSpec, values: dict, ranks: int, workdir: str) -> dict[str, float]:
    """Both figures of one run (MB/s): the program's, iobo's (phases) and the old one (inside reads/writes)."""
    outcome = run_kernel(KernelJob(kernel=spec, values=values, ranks=ranks, workdir=workdir, timeout_s=600))
    io = outcome["result"]["io"]
    moved = io["bytes_written"] + io["bytes_read"]
    return {"program": outcome["mb_per_s"], "iobo": moved / io["phase_seconds"] / 1e6,
            "inside_calls": moved / io["io_seconds"] / 1e6, "bytes": moved}


def median_interval(values: list[float], resamples: int = 4000, seed: int = 0) -> tuple[float, float, float]:
    """Median and its percentile-bootstrap 95% interval."""
    rng = np.random.default_rng(seed)
    data = np.asarray(values)
    medians = np.median(rng.choice(data, size=(resamples, data.size), replace=True), axis=1)
    return float(np.median(data)), float(np.quantile(medians, 0.025)), float(np.quantile(medians, 0.975))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--command", required=True, help="the program and its arguments, with {workdir}")
    parser.add_argument("--program-regex", required=True, help="its printed bandwidth (one group: the number)")
    parser.add_argument("--unit", choices=tuple(UNITS), default="MB/s")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--config", action="append", default=[], metavar="NAME=JSON",
                        help="iobo parameter values, e.g. chunked='{\"layout\": \"chunked\"}' (repeatable)")
    parser.add_argument("--workdir", default="/dev/shm")
    parser.add_argument("--source", default="", help="where the program came from (repository and commit)")
    parser.add_argument("--out", help="also write the figures to this file")
    args = parser.parse_args(argv)

    configs = {name: json.loads(text) for name, _, text in (c.partition("=") for c in args.config)} or {"default": {}}
    spec = CommandSpec(args.command, objective=Objective("regex", args.program_regex, args.unit))
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in configs}
    with tempfile.TemporaryDirectory(dir=args.workdir, prefix="iobo-fidelity-") as workdir:
        run_kernel(KernelJob(kernel=spec, values=spec.space().default(), ranks=args.ranks, workdir=workdir))  # warm
        for _ in range(args.repeats):
            for name, values in configs.items():
                try:
                    runs[name].append(one_run(spec, {**spec.space().default(), **values}, args.ranks, workdir))
                except JobEnded as exc:
                    print(f"{name}: run failed: {exc.reason}", file=sys.stderr)

    lines = [f"# experiments.fidelity on {machine()}",
             f"# command: {args.command} (ranks {args.ranks}, workdir {args.workdir}, {args.repeats} interleaved rounds)",
             f"# program's figure: regex {args.program_regex!r} in {args.unit}; iobo's: bytes over the slowest rank's "
             f"I/O phases; 'inside calls': bytes over the seconds inside the top level's reads and writes",
             *([f"# source: {args.source}"] if args.source else []),
             f"{'configuration':<14} {'runs':>4} {'program MB/s':>13} {'iobo MB/s':>10} "
             f"{'iobo/program median [95% CI] (range)':>40} {'inside calls/program':>21}"]
    for name, got in runs.items():
        if not got:
            lines.append(f"{name:<14} {0:>4} (every run failed)")
            continue
        ratio = [r["iobo"] / r["program"] for r in got]
        old = [r["inside_calls"] / r["program"] for r in got]
        mid, low, high = median_interval(ratio)
        lines.append(f"{name:<14} {len(got):>4} {statistics.median(r['program'] for r in got):>13.1f} "
                     f"{statistics.median(r['iobo'] for r in got):>10.1f} "
                     f"{f'{mid:.3f} [{low:.3f}-{high:.3f}] ({min(ratio):.3f}-{max(ratio):.3f})':>40} "
                     f"{statistics.median(old):>21.3f}")
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
