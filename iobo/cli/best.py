"""``iobo best``: the study's recommendation (the minimal configuration when made; the system default when its
confirmation showed no gain), its measured figure, then every value."""

from __future__ import annotations

from iobo.cli import common
from iobo.measure import format_mb_per_s
from iobo.space import format_value


def add_parser(sub) -> None:
    p = sub.add_parser("best", help="print the recommended configuration and its measured bandwidth")
    common.add_storage_args(p)
    p.add_argument("--full", action="store_true",
                   help="the best trial's whole configuration (without knobs that did not apply), not the minimal one")


def run(args) -> int:
    from iobo import trials
    from iobo.minimize import runs_of

    study = common.load_study(args.storage, args.study)
    best, chosen, config = common.chosen_config(study, args.full)
    changed = config.changed()
    shown = ", ".join(f"{n}={format_value(v, config.space[n].unit)}" for n, v in changed.items())
    print(f"recommended: {chosen.how}" if chosen.rejected and not shown  # "keep the system default: the confirmation..."
          else f"recommended: {shown or 'keep the system default'} ({chosen.how})")
    confirmation = chosen.confirmation
    if confirmation is not None and not config.is_default():  # the figure of what is recommended, not of its rejection
        print(f"measured: {format_mb_per_s(confirmation.best.median)} MB/s against the default's "
              f"{format_mb_per_s(confirmation.default.median)} MB/s, {confirmation.describe()} (medians of "
              f"{confirmation.best.n} and {confirmation.default.n} interleaved runs, `iobo confirm`)")
    else:
        runs = runs_of(study, config.space, config.values)
        confirm = "" if config.is_default() else "; not confirmed: `iobo confirm`"
        print("measured: " + (f"{format_mb_per_s(runs.median)} MB/s, median of {runs.n} run(s) of this "
                              f"configuration{confirm}" if runs else f"never run as such{confirm}"))
    print(f"best single run: {format_mb_per_s(best.value)} MB/s (trial {best.number} of study "
          f"{study.study_name!r}; the luckiest of {len(trials.tuning_trials(study))} runs, not a figure to expect)")
    print("every value:")
    print(config.describe())
    return 0
