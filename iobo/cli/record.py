"""``iobo record --ranks R [--out TRACE] -- PROGRAM ARGS``: run a program once under the shim and save its I/O as a
replayable trace (a kernel for ``iobo tune --trace``; check it with ``iobo check --trace``)."""

from __future__ import annotations

import sys
from pathlib import Path

from iobo.cli import common


def add_parser(sub) -> None:
    p = sub.add_parser("record", help="run your program once and save its I/O as a trace, a kernel to tune")
    p.add_argument("--ranks", type=common.positive_int, required=True, help="MPI ranks to run the program on")
    p.add_argument("--out", metavar="TRACE", help="the trace file (default: <program>.trace.json here)")
    p.add_argument("--workdir", metavar="DIR", help="the directory the trace's paths are relative to, which a "
                                                    "replay puts under its own (default: the one the program "
                                                    "wrote into)")
    p.add_argument("--mpiexec", default=None, help="MPI launcher (default: mpiexec.mpich or $IOBO_MPIEXEC)")
    p.add_argument("--timeout", type=float, default=86400.0, help="limit of the run, seconds (default: %(default)g)")
    p.add_argument("argv", nargs="+", metavar="-- PROGRAM ARGS", help="the program and its arguments, after -- "
                                                                      "(no mpiexec)")


def run(args) -> int:
    from iobo.replay.record import default_trace_path, record

    out = Path(args.out) if args.out else default_trace_path(args.argv)
    print(f"iobo record: running {' '.join(args.argv)} on {args.ranks} ranks under the shim", file=sys.stderr,
          flush=True)
    trace = record(args.argv, args.ranks, args.workdir, common.launcher(args.mpiexec), args.timeout)
    trace.save(out)
    meta = trace.metadata
    events = sum(len(trace.expand(rank)) for rank in range(trace.ranks))
    print(f"trace: {out} ({out.stat().st_size:,} bytes)")
    print(f"ranks: {trace.ranks}, events recorded: {events:,}")
    print("repetitions folded: " + (", ".join(f"{n} x a block of {size} events" for n, size in trace.folds()) or "none"))
    io_s, wall_s = meta["io_s"], meta["wall_s"]
    print(f"time: {io_s:.3g} s in I/O (slowest rank) of {wall_s:.3g} s wall ({100 * io_s / wall_s:.2g}%): a kernel "
          f"that does only the I/O saves up to {max(wall_s - io_s, 0.0):.3g} s a trial")
    print("what the trace does not hold:")
    for sentence in trace.not_recorded:
        print(f"  - {sentence}")
    print(f"next: iobo check --trace {out}   then: iobo tune --trace {out} --ranks {trace.ranks}")
    return 0
