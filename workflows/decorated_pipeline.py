"""A simulation-style Parsl pipeline whose HDF5 output task is tuned by ``@iobo.tune``.

    # tuning: every output call is a trial (the study starts with the system default)
    .venv/bin/python workflows/decorated_pipeline.py --workdir /dev/shm/iobo-decorated --steps 6
    # production: the same pipeline writes every step with the study's best configuration
    IOBO_MODE=production .venv/bin/python workflows/decorated_pipeline.py --workdir /dev/shm/iobo-decorated --steps 6

``simulate`` tasks compute a ``--grid`` x ``--grid`` float64 field per
timestep; ``write_field`` (a ``python_app`` under ``@iobo.tune``) writes each
one to its own HDF5 file through ``iobo.hdf5`` (file access settings and
chunked or contiguous layout; one process per file, so no MPI-IO) and
reports the bytes and seconds of its own open + write + close; ``summarize``
depends on every output, as a pipeline's next stage would. Only the output
task is tuned; a failed output is a FAIL trial and the other steps go on.

The study (``field-output`` in ``WORKDIR/iobo.db`` unless ``--storage``)
accumulates over runs: ``iobo report --storage URL --study field-output``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import parsl
from parsl import python_app

import iobo
from iobo.runners.parsl import local_config
from iobo.space import Workload, io_stack_space

HDF5_FILE_KNOBS = ["alignment_threshold", "alignment_interval", "meta_block_size", "sieve_buf_size",
                   "mdc_initial_size", "layout", "chunk_size"]
"""What applies to one process writing its own file (MPI-IO and striping hints do not)."""


@python_app
def simulate(step: int, grid: int):
    """A toy diffusion step: a grid x grid float64 field."""
    import numpy as np

    x = np.linspace(0, 1, grid)
    return np.exp(-((x[:, None] - 0.5) ** 2 + (x[None, :] - 0.5) ** 2) * (10 + step)) * np.cos(step * x)[None, :]


@python_app
def write_field(field, path: str, io_config=None):
    """Write ``field`` to ``path`` with ``io_config``; the bytes and seconds of open + write + close."""
    import time

    import iobo.hdf5

    start = time.perf_counter()
    with iobo.hdf5.File(path, "w", io_config) as f:
        f.create_dataset("field", data=field, **iobo.hdf5.dataset_options(io_config, field.shape, field.dtype))
    return {"bytes": field.nbytes, "seconds": time.perf_counter() - start}


@python_app
def summarize(*reports):
    """The pipeline's next stage: total bytes written."""
    return sum(report["bytes"] for report in reports)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", required=True, help="directory on the storage to tune (outputs, study)")
    parser.add_argument("--storage", help="Optuna storage URL (default: sqlite:///WORKDIR/iobo.db)")
    parser.add_argument("--steps", type=int, default=6, help="timesteps simulated and written")
    parser.add_argument("--grid", type=int, default=512, help="grid points per side (8 bytes each)")
    args = parser.parse_args(argv)
    workdir = Path(args.workdir).resolve()
    (workdir / "output").mkdir(parents=True, exist_ok=True)

    tuned_write = iobo.tune(  # mode: $IOBO_MODE (tune unless set to production)
        study="field-output", storage=args.storage or f"sqlite:///{workdir / 'iobo.db'}",
        space=io_stack_space().select(HDF5_FILE_KNOBS), workload=Workload(dataset_bytes=args.grid ** 2 * 8),
    )(write_field)
    dfk = parsl.load(local_config(max_workers=2, run_dir=str(workdir / "runinfo")))
    try:
        print(f"mode: {tuned_write.mode}")
        outputs = [tuned_write(simulate(step, args.grid), str(workdir / "output" / f"field{step}.h5"))
                   for step in range(args.steps)]
        print(f"pipeline wrote {summarize(*outputs).result():,} bytes in {args.steps} files")
    finally:
        dfk.cleanup()
        parsl.clear()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
