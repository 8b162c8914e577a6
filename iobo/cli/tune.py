"""``iobo tune KERNEL`` or ``iobo tune --command 'PROGRAM ARGS'``: tune the I/O configuration of a kernel or of
any program (a study of default runs, then a search)."""

from __future__ import annotations

import sys

from iobo import trials
from iobo.cli import common
from iobo.measure import INTERVAL_MIN_RUNS
from iobo.minimize import WALK_BACK_BUDGET_S, check_walk_back_budget
from iobo.stopping import make_rule


def add_parser(sub) -> None:
    from iobo.pruning import PRUNERS
    from iobo.samplers.registry import SAMPLERS
    from iobo.stopping import RULES

    from iobo.kernels.command import UNITS

    p = sub.add_parser("tune", help="tune the I/O configuration of a kernel or of your program (--command)")
    p.add_argument("kernel", nargs="?", help="kernel name (see `iobo kernels`); or give --command or --spec")
    program = p.add_argument_group(
        "your program", "tune any MPI program, run under the preload shim (adapters/): `--command './app -o "
        "{workdir}/out.h5'`; placeholders {ranks}, {workdir} (a fresh directory per trial), {trial}, {KNOB}")
    program.add_argument("--command", dest="template", metavar="TEMPLATE",
                         help="the program and its arguments (no mpiexec)")
    program.add_argument("--spec", metavar="FILE", help="a TOML or JSON command spec (command, knobs, objective, "
                                                        "params), for long command lines")
    program.add_argument("--knob", action="append", default=[], metavar="NAME=VALUE:FRAGMENT,...",
                         help="a knob of the program: each value adds its fragment to the command (at {NAME}, "
                              "else at the end); the first value is the default, e.g. files=shared:,per_process:-F")
    program.add_argument("--env-knob", action="append", default=[], metavar="VARIABLE=VALUE,...",
                         help="a knob set through an environment variable, e.g. OMP_NUM_THREADS=1,2")
    program.add_argument("--objective", default=None, metavar="shim|wall|regex:PATTERN|json:PATH",
                         help="what to maximise: the shim's I/O accounting (default), a bandwidth the program "
                              "prints (regex on stdout, or a dotted path into a JSON line), or bytes left in "
                              "{workdir} over wall time")
    program.add_argument("--objective-unit", choices=tuple(UNITS), default="MB/s",
                         help="unit of a regex or JSON bandwidth (default: %(default)s)")
    program.add_argument("--params", metavar="NAME,NAME", help="tune only these I/O-stack parameters "
                                                               "(default: every one the shim applies)")
    program.add_argument("--keep", action="store_true", help="keep each trial's directory (its {workdir}, hints "
                                                             "file and shim report)")
    program.add_argument("--via-kernel", action="store_true",
                         help="record the program once, check its replay kernel against it, tune the kernel, "
                              "confirm the kernel's recommendation on the program (--confirm N pairs, at least "
                              f"{INTERVAL_MIN_RUNS}); when recording, the kernel or its check fails, say why and "
                              "tune the program itself")
    program.add_argument("--kernel-command", metavar="'KERNEL ARGS'",
                         help="with --via-kernel: tune this kernel instead of recording one, e.g. the one `iobo "
                              "extract` built from the program's source (with {workdir}, as --command); it is "
                              "checked against the program first")
    kernel = p.add_argument_group(
        "a recorded program", "tune the kernel of a trace `iobo record` saved: its I/O replayed without the "
        "computation (python -m iobo.replay.run), under the shim; the configuration found is the program's")
    kernel.add_argument("--trace", metavar="TRACE", help="the trace (--ranks must be its ranks)")
    kernel.add_argument("--steps", type=common.positive_int, metavar="K",
                        help="replay K of the N repetitions of each repeated block (default: all)")
    kernel.add_argument("--compute", default="none", metavar="none|recorded|scale=X",
                        help="the computation between I/O calls: none (default), slept as recorded, or X times it")
    p.add_argument("--ranks", type=int, default=2, help="MPI ranks per trial (default: %(default)s)")
    p.add_argument("--nodes", type=common.positive_int, metavar="N",
                   help="compute nodes each trial spans (your Parsl config's nodes per block); the space then "
                        "knows which cb_nodes cb_config_list allows. Default: the hosts the first run's ranks "
                        "ran on, as its report names them")
    p.add_argument("--trials", type=int, default=30, help="finished trials the study should hold, default runs included")
    common.add_storage_args(p)
    common.add_run_args(p)
    p.add_argument("--option", type=common.kernel_option, action="append", default=[], metavar="NAME=VALUE",
                   help="kernel option, e.g. particles=1048576 (repeatable)")
    p.add_argument("--in-flight", type=int, default=1, help="trials running at once (default: %(default)s)")
    p.add_argument("--default-repeats", type=int, default=3, help="runs of the system default (>= 3)")
    p.add_argument("--sampler", choices=SAMPLERS, default="gp",
                   help="impact-first: tune the highest-impact parameters first, ranked by earlier studies "
                        "of the kernel in --storage (`iobo importance`) or by a short screening")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--prune", choices=tuple(PRUNERS),
                   help="stop trials whose per-step bandwidth is clearly below the others' (Optuna pruner)")
    p.add_argument("--stop-rule", choices=tuple(RULES),
                   help="end the study before --trials: when the GP's expected gain per minute falls to the "
                        "RoTI so far (marginal-roti), when the next trial is expected to add < 2%% "
                        "(expected-gain), after no 5%% gain in 5 trials (no-gain), or when RoTI has not risen "
                        "over 2 trials, after 8 (roti-peak), when the GP is 90%% sure its recommendation is "
                        "within 85%% of the best, after 10, having first re-measured its best few for up to 10 "
                        "trials (confident), or when the next trial is expected to save "
                        "--production-runs runs less time than it costs (production-runs)")
    p.add_argument("--production-runs", metavar="N",
                   help="the runs the tuned configuration will serve: tuning stops when the next trial's expected "
                        "saving over N runs' I/O time is below its cost (implies --stop-rule production-runs); "
                        "that stake, N runs' I/O time at the default, also bounds the walk-back and the "
                        "confirmation after it (not with --via-kernel)")
    p.add_argument("--confirm", type=common.non_negative_int, default=INTERVAL_MIN_RUNS, metavar="N",
                   help="afterwards, find the minimal configuration (which changes matter) and re-measure it and "
                        "the default at least N times each, interleaved, for a speedup with a confidence interval "
                        f"(which needs {INTERVAL_MIN_RUNS}); up to 4N when the default runs' noise says N cannot "
                        "resolve the gain the walk-back measured, or while the interval is undecided "
                        "(default: %(default)s; 0 skips both)")
    p.add_argument("--no-warmup", action="store_true",
                   help="no unrecorded warm-up runs of the default before measuring (they absorb cold starts)")
    p.add_argument("--walk-back-budget", type=float, default=WALK_BACK_BUDGET_S, metavar="SECONDS",
                   help="wall-clock seconds the walk-back (which changes matter) may measure before its undecided "
                        "tests get no more pairs; each test still runs its first 3 pairs, and a change left "
                        "undecided is reverted and listed with the pairs that would settle it (default: "
                        "%(default)g; 0: first pairs only)")
    p.add_argument("--no-minimize", action="store_true",
                   help="confirm the best trial's whole configuration, without testing which changes matter")
    p.add_argument("--warm-start", dest="warm_start", action="store_true", default=True,
                   help="(the default) when --storage holds earlier studies of this kernel (other ranks, sizes or "
                        "file systems), first run their best configurations, ranked by a GP over their trials with "
                        "the context as inputs, and keep that GP as the sampler's prior mean, weighted by how well "
                        "it predicts this study's runs")
    p.add_argument("--no-warm-start", dest="warm_start", action="store_false",
                   help="start cold even when --storage holds earlier studies of this kernel")
    p.add_argument("--from-darshan", metavar="LOG",
                   help="a Darshan log of the application: run the configurations its rules suggest (`iobo "
                        "characterize LOG --suggest`) first, after the default runs, and record its "
                        "characterisation in the study's context")


