"""``iobo confirm``: re-measure the system default and the recommended configuration, interleaved."""

from __future__ import annotations

from iobo.cli import common
from iobo.measure import INTERVAL_MIN_RUNS


def add_parser(sub) -> None:
    p = sub.add_parser("confirm", help="re-measure default and the recommended configuration, interleaved")
    common.add_storage_args(p)
    p.add_argument("--repeats", type=common.positive_int, default=INTERVAL_MIN_RUNS,
                   help="runs of each at least; up to 4x as many when the default runs' noise says this many "
                        "cannot resolve the gain the walk-back measured, or while the interval is undecided "
                        "(default: %(default)s)")
    p.add_argument("--no-minimize", action="store_true",
                   help="confirm the best trial's whole configuration, without testing which changes matter")
    common.add_run_args(p, workdir=None)


def run(args) -> int:
    from iobo.report import build_report

    study = common.load_study(args.storage, args.study)
    args.workdir = common.run_workdir(study, args.workdir)
    with common.workdir_left_only_if_used(args.workdir):
        common.tuner_for(study, args).confirm(args.repeats, minimize=not args.no_minimize)
    print(build_report(study).text())
    return 0
