"""``iobo tune --command 'PROGRAM ARGS' --via-kernel``: tune the program's I/O through its replay kernel (issue 28
item 4).

1. record the program once under the shim (:func:`iobo.replay.record`), its ``{workdir}`` a directory
   ``<name>-recorded`` under ``--workdir``, the trace saved there as ``<name>.trace.json``;
2. check the kernel against the program (:func:`iobo.replay.check.check`, :data:`CHECK_CONFIGS`
   configurations, :data:`CHECK_REPEATS` run each) and print the check's table;
3. tune the kernel (:func:`iobo.replay.record.kernel_spec`) as its own study (``<--study>-kernel``, default
   ``<program>-kernel-<R>ranks``) with the search arguments given, and find its minimal configuration (its
   walk-back told the pairs of step 4, so that no test measures on for a gain step 4 could not show);
4. re-measure the kernel's recommendation on the program against the system default, interleaved, at least
   ``INTERVAL_MIN_RUNS`` pairs (``--confirm N``), as trials of the program's study (``--study``, default
   ``<program>-<R>ranks``, same storage), and print the speedup with its 95% interval;
5. print the time each step took against tuning the program directly: the kernel study's runs (search and
   walk-back) at the program's wall time per run, plus the same confirmation.

With ``--kernel-command 'KERNEL ARGS'`` the kernel is that command (one ``iobo extract`` built, issue 29, or
any program doing the program's I/O with less computation), run under the shim as ``--command`` is: step 1 is
skipped and step 2 checks it against the program (:func:`iobo.replay.check.check_command`, saved as
``<kernel>.check.json`` under ``--workdir``).

When the recording fails, the kernel cannot be made, it fails its check or every kernel trial fails, it says
why in one line and returns None: ``iobo tune`` then tunes the program itself as ``--command`` does (never worse
than the program).
"""

from __future__ import annotations

import time
from pathlib import Path

from iobo.cli import common
from iobo.errors import IoboError
from iobo.measure import INTERVAL_MIN_RUNS

CHECK_CONFIGS = 3
"""Configurations the fidelity check runs on kernel and program (the default included): enough for a rank
correlation."""
CHECK_REPEATS = 1
"""Runs of each configuration on each side in the check."""


def tune_via_kernel(args, program, make_tuner) -> int | None:
    """Steps 1-5 of the module for the :class:`iobo.kernels.command.CommandSpec` ``program``; the exit code, or
    None (having said why) when the program must be tuned itself. ``make_tuner(args, spec, options, study=None,
    suggest=True)``: the :class:`iobo.tuner.Tuner` the arguments describe (``iobo.cli.tune.make_tuner``)."""
    from iobo import trials

    seconds: dict[str, float] = {}
    made = _checked_kernel(args, program, seconds)
    if isinstance(made, str):
        print(f"iobo tune --via-kernel: tuning the program itself: {made}", flush=True)
        return None
    kernel, program_wall_s = made

    started = time.monotonic()
    kernel_tuner = make_tuner(args, kernel, {}, study=f"{args.study}-kernel" if args.study else None)
    with kernel_tuner:
        kernel_study = kernel_tuner.run()
        if not trials.tuning_trials(kernel_study):
            print("iobo tune --via-kernel: tuning the program itself: every trial of the kernel failed", flush=True)
            return None
        if args.confirm and not args.no_minimize:  # its tests need not settle gains the program's pairs cannot show
            kernel_tuner.minimize(confirm_pairs=max(args.confirm, INTERVAL_MIN_RUNS))
    seconds["kernel tuning"] = time.monotonic() - started

    from iobo.report import build_report

    print()
    print(build_report(kernel_study).text())
    if args.confirm:
        started = time.monotonic()
        _confirm_on_program(args, make_tuner(args, program, {}, suggest=False), kernel_tuner, kernel_study)
        seconds["confirmation on the program"] = time.monotonic() - started
    spent = sum(seconds.values())
    steps = ", ".join(f"{name} {value:.3g} s" for name, value in seconds.items())
    runs = sum(1 for t in kernel_study.get_trials(deepcopy=False) if t.state.is_finished())
    direct = program_wall_s * runs + seconds.get("confirmation on the program", 0.0)
    print(f"time: {steps}; {spent:.3g} s in all, against about {direct:.3g} s to tune the program directly (the "
          f"kernel study's {runs} runs, search and walk-back, at the program's {program_wall_s:.3g} s a run, and "
          f"the same confirmation): {direct / spent:.2g}x")
    return 0


def _checked_kernel(args, program, seconds: dict[str, float]):
    """(the kernel's spec, the program's median wall seconds a run) after steps 1 and 2, or why there is none."""
    from iobo.cli.check import show

    made = (_command_kernel_checked if args.kernel_command else _recorded_kernel_checked)(args, program, seconds)
    if isinstance(made, str):
        return made
    kernel, result, saved = made
    show(result, saved)
    if not result["passed"]:
        return f"its kernel failed the fidelity check: {'; '.join(result['failures'][:2])}"
    return kernel, result["median_wall_s"]["program"]