def run(args) -> int:
    check_walk_back_budget(args.walk_back_budget, "--walk-back-budget")  # before anything runs (--via-kernel's too)
    make_rule(args.stop_rule, args.production_runs)  # likewise: a ConfigError naming the value
    kernel, options = _what(args)
    if args.via_kernel:
        from iobo.cli.via_kernel import tune_via_kernel

        code = tune_via_kernel(args, kernel, make_tuner)
        if code is not None:
            return code
    return tune(args, kernel, options)  # without --via-kernel, or when its kernel cannot stand for the program


def tune(args, kernel, options) -> int:
    """Tune ``kernel`` (a name or a spec) as the arguments say: the search, then the walk-back and the
    confirmation (``--confirm``), and print the study's report; 1 when every trial failed."""
    from iobo.report import build_report

    tuner = make_tuner(args, kernel, options)
    with tuner:  # one runner (one Parsl executor) for the search, the walk-back and the confirmation
        study = tuner.run()
        if not searched(study):
            return 1
        if args.confirm:
            tuner.confirm(args.confirm, minimize=not args.no_minimize)
    print()
    print(build_report(study).text())
    return 0


def make_tuner(args, kernel, options, study: str | None = None, suggest: bool = True):
    """The :class:`iobo.tuner.Tuner` of ``kernel`` the arguments describe (``study``: its name, default
    ``--study``), with the sampler asked for and, with ``suggest``, the runs ``--from-darshan`` suggests queued."""
    from iobo import kernels
    from iobo.progress import console_watchers
    from iobo.samplers.registry import make_sampler
    from iobo.tuner import Tuner

    suggestions, characterization = (_rules_from(args.from_darshan) if args.from_darshan and suggest
                                     else (None, None))
    tuner = Tuner(
        kernel=kernel, ranks=args.ranks, trials=args.trials, storage=args.storage, study=study or args.study,
        workdir=args.workdir, kernel_options=options, max_in_flight=args.in_flight,
        default_repeats=args.default_repeats, timeout_s=args.timeout, seed=args.seed,
        launcher=common.launcher(args.mpiexec), runner=common.runner(args, args.in_flight),
        pruner=args.prune, stop_rule=make_rule(args.stop_rule, args.production_runs),
        characterization=characterization, warmup=not args.no_warmup, warm_start=args.warm_start, nodes=args.nodes,
        walk_back_budget_s=args.walk_back_budget,
        **console_watchers(),
    )
    if args.sampler != "gp":  # the tuner makes the GP sampler itself (with a warm start's prior mean)
        # impact-first reads earlier studies of the kernel: it needs the study's name, known once the tuner is made
        tuner.sampler = make_sampler(args.sampler, args.seed, storage=tuner.storage,
                                     kernel=kernels.get(tuner.kernel).name, study=tuner.study)
    if suggestions is not None:
        _queue_first(tuner, suggestions)
    return tuner


