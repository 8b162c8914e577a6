"""``iobo run [--ranks N] -- PROGRAM ARGS``: run a program with a study's recommended configuration, in one step.

The program gets the preload shim (``LD_PRELOAD``), the configuration's
``IOBO_*`` variables and an absolute ``ROMIO_HINTS`` file
(:func:`iobo.adapters.program_environment`) and, for a study of a command,
its knobs set away from their defaults: environment knobs set, the
fragments of the knobs the tuned command appends appended to the command
(those it placed at ``{KNOB}`` are named on stderr, for you to place). With ``--ranks N`` it
starts under the MPI launcher (``mpiexec -n N``); otherwise as given (put
your own launcher in front: the environment reaches the ranks).

A study of a command also runs without PROGRAM: its own command template,
filled in with the recommended knobs (``{workdir}`` is ``--workdir``), in
the directory it was tuned from, on the study's ranks unless ``--ranks``.
The exit code is the program's.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from iobo import adapters, shim
from iobo.cli import common
from iobo.errors import ConfigError
from iobo.measure import format_mb_per_s
from iobo.stack import romio_only


def add_parser(sub) -> None:
    p = sub.add_parser("run", help="run a program with the study's recommended configuration (shim, hints, knobs)")
    common.add_storage_args(p)
    p.add_argument("--ranks", type=int, help="start the program on N ranks with the MPI launcher")
    p.add_argument("--mpiexec", default=None, help="MPI launcher for --ranks (default: mpiexec.mpich or $IOBO_MPIEXEC)")
    p.add_argument("--hints-path", help="where to write the ROMIO hints file (default: a temporary file)")
    p.add_argument("--report", metavar="PREFIX", help="have the shim write PREFIX.<rank>.json and print what took "
                                                      "effect and the bandwidth it measured")
    p.add_argument("--workdir", default=".", help="{workdir} of a command study's template run without PROGRAM "
                                                  "(default: the current directory)")
    p.add_argument("argv", nargs="*", metavar="-- PROGRAM ARGS", help="the program and its arguments, after -- "
                                                                      "(optional for a study of a command)")


def run(args) -> int:
    import subprocess

    from iobo import trials
    from iobo.config import IOConfig
    from iobo.minimize import recommended
    from iobo.space import format_value

    study = common.load_study(args.storage, args.study)
    space = common.study_space(study)
    values, source = recommended(study, space)
    config = IOConfig(values, space)
    argv, cwd, ranks = list(args.argv), None, args.ranks
    program = shutil.which(argv[0]) if argv else None  # refused when linked to another MPI or HDF5 than the shim
    knob_env: dict[str, str | None] = {}
    changed = config.changed()
    app = {p.name for p in space.layer("app")}
    if "command" in study.user_attrs:
        spec = common.study_spec(study)
        if argv:
            words, knob_env, placed = spec.knob_args(values)
            argv += words
            for name, fragment in placed.items():
                print(f"iobo run: not applied: knob {name}={values[name]} ({fragment!r} goes where the tuned command "
                      f"has {{{name}}}: {spec.template}); add it to your command, or run `iobo run` without PROGRAM",
                      file=sys.stderr)
        else:  # the tuned command itself
            ranks = ranks or study.user_attrs["ranks"]
            argv, knob_env = spec.render(values, Path(args.workdir).resolve(), "run", ranks)
            cwd = spec.cwd
            program = spec.program_path(argv)
    elif not argv:
        raise ConfigError(f"iobo run needs the program to run after -- (study {study.study_name!r} tuned "
                          f"{trials.subject(study.user_attrs)}, not a command), e.g. iobo run -- ./app -o out.h5")
    elif changed.keys() & app:
        skipped = ", ".join(f"{k}={changed[k]}" for k in sorted(changed.keys() & app))
        print(f"iobo run: not applied: {skipped} (the application parameters of {study.user_attrs.get('kernel')!r}; "
              f"set them on your program yourself)", file=sys.stderr)
    shown = ", ".join(f"{k}={format_value(v, space[k].unit)}" for k, v in changed.items()) or "the system default"
    print(f"iobo run: study {study.study_name!r}, {source}: {shown}", file=sys.stderr)

    if args.report:
        Path(args.report).resolve().parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="iobo-run-") as scratch:
        hints = Path(args.hints_path or Path(scratch) / "romio-hints").resolve()
        env = adapters.program_environment(config, hints, args.report, program=program)
        for variable, value in knob_env.items():
            if value is None:
                env.pop(variable, None)
            else:
                env[variable] = value
        mpi_io = shim.io_component(env["LD_PRELOAD"].split(":")[0], env)
        for name, reason in romio_only(space, mpi_io, env.get(shim.OMPI_IO_VARIABLE, "")).items():
            if name in changed:  # OMPIO echoes these hints: the shim's report would say "in effect"
                print(f"iobo run: not applied: {name}={changed[name]} ({reason})", file=sys.stderr)
        if ranks is not None:
            launcher = common.launcher(args.mpiexec)
            launcher.check(ranks)
            argv = launcher.command(ranks, argv)
        print(f"iobo run: {' '.join(argv)}", file=sys.stderr, flush=True)
        try:
            code = subprocess.run(argv, env=env, cwd=cwd).returncode
        except FileNotFoundError as exc:
            raise ConfigError(f"cannot start {argv[0]!r}: {exc.strerror}; is it installed and on PATH?") from None
    if args.report:
        try:
            _summary(adapters.read_report(args.report))
        except ConfigError as exc:
            print(f"iobo run: no report from the shim (the program exited with code {code}): {exc}", file=sys.stderr)
    return code


def _summary(report) -> None:
    """What the shim measured and what did not take effect, on stderr."""
    moved, seconds = adapters.run_measure(report)
    if moved and seconds > 0:
        print(f"iobo run: {format_mb_per_s(moved / seconds / 1e6)} MB/s ({moved:,} bytes of {report['level']} I/O; "
              f"the slowest rank spent {seconds:.4g} s in I/O calls)", file=sys.stderr)
    for item in report["not_applied"]:
        effect = f"in effect {item['in_effect']}" if item["in_effect"] is not None else "never applied"
        print(f"iobo run: {item['variable']}={item['requested']}: {effect} ({item['reason']})", file=sys.stderr)
