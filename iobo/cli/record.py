"""``iobo record --ranks R [--out TRACE] -- PROGRAM ARGS``: run a program once under the shim and save its I/O as a
replayable trace (a kernel for ``iobo tune --trace``; check it with ``iobo check --trace``).

``iobo record --from-darshan LOG [--out TRACE]`` makes the trace from a Darshan log's DXT records instead
(:mod:`iobo.replay.darshan`): no run, POSIX and MPI-IO level only."""

from __future__ import annotations

import sys
from pathlib import Path

from iobo.cli import common
from iobo.errors import ConfigError


def add_parser(sub) -> None:
    p = sub.add_parser("record", help="run your program once and save its I/O as a trace, a kernel to tune")
    p.add_argument("--ranks", type=common.positive_int, help="MPI ranks to run the program on (a Darshan log's "
                                                             "trace has the log's)")
    p.add_argument("--from-darshan", metavar="LOG", help="make the trace from a Darshan log's DXT records (the run "
                                                         "had DXT_ENABLE_IO_TRACE=1) instead of running a program")
    p.add_argument("--out", metavar="TRACE", help="the trace file (default: <program>.trace.json here, "
                                                  "<log name>.trace.json for a Darshan log)")
    p.add_argument("--workdir", metavar="DIR", help="the directory the trace's paths are relative to, which a "
                                                    "replay puts under its own (default: the one the program "
                                                    "wrote into)")
    p.add_argument("--mpiexec", default=None, help="MPI launcher (default: mpiexec.mpich or $IOBO_MPIEXEC)")
    p.add_argument("--timeout", type=float, default=86400.0, help="limit of the run, seconds (default: %(default)g)")
    p.add_argument("argv", nargs="*", metavar="-- PROGRAM ARGS", help="the program and its arguments, after -- "
                                                                      "(no mpiexec)")


def run(args) -> int:
    if args.from_darshan is not None:
        return _from_darshan(args)
    from iobo.replay.record import default_trace_path, record

    if args.ranks is None or not args.argv:
        raise ConfigError("iobo record needs --ranks R and the program after --, e.g. iobo record --ranks 4 -- "
                          "./app -o out (or --from-darshan LOG for a Darshan DXT log)")
    out = Path(args.out) if args.out else default_trace_path(args.argv)
    print(f"iobo record: running {' '.join(args.argv)} on {args.ranks} ranks under the shim", file=sys.stderr,
          flush=True)
    trace = record(args.argv, args.ranks, args.workdir, common.launcher(args.mpiexec), args.timeout)
    trace.save(out)
    _summary(trace, out, "events recorded")
    return 0


def _from_darshan(args) -> int:
    from iobo.replay.darshan import from_darshan

    given = [name for name, value in (("--ranks", args.ranks), ("--workdir", args.workdir),
                                      ("PROGRAM ARGS", args.argv or None)) if value is not None]
    if given:
        raise ConfigError(f"--from-darshan makes the trace from the log alone, on the log's ranks and with its "
                          f"paths under their common directory; drop {', '.join(given)}")
    log = Path(args.from_darshan)
    out = Path(args.out) if args.out else Path(f"{log.name.split('.')[0]}.trace.json")
    trace = from_darshan(log)
    trace.save(out)
    meta = trace.metadata
    print(f"from: {meta['log']} (Darshan {meta['darshan_version']}, {meta['nprocs']} ranks, "
          f"{meta['run_time_s']:g} s run)")
    print(f"program: {meta['exe'] or '(the log does not name it)'}")
    levels = meta["levels"]
    print(f"replayed at the MPI-IO level: {levels['mpiio']} files; at the POSIX level: {levels['posix']} files")
    _summary(trace, out, "events")
    return 0


def _summary(trace, out: Path, what: str) -> None:
    """What ``iobo record`` prints about a saved trace: its size, events, folds, I/O vs wall time, limits, next."""
    meta = trace.metadata
    events = sum(len(trace.expand(rank)) for rank in range(trace.ranks))
    print(f"trace: {out} ({out.stat().st_size:,} bytes)")
    print(f"ranks: {trace.ranks}, {what}: {events:,}")
    print("repetitions folded: " + (", ".join(f"{n} x a block of {size} events" for n, size in trace.folds()) or "none"))
    io_s, wall_s = meta["io_s"], meta["wall_s"]
    if wall_s:
        print(f"time: {io_s:.3g} s in I/O (slowest rank) of {wall_s:.3g} s wall ({100 * io_s / wall_s:.2g}%): a "
              f"kernel that does only the I/O saves up to {max(wall_s - io_s, 0.0):.3g} s a trial")
    print("what the trace does not hold:")
    for sentence in trace.not_recorded:
        print(f"  - {sentence}")
    print(f"next: iobo check --trace {out}   then: iobo tune --trace {out} --ranks {trace.ranks}")
