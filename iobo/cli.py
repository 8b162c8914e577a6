"""``iobo`` command line: tune, confirm, best, export, report, space, kernels, characterize, dashboard.

Every command takes ``--storage URL`` (any Optuna storage; default
``sqlite:///iobo.db``) and ``--study NAME`` (optional when the storage holds
one study).  Errors iobo raises on purpose print one message and exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from iobo.errors import ConfigError, IoboError
from iobo.config import EXPORT_FORMATS

DEFAULT_STORAGE = "sqlite:///iobo.db"


def _option(text: str) -> tuple[str, object]:
    """``name=value`` with value parsed as JSON when it is JSON (``particles=1024``)."""
    name, sep, raw = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return name.replace("-", "_"), value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="iobo", description="Bayesian-optimization tuner for the HPC I/O stack")
    sub = parser.add_subparsers(dest="command", required=True)

    def storage_args(p, study_required=False):
        p.add_argument("--storage", default=DEFAULT_STORAGE, help="Optuna storage URL (default: %(default)s)")
        p.add_argument("--study", required=study_required, help="study name (default: the only study in storage)")

    tune = sub.add_parser("tune", help="tune a kernel's I/O configuration")
    tune.add_argument("kernel", help="kernel name (see `iobo kernels`)")
    tune.add_argument("--ranks", type=int, default=2, help="MPI ranks per trial (default: %(default)s)")
    tune.add_argument("--trials", type=int, default=30, help="finished trials the study should hold, default runs included")
    storage_args(tune)
    tune.add_argument("--workdir", default="iobo-work", help="directory on the file system under test")
    tune.add_argument("--option", type=_option, action="append", default=[], metavar="NAME=VALUE",
                      help="kernel option, e.g. particles=1048576 (repeatable)")
    tune.add_argument("--in-flight", type=int, default=1, help="trials running at once (default: %(default)s)")
    tune.add_argument("--default-repeats", type=int, default=3, help="runs of the system default (>= 3)")
    tune.add_argument("--timeout", type=float, default=600.0, help="per-trial limit in seconds")
    tune.add_argument("--sampler", choices=("gp", "impact-first", "tpe", "random"), default="gp",
                      help="impact-first: tune the highest-impact parameters first, ranked by earlier studies "
                           "of the kernel in --storage (`iobo importance`) or by a short screening")
    tune.add_argument("--seed", type=int, default=0)
    tune.add_argument("--mpiexec", default=None, help="MPI launcher (default: mpiexec.mpich or $IOBO_MPIEXEC)")
    tune.add_argument("--parsl-config", help="Python file defining a Parsl `config` (e.g. workflows/site_slurm.py)")
    tune.add_argument("--prune", choices=("median", "margin", "wilcoxon"),
                      help="stop trials whose per-step bandwidth is clearly below the others' (Optuna pruner)")
    tune.add_argument("--stop-rule", choices=("marginal-roti", "expected-gain", "no-gain"),
                      help="end the study before --trials: when the GP's expected gain per minute falls to the "
                           "RoTI so far (marginal-roti), when the next trial is expected to add < 2%% "
                           "(expected-gain), or after no 5%% gain in 5 trials (no-gain)")
    tune.add_argument("--confirm", type=int, default=0, metavar="N",
                      help="afterwards, re-measure default and best N times each, interleaved")

    confirm = sub.add_parser("confirm", help="re-measure default and best, interleaved")
    storage_args(confirm)
    confirm.add_argument("--repeats", type=int, default=5)
    confirm.add_argument("--workdir", default="iobo-work")
    confirm.add_argument("--mpiexec", default=None)

    best = sub.add_parser("best", help="print the best configuration and its bandwidth")
    storage_args(best)

    export = sub.add_parser("export", help="export the best configuration for production")
    storage_args(export)
    export.add_argument("--format", choices=EXPORT_FORMATS, default="json")
    export.add_argument("--output", "-o", help="write to this file instead of stdout")
    export.add_argument("--hints-path", default="romio-hints", help="ROMIO_HINTS path written by --format env")

    report = sub.add_parser("report", help="default vs best, speedup, RoTI; notes and figures for the dashboard")
    storage_args(report)
    report.add_argument("--out", metavar="DIR",
                        help="also write report.html, report.json and PNG figures into DIR")

    importance = sub.add_parser("importance", help="rank the parameters by impact; store the ranking on the study")
    storage_args(importance)
    importance.add_argument("--seed", type=int, default=0)

    space = sub.add_parser("space", help="print a kernel's search space")
    space.add_argument("kernel")

    sub.add_parser("kernels", help="list the registered kernels")

    characterize = sub.add_parser("characterize", help="characterise the I/O of a Darshan log")
    characterize.add_argument("log", help="a Darshan log file (*.darshan)")
    characterize.add_argument("--json", action="store_true", help="print the characterisation as JSON")

    dash = sub.add_parser("dashboard", help="serve optuna-dashboard on a study storage")
    dash.add_argument("storage_url", nargs="?", default=DEFAULT_STORAGE, help="study storage URL")
    dash.add_argument("--host", default="127.0.0.1")
    dash.add_argument("--port", type=int, default=8080)
    return parser


def _sampler(name: str, seed: int):
    import optuna

    if name == "tpe":
        return optuna.samplers.TPESampler(multivariate=True, constant_liar=True, seed=seed, n_startup_trials=5)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    from iobo.tuner import default_sampler

    return default_sampler(seed)


def _launcher(name: str | None):
    from iobo.launch import MpiexecLauncher

    return MpiexecLauncher(name) if name else MpiexecLauncher()


def _load_study(storage: str, name: str | None):
    import optuna

    from iobo.storage import open_storage

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url, storage = storage, open_storage(storage)
    summaries = optuna.get_all_study_summaries(storage)
    names = [s.study_name for s in summaries]
    if name is None:
        if len(names) != 1:
            raise ConfigError(
                f"storage {url} holds {len(names)} studies ({', '.join(names) or 'none'}); name one with --study"
            )
        name = names[0]
    elif name not in names:
        raise ConfigError(f"study {name!r} is not in {url}; studies there: {', '.join(names) or 'none'}")
    return optuna.load_study(study_name=name, storage=storage)


def _tuner_for(study, storage: str, workdir: str, mpiexec: str | None):
    from iobo.progress import console_watchers
    from iobo.tuner import Tuner

    attrs = study.user_attrs
    return Tuner(kernel=attrs["kernel"], ranks=attrs["ranks"], kernel_options=attrs["kernel_options"],
                 storage=storage, study=study.study_name, workdir=workdir, launcher=_launcher(mpiexec),
                 **console_watchers())


def _best_config(study):
    from iobo import kernels
    from iobo.config import IOConfig
    from iobo.tuner import best_trial

    best = best_trial(study)
    if best is None:
        raise ConfigError(f"study {study.study_name!r} has no completed trial yet; run `iobo tune` first")
    space = kernels.get(study.user_attrs["kernel"]).space()
    return best, IOConfig(best.user_attrs.get("config", best.params), space)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _dispatch(args)
    except IoboError as exc:
        print(f"iobo: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("iobo: interrupted; finished trials are kept, run the same command to resume", file=sys.stderr)
        return 130


def _dispatch(args) -> int:
    from iobo import kernels

    if args.command == "kernels":
        for name in kernels.names():
            spec = kernels.get(name)
            print(f"{name:10s} {spec.doc}")
        return 0
    if args.command == "space":
        print(kernels.get(args.kernel).space().describe())
        return 0
    if args.command == "tune":
        from iobo.integrations.parsl import load_config_file
        from iobo.progress import console_watchers
        from iobo.report import build_report
        from iobo.stopping import RULES
        from iobo.tuner import Tuner, impact_first_sampler

        tuner = Tuner(
            kernel=args.kernel, ranks=args.ranks, trials=args.trials, storage=args.storage, study=args.study,
            workdir=args.workdir, kernel_options=dict(args.option), max_in_flight=args.in_flight,
            default_repeats=args.default_repeats, timeout_s=args.timeout, seed=args.seed,
            sampler=_sampler(args.sampler, args.seed), launcher=_launcher(args.mpiexec),
            parsl_config=load_config_file(args.parsl_config) if args.parsl_config else None,
            pruner=args.prune, stop_rule=RULES[args.stop_rule]() if args.stop_rule else None,
            **console_watchers(),
        )
        if args.sampler == "impact-first":  # needs the study's name and storage, known once the tuner is made
            tuner.sampler = impact_first_sampler(tuner.storage, tuner.kernel, tuner.study, args.seed)
        study = tuner.run()
        if args.confirm:
            tuner.confirm(args.confirm)
        print()
        print(build_report(study).text())
        return 0
    if args.command == "characterize":
        from iobo.integrations.darshan import characterize, format_characterization

        found = characterize(args.log)
        print(json.dumps(found.as_dict(), indent=2) if args.json else format_characterization(found))
        return 0
    if args.command == "dashboard":
        from iobo.integrations.dashboard import serve

        serve(args.storage_url, host=args.host, port=args.port)
        return 0

    study = _load_study(args.storage, args.study)
    if args.command == "confirm":
        from iobo.report import build_report

        _tuner_for(study, args.storage, args.workdir, args.mpiexec).confirm(args.repeats)
        print(build_report(study).text())
    elif args.command == "best":
        best, config = _best_config(study)
        print(f"best: {best.value:,.0f} MB/s (trial {best.number} of study {study.study_name!r})")
        print(config.describe())
    elif args.command == "export":
        _, config = _best_config(study)
        text = config.export(args.format, args.hints_path)
        if args.output:
            Path(args.output).write_text(text)
            print(f"wrote {args.format} to {args.output}", file=sys.stderr)
        else:
            sys.stdout.write(text)
    elif args.command == "importance":
        from iobo.importance import rank_parameters, ranking_text, save_ranking

        ranking = rank_parameters(study, args.seed)
        print(ranking_text(ranking))
        if ranking:
            save_ranking(study, ranking)
    elif args.command == "report":
        from iobo.integrations.dashboard import annotate
        from iobo.report import build_report, write_report

        print(build_report(study).text())
        annotate(study)
        if args.out:
            for path in write_report(study, args.out):
                print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
