"""``iobo best``: the best configuration of a study and its bandwidth."""

from __future__ import annotations

from iobo.cli import common


def add_parser(sub) -> None:
    p = sub.add_parser("best", help="print the best configuration and its bandwidth")
    common.add_storage_args(p)


def run(args) -> int:
    study = common.load_study(args.storage, args.study)
    best, config = common.best_config(study)
    print(f"best: {best.value:,.0f} MB/s (trial {best.number} of study {study.study_name!r})")
    print(config.describe())
    return 0
