"""``iobo best``: the recommended configuration of a study (the minimal one when made) and the best run."""

from __future__ import annotations

from iobo.cli import common
from iobo.measure import format_mb_per_s
from iobo.space import format_value


def add_parser(sub) -> None:
    p = sub.add_parser("best", help="print the recommended configuration and the best bandwidth")
    common.add_storage_args(p)
    p.add_argument("--full", action="store_true", help="the best trial's whole configuration, not the minimal one")


def run(args) -> int:
    study = common.load_study(args.storage, args.study)
    best, config, how = common.chosen_config(study, args.full)
    print(f"best: {format_mb_per_s(best.value)} MB/s (trial {best.number} of study {study.study_name!r})")
    print(f"configuration: {how}")
    changed = config.changed()
    print("changed from the system default: "
          + (", ".join(f"{n}={format_value(v, config.space[n].unit)}" for n, v in changed.items())
             or "none (keep the system default)"))
    print("every value:")
    print(config.describe())
    return 0
