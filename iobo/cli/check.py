"""``iobo check --trace TRACE`` (a recorded program's replay kernel) or ``iobo check --command 'PROGRAM ARGS'
--kernel-command 'KERNEL ARGS'`` (a kernel given as a command, e.g. one ``iobo extract`` built): is the kernel
faithful to its program? Their I/O signatures side by side, then a few configurations on both, interleaved:
speedups, their rank correlation, the time a kernel trial saves (:mod:`iobo.replay.check`). The result goes to
``TRACE.check.json`` (or ``--out``); ``iobo tune --trace`` warns without a pass."""

from __future__ import annotations

import sys
from pathlib import Path

from iobo.cli import common


def add_parser(sub) -> None:
    p = sub.add_parser("check", help="compare a kernel (a recorded trace's, or a command) with its program "
                                     "(signatures, speedups)")
    p.add_argument("--trace", help="the trace iobo record saved")
    p.add_argument("--command", dest="program_command", metavar="'PROGRAM ARGS'",
                   help="with --kernel-command: the program, with {workdir} where it writes (as iobo tune's)")
    p.add_argument("--kernel-command", metavar="'KERNEL ARGS'",
                   help="with --command: the kernel to check, e.g. the one iobo extract built, with {workdir}")
    p.add_argument("--ranks", type=common.positive_int, default=2,
                   help="with --command: MPI ranks of each run (default: %(default)s; a trace's are its own)")
    p.add_argument("--out", help="with --command: where the result goes (default: <--workdir>/<kernel>.check.json)")
    p.add_argument("--configs", type=common.positive_int, default=4,
                   help="configurations run on both, the default included (default: %(default)s)")
    p.add_argument("--repeats", type=common.positive_int, default=3,
                   help="runs of each configuration on each side (default: %(default)s)")
    p.add_argument("--workdir", help="where the kernel writes (default: the directory the program wrote into; "
                                     "with --command: iobo-work)")
    p.add_argument("--mpiexec", default=None, help="MPI launcher (default: mpiexec.mpich or $IOBO_MPIEXEC)")
    p.add_argument("--timeout", type=float, default=600.0, help="limit of each run, seconds (default: %(default)g)")


def run(args) -> int:
    from iobo.errors import ConfigError
    from iobo.replay.record import check_path

    launcher = common.launcher(args.mpiexec)
    given = [flag for flag, value in (("--trace", args.trace), ("--command", args.program_command),
                                      ("--kernel-command", args.kernel_command)) if value is not None]
    if given not in (["--trace"], ["--command", "--kernel-command"]):
        raise ConfigError(f"check takes --trace TRACE, or --command 'PROGRAM ARGS' with --kernel-command 'KERNEL "
                          f"ARGS'; got {', '.join(given) or 'none of them'}")
    if args.trace:
        from iobo.replay.check import check

        result = check(args.trace, args.configs, args.repeats, args.workdir, launcher, args.timeout, echo=echo_run)
        saved = check_path(args.trace)
    else:
        from iobo.kernels.command import CommandSpec
        from iobo.replay.check import check_command

        program, kernel = CommandSpec(args.program_command), CommandSpec(args.kernel_command)
        workdir = Path(args.workdir or "iobo-work")
        workdir.mkdir(parents=True, exist_ok=True)
        saved = Path(args.out) if args.out else workdir / f"{kernel.name}.check.json"
        result = check_command(program, kernel, args.ranks, saved, args.configs, args.repeats, workdir, launcher,
                               args.timeout, echo=echo_run)
    show(result, saved)
    return 0 if result["passed"] else 1


def echo_run(line: str) -> None:
    """A check's line for one run, to stderr as it happens."""
    print(f"iobo check: {line}", file=sys.stderr, flush=True)


def show(result, saved) -> None:
    """Print a check's result (:mod:`iobo.replay.check`), stored at ``saved``: the signatures side by side, each
    configuration's speedups, the rank correlation, the wall times and the verdict."""
    from iobo.replay.signature import render

    if result.get("source") == "darshan-dxt":
        _show_log(result, saved)
        return
    print("I/O signature, default configuration (error: |kernel - program| / program):")
    print(render(result["signature"]))
    if result.get("kernel_counts"):  # a kernel with reduced loops: what stands for the program's counts
        print(f"the kernel's counts are its reduced run's estimated back to the program's: {result['kernel_counts']}")
    print()
    print(f"{'configuration':<30} {'program':>9} {'kernel':>9}   (speedup over the default, median of "
          f"{result['repeats']})")
    for item in result["configurations"]:
        print(f"{item['name']:<30} {item['program_speedup']:>8.3g}x {item['kernel_speedup']:>8.3g}x")
    rho = result["spearman"]
    print(f"rank correlation (Spearman), kernel vs program: {'-' if rho is None else f'{rho:.2f}'}"
          + ("" if rho is not None else " (needs 3 configurations with different speedups)"))
    walls = result["median_wall_s"]
    print(f"median trial wall time: program {walls['program']:.3g} s, kernel {walls['kernel']:.3g} s "
          f"({walls['program'] / walls['kernel']:.2g}x)")
    verdict = "PASS" if result["passed"] else "FAIL"
    print(f"{verdict}: bytes per level within {100 * result['thresholds']['bytes']:g}%, operation counts within "
          f"{100 * result['thresholds']['calls']:g}%, same datasets and layouts; saved {saved}")
    for failure in result["failures"]:
        print(f"  {failure}")


def _show_log(result, saved) -> None:
    """Print the check of a trace made from a Darshan DXT log: no program to run, the kernel against the log's
    counters."""
    from iobo.replay.signature import render

    print(f"a trace from a Darshan DXT log ({result['log']}) has no program here to run: the kernel is compared "
          f"with the log's own counters, not with the program, and no speedups are measured")
    print("I/O signature, default configuration ('program' is the log's counters; error: |kernel - log| / log):")
    print(render(result["signature"]))
    walls = result["median_wall_s"]
    print(f"kernel wall time: {walls['kernel']:.3g} s; the logged run: {walls['program']:.3g} s")
    level = result["judged_level"]
    verdict = "PASS" if result["passed"] else "FAIL"
    print(f"{verdict}: {level} bytes within {100 * result['thresholds']['bytes']:g}% and operation counts within "
          f"{100 * result['thresholds']['calls']:g}% of the log's"
          + (" (the POSIX level below is what this machine's MPI-IO did, not judged)" if level == "mpiio" else "")
          + f"; saved {saved}")
    for failure in result["failures"]:
        print(f"  {failure}")
