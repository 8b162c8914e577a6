"""``iobo tune KERNEL``: tune a kernel's I/O configuration (a study of default runs, then a search)."""

from __future__ import annotations

import sys

from iobo import trials
from iobo.cli import common


def add_parser(sub) -> None:
    from iobo.pruning import PRUNERS
    from iobo.samplers.registry import SAMPLERS
    from iobo.stopping import RULES

    p = sub.add_parser("tune", help="tune a kernel's I/O configuration")
    p.add_argument("kernel", help="kernel name (see `iobo kernels`)")
    p.add_argument("--ranks", type=int, default=2, help="MPI ranks per trial (default: %(default)s)")
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
                        "(expected-gain), or after no 5%% gain in 5 trials (no-gain)")
    p.add_argument("--confirm", type=common.non_negative_int, default=0, metavar="N",
                   help="afterwards, re-measure default and best N times each, interleaved")


def run(args) -> int:
    from iobo.progress import console_watchers
    from iobo.report import build_report
    from iobo.samplers.registry import make_sampler
    from iobo.stopping import RULES
    from iobo.tuner import Tuner

    tuner = Tuner(
        kernel=args.kernel, ranks=args.ranks, trials=args.trials, storage=args.storage, study=args.study,
        workdir=args.workdir, kernel_options=dict(args.option), max_in_flight=args.in_flight,
        default_repeats=args.default_repeats, timeout_s=args.timeout, seed=args.seed,
        launcher=common.launcher(args.mpiexec), runner=common.runner(args, args.in_flight),
        pruner=args.prune, stop_rule=RULES[args.stop_rule]() if args.stop_rule else None,
        **console_watchers(),
    )
    # impact-first reads earlier studies of the kernel: it needs the study's name, known once the tuner is made
    tuner.sampler = make_sampler(args.sampler, args.seed, storage=tuner.storage, kernel=tuner.kernel,
                                 study=tuner.study)
    study = tuner.run()
    if not trials.tuning_trials(study):
        failed = [t for t in study.get_trials(deepcopy=False) if t.state == trials.state("FAIL")]
        reason = failed[-1].user_attrs.get("fail_reason", "no reason recorded") if failed else "none ran"
        print(f"iobo: every trial failed ({len(failed)} FAIL), nothing measured; last reason: "
              f"{reason.splitlines()[0] if reason else ''}", file=sys.stderr)
        return 1
    if args.confirm:
        tuner.confirm(args.confirm)
    print()
    print(build_report(study).text())
    return 0
