"""Parsl site configuration: a Slurm cluster (a template; edit the marked lines).

``iobo tune vpic --ranks 256 --in-flight 4 --parsl-config workflows/site_slurm.py
--storage postgresql://user@db-host/iobo --workdir /lustre/scratch/$USER/iobo``

How the pieces fit:
- One Slurm job (a "block") holds NODES_PER_TRIAL x TRIALS_IN_FLIGHT nodes.
  Parsl's HighThroughputExecutor starts one manager on the lead node with
  TRIALS_IN_FLIGHT workers; each worker runs one trial.
- A trial's kernel is launched with ``srun`` inside the allocation, via
  ``iobo.launch.MpiexecLauncher("srun", ("--nodes=4", "--ntasks-per-node=64"))``:
  Slurm places each run within the allocation.
  To have Parsl hand each trial its own nodes instead, use Parsl's MPI mode:
  ``workflows/site_slurm_mpi.py`` (an ``MPIExecutor``) with
  ``ParslMPIPrefixLauncher(nodes=4)``, which submits every trial with a
  ``parsl_resource_specification`` and starts its kernel with the
  ``$PARSL_MPI_PREFIX`` Parsl composes (see ``workflows/tune_parsl_mpi.py``).
- The workdir must be on the file system you tune for (your Lustre scratch);
  striping hints only take effect on Lustre.
- Many tuners or workers writing one study: use PostgreSQL
  (``postgresql://...``, pip install psycopg2-binary) or Optuna's journal file
  on a shared file system (``--storage journal:///abs/path/study.log``; see
  ``iobo.storage``); SQLite is for one tuner process on one node.
"""

from parsl.config import Config
from parsl.executors import HighThroughputExecutor
from parsl.launchers import SimpleLauncher
from parsl.providers import SlurmProvider

NODES_PER_TRIAL = 4  # EDIT: nodes each kernel run spans
TRIALS_IN_FLIGHT = 4  # EDIT: trials running at once (iobo tune --in-flight)

config = Config(
    executors=[
        HighThroughputExecutor(
            label="iobo_slurm",
            max_workers_per_node=TRIALS_IN_FLIGHT,
            cpu_affinity="none",
            provider=SlurmProvider(
                partition="regular",  # EDIT: your partition
                account="myproject",  # EDIT: your allocation
                nodes_per_block=NODES_PER_TRIAL * TRIALS_IN_FLIGHT,
                init_blocks=1,
                max_blocks=1,
                walltime="02:00:00",
                # the manager runs once, on the lead node; srun inside each trial spreads the ranks
                launcher=SimpleLauncher(),
                worker_init="module load cray-hdf5-parallel; source /path/to/iobo/.venv/bin/activate",  # EDIT
                scheduler_options="#SBATCH --constraint=cpu",  # EDIT or remove
            ),
        )
    ],
    run_dir="runinfo",
    strategy="none",
)
