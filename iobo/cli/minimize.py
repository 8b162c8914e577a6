"""``iobo minimize``: which of the best configuration's changes matter (interleaved with/without tests)."""

from __future__ import annotations

from iobo.cli import common


def add_parser(sub) -> None:
    p = sub.add_parser("minimize", help="test which of the best configuration's changes matter; keep only those")
    common.add_storage_args(p)
    p.add_argument("--pairs", type=common.positive_int, default=3,
                   help="interleaved (with, without) runs per test (>= 2; default: %(default)s)")
    common.add_run_args(p, workdir=None)


def run(args) -> int:
    study = common.load_study(args.storage, args.study)
    args.workdir = common.run_workdir(study, args.workdir)
    with common.workdir_left_only_if_used(args.workdir):
        common.tuner_for(study, args).minimize(args.pairs)
    return 0
