"""Tune VPIC-IO through Parsl's MPI mode: each trial asks Parsl for nodes and starts with $PARSL_MPI_PREFIX.

    # on this machine, a stand-in whose nodes are localhost; the study in an Optuna journal file:
    .venv/bin/python workflows/tune_parsl_mpi.py --site workflows/site_local_mpi.py --ranks 2 --trials 5 \\
        --storage journal:///dev/shm/iobo-mpi/study.log --workdir /dev/shm/iobo-mpi
    # on a Slurm cluster (edit the site file first):
    .venv/bin/python workflows/tune_parsl_mpi.py --site workflows/site_slurm_mpi.py --nodes 4 --ranks 256 \\
        --in-flight 4 --storage postgresql://user@db-host/iobo --workdir /lustre/scratch/$USER/iobo

The site file defines ``config``, a Parsl ``Config`` whose executor runs in
MPI mode (``MPIExecutor``). The Tuner submits each trial with
``parsl_resource_specification`` from ``ParslMPIPrefixLauncher(nodes=N)``;
the kernel's command line is Parsl's prefix (recorded in each trial's
``command`` attr). Prints every trial, then the best configuration.
"""

from __future__ import annotations

import argparse

import iobo
from iobo.runners.parsl import load_config_file
from iobo.launch import ParslMPIPrefixLauncher


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", required=True, help="Parsl site file defining `config` (MPI mode)")
    parser.add_argument("--workdir", required=True, help="directory on the file system to tune")
    parser.add_argument("--storage", default="sqlite:///iobo.db",
                        help="Optuna storage URL: sqlite:///..., postgresql://..., journal:///abs/path.log")
    parser.add_argument("--study", default="vpic-parsl-mpi")
    parser.add_argument("--nodes", type=int, default=1, help="nodes per trial")
    parser.add_argument("--ranks", type=int, default=2, help="MPI ranks per trial")
    parser.add_argument("--trials", type=int, default=5, help="trials the study should hold (>= 4)")
    parser.add_argument("--in-flight", type=int, default=1, help="trials running at once")
    parser.add_argument("--particles", type=int, default=65536, help="VPIC particles per rank")
    args = parser.parse_args(argv)

    tuner = iobo.Tuner(
        kernel="vpic", ranks=args.ranks, trials=args.trials, storage=args.storage, study=args.study,
        workdir=args.workdir, kernel_options={"particles": args.particles}, max_in_flight=args.in_flight,
        launcher=ParslMPIPrefixLauncher(nodes=args.nodes), parsl_config=load_config_file(args.site),
    )
    study = tuner.run()
    print(f"command of the last trial: {study.trials[-1].user_attrs.get('command')}")
    print(f"best configuration:\n{tuner.best_config().describe()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
