"""A simulation-style Parsl pipeline that tunes only its HDF5 output step, with iobo as a library.

    .venv/bin/python workflows/library_pipeline.py --workdir /dev/shm/iobo-library --trials 5

The pipeline loads its own Parsl configuration (two local workers here; your
site's on a cluster) and keeps it: ``iobo.Tuner`` submits its trials through
that DataFlowKernel, next to the pipeline's own tasks, never loads a second
one, and leaves it loaded.

1. ``simulate`` tasks (the compute) advance ``--particles`` particles, one
   task per timestep, running while the output is tuned.
2. The Tuner tunes the output on the VPIC-IO kernel writing what one output
   step writes (``--particles`` x 8 float32 variables, one shared file
   through MPI-IO from one rank), ``--in-flight`` trials at a time, and
   returns the best ``IOConfig``.
3. ``write_step`` (the output step) writes each timestep the same way (HDF5's
   mpio driver on one rank) with that configuration, applied by
   ``iobo.hdf5``: file access settings, MPI-IO hints, layout, transfer mode.

The study stays in ``--storage``: ``iobo report --storage URL --study
pipeline-output``. Run it again to resume tuning up to ``--trials``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import parsl
from parsl import python_app

import iobo
from iobo.runners.parsl import local_config


@python_app
def simulate(step: int, particles: int):
    """One timestep of a toy particle push: 8 float32 variables per particle."""
    import numpy as np

    rng = np.random.default_rng(step)
    position = rng.random((3, particles), dtype=np.float32)
    momentum = rng.standard_normal((3, particles), dtype=np.float32)
    ids = np.tile(np.arange(particles, dtype=np.float32), (2, 1))
    return np.concatenate([position + 0.01 * step * momentum, ids, momentum])


@python_app
def write_step(field, path: str, io_config):
    """Write one timestep as VPIC-IO does (a group of 1-D datasets) with ``io_config``; bytes written."""
    from mpi4py import MPI

    import iobo.hdf5
    from iobo.kernels import vpic

    with iobo.hdf5.File(path, "w", io_config, comm=MPI.COMM_SELF) as f:
        group = f.create_group("Timestep_0")
        for name, values in zip(vpic.VARIABLES, field):
            dataset = group.create_dataset(name, shape=values.shape, dtype=values.dtype,
                                           **iobo.hdf5.dataset_options(io_config, values.shape, values.dtype))
            with iobo.hdf5.transfer(dataset, io_config):
                dataset[:] = values
    return field.nbytes


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", required=True, help="directory on the storage to tune (trials and outputs)")
    parser.add_argument("--storage", help="Optuna storage URL (default: sqlite:///WORKDIR/iobo.db)")
    parser.add_argument("--steps", type=int, default=4, help="timesteps simulated and written")
    parser.add_argument("--particles", type=int, default=65536, help="particles (8 float32 each)")
    parser.add_argument("--trials", type=int, default=5, help="trials the study should hold (>= 4)")
    parser.add_argument("--in-flight", type=int, default=1, help="trials running at once")
    args = parser.parse_args(argv)
    workdir = Path(args.workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)  # the tuner wants its workdir's parent to exist
    storage = args.storage or f"sqlite:///{workdir / 'iobo.db'}"

    tuner = iobo.Tuner(  # checks every setting before anything runs
        kernel="vpic", ranks=1, trials=args.trials, storage=storage, study="pipeline-output",
        workdir=str(workdir / "trials"), kernel_options={"particles": args.particles, "steps": 1},
        max_in_flight=args.in_flight,
    )
    dfk = parsl.load(local_config(max_workers=2, run_dir=str(workdir / "runinfo")))  # the pipeline's own Parsl
    try:
        fields = [simulate(step, args.particles) for step in range(args.steps)]  # compute, in flight
        tuner.run()  # trials go through the same DataFlowKernel
        best = tuner.best_config()
        print(f"best configuration:\n{best.describe()}")
        out = workdir / "output"
        out.mkdir(exist_ok=True)
        written = [write_step(field, str(out / f"step{step}.h5"), best) for step, field in enumerate(fields)]
        for step, future in enumerate(written):
            print(f"wrote {out / f'step{step}.h5'}: {future.result()} bytes")
        print(f"pipeline's DataFlowKernel still loaded: {parsl.dfk() is dfk}")
        return 0 if parsl.dfk() is dfk else 1
    finally:
        dfk.cleanup()
        parsl.clear()


if __name__ == "__main__":
    raise SystemExit(main())
