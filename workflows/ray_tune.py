"""Tune VPIC-IO with Ray Tune instead of Parsl: OptunaSearch on iobo's sampler, ASHA early stopping.

    .venv/bin/python workflows/ray_tune.py --workdir /dev/shm/iobo-ray --cpus 2 --ranks 1 --trials 8 --steps 4

Starts a local Ray with ``--cpus`` CPUs (no dashboard), runs the trials of an
``iobo.Tuner`` through ``ray.tune.Tuner`` (``iobo.integrations.ray.run``):
each trial reserves ``--ranks`` CPUs, at most ``--in-flight`` run at once,
and reports each kernel step's bandwidth, so ASHA (rungs at 2, 4... steps)
stops the slow ones early; they are PRUNED in the Optuna study, the others
COMPLETE with their whole-run bandwidth. The study is in ``--storage``
(default: ``sqlite:///WORKDIR/iobo.db``), the same storage the Parsl tuner
and ``iobo report`` use. Prints each trial, then the best configuration.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import ray
from ray.tune.schedulers import ASHAScheduler

import iobo
from iobo.integrations.ray import run


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", required=True, help="directory on the file system to tune")
    parser.add_argument("--storage", help="Optuna storage URL (default: sqlite:///WORKDIR/iobo.db)")
    parser.add_argument("--study", default="vpic-ray")
    parser.add_argument("--cpus", type=int, default=2, help="CPUs of the local Ray")
    parser.add_argument("--ranks", type=int, default=1, help="MPI ranks (and Ray CPUs) per trial")
    parser.add_argument("--trials", type=int, default=8, help="trials the study should hold (>= 4)")
    parser.add_argument("--in-flight", type=int, default=2, help="trials running at once")
    parser.add_argument("--steps", type=int, default=4, help="VPIC timesteps per trial (ASHA's time unit)")
    parser.add_argument("--particles", type=int, default=65536, help="VPIC particles per rank")
    args = parser.parse_args(argv)
    workdir = Path(args.workdir).resolve()

    tuner = iobo.Tuner(
        kernel="vpic", ranks=args.ranks, trials=args.trials, study=args.study, workdir=str(workdir),
        storage=args.storage or f"sqlite:///{workdir / 'iobo.db'}", max_in_flight=args.in_flight,
        kernel_options={"particles": args.particles, "steps": args.steps},
    )
    ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
    try:
        study = run(tuner, scheduler=ASHAScheduler(max_t=args.steps + 1, grace_period=2, reduction_factor=2))
    finally:
        ray.shutdown()
    for trial in study.trials:  # a PRUNED trial's value is its last step's (Optuna's rule): not shown
        value = f"{trial.value:9,.0f} MB/s" if trial.state.name == "COMPLETE" else ""
        print(f"trial {trial.number:3d} [{trial.user_attrs.get('role')}] {trial.state.name:8s} {value}")
    print(f"best configuration:\n{tuner.best_config().describe()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