def _recorded_kernel_checked(args, program, seconds: dict[str, float]):
    """Steps 1 and 2: (the replay kernel's spec, its check's result, where that is stored), or why there is
    none."""
    from iobo.cli.check import echo_run
    from iobo.replay.check import check
    from iobo.replay.record import check_path, kernel_spec, record

    workdir = Path(args.workdir).resolve()
    recorded = workdir / f"{program.name}-recorded"
    trace_path = workdir / f"{program.name}.trace.json"
    launcher = common.launcher(args.mpiexec)
    started = time.monotonic()
    try:
        recorded.mkdir(parents=True, exist_ok=True)
        argv = program.render(program.space().default(), recorded, "record", args.ranks)[0]
        print(f"iobo tune --via-kernel: recording {' '.join(argv)} on {args.ranks} ranks under the shim", flush=True)
        trace = record(argv, args.ranks, None, launcher, args.timeout)
        trace.save(trace_path)
    except IoboError as exc:
        return f"recording the program failed: {_line(exc)}"
    seconds["record"] = time.monotonic() - started
    print(f"trace: {trace_path}")
    started = time.monotonic()
    try:
        kernel = kernel_spec(trace_path, ranks=args.ranks, params=list(program.params) if program.params else None)
        result = check(trace_path, CHECK_CONFIGS, CHECK_REPEATS, None, launcher, args.timeout, echo=echo_run)
    except IoboError as exc:
        return f"its kernel cannot be built or run: {_line(exc)}"
    seconds["check"] = time.monotonic() - started
    return kernel, result, check_path(trace_path)


def _command_kernel_checked(args, program, seconds: dict[str, float]):
    """Step 2 for ``--kernel-command`` (validated by ``iobo tune`` before anything ran): (its spec, tuning the
    parameters the program does, its check's result, where that is stored), or why there is none."""
    from iobo.kernels.command import CommandSpec
    from iobo.cli.check import echo_run
    from iobo.replay.check import check_command

    kernel = CommandSpec(args.kernel_command, params=program.params)
    workdir = Path(args.workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    saved = workdir / f"{kernel.name}.check.json"
    print(f"iobo tune --via-kernel: checking the kernel {kernel.template!r} against the program on {args.ranks} "
          f"ranks", flush=True)
    started = time.monotonic()
    try:
        result = check_command(program, kernel, args.ranks, saved, CHECK_CONFIGS, CHECK_REPEATS,
                               workdir / f"{kernel.name}-check", common.launcher(args.mpiexec), args.timeout,
                               echo=echo_run)
    except IoboError as exc:
        return f"its kernel cannot be run: {_line(exc)}"
    seconds["check"] = time.monotonic() - started
    return kernel, result, saved


def _confirm_on_program(args, program_tuner, kernel_tuner, kernel_study) -> None:
    """Step 4: the kernel study's recommendation and the default, interleaved, on the program, as trials of
    ``program_tuner``'s study; prints the speedup and its interval."""
    from iobo import trials
    from iobo.config import IOConfig
    from iobo.minimize import confirmation_of, recommended

    values, source = recommended(kernel_study, kernel_tuner.space, kernel_tuner.workload,
                                 minimal=not args.no_minimize)
    if IOConfig(values, kernel_tuner.space).is_default():
        print(f"on the program: nothing to confirm, keep the default: the kernel study recommends the system "
              f"default ({source})")
        return
    pairs = max(args.confirm, INTERVAL_MIN_RUNS)
    study = program_tuner.open_study()
    default = program_tuner.space.default()
    runs = []
    for _ in range(pairs):
        runs += [(default, {"role": trials.ROLE_CONFIRM_DEFAULT}), (values, {"role": trials.ROLE_CONFIRM_BEST})]
    print(f"on the program (study {study.study_name!r}): re-measuring the default and the kernel's {source}, "
          f"{pairs} times each, interleaved", flush=True)
    with program_tuner:
        program_tuner.measure(study, runs)
    confirmation = confirmation_of(study, program_tuner.space, values)
    if confirmation is None:
        print("speedup on the program: not measured (every confirmation run of the program failed)")
        return
    print(f"speedup on the program: {confirmation.describe()} (median of the kernel's configuration over the "
          f"default's, {confirmation.pairs} interleaved pairs, 95% bootstrap interval): "
          f"{confirmation.verdict_text()}; changes: "
          + ", ".join(f"{name}={value}" for name, value in confirmation.changes.items()))


def _line(exc: BaseException) -> str:
    """An error's first line."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