def searched(study) -> bool:
    """True when the study holds a completed tuning trial; else says that every trial failed, and why."""
    if trials.tuning_trials(study):
        return True
    failed = [t for t in study.get_trials(deepcopy=False) if t.state == trials.state("FAIL")]
    reason = failed[-1].user_attrs.get("fail_reason", "no reason recorded") if failed else "none ran"
    print(f"iobo: every trial failed ({len(failed)} FAIL), nothing measured; last reason: "
          f"{reason.splitlines()[0] if reason else ''}", file=sys.stderr)
    return False


def _what(args):
    """(kernel name or command spec, options) from the arguments; :class:`ConfigError` for a wrong mix."""
    from iobo.errors import ConfigError
    from iobo.kernels.command import CommandSpec, Knob, Objective, load_spec

    given = [name for name, value in (("KERNEL", args.kernel), ("--command", args.template), ("--spec", args.spec),
                                      ("--trace", args.trace)) if value is not None]
    if len(given) != 1:
        raise ConfigError(f"tune takes one of KERNEL, --command, --spec or --trace; got {', '.join(given) or 'none'}")
    if args.via_kernel and args.template is None:
        raise ConfigError(f"--via-kernel records and replays the program of --command; got {given[0]}: give "
                          f"--command 'PROGRAM ARGS' (a kernel or a trace is tuned without it)")
    if args.kernel_command is not None:
        if not args.via_kernel:
            raise ConfigError("--kernel-command is the kernel --via-kernel tunes for the program of --command; got "
                              "it without --via-kernel: add --via-kernel (or tune the kernel itself with --command)")
        CommandSpec(args.kernel_command)  # a command iobo cannot run is refused before anything runs
    if args.trace is None and (args.steps is not None or args.compute != "none"):
        raise ConfigError("--steps and --compute apply to --trace (a recorded program's kernel)")
    program_flags = [flag for flag, used in (("--knob", args.knob), ("--env-knob", args.env_knob),
                                             ("--objective", args.objective), ("--params", args.params),
                                             ("--keep", args.keep)) if used]
    options = dict(args.option)
    if args.kernel is not None:
        if program_flags:
            raise ConfigError(f"{', '.join(program_flags)} apply to --command or --spec, not to a kernel")
        return args.kernel, options
    if options:
        raise ConfigError(f"--option is for kernels; got {sorted(options)}: a command's options go in the command")
    knobs = tuple(Knob.parse(k) for k in args.knob) + tuple(Knob.parse(k, env=True) for k in args.env_knob)
    objective = Objective.parse(args.objective, args.objective_unit) if args.objective else None
    params = [name.strip() for name in args.params.split(",")] if args.params else None
    if args.via_kernel and (knobs or objective):
        raise ConfigError("--via-kernel records the program of --command and tunes its replay, which the shim "
                          "measures and which has no knobs: give --command without --knob, --env-knob or "
                          "--objective (or drop --via-kernel to tune the program itself)")
    if args.trace:
        from iobo.replay.record import kernel_spec, warn_if_unchecked

        if knobs or objective:
            raise ConfigError("--knob, --env-knob and --objective apply to --command or --spec; a trace's kernel "
                              "has no knobs and is measured by the shim")
        spec = kernel_spec(args.trace, args.steps, args.compute, args.ranks, params)
        warn_if_unchecked(args.trace)
    elif args.spec:
        spec = load_spec(args.spec, objective=objective, params=params)
        if knobs:
            spec = CommandSpec(spec.template, spec.knobs + knobs, spec.objective, spec.params, spec.cwd, spec.name)
    else:
        spec = CommandSpec(args.template, knobs, objective or Objective(), params)
    return spec, {"keep": True} if args.keep else {}


def _rules_from(log: str):
    """(the rules' suggestions, the characterisation summary) of a Darshan log."""
    from iobo.integrations.darshan import characterize
    from iobo.integrations.darshan_rules import suggest, summary

    characterization = characterize(log)
    suggestions = suggest(characterization)
    return suggestions, summary(characterization, suggestions)


def _queue_first(tuner, suggestions) -> None:
    """Queue the default runs, then the configurations transferred from earlier studies (warm start), then the
    rules' ones, so that they run in that order."""
    from pathlib import Path

    from iobo.integrations.darshan_rules import enqueue_suggestions
    from iobo.stack import filesystem_type

    study = tuner.open_study()
    tuner.enqueue_defaults(study)
    tuner.enqueue_warm_start(study)
    queued, notes = enqueue_suggestions(study, suggestions, tuner.space, tuner.workload,
                                        filesystem_type(Path(tuner.workdir)))
    for proposed in queued:
        print(f"queued {proposed.origin}: {proposed.reason}")
    for note in notes:
        print(note)
