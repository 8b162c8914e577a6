"""Parsl site configuration: a Slurm cluster with Parsl's MPI mode (a template; edit the marked lines).

    .venv/bin/python workflows/tune_parsl_mpi.py --site workflows/site_slurm_mpi.py --nodes 4 --ranks 256 \\
        --in-flight 4 --storage postgresql://user@db-host/iobo --workdir /lustre/scratch/$USER/iobo

How the pieces fit:
- One Slurm job (a "block") holds NODES_PER_TRIAL x TRIALS_IN_FLIGHT nodes.
  ``MPIExecutor`` (Parsl's HighThroughputExecutor with ``enable_mpi_mode``)
  starts one worker pool on the lead node (``SimpleLauncher``) with
  TRIALS_IN_FLIGHT workers and hands out the job's nodes, listed in
  ``$SLURM_NODELIST``, to tasks as they ask for them.
- Each trial is submitted with ``parsl_resource_specification={"num_nodes":
  N, "ranks_per_node": P, "num_ranks": R}`` (``ParslMPIPrefixLauncher(nodes=N)``
  computes it from the ranks) and its kernel starts with
  ``$PARSL_MPI_PREFIX``, here ``srun --ntasks R --ntasks-per-node P
  --nodelist ... --nodes N``.
- The workdir must be on the file system you tune for (Lustre scratch).
- The study: PostgreSQL, or ``journal:///shared/path/study.log`` (an Optuna
  journal file on a file system the tuner's node mounts); SQLite is for one
  tuner process on one node (see ``iobo.storage``).
"""

from parsl.config import Config
from parsl.executors import MPIExecutor
from parsl.launchers import SimpleLauncher
from parsl.providers import SlurmProvider

NODES_PER_TRIAL = 4  # EDIT: nodes each kernel run spans (tune_parsl_mpi.py --nodes)
TRIALS_IN_FLIGHT = 4  # EDIT: trials running at once (tune_parsl_mpi.py --in-flight)

config = Config(
    executors=[
        MPIExecutor(
            label="iobo_slurm_mpi",
            max_workers_per_block=TRIALS_IN_FLIGHT,
            mpi_launcher="srun",
            provider=SlurmProvider(
                partition="regular",  # EDIT: your partition
                account="myproject",  # EDIT: your allocation
                nodes_per_block=NODES_PER_TRIAL * TRIALS_IN_FLIGHT,
                init_blocks=1,
                max_blocks=1,
                walltime="02:00:00",
                launcher=SimpleLauncher(),  # MPI mode needs it: one worker pool, on the lead node
                worker_init="module load cray-hdf5-parallel; source /path/to/iobo/.venv/bin/activate",  # EDIT
                scheduler_options="#SBATCH --constraint=cpu",  # EDIT or remove
            ),
        )
    ],
    run_dir="runinfo",
    strategy="none",
)
