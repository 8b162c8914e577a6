"""``iobo extract SOURCES... -o KERNEL_DIR [--run 'ARGS'] [--drop F] [--reduce-loops K] [--redirect DIR] [-- FLAGS]``: cut a
C or C++ program's I/O kernel from its source, build it, run it once under the shim.

The sources come first, then after ``--`` the program's compile flags (``-I``, ``-D``, ``-O3``, libraries such as
``-lpng``: used to parse and to build; the first word starting with ``-`` ends the sources), or
``--compile-commands compile_commands.json``. The kernel's sources, its executable ``KERNEL_DIR/kernel``, the
marked view of what was kept (``view.txt``) and the counts (``extract.json``) go to ``KERNEL_DIR``. With
``--run 'ARGS'`` (the program's arguments; ``{workdir}`` for the run's own directory) the kernel runs once on
``--ranks`` ranks under the shim and its I/O per level is printed. ``--drop F``: the program's function F (a
solver whose results reach the I/O only through a log) is emptied in the kernel; ``iobo check`` then shows
whether the kernel's I/O is still the program's. ``--reduce-loops K``: the loops with I/O do
1 in K of their I/O's runs (:mod:`iobo.extract.loops`; the run's counts are printed scaled back by the runs
reached over those made); ``--redirect DIR``: the files the kernel creates go under DIR
(:mod:`iobo.extract.redirect`). When a step fails it says which and where;
the fallback is the recorded kernel (``iobo record``) or the program itself.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from iobo.cli import common
from iobo.errors import ConfigError, KernelError


def add_parser(sub) -> None:
    p = sub.add_parser("extract", help="cut a C or C++ program's I/O kernel from its source, build and run it")
    p.add_argument("-o", "--out", required=True, metavar="KERNEL_DIR", help="where the kernel's sources, "
                                                                              "executable and view go")
    p.add_argument("--compile-commands", metavar="JSON", help="a compilation database giving each source's flags "
                                                              "(instead of -- FLAGS)")
    p.add_argument("--cc", metavar="COMMAND", help="the program's compiler; a C++ one (mpicxx) makes every source "
                                                   "C++ (default: 'h5pcc.mpich -shlib' for an HDF5 program, else "
                                                   "mpicc.mpich; mpicxx.mpich for C++ sources)")
    p.add_argument("--synthetic", action="append", default=[], metavar="FUNCTION",
                   help="an external function whose pointer arguments may hold synthetic data (the computation "
                        "that fills them is dropped), e.g. an image writer; repeatable")
    p.add_argument("--drop", action="append", default=[], metavar="FUNCTION",
                   help="a function of the sources whose work the I/O does not need (a solver, a compute phase "
                        "whose results only a log reads): the kernel empties it (its calls "
                        "do nothing, return zero); check the kernel with iobo check; repeatable")
    p.add_argument("--reduce-loops", type=common.positive_int, default=1, metavar="K",
                   help="loops with I/O do 1 in K of their I/O's runs; the run's counts are scaled back "
                        "(default: 1, all)")
    p.add_argument("--redirect", metavar="DIR", help="files the kernel creates go under DIR (+ their absolute "
                                                     "path), e.g. /dev/shm/kernel; the inputs keep their paths")
    p.add_argument("--run", metavar="ARGS", help="run the kernel once with the program's arguments "
                                                 "({workdir}: the run's directory)")
    p.add_argument("--ranks", type=common.positive_int, default=2, help="MPI ranks of the run (default: 2)")
    p.add_argument("--mpiexec", default=None, help="MPI launcher (default: mpiexec.mpich or $IOBO_MPIEXEC)")
    p.add_argument("--timeout", type=float, default=3600.0, help="limit of the run, seconds (default: %(default)g)")
    p.add_argument("--view", action="store_true", help="print the marked source (always written to view.txt)")
    p.add_argument("--no-build", action="store_true", help="write the kernel's sources only")
    p.add_argument("sources", nargs="*", metavar="SOURCES... [-- FLAGS]", help="the C or C++ sources, then after -- "
                                                                             "the program's compile flags")
    parse = p.parse_known_args

    def parse_known_args(args=None, namespace=None):  # everything after -- is the flags, options included
        args = list(args or [])
        cut = args.index("--") if "--" in args else len(args)
        namespace, rest = parse(args[:cut], namespace)
        namespace.flags = args[cut + 1:]
        return namespace, rest

    p.parse_known_args = parse_known_args


def run(args) -> int:
    from iobo.extract import ExtractError
    from iobo.extract.pipeline import extract, kernel_template
    from iobo.extract.view import summary

    sources, flags = args.sources, args.flags
    if not sources:
        raise ConfigError("iobo extract needs the program's C sources (C or C++), e.g. iobo extract main.c io.c "
                          "-o kernel -- -I include")
    if flags and args.compile_commands:
        raise ConfigError("give the flags after -- or --compile-commands, not both")
    compiler = shlex.split(args.cc) if args.cc else None
    result = extract(sources, args.out, flags, args.compile_commands, compiler, args.synthetic,
                     build=not args.no_build, reduce_loops=args.reduce_loops, redirect=args.redirect,
                     drop=args.drop)
    if args.view:
        print(result.view)
    print(f"kernel: {result.kernel_dir} ({', '.join(p.name for p in result.sources)}; marked view: "
          f"{result.kernel_dir / 'view.txt'})")
    print(summary(result.counts))
    for file, line, note in result.notes:
        print(f"note: {file}:{line}: {note}")
    if result.reduce_loops > 1:
        print(f"reduced: {', '.join(result.reduced) or 'no loop'}: 1 in {result.reduce_loops} runs of that I/O")
    if result.redirect is not None:
        names = ", ".join(f"{call} {Path(file).name}:{line}" for file, line, call in result.redirected)
        print(f"redirected into {result.redirect}: {names or 'no file name'}")
    if result.build_command:
        print(f"built: {shlex.join(result.build_command)}")
    if args.run is None or result.executable is None:
        return 0
    from iobo.extract.run import run_scaled

    template = kernel_template(result.executable, args.run)
    print(f"running: {template} on {args.ranks} ranks under the shim", file=sys.stderr, flush=True)
    try:
        outcome = run_scaled(template, args.ranks, launcher=common.launcher(args.mpiexec), timeout_s=args.timeout)
    except KernelError as exc:
        raise ExtractError(f"the kernel built but its run failed: {exc}. Check the marked view for a dropped "
                           f"statement the run needed; tune the recorded kernel (iobo record) or the program "
                           f"instead") from None
    print(f"ran: {outcome['wall_seconds']:.3g} s wall")
    for where, count in outcome["loops"].items():
        print(f"  I/O from {where}: reached {count['executed']} times on all ranks, run {count['kept']}")
    reduced = outcome["estimate"] is not outcome["signature"]
    if reduced:
        print(f"  the program's counts, {outcome['how']}; as run in ()")
    for level, entry in outcome["estimate"]["levels"].items():
        write, read = entry["write"], entry["read"]
        if write["calls"] or read["calls"]:
            line = (f"  {level}: {round(write['bytes']):,} B in {round(write['calls'])} writes, "
                    f"{round(read['bytes']):,} B in {round(read['calls'])} reads, {round(entry['files'])} files")
            if reduced:
                ran = outcome["signature"]["levels"][level]
                line += (f" ({ran['write']['bytes']:,} B in {ran['write']['calls']} writes, {ran['read']['bytes']:,} "
                         f"B in {ran['read']['calls']} reads, {ran['files']} files)")
            print(line)
    return 0
